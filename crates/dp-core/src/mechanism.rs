//! The matrix mechanism (Li et al., "The matrix mechanism", §3 and
//! Proposition 4): measure the strategy `y = A x + noise`, estimate
//! `x̂ = A⁺ y` by least squares, answer `W x̂`.
//!
//! This module is the privacy kernel: it is the only code that reads the
//! private histogram `x` and draws noise. Everything after [`MatrixMechanism::measure`]
//! is post-processing.

use dp_linalg::{Mat, MatRef};

use crate::calibration::{GaussianCalibration, NoiseCalibration, NoiseDistribution};
use crate::least_squares::StrategyFactors;
use crate::privacy::PrivacyBudget;
use crate::sampling::{NoiseSource, gaussian, laplace};
use crate::validate::{check_nonzero_matrix, check_same_domain, check_vector};
use crate::{DpError, Result};

/// Adds i.i.d. noise to exact answers: the direct mechanisms (Laplace on
/// every query, NOQ; Gaussian on every query, GM). The caller computed
/// `exact = W x` for the query set whose sensitivity `noise` was
/// calibrated to; this function is the only place that perturbs them.
pub fn add_noise(
    mut exact: Vec<f64>,
    noise: &NoiseCalibration,
    rng: &mut NoiseSource,
) -> Result<Vec<f64>> {
    check_vector("exact answers", &exact, exact.len())?;
    for v in &mut exact {
        *v += match noise.distribution {
            NoiseDistribution::Laplace => laplace(rng, noise.scale),
            NoiseDistribution::Gaussian => gaussian(rng, noise.scale),
        };
    }
    Ok(exact)
}

/// Default tolerance of the support test: the workload's rows may leave
/// the strategy's row space by at most this fraction of `‖W‖_F`.
pub const DEFAULT_SUPPORT_TOLERANCE: f64 = 1e-8;

/// Outcome of the row-space inclusion test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SupportCheck {
    /// `true` when `relative_residual ≤ tolerance`.
    pub supported: bool,
    /// `‖W − W P_A‖_F / ‖W‖_F`, `P_A` the orthogonal projector on A's row
    /// space (A's numerical rank uses the tolerance `max(p,n)·ε·σ_max`).
    pub relative_residual: f64,
    /// The tolerance used.
    pub tolerance: f64,
    /// Numerical rank of the strategy.
    pub strategy_rank: usize,
}

/// Whether every row of `workload` lies in the row space of `strategy`, so
/// that `W A⁺ A = W` and least squares answers `W` without bias.
pub fn check_support(
    workload: MatRef<'_, f64>,
    strategy: MatRef<'_, f64>,
    tolerance: f64,
) -> Result<SupportCheck> {
    check_nonzero_matrix("workload", workload)?;
    check_nonzero_matrix("strategy", strategy)?;
    check_same_domain(workload, strategy)?;
    if !(tolerance.is_finite() && tolerance >= 0.0) {
        return Err(DpError::InvalidParameter {
            name: "support tolerance",
            reason: format!("must be finite and >= 0, got {tolerance}"),
        });
    }
    let factors = StrategyFactors::new(strategy)?;
    Ok(support_from_factors(&factors, workload, tolerance))
}

pub(crate) fn support_from_factors(
    factors: &StrategyFactors,
    workload: MatRef<'_, f64>,
    tolerance: f64,
) -> SupportCheck {
    let relative_residual = factors.relative_support_residual(workload);
    SupportCheck {
        supported: relative_residual <= tolerance,
        relative_residual,
        tolerance,
        strategy_rank: factors.rank(),
    }
}

/// A strategy with its noise calibration, ready to answer workloads.
#[derive(Debug, Clone)]
pub struct MatrixMechanism {
    strategy: Mat<f64>,
    factors: StrategyFactors,
    noise: NoiseCalibration,
}

impl MatrixMechanism {
    /// The mechanism for `strategy` under `budget`: Laplace noise of scale
    /// `Δ₁(A)/ε` per row for ε-DP, Gaussian noise of standard deviation
    /// `Δ₂(A)·c(ε,δ)` with the analytic calibration for (ε,δ)-DP.
    pub fn new(strategy: MatRef<'_, f64>, budget: PrivacyBudget) -> Result<Self> {
        Self::with_calibration(strategy, budget, GaussianCalibration::default())
    }

    /// As [`Self::new`], with an explicit Gaussian calibration.
    pub fn with_calibration(
        strategy: MatRef<'_, f64>,
        budget: PrivacyBudget,
        calibration: GaussianCalibration,
    ) -> Result<Self> {
        check_nonzero_matrix("strategy", strategy)?;
        let noise = NoiseCalibration::for_strategy(strategy, budget, calibration)?;
        Ok(Self {
            strategy: strategy.to_owned(),
            factors: StrategyFactors::new(strategy)?,
            noise,
        })
    }

    /// The strategy `A`.
    pub fn strategy(&self) -> MatRef<'_, f64> {
        self.strategy.as_ref()
    }

    /// The noise added to each strategy row.
    pub fn noise(&self) -> NoiseCalibration {
        self.noise
    }

    /// Numerical rank of the strategy.
    pub fn strategy_rank(&self) -> usize {
        self.factors.rank()
    }

    /// The measurement `y = A x + z`, `z` i.i.d. Laplace(Δ₁/ε) or
    /// N(0, (Δ₂ c)²). The only function that reads `x`.
    pub fn measure(&self, x: &[f64], rng: &mut NoiseSource) -> Result<Vec<f64>> {
        check_vector("data vector x", x, self.strategy.ncols())?;
        let p = self.strategy.nrows();
        let mut y = vec![0.0; p];
        for (j, &xj) in x.iter().enumerate() {
            let col = self.strategy.col(j);
            for (i, yi) in y.iter_mut().enumerate() {
                *yi += col[i] * xj;
            }
        }
        add_noise(y, &self.noise, rng)
    }

    /// Least-squares estimate `x̂ = A⁺ y` (minimum-norm when A is rank
    /// deficient). Post-processing: never sees `x`.
    pub fn reconstruct(&self, y: &[f64]) -> Result<Vec<f64>> {
        check_vector("measurement y", y, self.strategy.nrows())?;
        Ok(self.factors.solve(y))
    }

    /// Measures and reconstructs: `x̂ = A⁺(A x + z)`, for workloads that are
    /// answered from `x̂` without an explicit matrix.
    pub fn estimate(&self, x: &[f64], rng: &mut NoiseSource) -> Result<Vec<f64>> {
        let y = self.measure(x, rng)?;
        self.reconstruct(&y)
    }

    /// The released answers `W x̂`. Refuses workloads the strategy does not
    /// support (their answers would be biased by an amount that depends on
    /// the private data).
    pub fn release(
        &self,
        workload: MatRef<'_, f64>,
        x: &[f64],
        rng: &mut NoiseSource,
    ) -> Result<Vec<f64>> {
        let mut answers = self.release_many(workload, x, 1, rng)?;
        answers.pop().ok_or_else(|| DpError::InvalidParameter {
            name: "releases",
            reason: "no release was drawn".into(),
        })
    }

    /// `releases` independent releases `W x̂` of the same workload, each
    /// with fresh noise, drawn in the order [`Self::release`] draws them
    /// (so equal to that many calls of it with the same generator); the
    /// support of W is checked once (an O(m n·rank) product) instead of
    /// per release. Each release spends the mechanism's whole budget:
    /// together they are `releases` compositions, for experiments that
    /// measure the error distribution, not for publishing.
    pub fn release_many(
        &self,
        workload: MatRef<'_, f64>,
        x: &[f64],
        releases: usize,
        rng: &mut NoiseSource,
    ) -> Result<Vec<Vec<f64>>> {
        check_nonzero_matrix("workload", workload)?;
        check_same_domain(workload, self.strategy.as_ref())?;
        let support = support_from_factors(&self.factors, workload, DEFAULT_SUPPORT_TOLERANCE);
        if !support.supported {
            return Err(DpError::UnsupportedWorkload {
                relative_residual: support.relative_residual,
                tolerance: support.tolerance,
            });
        }
        (0..releases)
            .map(|_| {
                let x_hat = self.estimate(x, rng)?;
                let answers = workload * MatRef::from_column_major_slice(&x_hat, x_hat.len(), 1);
                Ok(answers.col(0).iter().copied().collect())
            })
            .collect()
    }
}
