//! Noise calibrations: the analytic Gaussian against its defining equation,
//! the published rules against the exact one, and the Laplace scale.

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

use dp_core::calibration::{analytic_gaussian_sigma, gaussian_delta_for_sigma, normal_cdf};
use dp_core::*;
use dp_linalg::Mat;

#[test]
fn normal_cdf_known_values() {
    assert!((normal_cdf(0.0) - 0.5).abs() < 1e-16);
    assert!((normal_cdf(1.959963984540054) - 0.975).abs() < 1e-15);
    // Far tail, where 1 − Φ(−x) would cancel: Φ(−10) = 7.6198530241605e-24.
    assert!((normal_cdf(-10.0) / 7.619853024160526e-24 - 1.0).abs() < 1e-12);
}

#[test]
fn analytic_sigma_satisfies_its_defining_equation() {
    for &eps in &[0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0] {
        for &delta in &[1e-2, 1e-4, 1e-6, 1e-10] {
            for &sens in &[0.5, 1.0, 3.0] {
                let sigma = analytic_gaussian_sigma(sens, eps, delta).unwrap();
                // Defining equation of Balle & Wang (2018), Theorem 8, written
                // out here independently of the library's helper.
                let a = sens / (2.0 * sigma);
                let b = eps * sigma / sens;
                let lhs = normal_cdf(a - b) - eps.exp() * normal_cdf(-a - b);
                assert!(
                    ((lhs - delta) / delta).abs() < 1e-9,
                    "eps {eps} delta {delta} sens {sens}: δ(σ) = {lhs}"
                );
                // Private side: never below the exact threshold.
                assert!(gaussian_delta_for_sigma(sens, eps, sigma) <= delta);
                // Homogeneous in the sensitivity.
                let unit = analytic_gaussian_sigma(1.0, eps, delta).unwrap();
                assert!((sigma / (sens * unit) - 1.0).abs() < 1e-12);
            }
        }
    }
}

#[test]
fn published_calibrations_are_never_below_the_exact_one() {
    // Each published rule is a sufficient condition: on its validity range
    // it must add at least as much noise as the exact analytic threshold.
    // A rule below it would not be private.
    for &eps in &[0.01, 0.05, 0.1, 0.3, 0.5, 0.9, 0.99] {
        for &delta in &[1e-2, 1e-4, 1e-6, 1e-9] {
            let e = Epsilon::new(eps).unwrap();
            let d = Delta::new(delta).unwrap();
            let exact = GaussianCalibration::Analytic.multiplier(e, d).unwrap();
            for cal in [
                GaussianCalibration::Classic,
                GaussianCalibration::Coa,
                GaussianCalibration::Projection,
            ] {
                let c = cal.multiplier(e, d).unwrap();
                assert!(
                    c >= exact,
                    "{} below exact at eps {eps} delta {delta}",
                    cal.name()
                );
            }
        }
    }
}

#[test]
fn published_formulas_and_ranges() {
    let e = Epsilon::new(0.5).unwrap();
    let d = Delta::new(1e-5).unwrap();
    let classic = GaussianCalibration::Classic.multiplier(e, d).unwrap();
    assert!((classic - (2.0 * (1.25e5f64).ln()).sqrt() / 0.5).abs() < 1e-12);
    let coa = GaussianCalibration::Coa.multiplier(e, d).unwrap();
    assert!((coa - (2.0 * (2e5f64).ln()).sqrt() / 0.5).abs() < 1e-12);
    let proj = GaussianCalibration::Projection.multiplier(e, d).unwrap();
    assert!((proj - (0.5 * 0.5f64.sqrt() + (2.0 * 1e5f64.ln()).sqrt()) / 0.5).abs() < 1e-12);
    let big = Epsilon::new(2.0).unwrap();
    for cal in [
        GaussianCalibration::Classic,
        GaussianCalibration::Coa,
        GaussianCalibration::Projection,
    ] {
        assert!(matches!(
            cal.multiplier(big, d),
            Err(DpError::CalibrationOutOfRange { .. })
        ));
    }
    assert!(matches!(
        GaussianCalibration::Classic.multiplier(Epsilon::new(1.0).unwrap(), d),
        Err(DpError::CalibrationOutOfRange { .. })
    ));
    assert!(GaussianCalibration::Analytic.multiplier(big, d).is_ok());
    assert_eq!(
        GaussianCalibration::default(),
        GaussianCalibration::Analytic
    );
    for cal in [
        GaussianCalibration::Classic,
        GaussianCalibration::Coa,
        GaussianCalibration::Projection,
        GaussianCalibration::Analytic,
    ] {
        assert_eq!(GaussianCalibration::from_name(cal.name()).unwrap(), cal);
    }
    assert!(GaussianCalibration::from_name("nope").is_err());
}

#[test]
fn strategy_calibration_uses_the_right_sensitivity() {
    // Strategy with column L1 norms (3, 1) and L2 norms (√5, 1).
    let a = Mat::from_fn(2, 2, |i, j| [[1.0, 1.0], [2.0, 0.0]][i][j]);
    let pure = NoiseCalibration::for_strategy(
        a.as_ref(),
        PrivacyBudget::pure(0.5).unwrap(),
        GaussianCalibration::Analytic,
    )
    .unwrap();
    assert_eq!(pure.distribution, NoiseDistribution::Laplace);
    assert!((pure.scale - 3.0 / 0.5).abs() < 1e-15);
    assert!((pure.variance() - 2.0 * 36.0).abs() < 1e-12);
    let approx = NoiseCalibration::for_strategy(
        a.as_ref(),
        PrivacyBudget::approx(0.5, 1e-6).unwrap(),
        GaussianCalibration::Classic,
    )
    .unwrap();
    assert_eq!(approx.distribution, NoiseDistribution::Gaussian);
    let c = (2.0 * (1.25e6f64).ln()).sqrt() / 0.5;
    assert!((approx.scale - 5f64.sqrt() * c).abs() < 1e-12);
    assert!((approx.variance() - 5.0 * c * c).abs() < 1e-9);
}
