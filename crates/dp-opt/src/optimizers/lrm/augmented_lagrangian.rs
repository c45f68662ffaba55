//! LRM's augmented-Lagrangian solvers (LRM paper, Algorithm 1): the
//! reference alternation with Algorithm 2 for L ([`LrmSolver::Alternating`]),
//! the same iteration with B eliminated exactly and SPG for L
//! ([`LrmSolver::Reduced`]), and the quadratic-penalty path that
//! [`LrmSolver::Penalty`] takes when `r < n` (multipliers fixed at zero).

use std::time::Instant;

use dp_core::{DpError, Result};
use dp_linalg::{Cholesky, Mat, MatMut, MatRef, Par};

#[allow(unused_imports)] // doc links
use super::LrmSolver;
use super::l1_ball::{project_columns, spg_over_columns};
use super::{ColumnNorm, Decomposition, Lrm, Scaled, fit_termination, frob_residual};
use crate::Observer;
use crate::dense::{gemm, inner};
use crate::report::Event;
use crate::solvers::engine::Termination;
use crate::solvers::spg::SpgOptions;

impl Lrm {
    /// [`LrmSolver::Alternating`]: Algorithm 1 of the LRM paper on the
    /// scaled root `c` from the SVD start `(l, b)`: per outer step,
    /// `inner_iterations` alternations of the closed-form B update (9) and
    /// Algorithm 2 for L, then `π ← π + β(C − BL)` and the β schedule.
    /// Stops below `max(residual_tolerance, γ)`; the run is flagged as
    /// failed above `failure_residual` or when `‖B‖²_F > ‖W‖²_F` (worse
    /// than noise on the data).
    pub(super) fn alternating(
        &self,
        c: &Mat<f64>,
        mut l: Mat<f64>,
        mut b: Mat<f64>,
        colmax: f64,
        norm: ColumnNorm,
        observer: &mut dyn Observer,
    ) -> Result<Decomposition> {
        let o = self.options;
        let a = o.alternating;
        let par = o.parallelism;
        let (n, r) = (c.ncols(), l.nrows());
        let mut pi = Mat::<f64>::zeros(c.nrows(), n);
        let mut beta = a.beta_initial;
        let w_fro2 = inner(c, c);
        let tolerance = o.residual_tolerance.max(a.gamma / colmax);
        let mut residual = frob_residual(c, &b, &l, par);
        let mut outer = 0;
        let mut omega = 1.0;
        while outer < a.max_outer {
            outer += 1;
            for _ in 0..a.inner_iterations {
                // (9): B = (βW + π) Lᵀ (β L Lᵀ + I)⁻¹.
                let target = c * dp_linalg::Scale(beta) + &pi;
                let rhs = gemm(target.as_ref(), l.transpose(), par); // s×r
                let mut sys = gemm(l.as_ref(), l.transpose(), par) * dp_linalg::Scale(beta);
                for k in 0..r {
                    sys[(k, k)] += 1.0;
                }
                let chol = Cholesky::factor(sys.as_ref())?;
                let mut bt = rhs.transpose().to_owned();
                chol.solve_in_place(bt.as_mut())?;
                b = bt.transpose().to_owned();
                // (10) by Algorithm 2.
                omega = apg(
                    &b,
                    &target,
                    &mut l,
                    norm,
                    beta,
                    omega,
                    a.apg_iterations,
                    par,
                )?;
            }
            residual = frob_residual(c, &b, &l, par);
            let trace_btb = inner(&b, &b);
            observer.observe(&Event::Factorization {
                iteration: outer,
                penalty: beta,
                residual: residual * colmax,
                trace_btb: trace_btb * colmax * colmax,
                inner_iterations: a.inner_iterations,
            });
            if residual < tolerance {
                break;
            }
            if outer % a.beta_every == 0 {
                beta = (beta * a.beta_growth).min(a.beta_max);
            }
            let diff = c - gemm(b.as_ref(), l.as_ref(), par);
            pi += &diff * dp_linalg::Scale(beta);
        }
        let trace_btb = inner(&b, &b);
        // The reference implementation stops below the residual tolerance
        // and flags failure above `failure_residual` or when
        // ‖B‖²_F > ‖W‖²_F (worse than noise on the data).
        let converged =
            residual < o.failure_residual.max(tolerance) && trace_btb <= w_fro2 * (1.0 + 1e-12);
        let stop = format!(
            "alternating: residual {:.2e} after {outer} outer steps",
            residual * colmax
        );
        let scaled = Scaled {
            b,
            l,
            residual,
            termination: fit_termination(
                converged,
                (residual >= tolerance && outer >= a.max_outer).then_some(
                    Termination::MaxIterations {
                        iterations: a.max_outer,
                    },
                ),
                stop,
            ),
        };
        Ok(Decomposition::from_scaled(scaled, colmax, outer))
    }
}

impl Lrm {
    /// Algorithm 1 with B eliminated exactly (see [`LrmSolver::Reduced`]),
    /// on the scaled root `c` from the start `l`; ends with the exact
    /// least-squares B = W L⁺ when L supports W.
    ///
    /// `penalty = Some(β₀)` runs [`LrmSolver::Penalty`]'s path instead:
    /// π stays 0 and β = β₀·10^k at stage k.
    pub(super) fn decompose_reduced(
        &self,
        c: &Mat<f64>,
        mut l: Mat<f64>,
        colmax: f64,
        norm: ColumnNorm,
        observer: &mut dyn Observer,
        penalty: Option<f64>,
    ) -> Result<Decomposition> {
        let o = self.options;
        let (d, p) = (o.reduced, o.penalty);
        let par = o.parallelism;
        let (s, n, r) = (c.nrows(), c.ncols(), l.nrows());
        let w_fro = inner(c, c).sqrt();
        let mut pi = Mat::<f64>::zeros(s, n);
        let mut beta = penalty.unwrap_or(d.beta_per_rank * r as f64);
        let beta_max = d.beta_max_per_rank * r as f64;
        let (max_outer, stage_spg, stage_tolerance) = match penalty {
            Some(_) => (p.stages, p.spg, p.residual_tolerance),
            None => (d.max_outer, d.spg, d.residual_tolerance),
        };
        let mut residual = f64::INFINITY;
        let mut outer = 0;
        let mut last_b: Option<Mat<f64>> = None;
        let optimal_b = |t: &Mat<f64>, l: &Mat<f64>, beta: f64| ridge_b(t, l, beta, par);
        let started = Instant::now();
        let mut out_of_time = false;
        while outer < max_outer {
            let remaining = o.max_seconds.map(|t| t - started.elapsed().as_secs_f64());
            if remaining.is_some_and(|t| t <= 0.0) {
                out_of_time = true;
                break;
            }
            outer += 1;
            let t = c + &pi * dp_linalg::Scale(1.0 / beta);
            let eval = |lx: MatRef<'_, f64>, grad: MatMut<'_, f64>| -> f64 {
                reduced_objective(&t, lx, beta, grad, par).unwrap_or(f64::INFINITY)
            };
            let spg_options = SpgOptions {
                budget: stage_spg.budget.with_seconds(remaining),
                ..stage_spg
            };
            let (next, solved) = spg_over_columns(&l, norm, eval, &spg_options, &mut (), 1.0);
            l = next;
            let b = optimal_b(&t, &l, beta).ok_or_else(|| DpError::NotConverged {
                solver: "LRM",
                reason: "I + βLLᵀ is not positive definite".into(),
            })?;
            let diff = c - gemm(b.as_ref(), l.as_ref(), par);
            let new_residual = inner(&diff, &diff).sqrt();
            observer.observe(&Event::Factorization {
                iteration: outer,
                penalty: beta,
                residual: new_residual * colmax,
                trace_btb: inner(&b, &b) * colmax * colmax,
                inner_iterations: solved.iterations,
            });
            last_b = Some(b);
            if penalty.is_some() {
                beta *= 10.0;
            } else {
                pi += &diff * dp_linalg::Scale(beta);
                if new_residual > 0.25 * residual {
                    beta = (beta * d.beta_growth).min(beta_max);
                }
            }
            residual = new_residual;
            if residual <= stage_tolerance * w_fro {
                break;
            }
        }
        let b = final_b(c, &l, beta, last_b, o.failure_residual, par)?;
        let final_residual = frob_residual(c, &b, &l, par);
        let trace_btb = inner(&b, &b);
        let converged = final_residual
            < o.failure_residual
                .min(o.residual_tolerance.max(1e-6 * w_fro))
            && trace_btb <= inner(c, c) * (1.0 + 1e-12);
        let path = if penalty.is_some() {
            "penalty path"
        } else {
            "augmented Lagrangian"
        };
        let stop = format!(
            "{path}: residual {:.2e} after {outer} stages{}",
            final_residual * colmax,
            if out_of_time { " (time budget)" } else { "" }
        );
        let scaled = Scaled {
            b,
            l,
            residual: final_residual,
            termination: fit_termination(
                converged,
                match (out_of_time, o.max_seconds) {
                    (true, Some(seconds)) => Some(Termination::Timeout { seconds }),
                    _ => None,
                },
                stop,
            ),
        };
        Ok(Decomposition::from_scaled(scaled, colmax, outer))
    }
}

/// The B returned for the final L: among the exact least-squares refit
/// `B = C L⁺` (residual zero when L's row space holds C's), the ridge B of
/// update (9) at the last β, and the last stage's B, the smallest
/// `tr(BᵀB)` of those whose residual is below `failure_residual` (an
/// ill-conditioned L makes the exact refit huge); if none is, the best fit.
fn final_b(
    c: &Mat<f64>,
    l: &Mat<f64>,
    beta: f64,
    last_b: Option<Mat<f64>>,
    failure_residual: f64,
    par: Par,
) -> Result<Mat<f64>> {
    // Exact refit: B = W L⁺ (least squares), residual zero when L's
    // row space holds W's; otherwise keep the ridge B of (9).
    let llt = gemm(l.as_ref(), l.transpose(), par);
    let refit = Cholesky::factor(llt.as_ref()).ok().and_then(|chol| {
        let mut bt = gemm(l.as_ref(), c.transpose(), par);
        chol.solve_in_place(bt.as_mut()).ok()?;
        Some(bt.transpose().to_owned())
    });
    let ridge = ridge_b(c, l, beta, par).ok_or_else(|| DpError::NotConverged {
        solver: "LRM",
        reason: "I + βLLᵀ is not positive definite".into(),
    })?;
    // The smallest tr(BᵀB) among the candidates that fit W below the
    // failure level (an ill-conditioned L makes the exact refit huge);
    // if none does, the best fit.
    let mut scored: Vec<(f64, f64, Mat<f64>)> = [Some(ridge), refit, last_b]
        .into_iter()
        .flatten()
        .map(|b| (frob_residual(c, &b, l, par), inner(&b, &b), b))
        .collect();
    let fits = |res: f64| res < failure_residual;
    scored.sort_by(|a, b| match (fits(a.0), fits(b.0)) {
        (true, true) => a.1.total_cmp(&b.1),
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        (false, false) => a.0.total_cmp(&b.0),
    });
    scored
        .into_iter()
        .next()
        .map(|(_, _, b)| b)
        .ok_or_else(|| DpError::NotConverged {
            solver: "LRM",
            reason: "no B candidate".into(),
        })
}

/// The B of update (9) for target `t`: `βTLᵀ(I + βLLᵀ)⁻¹`, minimizing
/// `½‖B‖² + β/2‖T − BL‖²`.
pub(super) fn ridge_b(t: &Mat<f64>, l: &Mat<f64>, beta: f64, par: Par) -> Option<Mat<f64>> {
    let r = l.nrows();
    let mut k = gemm(l.as_ref(), l.transpose(), par) * dp_linalg::Scale(beta);
    for i in 0..r {
        k[(i, i)] += 1.0;
    }
    let chol = Cholesky::factor(k.as_ref()).ok()?;
    let mut bt = gemm(l.as_ref(), t.transpose(), par) * dp_linalg::Scale(beta);
    chol.solve_in_place(bt.as_mut()).ok()?;
    Some(bt.transpose().to_owned())
}

/// The reduced subproblem of [`LrmSolver::Reduced`]:
/// `φ(L) = min_B ½‖B‖² + β/2‖T − BL‖²`, with its gradient `−βBᵀ(T − BL)`
/// at the minimizing B (envelope theorem) written into `grad` (r × n);
/// `None` when `I + βLLᵀ` is not numerically positive definite.
pub fn reduced_objective(
    t: &Mat<f64>,
    l: MatRef<'_, f64>,
    beta: f64,
    mut grad: MatMut<'_, f64>,
    par: Par,
) -> Option<f64> {
    let l = l.to_owned();
    let b = ridge_b(t, &l, beta, par)?;
    let res = t - gemm(b.as_ref(), l.as_ref(), par);
    grad.copy_from(gemm(b.transpose(), res.as_ref(), par) * dp_linalg::Scale(-beta));
    Some(0.5 * inner(&b, &b) + 0.5 * beta * inner(&res, &res))
}

/// Algorithm 2: Nesterov's accelerated projected gradient on
/// `G(L) = β/2 tr(LᵀBᵀBL) − tr(TᵀBL)` with `T = βW + π`,
/// `∇G = βBᵀBL − BᵀT`, backtracking `ω ← 2ω` until the quadratic model
/// `G(S) + ⟨∇G(S), U − S⟩ + ω/2 ‖U − S‖²` majorizes `G(U)`; stops when
/// `‖S − L⁺‖_F < χ = r·n·1e-12`. Returns the last ω (warm start).
#[allow(clippy::too_many_arguments)] // the subproblem, its warm start and the loop limits
fn apg(
    b: &Mat<f64>,
    target: &Mat<f64>,
    l: &mut Mat<f64>,
    norm: ColumnNorm,
    beta: f64,
    omega0: f64,
    max_iter: usize,
    par: Par,
) -> Result<f64> {
    let btb = gemm(b.transpose(), b.as_ref(), par) * dp_linalg::Scale(beta);
    let btt = gemm(b.transpose(), target.as_ref(), par);
    let value = |x: &Mat<f64>| {
        let q = gemm(btb.as_ref(), x.as_ref(), par);
        0.5 * inner(x, &q) - inner(&btt, x)
    };
    let grad = |x: &Mat<f64>| gemm(btb.as_ref(), x.as_ref(), par) - &btt;
    let chi = (l.nrows() * l.ncols()) as f64 * 1e-12;
    let mut prev = l.clone();
    let (mut d_prev, mut d) = (0.0f64, 1.0f64);
    let mut omega = omega0.max(1e-12);
    for _ in 0..max_iter {
        let alpha = (d_prev - 1.0) / d;
        let s = &*l + (&*l - &prev) * dp_linalg::Scale(alpha.max(0.0));
        let gs = grad(&s);
        let fs = value(&s);
        let mut next;
        loop {
            next = &s - &gs * dp_linalg::Scale(1.0 / omega);
            project_columns(&mut next, norm);
            let step = &next - &s;
            let model = fs + inner(&gs, &step) + 0.5 * omega * inner(&step, &step);
            if value(&next) <= model + 1e-12 * fs.abs().max(1.0) || omega > 1e300 {
                break;
            }
            omega *= 2.0;
        }
        let moved = {
            let step = &next - &s;
            inner(&step, &step).sqrt()
        };
        prev = std::mem::replace(l, next);
        if moved < chi {
            break;
        }
        d_prev = d;
        d = (1.0 + (1.0 + 4.0 * d * d).sqrt()) / 2.0;
    }
    if !l.as_ref().is_all_finite() {
        return Err(DpError::NotConverged {
            solver: "LRM",
            reason: "non-finite L in the accelerated gradient".into(),
        });
    }
    Ok(omega)
}
