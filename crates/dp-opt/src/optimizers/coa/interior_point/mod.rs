//! A log-barrier interior-point method for the row-space form of COA's
//! Program (10), the certifying fallback for workloads on which Newton's
//! method in `X` or in the dual multipliers loses its accuracy (rank
//! deficiency together with rows scaled over many orders of magnitude).
//!
//! **The program.** With `V = CᵀC` for a full-row-rank root `C` (r×n),
//! every strategy whose row space is W's is `A = Y^{1/2} C` for an r×r
//! `Y ≻ 0`, and then `tr(V (AᵀA)⁺) = tr(Y⁻¹)` and the squared column norms
//! are `cᵢᵀ Y cᵢ`. Program (10) (`min ⟨X⁻¹, V⟩, diag X = 1`) becomes
//!
//! ```text
//!     minimize tr(Y⁻¹)   subject to   cᵢᵀ Y cᵢ ≤ 1  (i = 1..n),  Y ≻ 0,
//! ```
//!
//! the same minimum (the inequalities hold with equality wherever the
//! multiplier is positive; cells with a zero multiplier are answered below
//! unit norm, which is how rank-deficient workloads reach the boundary of
//! Program (10)). Its Lagrange dual is the one of [`crate::optimizers::coa::dual`]:
//! `g(y) = 2 tr(C D Cᵀ)^{1/2} − Σ yᵢ` for `y ≥ 0`.
//!
//! **The method** (Boyd & Vandenberghe, *Convex Optimization*, §11.3):
//! minimize `φ_μ(Y) = tr(Y⁻¹) − μ Σ log σᵢ(Y)` with slacks
//! `σᵢ = 1 − cᵢᵀYcᵢ` by Newton's method with Armijo backtracking, then
//! divide μ by `mu_decrease` once the Newton decrement falls below
//! `centering · n · μ`. On the central path `yᵢ = μ/σᵢ` are dual feasible,
//! so every centred iterate yields the bound `ℓ(y) = f(y)²/Σyᵢ` of
//! [`crate::optimizers::coa::dual`] (valid for any `y ≥ 0`, so never an approximation) and
//! the feasible strategy `Y^{1/2}C`: the run stops on their relative gap.
//!
//! **One Newton step.** In the eigenbasis `Y = U diag(λ) Uᵀ`, with
//! `aᵢ = Uᵀcᵢ` the rows of `A = CᵀU` (n×r), the Hessian of `tr(Y⁻¹)` acts
//! elementwise: `Δ ↦ Δ ⊘ Ω`, `Ω_kl = λ_k²λ_l²/(λ_k+λ_l)` (Daleckii–Krein).
//! The barrier adds `Σᵢ (μ/σᵢ²) ⟨aᵢaᵢᵀ, Δ⟩ aᵢaᵢᵀ`, n rank-one terms, so by
//! Woodbury the step costs one n×n SPD solve with
//! `S = H + diag(σ²/μ)`, `H_ij = Σ_kl Ω_kl a_ik a_il a_jk a_jl`. `Ω` is a
//! Cauchy-like kernel of low numerical rank: a pivoted Cholesky
//! factorization of its unit-diagonal form `2√(λ_kλ_l)/(λ_k+λ_l)` gives
//! `Ω ≈ Σ_q w_q w_qᵀ` with Q terms (25 for κ(Y) = 10², about 120 for
//! 10¹², to 1e-15), and `H = Σ_q G_q ∘ G_q` with `G_q = A diag(w_q) Aᵀ`:
//! Q products of n×r by r×n, the lower triangle only. The slacks are
//! linear in Y, so the line search costs one r×r Cholesky per trial.
//!
//! Precision: the slacks of active cells shrink like μ/yᵢ, and
//! `1 − cᵢᵀYcᵢ` loses them to cancellation below about 1e-9 relative gap;
//! the run stops there (non-finite or non-positive slacks end it with the
//! best certified iterate), so ask for gaps of 1e-8 or more.

mod newton_step;

use dp_core::{DpError, Result};
use dp_linalg::{Mat, MatRef, Par, SymmetricEigen};

use super::dual::certified_lower_bound;
use crate::Observer;
use crate::dense::gemm;
use crate::report::{BoundSource, Event, Stage};
use crate::solvers::engine::{Budget, Executor, Solver, Termination};
use newton_step::{NewtonStep, Point, log_barrier_value, newton_step, quadratic_forms, slacks};

/// Options of [`minimize_trace_inverse`].
#[derive(Debug, Clone, Copy)]
pub struct InteriorPointOptions {
    /// Target relative gap between the best strategy and the best bound.
    pub gap_tolerance: f64,
    /// Factor by which μ falls after each centring (10).
    pub mu_decrease: f64,
    /// A point counts as centred when the Newton decrement is at most
    /// `centering · n · μ` (the duality gap on the central path is n·μ).
    pub centering: f64,
    /// Newton steps allowed in all.
    pub max_newton_steps: usize,
    /// Wall-clock seconds allowed, checked before each Newton step (a time
    /// cut ends the run as [`Termination::Timeout`] with the best strategy
    /// and bound so far); `None` for no limit.
    pub max_seconds: Option<f64>,
    /// Pivoted-Cholesky tolerance of the kernel factorization (relative to
    /// its unit diagonal).
    pub kernel_tolerance: f64,
    /// Parallelism of the matrix products.
    pub parallelism: Par,
}

impl Default for InteriorPointOptions {
    fn default() -> Self {
        Self {
            gap_tolerance: 1e-7,
            mu_decrease: 10.0,
            centering: 1e-2,
            max_newton_steps: 400,
            max_seconds: None,
            kernel_tolerance: 1e-15,
            parallelism: Par::rayon(0),
        }
    }
}

impl InteriorPointOptions {
    /// The run's budget: `max_newton_steps` Newton steps, `max_seconds`.
    pub fn budget(&self) -> Budget {
        Budget::iterations(self.max_newton_steps).with_seconds(self.max_seconds)
    }

    fn validate(&self) -> Result<()> {
        let ok = self.gap_tolerance > 0.0
            && self.gap_tolerance < 1.0
            && self.mu_decrease > 1.0
            && self.mu_decrease.is_finite()
            && self.centering > 0.0
            && self.centering.is_finite()
            && self.max_newton_steps > 0
            && self.kernel_tolerance > 0.0
            && self.kernel_tolerance < 1.0;
        if ok {
            self.budget().validate()
        } else {
            Err(DpError::InvalidParameter {
                name: "interior-point options",
                reason: "need 0 < gap_tolerance < 1, mu_decrease > 1, centering > 0, \
                         max_newton_steps ≥ 1 and 0 < kernel_tolerance < 1"
                    .into(),
            })
        }
    }
}

/// The outcome of [`minimize_trace_inverse`].
#[derive(Debug, Clone)]
pub struct InteriorPointSolve {
    /// The best strategy found, `Y^{1/2} C` rescaled to `Δ₂ = 1` (r×n).
    pub strategy: Mat<f64>,
    /// Its objective `tr(Y⁻¹) · maxᵢ cᵢᵀYcᵢ` (= `l2_obj` for `V = CᵀC`).
    pub objective: f64,
    /// The best lower bound `ℓ(y)` certified on the way.
    pub lower_bound: f64,
    /// The multipliers behind that bound.
    pub multipliers: Vec<f64>,
    /// Newton steps taken.
    pub newton_steps: usize,
    /// Why the run ended: the relative gap met `gap_tolerance`, the
    /// Newton step limit, the wall clock, or a numerical failure
    /// (stalled).
    pub termination: Termination,
}

impl InteriorPointSolve {
    /// `(objective − lower_bound) / objective`.
    pub fn relative_gap(&self) -> f64 {
        ((self.objective - self.lower_bound) / self.objective).max(0.0)
    }
}

/// Minimizes `tr(Y⁻¹)` subject to `cᵢᵀYcᵢ ≤ 1` for the columns `cᵢ` of
/// `root` (r×n, full row rank) by the barrier method of the module notes,
/// from `Y = M(y₀)^{-1/2}` scaled into the interior (`y₀` = `start` when it
/// gives a nonsingular `M`, else all ones), run by the [`Executor`] under
/// the options' Newton-step and wall-clock budget. `observer` receives
/// the events of each centred point.
pub fn minimize_trace_inverse(
    root: MatRef<'_, f64>,
    start: Option<&[f64]>,
    options: &InteriorPointOptions,
    observer: &mut dyn Observer,
) -> Result<InteriorPointSolve> {
    options.validate()?;
    let (r, n) = (root.nrows(), root.ncols());
    if r == 0 || n == 0 || !dp_linalg::all_finite(root) {
        return Err(DpError::InvalidParameter {
            name: "Gram root",
            reason: "must be a non-empty finite matrix".into(),
        });
    }
    let barrier = Barrier::new(root, start, options, observer)?;
    // The executor gets no observer: its per-step `Event::Iteration` would
    // carry this program's normalized objective, not the workload's.
    Ok(Executor::new(options.budget(), &mut ()).run(barrier).output)
}

/// The state of the barrier method between Newton steps: the iterate,
/// the barrier weight μ, and the best strategy and certified bound seen.
struct Barrier<'a, 'o> {
    root: MatRef<'a, f64>,
    options: InteriorPointOptions,
    /// Receives the events of each centred point.
    observer: &'o mut dyn Observer,
    point: Point,
    mu: f64,
    best_strategy: Mat<f64>,
    best_objective: f64,
    best_bound: f64,
    best_multipliers: Vec<f64>,
    /// Newton steps taken (a run that ends while centring, or on a step
    /// that could not be computed, counts no step for that attempt).
    steps: usize,
}

impl<'a, 'o> Barrier<'a, 'o> {
    /// The starting point of [`minimize_trace_inverse`], with μ₀ = tr(Y⁻¹)/n.
    fn new(
        root: MatRef<'a, f64>,
        start: Option<&[f64]>,
        options: &InteriorPointOptions,
        observer: &'o mut dyn Observer,
    ) -> Result<Self> {
        let par = options.parallelism;
        let y_matrix = initial_point(root, start, par)?;
        let Some(point) = Point::new(root, &y_matrix, par) else {
            return Err(DpError::NotConverged {
                solver: "COA interior point",
                reason: "the starting point is not strictly feasible".into(),
            });
        };
        let n = root.ncols();
        Ok(Self {
            root,
            options: *options,
            observer,
            mu: point.trace_inverse() / n as f64,
            best_strategy: point.strategy(par),
            best_objective: point.objective(),
            best_bound: 0.0,
            best_multipliers: vec![0.0; n],
            point,
            steps: 0,
        })
    }

    /// The best objective (non-negative) as the executor sees it: capped
    /// at `f64::MAX`, so that only the method's own tests end the run (the
    /// gap test reads a non-finite objective as not converged).
    fn reported(&self) -> f64 {
        self.best_objective.min(f64::MAX)
    }

    /// Certifies the centred point with `y = μ/σ`, reports it and moves
    /// along the central path (μ ← μ / `mu_decrease`).
    fn centre(&mut self, multipliers: Vec<f64>) {
        if let Ok(bound) = certified_lower_bound(self.root, &multipliers)
            && bound.is_finite()
            && bound > self.best_bound
        {
            self.best_bound = bound;
            self.best_multipliers = multipliers;
        }
        report_centred(
            &mut *self.observer,
            self.steps,
            self.mu,
            self.best_objective,
            self.best_bound,
        );
        self.mu /= self.options.mu_decrease;
    }

    /// The damped Newton step `newton` at weight `mu` (Armijo backtracking
    /// on `φ_μ`), the new iterate and the best strategy; why it could not
    /// be taken otherwise.
    fn step(&mut self, newton: &NewtonStep, mu: f64) -> std::result::Result<f64, Termination> {
        let par = self.options.parallelism;
        let r = self.root.nrows();
        let (lambda, step, decrement) = (&self.point.lambda, &newton.step, newton.decrement);
        let slack_change = quadratic_forms(&self.point.a, step, par);
        let value0 = log_barrier_value(lambda, step, 0.0, &self.point.slack, &slack_change, mu);
        let Some(value0) = value0 else {
            return Err(stalled("barrier not finite at the current iterate".into()));
        };
        let mut alpha = 1.0;
        let mut accepted = false;
        for _ in 0..60 {
            if let Some(v) =
                log_barrier_value(lambda, step, alpha, &self.point.slack, &slack_change, mu)
                && v <= value0 - 0.25 * alpha * decrement
            {
                accepted = true;
                break;
            }
            alpha *= 0.5;
        }
        if !accepted {
            return Err(stalled(format!("line search failed at μ = {mu:.2e}")));
        }
        self.steps += 1;
        // Y ← U (Λ + αΔ) Uᵀ.
        let inner_new = Mat::from_fn(r, r, |k, l| {
            alpha * step[(k, l)] + if k == l { lambda[k] } else { 0.0 }
        });
        let t = gemm(self.point.basis.as_ref(), inner_new.as_ref(), par);
        let mut y_matrix = gemm(t.as_ref(), self.point.basis.transpose(), par);
        dp_linalg::symmetrize(&mut y_matrix);
        let Some(next) = Point::new(self.root, &y_matrix, par) else {
            let reason = format!("iterate left the domain at rounding level (μ = {mu:.2e})");
            return Err(stalled(reason));
        };
        self.point = next;
        let objective = self.point.objective();
        if objective < self.best_objective {
            self.best_objective = objective;
            self.best_strategy = self.point.strategy(par);
        }
        Ok(self.reported())
    }
}

fn stalled(reason: String) -> Termination {
    Termination::Stalled { reason }
}

impl Solver for Barrier<'_, '_> {
    type Output = InteriorPointSolve;

    fn init(&mut self) -> f64 {
        self.reported()
    }

    /// The relative gap between the best strategy and the best bound.
    fn terminate(&self) -> Option<Termination> {
        let tolerance = self.options.gap_tolerance;
        let gap = (self.best_objective - self.best_bound) / self.best_objective;
        (gap <= tolerance).then(|| Termination::Converged {
            criterion: format!("relative gap {gap:.2e} <= {tolerance:.0e}"),
        })
    }

    /// One Newton step, preceded by as many centrings (bound, μ update) as
    /// the current point passes. A centring that closes the gap ends the
    /// iteration without a step; [`Solver::terminate`] then reports it.
    fn next_iter(&mut self) -> std::result::Result<f64, Termination> {
        let o = self.options;
        let n = self.root.ncols();
        loop {
            let mu = self.mu;
            let multipliers: Vec<f64> = self.point.slack.iter().map(|s| mu / s).collect();
            let Some(newton) = newton_step(&self.point, mu, o.kernel_tolerance, o.parallelism)
            else {
                let reason = format!("Newton system not positive definite at μ = {mu:.2e}");
                return Err(stalled(reason));
            };
            if !newton.decrement.is_finite() {
                return Err(stalled(format!(
                    "non-finite Newton decrement at μ = {mu:.2e}"
                )));
            }
            if newton.decrement <= o.centering * n as f64 * mu {
                // Centred: certify with y = μ/σ, then move along the path.
                self.centre(multipliers);
                if self.terminate().is_some() {
                    return Ok(self.reported());
                }
            } else {
                return self.step(&newton, mu);
            }
        }
    }

    fn finish(self, termination: &Termination) -> InteriorPointSolve {
        InteriorPointSolve {
            strategy: self.best_strategy,
            objective: self.best_objective,
            lower_bound: self.best_bound,
            multipliers: self.best_multipliers,
            newton_steps: self.steps,
            termination: termination.clone(),
        }
    }
}

/// `M(y₀)^{-1/2}` (`M = C diag(y₀) Cᵀ`) scaled so that the largest
/// `cᵢᵀYcᵢ` is 1/2.
fn initial_point(root: MatRef<'_, f64>, start: Option<&[f64]>, par: Par) -> Result<Mat<f64>> {
    let n = root.ncols();
    let ones = vec![1.0; n];
    let candidates: Vec<&[f64]> = match start {
        Some(y) if y.len() == n && y.iter().all(|v| v.is_finite() && *v >= 0.0) => {
            vec![y, &ones]
        }
        _ => vec![&ones],
    };
    for y in candidates {
        let cs = Mat::from_fn(root.nrows(), n, |k, j| root[(k, j)] * y[j].sqrt());
        let mut m = gemm(cs.as_ref(), cs.transpose(), par);
        dp_linalg::symmetrize(&mut m);
        let Ok(eig) = SymmetricEigen::new(m.as_ref()) else {
            continue;
        };
        let lmax = eig.values.iter().copied().fold(0.0, f64::max);
        if eig.values.iter().any(|l| l.is_nan() || *l <= 1e-14 * lmax) {
            continue;
        }
        let y_matrix = eig.map(|l| 1.0 / l.sqrt());
        let a = gemm(root.transpose(), eig.vectors.as_ref(), par);
        let inv_sqrt: Vec<f64> = eig.values.iter().map(|l| 1.0 / l.sqrt()).collect();
        let largest = slacks(&a, &inv_sqrt)
            .iter()
            .map(|s| 1.0 - s)
            .fold(0.0, f64::max);
        if largest.is_finite() && largest > 0.0 {
            return Ok(y_matrix * dp_linalg::Scale(0.5 / largest));
        }
    }
    Err(DpError::NotConverged {
        solver: "COA interior point",
        reason: "no strictly feasible starting point (is the root of full row rank?)".into(),
    })
}

/// The events of a centred point: the barrier weight, the best
/// objective and the best certified bound so far.
fn report_centred(
    observer: &mut dyn Observer,
    iteration: usize,
    mu: f64,
    objective: f64,
    bound: f64,
) {
    observer.observe(&Event::Stage {
        iteration,
        stage: Stage::BarrierWeight(mu),
    });
    observer.observe(&Event::Candidate {
        iteration,
        name: "interior point",
        objective: Some(objective),
    });
    observer.observe(&Event::LowerBound {
        iteration,
        bound,
        source: BoundSource::InteriorPoint,
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The Gram root of Prefix(16) (full rank, 16×16).
    fn prefix_root() -> Mat<f64> {
        use dp_workloads::Workload;
        let gram = dp_workloads::workload::Prefix::new(16).unwrap().gram();
        dp_linalg::gram_root(gram.as_ref()).unwrap()
    }

    /// A zero-second budget takes no Newton step and returns the start:
    /// `Y₀ ∝ M^{-1/2}` with `M = CCᵀ`, whose objective
    /// `tr(Y₀⁻¹)·maxᵢ cᵢᵀY₀cᵢ = Σₖ√mₖ · maxᵢ cᵢᵀM^{-1/2}cᵢ` does not depend on
    /// the scaling; no point was centred, so there is no bound yet.
    #[test]
    fn a_zero_second_budget_returns_the_start() {
        let root = prefix_root();
        let options = InteriorPointOptions {
            max_seconds: Some(0.0),
            ..InteriorPointOptions::default()
        };
        let solved = minimize_trace_inverse(root.as_ref(), None, &options, &mut ()).unwrap();
        assert_eq!(solved.termination, Termination::Timeout { seconds: 0.0 });
        assert_eq!(solved.newton_steps, 0);
        assert_eq!(solved.lower_bound, 0.0);
        assert!(solved.multipliers.iter().all(|&y| y == 0.0));
        let m = &root * root.transpose();
        let eig = SymmetricEigen::new(m.as_ref()).unwrap();
        let inv_sqrt = eig.map(|l| 1.0 / l.sqrt());
        let largest = (0..root.ncols())
            .map(|i| {
                let c = root.col(i);
                let t = &inv_sqrt * c;
                (0..root.nrows()).map(|k| c[k] * t[k]).sum::<f64>()
            })
            .fold(0.0, f64::max);
        let expected = eig.values.iter().map(|l| l.sqrt()).sum::<f64>() * largest;
        assert!(
            (solved.objective - expected).abs() <= 1e-12 * expected,
            "{} vs {expected}",
            solved.objective
        );
        let eval =
            dp_core::accuracy::evaluate_strategy(root.as_ref(), solved.strategy.as_ref()).unwrap();
        assert!((eval.l2_obj() - solved.objective).abs() <= 1e-10 * solved.objective);
    }

    /// The run is deterministic, so a budget of k Newton steps below the
    /// N an unlimited run takes stops after exactly k of the same steps
    /// (the best objective never rising with k), and a budget above N
    /// reproduces the unlimited run.
    #[test]
    fn a_step_budget_stops_after_exactly_that_many_steps() {
        let root = prefix_root();
        let run = |max_newton_steps| {
            let options = InteriorPointOptions {
                max_newton_steps,
                ..InteriorPointOptions::default()
            };
            minimize_trace_inverse(root.as_ref(), None, &options, &mut ()).unwrap()
        };
        let full = run(10_000);
        assert!(full.termination.converged(), "{:?}", full.termination);
        let steps = full.newton_steps;
        assert!(steps > 5);
        let mut previous = f64::INFINITY;
        for k in [1, 2, 5, steps - 1] {
            let short = run(k);
            assert_eq!(
                short.termination,
                Termination::MaxIterations { iterations: k }
            );
            assert_eq!(short.newton_steps, k);
            assert!(short.objective <= previous && short.objective >= full.objective);
            previous = short.objective;
        }
        let enough = run(steps + 1);
        assert_eq!(enough.termination, full.termination);
        assert_eq!(enough.newton_steps, steps);
        assert_eq!(enough.objective.to_bits(), full.objective.to_bits());
        assert_eq!(enough.lower_bound.to_bits(), full.lower_bound.to_bits());
    }

    /// A NaN or negative time limit is refused.
    #[test]
    fn a_bad_time_limit_is_refused() {
        let root = prefix_root();
        for t in [f64::NAN, -1.0] {
            let options = InteriorPointOptions {
                max_seconds: Some(t),
                ..InteriorPointOptions::default()
            };
            assert!(minimize_trace_inverse(root.as_ref(), None, &options, &mut ()).is_err());
        }
    }

    /// A rank-deficient workload with rows scaled over 10^±2 (the class on
    /// which Newton in X or in y stalled, 0.6% above the optimum): the
    /// interior-point method certifies it, its strategy's objective is what the error
    /// formula gives, and 2,000 random strategies stay above its bound.
    #[test]
    fn certifies_a_badly_scaled_rank_deficient_workload() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(64);
        let (m, n) = (30, 40);
        let w = Mat::from_fn(m, n, |_, _| 0.0);
        let mut w = w;
        for i in 0..m {
            let a = rng.random_range(0..n);
            let b = rng.random_range(0..n);
            let scale = 10f64.powf(rng.random_range(-2.0..2.0));
            for j in a.min(b)..=a.max(b) {
                w[(i, j)] = scale;
            }
        }
        let gram = dp_linalg::gram(w.as_ref(), dp_linalg::Par::Seq);
        let root = dp_linalg::gram_root(gram.as_ref()).unwrap();
        assert!(root.nrows() < n);
        let options = InteriorPointOptions::default();
        let solved = minimize_trace_inverse(root.as_ref(), None, &options, &mut ()).unwrap();
        assert!(solved.termination.converged(), "{:?}", solved.termination);
        assert!(solved.relative_gap() <= 1e-7);
        let eval =
            dp_core::accuracy::evaluate_strategy(w.as_ref(), solved.strategy.as_ref()).unwrap();
        assert!(eval.support.supported);
        assert!((eval.l2_obj() - solved.objective).abs() <= 1e-8 * solved.objective);
        for _ in 0..2000 {
            let a = Mat::from_fn(n, n, |_, _| rng.random::<f64>() * 2.0 - 1.0);
            let obj = dp_core::accuracy::evaluate_strategy(w.as_ref(), a.as_ref())
                .unwrap()
                .l2_obj();
            assert!(obj >= solved.lower_bound * (1.0 - 1e-12));
        }
    }
}
