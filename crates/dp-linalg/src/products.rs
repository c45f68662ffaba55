//! Products, traces and norms that the error formulas need, computed
//! without forming what need not be formed.

use faer::linalg::matmul::matmul as faer_matmul;
use faer::{Accum, Mat, MatRef};

use crate::{LinalgError, Result};

/// `true` when every entry is finite (no NaN, no ±∞).
pub fn all_finite(a: MatRef<'_, f64>) -> bool {
    a.is_all_finite()
}

/// `A B`.
pub fn matmul(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Result<Mat<f64>> {
    if a.ncols() != b.nrows() {
        return Err(mismatch("matmul", a, b));
    }
    let mut out = Mat::zeros(a.nrows(), b.ncols());
    faer_matmul(
        out.as_mut(),
        Accum::Replace,
        a,
        b,
        1.0,
        faer::get_global_parallelism(),
    );
    Ok(out)
}

/// `Aᵀ B` without forming `Aᵀ`.
pub fn matmul_tn(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Result<Mat<f64>> {
    matmul(a.transpose(), b)
}

/// The Gram matrix `AᵀA` (n×n for a p×n strategy), exactly symmetric.
pub fn gram(a: MatRef<'_, f64>) -> Mat<f64> {
    let mut out = Mat::zeros(a.ncols(), a.ncols());
    faer_matmul(
        out.as_mut(),
        Accum::Replace,
        a.transpose(),
        a,
        1.0,
        faer::get_global_parallelism(),
    );
    symmetrize(&mut out);
    out
}

/// `A Aᵀ` (m×m for an m×n matrix), exactly symmetric.
pub fn outer_gram(a: MatRef<'_, f64>) -> Mat<f64> {
    gram(a.transpose())
}

/// Replaces `a` by `(a + aᵀ)/2` so that later symmetric routines see an
/// exactly symmetric matrix. No-op on non-square input.
pub fn symmetrize(a: &mut Mat<f64>) {
    if a.nrows() != a.ncols() {
        return;
    }
    for j in 0..a.ncols() {
        for i in (j + 1)..a.nrows() {
            let v = 0.5 * (a[(i, j)] + a[(j, i)]);
            a[(i, j)] = v;
            a[(j, i)] = v;
        }
    }
}

/// `tr(A)` of a square matrix.
pub fn trace(a: MatRef<'_, f64>) -> Result<f64> {
    if a.nrows() != a.ncols() {
        return Err(LinalgError::NotSquare {
            what: "trace argument",
            rows: a.nrows(),
            cols: a.ncols(),
        });
    }
    Ok((0..a.nrows()).map(|i| a[(i, i)]).sum())
}

/// `tr(A B) = Σᵢⱼ Aᵢⱼ Bⱼᵢ` in O(mn) without forming `A B`.
pub fn trace_of_product(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Result<f64> {
    if a.ncols() != b.nrows() || a.nrows() != b.ncols() {
        return Err(mismatch("trace_of_product", a, b));
    }
    let mut sum = 0.0;
    // Walk A by columns (faer is column-major) and B by rows.
    for j in 0..a.ncols() {
        let col = a.col(j);
        let row = b.row(j);
        for i in 0..a.nrows() {
            sum += col[i] * row[i];
        }
    }
    Ok(sum)
}

/// Frobenius norm `‖A‖_F`.
pub fn frobenius_norm(a: MatRef<'_, f64>) -> f64 {
    a.norm_l2()
}

fn mismatch(what: &'static str, a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> LinalgError {
    LinalgError::DimensionMismatch {
        what,
        left_rows: a.nrows(),
        left_cols: a.ncols(),
        right_rows: b.nrows(),
        right_cols: b.ncols(),
    }
}
