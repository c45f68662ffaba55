//! Noise calibration: how much Laplace or Gaussian noise a strategy row
//! needs for a privacy budget.
//!
//! * ε-DP: Laplace noise of scale `b = Δ₁(A)/ε` on every strategy row
//!   (variance `2b²`).
//! * (ε,δ)-DP: Gaussian noise of standard deviation `σ = Δ₂(A) · c(ε,δ)`,
//!   where `c` is one of the published calibrations of
//!   [`GaussianCalibration`]. Releases use the zCDP calibration of the
//!   discrete Gaussian ([`GaussianCalibration::Zcdp`], what
//!   [`crate::MatrixMechanism::new`] and an (ε,δ) session charge);
//!   `GaussianCalibration::default()` is the exact analytic calibration of
//!   Balle and Wang (2018), the smallest σ of a continuous Gaussian that is
//!   private, which the experiments' error figures use.

use serde::{Deserialize, Serialize};

use crate::privacy::{Delta, Epsilon, PrivacyBudget};
use crate::sensitivity::{sensitivity_l1, sensitivity_l2};
use crate::{DpError, Result};
use dp_linalg::MatRef;

/// A rule turning (ε, δ) into the Gaussian noise multiplier `c(ε,δ)`, so
/// that `σ = Δ₂ · c(ε,δ)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum GaussianCalibration {
    /// Dwork and Roth (2014), Theorem A.1: `c = √(2 ln(1.25/δ)) / ε`.
    /// Its proof needs ε < 1; refused otherwise.
    Classic,
    /// The COA paper (Yuan et al., KDD 2016, §2): `c = √(2 ln(2/δ)) / ε`
    /// (the paper writes σ = Θ(Q)/h(ε,δ) with h = ε/√(2 ln(2/δ))). It rests
    /// on the same tail argument as the classic rule, so it is accepted
    /// only for ε ≤ 1.
    Coa,
    /// The projection-mechanism paper (Nikolov, Theorem 2.2 of its
    /// preliminaries): `c = (0.5 √ε + √(2 ln(1/δ))) / ε`, accepted for
    /// ε ≤ 1 (the regime of that paper).
    Projection,
    /// Balle and Wang (ICML 2018), Theorem 8: the smallest σ with
    /// `Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ`, found by bisection
    /// to machine precision. Exact (necessary and sufficient) for every
    /// ε > 0.
    #[default]
    Analytic,
    /// Discrete Gaussian under zCDP (Canonne, Kamath and Steinke 2020):
    /// `c = 1/√(2ρ)` with ρ the largest zCDP budget whose exact conversion
    /// (their Corollary 13) is (ε,δ)-DP. The calibration of an (ε,δ)
    /// [`crate::Session`]; valid for every ε in range.
    Zcdp,
}

impl GaussianCalibration {
    /// Name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Classic => "classic",
            Self::Coa => "coa",
            Self::Projection => "projection",
            Self::Analytic => "analytic",
            Self::Zcdp => "zcdp",
        }
    }

    /// Parses a name produced by [`Self::name`].
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "classic" => Ok(Self::Classic),
            "coa" => Ok(Self::Coa),
            "projection" => Ok(Self::Projection),
            "analytic" => Ok(Self::Analytic),
            "zcdp" => Ok(Self::Zcdp),
            other => Err(DpError::InvalidParameter {
                name: "gaussian calibration",
                reason: format!(
                    "unknown calibration '{other}' (expected classic, coa, projection, analytic or zcdp)"
                ),
            }),
        }
    }

    /// The multiplier `c(ε,δ)` for unit L2 sensitivity.
    pub fn multiplier(self, epsilon: Epsilon, delta: Delta) -> Result<f64> {
        let (eps, del) = (epsilon.get(), delta.get());
        let needs_small_eps = |max: f64, strict: bool| {
            if eps > max || (strict && eps >= max) {
                Err(DpError::CalibrationOutOfRange {
                    calibration: self.name(),
                    reason: format!(
                        "its privacy proof needs epsilon {} {max}, got {eps}; use the analytic calibration",
                        if strict { "<" } else { "<=" }
                    ),
                })
            } else {
                Ok(())
            }
        };
        match self {
            Self::Classic => {
                needs_small_eps(1.0, true)?;
                Ok((2.0 * (1.25 / del).ln()).sqrt() / eps)
            }
            Self::Coa => {
                needs_small_eps(1.0, false)?;
                Ok((2.0 * (2.0 / del).ln()).sqrt() / eps)
            }
            Self::Projection => {
                needs_small_eps(1.0, false)?;
                Ok((0.5 * eps.sqrt() + (2.0 * (1.0 / del).ln()).sqrt()) / eps)
            }
            Self::Analytic => analytic_gaussian_sigma(1.0, eps, del),
            Self::Zcdp => Ok((0.5 / crate::kernel::zcdp_rho_for(eps, del)?).sqrt()),
        }
    }
}

/// The privacy profile of the Gaussian mechanism (Balle and Wang 2018,
/// Theorem 8): the smallest δ for which noise `N(0, σ²)` on a query of L2
/// sensitivity `Δ` is (ε,δ)-DP:
///
/// `δ(σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)`.
pub fn gaussian_delta_for_sigma(sensitivity: f64, epsilon: f64, sigma: f64) -> f64 {
    let a = sensitivity / (2.0 * sigma);
    let b = epsilon * sigma / sensitivity;
    let first = normal_cdf(a - b);
    // e^ε Φ(−a − b) evaluated in log space so that large ε does not overflow.
    let tail = normal_cdf(-a - b);
    let second = if tail > 0.0 {
        (epsilon + tail.ln()).exp()
    } else {
        0.0
    };
    (first - second).max(0.0)
}

/// Standard normal CDF `Φ(x) = erfc(−x/√2)/2`, accurate in both tails.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// The analytic Gaussian mechanism's σ (Balle and Wang 2018, Theorem 8 and
/// Algorithm 1): the smallest σ with `δ(σ) ≤ δ`, for L2 sensitivity
/// `sensitivity`. `δ(σ)` is strictly decreasing in σ, so a bracketing
/// bisection in log σ converges to machine precision.
pub fn analytic_gaussian_sigma(sensitivity: f64, epsilon: f64, delta: f64) -> Result<f64> {
    Epsilon::new(epsilon)?;
    Delta::new(delta)?;
    if !(sensitivity.is_finite() && sensitivity > 0.0) {
        return Err(DpError::InvalidParameter {
            name: "sensitivity",
            reason: format!("must be finite and > 0, got {sensitivity}"),
        });
    }
    let profile = |s: f64| gaussian_delta_for_sigma(sensitivity, epsilon, s);
    // Bracket: lo too small (δ(lo) > δ), hi large enough (δ(hi) ≤ δ).
    let mut hi = sensitivity * (2.0 * (1.25 / delta).ln()).sqrt() / epsilon.min(1.0);
    let mut doublings = 0;
    while profile(hi) > delta {
        hi *= 2.0;
        doublings += 1;
        if doublings > 200 || !hi.is_finite() {
            return Err(DpError::NotConverged {
                solver: "analytic Gaussian calibration",
                reason: "could not bracket sigma".into(),
            });
        }
    }
    let mut lo = hi;
    while profile(lo) <= delta {
        lo *= 0.5;
        if lo < f64::MIN_POSITIVE * 1e10 {
            // δ(σ) ≤ δ for every σ this small: cannot happen for δ < 1, but
            // never loop forever on a pathological input.
            return Err(DpError::NotConverged {
                solver: "analytic Gaussian calibration",
                reason: "could not bracket sigma".into(),
            });
        }
    }
    for _ in 0..200 {
        let mid = (lo * hi).sqrt();
        if mid <= lo || mid >= hi {
            break;
        }
        if profile(mid) > delta {
            lo = mid;
        } else {
            hi = mid;
        }
        if (hi - lo) <= hi * 4.0 * f64::EPSILON {
            break;
        }
    }
    // `hi` satisfies δ(hi) ≤ δ as evaluated; rounding outward by a few
    // ulp more covers the evaluation error of δ(σ) (erfc to ~1 ulp), so
    // the σ returned is at least the exact one.
    // (δ(σ) as evaluated is not monotone at the ulp scale: keep `hi` if
    // the widened value evaluates above δ.)
    let widened = hi * (1.0 + 16.0 * f64::EPSILON);
    Ok(if profile(widened) <= delta {
        widened
    } else {
        hi
    })
}

/// Which noise distribution a calibration uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NoiseDistribution {
    /// Laplace noise (ε-DP).
    Laplace,
    /// Gaussian noise ((ε,δ)-DP).
    Gaussian,
}

/// The noise added to each measured strategy row: its distribution and
/// scale (Laplace `b` or Gaussian `σ`), already multiplied by the
/// strategy's sensitivity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NoiseCalibration {
    /// The distribution.
    pub distribution: NoiseDistribution,
    /// Laplace scale `b = Δ₁/ε`, or Gaussian standard deviation
    /// `σ = Δ₂ · c(ε,δ)`.
    pub scale: f64,
}

impl NoiseCalibration {
    /// Laplace noise for ε-DP: `b = Δ₁/ε` (Dwork et al. 2006).
    pub fn laplace(sensitivity_l1: f64, epsilon: Epsilon) -> Result<Self> {
        check_sensitivity(sensitivity_l1)?;
        Ok(Self {
            distribution: NoiseDistribution::Laplace,
            scale: sensitivity_l1 / epsilon.get(),
        })
    }

    /// Gaussian noise for (ε,δ)-DP: `σ = Δ₂ · c(ε,δ)`.
    pub fn gaussian(
        sensitivity_l2: f64,
        epsilon: Epsilon,
        delta: Delta,
        calibration: GaussianCalibration,
    ) -> Result<Self> {
        check_sensitivity(sensitivity_l2)?;
        Ok(Self {
            distribution: NoiseDistribution::Gaussian,
            scale: sensitivity_l2 * calibration.multiplier(epsilon, delta)?,
        })
    }

    /// The calibration a strategy matrix needs for a budget: Laplace with
    /// its L1 sensitivity for pure DP, Gaussian with its L2 sensitivity for
    /// approximate DP.
    pub fn for_strategy(
        strategy: MatRef<'_, f64>,
        budget: PrivacyBudget,
        calibration: GaussianCalibration,
    ) -> Result<Self> {
        match budget {
            PrivacyBudget::Pure { epsilon } => Self::laplace(sensitivity_l1(strategy)?, epsilon),
            PrivacyBudget::Approx { epsilon, delta } => {
                Self::gaussian(sensitivity_l2(strategy)?, epsilon, delta, calibration)
            }
        }
    }

    /// Variance of the noise on one row: `2b²` (Laplace) or `σ²` (Gaussian).
    pub fn variance(&self) -> f64 {
        match self.distribution {
            NoiseDistribution::Laplace => 2.0 * self.scale * self.scale,
            NoiseDistribution::Gaussian => self.scale * self.scale,
        }
    }
}

fn check_sensitivity(s: f64) -> Result<()> {
    if s.is_finite() && s > 0.0 {
        Ok(())
    } else {
        Err(DpError::InvalidParameter {
            name: "sensitivity",
            reason: format!("must be finite and > 0, got {s} (is the strategy zero?)"),
        })
    }
}
