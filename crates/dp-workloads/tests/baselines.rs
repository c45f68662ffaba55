//! Baseline mechanisms: closed forms and a Monte Carlo check of release.

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

use dp_core::{GaussianCalibration, PrivacyBudget};
use dp_workloads::baselines::Baseline;
use dp_workloads::workload::{AllRange, Identity, Prefix, Workload};

#[test]
fn closed_form_errors() {
    let pure = PrivacyBudget::pure(0.5).unwrap();
    let cal = GaussianCalibration::Analytic;
    // LM on the identity workload: n cells × 2/ε².
    let id = Identity::new(10).unwrap();
    let lm = Baseline::NoiseOnData
        .expected_total_squared_error(&id, pure, cal)
        .unwrap();
    assert!((lm - 10.0 * 2.0 / 0.25).abs() < 1e-9);
    // NOQ on all ranges of 6 cells: m = 21 answers, Δ₁ = max (j+1)(6−j) = 12.
    let r = AllRange::new(6).unwrap();
    let noq = Baseline::NoiseOnQueries
        .expected_total_squared_error(&r, pure, cal)
        .unwrap();
    assert!((noq - 21.0 * 2.0 * 144.0 / 0.25).abs() < 1e-6);
    // LM on prefix sums: Σ_i (i+1) · 2/ε² = n(n+1)/2 · 8.
    let p = Prefix::new(8).unwrap();
    let lm_p = Baseline::NoiseOnData
        .expected_total_squared_error(&p, pure, cal)
        .unwrap();
    assert!((lm_p - 36.0 * 8.0).abs() < 1e-9);
    // GM: σ² = Δ₂(W)² c², Δ₂(Prefix(8))² = 8.
    let approx = PrivacyBudget::approx(0.5, 1e-5).unwrap();
    let c = GaussianCalibration::Classic
        .multiplier(approx.epsilon(), approx.delta().unwrap())
        .unwrap();
    let gm = Baseline::GaussianOnQueries
        .expected_total_squared_error(&p, approx, GaussianCalibration::Classic)
        .unwrap();
    assert!((gm - 8.0 * 8.0 * c * c).abs() < 1e-9 * gm);
    // Wrong privacy model is refused.
    assert!(
        Baseline::NoiseOnQueries
            .expected_total_squared_error(&p, approx, cal)
            .is_err()
    );
    assert!(
        Baseline::GaussianOnQueries
            .expected_total_squared_error(&p, pure, cal)
            .is_err()
    );
    // On all ranges the per-query error of LM is (n+2)/3 and that of HM,
    // WM Θ(log³ n) (Theorem 6.30): at n = 64 LM still wins, at n = 2048
    // both hierarchical strategies win.
    let on_ranges = |n: usize, baseline: Baseline| {
        baseline
            .expected_total_squared_error(&AllRange::new(n).unwrap(), pure, cal)
            .unwrap()
    };
    let hm = Baseline::Hierarchical { branching: 2 };
    assert!(on_ranges(64, Baseline::NoiseOnData) < on_ranges(64, hm));
    let (lm, hm, wm) = (
        on_ranges(2048, Baseline::NoiseOnData),
        on_ranges(2048, hm),
        on_ranges(2048, Baseline::Wavelet),
    );
    assert!(hm < lm && wm < lm, "HM {hm} WM {wm} LM {lm}");
}

#[test]
fn released_answers_match_the_closed_form_in_expectation() {
    let w = Prefix::new(12).unwrap();
    let x: Vec<f64> = (0..12).map(|i| (i * i % 7) as f64).collect();
    let truth = w.answer(&x).unwrap();
    let draws = 20_000;
    for (baseline, budget, seed) in [
        (
            Baseline::Hierarchical { branching: 2 },
            PrivacyBudget::pure(1.0).unwrap(),
            1u64,
        ),
        (
            Baseline::Wavelet,
            PrivacyBudget::approx(1.0, 1e-6).unwrap(),
            2,
        ),
        (
            Baseline::NoiseOnQueries,
            PrivacyBudget::pure(1.0).unwrap(),
            3,
        ),
        (
            Baseline::GaussianOnQueries,
            PrivacyBudget::approx(1.0, 1e-6).unwrap(),
            4,
        ),
    ] {
        let cal = GaussianCalibration::Analytic;
        let expected = baseline
            .expected_total_squared_error(&w, budget, cal)
            .unwrap();
        let mut rng = dp_core::experiments::SeededSession::unlimited(seed);
        let data = dp_core::PrivateHistogram::from_f64_counts(&x).unwrap();
        let errs: Vec<f64> = (0..draws)
            .map(|_| {
                let a = baseline.release(&w, &data, budget, cal, &mut rng).unwrap();
                a.iter().zip(&truth).map(|(a, t)| (a - t).powi(2)).sum()
            })
            .collect();
        let mean = errs.iter().sum::<f64>() / draws as f64;
        let var = errs.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / (draws - 1) as f64;
        let se = (var / draws as f64).sqrt();
        assert!(
            (mean - expected).abs() < 5.0 * se,
            "{}: {mean} vs {expected} (se {se})",
            baseline.name()
        );
    }
}
