//! Classic strategies against the matrix mechanism paper (§6, Theorems
//! 6.29 and 6.30) and the singular value bound (Theorem 5.25).

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

use dp_core::{evaluate_strategy, evaluate_strategy_gram, sensitivity_l1, svd_lower_bound};
use dp_linalg::{Mat, MatRef, Par, ThinSvd, gram};
use dp_workloads::strategies::*;
use dp_workloads::workload::{AllRange, Identity, Prefix, Workload};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

#[test]
fn h_and_y_sensitivity_is_log_n_plus_one() {
    for k in 0..=10 {
        let n = 1usize << k;
        let h = hierarchical(n, 2).unwrap();
        let y = wavelet(n).unwrap();
        assert_eq!(h.nrows(), 2 * n - 1);
        assert_eq!((y.nrows(), y.ncols()), (n, n));
        assert_eq!(sensitivity_l1(h.as_ref()).unwrap(), (k + 1) as f64, "H_{n}");
        assert_eq!(sensitivity_l1(y.as_ref()).unwrap(), (k + 1) as f64, "Y_{n}");
        // Y_n's rows are mutually orthogonal (Haar basis, unnormalized).
        let yyt = gram(y.transpose(), Par::Seq);
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    assert_eq!(yyt[(i, j)], 0.0);
                }
            }
        }
    }
    // b-ary: n = 3^4 = 81 has (3·81 − 1)/2 = 121 rows and Δ₁ = 5.
    let h3 = hierarchical(81, 3).unwrap();
    assert_eq!(h3.nrows(), 121);
    assert_eq!(sensitivity_l1(h3.as_ref()).unwrap(), 5.0);
    // H_4 exactly as in Figure 1.
    let h4 = hierarchical(4, 2).unwrap();
    let expected = [
        [1., 1., 1., 1.],
        [1., 1., 0., 0.],
        [0., 0., 1., 1.],
        [1., 0., 0., 0.],
        [0., 1., 0., 0.],
        [0., 0., 1., 0.],
        [0., 0., 0., 1.],
    ];
    for i in 0..7 {
        for j in 0..4 {
            assert_eq!(h4[(i, j)], expected[i][j]);
        }
    }
}

#[test]
fn non_powers_of_two_give_full_rank_strategies() {
    for n in [3, 5, 6, 7, 12, 100, 129] {
        for s in [
            hierarchical(n, 2).unwrap(),
            hierarchical(n, 3).unwrap(),
            wavelet(n).unwrap(),
        ] {
            let svd = ThinSvd::new(s.as_ref()).unwrap();
            assert_eq!(svd.rank(), n, "n = {n}");
            let levels = (n as f64).log2().ceil() as usize + 1;
            assert!(sensitivity_l1(s.as_ref()).unwrap() <= levels as f64);
            // Every cell is covered by the root/total row.
            for j in 0..n {
                assert_eq!(s[(0, j)], 1.0);
            }
        }
        // H_n's leaves are the single cells: every unit row is present.
        let h = hierarchical(n, 2).unwrap();
        for cell in 0..n {
            assert!(
                (0..h.nrows())
                    .any(|r| (0..n).all(|j| h[(r, j)] == if j == cell { 1.0 } else { 0.0 }))
            );
        }
    }
    assert!(hierarchical(8, 1).is_err() && wavelet(0).is_err());
}

fn query_error(w: &[f64], strategy: MatRef<'_, f64>) -> f64 {
    let row = Mat::from_fn(1, w.len(), |_, j| w[j]);
    evaluate_strategy(row.as_ref(), strategy).unwrap().l1_obj()
}

/// Theorem 6.29: ½ Error_Y(w) ≤ Error_H(w) ≤ 2 Error_Y(w) for every query.
#[test]
fn theorem_6_29_on_random_ranges_and_predicates() {
    let mut rng = ChaCha20Rng::seed_from_u64(629);
    for n in [16, 64, 256] {
        let h = hierarchical(n, 2).unwrap();
        let y = wavelet(n).unwrap();
        for trial in 0..60 {
            let w: Vec<f64> = if trial % 2 == 0 {
                let a = rng.random_range(0..n);
                let b = rng.random_range(a..n);
                (0..n)
                    .map(|j| if (a..=b).contains(&j) { 1.0 } else { 0.0 })
                    .collect()
            } else {
                (0..n)
                    .map(|_| f64::from(u8::from(rng.random_bool(0.3))))
                    .collect()
            };
            if w.iter().all(|&v| v == 0.0) {
                continue;
            }
            let eh = query_error(&w, h.as_ref());
            let ey = query_error(&w, y.as_ref());
            assert!(
                0.5 * ey <= eh * (1.0 + 1e-12) && eh <= 2.0 * ey * (1.0 + 1e-12),
                "n {n}: Error_H {eh} vs Error_Y {ey}"
            );
        }
    }
}

/// Least-squares slope of log(y) on log(x).
fn fitted_exponent(xs: &[f64], ys: &[f64]) -> f64 {
    let lx: Vec<f64> = xs.iter().map(|v| v.ln()).collect();
    let ly: Vec<f64> = ys.iter().map(|v| v.ln()).collect();
    let mx = lx.iter().sum::<f64>() / lx.len() as f64;
    let my = ly.iter().sum::<f64>() / ly.len() as f64;
    let num: f64 = lx.iter().zip(&ly).map(|(a, b)| (a - mx) * (b - my)).sum();
    let den: f64 = lx.iter().map(|a| (a - mx).powi(2)).sum();
    num / den
}

/// Theorem 6.30: on all range queries, the average error per query of H_n
/// and Y_n grows as Θ(log³ n) and that of I_n as Θ(n). The exponents are
/// fitted against log₂ n + 1 over n = 2⁴ … 2¹¹ and printed, with the local
/// slope of the last doubling (which approaches 3 from below as the
/// lower-order terms fade).
#[test]
fn theorem_6_30_growth_on_all_ranges() {
    let mut logs = Vec::new();
    let (mut eh, mut ey, mut ei, mut ns) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for k in 4..=11 {
        let n = 1usize << k;
        let w = AllRange::new(n).unwrap();
        let g = w.gram();
        let m = w.num_queries() as f64;
        let per_query = |a: Mat<f64>| {
            evaluate_strategy_gram(g.as_ref(), a.as_ref())
                .unwrap()
                .l1_obj()
                / m
        };
        eh.push(per_query(hierarchical(n, 2).unwrap()));
        ey.push(per_query(wavelet(n).unwrap()));
        ei.push(per_query(identity(n).unwrap()));
        logs.push((k + 1) as f64); // log₂ n + 1 = Δ₁(H_n)
        ns.push(n as f64);
    }
    let (ph, py, pi) = (
        fitted_exponent(&logs, &eh),
        fitted_exponent(&logs, &ey),
        fitted_exponent(&ns, &ei),
    );
    for (k, (h, y)) in eh.iter().zip(&ey).enumerate() {
        println!("n = 2^{}: H {h:.4} Y {y:.4}", k + 4);
    }
    println!("fitted exponents: H_n ~ log^{ph:.2} n, Y_n ~ log^{py:.2} n, I_n ~ n^{pi:.3}");
    let last = logs.len() - 1;
    let local = |e: &[f64]| (e[last] / e[last - 1]).ln() / (logs[last] / logs[last - 1]).ln();
    let (lh, ly) = (local(&eh), local(&ey));
    println!("local exponents at n = 2^11: H {lh:.2}, Y {ly:.2}");
    for p in [ph, py, lh, ly] {
        assert!((2.6..=3.4).contains(&p), "exponent {p}");
    }
    // The identity's error per range is exactly the mean width (n+2)/3.
    assert!((pi - 1.0).abs() < 0.05, "identity exponent {pi}");
    for (k, e) in ei.iter().enumerate() {
        let n = ns[k];
        assert!((e - (n + 2.0) / 3.0).abs() < 1e-9 * e);
    }
}

/// The SVD bound strategy from W's Gram and from W's QR factor.
fn both_routes(w: MatRef<'_, f64>) -> [Mat<f64>; 2] {
    let root = dp_linalg::triangular_factor(w).unwrap();
    [
        svd_bound(gram(w, Par::Seq).as_ref()).unwrap(),
        svd_bound_from_root(root.as_ref(), w.nrows()).unwrap(),
    ]
}

#[test]
fn svd_bound_strategy_attains_sum_of_singular_values() {
    // tr(WᵀW (AᵀA)⁺) = Σσᵢ for A = diag(√σ) Pᵀ, and l2_obj >= (Σσ)²/n.
    for w in [
        Prefix::new(20).unwrap().explicit().unwrap(),
        AllRange::new(12).unwrap().explicit().unwrap(),
        Identity::new(9).unwrap().explicit().unwrap(),
    ] {
        let s = ThinSvd::values_only(w.as_ref()).unwrap();
        let sum: f64 = s.iter().sum();
        for a in both_routes(w.as_ref()) {
            let eval = evaluate_strategy(w.as_ref(), a.as_ref()).unwrap();
            assert!(eval.support.supported);
            assert!(
                (eval.trace - sum).abs() < 1e-9 * sum,
                "{} vs {sum}",
                eval.trace
            );
            let bound = svd_lower_bound(w.as_ref()).unwrap();
            assert!(eval.l2_obj() >= bound * (1.0 - 1e-12));
        }
    }
    // Identity workload: the strategy is orthogonal, l2_obj = n = bound.
    let id = Identity::new(9).unwrap();
    let a = svd_bound(id.gram().as_ref()).unwrap();
    let eval = evaluate_strategy_gram(id.gram().as_ref(), a.as_ref()).unwrap();
    assert!((eval.l2_obj() - 9.0).abs() < 1e-9);
    // Rank-deficient workload: r rows, still supported.
    let w = Mat::from_fn(3, 5, |i, j| ((i + 1) * (j % 2 + 1)) as f64);
    for a in both_routes(w.as_ref()) {
        assert_eq!(a.nrows(), 1);
        assert!(
            evaluate_strategy(w.as_ref(), a.as_ref())
                .unwrap()
                .support
                .supported
        );
    }
    // A factor with no rows, or more rows than W, is no factor of W.
    let root = dp_linalg::triangular_factor(w.as_ref()).unwrap();
    assert!(svd_bound_from_root(root.as_ref(), 2).is_err());
    assert!(svd_bound_from_root(Mat::<f64>::zeros(0, 5).as_ref(), 3).is_err());
}
