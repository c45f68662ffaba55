//! LU factorization with partial pivoting, `P A = L U`, of a square matrix.

use faer::linalg::solvers::{DenseSolveCore, PartialPivLu, Solve};
use faer::{Mat, MatRef};

use crate::{Result, require_rhs, require_square_finite};

/// The factors of `P A = L U` (partial pivoting) of a square matrix, for
/// solving general (non-symmetric or indefinite) linear systems such as
/// the KKT systems of small equality-constrained least squares.
///
/// Singularity is not tested here: for a singular `A` the solutions
/// contain non-finite entries, which callers test with
/// [`all_finite`](crate::all_finite).
#[derive(Debug, Clone)]
pub struct Lu {
    lu: PartialPivLu<f64>,
}

impl Lu {
    /// Factors `a`; fails on non-square or non-finite input.
    pub fn factor(a: MatRef<'_, f64>) -> Result<Self> {
        require_square_finite("matrix to factor", a)?;
        Ok(Self {
            lu: a.partial_piv_lu(),
        })
    }

    /// Order `n` of the factored matrix.
    pub fn dim(&self) -> usize {
        self.lu.L().nrows()
    }

    /// Solves `A X = B`.
    pub fn solve(&self, b: MatRef<'_, f64>) -> Result<Mat<f64>> {
        require_rhs("LU solve", self.dim(), b)?;
        Ok(self.lu.solve(b))
    }

    /// The inverse `A⁻¹`.
    pub fn inverse(&self) -> Mat<f64> {
        self.lu.inverse()
    }
}
