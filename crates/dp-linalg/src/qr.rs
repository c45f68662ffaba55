//! The triangular factor of a tall matrix, taken over row blocks.

use faer::linalg::matmul::triangular::{BlockStructure, matmul as triangular_matmul};
use faer::linalg::triangular_inverse::invert_upper_triangular;
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{Accum, Mat, MatRef, Par};

use crate::{LinalgError, Result, require_finite, require_rhs, require_square};

/// Entries of a row block each QR step factors beside the running factor
/// (8 MiB of f64).
const BLOCK_ENTRIES: usize = 1 << 20;

/// The upper-trapezoidal factor `R` (min(m, n)×n) of a Householder QR of
/// `A` (m×n): `RᵀR = AᵀA`, and, Householder QR being backward stable,
/// R's singular values are A's to A's own rounding (`ε·‖A‖`). The
/// eigenvalues of a formed `AᵀA` are accurate only to `ε·‖A‖²`, which
/// loses every singular value below about `√ε·σ_max`; R keeps them.
///
/// Taken over row blocks as a sequential tall-skinny QR (Demmel, Grigori,
/// Hoemmen and Langou, "Communication-optimal parallel and sequential QR
/// and LU factorizations", SIAM J. Sci. Comput. 34(1), 2012, §3):
/// `R ← R([R; next rows])`, so the memory is O(n² + block), never a copy
/// of A. Blocks have at least n rows, so the repeated n rows of R add at
/// most a factor 2 to the O(mn²) work. Fails on a non-finite entry.
pub fn triangular_factor(a: MatRef<'_, f64>) -> Result<Mat<f64>> {
    let n = a.ncols().max(1);
    triangular_factor_by_blocks(a, (BLOCK_ENTRIES / n).max(n))
}

/// `R⁻ᵀ B` for a square upper-triangular `R` (only its upper triangle is
/// read) with a nonzero diagonal: forward substitution with `Rᵀ`, no
/// product `RᵀR` formed and no inverse. Triangular solves are backward
/// stable (Higham, *Accuracy and Stability of Numerical Algorithms*,
/// Thm. 8.5), so with R from [`triangular_factor`] of A this whitens by
/// A's own conditioning, not by that of a formed `AᵀA`. Fails on a
/// non-square R, mismatched B, a zero on R's diagonal or non-finite input.
pub fn solve_upper_transpose(r: MatRef<'_, f64>, b: MatRef<'_, f64>, par: Par) -> Result<Mat<f64>> {
    require_square("triangular factor", r)?;
    require_rhs("triangular solve", r.nrows(), b)?;
    require_finite("triangular factor", r)?;
    require_finite("right-hand side", b)?;
    if let Some(i) = (0..r.nrows()).find(|&i| r[(i, i)] == 0.0) {
        return Err(LinalgError::Singular { pivot: i });
    }
    let mut x = b.to_owned();
    solve_lower_triangular_in_place(r.transpose(), x.as_mut(), par);
    Ok(x)
}

/// `‖B R⁻¹‖²_F` for a square upper-triangular `R` (only its upper
/// triangle is read) with a nonzero diagonal and a tall `B`: B's rows
/// whitened by R, over row blocks of about 8 MiB (never a copy of B).
/// R's triangular inverse is formed once (its rounding, like a solve's,
/// is of order `κ(R)·ε` relative) and each block is multiplied by it as a
/// triangular product: half the work of a dense product, at matrix-product
/// speed. Fails as [`solve_upper_transpose`] does.
pub fn whitened_squared_norm(r: MatRef<'_, f64>, b: MatRef<'_, f64>, par: Par) -> Result<f64> {
    require_square("triangular factor", r)?;
    require_rhs("whitening", r.nrows(), b.transpose())?;
    require_finite("triangular factor", r)?;
    require_finite("matrix to whiten", b)?;
    if let Some(i) = (0..r.nrows()).find(|&i| r[(i, i)] == 0.0) {
        return Err(LinalgError::Singular { pivot: i });
    }
    let n = r.nrows();
    let mut inverse = Mat::<f64>::zeros(n, n);
    invert_upper_triangular(inverse.as_mut(), r, par);
    let rows = (4 * BLOCK_ENTRIES / n.max(1)).max(1);
    let mut product = Mat::<f64>::zeros(rows.min(b.nrows()), n);
    let mut total = 0.0;
    let mut start = 0;
    while start < b.nrows() {
        let take = rows.min(b.nrows() - start);
        triangular_matmul(
            product.as_mut().subrows_mut(0, take),
            BlockStructure::Rectangular,
            Accum::Replace,
            b.subrows(start, take),
            BlockStructure::Rectangular,
            inverse.as_ref(),
            BlockStructure::TriangularUpper,
            1.0,
            par,
        );
        total += product.as_ref().subrows(0, take).norm_l2().powi(2);
        start += take;
    }
    Ok(total)
}

fn triangular_factor_by_blocks(a: MatRef<'_, f64>, block_rows: usize) -> Result<Mat<f64>> {
    require_finite("matrix to factor", a)?;
    let (m, n) = a.shape();
    let mut r = Mat::<f64>::zeros(0, n);
    let mut start = 0;
    while start < m {
        let take = block_rows.max(1).min(m - start);
        let k = r.nrows();
        let mut stacked = Mat::<f64>::zeros(k + take, n);
        stacked
            .as_mut()
            .submatrix_mut(0, 0, k, n)
            .copy_from(r.as_ref());
        stacked
            .as_mut()
            .submatrix_mut(k, 0, take, n)
            .copy_from(a.submatrix(start, 0, take, n));
        r = stacked.qr().thin_R().to_owned();
        start += take;
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{ThinSvd, gram};
    use faer::Par;

    fn noise(m: usize, n: usize, seed: u64) -> Mat<f64> {
        Mat::from_fn(m, n, |i, j| {
            let x = (i as u64 * 7919 + j as u64 * 104_729 + seed * 15_485_863) % 1_000_003;
            x as f64 / 1_000_003.0 - 0.5
        })
    }

    /// `A = U diag(σ) Vᵀ` with orthonormal U (m×n) and V (n×n) and the
    /// given σ.
    fn with_singular_values(m: usize, sigma: &[f64]) -> Mat<f64> {
        let n = sigma.len();
        let u = noise(m, n, 1).qr().compute_thin_Q();
        let v = noise(n, n, 2).qr().compute_Q();
        let us = Mat::from_fn(m, n, |i, j| u[(i, j)] * sigma[j]);
        us.as_ref() * v.transpose()
    }

    /// Singular values spanning eight decades come back from R to 1e-6
    /// relative: the smallest, 1e-8 of the largest, is at the rounding
    /// level of `AᵀA` (1e-16 of its largest eigenvalue), yet R keeps it.
    #[test]
    fn keeps_singular_values_the_gram_loses() {
        let sigma: Vec<f64> = (0..9).map(|k| 10f64.powi(-k)).collect();
        let a = with_singular_values(40, &sigma);
        for block in [1, 4, 9, 40] {
            let r = triangular_factor_by_blocks(a.as_ref(), block).unwrap();
            let mut got = ThinSvd::values_only(r.as_ref()).unwrap();
            got.sort_by(|x, y| y.total_cmp(x));
            for (s, g) in sigma.iter().zip(&got) {
                assert!((g - s).abs() <= 1e-6 * s, "block {block}: {g} vs {s}");
            }
        }
    }

    /// `RᵀR = AᵀA` to rounding and R is upper trapezoidal with min(m, n)
    /// rows, for tall and wide A and blocks of every size (including
    /// blocks shorter than n and the whole matrix at once).
    #[test]
    fn factor_reproduces_the_gram() {
        for (m, n) in [(37, 6), (5, 9), (1, 4), (12, 12)] {
            let a = noise(m, n, 3);
            let g = gram(a.as_ref(), Par::Seq);
            for block in [1, 2, 5, 36, 37, 100] {
                let r = triangular_factor_by_blocks(a.as_ref(), block).unwrap();
                assert_eq!(r.shape(), (m.min(n), n));
                let rtr = gram(r.as_ref(), Par::Seq);
                for i in 0..n {
                    for j in 0..n {
                        assert!((rtr[(i, j)] - g[(i, j)]).abs() <= 1e-13 * m as f64);
                        if i < r.nrows() && j < i {
                            assert_eq!(r[(i, j)], 0.0);
                        }
                    }
                }
            }
        }
        assert_eq!(
            triangular_factor(Mat::<f64>::zeros(0, 3).as_ref())
                .unwrap()
                .shape(),
            (0, 3)
        );
    }

    #[test]
    fn refuses_non_finite_entries() {
        let mut a = noise(4, 3, 5);
        a[(2, 1)] = f64::NAN;
        assert!(triangular_factor(a.as_ref()).is_err());
    }

    /// `‖B R⁻¹‖²_F` equals the squared norm of `R⁻ᵀ Bᵀ` by forward
    /// substitution, for B of one row, of fewer rows than a block and of
    /// several blocks; a mismatched B and a zero pivot are refused.
    #[test]
    fn whitening_equals_the_triangular_solve() {
        let n = 7;
        let a = noise(30, n, 4);
        let a = Mat::from_fn(30, n, |i, j| a[(i, j)] + f64::from(u8::from(i == j)));
        let r = triangular_factor(a.as_ref()).unwrap();
        for m in [1, 5, (4 * BLOCK_ENTRIES / n) * 2 + 3] {
            let b = noise(m, n, 6);
            let by_solve = solve_upper_transpose(r.as_ref(), b.transpose(), Par::Seq)
                .unwrap()
                .norm_l2()
                .powi(2);
            for par in [Par::Seq, Par::rayon(0)] {
                let got = whitened_squared_norm(r.as_ref(), b.as_ref(), par).unwrap();
                assert!(
                    (got - by_solve).abs() <= 1e-12 * by_solve,
                    "{m}: {got} vs {by_solve}"
                );
            }
        }
        let wrong = noise(4, n + 1, 7);
        assert!(whitened_squared_norm(r.as_ref(), wrong.as_ref(), Par::Seq).is_err());
        let mut singular = r.clone();
        singular[(3, 3)] = 0.0;
        assert!(
            whitened_squared_norm(singular.as_ref(), noise(4, n, 8).as_ref(), Par::Seq).is_err()
        );
    }
}
