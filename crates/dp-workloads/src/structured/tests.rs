//! Structured operators against their densified counterparts, built from
//! the factors' explicit rows.

#![allow(clippy::unwrap_used)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

fn random_factor(rng: &mut ChaCha8Rng, n: usize) -> Factor {
    match rng.random_range(0..6) {
        0 => Factor::Identity(n),
        1 => Factor::Total(n),
        2 => Factor::Prefix(n),
        3 => Factor::AllRange(n),
        4 => {
            let ranges = (0..rng.random_range(1..4))
                .map(|_| {
                    let lo = rng.random_range(0..n) as i128;
                    (lo, rng.random_range(lo..n as i128))
                })
                .collect();
            Factor::ranges("x", n, ranges).unwrap()
        }
        _ => {
            let m = rng.random_range(1..4);
            Factor::matrix(
                "x",
                n,
                Mat::from_fn(m, n, |_, _| rng.random_range(-1.0..1.0)),
            )
            .unwrap()
        }
    }
}

fn random_workload(seed: u64) -> StructuredWorkload {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let d = rng.random_range(1..4);
    let pairs: Vec<(String, usize)> = (0..d)
        .map(|i| (format!("a{i}"), rng.random_range(1..5)))
        .collect();
    let p: Vec<(&str, usize)> = pairs.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    let domain = Domain::from_pairs(&p).unwrap();
    let shape = domain.shape();
    let mut groups = Vec::new();
    for g in 0..rng.random_range(1..4) {
        let weight = rng.random_range(0.1..3.0);
        let queries = if rng.random_bool(0.5) {
            Queries::Kron(shape.iter().map(|&n| random_factor(&mut rng, n)).collect())
        } else {
            let sets = (0..rng.random_range(1..3))
                .map(|_| AttrSet::from_bits(rng.random_range(0..(1u128 << d))))
                .collect();
            Queries::Marginals(sets)
        };
        groups.push(QueryGroup {
            label: format!("g{g}"),
            weight,
            queries,
        });
    }
    StructuredWorkload::new(domain, groups).unwrap()
}

fn rel(a: &Mat<f64>, b: &Mat<f64>) -> f64 {
    (a - b).norm_l2() / a.norm_l2().max(f64::MIN_POSITIVE)
}

fn rel_vec(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    let den: f64 = a.iter().map(|x| x * x).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

#[test]
fn gram_answer_and_gram_apply_match_dense() {
    for seed in 0..40 {
        let w = random_workload(seed);
        let dense = w.dense_matrix().unwrap();
        assert_eq!(dense.nrows() as f64, w.num_queries());
        let g_dense = dp_linalg::gram(dense.as_ref(), dp_linalg::Par::Seq);
        let g = w.dense_gram().unwrap();
        assert!(rel(&g_dense, &g) <= 1e-10, "seed {seed}");
        let n = dense.ncols();
        let mut rng = ChaCha8Rng::seed_from_u64(seed + 1000);
        let x: Vec<f64> = (0..n).map(|_| rng.random_range(-5.0..5.0)).collect();
        let xm = Mat::from_fn(n, 1, |i, _| x[i]);
        let wx = &dense * &xm;
        let want: Vec<f64> = (0..wx.nrows()).map(|i| wx[(i, 0)]).collect();
        assert!(
            rel_vec(&want, &w.answer(&x).unwrap()) <= 1e-10,
            "seed {seed}"
        );
        let gx = &g_dense * &xm;
        let want: Vec<f64> = (0..n).map(|i| gx[(i, 0)]).collect();
        assert!(
            rel_vec(&want, &w.gram_apply(&x).unwrap()) <= 1e-10,
            "seed {seed}"
        );
        // ‖W‖_F² from the dense rows.
        let frob = dp_linalg::frobenius_norm(dense.as_ref()).powi(2);
        let got = w.frobenius_squared().unwrap();
        assert!((got - frob).abs() <= 1e-10 * frob, "seed {seed}");
    }
}

#[test]
fn kron_matvec_matches_dense_product_with_rectangular_factors() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mats: Vec<Mat<f64>> = [(2, 3), (4, 2), (1, 5)]
        .iter()
        .map(|&(m, n)| Mat::from_fn(m, n, |_, _| rng.random_range(-1.0..1.0)))
        .collect();
    let x: Vec<f64> = (0..30).map(|_| rng.random_range(-1.0..1.0)).collect();
    let k = kron_all(&mats);
    let want: Vec<f64> = (0..k.nrows())
        .map(|i| (0..30).map(|j| k[(i, j)] * x[j]).sum())
        .collect();
    let refs: Vec<&Mat<f64>> = mats.iter().collect();
    assert!(rel_vec(&want, &kron_matvec(&refs, &x).unwrap()) <= 1e-12);
    assert!(kron_matvec(&refs, &x[..29]).is_err());
}

/// `(⊗ᵢ Mᵢ) x` entry by entry: each output cell is the sum over input
/// cells of the product of one entry per factor.
fn kron_matvec_brute(mats: &[Mat<f64>], x: &[f64]) -> Vec<f64> {
    let rows: Vec<usize> = mats.iter().map(|m| m.nrows()).collect();
    let cols: Vec<usize> = mats.iter().map(|m| m.ncols()).collect();
    let digits = |mut i: usize, sizes: &[usize]| {
        let mut d = vec![0; sizes.len()];
        for k in (0..sizes.len()).rev() {
            d[k] = i % sizes[k];
            i /= sizes[k];
        }
        d
    };
    (0..rows.iter().product::<usize>())
        .map(|i| {
            let r = digits(i, &rows);
            (0..x.len())
                .map(|j| {
                    let c = digits(j, &cols);
                    let entry: f64 = mats
                        .iter()
                        .enumerate()
                        .map(|(k, m)| m[(r[k], c[k])])
                        .product();
                    entry * x[j]
                })
                .sum()
        })
        .collect()
}

/// Every path of a mode product: dense factors on the last axis, on long
/// fibres and on short ones, small and mostly-zero factors, against the
/// entry-by-entry sum.
#[test]
fn kron_matvec_dense_and_sparse_modes_match_brute_force() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut random = |m: usize, n: usize, zeros: f64| {
        Mat::from_fn(m, n, |_, _| {
            if rng.random_range(0.0..1.0) < zeros {
                0.0
            } else {
                rng.random_range(-1.0..1.0)
            }
        })
    };
    let cases = [
        // dense long fibres, small sparse, dense 16-fibres, dense last axis
        vec![
            random(9, 10, 0.0),
            random(3, 2, 0.0),
            random(8, 9, 0.0),
            random(12, 16, 0.0),
        ],
        // dense on 4-value fibres (sparse loop), mostly zero, last axis small
        vec![
            random(9, 10, 0.0),
            random(11, 9, 0.9),
            random(8, 9, 0.1),
            random(2, 4, 0.0),
        ],
    ];
    for mats in &cases {
        let n: usize = mats.iter().map(|m| m.ncols()).product();
        let x: Vec<f64> = (0..n).map(|i| ((i * 37) % 23) as f64 - 11.0).collect();
        let refs: Vec<&Mat<f64>> = mats.iter().collect();
        let got = kron_matvec(&refs, &x).unwrap();
        assert!(rel_vec(&kron_matvec_brute(mats, &x), &got) <= 1e-12);
    }
}

#[test]
fn marginal_weights_recognize_identity_total_products() {
    let domain = Domain::from_pairs(&[("a", 2), ("b", 3)]).unwrap();
    let w = StructuredWorkload::new(
        domain.clone(),
        vec![
            QueryGroup {
                label: "k".into(),
                weight: 2.0,
                queries: Queries::Kron(vec![Factor::Identity(2), Factor::Total(3)]),
            },
            QueryGroup {
                label: "m".into(),
                weight: 1.0,
                queries: Queries::Marginals(vec![
                    AttrSet::from_bits(0b01),
                    AttrSet::from_bits(0b10),
                ]),
            },
        ],
    )
    .unwrap();
    assert_eq!(
        w.marginal_weights(),
        Some(vec![
            (AttrSet::from_bits(0b01), 5.0),
            (AttrSet::from_bits(0b10), 1.0)
        ])
    );
    let not = StructuredWorkload::new(
        domain,
        vec![QueryGroup {
            label: "k".into(),
            weight: 1.0,
            queries: Queries::Kron(vec![Factor::Prefix(2), Factor::Total(3)]),
        }],
    )
    .unwrap();
    assert_eq!(not.marginal_weights(), None);
}

#[test]
fn large_domains_refuse_to_densify_with_the_size() {
    let pairs: Vec<(String, usize)> = (0..40).map(|i| (format!("q{i}"), 2)).collect();
    let p: Vec<(&str, usize)> = pairs.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    let domain = Domain::from_pairs(&p).unwrap();
    let w = StructuredWorkload::new(
        domain,
        vec![QueryGroup {
            label: "m".into(),
            weight: 1.0,
            queries: Queries::Marginals(vec![AttrSet::from_bits(0b11)]),
        }],
    )
    .unwrap();
    let e = w.dense_gram().unwrap_err();
    assert_eq!(e.to_string(), "1.1e12 cells: too large to densify");
    assert!(w.gram_apply(&[1.0]).is_err());
    assert_eq!(w.num_queries(), 4.0);
}

#[test]
fn validation_errors() {
    let domain = Domain::from_pairs(&[("a", 2), ("b", 3)]).unwrap();
    let kron = |f: Vec<Factor>, weight: f64| {
        StructuredWorkload::new(
            domain.clone(),
            vec![QueryGroup {
                label: "k".into(),
                weight,
                queries: Queries::Kron(f),
            }],
        )
    };
    assert!(matches!(
        kron(vec![Factor::Identity(2), Factor::Identity(4)], 1.0),
        Err(StructuredError::SizeMismatch { .. })
    ));
    assert!(matches!(
        kron(vec![Factor::Identity(2), Factor::Identity(3)], f64::NAN),
        Err(StructuredError::BadWeight(_))
    ));
    assert!(matches!(
        kron(vec![Factor::Identity(2), Factor::Identity(3)], -1.0),
        Err(StructuredError::BadWeight(_))
    ));
    assert!(kron(vec![Factor::Identity(2)], 1.0).is_err());
    assert!(matches!(
        Factor::ranges("a", 3, vec![(2, 3)]),
        Err(StructuredError::BadRange { .. })
    ));
    assert!(Factor::ranges("a", 3, vec![(2, 1)]).is_err());
    assert!(Factor::ranges("a", 3, vec![(-1, 1)]).is_err());
    assert!(Factor::matrix("a", 3, Mat::zeros(2, 3)).is_err());
    assert!(Factor::matrix("a", 3, Mat::from_fn(1, 3, |_, _| f64::NAN)).is_err());
}

#[test]
fn written_specs_load_back_to_the_same_rows() {
    let dir = std::env::temp_dir().join(format!("dpmm-write-spec-{}", std::process::id()));
    for seed in 0..4 {
        let w = random_workload(seed);
        let path = write::write_spec(&w, &dir, &format!("w{seed}")).unwrap();
        let back = crate::spec::load_spec(&path).unwrap();
        assert_eq!(back.domain(), w.domain());
        let (a, b) = (w.dense_matrix().unwrap(), back.dense_matrix().unwrap());
        assert_eq!((a.nrows(), a.ncols()), (b.nrows(), b.ncols()));
        // Weights go through JSON text: serde_json's default float parser
        // may be one ulp off.
        assert!(rel(&a, &b) <= 1e-15, "seed {seed}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sf1_persons_has_the_published_table_sizes() {
    let w = sf1::sf1_persons().unwrap();
    assert_eq!(w.domain().cells_u128(), Some(500_480));
    // Data lines per published table (SF1 data dictionary): P1 1, P3 8,
    // P4 3, P5 17, P12 49 (9 race/ethnicity iterations A–I), PCT12 209
    // (15 iterations A–O); P8–P11 add the 63 race combinations.
    let published = [
        ("P1", 1.0),
        ("P3", 8.0),
        ("P4", 3.0),
        ("P5", 17.0),
        ("P12", 49.0),
        ("P12A-I", 9.0 * 49.0),
        ("PCT12", 209.0),
        ("PCT12A-O", 15.0 * 209.0),
    ];
    for (table, lines) in published {
        let rows: f64 = w
            .groups()
            .iter()
            .filter(|g| g.label.split('#').next() == Some(table))
            .map(|g| w.group_queries(g))
            .sum();
        assert_eq!(rows, lines, "{table}");
    }
    // Every race code with two or more bits is in exactly one of P3's
    // seven categories; code 0 (no race reported) in none.
    let tables = sf1::sf1_persons_tables().unwrap();
    let race7 = tables[1].1[0][2].explicit().unwrap();
    for c in 0..64 {
        let hits: f64 = (0..7).map(|r| race7[(r, c)]).sum();
        assert_eq!(hits, f64::from(u8::from(c != 0)), "code {c}");
    }
    // The identity strategy's l1_obj is ‖W‖_F² = Σ w² Π tr(Gᵢ); HDMM's
    // SF1 Persons gives 1.90e7 (issue 18), which counts code 0 as "two or
    // more races": within 1%.
    let frob = w.frobenius_squared().unwrap();
    assert!((frob / 1.90e7 - 1.0).abs() < 0.01, "{frob}");
}
