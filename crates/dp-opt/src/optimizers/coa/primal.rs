//! COA's primal path: Algorithm 1 (Newton steps on Program (10) with the
//! conjugate-gradient directions of Algorithm 2 and Armijo backtracking
//! (16)) inside the homotopy over θ of Algorithm 3, and the dual bound at
//! the primal multipliers.

use dp_core::{DpError, Result};
use dp_linalg::{Mat, Par, symmetrize};

use super::Coa;
use super::dual::certified_lower_bound;
use super::newton::{Iterate, Preconditioner, Scratch, iterate, newton_direction, sandwich};
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

/// Multipliers `y` and the lower bound `ℓ(y)` on Program (10) they give
/// (normalized units); `certified` when computed on the certified root
/// ([`primal_bound`]), so that it need not be recomputed.
#[derive(Debug, Clone)]
pub(super) struct Bound {
    pub(super) y: Vec<f64>,
    pub(super) lower_bound: f64,
    pub(super) certified: bool,
}

/// How one primal stage ended.
pub(super) enum StageEnd {
    /// The relative Newton decrement fell below the tolerance, or the
    /// certificate at the primal multipliers met the stage's target.
    Converged,
    /// Out of Newton steps.
    MaxSteps,
    /// The line search found no acceptable step.
    Stalled(String),
}

/// What a stage returns besides its end: `F(X)` at the final X (for the
/// stage's V) when X is positive definite, and the certified bound at the
/// primal multipliers when the stage computed it at that X.
pub(super) struct StageResult {
    pub(super) end: StageEnd,
    pub(super) f: Option<f64>,
    pub(super) bound: Option<Bound>,
}

/// The certificate check of the final stage: before a Newton direction is
/// computed, the primal multipliers `diag(X⁻¹V₀X⁻¹)` (already at hand as
/// the diagonal of `−G`) are certified on `root`; a gap at most `target`
/// ends the stage, so the last iterate's direction, needed only for its
/// decrement, is never computed. Checked only once the previous decrement
/// is small enough (quadratic convergence) for the gap to be met.
pub(super) struct CertificateCheck<'a> {
    pub(super) root: &'a Mat<f64>,
    pub(super) target: f64,
}

/// The bound at the primal multipliers `y = diag(Y)` (`Y = X⁻¹V₀X⁻¹`),
/// certified on `root` (see [`super::dual::certified_lower_bound`]).
pub(super) fn primal_bound(root: &Mat<f64>, y: &Mat<f64>) -> Bound {
    let y: Vec<f64> = (0..y.nrows()).map(|i| y[(i, i)].max(1e-300)).collect();
    let lower_bound = certified_lower_bound(root.as_ref(), &y).unwrap_or(0.0);
    Bound {
        y,
        lower_bound,
        certified: true,
    }
}

/// `V₀ + θI` (borrowed when θ = 0: no copy in the final stage, at n in the
/// thousands where memory counts).
fn shifted(v0: &Mat<f64>, theta: f64) -> std::borrow::Cow<'_, Mat<f64>> {
    if theta == 0.0 {
        return std::borrow::Cow::Borrowed(v0);
    }
    let mut m = v0.clone();
    for i in 0..m.nrows() {
        m[(i, i)] += theta;
    }
    std::borrow::Cow::Owned(m)
}

impl Coa {
    /// The preconditioned Newton direction at the iterate with `−G = y`:
    /// the direction, its CG iterations and the slope `⟨G, D⟩`. The
    /// Lyapunov preconditioner is built here unless `reuse` and `kept`
    /// holds one; it is left in `kept` for the next step.
    fn direction(
        &self,
        y: &Mat<f64>,
        z: &Mat<f64>,
        cg_max: usize,
        reuse: bool,
        kept: &mut Option<Preconditioner>,
    ) -> (Mat<f64>, usize, f64) {
        let o = self.options;
        let mut scratch = Scratch::new(y.nrows());
        let precond = match kept.take().filter(|_| reuse) {
            Some(p) => p,
            None if o.lyapunov_preconditioner => Preconditioner::lyapunov(y, z, &mut scratch)
                .unwrap_or_else(|| Preconditioner::jacobi(y, z)),
            None => Preconditioner::jacobi(y, z),
        };
        let (d, cg_iters) = newton_direction(y, z, cg_max, &precond, &mut scratch, o.parallelism);
        if matches!(precond, Preconditioner::Lyapunov { .. }) {
            *kept = Some(precond);
        }
        // ⟨G, D⟩ = −⟨Y, D⟩ (D has zero diagonal).
        let slope = -crate::dense::inner(y, &d);
        (d, cg_iters, slope)
    }

    /// Armijo (16) along `d` from `it`, with Cholesky as the
    /// positive-definiteness test; the accepted factor gives the next X⁻¹.
    /// Returns the next iterate, the step and the trials, or `it` back.
    fn line_search(
        &self,
        it: Iterate,
        d: &Mat<f64>,
        slope: f64,
        v: &Mat<f64>,
    ) -> std::result::Result<(Iterate, f64, usize), Iterate> {
        let o = self.options;
        let mut alpha = 1.0;
        for trials in 1..=40 {
            let trial = &it.x + d * alpha;
            if let Ok(next) = iterate(trial, v)
                && next.f <= it.f + o.armijo_sigma * alpha * slope
            {
                return Ok((next, alpha, trials));
            }
            alpha *= o.armijo_beta;
        }
        Err(it)
    }

    /// Algorithm 1 at one θ: Newton steps on Program (10) for
    /// `V = V₀ + θI` from `x` until the relative Newton decrement
    /// `−⟨G, D⟩ / F` is at most `tolerance` or, with `check` (θ = 0 only),
    /// the certificate meets its target.
    #[allow(clippy::too_many_arguments)]
    fn newton_stage(
        &self,
        v0: &Mat<f64>,
        x: &mut Mat<f64>,
        theta: f64,
        cg_max: usize,
        tolerance: f64,
        check: Option<&CertificateCheck<'_>>,
        trace: &mut Trace,
        observer: &mut dyn Observer,
    ) -> Result<StageResult> {
        let o = self.options;
        let n = v0.nrows();
        let v = shifted(v0, theta);
        let v = v.as_ref();
        let done = |x: Mat<f64>,
                    end: StageEnd,
                    f: Option<f64>,
                    bound: Option<Bound>,
                    out: &mut Mat<f64>| {
            *out = x;
            Ok(StageResult { end, f, bound })
        };
        // X moves into the iterate (and back on return): no second copy.
        let mut it = match iterate(std::mem::replace(x, Mat::new()), v) {
            Ok(it) => it,
            Err(back) => {
                let reason = format!("iterate not positive definite at theta = {theta:e}");
                return done(back, StageEnd::Stalled(reason), None, None, x);
            }
        };
        let (mut last_step, mut last_trials) = (0.0, 0usize);
        let mut last_decrement = f64::INFINITY;
        let mut kept = None;
        for _ in 0..o.max_newton_steps {
            // The caller's interrupt ends the run (the iterate is dropped:
            // an interrupted optimization returns no strategy).
            dp_core::interrupt::check()?;
            // Y = −G = Z V Z.
            let mut y = Mat::zeros(n, n);
            sandwich(&it.z, v, &mut y, o.parallelism);
            let mut bound = None;
            if let Some(c) = check
                && last_decrement <= (100.0 * c.target).sqrt()
            {
                let b = primal_bound(c.root, &y);
                if it.f - b.lower_bound <= c.target * it.f {
                    let f = Some(it.f);
                    return done(it.x, StageEnd::Converged, f, Some(b), x);
                }
                bound = Some(b);
            }
            let reuse = last_decrement <= o.reuse_preconditioner_below;
            let (d, cg_iters, slope) = self.direction(&y, &it.z, cg_max, reuse, &mut kept);
            let decrement = -slope / it.f;
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
                decrement,
                cg_iterations: cg_iters,
                step: last_step,
                trials: last_trials,
            });
            observer.observe(&Event::GramIterate {
                iteration,
                gram: it.x.as_ref(),
            });
            if decrement <= tolerance || slope >= 0.0 {
                let bound = bound.or_else(|| check.map(|c| primal_bound(c.root, &y)));
                return done(it.x, StageEnd::Converged, Some(it.f), bound, x);
            }
            drop(y);
            dp_core::interrupt::check()?;
            match self.line_search(it, &d, slope, v) {
                Ok((next, alpha, trials)) => {
                    (it, last_step, last_trials) = (next, alpha, trials);
                }
                Err(back) => {
                    let reason = format!("line search failed at theta = {theta:e}");
                    return done(back.x, StageEnd::Stalled(reason), Some(back.f), bound, x);
                }
            }
            last_decrement = decrement;
            // diag(X) = 1 holds in exact arithmetic; reset rounding drift.
            for i in 0..n {
                it.x[(i, i)] = 1.0;
            }
        }
        done(it.x, StageEnd::MaxSteps, None, None, x)
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
                None,
                trace,
                observer,
            )?;
            if let StageEnd::Stalled(reason) = end.end {
                return Ok(Some(reason));
            }
            theta *= o.theta_decay;
        }
        Ok(None)
    }

    /// The final stage at θ = 0 (full-rank `V₀`), tightened until the
    /// certificate at the primal multipliers (on `certified_root`) meets
    /// the gap tolerance. Returns why it stalled, if it did, `F(X)` and
    /// the bound.
    pub(super) fn final_stage(
        &self,
        v0: &Mat<f64>,
        certified_root: &Mat<f64>,
        x: &mut Mat<f64>,
        trace: &mut Trace,
        observer: &mut dyn Observer,
    ) -> Result<(Option<String>, Option<f64>, Option<Bound>)> {
        let o = self.options;
        let mut tolerance = 0.01 * o.gap_tolerance;
        let check = CertificateCheck {
            root: certified_root,
            target: o.certificate_target * o.gap_tolerance,
        };
        loop {
            let stage = self.newton_stage(
                v0,
                x,
                0.0,
                o.cg_iterations_final,
                tolerance,
                Some(&check),
                trace,
                observer,
            )?;
            let bound = match stage.bound {
                Some(b) => Some(b),
                None => primal_certificate(x, v0, certified_root, o.parallelism).ok(),
            };
            let f = stage
                .f
                .or_else(|| iterate(x.clone(), v0).ok().map(|it| it.f));
            let gap = match (&bound, f) {
                (Some(b), Some(f)) => ((f - b.lower_bound) / f).max(0.0),
                _ => f64::INFINITY,
            };
            let stalled = match stage.end {
                StageEnd::Stalled(reason) => Some(reason),
                StageEnd::MaxSteps => Some("Newton step limit in the final stage".into()),
                StageEnd::Converged => None,
            };
            if gap <= o.gap_tolerance || stalled.is_some() || tolerance < 1e-15 {
                return Ok((stalled, f, bound));
            }
            tolerance *= 0.01;
        }
    }
}

/// The certified bound at the primal multipliers `yᵢ = (X⁻¹V₀X⁻¹)ᵢᵢ` of
/// `x` (one Cholesky inverse and two products; the final stage has them
/// at hand unless it ran out of steps).
pub(super) fn primal_certificate(
    x: &Mat<f64>,
    v0: &Mat<f64>,
    certified_root: &Mat<f64>,
    par: Par,
) -> Result<Bound> {
    let it = iterate(x.clone(), v0).map_err(|_| DpError::NotConverged {
        solver: "COA",
        reason: "iterate is not positive definite".into(),
    })?;
    let mut y = Mat::zeros(x.nrows(), x.nrows());
    sandwich(&it.z, v0, &mut y, par);
    Ok(primal_bound(certified_root, &y))
}
