#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test

use super::*;
use crate::experiments::SeededSession;
use crate::kernel::{MeasuredStrategy, MeasurementNoise};
use crate::{sensitivity_l1, sensitivity_l2};
use dp_linalg::helmert;

/// `(attribute position, factor)` pairs.
type Factors = Vec<(usize, Mat<f64>)>;

/// Terms from `(weight, factors)` pairs.
fn terms(v: Vec<(f64, Factors)>) -> Vec<KronTerm> {
    v.into_iter().map(|(w, f)| KronTerm::new(w, f)).collect()
}

fn kron(a: &Mat<f64>, b: &Mat<f64>) -> Mat<f64> {
    Mat::from_fn(a.nrows() * b.nrows(), a.ncols() * b.ncols(), |i, j| {
        a[(i / b.nrows(), j / b.ncols())] * b[(i % b.nrows(), j % b.ncols())]
    })
}

/// The densified measured strategy, ones rows written out (independent
/// of the kernel's tables and mode products).
fn densify(m: &MeasuredStrategy, shape: &[usize]) -> Mat<f64> {
    let blocks: Vec<Mat<f64>> = m
        .terms
        .iter()
        .map(|t| {
            let mut out = Mat::from_fn(1, 1, |_, _| 1.0);
            if t.support.is_empty() {
                out = t.factors[0].clone();
            }
            for (i, &n) in shape.iter().enumerate() {
                let f = match t.support.iter().position(|&p| p == i) {
                    Some(k) => t.factors[k].clone(),
                    None => Mat::from_fn(1, n, |_, _| 1.0),
                };
                out = kron(&out, &f);
            }
            out
        })
        .collect();
    let n: usize = shape.iter().product();
    dp_linalg::stack_rows(&blocks, n).unwrap()
}

fn sample(p: usize, n: usize, seed: usize) -> Mat<f64> {
    Mat::from_fn(p, n, |i, j| {
        (((i * 7 + j * 13 + seed) % 11) as f64 - 5.0) / 3.0
    })
}

/// Full table and counts on a [2, 3, 4] domain.
fn counts() -> Vec<u64> {
    (0..24).map(|i| (i * 37 % 17 + 3) as u64).collect()
}

/// Marginal of the full [2,3,4] table on `attrs`, by brute force.
fn brute_marginal(full: &[u64], attrs: &[usize]) -> Vec<u64> {
    let shape = [2usize, 3, 4];
    let cells: usize = attrs.iter().map(|&a| shape[a]).product();
    let mut out = vec![0u64; cells];
    for (j, &c) in full.iter().enumerate() {
        let idx = [j / 12, (j / 4) % 3, j % 4];
        let mut cell = 0;
        for &a in attrs {
            cell = cell * shape[a] + idx[a];
        }
        out[cell] += c;
    }
    out
}

fn residual_strategy() -> MarginalStrategy {
    MarginalStrategy::new(
        vec![2, 3, 4],
        &terms(vec![
            (0.7, vec![]),
            (1.3, vec![(0, helmert(2)), (2, helmert(4))]),
            (0.4, vec![(1, helmert(3))]),
            (0.9, vec![(0, helmert(2)), (1, helmert(3)), (2, helmert(4))]),
        ]),
    )
    .unwrap()
}

#[test]
fn sensitivity_is_that_of_the_densified_union() {
    let mixed = MarginalStrategy::new(
        vec![2, 3, 4],
        &terms(vec![
            (1.5, vec![(1, sample(2, 3, 1))]),
            (-0.5, vec![(0, sample(3, 2, 2)), (2, sample(2, 4, 3))]),
            (2.0, vec![]),
        ]),
    )
    .unwrap();
    let data = PrivateMarginals::new(vec![2, 3, 4], vec![(vec![0, 1, 2], counts())]).unwrap();
    let mut session = SeededSession::unlimited(5);
    for (strategy, exact) in [(residual_strategy(), true), (mixed, false)] {
        let dense = densify(strategy.measured_strategy(), &[2, 3, 4]);
        assert_eq!(dense.nrows(), strategy.nrows());
        for cost in [Cost::Epsilon(0.5), Cost::Rho(0.1)] {
            let m = session.measure_marginals(&strategy, &data, cost).unwrap();
            let truth = match cost {
                Cost::Epsilon(_) => sensitivity_l1(dense.as_ref()).unwrap(),
                Cost::Rho(_) => sensitivity_l2(dense.as_ref()).unwrap(),
            };
            // Never below the largest column norm of the measured matrix.
            assert!(m.sensitivity >= truth * (1.0 - 1e-12), "{cost:?}");
            // Residual terms: every column has the same norm in each term,
            // so the union bound is attained under L2.
            if exact && matches!(cost, Cost::Rho(_)) {
                assert!((m.sensitivity - truth).abs() <= 1e-12 * truth);
            }
            // The stated union bound Σ_t |w_t| Π Δ(factor), from the
            // measured factors.
            let union = |norm: &dyn Fn(&Mat<f64>) -> f64| -> f64 {
                let terms = m.strategy.terms.iter();
                terms
                    .map(|t| t.factors.iter().map(norm).product::<f64>())
                    .sum()
            };
            let bound = match cost {
                Cost::Epsilon(_) => union(&|f| sensitivity_l1(f.as_ref()).unwrap()),
                Cost::Rho(_) => union(&|f| sensitivity_l2(f.as_ref()).unwrap().powi(2)).sqrt(),
            };
            assert!((m.sensitivity - bound).abs() <= 1e-12 * bound, "{cost:?}");
        }
    }
}

#[test]
fn answers_are_the_measured_strategy_on_the_full_histogram_plus_small_noise() {
    let full = counts();
    let strategy = residual_strategy();
    // From the full table, and from the marginal tables the terms need:
    // the same exact answers, so with one seed the same values.
    let from_full = PrivateMarginals::new(vec![2, 3, 4], vec![(vec![0, 1, 2], full.clone())]);
    let tables = vec![
        (vec![0, 2], brute_marginal(&full, &[0, 2])),
        (vec![1], brute_marginal(&full, &[1])),
        (vec![0, 1, 2], full.clone()),
    ];
    let from_tables = PrivateMarginals::new(vec![2, 3, 4], tables).unwrap();
    let rho = crate::kernel::MAX_RHO;
    let a = SeededSession::unlimited(9)
        .measure_marginals(&strategy, &from_full.unwrap(), Cost::Rho(rho))
        .unwrap();
    let b = SeededSession::unlimited(9)
        .measure_marginals(&strategy, &from_tables, Cost::Rho(rho))
        .unwrap();
    assert_eq!(a, b);
    let dense = densify(&a.strategy, &[2, 3, 4]);
    let MeasurementNoise::DiscreteGaussian { sigma } = a.noise else {
        panic!("Gaussian expected")
    };
    for (i, &v) in a.values.iter().enumerate() {
        assert_eq!((v / a.granularity).fract(), 0.0);
        let exact: f64 = (0..24).map(|j| dense[(i, j)] * full[j] as f64).sum();
        assert!((v - exact).abs() <= 6.0 * sigma + 1e-9 * exact.abs(), "{i}");
    }
}

#[test]
fn quantization_counts_the_listed_factors_and_keeps_contrasts_exact() {
    // A 2-way term on an 8-attribute domain keeps 30 bits per factor (a
    // budget split over 8 factors would keep 7).
    let shape = vec![3, 5, 2, 2, 2, 2, 2, 7];
    let h5 = helmert(5);
    let h7 = helmert(7);
    let s = MarginalStrategy::new(
        shape.clone(),
        &terms(vec![(1.0, vec![(1, h5.clone()), (7, h7.clone())])]),
    )
    .unwrap();
    let m = s.measured_strategy();
    assert_eq!(m.terms[0].support, vec![1, 7]);
    for (f, q) in [&h5, &h7].iter().zip(&m.terms[0].factors) {
        for i in 0..f.nrows() {
            let mut row_sum = 0.0;
            for j in 0..f.ncols() {
                assert!((f[(i, j)] - q[(i, j)]).abs() <= 2f64.powi(-29));
                row_sum += q[(i, j)];
            }
            // Exactly orthogonal to the ones vector (the sum of a few
            // dyadic values is exact in f64).
            assert_eq!(row_sum, 0.0, "row {i}");
        }
    }
}

#[test]
fn bad_inputs_are_refused_before_any_charge() {
    let full = counts();
    let strategy = residual_strategy();
    // The 3-way term has no table containing it.
    let data = PrivateMarginals::new(
        vec![2, 3, 4],
        vec![
            (vec![0, 2], brute_marginal(&full, &[0, 2])),
            (vec![1], brute_marginal(&full, &[1])),
        ],
    )
    .unwrap();
    let mut session = SeededSession::pure(1.0, 1).unwrap();
    assert!(
        session
            .measure_marginals(&strategy, &data, Cost::Epsilon(0.5))
            .is_err()
    );
    assert_eq!(session.spent(), 0.0);
    let other = PrivateMarginals::new(vec![2, 3, 5], vec![(vec![1], vec![1, 2, 3])]).unwrap();
    assert!(
        session
            .measure_marginals(&strategy, &other, Cost::Epsilon(0.5))
            .is_err()
    );
    assert_eq!(session.spent(), 0.0);
    // Malformed tables and strategies.
    assert!(PrivateMarginals::new(vec![2, 3], vec![(vec![1, 0], vec![0; 6])]).is_err());
    assert!(PrivateMarginals::new(vec![2, 3], vec![(vec![1], vec![0; 2])]).is_err());
    assert!(
        PrivateMarginals::new(
            vec![2, 3],
            vec![(vec![1], vec![0; 3]), (vec![1], vec![0; 3])]
        )
        .is_err()
    );
    assert!(PrivateMarginals::new(vec![2], vec![(vec![0], vec![MAX_COUNT + 1, 0])]).is_err());
    assert!(
        MarginalStrategy::new(vec![2, 3], &terms(vec![(1.0, vec![(0, sample(2, 3, 0))])])).is_err()
    );
    assert!(MarginalStrategy::new(vec![2, 3], &terms(vec![(0.0, vec![])])).is_err());
    assert!(
        MarginalStrategy::new(vec![2, 3], &terms(vec![(1.0, vec![(2, sample(2, 2, 0))])])).is_err()
    );
    assert!(MarginalStrategy::new(vec![2, 3], &terms(vec![])).is_err());
}

/// A measurement of several noise chunks: a seeded session draws the same
/// noise on one thread and on three (streams are split off in chunk
/// order), and the chunks' streams differ.
#[test]
fn chunked_noise_does_not_depend_on_the_thread_count() {
    let strategy = MarginalStrategy::new(
        vec![400, 500],
        &terms(vec![(
            1.0,
            vec![(0, Mat::identity(400, 400)), (1, Mat::identity(500, 500))],
        )]),
    )
    .unwrap();
    let data = PrivateMarginals::new(vec![400, 500], vec![(vec![0, 1], vec![0; 200_000])]).unwrap();
    let measure = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                SeededSession::unlimited(5)
                    .measure_marginals(&strategy, &data, Cost::Epsilon(1.0))
                    .unwrap()
            })
    };
    let one = measure(1);
    assert_eq!(one, measure(3));
    let chunk = 1 << 16;
    assert!(one.values.len() > 3 * chunk);
    assert_ne!(one.values[..chunk], one.values[chunk..2 * chunk]);
}

/// A marginal summed past `MAX_COUNT` saturates there, after the charge,
/// instead of failing; and saturating is a contraction: tables one record
/// apart give marginals at most one apart.
#[test]
fn marginals_past_the_maximum_saturate_and_stay_one_record_apart() {
    let full = |first: u64| {
        PrivateMarginals::new(vec![2, 2], vec![(vec![0, 1], vec![first, MAX_COUNT, 3, 4])])
    };
    let a = full(MAX_COUNT).expect("counts within the maximum");
    let b = full(MAX_COUNT - 1).expect("counts within the maximum");
    let (ma, mb) = (
        a.marginal(&[0]).expect("summed"),
        b.marginal(&[0]).expect("summed"),
    );
    assert_eq!(ma, vec![MAX_COUNT, 7]);
    assert_eq!(mb, vec![MAX_COUNT, 7]);
    let (ta, tb) = (
        a.marginal(&[]).expect("total"),
        b.marginal(&[]).expect("total"),
    );
    assert_eq!(ta, vec![MAX_COUNT]);
    assert!(ta[0].abs_diff(tb[0]) <= 1);
    // Below the maximum the sums are exact.
    let small =
        PrivateMarginals::new(vec![2, 2], vec![(vec![0, 1], vec![1, 2, 3, 4])]).expect("small");
    assert_eq!(small.marginal(&[1]).expect("summed"), vec![4, 6]);
}
