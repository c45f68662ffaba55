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

/// Options of [`minimize`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpgOptions {
    /// Nonmonotone memory M (10).
    pub memory: usize,
    /// Iteration limit.
    pub max_iterations: usize,
    /// Stop when `‖P(x − ∇f) − x‖∞ ≤ tolerance` (the paper's criterion;
    /// callers scale their problem so that it is meaningful).
    pub tolerance: f64,
    /// Also stop when the best value improved by less than this relative
    /// amount over the last `4·memory` iterations.
    pub stall_tolerance: f64,
    /// Wall-clock budget in seconds (checked once per iteration; ends the
    /// run as [`SpgStop::MaxIterations`]).
    pub max_seconds: Option<f64>,
    /// First step `α₀ = 1/‖∇f(x₀)‖∞` (a short first move) instead of the
    /// paper's `1/‖P(x₀ − ∇f) − x₀‖∞`. On non-convex problems (LRM's) the
    /// first move picks the basin, and a short one stays near the start.
    pub gradient_initial_step: bool,
}

impl Default for SpgOptions {
    fn default() -> Self {
        Self {
            memory: 10,
            max_iterations: 1000,
            tolerance: 1e-8,
            stall_tolerance: 1e-9,
            max_seconds: None,
            gradient_initial_step: false,
        }
    }
}

/// Why [`minimize`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpgStop {
    /// The projected-gradient test held.
    ProjectedGradient,
    /// The best value stalled.
    Stalled,
    /// `max_iterations` (or the time budget) reached.
    MaxIterations,
    /// The line search failed (no finite decrease in 60 trials).
    LineSearch,
}

/// Result of [`minimize`].
#[derive(Debug, Clone)]
pub struct SpgResult {
    /// The last iterate if it passed the projected-gradient test, else the
    /// best point found.
    pub x: Vec<f64>,
    /// Its value.
    pub value: f64,
    /// Iterations.
    pub iterations: usize,
    /// Function–gradient evaluations.
    pub evaluations: usize,
    /// Why it stopped.
    pub stop: SpgStop,
    /// `‖P(x − ∇f) − x‖∞` at the last iterate.
    pub projected_gradient: f64,
}

/// The point, value, direction, slope `⟨g, d⟩` and reference value
/// `f_max` (the largest of the last `memory` values) of one line search.
struct Step<'a> {
    x: &'a [f64],
    f: f64,
    d: &'a [f64],
    slope: f64,
    f_max: f64,
}

/// The nonmonotone line search of SPG (Birgin, Martínez and Raydan's
/// SPG2): accept `λ` once `f(x + λd) ≤ f_max + γλ⟨g, d⟩` (γ = 10⁻⁴), else
/// take the safeguarded quadratic interpolation if it lies in
/// `[σ₁, σ₂λ]` (0.1, 0.9) and halve otherwise; at most 60 trials. The
/// accepted point's gradient is left in `g_new`; evaluations are counted.
fn nonmonotone_line_search(
    eval: &mut impl FnMut(&[f64], &mut [f64]) -> f64,
    step: &Step<'_>,
    g_new: &mut [f64],
    evaluations: &mut usize,
) -> Option<(Vec<f64>, f64)> {
    const GAMMA: f64 = 1e-4;
    const SIGMA1: f64 = 0.1;
    const SIGMA2: f64 = 0.9;
    let (f, slope) = (step.f, step.slope);
    let mut lambda = 1.0;
    for _ in 0..60 {
        let trial: Vec<f64> = step
            .x
            .iter()
            .zip(step.d)
            .map(|(a, b)| a + lambda * b)
            .collect();
        let f_trial = eval(&trial, g_new);
        *evaluations += 1;
        if f_trial.is_finite() && f_trial <= step.f_max + GAMMA * lambda * slope {
            return Some((trial, f_trial));
        }
        let denom = f_trial - f - lambda * slope;
        let interp = -0.5 * lambda * lambda * slope / denom;
        lambda = if f_trial.is_finite() && interp >= SIGMA1 && interp <= SIGMA2 * lambda {
            interp
        } else {
            lambda / 2.0
        };
    }
    None
}

/// Minimizes `f` over a closed convex set given by its Euclidean
/// projection `project` (applied in place). `eval(x, grad)` returns `f(x)`
/// and writes the gradient; a non-finite value is treated as +∞.
pub fn minimize(
    mut eval: impl FnMut(&[f64], &mut [f64]) -> f64,
    mut project: impl FnMut(&mut [f64]),
    x0: Vec<f64>,
    options: &SpgOptions,
    mut on_iteration: impl FnMut(usize, f64, f64),
) -> SpgResult {
    const ALPHA_MIN: f64 = 1e-30;
    const ALPHA_MAX: f64 = 1e30;
    let n = x0.len();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let mut x = x0;
    project(&mut x);
    let mut g = vec![0.0; n];
    let mut f = eval(&x, &mut g);
    let mut evaluations = 1;
    let pg_norm = |x: &[f64], g: &[f64], project: &mut dyn FnMut(&mut [f64])| {
        let mut p: Vec<f64> = x.iter().zip(g).map(|(a, b)| a - b).collect();
        project(&mut p);
        p.iter()
            .zip(x)
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()))
    };
    let mut pg = pg_norm(&x, &g, &mut project);
    let first = if options.gradient_initial_step {
        g.iter().fold(0.0f64, |m, v| m.max(v.abs()))
    } else {
        pg
    };
    let mut alpha = if first > 0.0 {
        (1.0 / first).clamp(ALPHA_MIN, ALPHA_MAX)
    } else {
        1.0
    };
    let mut recent = vec![f];
    let mut best_history = vec![f];
    let (mut best_x, mut best_f) = (x.clone(), f);
    let mut iterations = 0;
    let started = std::time::Instant::now();
    let stop = loop {
        if !f.is_finite() {
            break SpgStop::LineSearch;
        }
        if pg <= options.tolerance {
            break SpgStop::ProjectedGradient;
        }
        if iterations >= options.max_iterations
            || options
                .max_seconds
                .is_some_and(|t| started.elapsed().as_secs_f64() >= t)
        {
            break SpgStop::MaxIterations;
        }
        let window = 4 * options.memory.max(1);
        if best_history.len() > window {
            let old = best_history[best_history.len() - 1 - window];
            if (old - best_f) <= options.stall_tolerance * best_f.abs().max(f64::MIN_POSITIVE) {
                break SpgStop::Stalled;
            }
        }
        iterations += 1;
        let mut d: Vec<f64> = x.iter().zip(&g).map(|(a, b)| a - alpha * b).collect();
        project(&mut d);
        d.iter_mut().zip(&x).for_each(|(di, xi)| *di -= xi);
        let slope = dot(&g, &d);
        let f_max = recent.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut g_new = vec![0.0; n];
        let step = Step {
            x: &x,
            f,
            d: &d,
            slope,
            f_max,
        };
        let accepted = nonmonotone_line_search(&mut eval, &step, &mut g_new, &mut evaluations);
        let Some((x_new, f_new)) = accepted else {
            break SpgStop::LineSearch;
        };
        let s: Vec<f64> = x_new.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = g_new.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        alpha = if sy <= 0.0 {
            ALPHA_MAX
        } else {
            (dot(&s, &s) / sy).clamp(ALPHA_MIN, ALPHA_MAX)
        };
        x = x_new;
        g = g_new;
        f = f_new;
        recent.push(f);
        if recent.len() > options.memory.max(1) {
            recent.remove(0);
        }
        if f < best_f {
            best_f = f;
            best_x.clone_from(&x);
        }
        best_history.push(best_f);
        pg = pg_norm(&x, &g, &mut project);
        on_iteration(iterations, f, pg);
    };
    // The last iterate is the certified one when the projected-gradient
    // test ended the run; otherwise the best seen (the method is
    // nonmonotone).
    if stop == SpgStop::ProjectedGradient && f.is_finite() {
        best_x = x;
        best_f = f;
    }
    SpgResult {
        x: best_x,
        value: best_f,
        iterations,
        evaluations,
        stop,
        projected_gradient: pg,
    }
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
        let r = minimize(eval, project, vec![0.0; n], &opts, |_, _, _| {});
        assert_eq!(r.stop, SpgStop::ProjectedGradient);
        for i in 0..n {
            let expect = (c[i] / h[i]).clamp(-0.02, 0.02);
            assert!((r.x[i] - expect).abs() < 1e-10, "{i}");
        }
    }

    /// Projection onto the unit L1 ball: the minimizer of ‖x − z‖² over
    /// the ball is the projection of z (checked against the exact
    /// projection of `crate::lrm::project_l1_ball`).
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
        let project = |x: &mut [f64]| crate::lrm::project_l1_ball(x, 1.0);
        let opts = SpgOptions {
            tolerance: 1e-13,
            ..SpgOptions::default()
        };
        let r = minimize(eval, project, vec![0.0; 12], &opts, |_, _, _| {});
        let mut expect = z.clone();
        crate::lrm::project_l1_ball(&mut expect, 1.0);
        for (got, want) in r.x.iter().zip(&expect) {
            assert!((got - want).abs() < 1e-10);
        }
    }
}
