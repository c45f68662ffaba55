//! Square roots of Gram matrices: a factor `R` with `RᵀR = G`.

use faer::{Mat, MatRef};

use crate::{LinalgError, Result, SymmetricEigen};

/// A factor `R` (r×n) with `RᵀR = G` for a symmetric positive
/// semidefinite Gram matrix `G = WᵀW`, from its eigendecomposition
/// `G = U Λ Uᵀ`: `R = Λ_r^{1/2} U_rᵀ` over the eigenvalues above
/// `n·ε·λ_max` (r is the numerical rank of `G`).
///
/// Every total-error quantity of a workload `W` is a function of `G`
/// alone, so `R` stands in for a workload whose rows are too many to
/// build. Fails on non-square or non-finite input and with
/// [`LinalgError::NotPositiveSemidefinite`] when an eigenvalue is below
/// `−10³·n·ε·λ_max`. Only the lower triangle of `G` is read.
pub fn gram_root(gram: MatRef<'_, f64>) -> Result<Mat<f64>> {
    Ok(gram_root_and_spectrum(gram)?.0)
}

/// [`gram_root`] together with the eigenvalues of `G` (ascending, clamped
/// at zero), for callers that also need its conditioning.
pub fn gram_root_and_spectrum(gram: MatRef<'_, f64>) -> Result<(Mat<f64>, Vec<f64>)> {
    let n = gram.nrows();
    let eig = SymmetricEigen::new(gram)?;
    let lmax = eig.values.iter().copied().fold(0.0, f64::max);
    let tol = n as f64 * f64::EPSILON * lmax;
    if let Some(&bad) = eig.values.iter().find(|&&l| l < -1e3 * tol) {
        return Err(LinalgError::NotPositiveSemidefinite { eigenvalue: bad });
    }
    let keep: Vec<usize> = (0..n).filter(|&k| eig.values[k] > tol).collect();
    let root = Mat::from_fn(keep.len(), n, |i, j| {
        let k = keep[i];
        eig.values[k].sqrt() * eig.vectors[(j, k)]
    });
    let mut values: Vec<f64> = eig.values.iter().map(|l| l.max(0.0)).collect();
    values.sort_by(f64::total_cmp);
    Ok((root, values))
}
