//! COA against independent truth: a brute-force optimum for n = 2, the SVD
//! lower bound, the closed-form strategies, and its own certificate.

#![allow(clippy::unwrap_used)]

use dp_linalg::Mat;
use dp_opt::coa::Coa;
use dp_opt::{PrivacyModel, Problem, StrategyOptimizer, by_name};
use dp_workloads::Workload;
use dp_workloads::workload::{AllRange, Prefix};

#[test]
fn two_cells_match_a_brute_force_search() {
    // n = 2: feasible X = [[1, t], [t, 1]], F(t) = tr(X⁻¹V); golden section.
    let v = Mat::from_fn(2, 2, |i, j| [[5.0, 2.0], [2.0, 1.0]][i][j]);
    let f = |t: f64| (v[(0, 0)] + v[(1, 1)] - 2.0 * t * v[(0, 1)]) / (1.0 - t * t);
    let (mut lo, mut hi) = (-0.999_999, 0.999_999);
    for _ in 0..200 {
        let (a, b) = (lo + (hi - lo) * 0.382, lo + (hi - lo) * 0.618);
        if f(a) < f(b) { hi = b } else { lo = a }
    }
    let best = f(0.5 * (lo + hi));
    let p = Problem::from_gram(v, PrivacyModel::Approx).unwrap();
    let r = Coa::default().optimize(&p, &mut ()).unwrap();
    assert!(r.report.converged);
    assert!(
        (r.report.objective - best).abs() < 1e-9 * best,
        "{} vs {best}",
        r.report.objective
    );
}

#[test]
fn certified_optimum_on_ranges_prefix_and_a_rank_deficient_workload() {
    let low_rank = Mat::from_fn(8, 24, |i, j| {
        (((i * 7 + j * 3) % 5) as f64) * ((i % 3) as f64 + 1.0)
    });
    let cases: Vec<(String, Mat<f64>, f64)> = vec![
        (
            "AllRange(24)".into(),
            AllRange::new(24).unwrap().gram(),
            1e-6,
        ),
        ("Prefix(40)".into(), Prefix::new(40).unwrap().gram(), 1e-6),
        ("low rank".into(), dp_linalg::gram(low_rank.as_ref()), 1e-4),
    ];
    for (name, gram, tol) in cases {
        let p = Problem::from_gram(gram, PrivacyModel::Approx).unwrap();
        let r = Coa::default().optimize(&p, &mut ()).unwrap();
        let cert = r.report.certificate.unwrap();
        assert!(r.report.converged, "{name}: {:?}", r.report.termination);
        assert!(
            cert.relative_gap <= tol,
            "{name}: gap {}",
            cert.relative_gap
        );
        let recomputed = p.objective(r.strategy.as_ref()).unwrap();
        assert!((recomputed - r.report.objective).abs() < 1e-9 * recomputed);
        assert!(
            recomputed >= p.svd_bound().unwrap() * (1.0 - 1e-9),
            "{name}"
        );
        assert!(cert.lower_bound <= recomputed * (1.0 + 1e-9), "{name}");
        for other in ["identity", "hierarchical", "wavelet", "svdb"] {
            let o = by_name(other).unwrap().optimize(&p, &mut ()).unwrap();
            assert!(
                recomputed <= o.report.objective * (1.0 + 1e-9),
                "{name}: {other} beats COA"
            );
        }
    }
}

#[test]
fn pure_privacy_and_bad_input_are_refused() {
    let p = Problem::from_gram(Prefix::new(4).unwrap().gram(), PrivacyModel::Pure).unwrap();
    assert!(Coa::default().optimize(&p, &mut ()).is_err());
    let mut nan = Prefix::new(3).unwrap().gram();
    nan[(0, 1)] = f64::NAN;
    assert!(Problem::from_gram(nan, PrivacyModel::Approx).is_err());
    let one = Problem::from_gram(Mat::from_fn(1, 1, |_, _| 4.0), PrivacyModel::Approx).unwrap();
    let r = Coa::default().optimize(&one, &mut ()).unwrap();
    assert!((r.report.objective - 4.0).abs() < 1e-12);
}
