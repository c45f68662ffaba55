//! LRM's augmented-Lagrangian solvers (LRM paper, Algorithm 1): the
//! reference alternation with Algorithm 2 for L ([`LrmSolver::Alternating`]),
//! the same iteration with B eliminated exactly and SPG for L
//! ([`LrmSolver::Reduced`]), and the quadratic-penalty path that
//! [`LrmSolver::Penalty`] takes when `r < n` (multipliers fixed at zero).

use dp_core::{DpError, Result};
use dp_linalg::{Cholesky, Mat, MatMut, MatRef, Par};

#[allow(unused_imports)] // doc links
use super::LrmSolver;
use super::l1_ball::{project_columns, spg_over_columns};
use super::{
    AlternatingOptions, ColumnNorm, Decomposition, Lrm, ReducedOptions, Scaled, fit_termination,
    frob_residual,
};
use crate::Observer;
use crate::dense::{gemm, inner};
use crate::report::Event;
use crate::solvers::engine::{Budget, Clock, Executor, Solver, Termination};
use crate::solvers::spg::SpgOptions;

/// `‖B‖²_F`, `‖C − BL‖_F`, β and the inner iterations of one outer step,
/// on the scaled root, for its [`Event::Factorization`].
#[derive(Debug, Clone, Copy)]
struct StepFigures {
    penalty: f64,
    residual: f64,
    trace_btb: f64,
    inner_iterations: usize,
}

impl StepFigures {
    /// The event of outer step `iteration`, in the workload's own scale.
    fn observe(&self, iteration: usize, colmax: f64, observer: &mut dyn Observer) {
        observer.observe(&Event::Factorization {
            iteration,
            penalty: self.penalty,
            residual: self.residual * colmax,
            trace_btb: self.trace_btb * colmax * colmax,
            inner_iterations: self.inner_iterations,
        });
    }
}

/// What each outer iteration defines for itself; [`Logged`] runs it as a
/// [`Solver`].
trait OuterIteration {
    /// What the run hands back when no step failed.
    type Output;

    /// The objective before the first step.
    fn start(&self) -> f64;

    /// The convergence criterion the current iterate meets, if it meets
    /// it.
    fn converged(&self) -> Option<String>;

    /// One outer step: its figures, whose residual is the new objective.
    fn step(&mut self) -> Result<StepFigures>;

    /// The output after the last step.
    fn output(self) -> Self::Output;
}

/// An [`OuterIteration`] as a [`Solver`], with what both outer iterations
/// keep between steps: the last step's figures (for its
/// [`Event::Factorization`], in the workload's scale `colmax`) and the
/// error that ended the run, if one did (the run ends stalled and
/// [`Solver::finish`] returns the error).
struct Logged<S> {
    iteration: S,
    colmax: f64,
    last: Option<StepFigures>,
    error: Option<DpError>,
}

impl<S> Logged<S> {
    /// Runs `iteration`, whose events are in the workload's scale `colmax`.
    fn new(iteration: S, colmax: f64) -> Self {
        Self {
            iteration,
            colmax,
            last: None,
            error: None,
        }
    }
}

impl<S: OuterIteration> Solver for Logged<S> {
    type Output = Result<S::Output>;

    fn init(&mut self) -> f64 {
        self.iteration.start()
    }

    fn terminate(&self) -> Option<Termination> {
        self.iteration
            .converged()
            .map(|criterion| Termination::Converged { criterion })
    }

    fn next_iter(&mut self) -> std::result::Result<f64, Termination> {
        match self.iteration.step() {
            Ok(figures) => {
                self.last = Some(figures);
                Ok(figures.residual)
            }
            Err(e) => {
                let reason = e.to_string();
                self.error = Some(e);
                Err(Termination::Stalled { reason })
            }
        }
    }

    /// The last step's event, numbered `iteration`.
    fn events(&self, iteration: usize, observer: &mut dyn Observer) {
        if let Some(figures) = &self.last {
            figures.observe(iteration, self.colmax, observer);
        }
    }

    /// The output, unless a step failed.
    fn finish(self, _termination: &Termination) -> Self::Output {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.iteration.output()),
        }
    }
}

/// [`LrmSolver::Alternating`]'s outer iteration (run by [`Logged`]): per
/// step, `inner_iterations` alternations of the closed-form B update (9)
/// and Algorithm 2 for L, then (unless the residual is below the
/// tolerance) the β schedule and `π ← π + β(C − BL)`. Its objective is
/// the residual `‖C − BL‖_F` (finite: B and L stay finite, Algorithm 2
/// refuses a non-finite L). An error of a step (a failed factorization)
/// ends the run and is returned by [`Solver::finish`].
struct AlternatingSolver<'a> {
    c: &'a Mat<f64>,
    options: AlternatingOptions,
    norm: ColumnNorm,
    par: Par,
    colmax: f64,
    /// `max(residual_tolerance, γ)` on the scaled root.
    tolerance: f64,
    l: Mat<f64>,
    b: Mat<f64>,
    pi: Mat<f64>,
    beta: f64,
    /// Algorithm 2's last Lipschitz estimate (its warm start).
    omega: f64,
    residual: f64,
    outer: usize,
}

impl OuterIteration for AlternatingSolver<'_> {
    /// The final `(B, L)`, residual and outer steps.
    type Output = (Mat<f64>, Mat<f64>, f64, usize);

    fn start(&self) -> f64 {
        self.residual
    }

    /// The residual tolerance, tested after each step (not on the start).
    fn converged(&self) -> Option<String> {
        (self.outer > 0 && self.residual < self.tolerance).then(|| {
            format!(
                "alternating: residual {:.2e} < {:.2e}",
                self.residual * self.colmax,
                self.tolerance * self.colmax
            )
        })
    }

    /// One outer step (see the type's notes).
    fn step(&mut self) -> Result<StepFigures> {
        let (c, a, par) = (self.c, self.options, self.par);
        let r = self.l.nrows();
        self.outer += 1;
        for _ in 0..a.inner_iterations {
            // (9): B = (βW + π) Lᵀ (β L Lᵀ + I)⁻¹.
            let target = c * dp_linalg::Scale(self.beta) + &self.pi;
            let rhs = gemm(target.as_ref(), self.l.transpose(), par); // s×r
            let mut sys =
                gemm(self.l.as_ref(), self.l.transpose(), par) * dp_linalg::Scale(self.beta);
            for k in 0..r {
                sys[(k, k)] += 1.0;
            }
            let chol = Cholesky::factor(sys.as_ref())?;
            let mut bt = rhs.transpose().to_owned();
            chol.solve_in_place(bt.as_mut())?;
            self.b = bt.transpose().to_owned();
            // (10) by Algorithm 2.
            self.omega = apg(
                &self.b,
                &target,
                &mut self.l,
                self.norm,
                self.beta,
                self.omega,
                a.apg_iterations,
                par,
            )?;
        }
        self.residual = frob_residual(c, &self.b, &self.l, par);
        let figures = StepFigures {
            penalty: self.beta,
            residual: self.residual,
            trace_btb: inner(&self.b, &self.b),
            inner_iterations: a.inner_iterations,
        };
        if self.residual < self.tolerance {
            return Ok(figures);
        }
        if self.outer.is_multiple_of(a.beta_every) {
            self.beta = (self.beta * a.beta_growth).min(a.beta_max);
        }
        let diff = c - gemm(self.b.as_ref(), self.l.as_ref(), par);
        self.pi += &diff * dp_linalg::Scale(self.beta);
        Ok(figures)
    }

    fn output(self) -> Self::Output {
        (self.b, self.l, self.residual, self.outer)
    }
}

impl Lrm {
    /// [`LrmSolver::Alternating`]: Algorithm 1 of the LRM paper on the
    /// scaled root `c` from the SVD start `(l, b)` ([`AlternatingSolver`]
    /// under `max_outer` steps and the options' `max_seconds`). Stops
    /// below `max(residual_tolerance, γ)`; the run is flagged as failed
    /// above `failure_residual` or when `‖B‖²_F > ‖W‖²_F` (worse than
    /// noise on the data).
    pub(super) fn alternating(
        &self,
        c: &Mat<f64>,
        l: Mat<f64>,
        b: Mat<f64>,
        colmax: f64,
        norm: ColumnNorm,
        observer: &mut dyn Observer,
    ) -> Result<Decomposition> {
        let o = self.options;
        let a = o.alternating;
        let par = o.parallelism;
        let w_fro2 = inner(c, c);
        let tolerance = o.residual_tolerance.max(a.gamma / colmax);
        let solver = AlternatingSolver {
            c,
            options: a,
            norm,
            par,
            colmax,
            tolerance,
            pi: Mat::<f64>::zeros(c.nrows(), c.ncols()),
            beta: a.beta_initial,
            omega: 1.0,
            residual: frob_residual(c, &b, &l, par),
            outer: 0,
            l,
            b,
        };
        let budget = Budget::iterations(a.max_outer).with_seconds(o.max_seconds);
        let run = Executor::new(budget, observer)
            .scale(colmax)
            .run(Logged::new(solver, colmax));
        let (b, l, residual, outer) = run.output?;
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
        let cut = match run.termination {
            cut @ (Termination::Timeout { .. } | Termination::Interrupted) => Some(cut),
            _ => (residual >= tolerance && outer >= a.max_outer).then_some(
                Termination::MaxIterations {
                    iterations: a.max_outer,
                },
            ),
        };
        let scaled = Scaled {
            b,
            l,
            residual,
            termination: fit_termination(converged, cut, stop),
        };
        Ok(Decomposition::from_scaled(scaled, colmax, outer))
    }
}

/// The outer iteration of [`LrmSolver::Reduced`] (and of
/// [`LrmSolver::Penalty`]'s path when `r < n`), run by [`Logged`]. Per stage:
/// SPG on `φ(L) = min_B ½‖B‖² + β/2‖T − BL‖²`, `T = C + π/β`, within the
/// time left; the ridge B of update (9); then either `π ← π + β(C − BL)`
/// with β ×`beta_growth` when the residual did not fall by 4×
/// (augmented Lagrangian), or β ×10 with π = 0 (penalty path). Stops once
/// `‖C − BL‖_F` is at most the stage tolerance times `‖C‖_F`. Its
/// objective is that residual (`‖C‖_F`, the residual of B = 0, at the
/// start); an error of a stage ends the run and is returned by
/// [`Solver::finish`].
struct ReducedSolver<'a> {
    c: &'a Mat<f64>,
    norm: ColumnNorm,
    par: Par,
    colmax: f64,
    /// `Some` on the penalty path.
    penalty: Option<f64>,
    options: ReducedOptions,
    stage_spg: SpgOptions,
    /// `‖C‖_F`.
    w_fro: f64,
    /// The relative residual `‖C − BL‖_F / ‖C‖_F` ending the run.
    stage_tolerance: f64,
    beta_max: f64,
    /// The time left for each stage's SPG (started with the run).
    clock: Clock,
    l: Mat<f64>,
    pi: Mat<f64>,
    beta: f64,
    /// The last stage's residual (+∞ before the first).
    residual: f64,
    /// The last stage's B.
    last_b: Option<Mat<f64>>,
    outer: usize,
}

impl OuterIteration for ReducedSolver<'_> {
    /// The final L, the last stage's B, the last β and the stages run.
    type Output = (Mat<f64>, Option<Mat<f64>>, f64, usize);

    fn start(&self) -> f64 {
        self.w_fro
    }

    fn converged(&self) -> Option<String> {
        (self.residual <= self.stage_tolerance * self.w_fro).then(|| {
            format!(
                "residual {:.2e} <= {:.0e} ‖W‖_F",
                self.residual * self.colmax,
                self.stage_tolerance
            )
        })
    }

    /// One stage (see the type's notes).
    fn step(&mut self) -> Result<StepFigures> {
        let (c, par, beta) = (self.c, self.par, self.beta);
        let remaining = self.clock.remaining();
        self.outer += 1;
        let t = c + &self.pi * dp_linalg::Scale(1.0 / beta);
        let eval = |lx: MatRef<'_, f64>, grad: MatMut<'_, f64>| -> f64 {
            reduced_objective(&t, lx, beta, grad, par).unwrap_or(f64::INFINITY)
        };
        let spg_options = SpgOptions {
            budget: self.stage_spg.budget.with_seconds(remaining),
            ..self.stage_spg
        };
        let (next, solved) = spg_over_columns(&self.l, self.norm, eval, &spg_options, &mut (), 1.0);
        self.l = next;
        let b = ridge_b(&t, &self.l, beta, par).ok_or_else(|| DpError::NotConverged {
            solver: "LRM",
            reason: "I + βLLᵀ is not positive definite".into(),
        })?;
        let diff = c - gemm(b.as_ref(), self.l.as_ref(), par);
        let new_residual = inner(&diff, &diff).sqrt();
        let figures = StepFigures {
            penalty: beta,
            residual: new_residual,
            trace_btb: inner(&b, &b),
            inner_iterations: solved.iterations,
        };
        self.last_b = Some(b);
        if self.penalty.is_some() {
            self.beta *= 10.0;
        } else {
            self.pi += &diff * dp_linalg::Scale(beta);
            if new_residual > 0.25 * self.residual {
                self.beta = (beta * self.options.beta_growth).min(self.beta_max);
            }
        }
        self.residual = new_residual;
        Ok(figures)
    }

    fn output(self) -> Self::Output {
        (self.l, self.last_b, self.beta, self.outer)
    }
}

impl Lrm {
    /// Algorithm 1 with B eliminated exactly (see [`LrmSolver::Reduced`]),
    /// on the scaled root `c` from the start `l` ([`ReducedSolver`] under
    /// the outer steps and the options' `max_seconds`); ends with the
    /// exact least-squares B = W L⁺ when L supports W.
    ///
    /// `penalty = Some(β₀)` runs [`LrmSolver::Penalty`]'s path instead:
    /// π stays 0 and β = β₀·10^k at stage k.
    pub(super) fn decompose_reduced(
        &self,
        c: &Mat<f64>,
        l: Mat<f64>,
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
        let (max_outer, stage_spg, stage_tolerance) = match penalty {
            Some(_) => (p.stages, p.spg, p.residual_tolerance),
            None => (d.max_outer, d.spg, d.residual_tolerance),
        };
        let budget = Budget::iterations(max_outer).with_seconds(o.max_seconds);
        let solver = ReducedSolver {
            c,
            norm,
            par,
            colmax,
            penalty,
            options: d,
            stage_spg,
            w_fro,
            stage_tolerance,
            beta_max: d.beta_max_per_rank * r as f64,
            clock: Clock::start(budget),
            l,
            pi: Mat::<f64>::zeros(s, n),
            beta: penalty.unwrap_or(d.beta_per_rank * r as f64),
            residual: f64::INFINITY,
            last_b: None,
            outer: 0,
        };
        let run = Executor::new(budget, observer)
            .scale(colmax)
            .run(Logged::new(solver, colmax));
        let (l, last_b, beta, outer) = run.output?;
        let out_of_time = matches!(
            run.termination,
            Termination::Timeout { .. } | Termination::Interrupted
        );
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
            termination: fit_termination(converged, out_of_time.then_some(run.termination), stop),
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
