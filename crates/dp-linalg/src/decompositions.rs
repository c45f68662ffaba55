//! Symmetric eigendecomposition, thin SVD, numerical rank and
//! pseudo-inverses.

use faer::{Mat, MatRef, Side};

use crate::{LinalgError, Result, require_finite, require_square_finite};

/// `A = U diag(λ) Uᵀ` of a symmetric matrix, eigenvalues in nondecreasing
/// order. Only the lower triangle of `A` is read.
#[derive(Debug, Clone)]
pub struct SymmetricEigen {
    /// Eigenvalues, nondecreasing.
    pub values: Vec<f64>,
    /// Orthonormal eigenvectors, one per column, in the order of `values`.
    pub vectors: Mat<f64>,
}

impl SymmetricEigen {
    /// Decomposes the symmetric matrix `a`.
    pub fn new(a: MatRef<'_, f64>) -> Result<Self> {
        require_square_finite("symmetric matrix", a)?;
        let evd = a
            .self_adjoint_eigen(Side::Lower)
            .map_err(|_| LinalgError::NoConvergence {
                what: "symmetric eigendecomposition",
            })?;
        let n = a.nrows();
        let values = (0..n).map(|i| evd.S()[i]).collect();
        Ok(Self {
            values,
            vectors: evd.U().to_owned(),
        })
    }

    /// Eigenvalues only (cheaper: no eigenvectors are accumulated).
    pub fn values_only(a: MatRef<'_, f64>) -> Result<Vec<f64>> {
        require_square_finite("symmetric matrix", a)?;
        a.self_adjoint_eigenvalues(Side::Lower)
            .map_err(|_| LinalgError::NoConvergence {
                what: "symmetric eigenvalues",
            })
    }

    /// `U f(Λ) Uᵀ`: applies a scalar function to the spectrum.
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Mat<f64> {
        let n = self.values.len();
        let scaled = Mat::from_fn(n, n, |i, j| self.vectors[(i, j)] * f(self.values[j]));
        let mut out = scaled.as_ref() * self.vectors.transpose();
        crate::symmetrize(&mut out);
        out
    }
}

/// Thin singular value decomposition `A = U diag(σ) Vᵀ` with `k = min(m, n)`
/// singular values in nonincreasing order.
#[derive(Debug, Clone)]
pub struct ThinSvd {
    /// Left singular vectors, m×k.
    pub u: Mat<f64>,
    /// Singular values, nonincreasing, length k.
    pub singular_values: Vec<f64>,
    /// Right singular vectors, n×k.
    pub v: Mat<f64>,
}

impl ThinSvd {
    /// Decomposes `a` (any shape, at least one row and column).
    pub fn new(a: MatRef<'_, f64>) -> Result<Self> {
        require_finite("matrix to decompose", a)?;
        let svd = a.thin_svd().map_err(|_| LinalgError::NoConvergence {
            what: "singular value decomposition",
        })?;
        let k = a.nrows().min(a.ncols());
        Ok(Self {
            u: svd.U().to_owned(),
            singular_values: (0..k).map(|i| svd.S()[i]).collect(),
            v: svd.V().to_owned(),
        })
    }

    /// Singular values only.
    pub fn values_only(a: MatRef<'_, f64>) -> Result<Vec<f64>> {
        require_finite("matrix to decompose", a)?;
        a.singular_values().map_err(|_| LinalgError::NoConvergence {
            what: "singular values",
        })
    }

    /// Numerical rank with [`default_rank_tolerance`].
    pub fn rank(&self) -> usize {
        let tol = default_rank_tolerance(self.u.nrows(), self.v.nrows(), &self.singular_values);
        numerical_rank(&self.singular_values, tol)
    }
}

/// The rank tolerance NumPy and MATLAB use: `max(m, n) · ε_mach · σ_max`.
pub fn default_rank_tolerance(m: usize, n: usize, singular_values: &[f64]) -> f64 {
    let smax = singular_values.iter().copied().fold(0.0_f64, f64::max);
    (m.max(n) as f64) * f64::EPSILON * smax
}

/// Number of singular values strictly above the absolute tolerance `tol`.
pub fn numerical_rank(singular_values: &[f64], tol: f64) -> usize {
    singular_values.iter().filter(|&&s| s > tol).count()
}

/// Moore–Penrose pseudo-inverse `A⁺ = V Σ⁺ Uᵀ`, treating singular values
/// at or below `tol` (absolute; `None` = [`default_rank_tolerance`]) as zero.
pub fn pseudo_inverse(a: MatRef<'_, f64>, tol: Option<f64>) -> Result<Mat<f64>> {
    let svd = ThinSvd::new(a)?;
    let tol =
        tol.unwrap_or_else(|| default_rank_tolerance(a.nrows(), a.ncols(), &svd.singular_values));
    let k = svd.singular_values.len();
    let inv: Vec<f64> = svd
        .singular_values
        .iter()
        .map(|&s| if s > tol { 1.0 / s } else { 0.0 })
        .collect();
    let v_scaled = Mat::from_fn(a.ncols(), k, |i, j| svd.v[(i, j)] * inv[j]);
    Ok(v_scaled.as_ref() * svd.u.transpose())
}

/// Pseudo-inverse of a symmetric positive semidefinite matrix through its
/// eigendecomposition; eigenvalues at or below `tol` (absolute; `None` =
/// `n · ε_mach · λ_max`) count as zero.
pub fn pseudo_inverse_symmetric(a: MatRef<'_, f64>, tol: Option<f64>) -> Result<Mat<f64>> {
    let evd = SymmetricEigen::new(a)?;
    let lmax = evd.values.iter().map(|v| v.abs()).fold(0.0_f64, f64::max);
    let tol = tol.unwrap_or((a.nrows() as f64) * f64::EPSILON * lmax);
    Ok(evd.map(|l| if l.abs() > tol { 1.0 / l } else { 0.0 }))
}
