//! The objective of formulation (7) with B eliminated and its gradient,
//! shared by the direct method ([`super::eliminated_b`]) and the
//! quasi-Newton one ([`super::quasi_newton`]).

use dp_linalg::{Cholesky, Mat, MatMut, MatRef, Par};

use crate::dense::gemm;

/// The objective of formulation (7) with B eliminated, for L (r × n) with
/// full column rank: `f(L) = tr(C (LᵀL)⁻¹ Cᵀ) = min{‖B‖²_F : BL = C}`
/// (the minimizer is `B = C L⁺`), with gradient
/// `∇f = −2 L (LᵀL)⁻¹ CᵀC (LᵀL)⁻¹`. `None` when LᵀL is not numerically
/// positive definite (f = +∞ there).
///
/// The L1-ball projection leaves L sparse, so `LᵀL` and `L Z` are formed
/// row by row for rows with at most n/8 nonzeros and by dense products for
/// the rest. The dense work is the Cholesky factor (n³/3), the solve
/// `(LᵀL)⁻¹Cᵀ` (2n²s) and `Z = (LᵀL)⁻¹CᵀC(LᵀL)⁻¹` (2n²s), s = rank(W).
pub fn eliminated_b_objective(c: &Mat<f64>, l: &Mat<f64>, par: Par) -> Option<(f64, Mat<f64>)> {
    let mut grad = Mat::<f64>::zeros(l.nrows(), l.ncols());
    let f = eliminated_b_objective_into(c, l.as_ref(), grad.as_mut(), None, par)?;
    Some((f, grad))
}

/// [`eliminated_b_objective`] writing the gradient into `grad` (r × n)
/// and, when `column_scales` is given, the derivative of f along each
/// column's scale of C, `∂f(C diag(t))/∂tⱼ = 2 Σₖ Cₖⱼ (C (LᵀL)⁻¹)ₖⱼ` at
/// t = 1 (their sum is 2f: f is quadratic in C).
pub(super) fn eliminated_b_objective_into(
    c: &Mat<f64>,
    l: MatRef<'_, f64>,
    mut grad: MatMut<'_, f64>,
    column_scales: Option<&mut [f64]>,
    par: Par,
) -> Option<f64> {
    let n = l.ncols();
    let rows = SplitRows::new(l);
    // The dense rows of L, gathered once for LᵀL and for L Z.
    let ld = (!rows.dense.is_empty())
        .then(|| Mat::from_fn(rows.dense.len(), n, |k, j| l[(rows.dense[k], j)]));
    let mut m = match &ld {
        Some(ld) => gemm(ld.transpose(), ld.as_ref(), par),
        None => Mat::zeros(n, n),
    };
    for (_, entries) in &rows.sparse {
        for &(a, va) in entries {
            for &(b, vb) in entries {
                m[(a, b)] += va * vb;
            }
        }
    }
    let chol = Cholesky::factor(m.as_ref()).ok()?;
    // Yᵀ = (LᵀL)⁻¹ Cᵀ (n × s).
    let mut yt = c.transpose().to_owned();
    chol.solve_in_place(yt.as_mut()).ok()?;
    let f: f64 = (0..yt.ncols())
        .map(|k| {
            c.row(k)
                .iter()
                .zip(yt.col(k).iter())
                .map(|(a, b)| a * b)
                .sum::<f64>()
        })
        .sum();
    if !(f.is_finite() && f >= 0.0) {
        return None;
    }
    if let Some(e) = column_scales {
        for (j, ej) in e.iter_mut().enumerate() {
            *ej = 2.0 * (0..yt.ncols()).map(|k| c[(k, j)] * yt[(j, k)]).sum::<f64>();
        }
    }
    // Z = YᵀY (symmetric), ∇f = −2 L Z.
    let z = gemm(yt.as_ref(), yt.transpose(), par);
    grad.fill(0.0);
    if let Some(ld) = &ld {
        let gd = gemm(ld.as_ref(), z.as_ref(), par);
        for (k, &i) in rows.dense.iter().enumerate() {
            for j in 0..n {
                grad[(i, j)] = -2.0 * gd[(k, j)];
            }
        }
    }
    let mut row = vec![0.0; n];
    for (i, entries) in &rows.sparse {
        row.fill(0.0);
        for &(k, v) in entries {
            row.iter_mut()
                .zip(z.col(k).iter())
                .for_each(|(acc, zk)| *acc += v * zk);
        }
        for (j, value) in row.iter().enumerate() {
            grad[(*i, j)] = -2.0 * value;
        }
    }
    Some(f)
}

/// The rows of L split into dense ones (more than n/8 nonzeros) and the
/// nonzero entries of the others.
pub(super) struct SplitRows {
    pub(super) dense: Vec<usize>,
    pub(super) sparse: Vec<(usize, Vec<(usize, f64)>)>,
}

impl SplitRows {
    pub(super) fn new(l: MatRef<'_, f64>) -> Self {
        let (r, n) = (l.nrows(), l.ncols());
        let mut entries: Vec<Vec<(usize, f64)>> = vec![Vec::new(); r];
        for j in 0..n {
            for (i, &v) in l.col(j).iter().enumerate() {
                if v != 0.0 {
                    entries[i].push((j, v));
                }
            }
        }
        let mut dense = Vec::new();
        let mut sparse = Vec::new();
        for (i, e) in entries.into_iter().enumerate() {
            if 8 * e.len() > n {
                dense.push(i);
            } else if !e.is_empty() {
                sparse.push((i, e));
            }
        }
        Self { dense, sparse }
    }
}
