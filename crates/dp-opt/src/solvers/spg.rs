//! The nonmonotone spectral projected gradient method of Birgin, Martínez
//! and Raydan ("Nonmonotone spectral projected gradient methods on convex
//! sets", SIAM J. Optim. 10(4), 2000: algorithm SPG2), used by ESM and by
//! LRM's L updates.
//!
//! Each iteration moves along `d = P(x − α∇f) − x`, with `α` the spectral
//! (Barzilai–Borwein) step `sᵀs / sᵀy` clipped to `[α_min, α_max]` (α_max
//! when `sᵀy ≤ 0`), and accepts `x + λd` once
//! `f(x + λd) ≤ max_{0≤j<M} f_{k−j} + γ λ ∇fᵀd` (nonmonotone Armijo over the
//! last `M` values), backtracking by the safeguarded quadratic
//! interpolation `λ ← −½λ²∇fᵀd / (f(x+λd) − f − λ∇fᵀd)` when it lies in
//! `[σ₁, σ₂λ]`, else `λ/2`. Constants are the paper's: `M = 10`,
//! `γ = 1e-4`, `σ₁ = 0.1`, `σ₂ = 0.9`, `α ∈ [1e-30, 1e30]`.

use crate::report::{Event, Observer};
use crate::solvers::engine::{Budget, Executor, Run, Solver, Termination};

/// Options of [`minimize`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpgOptions {
    /// Nonmonotone memory M (10).
    pub memory: usize,
    /// Iterations and wall-clock seconds (the clock is checked once per
    /// iteration; a time cut ends the run as [`Termination::Timeout`]).
    pub budget: Budget,
    /// Stop when `‖P(x − ∇f) − x‖∞ ≤ tolerance` (the paper's criterion;
    /// callers scale their problem so that it is meaningful).
    pub tolerance: f64,
    /// Also stop when the best value improved by less than this relative
    /// amount over the last `4·memory` iterations.
    pub stall_tolerance: f64,
    /// First step `α₀ = 1/‖∇f(x₀)‖∞` (a short first move) instead of the
    /// paper's `1/‖P(x₀ − ∇f) − x₀‖∞`. On non-convex problems (LRM's) the
    /// first move picks the basin, and a short one stays near the start.
    pub gradient_initial_step: bool,
}

impl Default for SpgOptions {
    fn default() -> Self {
        Self {
            memory: 10,
            budget: Budget::iterations(1000),
            tolerance: 1e-8,
            stall_tolerance: 1e-9,
            gradient_initial_step: false,
        }
    }
}

/// What [`Spg`] hands back. The run's iterations, objective history and
/// termination (converged on the projected-gradient test or on the stall
/// test, stalled when the line search failed, or the budget) are the
/// executor's [`Run`].
#[derive(Debug, Clone)]
pub struct SpgResult {
    /// The last iterate if it passed the projected-gradient test, else the
    /// best point found.
    pub x: Vec<f64>,
    /// Its value.
    pub value: f64,
    /// Function–gradient evaluations.
    pub evaluations: usize,
    /// `‖P(x − ∇f) − x‖∞` at the last iterate.
    pub projected_gradient: f64,
}

const GAMMA: f64 = 1e-4;
const SIGMA1: f64 = 0.1;
const SIGMA2: f64 = 0.9;
const ALPHA_MIN: f64 = 1e-30;
const ALPHA_MAX: f64 = 1e30;

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>()
}

/// SPG2 as a [`Solver`]: minimizes `f` over a closed convex set given by
/// its Euclidean projection `project` (applied in place). `eval(x, grad)`
/// returns `f(x)` and writes the gradient; a non-finite value is treated
/// as +∞.
pub struct Spg<E, P> {
    eval: E,
    project: P,
    options: SpgOptions,
    x: Vec<f64>,
    g: Vec<f64>,
    f: f64,
    pg: f64,
    alpha: f64,
    recent: Vec<f64>,
    best_history: Vec<f64>,
    best_x: Vec<f64>,
    best_f: f64,
    evaluations: usize,
}

impl<E, P> Spg<E, P>
where
    E: FnMut(&[f64], &mut [f64]) -> f64,
    P: FnMut(&mut [f64]),
{
    /// The solver from `x0` (projected before the first evaluation).
    pub fn new(eval: E, project: P, x0: Vec<f64>, options: &SpgOptions) -> Self {
        let n = x0.len();
        Self {
            eval,
            project,
            options: *options,
            x: x0,
            g: vec![0.0; n],
            f: f64::INFINITY,
            pg: f64::INFINITY,
            alpha: 1.0,
            recent: Vec::new(),
            best_history: Vec::new(),
            best_x: Vec::new(),
            best_f: f64::INFINITY,
            evaluations: 0,
        }
    }

    fn pg_norm(&mut self) -> f64 {
        let mut p: Vec<f64> = self.x.iter().zip(&self.g).map(|(a, b)| a - b).collect();
        (self.project)(&mut p);
        p.iter()
            .zip(&self.x)
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()))
    }
}

impl<E, P> Solver for Spg<E, P>
where
    E: FnMut(&[f64], &mut [f64]) -> f64,
    P: FnMut(&mut [f64]),
{
    type Output = SpgResult;

    fn init(&mut self) -> f64 {
        (self.project)(&mut self.x);
        self.f = (self.eval)(&self.x, &mut self.g);
        self.evaluations = 1;
        self.pg = self.pg_norm();
        let first = if self.options.gradient_initial_step {
            self.g.iter().fold(0.0f64, |m, v| m.max(v.abs()))
        } else {
            self.pg
        };
        self.alpha = if first > 0.0 {
            (1.0 / first).clamp(ALPHA_MIN, ALPHA_MAX)
        } else {
            1.0
        };
        self.recent = vec![self.f];
        self.best_history = vec![self.f];
        self.best_x.clone_from(&self.x);
        self.best_f = self.f;
        self.f
    }

    fn terminate(&self) -> Option<Termination> {
        let o = &self.options;
        if self.pg <= o.tolerance {
            return Some(Termination::Converged {
                criterion: format!(
                    "projected gradient {:.1e} <= {:.0e} (SPG)",
                    self.pg, o.tolerance
                ),
            });
        }
        let window = 4 * o.memory.max(1);
        if self.best_history.len() > window {
            let old = self.best_history[self.best_history.len() - 1 - window];
            if (old - self.best_f) <= o.stall_tolerance * self.best_f.abs().max(f64::MIN_POSITIVE) {
                return Some(Termination::Converged {
                    criterion: format!(
                        "relative improvement below {:.0e} over {window} iterations (SPG)",
                        o.stall_tolerance
                    ),
                });
            }
        }
        None
    }

    fn next_iter(&mut self) -> Result<f64, Termination> {
        let n = self.x.len();
        let (x, g, alpha) = (&self.x, &self.g, self.alpha);
        let mut d: Vec<f64> = x.iter().zip(g).map(|(a, b)| a - alpha * b).collect();
        (self.project)(&mut d);
        d.iter_mut().zip(&self.x).for_each(|(di, xi)| *di -= xi);
        let slope = dot(&self.g, &d);
        let f_max = self
            .recent
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        let f = self.f;
        let mut lambda = 1.0;
        let mut accepted = None;
        let mut g_new = vec![0.0; n];
        for _ in 0..60 {
            let trial: Vec<f64> = self.x.iter().zip(&d).map(|(a, b)| a + lambda * b).collect();
            let f_trial = (self.eval)(&trial, &mut g_new);
            self.evaluations += 1;
            if f_trial.is_finite() && f_trial <= f_max + GAMMA * lambda * slope {
                accepted = Some((trial, f_trial));
                break;
            }
            let denom = f_trial - f - lambda * slope;
            let interp = -0.5 * lambda * lambda * slope / denom;
            lambda = if f_trial.is_finite() && interp >= SIGMA1 && interp <= SIGMA2 * lambda {
                interp
            } else {
                lambda / 2.0
            };
        }
        let Some((x_new, f_new)) = accepted else {
            return Err(Termination::Stalled {
                reason: "SPG line search failed".into(),
            });
        };
        let s: Vec<f64> = x_new.iter().zip(&self.x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = g_new.iter().zip(&self.g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        self.alpha = if sy <= 0.0 {
            ALPHA_MAX
        } else {
            (dot(&s, &s) / sy).clamp(ALPHA_MIN, ALPHA_MAX)
        };
        self.x = x_new;
        self.g = g_new;
        self.f = f_new;
        self.recent.push(f_new);
        if self.recent.len() > self.options.memory.max(1) {
            self.recent.remove(0);
        }
        if f_new < self.best_f {
            self.best_f = f_new;
            self.best_x.clone_from(&self.x);
        }
        self.best_history.push(self.best_f);
        self.pg = self.pg_norm();
        Ok(f_new)
    }

    fn events(&self, iteration: usize, observer: &mut dyn Observer) {
        observer.observe(&Event::ProjectedGradient {
            iteration,
            norm: self.pg,
        });
    }

    fn finish(self, termination: &Termination) -> SpgResult {
        // The last iterate is the certified one when the projected-gradient
        // test ended the run; otherwise the best seen (the method is
        // nonmonotone).
        let certified =
            termination.converged() && self.f.is_finite() && self.pg <= self.options.tolerance;
        let (x, value) = if certified {
            (self.x, self.f)
        } else {
            (self.best_x, self.best_f)
        };
        SpgResult {
            x,
            value,
            evaluations: self.evaluations,
            projected_gradient: self.pg,
        }
    }
}

/// Runs [`Spg`] under the options' budget, reporting to `observer`
/// (objective per iteration in the problem's own units and the
/// projected-gradient norm).
pub fn minimize(
    eval: impl FnMut(&[f64], &mut [f64]) -> f64,
    project: impl FnMut(&mut [f64]),
    x0: Vec<f64>,
    options: &SpgOptions,
    observer: &mut dyn Observer,
) -> Run<SpgResult> {
    Executor::new(options.budget, observer).run(Spg::new(eval, project, x0, options))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A box-constrained quadratic whose minimizer is the clipped
    /// unconstrained one (diagonal Hessian), some bounds active.
    #[test]
    fn solves_box_constrained_quadratic() {
        let n = 40;
        let h: Vec<f64> = (0..n)
            .map(|i| 1.0 + 100.0 * (i as f64 / n as f64))
            .collect();
        let c: Vec<f64> = (0..n).map(|i| 3.0 * ((i * 7) as f64).sin()).collect();
        let eval = |x: &[f64], g: &mut [f64]| {
            let mut f = 0.0;
            for i in 0..n {
                g[i] = h[i] * x[i] - c[i];
                f += 0.5 * h[i] * x[i] * x[i] - c[i] * x[i];
            }
            f
        };
        let project = |x: &mut [f64]| x.iter_mut().for_each(|v| *v = v.clamp(-0.02, 0.02));
        let opts = SpgOptions {
            tolerance: 1e-12,
            ..SpgOptions::default()
        };
        let r = minimize(eval, project, vec![0.0; n], &opts, &mut ());
        assert!(r.termination.converged(), "{}", r.termination);
        assert!(r.output.projected_gradient <= 1e-12);
        for i in 0..n {
            let expect = (c[i] / h[i]).clamp(-0.02, 0.02);
            assert!((r.output.x[i] - expect).abs() < 1e-10, "{i}");
        }
    }

    /// Projection onto the unit L1 ball: the minimizer of ‖x − z‖² over
    /// the ball is the projection of z (checked against the exact
    /// projection of `crate::optimizers::lrm::project_l1_ball`).
    #[test]
    fn minimizes_over_l1_ball() {
        let z: Vec<f64> = (0..12).map(|i| ((i * 5 % 7) as f64 - 3.0) / 2.0).collect();
        let eval = |x: &[f64], g: &mut [f64]| {
            let mut f = 0.0;
            for i in 0..x.len() {
                g[i] = x[i] - z[i];
                f += 0.5 * (x[i] - z[i]).powi(2);
            }
            f
        };
        let project = |x: &mut [f64]| crate::optimizers::lrm::project_l1_ball(x, 1.0);
        let opts = SpgOptions {
            tolerance: 1e-13,
            ..SpgOptions::default()
        };
        let r = minimize(eval, project, vec![0.0; 12], &opts, &mut ());
        let mut expect = z.clone();
        crate::optimizers::lrm::project_l1_ball(&mut expect, 1.0);
        for (got, want) in r.output.x.iter().zip(&expect) {
            assert!((got - want).abs() < 1e-10);
        }
    }
}
