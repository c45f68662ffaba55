//! Cholesky factorization `A = L Lᵀ` of a symmetric positive definite matrix.

use faer::linalg::solvers::{DenseSolveCore, Llt, LltError, Solve};
use faer::linalg::triangular_solve;
use faer::prelude::Reborrow;
use faer::{Mat, MatMut, MatRef, Par, Side};

use crate::{LinalgError, Result, require_rhs, require_square, require_square_finite};

/// The Cholesky factor `L` (lower triangular, positive diagonal) of a
/// symmetric positive definite matrix `A = L Lᵀ`.
///
/// Only the lower triangle of `A` is read. Failure to factor is the
/// positive-definiteness test used by the optimizers (COA's Armijo search
/// tests `X ≻ 0` this way), so it is a typed error, never a panic.
#[derive(Debug, Clone)]
pub struct Cholesky {
    llt: Llt<f64>,
}

impl Cholesky {
    /// Factors `a`. Fails with [`LinalgError::NotPositiveDefinite`] when a
    /// pivot is not positive, and on non-square or non-finite input.
    pub fn factor(a: MatRef<'_, f64>) -> Result<Self> {
        require_square_finite("matrix to factor", a)?;
        match a.llt(Side::Lower) {
            Ok(llt) => Ok(Self { llt }),
            Err(LltError::NonPositivePivot { index }) => {
                Err(LinalgError::NotPositiveDefinite { pivot: index })
            }
        }
    }

    /// Order `n` of the factored matrix.
    pub fn dim(&self) -> usize {
        self.llt.L().nrows()
    }

    /// The lower-triangular factor `L`.
    pub fn lower(&self) -> MatRef<'_, f64> {
        self.llt.L()
    }

    /// `log det A = 2 Σ log Lᵢᵢ`.
    pub fn log_det(&self) -> f64 {
        let l = self.llt.L();
        2.0 * (0..l.nrows()).map(|i| l[(i, i)].ln()).sum::<f64>()
    }

    /// Solves `A X = B`.
    pub fn solve(&self, b: MatRef<'_, f64>) -> Result<Mat<f64>> {
        self.check_rhs(b)?;
        let mut x = b.to_owned();
        self.llt.solve_in_place(x.as_mut());
        Ok(x)
    }

    /// Solves `A X = B` in place (`b` is overwritten with `X`).
    pub fn solve_in_place(&self, b: MatMut<'_, f64>) -> Result<()> {
        self.check_rhs(b.rb())?;
        self.llt.solve_in_place(b);
        Ok(())
    }

    /// Overwrites `b` with `L⁻¹ b` (forward substitution).
    pub fn solve_lower_in_place(&self, b: MatMut<'_, f64>, par: Par) -> Result<()> {
        self.check_rhs(b.rb())?;
        triangular_solve::solve_lower_triangular_in_place(self.llt.L(), b, par);
        Ok(())
    }

    /// Overwrites `b` with `L⁻ᵀ b` (back substitution).
    pub fn solve_lower_transpose_in_place(&self, b: MatMut<'_, f64>, par: Par) -> Result<()> {
        self.check_rhs(b.rb())?;
        triangular_solve::solve_upper_triangular_in_place(self.llt.L().transpose(), b, par);
        Ok(())
    }

    /// The inverse `A⁻¹` (symmetric).
    pub fn inverse(&self) -> Mat<f64> {
        self.llt.inverse()
    }

    /// `tr(A⁻¹ B)` for square `B`, by solving `A Y = B` (no explicit inverse).
    pub fn trace_inverse_times(&self, b: MatRef<'_, f64>) -> Result<f64> {
        require_square("right operand", b)?;
        self.check_rhs(b)?;
        let mut y = b.to_owned();
        self.solve_in_place(y.as_mut())?;
        Ok((0..y.nrows()).map(|i| y[(i, i)]).sum())
    }

    /// `tr(A⁻¹ B) = Σᵢⱼ (A⁻¹)ᵢⱼ Bᵢⱼ` for symmetric `B` (only that
    /// symmetry makes the elementwise sum the trace), through the explicit
    /// inverse: `2n³/3` flops against `2n³` for [`Self::trace_inverse_times`].
    pub fn trace_inverse_times_symmetric(&self, b: MatRef<'_, f64>) -> Result<f64> {
        require_square("right operand", b)?;
        self.check_rhs(b)?;
        let inv = self.inverse();
        // Column by column through faer's SIMD inner product (as
        // [`crate::dot`]).
        Ok((0..b.ncols())
            .map(|j| inv.col(j).transpose() * b.col(j))
            .sum())
    }

    fn check_rhs(&self, b: MatRef<'_, f64>) -> Result<()> {
        require_rhs("Cholesky solve", self.dim(), b)
    }
}
