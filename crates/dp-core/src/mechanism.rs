//! The matrix mechanism (Li et al., "The matrix mechanism", §3 and
//! Proposition 4): measure the strategy `y = A x + noise`, estimate
//! `x̂ = A⁺ y` by least squares, answer `W x̂`.
//!
//! The measurement goes through the privacy kernel
//! ([`Session::measure_linear`]), which reads the private histogram,
//! charges the session and draws exact discrete noise; everything after
//! [`MatrixMechanism::measure`] is post-processing.

use dp_linalg::{Mat, MatRef};

use crate::calibration::{GaussianCalibration, NoiseCalibration};
use crate::kernel::{Cost, LinearStrategy, Measurement, PrivateHistogram, Session, zcdp_rho_for};
use crate::least_squares::StrategyFactors;
use crate::privacy::PrivacyBudget;
use crate::validate::{check_nonzero_matrix, check_same_domain, check_vector};
use crate::{DpError, Result};

/// The kernel cost of one measurement under `budget`: ε under pure DP;
/// under approximate DP the zCDP cost `ρ = 1/(2c²)` of discrete Gaussian
/// noise `σ = Δ₂ c` (CKS20 Theorem 14), `c` the calibration's multiplier.
/// With [`GaussianCalibration::Zcdp`] it is exactly the ρ of an (ε,δ)
/// [`Session`], so one release spends it; the continuous-Gaussian
/// calibrations (analytic, classic, …) give a larger ρ, which an (ε,δ)
/// session refuses and an experiments session accepts.
pub fn cost_for(budget: PrivacyBudget, calibration: GaussianCalibration) -> Result<Cost> {
    Ok(match budget {
        PrivacyBudget::Pure { epsilon } => Cost::Epsilon(epsilon.get()),
        PrivacyBudget::Approx { epsilon, delta } => Cost::Rho(match calibration {
            GaussianCalibration::Zcdp => zcdp_rho_for(epsilon.get(), delta.get())?,
            _ => (0.5 / calibration.multiplier(epsilon, delta)?.powi(2)).next_up(),
        }),
    })
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
    kernel_strategy: LinearStrategy,
    factors: StrategyFactors,
    noise: NoiseCalibration,
    cost: Cost,
}

impl MatrixMechanism {
    /// The mechanism for `strategy` under `budget`: Laplace noise of scale
    /// `Δ₁(A)/ε` per row for ε-DP; for (ε,δ)-DP, discrete Gaussian noise
    /// of standard deviation `Δ₂(A)/√(2ρ)` with ρ the zCDP budget of an
    /// (ε,δ) [`Session`] ([`GaussianCalibration::Zcdp`]), so one release
    /// spends exactly such a session. (The continuous calibrations, e.g.
    /// the analytic one, cost more ρ than that session holds; they remain
    /// available through [`Self::with_calibration`] for experiments.)
    pub fn new(strategy: MatRef<'_, f64>, budget: PrivacyBudget) -> Result<Self> {
        Self::with_calibration(strategy, budget, GaussianCalibration::Zcdp)
    }

    /// As [`Self::new`], with an explicit Gaussian calibration.
    pub fn with_calibration(
        strategy: MatRef<'_, f64>,
        budget: PrivacyBudget,
        calibration: GaussianCalibration,
    ) -> Result<Self> {
        check_nonzero_matrix("strategy", strategy)?;
        let noise = NoiseCalibration::for_strategy(strategy, budget, calibration)?;
        let cost = cost_for(budget, calibration)?;
        Ok(Self {
            strategy: strategy.to_owned(),
            kernel_strategy: LinearStrategy::dense(strategy)?,
            factors: StrategyFactors::new(strategy)?,
            noise,
            cost,
        })
    }

    /// What one measurement charges the session ([`cost_for`]).
    pub fn cost(&self) -> Cost {
        self.cost
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

    /// The measurement `y = Ã x + z` by the kernel: `Ã` is `A` on a
    /// power-of-two grid (relative accuracy about 2⁻⁴⁰), `z` i.i.d.
    /// discrete Laplace of scale `Δ₁(Ã)/ε` or discrete Gaussian of
    /// variance `Δ₂(Ã)²/(2ρ)`; charged to `session` before any draw.
    pub fn measure(&self, data: &PrivateHistogram, session: &mut Session) -> Result<Measurement> {
        session.measure_linear(&self.kernel_strategy, data, self.cost)
    }

    /// Least-squares estimate `x̂ = A⁺ y` (minimum-norm when A is rank
    /// deficient). Post-processing: never sees `x`.
    pub fn reconstruct(&self, y: &[f64]) -> Result<Vec<f64>> {
        check_vector("measurement y", y, self.strategy.nrows())?;
        Ok(self.factors.solve(y))
    }

    /// Measures and reconstructs: `x̂ = A⁺(A x + z)`, for workloads that are
    /// answered from `x̂` without an explicit matrix.
    pub fn estimate(&self, data: &PrivateHistogram, session: &mut Session) -> Result<Vec<f64>> {
        let y = self.measure(data, session)?;
        self.reconstruct(&y.values)
    }

    /// The released answers `W x̂`. Refuses workloads the strategy does not
    /// support (their answers would be biased by an amount that depends on
    /// the private data).
    pub fn release(
        &self,
        workload: MatRef<'_, f64>,
        data: &PrivateHistogram,
        session: &mut Session,
    ) -> Result<Vec<f64>> {
        let mut answers = self.release_many(workload, data, 1, session)?;
        answers.pop().ok_or_else(|| DpError::InvalidParameter {
            name: "releases",
            reason: "no release was drawn".into(),
        })
    }

    /// `releases` independent releases `W x̂` of the same workload, each
    /// with fresh noise, drawn in the order [`Self::release`] draws them
    /// (so equal to that many calls of it with the same generator); the
    /// support of W is checked once (an O(m n·rank) product) instead of
    /// per release. Each release is charged to `session` (they compose
    /// sequentially): for experiments that measure the error distribution
    /// with an unlimited [`crate::experiments::SeededSession`].
    pub fn release_many(
        &self,
        workload: MatRef<'_, f64>,
        data: &PrivateHistogram,
        releases: usize,
        session: &mut Session,
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
                let x_hat = self.estimate(data, session)?;
                let answers = workload * MatRef::from_column_major_slice(&x_hat, x_hat.len(), 1);
                Ok(answers.col(0).iter().copied().collect())
            })
            .collect()
    }
}
