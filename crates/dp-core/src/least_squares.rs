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

/// Entries of W per block of [`StrategyFactors::relative_support_residual`]
/// (8 MiB).
const SUPPORT_BLOCK_ENTRIES: usize = 1 << 20;

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

    /// `‖Σ_r⁻¹ V_rᵀ Wᵀ‖²_F = tr(W (AᵀA)⁺ Wᵀ)`, over blocks of about
    /// [`SUPPORT_BLOCK_ENTRIES`] entries of W (never an r×m copy): W's own
    /// rows against A's singular factors, so no rounding of `WᵀW` or of a
    /// triangular factor of W enters.
    pub fn whitened_squared_norm(&self, workload: MatRef<'_, f64>) -> f64 {
        let rows = (SUPPORT_BLOCK_ENTRIES / workload.ncols().max(1)).max(1);
        let mut total = 0.0;
        let mut start = 0;
        while start < workload.nrows() {
            let block = workload.subrows(start, rows.min(workload.nrows() - start));
            let wv = block * self.v.as_ref();
            for (k, &s) in self.singular_values.iter().enumerate() {
                let col = wv.col(k);
                total += (0..col.nrows()).map(|i| (col[i] / s).powi(2)).sum::<f64>();
            }
            start += block.nrows();
        }
        total
    }

    /// `‖W − W V_r V_rᵀ‖_F / ‖W‖_F`: the part of the workload outside the
    /// strategy's row space, relative to the workload's size. Formed
    /// explicitly (the difference `‖W‖² − ‖WV_r‖²` would cancel away a
    /// residual of 1e-8), over blocks of about [`SUPPORT_BLOCK_ENTRIES`]
    /// entries of W, so a tall workload is never copied whole.
    ///
    /// A strategy of full column rank spans every workload: `V_r` is then
    /// square and orthogonal, the residual is zero, and no product is formed.
    pub fn relative_support_residual(&self, workload: MatRef<'_, f64>) -> f64 {
        if self.rank() == self.domain_size() {
            return 0.0;
        }
        let rows = (SUPPORT_BLOCK_ENTRIES / workload.ncols().max(1)).max(1);
        self.relative_support_residual_by_blocks(workload, rows)
    }

    fn relative_support_residual_by_blocks(&self, workload: MatRef<'_, f64>, rows: usize) -> f64 {
        let wnorm = workload.norm_l2();
        if wnorm == 0.0 {
            return 0.0;
        }
        let mut residual = 0.0_f64;
        let mut start = 0;
        while start < workload.nrows() {
            let block = workload.subrows(start, rows.min(workload.nrows() - start));
            let wv = block * self.v.as_ref();
            let projected = wv.as_ref() * self.v.transpose();
            residual = residual.hypot((block - projected.as_ref()).norm_l2());
            start += block.nrows();
        }
        residual / wnorm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of any height give the residual formed whole, on a strategy
    /// that misses one direction of W by 3e-6 of its norm and one that
    /// misses none.
    #[test]
    fn the_support_residual_does_not_depend_on_the_blocks() {
        let (m, n) = (37, 6);
        let mut w = Mat::from_fn(m, n, |i, j| (((i * 5 + j * 3) % 7) as f64 - 3.0) / 2.0);
        for i in 0..m {
            w[(i, 5)] = 3e-6 * ((i % 4) as f64 - 1.5);
        }
        let misses = Mat::from_fn(5, n, |i, j| f64::from(u8::from(i == j)));
        let spans = Mat::<f64>::identity(n, n);
        for (a, missing) in [(misses, true), (spans, false)] {
            let f = StrategyFactors::new(a.as_ref()).unwrap_or_else(|e| panic!("{e}"));
            let whole = {
                let projected = (w.as_ref() * f.v.as_ref()) * f.v.transpose();
                (w.as_ref() - projected.as_ref()).norm_l2() / w.norm_l2()
            };
            assert_eq!(whole > 1e-7, missing, "{whole}");
            for rows in [1, 2, 5, 36, 37, 100] {
                let r = f.relative_support_residual_by_blocks(w.as_ref(), rows);
                assert!(
                    (r - whole).abs() <= 1e-12 * whole.max(1e-300) + 1e-18,
                    "{rows}: {r} vs {whole}"
                );
            }
            assert_eq!(
                f.relative_support_residual(w.as_ref()),
                f.relative_support_residual_by_blocks(w.as_ref(), m)
            );
        }
    }
}
