//! COA (Yuan et al., "Convex optimization for linear query processing
//! under approximate differential privacy", KDD 2016): the optimal
//! strategy for (ε,δ)-DP.
//!
//! Program (10): `min F(X) = ⟨X⁻¹, V⟩ s.t. diag(X) = 1, X ≻ 0` with
//! `V = WᵀW + θI`. Algorithm 1 takes Newton steps whose direction solves
//! the equality-constrained quadratic model (15) by the modified conjugate
//! gradient of Algorithm 2 (Hessian products `−G D X⁻¹ − X⁻¹ D G`, the
//! diagonal held at zero), with Armijo backtracking (16) that uses a
//! Cholesky factorization as the positive-definiteness test and reuses it
//! for `X⁻¹`. Algorithm 3 is the homotopy over θ (θ₀ = 1, × 0.1) with warm
//! starts. The strategy is `A = chol(X)ᵀ`, so `Δ₂(A)² = max diag(X) = 1`
//! and `l2_obj(A) = ⟨X⁻¹, WᵀW⟩`.
//!
//! Beyond the paper: every run carries a certificate. The multipliers
//! `yᵢ = (X⁻¹VX⁻¹)ᵢᵢ` of the iterate give a lower bound through the dual
//! (see [`crate::dual`]); where that bound is loose (rank-deficient W,
//! whose optimum lies on the boundary) the dual is improved directly and
//! its own strategy `Σ^{1/2}QᵀD^{-1/2}` competes with the primal one. The
//! run stops on the relative duality gap, measured against the original
//! `WᵀW` (θ = 0).

mod descriptor;
mod newton;
mod support;

use std::time::Instant;

use dp_core::{DpError, Result};
use dp_linalg::gram_root_and_spectrum;
use dp_linalg::{Cholesky, Mat, MatRef, Par};

pub use descriptor::DESCRIPTOR;

use crate::barrier::{BarrierOptions, minimize_trace_inverse};
use crate::dense::gemm;
use crate::dual::{DualPoint, certified_lower_bound, dual_point, maximize};
use crate::engine::Termination;
use crate::report::{BoundSource, Event, Stage};
use crate::{
    Certificate, Observer, OptimizeReport, Optimized, PrivacyModel, Problem, StrategyOptimizer,
};
use dp_linalg::symmetrize;
use newton::{Preconditioner, Scratch, iterate, newton_direction, sandwich};
use support::complete_support;

/// Options of COA. Defaults follow the paper where it states a value.
#[derive(Debug, Clone, Copy)]
pub struct CoaOptions {
    /// First regularization θ₀ of the homotopy (paper: 1), relative to
    /// `tr(WᵀW)/n` (dpmm normalizes V to mean eigenvalue 1 first).
    pub theta_initial: f64,
    /// Factor between homotopy stages (paper: 0.1).
    pub theta_decay: f64,
    /// Smallest θ (paper: 1e-10); a final stage at θ = 0 replaces it when
    /// `WᵀW` is comfortably positive definite.
    pub theta_min: f64,
    /// For rank-deficient `WᵀW`, the θ at which the primal homotopy hands
    /// over to the dual refinement: the optimum lies on the boundary
    /// (singular X), where Newton steps on X crawl while the dual is smooth.
    pub theta_handoff: f64,
    /// Armijo backtracking factor β (paper: 0.1).
    pub armijo_beta: f64,
    /// Armijo sufficient-decrease constant σ (paper: 0.25).
    pub armijo_sigma: f64,
    /// Conjugate-gradient iterations per Newton step in the intermediate
    /// homotopy stages (paper: T = 5).
    pub cg_iterations: usize,
    /// Conjugate-gradient iterations allowed in the final stage, where the
    /// Newton direction must be accurate for quadratic convergence.
    pub cg_iterations_final: usize,
    /// Newton steps per homotopy stage.
    pub max_newton_steps: usize,
    /// Relative Newton decrement `−⟨G, D⟩ / F` ending an intermediate stage.
    pub stage_tolerance: f64,
    /// Target relative duality gap (the stopping rule).
    pub gap_tolerance: f64,
    /// Iterations of the dual refinement when the primal bound is loose.
    pub dual_iterations: usize,
    /// Precondition the final stage's conjugate gradient with the
    /// Lyapunov operator of the near-optimal Hessian (one eigendecomposition
    /// per Newton step; see `Preconditioner::Lyapunov`). The intermediate
    /// stages keep the paper's plain T = 5 (Jacobi-scaled) iterations.
    pub lyapunov_preconditioner: bool,
    /// `WᵀW` (normalized to mean eigenvalue 1) counts as positive definite
    /// when its smallest eigenvalue exceeds this; the homotopy then ends
    /// with a stage at θ = 0 instead of handing over to the dual.
    pub full_rank_threshold: f64,
    /// Starting point of the homotopy.
    pub start: CoaStart,
    /// When the Newton paths end above `gap_tolerance`, run the barrier
    /// method of [`crate::barrier`] on the row-space form of Program (10)
    /// (robust on rank-deficient, badly scaled workloads; about fifty
    /// n×n Newton systems).
    pub barrier_fallback: bool,
    /// Parallelism of the matrix products.
    pub parallelism: Par,
}

impl Default for CoaOptions {
    fn default() -> Self {
        Self {
            theta_initial: 1.0,
            theta_decay: 0.1,
            theta_min: 1e-10,
            theta_handoff: 1e-6,
            armijo_beta: 0.1,
            armijo_sigma: 0.25,
            cg_iterations: 5,
            cg_iterations_final: 60,
            max_newton_steps: 60,
            stage_tolerance: 1e-3,
            gap_tolerance: 1e-6,
            dual_iterations: 2000,
            lyapunov_preconditioner: true,
            full_rank_threshold: 1e-8,
            start: CoaStart::SvdBound,
            barrier_fallback: true,
            parallelism: Par::rayon(0),
        }
    }
}

impl CoaOptions {
    /// The paper's Algorithm 3 as stated: `X = I`, the full homotopy over
    /// θ = 1, 0.1, …, 1e-10 (then θ = 0 for full-rank `WᵀW`), T = 5
    /// conjugate-gradient steps in the intermediate stages. Slower than
    /// the default, kept to reproduce the paper and as a cross-check.
    pub fn paper() -> Self {
        Self {
            start: CoaStart::Identity,
            ..Self::default()
        }
    }

    /// Rejects option values outside their meaningful ranges.
    pub fn validate(&self) -> Result<()> {
        let bad = |name: &'static str, reason: &str| {
            Err(DpError::InvalidParameter {
                name,
                reason: reason.into(),
            })
        };
        let unit_open = |v: f64| v > 0.0 && v < 1.0;
        if !(self.theta_initial.is_finite() && self.theta_initial > 0.0) {
            return bad("theta_initial", "must be finite and > 0");
        }
        if !unit_open(self.theta_decay) {
            return bad("theta_decay", "must lie in (0, 1)");
        }
        if !(self.theta_min > 0.0 && self.theta_min <= self.theta_initial) {
            return bad("theta_min", "must lie in (0, theta_initial]");
        }
        if !(self.theta_handoff > 0.0 && self.theta_handoff.is_finite()) {
            return bad("theta_handoff", "must be finite and > 0");
        }
        if !unit_open(self.armijo_beta) || !unit_open(self.armijo_sigma) {
            return bad("armijo_beta / armijo_sigma", "must lie in (0, 1)");
        }
        if self.cg_iterations == 0 || self.cg_iterations_final == 0 || self.max_newton_steps == 0 {
            return bad("iteration limits", "must be at least 1");
        }
        if !unit_open(self.stage_tolerance) || !unit_open(self.gap_tolerance) {
            return bad("stage_tolerance / gap_tolerance", "must lie in (0, 1)");
        }
        if !(self.full_rank_threshold >= 0.0 && self.full_rank_threshold.is_finite()) {
            return bad("full_rank_threshold", "must be finite and >= 0");
        }
        Ok(())
    }
}

/// Where COA's first homotopy stage starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoaStart {
    /// `X = I` (the paper's Algorithm 3).
    Identity,
    /// `X = (V₀ + θ₀I)^{1/2}` scaled to unit diagonal: the Lagrangian
    /// minimizer at constant multipliers, i.e. the strategy behind the SVD
    /// bound (its objective is within the SVD bound's gap of the optimum,
    /// usually a few percent), which saves most of the first stage's steps.
    SvdBound,
}

/// `(V + θI)^{1/2}` scaled to unit diagonal, from `V = RᵀR` with `R` the
/// eigen-root (rows `√λₖ uₖᵀ`): `Rᵀ diag((√(λₖ+θ) − √θ)/λₖ) R + √θ I`.
fn svd_bound_start(root: &Mat<f64>, theta: f64, par: Par) -> Mat<f64> {
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

/// COA behind the optimizer trait ((ε,δ)-DP only).
#[derive(Debug, Clone, Copy, Default)]
pub struct Coa {
    /// Options.
    pub options: CoaOptions,
}

/// Cells no query touches (zero columns of W) need no measurement: they
/// are removed before optimizing and get zero strategy columns.
fn active_cells(gram: MatRef<'_, f64>) -> Vec<usize> {
    let scale = (0..gram.nrows()).map(|i| gram[(i, i)]).fold(0.0, f64::max);
    (0..gram.nrows())
        .filter(|&i| gram[(i, i)] > 1e-14 * scale)
        .collect()
}

/// Counters and history shared by the stages of one run.
struct Trace {
    scale: f64,
    history: Vec<f64>,
    iterations: usize,
}

/// How one primal stage ended.
enum StageEnd {
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
    fn homotopy(
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
    fn final_stage(
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
fn primal_certificate(
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

/// Columns `active[k]` of an `r × full_n` matrix from column k of `m`; the
/// rest zero.
fn embed(m: &Mat<f64>, active: &[usize], full_n: usize) -> Mat<f64> {
    let mut out = Mat::zeros(m.nrows(), full_n);
    for (k, &j) in active.iter().enumerate() {
        out.col_mut(j).copy_from(m.col(k));
    }
    out
}

impl StrategyOptimizer for Coa {
    fn name(&self) -> &'static str {
        "coa"
    }

    fn optimize(&self, problem: &Problem, observer: &mut dyn Observer) -> Result<Optimized> {
        let start = Instant::now();
        if problem.privacy() != PrivacyModel::Approx {
            return Err(DpError::InvalidParameter {
                name: "privacy",
                reason: "COA minimizes l2_obj: it is an (ε,δ)-DP optimizer (use --privacy approx)"
                    .into(),
            });
        }
        let o = self.options;
        o.validate()?;
        let par = o.parallelism;
        let full_n = problem.domain_size();
        let active = active_cells(problem.gram());
        let n = active.len();
        if n == 0 {
            return Err(DpError::ZeroMatrix {
                what: "workload".into(),
            });
        }
        // Normalize V to mean eigenvalue 1: F scales linearly, X* is unchanged.
        let scale = active.iter().map(|&i| problem.gram()[(i, i)]).sum::<f64>() / n as f64;
        let v0 = Mat::from_fn(n, n, |i, j| problem.gram()[(active[i], active[j])] / scale);
        let (root, spectrum) = gram_root_and_spectrum(v0.as_ref())?;
        // Mean eigenvalue is 1 after normalization, so λ_min is relative.
        let lambda_min = spectrum.first().copied().unwrap_or(0.0);
        let full_rank = root.nrows() == n && lambda_min > o.full_rank_threshold;
        let mut trace = Trace {
            scale,
            history: Vec::new(),
            iterations: 0,
        };

        // Candidates: (strategy over the active cells, its objective).
        let mut candidates: Vec<(Mat<f64>, f64)> = Vec::new();
        let mut bound: Option<DualPoint> = None;
        let mut stalled: Option<String> = None;
        let mut dual_start: Vec<f64> = vec![1.0; n];
        let mut need_dual = !full_rank;

        if full_rank {
            let mut x = match o.start {
                CoaStart::Identity => Mat::<f64>::identity(n, n),
                CoaStart::SvdBound => svd_bound_start(&root, 0.0, par),
            };
            if o.start == CoaStart::Identity {
                stalled = self.homotopy(&v0, &mut x, 0.0, lambda_min, &mut trace, observer)?;
            }
            let (mut s, mut point) = self.final_stage(&v0, &root, &mut x, &mut trace, observer)?;
            if s.is_some() && o.start == CoaStart::SvdBound {
                // The direct stage failed: fall back to the paper's homotopy.
                x = svd_bound_start(&root, o.theta_initial, par);
                stalled = self.homotopy(&v0, &mut x, 0.0, lambda_min, &mut trace, observer)?;
                (s, point) = self.final_stage(&v0, &root, &mut x, &mut trace, observer)?;
            }
            stalled = stalled.or(s);
            // The strategy chol(X)ᵀ (Δ₂ = 1 since diag X = 1) and F(X).
            if let Ok(f) = iterate(x.clone(), &v0).map(|it| it.f)
                && let Ok(chol) = Cholesky::factor(x.as_ref())
            {
                candidates.push((chol.lower().transpose().to_owned(), f));
            }
            if let Some(p) = point {
                observer.observe(&Event::LowerBound {
                    iteration: trace.iterations,
                    bound: p.lower_bound * scale,
                    source: BoundSource::PrimalMultipliers,
                });
                let gap = candidates
                    .last()
                    .map_or(f64::INFINITY, |c| (c.1 - p.lower_bound) / c.1);
                if gap > o.gap_tolerance {
                    need_dual = true;
                    dual_start.clone_from(&p.y);
                }
                bound = Some(p);
            } else {
                need_dual = true;
            }
        } else if o.start == CoaStart::Identity {
            // Paper mode: primal homotopy down to θ_handoff, then the dual
            // from the multipliers it suggests.
            let mut x = Mat::<f64>::identity(n, n);
            let last = o.theta_handoff.max(o.theta_min);
            stalled = self.homotopy(&v0, &mut x, last, lambda_min, &mut trace, observer)?;
            if let Ok((p, _)) = primal_certificate(&x, &v0, &root, par) {
                dual_start.clone_from(&p.y);
            }
        }

        if need_dual {
            // Projected Newton on the dual over the whole root (see
            // `crate::dual`): fast and certified on most rank-deficient
            // workloads. Where the root's spectrum is very wide its Hessian
            // (which carries 1/(sₖsₗ(sₖ+sₗ))) defeats conjugate gradients;
            // the barrier fallback below takes over there. (A homotopy over
            // spectral truncations of the root used to sit here: measured
            // against the barrier on rows scaled 10^±2, it took 168 s where
            // the barrier needs 18 s at n = 512, and over 20 minutes at
            // n = 1024, for the same certificates.)
            if let Ok(solved) = maximize(
                root.as_ref(),
                &dual_start,
                o.gap_tolerance * 0.8,
                o.dual_iterations,
                par,
            ) {
                trace.iterations += solved.iterations;
                let (strategy, _) = solved.point.strategy(root.as_ref(), par);
                let (strategy, objective, _) = complete_support(strategy, &v0, false)?;
                observer.observe(&Event::LowerBound {
                    iteration: trace.iterations,
                    bound: solved.point.lower_bound * scale,
                    source: BoundSource::Dual,
                });
                observer.observe(&Event::Candidate {
                    iteration: trace.iterations,
                    name: "dual",
                    objective: Some(objective * scale),
                });
                trace.history.push(objective * scale);
                candidates.push((strategy, objective));
                if bound
                    .as_ref()
                    .is_none_or(|b| solved.point.lower_bound > b.lower_bound)
                {
                    bound = Some(solved.point);
                }
            }
        }

        // Embed back into the full domain (zero columns for idle cells).
        // A strategy with fewer than n rows misses directions where W may
        // still have energy just above the Gram's rounding level (measured:
        // rows scaled 10^±3 leave 8.6e-8 of W outside a dual strategy's
        // r < n rows, which the support test on the explicit W catches).
        // Such directions are completed at the model's weight
        // (`complete_support`, forced: any energy above ε·tr V per
        // direction), which costs about 2√(t/F) relative.
        // `finalize` returns the strategy, its objective and the relative
        // cost of that completion (0 when none was needed).
        let finalize = |a: Mat<f64>| -> Result<(Mat<f64>, f64, f64)> {
            let complete = |a: Mat<f64>| -> Result<(Mat<f64>, f64, f64)> {
                let (active_strategy, _, cost) = complete_support(a, &v0, true)?;
                let full = embed(&active_strategy, &active, full_n);
                let objective = problem.objective(full.as_ref())?;
                Ok((full, objective, cost))
            };
            if a.nrows() < n {
                return complete(a);
            }
            let strategy = embed(&a, &active, full_n);
            match problem.objective(strategy.as_ref()) {
                Err(DpError::UnsupportedWorkload { .. }) => complete(a),
                other => Ok((strategy, other?, 0.0)),
            }
        };
        // The reported bound is recomputed from the multipliers with
        // `certified_lower_bound` (singular values of C D^{1/2} with a
        // rounding allowance), whichever path produced them, on a root of
        // a Gram that stays ⪯ V₀ despite the eigensolver's rounding: the
        // root keeps the eigenvalues above n·ε·λ_max (below it a computed
        // eigenvalue may be pure rounding: keeping those, the "bound"
        // exceeded the optimum on low-rank W) and lowers each by
        // τ = 2√n·ε·λ_max, a margin over the p(n)·ε·‖V‖ eigenvalue error of
        // a backward-stable solver (LAPACK Users' Guide §4.7, p(n) modest).
        // Measured cost of the margin: 1e-7 of the bound on rows scaled
        // 10^±2 at n = 1024 (a margin of n·ε·λ_max cost 1.9e-6 there).
        let whole_root = {
            let eig = dp_linalg::SymmetricEigen::new(v0.as_ref())?;
            let lmax = eig.values.iter().copied().fold(0.0, f64::max);
            let keep_above = n as f64 * f64::EPSILON * lmax;
            let tau = 2.0 * (n as f64).sqrt() * f64::EPSILON * lmax;
            let keep: Vec<usize> = (0..n).filter(|&k| eig.values[k] > keep_above).collect();
            Mat::from_fn(keep.len(), n, |i, j| {
                let k = keep[i];
                (eig.values[k] - tau).max(0.0).sqrt() * eig.vectors[(j, k)]
            })
        };
        let certify =
            |y: &[f64]| certified_lower_bound(whole_root.as_ref(), y).map_or(0.0, |b| b * scale);
        let (best_strategy, _) = candidates
            .into_iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .ok_or_else(|| DpError::NotConverged {
                solver: "COA",
                reason: stalled
                    .clone()
                    .unwrap_or_else(|| "no strategy produced".into()),
            })?;
        let (mut strategy, mut objective, mut floor) = finalize(best_strategy)?;
        let mut lower_bound = bound.as_ref().map_or(0.0, |b| certify(&b.y));

        // Certifying fallback: Newton in X or in y loses accuracy where W is
        // rank-deficient and its rows are scaled over many orders of
        // magnitude (the dual Hessian carries 1/(sₖsₗ(sₖ+sₗ)); measured:
        // rows × 10^±2 over 64 cells left the dual strategy 0.6% above the
        // optimum). The barrier method of `crate::barrier` on the whole root
        // reaches gaps of 1e-9 there, at a cost of about fifty n×n Newton
        // systems, so it runs only when the paths above fall short of the
        // tolerance, judged on the strategy as it will be returned.
        let gap_before = (objective - lower_bound) / objective;
        if o.barrier_fallback && (gap_before.is_nan() || gap_before > o.gap_tolerance) {
            let start_y = bound.as_ref().map(|b| b.y.clone());
            let solved = minimize_trace_inverse(
                root.as_ref(),
                start_y.as_deref(),
                &BarrierOptions {
                    gap_tolerance: 0.1 * o.gap_tolerance,
                    parallelism: par,
                    ..BarrierOptions::default()
                },
                observer,
            );
            if let Ok(solved) = solved {
                trace.iterations += solved.newton_steps;
                let (barrier_strategy, barrier_objective, barrier_floor) =
                    finalize(solved.strategy)?;
                observer.observe(&Event::LowerBound {
                    iteration: trace.iterations,
                    bound: solved.lower_bound * scale,
                    source: BoundSource::InteriorPoint,
                });
                observer.observe(&Event::Candidate {
                    iteration: trace.iterations,
                    name: "interior point",
                    objective: Some(barrier_objective),
                });
                trace.history.push(barrier_objective);
                if barrier_objective < objective {
                    (strategy, objective, floor) =
                        (barrier_strategy, barrier_objective, barrier_floor);
                }
                lower_bound = lower_bound.max(certify(&solved.multipliers));
            }
        }
        // Convergence: the gap meets the tolerance, widened by `floor`, the
        // measured relative cost of answering directions whose Gram
        // eigenvalues lie below its rounding level (n·ε·λ_max; the Gram
        // fixes their energy to about a percent, and no strategy answers
        // them for free). Zero unless such directions were completed.
        let relative_gap = ((objective - lower_bound) / objective).max(0.0);
        let converged = relative_gap <= o.gap_tolerance + floor;
        let termination = if converged {
            Termination::Converged {
                criterion: if floor > 0.0 {
                    format!(
                        "relative duality gap {relative_gap:.2e} <= {:.0e} + {floor:.2e} \
                         (the cost of answering workload directions below the Gram's \
                         rounding level)",
                        o.gap_tolerance
                    )
                } else {
                    format!(
                        "relative duality gap {relative_gap:.2e} <= {:.0e}",
                        o.gap_tolerance
                    )
                },
            }
        } else if let Some(reason) = stalled {
            Termination::Stalled { reason }
        } else {
            Termination::MaxIterations {
                iterations: o.max_newton_steps,
            }
        };
        Ok(Optimized {
            strategy,
            report: OptimizeReport {
                objective_history: trace.history,
                iterations: trace.iterations,
                termination,
                seconds: start.elapsed().as_secs_f64(),
                objective,
                certificate: Some(Certificate {
                    lower_bound,
                    relative_gap,
                }),
                diagnostics: vec![("rounding_floor", floor)],
                candidates: Vec::new(),
                chosen: None,
            },
        })
    }
}
