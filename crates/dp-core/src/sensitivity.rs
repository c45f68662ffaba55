//! Sensitivities of a strategy matrix under add/remove-one-record
//! neighbours (`‖x − x'‖₁ ≤ 1`).
//!
//! Changing one record changes one cell of `x` by one, so `A x` moves by
//! one column of `A`; the sensitivity is the largest column norm
//! (matrix mechanism paper, Proposition 2 / docs/privacy.md).

use dp_linalg::MatRef;

use crate::Result;
use crate::validate::check_matrix;

/// `Δ₁(A) = maxⱼ Σᵢ |Aᵢⱼ|`, the largest L1 column norm: the Laplace
/// mechanism's sensitivity.
pub fn sensitivity_l1(strategy: MatRef<'_, f64>) -> Result<f64> {
    check_matrix("strategy", strategy)?;
    Ok((0..strategy.ncols())
        .map(|j| strategy.col(j).iter().map(|v| v.abs()).sum::<f64>())
        .fold(0.0, f64::max))
}

/// `Δ₂(A) = maxⱼ (Σᵢ Aᵢⱼ²)^{1/2}`, the largest L2 column norm: the
/// Gaussian mechanism's sensitivity.
pub fn sensitivity_l2(strategy: MatRef<'_, f64>) -> Result<f64> {
    check_matrix("strategy", strategy)?;
    Ok((0..strategy.ncols())
        .map(|j| strategy.col(j).norm_l2())
        .fold(0.0, f64::max))
}
