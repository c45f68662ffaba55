//! The least-squares operator of a strategy, from its thin SVD.
//!
//! Everything the matrix mechanism needs from a strategy `A = U Σ Vᵀ`
//! (rank r, singular values above `max(p, n)·ε_mach·σ_max`) follows from
//! the rank-r factors: the estimate `x̂ = A⁺ y = V_r Σ_r⁻¹ U_rᵀ y`, the
//! error profile `(AᵀA)⁺ = V_r Σ_r⁻² V_rᵀ`, and the row space `span(V_r)`
//! for the support test.

use dp_linalg::{Mat, MatRef, ThinSvd, default_rank_tolerance, numerical_rank};

use crate::Result;
use crate::validate::check_nonzero_matrix;

/// Rank-r factors of a strategy's thin SVD.
#[derive(Debug, Clone)]
pub struct StrategyFactors {
    u: Mat<f64>,
    singular_values: Vec<f64>,
    v: Mat<f64>,
}

impl StrategyFactors {
    /// Factors a strategy (non-empty, finite, not identically zero).
    pub fn new(strategy: MatRef<'_, f64>) -> Result<Self> {
        check_nonzero_matrix("strategy", strategy)?;
        let svd = ThinSvd::new(strategy)?;
        let tol = default_rank_tolerance(strategy.nrows(), strategy.ncols(), &svd.singular_values);
        let r = numerical_rank(&svd.singular_values, tol);
        Ok(Self {
            u: svd.u.subcols(0, r).to_owned(),
            singular_values: svd.singular_values[..r].to_vec(),
            v: svd.v.subcols(0, r).to_owned(),
        })
    }

    /// Numerical rank r.
    pub fn rank(&self) -> usize {
        self.singular_values.len()
    }

    /// Domain size n.
    pub fn domain_size(&self) -> usize {
        self.v.nrows()
    }

    /// `x̂ = A⁺ y`, the minimum-norm least-squares estimate.
    pub fn solve(&self, y: &[f64]) -> Vec<f64> {
        let r = self.rank();
        let mut coeffs = vec![0.0; r];
        for (k, c) in coeffs.iter_mut().enumerate() {
            let col = self.u.col(k);
            *c = (0..y.len()).map(|i| col[i] * y[i]).sum::<f64>() / self.singular_values[k];
        }
        (0..self.domain_size())
            .map(|i| (0..r).map(|k| self.v[(i, k)] * coeffs[k]).sum())
            .collect()
    }

    /// `Σ_r⁻¹ V_rᵀ Wᵀ` (r×m): its squared Frobenius norm is
    /// `tr(W (AᵀA)⁺ Wᵀ)` and its squared column norms are the per-query
    /// error factors `(W (AᵀA)⁺ Wᵀ)ᵢᵢ`.
    pub fn whitened_workload_transpose(&self, workload: MatRef<'_, f64>) -> Mat<f64> {
        let mut x = self.v.transpose() * workload.transpose();
        for k in 0..self.rank() {
            let inv = 1.0 / self.singular_values[k];
            for j in 0..x.ncols() {
                x[(k, j)] *= inv;
            }
        }
        x
    }

    /// `‖W − W V_r V_rᵀ‖_F / ‖W‖_F`: the part of the workload outside the
    /// strategy's row space, relative to the workload's size.
    pub fn relative_support_residual(&self, workload: MatRef<'_, f64>) -> f64 {
        let wnorm = workload.norm_l2();
        if wnorm == 0.0 {
            return 0.0;
        }
        let wv = workload * self.v.as_ref();
        let projected = wv.as_ref() * self.v.transpose();
        let residual = workload - projected.as_ref();
        residual.norm_l2() / wnorm
    }
}
