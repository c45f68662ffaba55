//! Products, traces and norms that the error formulas need, computed
//! without forming what need not be formed.

use faer::linalg::matmul::matmul as faer_matmul;
use faer::linalg::matmul::triangular::{BlockStructure, matmul as faer_triangular_matmul};
use faer::{Accum, Mat, MatMut, MatRef, Par};

use crate::{LinalgError, Result};

/// `true` when every entry is finite (no NaN, no ±∞).
pub fn all_finite(a: MatRef<'_, f64>) -> bool {
    a.is_all_finite()
}

/// `Σᵢ aᵢ bᵢ` over the common length of two slices, by faer's SIMD
/// inner product (several partial sums at once: a plain iterator sum is
/// one sequential dependency chain, several times slower on long
/// vectors). The iterative solvers' vector kernel.
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    let k = a.len().min(b.len());
    faer::ColRef::from_slice(&a[..k]).transpose() * faer::ColRef::from_slice(&b[..k])
}

/// `dst ← A B` with parallelism `par`.
///
/// The unchecked kernel behind [`matmul`], for the optimizers' inner
/// loops whose operand shapes hold by construction: `dst` must be
/// `A.nrows() × B.ncols()` and `A.ncols() == B.nrows()` (faer asserts
/// this and panics otherwise). Public entry points use [`matmul`].
pub fn gemm_into(dst: &mut Mat<f64>, a: MatRef<'_, f64>, b: MatRef<'_, f64>, par: Par) {
    gemm_into_view(dst.as_mut(), a, b, par);
}

/// `dst ← A B` into any view (e.g. a row-major slice), with the shape
/// precondition of [`gemm_into`].
pub fn gemm_into_view(dst: MatMut<'_, f64>, a: MatRef<'_, f64>, b: MatRef<'_, f64>, par: Par) {
    faer_matmul(dst, Accum::Replace, a, b, 1.0, par);
}

/// `A B` into a new matrix, with the shape precondition of [`gemm_into`].
pub fn gemm(a: MatRef<'_, f64>, b: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    let mut out = Mat::zeros(a.nrows(), b.ncols());
    gemm_into(&mut out, a, b, par);
    out
}

/// `A B`, or [`LinalgError::DimensionMismatch`] when the inner
/// dimensions differ.
pub fn matmul(a: MatRef<'_, f64>, b: MatRef<'_, f64>, par: Par) -> Result<Mat<f64>> {
    if a.ncols() != b.nrows() {
        return Err(mismatch("matmul", a, b));
    }
    Ok(gemm(a, b, par))
}

/// `Aᵀ B` without forming `Aᵀ`.
pub fn matmul_tn(a: MatRef<'_, f64>, b: MatRef<'_, f64>, par: Par) -> Result<Mat<f64>> {
    matmul(a.transpose(), b, par)
}

/// The lower triangle (diagonal included) of `A B` written into `dst`
/// (n×n); the strictly upper triangle of `dst` is left untouched. Half
/// the work of [`gemm_into`] when only a symmetric product's lower half is
/// read. Shape precondition as [`gemm_into`], with a square result.
pub fn lower_triangle_of_product_into(
    dst: &mut Mat<f64>,
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    par: Par,
) {
    faer_triangular_matmul(
        dst.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        a,
        BlockStructure::Rectangular,
        b,
        BlockStructure::Rectangular,
        1.0,
        par,
    );
}

/// The Gram matrix `AᵀA` (n×n for a p×n strategy), exactly symmetric.
pub fn gram(a: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    let mut out = gram_lower(a, par);
    for j in 0..out.ncols() {
        for i in (j + 1)..out.nrows() {
            out[(j, i)] = out[(i, j)];
        }
    }
    out
}

/// The lower triangle (diagonal included) of `AᵀA`, zeros above: half
/// the work of [`gram`], for consumers that read only the lower triangle
/// ([`crate::Cholesky::factor`]).
pub fn gram_lower(a: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    let n = a.ncols();
    let mut out = Mat::zeros(n, n);
    lower_triangle_of_product_into(&mut out, a.transpose(), a, par);
    out
}

/// `A Aᵀ` (m×m for an m×n matrix), exactly symmetric.
pub fn outer_gram(a: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    gram(a.transpose(), par)
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

/// The blocks stacked on top of each other (`[B₁; B₂; …]`, `ncols`
/// columns): a weighted union of workloads or strategies as one matrix.
/// Every block must have `ncols` columns.
pub fn stack_rows(blocks: &[Mat<f64>], ncols: usize) -> Result<Mat<f64>> {
    if let Some(b) = blocks.iter().find(|b| b.ncols() != ncols) {
        return Err(LinalgError::DimensionMismatch {
            what: "stack_rows",
            left_rows: 0,
            left_cols: ncols,
            right_rows: b.nrows(),
            right_cols: b.ncols(),
        });
    }
    let rows: usize = blocks.iter().map(|b| b.nrows()).sum();
    let mut out = Mat::zeros(rows, ncols);
    let mut row = 0;
    for b in blocks {
        out.as_mut()
            .submatrix_mut(row, 0, b.nrows(), ncols)
            .copy_from(b.as_ref());
        row += b.nrows();
    }
    Ok(out)
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
