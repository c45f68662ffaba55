//! COA's primal path: Algorithm 1 (Newton steps on Program (10) with the
//! conjugate-gradient directions of Algorithm 2 and Armijo backtracking
//! (16)) inside the homotopy over θ of Algorithm 3, and the dual bound at
//! the primal multipliers.

use dp_core::{DpError, Result};
use dp_linalg::{Mat, Par, symmetrize};

use super::Coa;
use super::dual::{DualPoint, dual_point};
use super::newton::{Preconditioner, Scratch, iterate, newton_direction, sandwich};
use crate::Observer;
use crate::dense::gemm;
use crate::report::{Event, Stage};

/// `(V + θI)^{1/2}` scaled to unit diagonal, from `V = RᵀR` with `R` the
/// eigen-root (rows `√λₖ uₖᵀ`): `Rᵀ diag((√(λₖ+θ) − √θ)/λₖ) R + √θ I`.
pub(super) fn svd_bound_start(root: &Mat<f64>, theta: f64, par: Par) -> Mat<f64> {
    let n = root.ncols();
    let sqrt_theta = theta.max(0.0).sqrt();
    let weights: Vec<f64> = (0..root.nrows())
        .map(|k| {
            let lambda = root.row(k).squared_norm_l2();
            if lambda > 0.0 {
                ((lambda + theta).sqrt() - sqrt_theta) / lambda
            } else {
                0.0
            }
        })
        .collect();
    let scaled = Mat::from_fn(root.nrows(), n, |k, j| root[(k, j)] * weights[k]);
    let mut s = gemm(root.transpose(), scaled.as_ref(), par);
    for i in 0..n {
        s[(i, i)] += sqrt_theta;
    }
    let d: Vec<f64> = (0..n)
        .map(|i| 1.0 / s[(i, i)].max(f64::MIN_POSITIVE).sqrt())
        .collect();
    let mut x = Mat::from_fn(n, n, |i, j| s[(i, j)] * d[i] * d[j]);
    symmetrize(&mut x);
    for i in 0..n {
        x[(i, i)] = 1.0;
    }
    x
}

/// Counters and history shared by the stages of one run.
pub(super) struct Trace {
    pub(super) scale: f64,
    pub(super) history: Vec<f64>,
    pub(super) iterations: usize,
}

/// How one primal stage ended.
pub(super) enum StageEnd {
    /// The relative Newton decrement fell below the tolerance.
    Converged,
    /// Out of Newton steps.
    MaxSteps,
    /// The line search found no acceptable step.
    Stalled(String),
}

impl Coa {
    /// Algorithm 1 at one θ: Newton steps on Program (10) for
    /// `V = V₀ + θI` from `x` until the relative Newton decrement
    /// `−⟨G, D⟩ / F` is at most `tolerance`.
    #[allow(clippy::too_many_arguments)]
    fn newton_stage(
        &self,
        v0: &Mat<f64>,
        x: &mut Mat<f64>,
        theta: f64,
        cg_max: usize,
        tolerance: f64,
        trace: &mut Trace,
        observer: &mut dyn Observer,
    ) -> Result<StageEnd> {
        let o = self.options;
        let par = o.parallelism;
        let n = v0.nrows();
        // V = V₀ + θI; no copy at θ = 0 (the final stage, at n in the
        // thousands where memory counts).
        let shifted;
        let v = if theta == 0.0 {
            v0
        } else {
            let mut m = v0.clone();
            for i in 0..n {
                m[(i, i)] += theta;
            }
            shifted = m;
            &shifted
        };
        // X moves into the iterate (and back on return): no second copy.
        let mut it = match iterate(std::mem::replace(x, Mat::new()), v) {
            Ok(it) => it,
            Err(back) => {
                *x = back;
                return Ok(StageEnd::Stalled(format!(
                    "iterate not positive definite at theta = {theta:e}"
                )));
            }
        };
        let (mut last_step, mut last_trials) = (0.0, 0usize);
        for _ in 0..o.max_newton_steps {
            // G = −Z V Z; Y = −G. The direction is found with Y, the
            // preconditioner and the CG work buffers, all dropped before
            // the line search forms its trial iterate.
            let (d, cg_iters, slope) = {
                let mut y = Mat::zeros(n, n);
                sandwich(&it.z, v, &mut y, par);
                let mut scratch = Scratch::new(n);
                let precond = if o.lyapunov_preconditioner {
                    Preconditioner::lyapunov(&y, &it.z, &mut scratch)
                        .unwrap_or_else(|| Preconditioner::jacobi(&y, &it.z))
                } else {
                    Preconditioner::jacobi(&y, &it.z)
                };
                let (d, cg_iters) =
                    newton_direction(&y, &it.z, cg_max, &precond, &mut scratch, par);
                // ⟨G, D⟩ = −⟨Y, D⟩ (D has zero diagonal).
                let slope = -crate::dense::inner(&y, &d);
                (d, cg_iters, slope)
            };
            trace.iterations += 1;
            trace.history.push(it.f * trace.scale);
            let iteration = trace.iterations;
            observer.observe(&Event::Stage {
                iteration,
                stage: Stage::Homotopy(theta),
            });
            observer.observe(&Event::Iteration {
                iteration,
                objective: it.f * trace.scale,
            });
            observer.observe(&Event::Newton {
                iteration,
                decrement: -slope / it.f,
                cg_iterations: cg_iters,
                step: last_step,
                trials: last_trials,
            });
            observer.observe(&Event::GramIterate {
                iteration,
                gram: it.x.as_ref(),
            });
            if -slope <= tolerance * it.f || slope >= 0.0 {
                *x = it.x;
                return Ok(StageEnd::Converged);
            }
            // Armijo (16) with Cholesky as the positive-definiteness test;
            // the accepted factor gives the next X⁻¹.
            let mut alpha = 1.0;
            let mut accepted = None;
            last_trials = 0;
            for _ in 0..40 {
                last_trials += 1;
                let trial = &it.x + &d * alpha;
                if let Ok(next) = iterate(trial, v)
                    && next.f <= it.f + o.armijo_sigma * alpha * slope
                {
                    accepted = Some(next);
                    break;
                }
                alpha *= o.armijo_beta;
            }
            let Some(next) = accepted else {
                *x = it.x;
                return Ok(StageEnd::Stalled(format!(
                    "line search failed at theta = {theta:e}"
                )));
            };
            last_step = alpha;
            it = next;
            // diag(X) = 1 holds in exact arithmetic; reset rounding drift.
            for i in 0..n {
                it.x[(i, i)] = 1.0;
            }
        }
        *x = it.x;
        Ok(StageEnd::MaxSteps)
    }

    /// Algorithm 3: stages at θ₀, θ₀·decay, … down to `last` (exclusive of
    /// the final stage, which the caller runs). For full-rank `V₀` the
    /// schedule jumps to the final stage once θ < λ_min(V₀)/100, where the
    /// remaining stages would each end after one step.
    pub(super) fn homotopy(
        &self,
        v0: &Mat<f64>,
        x: &mut Mat<f64>,
        last: f64,
        lambda_min: f64,
        trace: &mut Trace,
        observer: &mut dyn Observer,
    ) -> Result<Option<String>> {
        let o = self.options;
        let mut theta = o.theta_initial;
        while theta > last * 1.000001 && theta >= o.theta_min * 0.999999 {
            if last == 0.0 && theta < 0.01 * lambda_min {
                break;
            }
            let end = self.newton_stage(
                v0,
                x,
                theta,
                o.cg_iterations,
                o.stage_tolerance,
                trace,
                observer,
            )?;
            if let StageEnd::Stalled(reason) = end {
                return Ok(Some(reason));
            }
            theta *= o.theta_decay;
        }
        Ok(None)
    }

    /// The final stage at θ = 0 (full-rank `V₀`), tightened until the
    /// certificate at the primal multipliers meets the gap tolerance.
    pub(super) fn final_stage(
        &self,
        v0: &Mat<f64>,
        root: &Mat<f64>,
        x: &mut Mat<f64>,
        trace: &mut Trace,
        observer: &mut dyn Observer,
    ) -> Result<(Option<String>, Option<DualPoint>)> {
        let o = self.options;
        let mut tolerance = 0.01 * o.gap_tolerance;
        loop {
            let end = self.newton_stage(
                v0,
                x,
                0.0,
                o.cg_iterations_final,
                tolerance,
                trace,
                observer,
            )?;
            let point = primal_certificate(x, v0, root, o.parallelism).ok();
            let gap = point.as_ref().map_or(f64::INFINITY, |p| p.1);
            let stalled = match end {
                StageEnd::Stalled(reason) => Some(reason),
                StageEnd::MaxSteps => Some("Newton step limit in the final stage".into()),
                StageEnd::Converged => None,
            };
            if gap <= o.gap_tolerance || stalled.is_some() || tolerance < 1e-15 {
                return Ok((stalled, point.map(|p| p.0)));
            }
            tolerance *= 0.01;
        }
    }
}

/// The dual point at the primal multipliers `yᵢ = (X⁻¹V₀X⁻¹)ᵢᵢ` and the
/// relative gap between `F(X)` (θ = 0) and its bound.
pub(super) fn primal_certificate(
    x: &Mat<f64>,
    v0: &Mat<f64>,
    root: &Mat<f64>,
    par: Par,
) -> Result<(DualPoint, f64)> {
    let it = iterate(x.clone(), v0).map_err(|_| DpError::NotConverged {
        solver: "COA",
        reason: "iterate is not positive definite".into(),
    })?;
    let zv = gemm(it.z.as_ref(), v0.as_ref(), par);
    let n = x.nrows();
    let y: Vec<f64> = (0..n)
        .map(|i| {
            let s: f64 = (0..n).map(|k| zv[(i, k)] * it.z[(k, i)]).sum();
            s.max(1e-300)
        })
        .collect();
    let point = dual_point(root.as_ref(), &y, par)?;
    let gap = ((it.f - point.lower_bound) / it.f).max(0.0);
    Ok((point, gap))
}
