//! Formulation (7) with B eliminated, `min tr(C (LᵀL)⁻¹ Cᵀ)` over L with
//! every column in the unit L1 ball, by a projected quasi-Newton method on
//! a scale-free split of L (the quasi-Newton form of
//! [`super::LrmSolver::Penalty`] for `r ≥ n`, [`super::EliminatedMethod`]).
//!
//! Each column is split into its positive and negative parts as in the
//! linear-programming treatment of the L1 norm, `Uⱼ = Pⱼ − Qⱼ` with
//! `P, Q ≥ 0`, and divided by `dⱼ = 1ᵀ(Pⱼ + Qⱼ) ≥ ‖Uⱼ‖₁`:
//! `Lⱼ = Uⱼ / dⱼ` lies in the unit L1 ball for every nonnegative
//! `X = [P; Q]` with nonzero columns, and every L in the ball (without a
//! zero column) is reached. The objective is unchanged by scaling any
//! column of X, and with `D = diag(d)` it is the eliminated-B objective of
//! the column-scaled root at U: `f = tr(CD (UᵀU)⁻¹ DCᵀ)`. So the L1 ball
//! becomes the bound `X ≥ 0`, which the projected L-BFGS of
//! [`crate::solvers::lbfgs`] (Kim, Sra and Dhillon 2010, with Bertsekas' ε-active
//! set) handles exactly, zeros included: the minimizers of (7) on range
//! workloads are sparse.
//!
//! The gradient: with `G_U = −2 U Z` the eliminated-B gradient at `(CD, U)`
//! and `eⱼ = ∂f(CD diag(t))/∂tⱼ` at t = 1, `∂f/∂dⱼ = eⱼ/dⱼ`, so
//! `∂f/∂P = G_U + 1 (e/d)ᵀ` and `∂f/∂Q = −G_U + 1 (e/d)ᵀ`.

use dp_linalg::{Mat, MatMut, MatRef, Par};

use super::eliminated_objective::eliminated_b_objective_into;
use crate::Observer;
use crate::solvers::engine::{Executor, Run};
use crate::solvers::lbfgs::{Lbfgs, LbfgsOptions, LbfgsResult};

/// The objective of formulation (7) at `L = (P − Q) diag(d)⁻¹`,
/// `dⱼ = 1ᵀ(Pⱼ + Qⱼ)`, for `x = [P; Q]` (2r × n, entries ≥ 0), with its
/// gradient in x written into `grad` (2r × n). `None` when a column of x
/// sums to zero or L does not have full column rank (f = +∞ there).
pub fn split_objective(
    c: &Mat<f64>,
    x: MatRef<'_, f64>,
    mut grad: MatMut<'_, f64>,
    par: Par,
) -> Option<f64> {
    let (r, n) = (x.nrows() / 2, x.ncols());
    let d: Vec<f64> = (0..n).map(|j| x.col(j).iter().sum::<f64>()).collect();
    if d.iter().any(|&dj| !(dj.is_finite() && dj > 0.0)) {
        return None;
    }
    let u = Mat::from_fn(r, n, |i, j| x[(i, j)] - x[(r + i, j)]);
    let scaled = Mat::from_fn(c.nrows(), n, |k, j| c[(k, j)] * d[j]);
    let mut grad_u = Mat::<f64>::zeros(r, n);
    let mut e = vec![0.0; n];
    let f = eliminated_b_objective_into(&scaled, u.as_ref(), grad_u.as_mut(), Some(&mut e), par)?;
    for j in 0..n {
        let along_d = e[j] / d[j];
        for i in 0..r {
            grad[(i, j)] = grad_u[(i, j)] + along_d;
            grad[(r + i, j)] = -grad_u[(i, j)] + along_d;
        }
    }
    Some(f)
}

/// Projected L-BFGS on [`split_objective`] from `l` (r × n, columns in the
/// unit L1 ball: P and Q its positive and negative parts), under the
/// options' budget, reporting each iteration's objective times `scale` to
/// `observer`. Returns L (every column in the unit L1 ball by
/// construction) and the run.
pub(super) fn lbfgs_over_split(
    c: &Mat<f64>,
    l: &Mat<f64>,
    options: &LbfgsOptions,
    par: Par,
    observer: &mut dyn Observer,
    scale: f64,
) -> (Mat<f64>, Run<LbfgsResult>) {
    let (r, n) = (l.nrows(), l.ncols());
    let x0: Vec<f64> = (0..n)
        .flat_map(|j| {
            let col = l.col(j);
            let pos = col.iter().map(|v| v.max(0.0));
            let neg = col.iter().map(|v| (-v).max(0.0));
            pos.chain(neg).collect::<Vec<_>>()
        })
        .collect();
    let eval = |x: &[f64], g: &mut [f64]| -> f64 {
        split_objective(
            c,
            MatRef::from_column_major_slice(x, 2 * r, n),
            MatMut::from_column_major_slice_mut(g, 2 * r, n),
            par,
        )
        .unwrap_or(f64::INFINITY)
    };
    let options = LbfgsOptions {
        nonnegative: true,
        ..*options
    };
    let solved = Executor::new(options.budget, observer)
        .scale(scale)
        .run(Lbfgs::new(eval, x0, &options));
    let x = MatRef::from_column_major_slice(&solved.output.x, 2 * r, n);
    let out = Mat::from_fn(r, n, |i, j| {
        let d: f64 = x.col(j).iter().sum();
        if d > 0.0 {
            (x[(i, j)] - x[(r + i, j)]) / d
        } else {
            0.0
        }
    });
    (out, solved)
}
