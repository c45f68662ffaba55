//! Projected Newton (Bertsekas 1982) for the concave duals of the strategy
//! and covariance programs: maximize `g(y) = 2 f(y) − Σ yᵢ` over `y ≥ 0`,
//! with f concave and positively homogeneous of degree ½ (so the best point
//! on each ray `{t y}` is known in closed form, `t = (f/Σy)²`).
//!
//! COA's dual ([`crate::optimizers::coa::dual`], `f = tr(C D Cᵀ)^{1/2}`) and the Ky Fan dual
//! of the projection mechanism's covariance ([`crate::mechanisms::projection`],
//! `f = h_k(C D Cᵀ)`) are the two instances: they differ only in how a
//! point is evaluated, which is what [`ConcaveDual`] abstracts.
//!
//! Multipliers may vanish at the optimum (cells whose constraint is
//! inactive), so each step splits the cells into an ε-active set
//! `A = {i : yᵢ ≤ ε, ∂g/∂yᵢ < 0}` (ε the size of the projected gradient)
//! and the free rest `F`; on `F` it solves `(−∇²g)_FF d = ∇g_F` by
//! conjugate gradient with the Hessian's diagonal as preconditioner to a
//! relative residual `min(0.1, √‖∇g‖)` (superlinear inexact Newton); on `A`
//! it takes the diagonally scaled gradient step. When CG misses its
//! tolerance (the Hessian can be singular: COA's has rank at most
//! r(r+1)/2) the regularized system with `μ = 1e-3·mean(diag)·min(1,
//! ‖projected ∇g‖∞)` is solved instead (regularized Newton, Li, Fukushima,
//! Qi & Yamashita 2004). The projected arc `max(0, y + αd)` is searched by
//! Armijo backtracking (`c = 1e-4`, at most thirty halvings; if the Newton
//! arc fails the scaled gradient gets one try). The run ([`ProjectedNewton`]
//! under the engine's [`Executor`]) stops when the model's primal-dual gap
//! is at most the tolerance, when the [`Budget`] runs out (iterations or
//! wall clock), when no step improves g, and, for a dual with a
//! fallback method ([`ConcaveDual::STOP_ON_STAGNATION`], COA's), when an
//! accepted step is below 1e-6 (g at its rounding level) or on
//! stagnation: four accepted steps below 1e-2 in a row (a healthy run
//! takes full steps after two or three). A dual whose Hessian is nearly
//! singular far from the optimum asks for Levenberg–Marquardt damping
//! instead ([`ConcaveDual::ADAPTIVE_DAMPING`], the Ky Fan dual's), so that
//! backtracking does not cut undamped steps to nothing, each halving a
//! full evaluation. Hessian products are taken on the free rows only.
//! (The measurements behind both rules: `benches/MEASUREMENTS.md`.)

use crate::solvers::engine::{Budget, Executor, Solver, Termination};
use dp_core::{DpError, Result};
use dp_linalg::Par;

/// One evaluation of a concave dual `g(y) = 2f(y) − Σyᵢ` whose gradient
/// is `x(y) − 1`, `x = 2∇f` the diagonal of the Lagrangian minimizer
/// (COA's `Xᵢᵢ`, the Ky Fan dual's `xₑ`). Both duals share the value, the
/// gradient, the bound `f²/Σy` (Program (10)'s weak duality at the best
/// point of the ray) and the gap `1 − x̄/maxᵢ xᵢ` with `x̄ = f/Σy`; a point
/// supplies `y`, `f`, `x` ([`DualBase`]), its Hessian products and its
/// rescaling.
pub trait DualEvaluation: Clone {
    /// `y`, `f(y)` and `x(y)`.
    fn base(&self) -> &DualBase;
    /// `(−∇²g) v` on the rows in `rows` (`v` vanishes outside them; the
    /// other entries of the result are not read).
    fn neg_hessian_times_on(&self, v: &[f64], rows: &[usize], par: Par) -> Vec<f64>;
    /// The diagonal of `−∇²g`.
    fn neg_hessian_diagonal(&self, par: Par) -> Vec<f64>;
    /// The point at `t·y` without a new decomposition
    /// ([`DualBase::scale`] and the instance's own parts).
    fn scaled(self, t: f64) -> Self;

    /// The multipliers `y`.
    fn multipliers(&self) -> &[f64] {
        &self.base().y
    }
    /// `f(y)`.
    fn half_value(&self) -> f64 {
        self.base().f
    }
    /// `(−∇²g) v` on every row.
    fn neg_hessian_times(&self, v: &[f64], par: Par) -> Vec<f64> {
        let all: Vec<usize> = (0..v.len()).collect();
        self.neg_hessian_times_on(v, &all, par)
    }
    /// `g(y) = 2f(y) − Σyᵢ`.
    fn value(&self) -> f64 {
        2.0 * self.half_value() - self.multipliers().iter().sum::<f64>()
    }
    /// `∇g(y) = x(y) − 1`.
    fn gradient(&self) -> Vec<f64> {
        self.base().x.iter().map(|x| x - 1.0).collect()
    }
    /// The lower bound the point certifies, `f² / Σy`.
    fn lower_bound(&self) -> f64 {
        self.half_value().powi(2) / self.multipliers().iter().sum::<f64>()
    }
    /// The relative gap `1 − x̄ / maxᵢ xᵢ` (`x̄ = f/Σy`) between the primal
    /// solution this point yields and its bound.
    fn relative_gap(&self) -> f64 {
        let xbar = self.half_value() / self.multipliers().iter().sum::<f64>();
        let xmax = self.base().x.iter().copied().fold(0.0, f64::max);
        (1.0 - xbar / xmax).max(0.0)
    }
}

/// What every point of a [`DualEvaluation`] holds.
#[derive(Debug, Clone)]
pub struct DualBase {
    /// The multipliers `y` (as given; not normalized).
    pub y: Vec<f64>,
    /// `f(y)`.
    pub f: f64,
    /// `x(y) = 2∇f(y)`, the diagonal of the Lagrangian minimizer.
    pub x: Vec<f64>,
}

impl DualBase {
    /// Moves to `t·y`: f is homogeneous of degree ½, so `f(ty) = √t f(y)`
    /// and `x(ty) = x(y)/√t`. Returns `√t`.
    pub fn scale(&mut self, t: f64) -> f64 {
        let rt = t.sqrt();
        self.y.iter_mut().for_each(|v| *v *= t);
        self.f *= rt;
        self.x.iter_mut().for_each(|v| *v /= rt);
        rt
    }
}

/// A concave dual `g(y) = 2f(y) − Σyᵢ` evaluated at points of type
/// [`ConcaveDual::Point`].
pub trait ConcaveDual {
    /// Everything one evaluation computes (a factorization, the gradient).
    type Point: DualEvaluation;
    /// Evaluates at `y ≥ 0`; an error when the point is unusable (the
    /// caller backtracks).
    fn point(&self, y: &[f64]) -> Result<Self::Point>;
    /// The parallelism of the Hessian products.
    fn par(&self) -> Par;
    /// Whether to stop on stagnation (an accepted step below 1e-6, or four
    /// below 1e-2 in a row), for a caller with a fallback method; without
    /// one the run goes on until no step improves g or the iterations run
    /// out.
    const STOP_ON_STAGNATION: bool = true;
    /// Whether to damp the Newton system by `μ·mean(diag)·I` with μ
    /// starting at 1e-2 and adapted to the accepted step (÷10 after a full
    /// step, down to 0 below 1e-6; ×10, at least 1e-3, after one below ¼),
    /// for duals whose Hessian is nearly
    /// singular far from the optimum so that undamped steps are cut by
    /// many backtracking halvings, each a full evaluation.
    const ADAPTIVE_DAMPING: bool = false;
}

/// Outcome of [`maximize`].
#[derive(Debug, Clone)]
pub struct NewtonSolve<P> {
    /// The best point (largest bound, or smallest gap).
    pub point: P,
    /// Newton iterations taken.
    pub iterations: usize,
    /// Conjugate-gradient iterations over all Newton steps.
    pub cg_iterations: usize,
    /// Why it stopped: the gap tolerance, no improving step (or
    /// stagnation, see [`ConcaveDual::STOP_ON_STAGNATION`]), or the
    /// budget (iterations or wall clock).
    pub termination: Termination,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The best point on the ray of `p`: `t = (f/Σy)²`.
fn on_best_ray<P: DualEvaluation>(p: P) -> P {
    let t = (p.half_value() / p.multipliers().iter().sum::<f64>()).powi(2);
    p.scaled(t)
}

/// Projected Newton as a [`Solver`] on a [`ConcaveDual`] (see the module
/// notes): one iteration is one Newton step with its arc search. The
/// value it reports per iteration is the best point's relative gap, the
/// quantity the tolerance is tested on. It lies in `[0, 1]` (y and f are
/// non-negative, and a NaN ratio counts as gap 0), so the executor's
/// non-finite test never ends a run that could go on.
pub struct ProjectedNewton<'d, D: ConcaveDual> {
    dual: &'d D,
    tolerance: f64,
    /// The current iterate, on its best ray.
    point: D::Point,
    /// The best point so far (largest bound, or smallest gap).
    best: D::Point,
    cg_iterations: usize,
    /// Accepted steps below 1e-2 in a row.
    small_steps: usize,
    /// Why no further step is taken (no improving step, or stagnation).
    stall: Option<&'static str>,
    /// Levenberg–Marquardt damping relative to the mean Hessian diagonal
    /// (see [`ConcaveDual::ADAPTIVE_DAMPING`]; 0 for duals without it).
    damping: f64,
}

impl<'d, D: ConcaveDual> ProjectedNewton<'d, D> {
    /// The solver from `y0` (moved to the best point of its ray); an error
    /// when the dual cannot be evaluated there.
    pub fn new(dual: &'d D, y0: &[f64], tolerance: f64) -> Result<Self> {
        let point = on_best_ray(dual.point(y0)?);
        Ok(Self {
            dual,
            tolerance,
            best: point.clone(),
            point,
            cg_iterations: 0,
            small_steps: 0,
            stall: None,
            damping: if D::ADAPTIVE_DAMPING { 1e-2 } else { 0.0 },
        })
    }
}

impl<D: ConcaveDual> Solver for ProjectedNewton<'_, D> {
    /// The best point and the conjugate-gradient iterations spent.
    type Output = (D::Point, usize);

    fn init(&mut self) -> f64 {
        self.best.relative_gap()
    }

    /// The gap tolerance first, then a stall of the last step: a step
    /// that found no improvement (or stagnated) may still have brought
    /// the best point within the tolerance.
    fn terminate(&self) -> Option<Termination> {
        let gap = self.best.relative_gap();
        if gap <= self.tolerance {
            return Some(Termination::Converged {
                criterion: format!(
                    "relative gap {gap:.2e} <= {:.0e} (projected Newton)",
                    self.tolerance
                ),
            });
        }
        self.stall.map(|reason| Termination::Stalled {
            reason: reason.into(),
        })
    }

    fn next_iter(&mut self) -> std::result::Result<f64, Termination> {
        let dual = self.dual;
        let point = &self.point;
        let n = point.multipliers().len();
        let y = point.multipliers().to_vec();
        let grad = point.gradient();
        let proj_grad = y
            .iter()
            .zip(&grad)
            .map(|(yi, gi)| ((yi + gi).max(0.0) - yi).abs())
            .fold(0.0, f64::max);
        let eps = proj_grad.min(1e-3 * y.iter().copied().fold(0.0, f64::max));
        let free: Vec<bool> = y
            .iter()
            .zip(&grad)
            .map(|(yi, gi)| !(*yi <= eps && *gi < 0.0))
            .collect();
        let diag = point.neg_hessian_diagonal(dual.par());
        let mean_diag = diag.iter().sum::<f64>() / n as f64;
        let cg_total = &mut self.cg_iterations;
        let mut newton =
            |mu: f64| free_set_newton_direction(dual, point, &grad, &diag, &free, mu, cg_total);
        let (mut d, mut precond, solved) = newton(self.damping * mean_diag);
        if !solved {
            let mu = 1e-3 * diag.iter().sum::<f64>() / n as f64 * proj_grad.min(1.0);
            (d, precond, _) = newton(mu);
        }
        let g0 = point.value();
        let searched = arc_search(dual, &y, &d, &grad, &free, g0).or_else(|| {
            let scaled: Vec<f64> = grad.iter().zip(&precond).map(|(g, p)| g * p).collect();
            arc_search(dual, &y, &scaled, &grad, &free, g0)
        });
        if D::ADAPTIVE_DAMPING {
            let damping = self.damping;
            self.damping = match searched.as_ref().map(|s| s.1) {
                Some(step) if step >= 1.0 => {
                    if damping < 1e-6 {
                        0.0
                    } else {
                        damping / 10.0
                    }
                }
                Some(step) if step >= 0.25 => damping,
                _ => (damping * 10.0).max(1e-3),
            };
        }
        match searched {
            Some((next, step)) => {
                self.point = on_best_ray(next);
                self.small_steps = if step < 1e-2 { self.small_steps + 1 } else { 0 };
                if D::STOP_ON_STAGNATION && (step < 1e-6 || self.small_steps >= 4) {
                    self.stall = Some("projected Newton: steps stagnated");
                }
            }
            None => self.stall = Some("projected Newton: no step improved the dual"),
        }
        let (point, best) = (&self.point, &self.best);
        if point.lower_bound() >= best.lower_bound() || point.relative_gap() < best.relative_gap() {
            self.best = point.clone();
        }
        Ok(self.best.relative_gap())
    }

    fn finish(self, _termination: &Termination) -> Self::Output {
        (self.best, self.cg_iterations)
    }
}

/// Maximizes `g` over `y ≥ 0` from `y0` (see the module notes) within
/// `budget`: converged once the best point's relative gap is at most
/// `tolerance`, stalled when no step improves g (or on stagnation), else
/// the budget's [`Termination`]. Refuses a NaN tolerance or an invalid
/// budget.
pub fn maximize<D: ConcaveDual>(
    dual: &D,
    y0: &[f64],
    tolerance: f64,
    budget: Budget,
) -> Result<NewtonSolve<D::Point>> {
    if tolerance.is_nan() {
        return Err(DpError::InvalidParameter {
            name: "tolerance",
            reason: "the projected Newton gap tolerance is NaN".into(),
        });
    }
    budget.validate()?;
    let solver = ProjectedNewton::new(dual, y0, tolerance)?;
    let run = Executor::new(budget, &mut ()).run(solver);
    let (point, cg_iterations) = run.output;
    Ok(NewtonSolve {
        point,
        iterations: run.iterations,
        cg_iterations,
        termination: run.termination,
    })
}

/// Preconditioned conjugate gradients on the free set F for
/// `(−∇²g + μI)_FF d_F = ∇g_F` (Jacobi preconditioner from the Hessian
/// diagonal `diag`), to the forcing tolerance `min(‖b‖^{1/2}, 0.1)·‖b‖`.
/// When CG yields no ascent direction the preconditioned gradient
/// replaces it; the fixed variables take the preconditioned gradient.
/// Returns the direction, the preconditioner and whether CG met its
/// tolerance; CG iterations are added to `cg_total`.
fn free_set_newton_direction<D: ConcaveDual>(
    dual: &D,
    point: &D::Point,
    grad: &[f64],
    diag: &[f64],
    free: &[bool],
    mu: f64,
    cg_total: &mut usize,
) -> (Vec<f64>, Vec<f64>, bool) {
    let n = grad.len();
    let restrict = |v: &mut [f64]| {
        for (vi, f) in v.iter_mut().zip(free) {
            if !f {
                *vi = 0.0;
            }
        }
    };
    let free_rows: Vec<usize> = (0..n).filter(|&i| free[i]).collect();
    let mut b = grad.to_vec();
    restrict(&mut b);
    let precond: Vec<f64> = diag.iter().map(|d| 1.0 / (d + mu).max(1e-300)).collect();
    let b_norm = dot(&b, &b).sqrt();
    let forcing = b_norm.sqrt().min(0.1);
    let mut d = vec![0.0; n];
    let mut res = b.clone();
    let mut z: Vec<f64> = res.iter().zip(&precond).map(|(a, p)| a * p).collect();
    let mut p = z.clone();
    let mut rz = dot(&res, &z);
    let mut solved = false;
    for _ in 0..(4 * n).max(50) {
        if rz.is_nan() || rz <= 0.0 {
            break;
        }
        *cg_total += 1;
        let mut hp = point.neg_hessian_times_on(&p, &free_rows, dual.par());
        for (h, pi) in hp.iter_mut().zip(&p) {
            *h += mu * pi;
        }
        restrict(&mut hp);
        let php = dot(&p, &hp);
        if !(php > 0.0 && php.is_finite()) {
            break;
        }
        let alpha = rz / php;
        for i in 0..n {
            d[i] += alpha * p[i];
            res[i] -= alpha * hp[i];
        }
        if dot(&res, &res).sqrt() <= forcing * b_norm {
            solved = true;
            break;
        }
        z = res.iter().zip(&precond).map(|(a, p)| a * p).collect();
        let rz_new = dot(&res, &z);
        for i in 0..n {
            p[i] = z[i] + (rz_new / rz) * p[i];
        }
        rz = rz_new;
    }
    if dot(&b, &d).partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        d = b.iter().zip(&precond).map(|(a, p)| a * p).collect();
        solved = false;
    }
    for i in 0..n {
        if !free[i] {
            d[i] = grad[i] * precond[i];
        }
    }
    (d, precond, solved)
}

/// Armijo backtracking along `max(0, y + step·d)`, at most thirty
/// halvings; returns the point and the accepted step.
fn arc_search<D: ConcaveDual>(
    dual: &D,
    y: &[f64],
    d: &[f64],
    grad: &[f64],
    free: &[bool],
    g0: f64,
) -> Option<(D::Point, f64)> {
    let mut step = 1.0;
    for _ in 0..30 {
        let trial: Vec<f64> = y
            .iter()
            .zip(d)
            .map(|(yi, di)| (yi + step * di).max(0.0))
            .collect();
        let predicted: f64 = (0..y.len())
            .map(|i| {
                if free[i] {
                    step * grad[i] * d[i]
                } else {
                    grad[i] * (trial[i] - y[i])
                }
            })
            .sum();
        if let Ok(next) = dual.point(&trial)
            && next.value() >= g0 + 1e-4 * predicted
        {
            return Some((next, step));
        }
        step *= 0.5;
    }
    None
}
