//! COA's settings: the paper's constants (Algorithm 1–3) and the
//! certificate's tolerances.

use dp_core::{DpError, Result};
use dp_linalg::Par;

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
    /// Armijo backtracking factor β (paper: 0.1; default 0.5, which keeps
    /// half of a rejected step instead of a tenth: the Newton directions
    /// from the SVD-bound start on dense random workloads are rejected at
    /// the unit step for several iterations, and steps of 0.1 there cost
    /// whole Newton iterations).
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
    /// Keep the last Newton step's Lyapunov preconditioner (saving its
    /// eigendecomposition) when that step's relative decrement was at most
    /// this: near the optimum the iterates, and so the Hessians, change
    /// little, and any fixed positive definite preconditioner keeps
    /// conjugate gradients exact. Far from it a stale one costs more
    /// Newton steps than it saves. 0 rebuilds it at every step.
    pub reuse_preconditioner_below: f64,
    /// The final stage stops once the certified gap at the primal
    /// multipliers is at most `certificate_target · gap_tolerance`,
    /// checked before each Newton direction (see
    /// `primal::CertificateCheck`); below 1 it leaves the objective
    /// itself within a fraction of the tolerance of the optimum.
    pub certificate_target: f64,
    /// `WᵀW` (normalized to mean eigenvalue 1) counts as positive definite
    /// when its smallest eigenvalue exceeds this; the homotopy then ends
    /// with a stage at θ = 0 instead of handing over to the dual.
    pub full_rank_threshold: f64,
    /// Starting point of the homotopy.
    pub start: CoaStart,
    /// When the Newton paths end above `gap_tolerance`, run the
    /// interior-point method of [`crate::optimizers::coa::interior_point`] on the
    /// row-space form of Program (10) (robust on rank-deficient, badly
    /// scaled workloads; about fifty n×n Newton systems).
    pub interior_point_fallback: bool,
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
            armijo_beta: 0.5,
            armijo_sigma: 0.25,
            cg_iterations: 5,
            cg_iterations_final: 60,
            max_newton_steps: 60,
            stage_tolerance: 1e-3,
            gap_tolerance: 1e-6,
            dual_iterations: 2000,
            lyapunov_preconditioner: true,
            reuse_preconditioner_below: 1e-3,
            certificate_target: 0.01,
            full_rank_threshold: 1e-8,
            start: CoaStart::SvdBound,
            interior_point_fallback: true,
            parallelism: Par::rayon(0),
        }
    }
}

impl CoaOptions {
    /// The paper's Algorithm 3 as stated: `X = I`, the full homotopy over
    /// θ = 1, 0.1, …, 1e-10 (then θ = 0 for full-rank `WᵀW`), T = 5
    /// conjugate-gradient steps in the intermediate stages, Armijo
    /// β = 0.1. Slower than the default, kept to reproduce the paper and
    /// as a cross-check.
    pub fn paper() -> Self {
        Self {
            start: CoaStart::Identity,
            armijo_beta: 0.1,
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
        if !(self.reuse_preconditioner_below >= 0.0 && self.reuse_preconditioner_below.is_finite())
        {
            return bad("reuse_preconditioner_below", "must be finite and >= 0");
        }
        if !(self.certificate_target > 0.0 && self.certificate_target <= 1.0) {
            return bad("certificate_target", "must lie in (0, 1]");
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
