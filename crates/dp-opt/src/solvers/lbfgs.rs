//! Limited-memory BFGS for smooth unconstrained minimization (Nocedal &
//! Wright, *Numerical Optimization*, 2nd ed., Algorithm 7.4 with the
//! two-loop recursion of Algorithm 7.5), used by the p-Identity optimizer.
//!
//! Line search: backtracking from the unit step (the first iteration starts
//! at `1/‖∇f‖∞`) with the Armijo condition `f(x + αd) ≤ f(x) + c₁ α ∇fᵀd`,
//! `c₁ = 1e-4`, halving at most 60 times. A pair `(s, y)` enters the memory
//! only when the curvature `sᵀy > 1e-12 ‖s‖‖y‖` holds, which keeps the
//! inverse-Hessian model positive definite without a Wolfe search; if the
//! model's direction is not a descent direction the memory is cleared and
//! the step falls back to steepest descent.
//!
//! With [`LbfgsOptions::nonnegative`] it minimizes over `x ≥ 0` by the
//! projected quasi-Newton method of Kim, Sra and Dhillon ("Tackling
//! box-constrained optimization via a new projected quasi-Newton
//! approach", SIAM J. Sci. Comput. 2010) with Bertsekas' ε-active set
//! (Bertsekas 1982, two-metric projection): variables at (or within
//! `ε = min(ε₀, w)` of) the bound whose gradient pushes them outward,
//! `w = ‖x − P(x − ∇f)‖∞`, are held fixed; the two-loop direction is
//! computed on the others' gradient; the step is the projected path
//! `P(x + αd)` with the Armijo condition on `∇fᵀ(P(x + αd) − x)`; the
//! gradient test uses the projected gradient `w`. Bounds met exactly keep
//! their entries at 0 (a reparametrization `x = φ²` reaches 0 only in the
//! limit, with vanishing gradients).

use std::collections::VecDeque;

use dp_core::DpError;

use crate::report::Observer;
use crate::solvers::engine::{Budget, Executor, Run, Solver, Termination};
use dp_linalg::dot;

/// Options of [`minimize`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LbfgsOptions {
    /// Pairs `(s, y)` kept (Nocedal & Wright suggest 3–20).
    pub memory: usize,
    /// Iterations and wall-clock seconds (a time cut ends the run as
    /// [`Termination::Timeout`]).
    pub budget: Budget,
    /// Stop when `‖∇f‖∞ ≤ gradient_tolerance · max(|f|, 1) / max(‖x‖∞, 1)`
    /// (scale-free first-order optimality).
    pub gradient_tolerance: f64,
    /// Stop when the relative decrease `(f_k − f_{k+1}) / max(|f_k|, 1)`
    /// stays below this for 5 consecutive iterations (default 1e-10; SciPy's
    /// L-BFGS-B, which HDMM uses, stops after one iteration below 2.2e-9).
    pub function_tolerance: f64,
    /// Minimize over `x ≥ 0` (projected quasi-Newton, see the module
    /// documentation); the start is projected first.
    pub nonnegative: bool,
}

impl Default for LbfgsOptions {
    fn default() -> Self {
        Self {
            memory: 10,
            budget: Budget::iterations(2000),
            gradient_tolerance: 1e-7,
            function_tolerance: 1e-10,
            nonnegative: false,
        }
    }
}

/// What [`Lbfgs`] hands back: the point and its value. The run's
/// iterations, objective history and termination (converged on the
/// gradient or the decrease test, stalled when the line search found no
/// decrease, or the budget) are the executor's [`Run`].
#[derive(Debug, Clone)]
pub struct LbfgsResult {
    /// Best point.
    pub x: Vec<f64>,
    /// `f(x)`.
    pub value: f64,
    /// Function–gradient evaluations.
    pub evaluations: usize,
}

impl LbfgsOptions {
    /// Refuses (typed error) a memory of 0 pairs, which is not L-BFGS, a
    /// negative or NaN tolerance and a negative or NaN time budget.
    pub fn validate(&self) -> dp_core::Result<()> {
        let bad = |reason: String| {
            Err(DpError::InvalidParameter {
                name: "L-BFGS",
                reason,
            })
        };
        if self.memory == 0 {
            return bad("memory must keep at least 1 pair (s, y)".into());
        }
        let tolerances = [self.gradient_tolerance, self.function_tolerance];
        if tolerances.iter().any(|t| t.is_nan() || *t < 0.0) {
            return bad(format!("tolerances must be >= 0, got {tolerances:?}"));
        }
        self.budget.validate()
    }
}

fn inf_norm(a: &[f64]) -> f64 {
    a.iter().fold(0.0f64, |m, v| m.max(v.abs()))
}

/// `‖x − P(x − g)‖∞` for `P` the projection on `x ≥ 0`: zero exactly at
/// the KKT points of `min f` over `x ≥ 0`.
fn projected_gradient_norm(x: &[f64], g: &[f64]) -> f64 {
    x.iter()
        .zip(g)
        .fold(0.0f64, |m, (xi, gi)| m.max((xi - (xi - gi).max(0.0)).abs()))
}

/// Buffers of [`Lbfgs`] reused across iterations.
#[derive(Default)]
struct Workspace {
    /// Indices of the free variables (all of them without bounds).
    free: Vec<usize>,
    /// The memory's pairs gathered to the free variables.
    pairs: Vec<(Vec<f64>, Vec<f64>)>,
    /// The two-loop vector (gathered to the free variables).
    q: Vec<f64>,
    /// The search direction.
    d: Vec<f64>,
    /// The trial point and its gradient.
    x_trial: Vec<f64>,
    /// Buffers for the next pair `(s, y)`.
    spare: (Vec<f64>, Vec<f64>),
    g_trial: Vec<f64>,
}

/// `out ← v[idx]`.
fn gather(v: &[f64], idx: &[usize], out: &mut Vec<f64>) {
    out.clear();
    out.extend(idx.iter().map(|&i| v[i]));
}

/// Largest ε of the ε-active set.
const ACTIVE_EPSILON: f64 = 1e-8;

/// L-BFGS as a [`Solver`]: minimizes `f` from `x0`. `eval(x, grad)`
/// returns `f(x)` and writes `∇f(x)` into `grad`; a non-finite value is
/// treated as +∞ (the search backs off). The caller validates `x0`.
pub struct Lbfgs<E> {
    eval: E,
    options: LbfgsOptions,
    x: Vec<f64>,
    g: Vec<f64>,
    f: f64,
    /// The pairs `(s, y)`, oldest first.
    memory: VecDeque<(Vec<f64>, Vec<f64>)>,
    /// Workspace reused across iterations (the vectors are as long as x:
    /// allocating them per iteration cost more than the algebra).
    work: Workspace,
    stalled: usize,
    evaluations: usize,
}

impl<E: FnMut(&[f64], &mut [f64]) -> f64> Lbfgs<E> {
    /// The solver from `x0`.
    pub fn new(eval: E, mut x0: Vec<f64>, options: &LbfgsOptions) -> Self {
        let n = x0.len();
        if options.nonnegative {
            x0.iter_mut().for_each(|v| *v = v.max(0.0));
        }
        Self {
            eval,
            options: *options,
            x: x0,
            g: vec![0.0; n],
            f: f64::INFINITY,
            memory: VecDeque::new(),
            work: Workspace::default(),
            stalled: 0,
            evaluations: 0,
        }
    }

    /// The two-loop recursion `d = −H ∇f` into `work.d`, or steepest
    /// descent (clearing the memory) when that is not a descent direction;
    /// returns the slope `∇fᵀd`. Under bounds the recursion runs on the
    /// free variables only (the pairs and the gradient gathered to them:
    /// the model of the reduced Hessian), keeping the pairs with positive
    /// curvature there; `d` is 0 on the active set.
    fn direction(&mut self) -> f64 {
        let n = self.x.len();
        self.free_variables();
        let masked = self.work.free.len() < n;
        let mut q = std::mem::take(&mut self.work.q);
        if masked {
            let w = &mut self.work;
            w.pairs.resize_with(self.memory.len(), Default::default);
            for ((s, y), (cs, cy)) in self.memory.iter().zip(w.pairs.iter_mut()) {
                gather(s, &w.free, cs);
                gather(y, &w.free, cy);
            }
            gather(&self.g, &w.free, &mut q);
        } else {
            q.clear();
            q.extend_from_slice(&self.g);
        }
        let (w, memory) = (&self.work, &self.memory);
        let pair = |i: usize| -> (&[f64], &[f64]) {
            if masked {
                (&w.pairs[i].0, &w.pairs[i].1)
            } else {
                (&memory[i].0, &memory[i].1)
            }
        };
        // (index, 1/sᵀy, sᵀy/yᵀy) of the pairs with positive curvature.
        let kept: Vec<(usize, f64, f64)> = (0..memory.len())
            .filter_map(|i| {
                let (s, y) = pair(i);
                let (sy, ss, yy) = (dot(s, y), dot(s, s), dot(y, y));
                (sy > 1e-12 * ss.sqrt() * yy.sqrt()).then(|| (i, 1.0 / sy, sy / yy))
            })
            .collect();
        let mut alpha = vec![0.0; kept.len()];
        for (a, &(i, rho, _)) in alpha.iter_mut().zip(&kept).rev() {
            let (s, y) = pair(i);
            *a = rho * dot(s, &q);
            q.iter_mut().zip(y).for_each(|(qj, yj)| *qj -= *a * yj);
        }
        let gamma = kept
            .last()
            .map_or_else(|| 1.0 / inf_norm(&q).max(f64::MIN_POSITIVE), |k| k.2);
        q.iter_mut().for_each(|v| *v *= gamma);
        for (a, &(i, rho, _)) in alpha.iter().zip(&kept) {
            let (s, y) = pair(i);
            let beta = rho * dot(y, &q);
            q.iter_mut()
                .zip(s)
                .for_each(|(qj, sj)| *qj += (a - beta) * sj);
        }
        let w = &mut self.work;
        w.d.clear();
        w.d.resize(n, 0.0);
        for (&i, v) in w.free.iter().zip(&q) {
            w.d[i] = -v;
        }
        w.q = q;
        let mut slope = dot(&self.g, &w.d);
        if !(slope < 0.0 && slope.is_finite()) {
            self.memory.clear();
            w.d.iter_mut().for_each(|v| *v = 0.0);
            for &i in &w.free {
                w.d[i] = self.g[i];
            }
            let scale = 1.0 / inf_norm(&w.d).max(f64::MIN_POSITIVE);
            w.d.iter_mut().for_each(|v| *v *= -scale);
            slope = dot(&self.g, &w.d);
        }
        slope
    }

    /// Bertsekas' ε-active set: under [`LbfgsOptions::nonnegative`], the
    /// variables within `ε = min(ACTIVE_EPSILON, w)` of the bound whose
    /// gradient is positive (`w` the projected-gradient norm) are held;
    /// `work.free` lists the others (all of them without bounds).
    fn free_variables(&mut self) {
        let free = &mut self.work.free;
        free.clear();
        if !self.options.nonnegative {
            free.extend(0..self.x.len());
            return;
        }
        let eps = ACTIVE_EPSILON.min(projected_gradient_norm(&self.x, &self.g));
        free.extend(
            self.x
                .iter()
                .zip(&self.g)
                .enumerate()
                .filter(|(_, (x, g))| !(**x <= eps && **g > 0.0))
                .map(|(i, _)| i),
        );
    }

    /// The first-order optimality measure: `‖∇f‖∞`, or the projected
    /// gradient's under bounds.
    fn stationarity(&self) -> f64 {
        if self.options.nonnegative {
            projected_gradient_norm(&self.x, &self.g)
        } else {
            inf_norm(&self.g)
        }
    }
}

impl<E: FnMut(&[f64], &mut [f64]) -> f64> Solver for Lbfgs<E> {
    type Output = LbfgsResult;

    fn init(&mut self) -> f64 {
        self.f = (self.eval)(&self.x, &mut self.g);
        self.evaluations = 1;
        self.f
    }

    fn terminate(&self) -> Option<Termination> {
        let o = &self.options;
        if self.stationarity()
            <= o.gradient_tolerance * self.f.abs().max(1.0) / inf_norm(&self.x).max(1.0)
        {
            return Some(Termination::Converged {
                criterion: format!("scaled gradient <= {:.0e} (L-BFGS)", o.gradient_tolerance),
            });
        }
        (self.stalled >= 5).then(|| Termination::Converged {
            criterion: format!(
                "relative decrease < {:.0e} for 5 iterations (L-BFGS)",
                o.function_tolerance
            ),
        })
    }

    fn next_iter(&mut self) -> Result<f64, Termination> {
        let n = self.x.len();
        let slope = self.direction();
        let mut x_new = std::mem::take(&mut self.work.x_trial);
        let mut g_new = std::mem::take(&mut self.work.g_trial);
        x_new.resize(n, 0.0);
        g_new.resize(n, 0.0);
        // Armijo backtracking.
        let mut step = 1.0;
        let mut accepted = None;
        for _ in 0..60 {
            // One evaluation can take a second on a large problem: a
            // caller's interrupt is honoured between them.
            if dp_core::interrupt::interrupted() {
                self.work.x_trial = x_new;
                self.work.g_trial = g_new;
                return Err(Termination::Interrupted);
            }
            let d = &self.work.d;
            for i in 0..n {
                x_new[i] = self.x[i] + step * d[i];
            }
            // Under bounds the path is projected and the Armijo slope is
            // ∇fᵀ(P(x + αd) − x) (equal to α∇fᵀd without bounds).
            let decrease = if self.options.nonnegative {
                x_new.iter_mut().for_each(|v| *v = v.max(0.0));
                (0..n).map(|i| self.g[i] * (x_new[i] - self.x[i])).sum()
            } else {
                step * slope
            };
            let f_trial = (self.eval)(&x_new, &mut g_new);
            self.evaluations += 1;
            if f_trial.is_finite() && f_trial <= self.f + 1e-4 * decrease.min(0.0) {
                accepted = Some(f_trial);
                break;
            }
            step *= 0.5;
        }
        let Some(f_next) = accepted else {
            self.work.x_trial = x_new;
            self.work.g_trial = g_new;
            return Err(Termination::Stalled {
                reason: "L-BFGS line search found no decrease".into(),
            });
        };
        // The new pair is built in spare buffers; the oldest pair it
        // evicts from a full memory becomes the next spare.
        let (mut s, mut y) = std::mem::take(&mut self.work.spare);
        s.clear();
        s.extend(x_new.iter().zip(&self.x).map(|(a, b)| a - b));
        y.clear();
        y.extend(g_new.iter().zip(&self.g).map(|(a, b)| a - b));
        let sy = dot(&s, &y);
        // Memory 0 keeps no pair: steepest descent with Armijo steps.
        if self.options.memory > 0 && sy > 1e-12 * dot(&s, &s).sqrt() * dot(&y, &y).sqrt() {
            if self.memory.len() == self.options.memory {
                self.work.spare = self.memory.pop_front().unwrap_or_default();
            }
            self.memory.push_back((s, y));
        } else {
            self.work.spare = (s, y);
        }
        let decrease = (self.f - f_next) / self.f.abs().max(1.0);
        self.work.x_trial = std::mem::replace(&mut self.x, x_new);
        self.work.g_trial = std::mem::replace(&mut self.g, g_new);
        self.f = f_next;
        self.stalled = if decrease < self.options.function_tolerance {
            self.stalled + 1
        } else {
            0
        };
        Ok(f_next)
    }

    fn finish(self, _termination: &Termination) -> LbfgsResult {
        LbfgsResult {
            x: self.x,
            value: self.f,
            evaluations: self.evaluations,
        }
    }
}

/// Runs [`Lbfgs`] under the options' budget, reporting each iteration's
/// objective (in the problem's own units) to `observer`. Refuses (typed
/// error) options [`LbfgsOptions::validate`] refuses and an empty or
/// non-finite starting point.
pub fn minimize(
    eval: impl FnMut(&[f64], &mut [f64]) -> f64,
    x0: Vec<f64>,
    options: &LbfgsOptions,
    observer: &mut dyn Observer,
) -> dp_core::Result<Run<LbfgsResult>> {
    options.validate()?;
    if x0.is_empty() || x0.iter().any(|v| !v.is_finite()) {
        return Err(DpError::InvalidParameter {
            name: "L-BFGS",
            reason: "the starting point must be non-empty and finite".into(),
        });
    }
    Ok(Executor::new(options.budget, observer).run(Lbfgs::new(eval, x0, options)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    /// The Rosenbrock function in 10 dimensions (minimum 0 at all ones).
    #[test]
    fn minimizes_rosenbrock() {
        let eval = |x: &[f64], g: &mut [f64]| {
            let mut f = 0.0;
            g.iter_mut().for_each(|v| *v = 0.0);
            for i in 0..x.len() - 1 {
                let a = x[i + 1] - x[i] * x[i];
                let b = 1.0 - x[i];
                f += 100.0 * a * a + b * b;
                g[i] += -400.0 * x[i] * a - 2.0 * b;
                g[i + 1] += 200.0 * a;
            }
            f
        };
        let r = minimize(eval, vec![-1.2; 10], &LbfgsOptions::default(), &mut ()).unwrap();
        assert!(
            r.output.value < 1e-10,
            "{} after {}",
            r.output.value,
            r.termination
        );
        assert!(r.output.x.iter().all(|v| (v - 1.0).abs() < 1e-5));
        assert!(r.history.windows(2).all(|w| w[1] <= w[0]));
    }

    /// A convex quadratic with condition number 1e4 converges to its
    /// closed-form minimizer.
    #[test]
    fn solves_ill_conditioned_quadratic() {
        let n = 50;
        let diag: Vec<f64> = (0..n)
            .map(|i| 10f64.powf(4.0 * i as f64 / (n - 1) as f64))
            .collect();
        let b: Vec<f64> = (0..n).map(|i| (i as f64).sin()).collect();
        let eval = |x: &[f64], g: &mut [f64]| {
            let mut f = 0.0;
            for i in 0..n {
                g[i] = diag[i] * x[i] - b[i];
                f += 0.5 * diag[i] * x[i] * x[i] - b[i] * x[i];
            }
            f
        };
        let opts = LbfgsOptions {
            gradient_tolerance: 1e-12,
            function_tolerance: 0.0,
            ..LbfgsOptions::default()
        };
        let r = minimize(eval, vec![0.0; n], &opts, &mut ()).unwrap();
        for i in 0..n {
            assert!(
                (r.output.x[i] - b[i] / diag[i]).abs() < 1e-8,
                "{i} {}",
                r.termination
            );
        }
    }

    /// Memory 0 is refused by `minimize` with a typed error; the solver
    /// itself, given it directly, runs steepest descent instead of
    /// indexing an empty memory, and still decreases a quadratic.
    #[test]
    fn memory_zero_is_an_error_not_a_panic() {
        let eval = |x: &[f64], g: &mut [f64]| {
            g.copy_from_slice(x);
            0.5 * dot(x, x)
        };
        let opts = LbfgsOptions {
            memory: 0,
            budget: Budget::iterations(50),
            ..LbfgsOptions::default()
        };
        assert!(matches!(
            minimize(eval, vec![1.0; 4], &opts, &mut ()),
            Err(DpError::InvalidParameter { .. })
        ));
        let run = Executor::new(opts.budget, &mut ()).run(Lbfgs::new(eval, vec![1.0; 4], &opts));
        assert!(run.output.value < 1e-8, "{}", run.output.value);
        for bad_x0 in [vec![], vec![f64::NAN, 1.0]] {
            assert!(minimize(eval, bad_x0, &LbfgsOptions::default(), &mut ()).is_err());
        }
        let nan_tol = LbfgsOptions {
            gradient_tolerance: f64::NAN,
            ..LbfgsOptions::default()
        };
        assert!(minimize(eval, vec![1.0], &nan_tol, &mut ()).is_err());
    }

    /// Nonnegative least squares `min ½‖Ax − b‖²` over `x ≥ 0` (convex,
    /// non-separable): the result meets the KKT conditions (`x ≥ 0`,
    /// `∇f ≥ 0`, `xᵢ ∂ᵢf = 0`) with several variables exactly at the
    /// bound.
    #[test]
    fn nonnegative_least_squares_meets_kkt() {
        let (m, n) = (30, 12);
        let a: Vec<Vec<f64>> = (0..m)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        (((i * 7 + j * 3) % 11) as f64 - 4.0) / 5.0 + f64::from(u8::from(i == j))
                    })
                    .collect()
            })
            .collect();
        let b: Vec<f64> = (0..m).map(|i| ((i * 5 % 9) as f64 - 4.0) / 2.0).collect();
        let eval = |x: &[f64], g: &mut [f64]| {
            g.iter_mut().for_each(|v| *v = 0.0);
            let mut f = 0.0;
            for (row, bi) in a.iter().zip(&b) {
                let r = dot(row, x) - bi;
                f += 0.5 * r * r;
                for (gj, aij) in g.iter_mut().zip(row) {
                    *gj += r * aij;
                }
            }
            f
        };
        let opts = LbfgsOptions {
            gradient_tolerance: 1e-10,
            function_tolerance: 0.0,
            nonnegative: true,
            ..LbfgsOptions::default()
        };
        let r = minimize(eval, vec![1.0; n], &opts, &mut ()).unwrap();
        let mut g = vec![0.0; n];
        eval(&r.output.x, &mut g);
        let at_bound = r.output.x.iter().filter(|&&v| v == 0.0).count();
        assert!(at_bound >= 2, "{:?}", r.output.x);
        for (x, gj) in r.output.x.iter().zip(&g) {
            assert!(*x >= 0.0);
            assert!(*gj >= -1e-8, "{gj} {}", r.termination);
            assert!((x * gj).abs() < 1e-8, "{x} {gj}");
        }
        assert!(r.termination.converged(), "{}", r.termination);
    }
}
