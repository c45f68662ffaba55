//! The privacy kernel: the only code that reads the private histogram,
//! draws noise or charges a privacy budget (Ektelo's kernel split; the
//! measurement/accountant shape of OpenDP).
//!
//! - [`PrivateHistogram`]: the data, opaque outside this module.
//! - [`Session`]: a total budget (pure ε, or ρ-zCDP, possibly stated as
//!   (ε,δ) and converted exactly by CKS20 Corollary 13), a running total
//!   of what was spent, and the [`NoiseSource`]. Composition is
//!   sequential: the session is (Σ costs)-private. Each measurement is
//!   charged *before* any noise is drawn; a measurement that would
//!   overspend is refused with [`DpError::BudgetExceeded`] and nothing is
//!   drawn or released.
//! - [`Session::measure_linear`]: `y = Ã x + G·z` for a [`LinearStrategy`]
//!   quantized to the power-of-two granularity `G` (see
//!   [`strategy`]), `z` i.i.d. discrete Laplace (cost
//!   ε, scale `Δ₁(Ã)/(G ε)` on ℤ) or discrete Gaussian (cost ρ, variance
//!   `(Δ₂(Ã)/G)²/(2ρ)` on ℤ), drawn exactly (CKS20). The kernel computes
//!   the sensitivities itself; every value returned is an exact multiple
//!   of `G`. Anything computed from a [`Measurement`] is post-processing.
//! - [`Session::measure_marginals`]: a [`MarginalStrategy`] (terms with
//!   factors on a few attributes, ones rows elsewhere) measured on the
//!   [`PrivateMarginals`] tables of one dataset, each term on the table of
//!   its support (see [`marginals`]).
//! - Every [`Measurement`] carries the strategy actually measured
//!   ([`MeasuredStrategy`]); reconstructing with it is exactly unbiased.

mod accounting;
mod histogram;
pub mod marginals;
pub mod records;
pub mod strategy;
pub mod stream;
pub mod tree;

pub use accounting::{
    MAX_DELTA, MAX_EPSILON, MAX_RHO, MIN_DELTA, MIN_EPSILON, MIN_RHO, add_up, check_delta,
    check_epsilon, check_rho, zcdp_cost_of_pure, zcdp_delta, zcdp_rho_for,
};
pub use histogram::PrivateHistogram;
pub use marginals::{KronTerm, MarginalStrategy, PrivateMarginals};
pub use strategy::{LinearStrategy, MAX_COUNT, MeasuredStrategy, MeasuredTerm};
pub use stream::{Contribution, CountsBound, StreamFigures, StreamMechanism, StreamSpec};
pub use tree::{TreeFigures, TreeSpec, TreeStream};

use std::sync::Arc;

use num_bigint::BigUint;
use rayon::prelude::*;
use serde::Serialize;

use crate::sampling::{DiscreteGaussian, NoiseSource, exact_ratio, signed};
use crate::{DpError, Result};

/// A total privacy budget in the unit it is kept and charged in: pure ε,
/// or ρ-zCDP. What a [`crate::ledger::Ledger`] holds and what a limited
/// [`Session`] may spend: one type, so that the ledger and the session
/// charge a measurement the same way ([`TotalBudget::charge_for`]).
/// Serialized as `{"PureDp":{"epsilon":…}}` or `{"Zcdp":{"rho":…}}` (the
/// ledger's first line).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub enum TotalBudget {
    /// Pure ε-DP: only Laplace measurements.
    PureDp {
        /// Total ε.
        epsilon: f64,
    },
    /// ρ-zCDP: Gaussian measurements (cost ρ) and Laplace ones (an ε-DP
    /// measurement is ε²/2-zCDP).
    Zcdp {
        /// Total ρ.
        rho: f64,
    },
}

impl TotalBudget {
    /// What a budget of `budget` holds: ε for pure ε-DP; for (ε, δ) the
    /// largest ρ whose exact conversion (CKS20 Corollary 13) is (ε, δ)-DP.
    pub fn holding(budget: crate::PrivacyBudget) -> Result<Self> {
        Ok(match budget {
            crate::PrivacyBudget::Pure { epsilon } => Self::PureDp {
                epsilon: epsilon.get(),
            },
            crate::PrivacyBudget::Approx { epsilon, delta } => Self::Zcdp {
                rho: zcdp_rho_for(epsilon.get(), delta.get())?,
            },
        })
    }

    /// The total, in the budget's unit.
    pub fn total(self) -> f64 {
        match self {
            Self::PureDp { epsilon } => epsilon,
            Self::Zcdp { rho } => rho,
        }
    }

    /// What a measurement costing `cost` is charged, in this budget's unit,
    /// validated: ε under pure ε-DP; under ρ-zCDP its ρ, or ε²/2 for a
    /// pure ε measurement. A zCDP (Gaussian) cost cannot be charged to a
    /// pure budget.
    pub fn charge_for(self, cost: Cost) -> Result<f64> {
        match (self, cost) {
            (Self::PureDp { .. }, Cost::Epsilon(e)) => check_epsilon(e),
            (Self::PureDp { .. }, Cost::Rho(_)) => Err(DpError::InvalidParameter {
                name: "cost",
                reason: "a pure-DP budget cannot pay for a zCDP (Gaussian) measurement".into(),
            }),
            (Self::Zcdp { .. }, Cost::Epsilon(e)) => zcdp_cost_of_pure(e),
            (Self::Zcdp { .. }, Cost::Rho(r)) => check_rho(r),
        }
    }
}

/// What a measurement costs, and so which noise it gets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Cost {
    /// ε-DP by discrete Laplace noise of scale `Δ₁/ε`.
    Epsilon(f64),
    /// ρ-zCDP by discrete Gaussian noise of variance `Δ₂²/(2ρ)` (CKS20
    /// Theorem 14 for integer-valued queries).
    Rho(f64),
}

/// Which noise a measurement received, in the units of the answers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum MeasurementNoise {
    /// Discrete Laplace on the grid: `P[z = kG] ∝ exp(−|k|G/scale)`.
    DiscreteLaplace {
        /// `scale = Δ₁(Ã)/ε`.
        scale: f64,
    },
    /// Discrete Gaussian on the grid: `P[z = kG] ∝ exp(−(kG)²/(2σ²))`.
    DiscreteGaussian {
        /// The standard deviation drawn: `Δ₂(Ã)/√(2ρ)` with `σ²` rounded
        /// up (by a relative 2⁻⁵⁸ at most) to a rational the sampler runs
        /// on machine words.
        sigma: f64,
    },
}

/// The result of a measurement: noisy answers `Ã x + noise`, each an
/// exact multiple of `granularity`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    /// The noisy answers, one per strategy row.
    pub values: Vec<f64>,
    /// `G`: every value is an integer multiple of it.
    pub granularity: f64,
    /// The noise distribution and its scale.
    pub noise: MeasurementNoise,
    /// Variance of the noise on each row: exact for the discrete Laplace
    /// (`2e^{-1/t}/(1−e^{-1/t})²·G²`, `t = scale/G`); for the discrete
    /// Gaussian `σ²`, an upper bound (CKS20 Proposition 19).
    pub variance: f64,
    /// Sensitivity of the measured (quantized) strategy: L1 for Laplace,
    /// L2 for Gaussian, in the units of the answers.
    pub sensitivity: f64,
    /// What the session was charged.
    pub cost: Cost,
    /// The strategy actually measured (quantized, public): reconstruct
    /// with it for exactly unbiased estimates.
    #[serde(skip)]
    pub strategy: Arc<MeasuredStrategy>,
}

impl Measurement {
    /// The measurement in units of `unit` (a power of two: the values stay
    /// exact multiples of the granularity) per count.
    fn in_units(mut self, unit: f64) -> Self {
        if unit == 1.0 {
            return self;
        }
        for v in &mut self.values {
            *v *= unit;
        }
        self.granularity *= unit;
        self.noise = match self.noise {
            MeasurementNoise::DiscreteLaplace { scale } => MeasurementNoise::DiscreteLaplace {
                scale: scale * unit,
            },
            MeasurementNoise::DiscreteGaussian { sigma } => MeasurementNoise::DiscreteGaussian {
                sigma: sigma * unit,
            },
        };
        self.variance *= unit * unit;
        self.sensitivity *= unit;
        self
    }
}

/// A privacy session: the total budget, what has been spent, the noise
/// source. See the [module documentation](self).
///
/// Not `Clone`: a copy would hold a second copy of the remaining budget
/// and replay the same noise.
///
/// ```compile_fail
/// fn needs_clone<T: Clone>() {}
/// needs_clone::<dp_core::Session>();
/// ```
///
/// ```
/// fn needs_debug<T: std::fmt::Debug>() {}
/// needs_debug::<dp_core::Session>();
/// ```
#[derive(Debug)]
pub struct Session {
    /// `None`: unlimited ([`crate::experiments`] sessions only).
    budget: Option<TotalBudget>,
    spent: f64,
    measurements: usize,
    noise: NoiseSource,
}

impl Session {
    /// A pure ε-DP session drawing from operating-system entropy.
    pub fn pure(epsilon: f64) -> Result<Self> {
        let epsilon = check_epsilon(epsilon)?;
        Ok(Self::with_source(
            Some(TotalBudget::PureDp { epsilon }),
            NoiseSource::from_os_entropy()?,
        ))
    }

    /// A ρ-zCDP session drawing from operating-system entropy.
    pub fn zcdp(rho: f64) -> Result<Self> {
        let rho = check_rho(rho)?;
        Ok(Self::with_source(
            Some(TotalBudget::Zcdp { rho }),
            NoiseSource::from_os_entropy()?,
        ))
    }

    /// An (ε,δ)-DP session: a ρ-zCDP session with the largest ρ whose
    /// CKS20 conversion is (ε,δ)-DP ([`zcdp_rho_for`]).
    pub fn approx(epsilon: f64, delta: f64) -> Result<Self> {
        Self::zcdp(zcdp_rho_for(epsilon, delta)?)
    }

    pub(crate) fn with_source(budget: Option<TotalBudget>, noise: NoiseSource) -> Self {
        Self {
            budget,
            spent: 0.0,
            measurements: 0,
            noise,
        }
    }

    /// The total budget (`None`: an unlimited [`crate::experiments`]
    /// session).
    pub fn budget(&self) -> Option<TotalBudget> {
        self.budget
    }

    /// Spent so far, in the budget's unit (ε or ρ; rounded upward).
    pub fn spent(&self) -> f64 {
        self.spent
    }

    /// Left to spend (`+∞` for an unlimited experiments session).
    pub fn remaining(&self) -> f64 {
        self.budget
            .map_or(f64::INFINITY, |b| (b.total() - self.spent).max(0.0))
    }

    /// Number of measurements charged.
    pub fn measurements(&self) -> usize {
        self.measurements
    }

    /// Whether the noise replays from a seed ([`crate::experiments`]).
    pub fn is_reproducible(&self) -> bool {
        self.noise.is_seeded()
    }

    /// Charges `cost` or refuses it, touching nothing, when it would
    /// overspend or does not fit the budget's kind.
    fn charge(&mut self, cost: Cost) -> Result<()> {
        let amount = match (self.budget, cost) {
            (Some(budget), cost) => budget.charge_for(cost)?,
            (None, Cost::Epsilon(e)) => check_epsilon(e)?,
            (None, Cost::Rho(r)) => check_rho(r)?,
        };
        let total = self.budget.map_or(f64::INFINITY, TotalBudget::total);
        let after = add_up(self.spent, amount);
        if after > total {
            return Err(DpError::BudgetExceeded {
                requested: amount,
                remaining: self.remaining(),
            });
        }
        self.spent = if total.is_finite() { after } else { 0.0 };
        self.measurements += 1;
        Ok(())
    }

    /// Measures `strategy` on `data` at `cost`: validates, computes the
    /// exact sensitivity of the quantized strategy, charges the session,
    /// then computes `Ã x` exactly and adds exact discrete noise. On any
    /// error before the charge nothing is spent; the noise is drawn only
    /// after it.
    pub fn measure_linear(
        &mut self,
        strategy: &LinearStrategy,
        data: &PrivateHistogram,
        cost: Cost,
    ) -> Result<Measurement> {
        crate::validate::check_histogram_cells("strategy", strategy.ncols(), data.len())?;
        let q = strategy.quantized()?;
        let plan = NoisePlan::new(q, cost, 1)?;
        self.charge(cost)?;
        let answers = q.apply(data.counts());
        self.add_noise(answers, q, &plan, cost, Arc::new(q.measured(None)))
    }

    /// Adds the exact discrete noise of `plan` to `Ã x / G` (already
    /// charged) and returns the measurement in the answers' units.
    fn add_noise(
        &mut self,
        mut answers: Vec<i128>,
        q: &strategy::QuantizedStrategy,
        plan: &NoisePlan,
        cost: Cost,
        strategy: Arc<MeasuredStrategy>,
    ) -> Result<Measurement> {
        let g = q.granularity();
        // Each chunk of NOISE_CHUNK answers draws from its own stream,
        // split off the session's source in chunk order before any draw:
        // the chunks run on rayon's pool, and a seeded session still gives
        // the same noise on any number of threads.
        let mut streams: Vec<NoiseSource> = (0..answers.len().div_ceil(NOISE_CHUNK))
            .map(|_| self.noise.split())
            .collect();
        answers
            .par_chunks_mut(NOISE_CHUNK)
            .zip(streams.par_iter_mut())
            .try_for_each(|(chunk, noise)| -> Result<()> {
                for a in chunk {
                    let z = match &plan.kind {
                        PlanKind::Laplace { num, den } => signed(noise.discrete_laplace(num, den))?,
                        PlanKind::Gaussian(gaussian) => signed(noise.discrete_gaussian(gaussian))?,
                    };
                    *a = a.checked_add(z).ok_or_else(|| DpError::InvalidParameter {
                        name: "measurement",
                        reason: "noisy answer beyond 2^127".into(),
                    })?;
                }
                Ok(())
            })?;
        // i128 → f64 rounds to the nearest double, which is still a
        // multiple of the power of two G (see Measurement).
        let values = answers.iter().map(|&a| a as f64 * g).collect();
        Ok(Measurement {
            values,
            granularity: g,
            noise: plan.noise_in_units(g),
            variance: plan.variance_in_units(g),
            sensitivity: plan.sensitivity * g,
            cost,
            strategy,
        })
    }
}

/// Answers per noise stream in [`Session::add_noise`].
const NOISE_CHUNK: usize = 1 << 16;

enum PlanKind {
    /// Discrete Laplace of integer scale `num/den`.
    Laplace { num: BigUint, den: BigUint },
    /// Discrete Gaussian of variance `num/den` (at least `Δ₂²/(2ρ)`).
    Gaussian(DiscreteGaussian),
}

/// The exact noise parameters of a measurement, in units of `G`.
struct NoisePlan {
    kind: PlanKind,
    /// Approximate scale (Laplace t, Gaussian σ) for reporting.
    scale: f64,
    sensitivity: f64,
}

impl NoisePlan {
    /// The plan for `cost` on `q`, calibrated to its exact sensitivity
    /// times `scale` (the most one unit moves the data in L1).
    fn new(q: &strategy::QuantizedStrategy, cost: Cost, scale: u64) -> Result<Self> {
        match cost {
            Cost::Epsilon(eps) => {
                // t = Δ₁/ε exactly: ε = a/b ⇒ t = Δ₁ b / a.
                let (a, b) = exact_ratio(check_epsilon(eps)?)?;
                let d1 = q.sensitivity_l1() * scale;
                let sensitivity = to_f64(&d1);
                Ok(Self {
                    kind: PlanKind::Laplace {
                        num: d1 * b,
                        den: a,
                    },
                    scale: sensitivity / eps,
                    sensitivity,
                })
            }
            Cost::Rho(rho) => {
                // σ² = Δ₂²/(2ρ): ρ = a/b ⇒ σ² = Δ₂² b / (2a), rounded up to
                // the finest dyadic rational the machine-word sampler takes
                // (more noise than ρ needs, never less; σ reports it).
                let (a, b) = exact_ratio(check_rho(rho)?)?;
                let d2sq = q.sensitivity_l2_squared() * scale * scale;
                let sensitivity = to_f64(&d2sq).sqrt();
                let gaussian = DiscreteGaussian::rounded_up(d2sq * b, &(a * 2u8));
                Ok(Self {
                    scale: gaussian.variance().sqrt(),
                    kind: PlanKind::Gaussian(gaussian),
                    sensitivity,
                })
            }
        }
    }

    fn noise_in_units(&self, g: f64) -> MeasurementNoise {
        match self.kind {
            PlanKind::Laplace { .. } => MeasurementNoise::DiscreteLaplace {
                scale: self.scale * g,
            },
            PlanKind::Gaussian(_) => MeasurementNoise::DiscreteGaussian {
                sigma: self.scale * g,
            },
        }
    }

    fn variance_in_units(&self, g: f64) -> f64 {
        match self.kind {
            PlanKind::Laplace { .. } => discrete_laplace_variance(self.scale) * g * g,
            PlanKind::Gaussian(_) => self.scale * self.scale * g * g,
        }
    }
}

/// Variance of the discrete Laplace of scale `t` on ℤ:
/// `2 e^{-1/t} / (1 − e^{-1/t})²`.
pub fn discrete_laplace_variance(t: f64) -> f64 {
    let q = (-1.0 / t).exp();
    2.0 * q / (-(-1.0 / t).exp_m1()).powi(2)
}

fn to_f64(v: &BigUint) -> f64 {
    // Exact parsing of the decimal representation, correctly rounded.
    v.to_string().parse().unwrap_or(f64::INFINITY)
}
