//! The privacy a release states and what the ledger is charged for it,
//! in dp-core's vocabulary ([`PrivacyBudget`], [`Cost`], [`LedgerBudget`]).
//!
//! A budget of ε alone is pure ε-DP, answered with discrete Laplace noise
//! and charged ε. A budget of (ε, δ) is answered with discrete Gaussian
//! noise at the largest ρ-zCDP whose exact conversion (Canonne, Kamath and
//! Steinke 2020, Corollary 13) is (ε, δ)-DP, and charged that ρ: the one
//! calibration every plan's figures and every release use.

use dp_core::ledger::LedgerBudget;
use dp_core::{Cost, GaussianCalibration, PrivacyBudget};

use crate::{Error, Result};

/// The budget `(ε, δ)` states, validated (ranges of
/// `dp_core::kernel::accounting`): ε alone is pure ε-DP.
pub fn budget(epsilon: f64, delta: Option<f64>) -> Result<PrivacyBudget> {
    Ok(match delta {
        None => PrivacyBudget::pure(epsilon)?,
        Some(delta) => PrivacyBudget::approx(epsilon, delta)?,
    })
}

/// What a release under `budget` costs: ε, or the zCDP ρ of the exact
/// conversion.
pub fn cost(budget: PrivacyBudget) -> Result<Cost> {
    Ok(dp_core::mechanism::cost_for(
        budget,
        GaussianCalibration::Zcdp,
    )?)
}

/// The ledger budget for a total `budget`: pure ε, or ρ-zCDP
/// ([`LedgerBudget::holding`]).
pub fn ledger_budget(budget: PrivacyBudget) -> Result<LedgerBudget> {
    Ok(LedgerBudget::holding(budget)?)
}

/// What a ledger holding `ledger` is charged for a release costing `cost`,
/// in the ledger's unit ([`LedgerBudget::charge_for`], as the kernel's
/// session charges it): an (ε, δ) release cannot be charged to a pure ε
/// ledger.
pub fn charge(ledger: LedgerBudget, cost: Cost) -> Result<f64> {
    if let (LedgerBudget::PureDp { .. }, Cost::Rho(_)) = (ledger, cost) {
        return Err(Error::BadInput(
            "a ledger holding pure ε cannot be charged for an (ε, δ) release: create one with a \
             total δ"
                .into(),
        ));
    }
    Ok(ledger.charge_for(cost)?)
}

/// The smallest ε (to 1e-9 relative, rounded up) whose CKS20 conversion of
/// ρ-zCDP is (ε, δ)-DP; 0 for ρ = 0.
pub fn epsilon_for(rho: f64, delta: f64) -> f64 {
    if rho <= 0.0 {
        return 0.0;
    }
    // ε = ρ + 2√(ρ ln 1/δ) is always enough (Bun–Steinke Prop. 1.3).
    let mut hi = rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt();
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if hi - lo <= 1e-9 * hi {
            break;
        }
        if dp_core::kernel::zcdp_delta(rho, mid) <= delta {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}
