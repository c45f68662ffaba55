//! The Lagrange dual of COA's Program (9) and (10), used as a certificate
//! of optimality and to finish rank-deficient problems.
//!
//! For multipliers `y > 0`, `D = diag(y)`, the Lagrangian
//! `tr(X⁻¹V) + Σ yᵢ(Xᵢᵢ − 1)` is minimized over `X ≻ 0` by
//! `X = D^{-1/2} S D^{-1/2}` with `S = (D^{1/2} V D^{1/2})^{1/2}`, giving the
//! dual function `g(y) = 2 tr(S) − Σ yᵢ ≤ F(X)` for every feasible `X`.
//! Maximizing over a scale `t y` gives the scale-free bound
//!
//! `ℓ(y) = (tr S)² / Σ yᵢ = ‖C D^{1/2}‖²_* / Σ yᵢ`
//!
//! for any `C` with `CᵀC = V` (the nuclear norm of `C D^{1/2}` equals
//! `tr S`). At the optimum `Xᵢᵢ = Sᵢᵢ / yᵢ` is constant; for any `y` the
//! rescaled `X / maxᵢ Xᵢᵢ` is feasible, so `y` yields both a strategy and a
//! bound, and their ratio is `maxᵢ Xᵢᵢ / (Σ yᵢXᵢᵢ / Σ yᵢ)`.

use dp_core::{DpError, Result};
use dp_linalg::{Mat, MatRef, ThinSvd};

/// What one dual point certifies.
#[derive(Debug, Clone)]
pub struct DualPoint {
    /// The multipliers (normalized to sum to 1).
    pub y: Vec<f64>,
    /// `ℓ(y)`: a lower bound on the optimal `tr(X⁻¹V)` over `diag(X) ≤ 1`.
    pub lower_bound: f64,
    /// `Xᵢᵢ = Sᵢᵢ / yᵢ` of the Lagrangian minimizer.
    pub x_diag: Vec<f64>,
    /// Strategy `B = Σ^{1/2} Qᵀ D^{-1/2} / √(maxᵢ Xᵢᵢ)` (r×n, `Δ₂(B) = 1`).
    pub strategy: Mat<f64>,
}

/// Evaluates the dual at `y` (entries > 0) for `V = CᵀC`, `root` = C (r×n).
pub fn dual_point(root: MatRef<'_, f64>, y: &[f64]) -> Result<DualPoint> {
    let n = root.ncols();
    if y.len() != n || y.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return Err(DpError::InvalidParameter {
            name: "dual multipliers",
            reason: "need n finite positive entries".into(),
        });
    }
    let total: f64 = y.iter().sum();
    let y: Vec<f64> = y.iter().map(|v| v / total).collect();
    let sqrt_y: Vec<f64> = y.iter().map(|v| v.sqrt()).collect();
    // P = C D^{1/2} (r×n); its thin SVD P = U Σ Qᵀ gives S = Q Σ Qᵀ.
    let p = Mat::from_fn(root.nrows(), n, |i, j| root[(i, j)] * sqrt_y[j]);
    let svd = ThinSvd::new(p.as_ref())?;
    let sigma = &svd.singular_values;
    let nuclear: f64 = sigma.iter().sum();
    let q = &svd.v; // n × k
    let k = sigma.len();
    let s_diag: Vec<f64> = (0..n)
        .map(|i| (0..k).map(|c| sigma[c] * q[(i, c)] * q[(i, c)]).sum())
        .collect();
    let x_diag: Vec<f64> = s_diag.iter().zip(&y).map(|(s, yi)| s / yi).collect();
    let xmax = x_diag.iter().copied().fold(0.0, f64::max);
    if !(xmax.is_finite() && xmax > 0.0) {
        return Err(DpError::NotConverged {
            solver: "COA dual",
            reason: "degenerate multipliers".into(),
        });
    }
    // Keep the directions with non-negligible singular values.
    let tol = sigma.first().copied().unwrap_or(0.0) * 1e-13 * (n as f64);
    let keep: Vec<usize> = (0..k).filter(|&c| sigma[c] > tol).collect();
    let inv_sqrt_xmax = 1.0 / xmax.sqrt();
    let strategy = Mat::from_fn(keep.len(), n, |r, j| {
        let c = keep[r];
        sigma[c].sqrt() * q[(j, c)] / sqrt_y[j] * inv_sqrt_xmax
    });
    Ok(DualPoint {
        lower_bound: nuclear * nuclear, // Σ y = 1 after normalization
        y,
        x_diag,
        strategy,
    })
}

/// `−log ℓ(e^s)` and its gradient in `s = log y`:
/// `∂/∂sᵢ log ℓ = Sᵢᵢ/‖P‖_* − yᵢ/Σy` (with Σy = 1 after normalization).
fn neg_log_bound(root: MatRef<'_, f64>, s: &[f64]) -> Result<(f64, Vec<f64>, DualPoint)> {
    let smax = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let y: Vec<f64> = s.iter().map(|v| (v - smax).exp().max(1e-300)).collect();
    let point = dual_point(root, &y)?;
    let nuclear = point.lower_bound.sqrt();
    let grad: Vec<f64> = point
        .x_diag
        .iter()
        .zip(&point.y)
        .map(|(x, y)| -(x * y / nuclear - y))
        .collect();
    Ok((-point.lower_bound.ln(), grad, point))
}

/// Improves the dual bound from `y0` by L-BFGS (memory 10, Armijo
/// backtracking) on `−log ℓ(e^s)` over `s = log y`, which is smooth and,
/// in y, the negative log of a concave function. Stops when the implied
/// primal-dual ratio `maxᵢ Xᵢᵢ / X̄ − 1` of the best point is below
/// `tolerance`, or after `max_iterations`. Returns the best point and the
/// iterations used.
pub fn refine(
    root: MatRef<'_, f64>,
    y0: &[f64],
    tolerance: f64,
    max_iterations: usize,
) -> Result<(DualPoint, usize)> {
    let ratio = |p: &DualPoint| {
        let xbar: f64 = p.x_diag.iter().zip(&p.y).map(|(x, y)| x * y).sum();
        let xmax = p.x_diag.iter().copied().fold(0.0, f64::max);
        xmax / xbar - 1.0
    };
    let mut s: Vec<f64> = y0.iter().map(|v| v.max(1e-300).ln()).collect();
    let (mut f, mut g, mut best) = neg_log_bound(root, &s)?;
    let memory = 10;
    let mut hist: std::collections::VecDeque<(Vec<f64>, Vec<f64>, f64)> = Default::default();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let mut it = 0;
    while it < max_iterations && ratio(&best) > tolerance {
        it += 1;
        // Two-loop recursion for the direction −H g.
        let mut q = g.clone();
        let mut alphas = Vec::with_capacity(hist.len());
        for (sk, yk, rho) in hist.iter().rev() {
            let a = rho * dot(sk, &q);
            for (qi, yi) in q.iter_mut().zip(yk) {
                *qi -= a * yi;
            }
            alphas.push(a);
        }
        let gamma = hist
            .back()
            .map(|(sk, yk, _)| dot(sk, yk) / dot(yk, yk))
            .unwrap_or(1.0);
        for qi in &mut q {
            *qi *= gamma;
        }
        for ((sk, yk, rho), a) in hist.iter().zip(alphas.iter().rev()) {
            let b = rho * dot(yk, &q);
            for (qi, si) in q.iter_mut().zip(sk) {
                *qi += (a - b) * si;
            }
        }
        let mut dir: Vec<f64> = q.iter().map(|v| -v).collect();
        let mut slope = dot(&g, &dir);
        if slope >= 0.0 {
            hist.clear();
            dir = g.iter().map(|v| -v).collect();
            slope = dot(&g, &dir);
        }
        // Backtracking (Armijo, c = 1e-4), the first step capped in size.
        let norm = dir.iter().map(|v| v.abs()).fold(0.0, f64::max);
        let mut step = if norm > 1.0 { 1.0 / norm } else { 1.0 };
        let mut moved = false;
        for _ in 0..40 {
            let trial: Vec<f64> = s.iter().zip(&dir).map(|(a, d)| a + step * d).collect();
            if let Ok((ft, gt, pt)) = neg_log_bound(root, &trial)
                && ft <= f + 1e-4 * step * slope
            {
                let sk: Vec<f64> = trial.iter().zip(&s).map(|(a, b)| a - b).collect();
                let yk: Vec<f64> = gt.iter().zip(&g).map(|(a, b)| a - b).collect();
                let sy = dot(&sk, &yk);
                if sy > 1e-16 * dot(&yk, &yk).sqrt() * dot(&sk, &sk).sqrt() {
                    hist.push_back((sk, yk, 1.0 / sy));
                    if hist.len() > memory {
                        hist.pop_front();
                    }
                }
                s = trial;
                f = ft;
                g = gt;
                if pt.lower_bound >= best.lower_bound {
                    best = pt;
                }
                moved = true;
                break;
            }
            step *= 0.5;
        }
        if !moved {
            break;
        }
    }
    Ok((best, it))
}
