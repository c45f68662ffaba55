//! Statistical checks of the samplers and of the matrix mechanism, with
//! fixed seeds and tolerances derived from the sampling distribution
//! (5 standard errors, so a correct sampler fails with probability < 1e-6
//! per check, and the seeds make every run identical).

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

use dp_core::calibration::normal_cdf;
use dp_core::sampling::{MultivariateGaussian, gaussian, laplace};
use dp_core::*;
use dp_linalg::Mat;

const DRAWS: usize = 50_000;

/// Kolmogorov–Smirnov statistic of a sample against a CDF.
fn ks_statistic(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = xs.len() as f64;
    xs.iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
        })
        .fold(0.0, f64::max)
}

/// KS critical value at significance 1e-3: 1.95/√n.
fn ks_critical(n: usize) -> f64 {
    1.95 / (n as f64).sqrt()
}

fn mean_and_var(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

#[test]
fn laplace_moments_and_ks() {
    let b = 2.5;
    let mut rng = NoiseSource::seeded(2024);
    let xs: Vec<f64> = (0..DRAWS).map(|_| laplace(&mut rng, b)).collect();
    let (mean, var) = mean_and_var(&xs);
    // Var = 2b² = 12.5; sd of the mean = √(12.5/N); Var of x² gives the
    // sd of the variance estimate: E x⁴ = 24 b⁴, so sd = √((24−4) b⁴ / N).
    assert!(
        mean.abs() < 5.0 * (2.0 * b * b / DRAWS as f64).sqrt(),
        "mean {mean}"
    );
    let var_sd = (20.0 * b.powi(4) / DRAWS as f64).sqrt();
    assert!((var - 2.0 * b * b).abs() < 5.0 * var_sd, "var {var}");
    // E|x| = b.
    let abs_mean = xs.iter().map(|x| x.abs()).sum::<f64>() / DRAWS as f64;
    assert!((abs_mean - b).abs() < 5.0 * b / (DRAWS as f64).sqrt());
    let cdf = |x: f64| {
        if x < 0.0 {
            0.5 * (x / b).exp()
        } else {
            1.0 - 0.5 * (-x / b).exp()
        }
    };
    let d = ks_statistic(xs, cdf);
    assert!(d < ks_critical(DRAWS), "KS {d}");
}

#[test]
fn gaussian_moments_and_ks() {
    let sigma = 0.7;
    let mut rng = NoiseSource::seeded(99);
    let xs: Vec<f64> = (0..DRAWS).map(|_| gaussian(&mut rng, sigma)).collect();
    let (mean, var) = mean_and_var(&xs);
    assert!(mean.abs() < 5.0 * sigma / (DRAWS as f64).sqrt());
    // sd of the sample variance of a normal: σ² √(2/(N−1)).
    assert!((var - sigma * sigma).abs() < 5.0 * sigma * sigma * (2.0 / DRAWS as f64).sqrt());
    let d = ks_statistic(xs, |x| normal_cdf(x / sigma));
    assert!(d < ks_critical(DRAWS), "KS {d}");
}

#[test]
fn a_wrong_scale_is_caught_by_the_ks_test() {
    // The test has power: Laplace(1.1) is rejected against Laplace(1).
    let mut rng = NoiseSource::seeded(5);
    let xs: Vec<f64> = (0..DRAWS).map(|_| laplace(&mut rng, 1.1)).collect();
    let cdf = |x: f64| {
        if x < 0.0 {
            0.5 * x.exp()
        } else {
            1.0 - 0.5 * (-x).exp()
        }
    };
    assert!(ks_statistic(xs, cdf) > ks_critical(DRAWS));
}

#[test]
fn multivariate_gaussian_covariance() {
    // Σ = [[2, 0.8, 0], [0.8, 1, -0.3], [0, -0.3, 0.5]] and a singular one.
    let sigma = Mat::from_fn(3, 3, |i, j| {
        [[2.0, 0.8, 0.0], [0.8, 1.0, -0.3], [0.0, -0.3, 0.5]][i][j]
    });
    let v = [1.0, -2.0, 0.5];
    let singular = Mat::from_fn(3, 3, |i, j| v[i] * v[j]);
    for (cov, seed) in [(sigma, 3u64), (singular, 4u64)] {
        let mvn = MultivariateGaussian::new(cov.as_ref()).unwrap();
        let mut rng = NoiseSource::seeded(seed);
        let mut acc = [[0.0; 3]; 3];
        for _ in 0..DRAWS {
            let z = mvn.sample(&mut rng);
            for i in 0..3 {
                for j in 0..3 {
                    acc[i][j] += z[i] * z[j];
                }
            }
        }
        for i in 0..3 {
            for j in 0..3 {
                let est = acc[i][j] / DRAWS as f64;
                // Var(zᵢzⱼ) = ΣᵢᵢΣⱼⱼ + Σᵢⱼ².
                let sd = ((cov[(i, i)] * cov[(j, j)] + cov[(i, j)].powi(2)) / DRAWS as f64).sqrt();
                assert!(
                    (est - cov[(i, j)]).abs() <= 5.0 * sd + 1e-12,
                    "({i},{j}) {est} vs {}",
                    cov[(i, j)]
                );
            }
        }
    }
    let indefinite = Mat::from_fn(2, 2, |i, j| [[1.0, 2.0], [2.0, 1.0]][i][j]);
    assert!(MultivariateGaussian::new(indefinite.as_ref()).is_err());
    let asymmetric = Mat::from_fn(2, 2, |i, j| [[1.0, 0.5], [0.0, 1.0]][i][j]);
    assert!(MultivariateGaussian::new(asymmetric.as_ref()).is_err());
}

#[test]
fn seeded_sources_are_reproducible_and_default_is_not_seeded() {
    let mut a = NoiseSource::seeded(11);
    let mut b = NoiseSource::seeded(11);
    assert_eq!(laplace(&mut a, 1.0), laplace(&mut b, 1.0));
    assert_eq!(a.seed(), Some(11));
    assert_eq!(NoiseSource::default().seed(), None);
    let mut c = NoiseSource::default();
    let mut d = NoiseSource::default();
    assert_ne!(gaussian(&mut c, 1.0), gaussian(&mut d, 1.0));
}

/// Monte Carlo of the whole mechanism: the empirical mean of the total
/// squared error matches `v · tr(WᵀW (AᵀA)⁺)` within 5 standard errors,
/// for Laplace and Gaussian noise and for a rank-deficient strategy.
#[test]
fn matrix_mechanism_monte_carlo_matches_closed_form() {
    let n = 4;
    let prefix = Mat::from_fn(n, n, |i, j| if j <= i { 1.0 } else { 0.0 });
    let h4 = Mat::from_fn(7, 4, |i, j| {
        [
            [1., 1., 1., 1.],
            [1., 1., 0., 0.],
            [0., 0., 1., 1.],
            [1., 0., 0., 0.],
            [0., 1., 0., 0.],
            [0., 0., 1., 0.],
            [0., 0., 0., 1.],
        ][i][j]
    });
    // Rank 2, supports the workload of pair sums and the total.
    let rank2 = Mat::from_fn(3, 4, |i, j| {
        [[1., 1., 0., 0.], [0., 0., 1., 1.], [1., 1., 1., 1.]][i][j]
    });
    let pairs = Mat::from_fn(2, 4, |i, j| [[1., 1., 0., 0.], [1., 1., 1., 1.]][i][j]);
    let x = [120.0, 7.0, 0.0, 55.0];
    let cases = [
        (
            prefix.clone(),
            h4.clone(),
            PrivacyBudget::pure(0.5).unwrap(),
            1u64,
        ),
        (
            prefix.clone(),
            h4.clone(),
            PrivacyBudget::approx(0.5, 1e-5).unwrap(),
            2,
        ),
        (
            pairs.clone(),
            rank2.clone(),
            PrivacyBudget::pure(1.0).unwrap(),
            3,
        ),
        (pairs, rank2, PrivacyBudget::approx(2.0, 1e-3).unwrap(), 4),
    ];
    let draws = 20_000;
    for (w, a, budget, seed) in cases {
        let mech = MatrixMechanism::new(a.as_ref(), budget).unwrap();
        let expected = expected_total_squared_error(w.as_ref(), a.as_ref(), &mech.noise()).unwrap();
        let truth: Vec<f64> = (0..w.nrows())
            .map(|i| (0..n).map(|j| w[(i, j)] * x[j]).sum())
            .collect();
        let mut rng = NoiseSource::seeded(seed);
        let mut bias = vec![0.0; truth.len()];
        let errors: Vec<f64> = (0..draws)
            .map(|_| {
                let ans = mech.release(w.as_ref(), &x, &mut rng).unwrap();
                for (b, (a, t)) in bias.iter_mut().zip(ans.iter().zip(&truth)) {
                    *b += (a - t) / draws as f64;
                }
                ans.iter().zip(&truth).map(|(a, t)| (a - t).powi(2)).sum()
            })
            .collect();
        let (mean, var) = mean_and_var(&errors);
        let se = (var / draws as f64).sqrt();
        assert!(
            (mean - expected).abs() < 5.0 * se,
            "{budget:?}: empirical {mean} vs closed form {expected} (se {se})"
        );
        // Unbiasedness: each query's mean error is zero within 5 standard
        // errors (its variance is at most the total expected error).
        for b in bias {
            assert!(b.abs() < 5.0 * (expected / draws as f64).sqrt(), "bias {b}");
        }
    }
}
