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
    let spectrum = GramSpectrum::new(gram)?;
    Ok((spectrum.root(0.0), spectrum.values()))
}

/// Whether [`gram_root`] drops a direction of the n×n `G`: an eigenvalue
/// at or below its rank cut `n·ε·λ_max` (eigenvalues only, no vectors).
/// Then `G` is rank deficient, or carries directions too weak for its
/// rounding to resolve. Fails as [`gram_root`] does on non-square or
/// non-finite input.
pub fn gram_root_drops_directions(gram: MatRef<'_, f64>) -> Result<bool> {
    let values = SymmetricEigen::values_only(gram)?;
    let cut = rank_cut(gram.nrows(), &values);
    Ok(values.iter().any(|&l| l <= cut))
}

/// [`gram_root`]'s rank cut `n·ε·λ_max`.
fn rank_cut(n: usize, values: &[f64]) -> f64 {
    n as f64 * f64::EPSILON * values.iter().copied().fold(0.0, f64::max)
}

/// The eigendecomposition `G = U Λ Uᵀ` behind [`gram_root`], checked
/// positive semidefinite, kept so that roots with different eigenvalue
/// margins come from one decomposition (COA needs the plain root and a
/// certified one whose Gram stays below `G` despite rounding).
#[derive(Debug, Clone)]
pub struct GramSpectrum {
    eig: SymmetricEigen,
    /// Eigenvalues at or below `n·ε·λ_max` count as zero.
    tol: f64,
}

impl GramSpectrum {
    /// Decomposes `G` (lower triangle read). Fails as [`gram_root`] does.
    pub fn new(gram: MatRef<'_, f64>) -> Result<Self> {
        let eig = SymmetricEigen::new(gram)?;
        let tol = rank_cut(gram.nrows(), &eig.values);
        if let Some(&bad) = eig.values.iter().find(|&&l| l < -1e3 * tol) {
            return Err(LinalgError::NotPositiveSemidefinite { eigenvalue: bad });
        }
        Ok(Self { eig, tol })
    }

    fn max_of(values: &[f64]) -> f64 {
        values.iter().copied().fold(0.0, f64::max)
    }

    /// The largest eigenvalue `λ_max` (0 for the zero matrix).
    pub fn lambda_max(&self) -> f64 {
        Self::max_of(&self.eig.values)
    }

    /// The root whose rows are `√(λₖ − shift)₊ uₖᵀ` over the eigenvalues
    /// above `n·ε·λ_max` (`shift = 0`: [`gram_root`]; a positive shift
    /// gives a Gram `⪯ G` with that margin).
    pub fn root(&self, shift: f64) -> Mat<f64> {
        let n = self.eig.values.len();
        let keep: Vec<usize> = (0..n).filter(|&k| self.eig.values[k] > self.tol).collect();
        Mat::from_fn(keep.len(), n, |i, j| {
            let k = keep[i];
            (self.eig.values[k] - shift).max(0.0).sqrt() * self.eig.vectors[(j, k)]
        })
    }

    /// The eigendecomposition itself (eigenvalues ascending, unclamped).
    pub fn eigen(&self) -> &SymmetricEigen {
        &self.eig
    }

    /// The eigenvalues, ascending, clamped at zero.
    pub fn values(&self) -> Vec<f64> {
        let mut values: Vec<f64> = self.eig.values.iter().map(|l| l.max(0.0)).collect();
        values.sort_by(f64::total_cmp);
        values
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The cut is `n·ε·λ_max` (4.4e-16 for n = 2, λ_max = 1): an
    /// eigenvalue of 1e-17 or 0 is dropped, one of 1e-14 is kept, as
    /// [`gram_root`]'s row count shows (away from the cut; at it, the two
    /// eigen-solvers may round differently).
    #[test]
    fn drops_directions_where_the_root_loses_rows() {
        for (small, dropped) in [(0.0, true), (1e-17, true), (1e-14, false), (0.5, false)] {
            let mut g = Mat::<f64>::zeros(2, 2);
            g[(0, 0)] = 1.0;
            g[(1, 1)] = small;
            assert_eq!(gram_root_drops_directions(g.as_ref()).unwrap(), dropped);
            assert_eq!(gram_root(g.as_ref()).unwrap().nrows() == 1, dropped);
        }
        assert!(gram_root_drops_directions(Mat::<f64>::zeros(2, 3).as_ref()).is_err());
    }
}
