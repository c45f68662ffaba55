//! The baseline mechanisms every experiment compares against (LRM paper
//! §6, COA paper §5): LM (noise on the data), NOQ (Laplace noise on every
//! query), GM (Gaussian noise on every query), WM (Haar wavelet strategy)
//! and HM (hierarchical strategy with least squares).

use dp_core::mechanism::cost_for;
use dp_core::{
    DpError, GaussianCalibration, LinearStrategy, MatrixMechanism, NoiseCalibration, PrivacyBudget,
    PrivateHistogram, Result, Session, evaluate_strategy_gram,
};
use dp_linalg::Mat;

use crate::strategies::{hierarchical, identity, wavelet};
use crate::workload::{Workload, workload_sensitivity_l1, workload_sensitivity_l2};

/// A baseline mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// LM: the identity strategy (noise on each cell), answers computed
    /// from the noisy cells.
    NoiseOnData,
    /// NOQ: Laplace noise of scale Δ₁(W)/ε on every query answer (ε-DP).
    NoiseOnQueries,
    /// GM: Gaussian noise of σ = Δ₂(W)·c(ε,δ) on every query answer
    /// ((ε,δ)-DP).
    GaussianOnQueries,
    /// WM: the Haar wavelet strategy Y_n, least squares.
    Wavelet,
    /// HM: the hierarchical strategy H_n with this branching factor, least
    /// squares.
    Hierarchical {
        /// Branching factor (the papers use 2).
        branching: usize,
    },
}

impl Baseline {
    /// Short name as in the papers' plots.
    pub fn name(&self) -> String {
        match self {
            Self::NoiseOnData => "LM".into(),
            Self::NoiseOnQueries => "NOQ".into(),
            Self::GaussianOnQueries => "GM".into(),
            Self::Wavelet => "WM".into(),
            Self::Hierarchical { branching: 2 } => "HM".into(),
            Self::Hierarchical { branching } => format!("HM(b={branching})"),
        }
    }

    /// The strategy matrix for the strategy-based baselines (LM, WM, HM).
    pub fn strategy(&self, n: usize) -> Result<Option<Mat<f64>>> {
        Ok(match self {
            Self::NoiseOnData => Some(identity(n)?),
            Self::Wavelet => Some(wavelet(n)?),
            Self::Hierarchical { branching } => Some(hierarchical(n, *branching)?),
            Self::NoiseOnQueries | Self::GaussianOnQueries => None,
        })
    }

    fn direct_noise(
        &self,
        workload: &dyn Workload,
        budget: PrivacyBudget,
        calibration: GaussianCalibration,
    ) -> Result<NoiseCalibration> {
        match (self, budget) {
            (Self::NoiseOnQueries, PrivacyBudget::Pure { epsilon }) => {
                NoiseCalibration::laplace(workload_sensitivity_l1(workload), epsilon)
            }
            (Self::GaussianOnQueries, PrivacyBudget::Approx { epsilon, delta }) => {
                NoiseCalibration::gaussian(
                    workload_sensitivity_l2(workload),
                    epsilon,
                    delta,
                    calibration,
                )
            }
            _ => Err(DpError::InvalidParameter {
                name: "baseline",
                reason: format!(
                    "{} needs {} privacy",
                    self.name(),
                    if *self == Self::NoiseOnQueries {
                        "pure (epsilon)"
                    } else {
                        "approximate (epsilon, delta)"
                    }
                ),
            }),
        }
    }

    /// Expected total squared error over all queries, in closed form:
    /// `m·v` for the direct baselines (v the per-answer noise variance) and
    /// `v·tr(WᵀW (AᵀA)⁻¹)` for the strategy baselines.
    pub fn expected_total_squared_error(
        &self,
        workload: &dyn Workload,
        budget: PrivacyBudget,
        calibration: GaussianCalibration,
    ) -> Result<f64> {
        match self.strategy(workload.domain_size())? {
            None => {
                let noise = self.direct_noise(workload, budget, calibration)?;
                Ok(workload.num_queries() as f64 * noise.variance())
            }
            Some(a) => {
                let noise = NoiseCalibration::for_strategy(a.as_ref(), budget, calibration)?;
                let eval = evaluate_strategy_gram(workload.gram().as_ref(), a.as_ref())?;
                Ok(noise.variance() * eval.trace)
            }
        }
    }

    /// Noisy answers to every query of the workload, measured by the
    /// privacy kernel (which computes the sensitivity from the workload's
    /// explicit matrix for NOQ and GM) and charged to `session`.
    pub fn release(
        &self,
        workload: &dyn Workload,
        data: &PrivateHistogram,
        budget: PrivacyBudget,
        calibration: GaussianCalibration,
        session: &mut Session,
    ) -> Result<Vec<f64>> {
        dp_core::validate::check_histogram_cells("workload", workload.domain_size(), data.len())?;
        match self.strategy(workload.domain_size())? {
            None => {
                self.direct_noise(workload, budget, calibration)?;
                let w = workload
                    .explicit()
                    .ok_or_else(|| DpError::InvalidParameter {
                        name: "workload",
                        reason: format!("{} needs an explicit workload matrix", self.name()),
                    })?;
                let strategy = LinearStrategy::dense(w.as_ref())?;
                Ok(session
                    .measure_linear(&strategy, data, cost_for(budget, calibration)?)?
                    .values)
            }
            Some(a) => {
                // I_n, H_n and Y_n have full column rank: every workload is
                // supported, so answering from x̂ is unbiased.
                let mech = MatrixMechanism::with_calibration(a.as_ref(), budget, calibration)?;
                let x_hat = mech.estimate(data, session)?;
                workload.answer(&x_hat)
            }
        }
    }
}
