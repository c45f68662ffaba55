//! The exponential smoothing mechanism (ESM; the LRM paper's Appendix B
//! implementation of the matrix mechanism, called AMM there): Program
//!
//! `min_{M ≻ 0} max(diag M) · tr(WᵀW M⁻¹)`,
//!
//! with `max(diag M)` replaced by the soft-max of Eq. (2) in the stable form
//! of the appendix, `f_μ(v) = max(v) + μ log Σᵢ exp((vᵢ − max v)/μ)`
//! (`max v ≤ f_μ ≤ max v + μ log n`), gradient
//! `∂f_μ/∂vᵢ = (Σⱼ exp((vⱼ − vᵢ)/μ))⁻¹` (Eq. (3)). The objective
//! `F(M) = f_μ(diag M) · tr(V M⁻¹)` has gradient
//! `tr(VM⁻¹)·diag(∇f_μ) − f_μ · M⁻¹VM⁻¹` and is minimized by the nonmonotone
//! spectral projected gradient ([`crate::solvers::spg`]) over the closed convex set
//! `{M = Mᵀ, M ⪰ κ I}` (projection: symmetrize, clamp eigenvalues at κ).
//! The strategy is `A = M^{1/2}`.
//!
//! `max(diag AᵀA)` is `Δ₂(A)²`, so the program is the (ε,δ)-DP matrix
//! mechanism; for ε-DP the LRM paper uses it as is (the L2 column norm
//! standing in for the L1 one), and this optimizer does the same, with the
//! returned `objective` recomputed as the true `l1_obj` of `M^{1/2}`.
//!
//! Scale: V is normalized to mean eigenvalue 1, the start is the SVD-bound
//! Gram `V^{1/2} + ρI` scaled to unit largest diagonal, the
//! smoothing is `μ = smoothing / ln n` (a uniform `smoothing`-approximation
//! of the max, relative to the unit diagonal of the start) and
//! `κ = 1e-8`.

use std::time::Instant;

use dp_core::{DpError, Result};
use dp_linalg::{Cholesky, Mat, Par, SymmetricEigen};

use crate::dense::gemm;
use crate::descriptor::{Descriptor, Param, adjusted};
use crate::report::{Draft, Event, Stage};
use crate::solvers::engine::{Budget, Executor};
use crate::solvers::spg::{Spg, SpgOptions};
use crate::{Observer, Optimized, Problem, StrategyOptimizer};

/// Options of [`Esm`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EsmOptions {
    /// ϵ of the appendix: the soft-max overestimates the max by at most
    /// this (μ = ϵ / ln n), relative to the start's unit diagonal. Reached
    /// by continuation: stages at ϵ = 0.1, 0.01, … down to this value,
    /// each warm-started (a small μ from the start makes the soft-max
    /// nearly non-smooth and SPG stalls far from the optimum).
    pub smoothing: f64,
    /// Smallest eigenvalue allowed for M (the closed set SPG projects on).
    pub min_eigenvalue: f64,
    /// SPG settings.
    pub spg: SpgOptions,
    /// Parallelism of the matrix products.
    pub parallelism: Par,
}

impl Default for EsmOptions {
    fn default() -> Self {
        Self {
            smoothing: 1e-3,
            min_eigenvalue: 1e-8,
            spg: SpgOptions {
                budget: Budget::iterations(500),
                tolerance: 1e-9,
                stall_tolerance: 1e-7,
                ..SpgOptions::default()
            },
            parallelism: Par::rayon(0),
        }
    }
}

/// ESM / AMM.
#[derive(Debug, Clone, Copy, Default)]
pub struct Esm {
    /// Settings.
    pub options: EsmOptions,
}

/// The stable soft-max `f_μ(v)` and its gradient (appendix Eqs. (2)–(3)).
pub fn soft_max(v: &[f64], mu: f64) -> (f64, Vec<f64>) {
    let vmax = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = v.iter().map(|x| ((x - vmax) / mu).exp()).collect();
    let total: f64 = e.iter().sum();
    (
        vmax + mu * total.ln(),
        e.iter().map(|x| x / total).collect(),
    )
}

/// `F(M)` and its (symmetric) gradient; `None` when M is not positive
/// definite.
pub fn objective_and_gradient(
    v: &Mat<f64>,
    m: &Mat<f64>,
    mu: f64,
    par: Par,
) -> Option<(f64, Mat<f64>)> {
    let n = m.nrows();
    let chol = Cholesky::factor(m.as_ref()).ok()?;
    let inv = chol.inverse();
    let iv = gemm(inv.as_ref(), v.as_ref(), par);
    let trace: f64 = (0..n).map(|i| iv[(i, i)]).sum();
    let ivi = gemm(iv.as_ref(), inv.as_ref(), par);
    let diag: Vec<f64> = (0..n).map(|i| m[(i, i)]).collect();
    let (smax, weights) = soft_max(&diag, mu);
    let mut grad = ivi * dp_linalg::Scale(-smax);
    for i in 0..n {
        grad[(i, i)] += trace * weights[i];
    }
    let f = smax * trace;
    (f.is_finite() && f > 0.0).then_some((f, grad))
}

/// Projection onto `{M = Mᵀ, M ⪰ κI}`.
fn project(m: &mut Mat<f64>, kappa: f64) -> Result<()> {
    dp_linalg::symmetrize(m);
    // Already inside (M − κI has a Cholesky factor): nothing to do, and a
    // factorization is far cheaper than an eigendecomposition.
    let mut shifted = m.clone();
    for i in 0..m.nrows() {
        shifted[(i, i)] -= kappa;
    }
    if Cholesky::factor(shifted.as_ref()).is_ok() {
        return Ok(());
    }
    let eig = SymmetricEigen::new(m.as_ref())?;
    if eig.values.iter().all(|&l| l >= kappa) {
        return Ok(());
    }
    *m = eig.map(|l| l.max(kappa));
    dp_linalg::symmetrize(m);
    Ok(())
}

/// The smoothing levels ε of the continuation: 0.1, 0.01, … down to (and
/// ending at) `smoothing`.
fn smoothing_stages(smoothing: f64) -> Vec<f64> {
    let mut stages = Vec::new();
    let mut eps = 0.1f64;
    while eps > smoothing * 1.000001 {
        stages.push(eps);
        eps *= 0.1;
    }
    stages.push(smoothing);
    stages
}

/// The start, column-major: the SVD-bound strategy's Gram
/// `M₀ = V^{1/2} + ρI` scaled to unit largest diagonal. `ρ = 10⁻⁶` of its
/// mean eigenvalue keeps M₀ inside the feasible set while the directions
/// W never uses start near zero, as they end at a nearly singular optimum
/// on low-rank workloads; the paper's `M₀ = I` is the case of a flat
/// spectrum.
fn svd_bound_start(v: &Mat<f64>) -> Result<Vec<f64>> {
    let n = v.nrows();
    let eig = SymmetricEigen::new(v.as_ref())?;
    let mean_root = eig.values.iter().map(|l| l.max(0.0).sqrt()).sum::<f64>() / n as f64;
    let rho = 1e-6 * mean_root.max(f64::MIN_POSITIVE);
    let m0 = eig.map(|l| l.max(0.0).sqrt() + rho);
    let dmax = (0..n).map(|i| m0[(i, i)]).fold(0.0, f64::max);
    Ok((0..n * n).map(|k| m0[(k % n, k / n)] / dmax).collect())
}

/// Writes `m` column-major into `out` (the layout SPG's vectors use).
fn write_column_major(m: &Mat<f64>, out: &mut [f64]) {
    for (j, col) in out.chunks_mut(m.nrows()).enumerate() {
        for (i, o) in col.iter_mut().enumerate() {
            *o = m[(i, j)];
        }
    }
}

/// The strategy `M^{1/2}` of the column-major n×n `M` (eigenvalues
/// clamped at zero).
fn psd_root(x: &[f64], n: usize) -> Result<Mat<f64>> {
    let m = Mat::from_fn(n, n, |i, j| x[j * n + i]);
    Ok(SymmetricEigen::new(m.as_ref())?.map(|l| l.max(0.0).sqrt()))
}

impl StrategyOptimizer for Esm {
    fn name(&self) -> &'static str {
        "esm"
    }

    fn optimize(&self, problem: &Problem, observer: &mut dyn Observer) -> Result<Optimized> {
        let start = Instant::now();
        let o = self.options;
        if !(o.smoothing > 0.0 && o.min_eigenvalue > 0.0 && o.spg.budget.max_iterations > 0) {
            return Err(DpError::InvalidParameter {
                name: "smoothing / min_eigenvalue / max_iterations",
                reason: "must be positive".into(),
            });
        }
        let n = problem.domain_size();
        let (v, scale) = problem.normalized_gram()?;
        let par = o.parallelism;
        let kappa = o.min_eigenvalue;
        let stages = smoothing_stages(o.smoothing);
        let mut x = svd_bound_start(&v)?;
        let mut history = Vec::new();
        let mut iterations = 0;
        let mut last = None;
        for eps in stages {
            let mu = eps / (n.max(2) as f64).ln();
            let eval = |x: &[f64], g: &mut [f64]| -> f64 {
                let m = Mat::from_fn(n, n, |i, j| x[j * n + i]);
                match objective_and_gradient(&v, &m, mu, par) {
                    Some((f, grad)) => {
                        write_column_major(&grad, g);
                        f
                    }
                    None => f64::INFINITY,
                }
            };
            let mut projection_failed = false;
            let project_flat = |x: &mut [f64]| {
                let mut m = Mat::from_fn(n, n, |i, j| x[j * n + i]);
                if project(&mut m, kappa).is_err() {
                    projection_failed = true;
                    return;
                }
                write_column_major(&m, x);
            };
            // `spg.budget.max_seconds` bounds the whole run, not each stage.
            let mut stage = o.spg;
            if let Some(total) = o.spg.budget.max_seconds {
                stage.budget.max_seconds = Some((total - start.elapsed().as_secs_f64()).max(0.0));
            }
            observer.observe(&Event::Stage {
                iteration: iterations,
                stage: Stage::Smoothing(eps),
            });
            let run = Executor::new(stage.budget, observer)
                .offset(iterations)
                .scale(scale)
                .run(Spg::new(eval, project_flat, x, &stage));
            history.extend_from_slice(&run.history);
            iterations += run.iterations;
            let solved = run.output;
            if projection_failed {
                return Err(DpError::NotConverged {
                    solver: "ESM",
                    reason: "eigendecomposition failed in the projection".into(),
                });
            }
            x = solved.x.clone();
            last = Some((solved, run.termination));
        }
        let (solved, termination) = last.ok_or_else(|| DpError::NotConverged {
            solver: "ESM",
            reason: "no stage ran".into(),
        })?;
        let root = psd_root(&solved.x, n)?;
        let draft = Draft {
            iterations,
            history,
            diagnostics: vec![("smoothed_objective", solved.value * scale)],
            ..Draft::new(root, termination)
        };
        draft.finish(problem, start)
    }
}

/// [`Esm`] in the registry (a time budget bounds its SPG); weakened: 3
/// SPG iterations.
pub const DESCRIPTOR: Descriptor = Descriptor::new(
    "esm",
    &["ESM"],
    "ESM: soft-max smoothed matrix mechanism program, spectral projected gradient",
    |p| adjusted(|esm: &mut Esm| esm.options.spg.budget.max_seconds = p.max_seconds),
)
.with_params(&[Param::MaxSeconds])
.with_weakened(|| adjusted(|esm: &mut Esm| esm.options.spg.budget.max_iterations = 3));

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The stable soft-max: bounds `max ≤ f_μ ≤ max + μ log n`, gradient by
    /// central differences, no overflow at large arguments.
    #[test]
    fn soft_max_is_stable_and_differentiable() {
        let v = [1e3, 1e3 - 0.5, 999.0, -4.0];
        let mu = 0.1;
        let (f, g) = soft_max(&v, mu);
        assert!(f >= 1e3 && f <= 1e3 + mu * 4f64.ln());
        assert!((g.iter().sum::<f64>() - 1.0).abs() < 1e-14);
        for i in 0..4 {
            let mut p = v;
            p[i] += 1e-6;
            let mut m = v;
            m[i] -= 1e-6;
            let fd = (soft_max(&p, mu).0 - soft_max(&m, mu).0) / 2e-6;
            assert!((fd - g[i]).abs() < 1e-6, "{i}");
        }
    }

    /// The gradient of F against central differences along a random
    /// symmetric direction.
    #[test]
    fn gradient_matches_finite_differences() {
        let n = 5;
        let w = Mat::from_fn(7, n, |i, j| (((i * 3 + j * 5) % 7) as f64 - 2.0) / 3.0);
        let v = dp_linalg::gram(w.as_ref(), dp_linalg::Par::Seq);
        let m = Mat::from_fn(
            n,
            n,
            |i, j| if i == j { 1.0 + 0.1 * i as f64 } else { 0.05 },
        );
        let dir = Mat::from_fn(n, n, |i, j| ((i + j) % 3) as f64 - 1.0);
        let mu = 0.05;
        let (_, g) = objective_and_gradient(&v, &m, mu, Par::Seq).unwrap();
        let h = 1e-6;
        let fp = objective_and_gradient(&v, &(&m + &dir * dp_linalg::Scale(h)), mu, Par::Seq)
            .unwrap()
            .0;
        let fm = objective_and_gradient(&v, &(&m - &dir * dp_linalg::Scale(h)), mu, Par::Seq)
            .unwrap()
            .0;
        let fd = (fp - fm) / (2.0 * h);
        let an: f64 = (0..n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .map(|(i, j)| g[(i, j)] * dir[(i, j)])
            .sum();
        assert!((fd - an).abs() < 1e-6 * an.abs().max(1.0), "{fd} vs {an}");
    }
}
