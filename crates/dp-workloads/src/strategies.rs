//! Classic strategies of the matrix mechanism paper (§6): the identity
//! I_n, the hierarchical H_n (Hay et al.) with any branching factor, the
//! Haar wavelet Y_n (Xiao et al.), and the singular value bound strategy
//! (Theorem 5.25).

use dp_core::validate::check_gram;
use dp_core::{DpError, Result};
use dp_linalg::{Mat, MatRef, ThinSvd, default_rank_tolerance, gram_root};

use crate::workload::require_domain;

/// `I_n`: noise on the data (Laplace mechanism, LM). Δ₁ = Δ₂ = 1.
pub fn identity(n: usize) -> Result<Mat<f64>> {
    require_domain(n)?;
    Ok(Mat::identity(n, n))
}

/// The intervals of the hierarchy: the root `[0, n)`, then each interval
/// split into `b` contiguous children of sizes differing by at most one,
/// down to single cells; listed top-down, level by level, left to right.
pub fn hierarchy_intervals(n: usize, branching: usize) -> Result<Vec<(usize, usize)>> {
    require_domain(n)?;
    if branching < 2 {
        return Err(DpError::InvalidParameter {
            name: "branching factor",
            reason: format!("must be >= 2, got {branching}"),
        });
    }
    let mut out = vec![(0, n)];
    let mut level = vec![(0, n)];
    while !level.is_empty() {
        let mut next = Vec::new();
        for &(lo, hi) in &level {
            let len = hi - lo;
            if len <= 1 {
                continue;
            }
            let parts = branching.min(len);
            let (base, extra) = (len / parts, len % parts);
            let mut start = lo;
            for p in 0..parts {
                let size = base + usize::from(p < extra);
                next.push((start, start + size));
                start += size;
            }
        }
        out.extend_from_slice(&next);
        level = next;
    }
    Ok(out)
}

/// `H_n` with branching factor `b` (Hay et al.; matrix mechanism paper
/// §6): one row per interval of [`hierarchy_intervals`]. For n = bᵏ it has
/// (bn − 1)/(b − 1) rows and Δ₁ = k + 1 (each cell lies in one interval per
/// level); for other n the leaves sit at depths differing by at most one
/// and Δ₁ is the number of levels on the deepest path.
pub fn hierarchical(n: usize, branching: usize) -> Result<Mat<f64>> {
    let intervals = hierarchy_intervals(n, branching)?;
    let mut h = Mat::zeros(intervals.len(), n);
    for (r, &(lo, hi)) in intervals.iter().enumerate() {
        for j in lo..hi {
            h[(r, j)] = 1.0;
        }
    }
    Ok(h)
}

/// `Y_n`, the (unnormalized) Haar wavelet strategy of the matrix mechanism
/// paper §6: the total, then for every dyadic block the difference
/// between its left and right halves. For n = 2ᵏ it is n×n with
/// Δ₁ = k + 1.
///
/// Any other n: build `Y_N` for N = 2^⌈log₂ n⌉ on a domain padded with
/// empty cells, keep its first n columns and drop the rows that become
/// zero. The kept columns are linearly independent (columns of an
/// invertible matrix), so the result has full column rank and answers
/// every workload; Δ₁ ≤ ⌈log₂ n⌉ + 1.
pub fn wavelet(n: usize) -> Result<Mat<f64>> {
    require_domain(n)?;
    let big = n.next_power_of_two();
    let mut rows: Vec<Vec<f64>> = vec![vec![1.0; n]];
    let mut block = big;
    while block >= 2 {
        for start in (0..big).step_by(block) {
            let mid = start + block / 2;
            let mut row = vec![0.0; n];
            for (j, v) in row.iter_mut().enumerate() {
                if j >= start && j < mid {
                    *v = 1.0;
                } else if j >= mid && j < start + block {
                    *v = -1.0;
                }
            }
            if row.iter().any(|&v| v != 0.0) {
                rows.push(row);
            }
        }
        block /= 2;
    }
    Ok(Mat::from_fn(rows.len(), n, |i, j| rows[i][j]))
}

/// The singular value bound strategy (matrix mechanism paper, Problem 5.24
/// and Theorem 5.25): with `W = Q D Pᵀ`, `A = diag(√σᵢ) Pᵀ` over the
/// non-zero singular values σᵢ of W. It minimizes
/// `‖A‖²_F · tr(WᵀW (AᵀA)⁺)`, whose minimum is `(Σσᵢ)²`; since
/// `Δ₂(A)² ≥ ‖A‖²_F / n`, its `l2_obj` is within a factor n of optimal
/// (Theorem 5.26) and equals the SVD bound `(Σσᵢ)²/n` exactly when its
/// columns have equal norms. Built from the Gram matrix (`σᵢ = √λᵢ(WᵀW)`,
/// so `A = diag(λᵢ^{1/4}) Uᵀ`), so it works for implicit workloads.
pub fn svd_bound(workload_gram: MatRef<'_, f64>) -> Result<Mat<f64>> {
    // Rows of the Gram root R = Λ^{1/2} Uᵀ have norms √λᵢ = σᵢ; scaling
    // each by σᵢ^{-1/2} gives diag(√σᵢ) Uᵀ (same rank rule as gram_root).
    check_gram(workload_gram)?;
    let mut a = gram_root(workload_gram)?;
    for i in 0..a.nrows() {
        let norm = a.row(i).norm_l2();
        let scale = 1.0 / norm.sqrt();
        for j in 0..a.ncols() {
            a[(i, j)] *= scale;
        }
    }
    Ok(a)
}

/// [`svd_bound`] from a factor `R` with `RᵀR = WᵀW` whose singular values
/// are W's to W's own rounding (a QR of W's `rows` rows,
/// `dp_linalg::triangular_factor`): `A = diag(√σᵢ) Pᵀ` from the SVD of R,
/// over the σᵢ above W's numerical-rank tolerance `max(m, n)·ε·σ_max`.
/// The Gram's eigenvalues lose every σᵢ below about `√ε·σ_max`, and with
/// it the strategy's support of the rows it carries; R keeps them.
pub fn svd_bound_from_root(root: MatRef<'_, f64>, rows: usize) -> Result<Mat<f64>> {
    let n = root.ncols();
    require_domain(n)?;
    if root.nrows() == 0 || rows < root.nrows() {
        return Err(DpError::InvalidParameter {
            name: "root",
            reason: format!(
                "a factor of W's {rows} rows has 1 to {rows} rows, not {}",
                root.nrows()
            ),
        });
    }
    let svd = ThinSvd::new(root)?;
    let s = &svd.singular_values;
    let tol = default_rank_tolerance(rows, n, s);
    let keep: Vec<usize> = (0..s.len()).filter(|&k| s[k] > tol).collect();
    if keep.is_empty() {
        return Err(DpError::ZeroMatrix {
            what: "workload".into(),
        });
    }
    Ok(Mat::from_fn(keep.len(), n, |i, j| {
        s[keep[i]].sqrt() * svd.v[(j, keep[i])]
    }))
}
