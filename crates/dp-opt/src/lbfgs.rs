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

/// Options of [`minimize`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LbfgsOptions {
    /// Pairs `(s, y)` kept (Nocedal & Wright suggest 3–20).
    pub memory: usize,
    /// Iteration limit.
    pub max_iterations: usize,
    /// Stop when `‖∇f‖∞ ≤ gradient_tolerance · max(|f|, 1) / max(‖x‖∞, 1)`
    /// (scale-free first-order optimality).
    pub gradient_tolerance: f64,
    /// Stop when the relative decrease `(f_k − f_{k+1}) / max(|f_k|, 1)`
    /// stays below this for 5 consecutive iterations (default 1e-10; SciPy's
    /// L-BFGS-B, which HDMM uses, stops after one iteration below 2.2e-9).
    pub function_tolerance: f64,
}

impl Default for LbfgsOptions {
    fn default() -> Self {
        Self {
            memory: 10,
            max_iterations: 2000,
            gradient_tolerance: 1e-7,
            function_tolerance: 1e-10,
        }
    }
}

/// Why [`minimize`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbfgsStop {
    /// The gradient test held.
    Gradient,
    /// The decrease stalled below `function_tolerance`.
    Function,
    /// `max_iterations` reached.
    MaxIterations,
    /// The line search found no decrease along a descent direction
    /// (f at its rounding level, or a non-finite value everywhere).
    LineSearch,
}

/// Result of [`minimize`].
#[derive(Debug, Clone)]
pub struct LbfgsResult {
    /// Best point.
    pub x: Vec<f64>,
    /// `f(x)`.
    pub value: f64,
    /// Iterations taken.
    pub iterations: usize,
    /// Function–gradient evaluations.
    pub evaluations: usize,
    /// Why it stopped.
    pub stop: LbfgsStop,
    /// `f` after each iteration.
    pub history: Vec<f64>,
}

/// Minimizes `f` from `x0`. `eval(x, grad)` returns `f(x)` and writes
/// `∇f(x)` into `grad`; a non-finite value is treated as +∞ (the search
/// backs off). The caller validates `x0` (finite, `f(x0)` finite).
pub fn minimize(
    mut eval: impl FnMut(&[f64], &mut [f64]) -> f64,
    x0: Vec<f64>,
    options: &LbfgsOptions,
    mut on_iteration: impl FnMut(usize, f64),
) -> LbfgsResult {
    let n = x0.len();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let inf_norm = |a: &[f64]| a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut x = x0;
    let mut g = vec![0.0; n];
    let mut f = eval(&x, &mut g);
    let mut evaluations = 1;
    let mut s_mem: Vec<Vec<f64>> = Vec::new();
    let mut y_mem: Vec<Vec<f64>> = Vec::new();
    let mut history = Vec::new();
    let mut stalled = 0;
    let mut iterations = 0;
    let mut x_new = vec![0.0; n];
    let mut g_new = vec![0.0; n];
    let stop = loop {
        if !f.is_finite() {
            break LbfgsStop::LineSearch;
        }
        if inf_norm(&g) <= options.gradient_tolerance * f.abs().max(1.0) / inf_norm(&x).max(1.0) {
            break LbfgsStop::Gradient;
        }
        if iterations >= options.max_iterations {
            break LbfgsStop::MaxIterations;
        }
        iterations += 1;
        // Two-loop recursion: d = −H ∇f.
        let mut q = g.clone();
        let k = s_mem.len();
        let mut alpha = vec![0.0; k];
        for i in (0..k).rev() {
            let rho = 1.0 / dot(&y_mem[i], &s_mem[i]);
            alpha[i] = rho * dot(&s_mem[i], &q);
            for (qj, yj) in q.iter_mut().zip(&y_mem[i]) {
                *qj -= alpha[i] * yj;
            }
        }
        let gamma = if k > 0 {
            dot(&s_mem[k - 1], &y_mem[k - 1]) / dot(&y_mem[k - 1], &y_mem[k - 1])
        } else {
            1.0 / inf_norm(&g).max(f64::MIN_POSITIVE)
        };
        q.iter_mut().for_each(|v| *v *= gamma);
        for i in 0..k {
            let rho = 1.0 / dot(&y_mem[i], &s_mem[i]);
            let beta = rho * dot(&y_mem[i], &q);
            for (qj, sj) in q.iter_mut().zip(&s_mem[i]) {
                *qj += (alpha[i] - beta) * sj;
            }
        }
        let mut d: Vec<f64> = q.iter().map(|v| -v).collect();
        let mut slope = dot(&g, &d);
        if !(slope < 0.0 && slope.is_finite()) {
            s_mem.clear();
            y_mem.clear();
            let scale = 1.0 / inf_norm(&g).max(f64::MIN_POSITIVE);
            d = g.iter().map(|v| -v * scale).collect();
            slope = dot(&g, &d);
        }
        // Armijo backtracking.
        let mut step = 1.0;
        let mut accepted = None;
        for _ in 0..60 {
            for i in 0..n {
                x_new[i] = x[i] + step * d[i];
            }
            let f_trial = eval(&x_new, &mut g_new);
            evaluations += 1;
            if f_trial.is_finite() && f_trial <= f + 1e-4 * step * slope {
                accepted = Some(f_trial);
                break;
            }
            step *= 0.5;
        }
        let Some(f_next) = accepted else {
            break LbfgsStop::LineSearch;
        };
        let s: Vec<f64> = x_new.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = g_new.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        if sy > 1e-12 * dot(&s, &s).sqrt() * dot(&y, &y).sqrt() {
            if s_mem.len() == options.memory {
                s_mem.remove(0);
                y_mem.remove(0);
            }
            s_mem.push(s);
            y_mem.push(y);
        }
        let decrease = (f - f_next) / f.abs().max(1.0);
        std::mem::swap(&mut x, &mut x_new);
        std::mem::swap(&mut g, &mut g_new);
        f = f_next;
        history.push(f);
        on_iteration(iterations, f);
        stalled = if decrease < options.function_tolerance {
            stalled + 1
        } else {
            0
        };
        if stalled >= 5 {
            break LbfgsStop::Function;
        }
    };
    LbfgsResult {
        x,
        value: f,
        iterations,
        evaluations,
        stop,
        history,
    }
}

#[cfg(test)]
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
        let r = minimize(eval, vec![-1.2; 10], &LbfgsOptions::default(), |_, _| {});
        assert!(r.value < 1e-10, "{} after {:?}", r.value, r.stop);
        assert!(r.x.iter().all(|v| (v - 1.0).abs() < 1e-5));
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
        let r = minimize(eval, vec![0.0; n], &opts, |_, _| {});
        for i in 0..n {
            assert!((r.x[i] - b[i] / diag[i]).abs() < 1e-8, "{i} {:?}", r.stop);
        }
    }
}
