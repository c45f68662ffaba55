//! Dense linear algebra for the matrix mechanism, as thin wrappers over
//! [faer](https://docs.rs/faer).
//!
//! This is the only crate of the workspace that depends on faer: the
//! others use the matrix types re-exported here and the kernels below.
//! Products and triangular solves take an explicit [`Par`] (as faer's own
//! kernels do); factorizations use faer's global parallelism setting.
//!
//! The rest of dpmm speaks in terms of the problem (Gram matrix, strategy,
//! error profile); this crate speaks in terms of factorizations, and every
//! factorization that can fail returns a [`LinalgError`] naming the failure
//! instead of panicking. It knows nothing about differential privacy.
//!
//! ```
//! use dp_linalg::{Cholesky, Mat, Par, gram, trace_of_product};
//!
//! // H_2 = [[1, 1], [1, 0], [0, 1]]: its Gram matrix is [[2, 1], [1, 2]].
//! let h2 = Mat::from_fn(3, 2, |i, j| [[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]][i][j]);
//! let g = gram(h2.as_ref(), Par::Seq);
//! let chol = Cholesky::factor(g.as_ref()).expect("H_2 has full column rank");
//! let inv = chol.inverse();
//! // tr(G G⁻¹) = n
//! assert!((trace_of_product(g.as_ref(), inv.as_ref()).unwrap() - 2.0).abs() < 1e-12);
//! ```

mod bases;
mod cholesky;
mod decompositions;
mod gram_root;
mod lu;
mod products;
mod qr;

pub use bases::helmert;
pub use cholesky::Cholesky;
pub use decompositions::{
    SymmetricEigen, ThinSvd, default_rank_tolerance, numerical_rank, pseudo_inverse,
    pseudo_inverse_symmetric,
};
pub use faer::{Col, ColMut, ColRef, Mat, MatMut, MatRef, Par, Row, RowMut, RowRef, Scale};
pub use gram_root::{GramSpectrum, gram_root, gram_root_and_spectrum, gram_root_drops_directions};
pub use lu::Lu;
pub use products::{
    all_finite, dot, frobenius_norm, gemm, gemm_into, gemm_into_view, gram, gram_lower,
    lower_triangle_of_product_into, matmul, matmul_tn, outer_gram, stack_rows, symmetrize, trace,
    trace_of_product,
};
pub use qr::{solve_upper_transpose, triangular_factor, whitened_squared_norm};

/// Why a linear-algebra routine could not produce its result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinalgError {
    /// The matrix given to a Cholesky factorization is not (numerically)
    /// positive definite: the pivot at `pivot` was not positive.
    #[error("matrix is not positive definite (non-positive pivot at index {pivot})")]
    NotPositiveDefinite {
        /// Index of the first non-positive pivot.
        pivot: usize,
    },
    /// A matrix required to be positive semidefinite has the eigenvalue
    /// `eigenvalue`, negative beyond rounding.
    #[error("matrix is not positive semidefinite (eigenvalue {eigenvalue:.3e})")]
    NotPositiveSemidefinite {
        /// The offending (most negative found) eigenvalue.
        eigenvalue: f64,
    },
    /// An iterative eigenvalue or singular value solver did not converge.
    #[error("{what} did not converge")]
    NoConvergence {
        /// Which decomposition failed.
        what: &'static str,
    },
    /// A square matrix was required.
    #[error("{what} must be square, got {rows}x{cols}")]
    NotSquare {
        /// Which argument.
        what: &'static str,
        /// Rows given.
        rows: usize,
        /// Columns given.
        cols: usize,
    },
    /// Two operands have incompatible shapes.
    #[error("dimension mismatch in {what}: {left_rows}x{left_cols} and {right_rows}x{right_cols}")]
    DimensionMismatch {
        /// The operation.
        what: &'static str,
        /// Rows of the left operand.
        left_rows: usize,
        /// Columns of the left operand.
        left_cols: usize,
        /// Rows of the right operand.
        right_rows: usize,
        /// Columns of the right operand.
        right_cols: usize,
    },
    /// A triangular matrix to solve with has a zero on its diagonal.
    #[error("triangular matrix is singular (zero diagonal entry at index {pivot})")]
    Singular {
        /// Index of the first zero diagonal entry.
        pivot: usize,
    },
    /// The matrix contains NaN or infinite entries.
    #[error("{what} contains a non-finite entry")]
    NonFinite {
        /// Which argument.
        what: &'static str,
    },
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, LinalgError>;

pub(crate) fn require_square(what: &'static str, a: MatRef<'_, f64>) -> Result<()> {
    if a.nrows() != a.ncols() {
        return Err(LinalgError::NotSquare {
            what,
            rows: a.nrows(),
            cols: a.ncols(),
        });
    }
    Ok(())
}

/// A right-hand side with `dim` rows for a factorization of order `dim`.
pub(crate) fn require_rhs(what: &'static str, dim: usize, b: MatRef<'_, f64>) -> Result<()> {
    if b.nrows() != dim {
        return Err(LinalgError::DimensionMismatch {
            what,
            left_rows: dim,
            left_cols: dim,
            right_rows: b.nrows(),
            right_cols: b.ncols(),
        });
    }
    Ok(())
}

/// A square matrix with finite entries (what every factorization needs).
pub(crate) fn require_square_finite(what: &'static str, a: MatRef<'_, f64>) -> Result<()> {
    require_square(what, a)?;
    require_finite(what, a)
}

pub(crate) fn require_finite(what: &'static str, a: MatRef<'_, f64>) -> Result<()> {
    if !all_finite(a) {
        return Err(LinalgError::NonFinite { what });
    }
    Ok(())
}
