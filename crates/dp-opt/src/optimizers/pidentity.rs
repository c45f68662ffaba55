//! The p-Identity strategy family of HDMM (McKenna et al., "Optimizing
//! error of high-dimensional statistical queries under differential
//! privacy", VLDB 2018, §5): `A(Θ) = [I; Θ] D(Θ)` with `p` extra rows `Θ`
//! (p×n) and `D` rescaling every column to unit sensitivity.
//!
//! - ε-DP (`l1_obj`): `Θ ≥ 0` and `δⱼ = 1 + Σᵢ Θᵢⱼ`, so every column of A
//!   has L1 norm exactly 1 and `Δ₁(A) = 1`. The bound is kept by a
//!   projected L-BFGS ([`crate::solvers::lbfgs`], `nonnegative`), HDMM's L-BFGS-B
//!   bounds.
//! - (ε,δ)-DP (`l2_obj`): `Θ` free and `δⱼ = (1 + Σᵢ Θᵢⱼ²)^{1/2}`, so
//!   `Δ₂(A) = 1`.
//!
//! A always has full column rank (it contains a scaled identity), so it
//! supports every workload. With `Δ = diag(δ)`, `V' = ΔVΔ`,
//! `P = (I + ΘᵀΘ)⁻¹` and `R = I_p + ΘΘᵀ`, the objective is
//! `f(Θ) = tr(V (AᵀA)⁻¹) = tr(V'P)` (`AᵀA = D(I + ΘᵀΘ)D`, `D = Δ⁻¹`),
//! evaluated in O(p n²) by Woodbury, `P = I − ΘᵀR⁻¹Θ`:
//! `ΘP = R⁻¹Θ =: Y`, `T = Y V'`, `f = tr V' − ⟨T, Θ⟩`; the workload
//! enters only through the product `(ΘΔ)V`, and nothing n×n is formed
//! or factored. Its gradient is
//!
//! `∂f/∂Θᵢⱼ = −2 (T − (TΘᵀ) Y)ᵢⱼ + 2 (V'ⱼⱼ − Σₖ Θₖⱼ Tₖⱼ)/δⱼ · ∂δⱼ/∂Θᵢⱼ`
//!
//! (the first term from `dP = −P(dΘᵀΘ + ΘᵀdΘ)P`, the second from
//! `∂f/∂δⱼ = 2(V'P)ⱼⱼ/δⱼ`), minimized by L-BFGS ([`crate::solvers::lbfgs`]) from
//! HDMM's random start (`Θ` uniform on [0, 1)), best of `restarts` seeds
//! (one by default, as HDMM).

use std::time::Instant;

use dp_core::{DpError, Result};
use dp_linalg::{Cholesky, Mat, MatRef, Par};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::dense::gemm;
use crate::descriptor::{Descriptor, adjusted};
use crate::optimizers::best_of::BestOf;
use crate::optimizers::classic::Identity;
use crate::report::{Draft, Event, Stage};
use crate::solvers::engine::{Executor, Termination};
use crate::solvers::lbfgs::{Lbfgs, LbfgsOptions};
use crate::{Observer, Optimized, PrivacyModel, Problem, StrategyOptimizer};

/// Options of [`PIdentity`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PIdentityOptions {
    /// Extra rows p; `None` takes HDMM's rule of thumb `⌈n/16⌉`, but at
    /// least `min(n, 4)` (tiny domains gain from a few rows: the LRM
    /// paper's 3-query example needs p ≥ 2 to reach its optimum).
    pub p: Option<usize>,
    /// Independent random starts; the best is returned (1: at equal
    /// evaluations one long run ends lower than several short ones, see
    /// `benches/MEASUREMENTS.md`).
    pub restarts: usize,
    /// Seed of the random starts (ChaCha8).
    pub seed: u64,
    /// The L-BFGS settings (default: L-BFGS's, but stopping once five
    /// consecutive iterations each lower the objective by less than a
    /// millionth, [`PIDENTITY_FUNCTION_TOLERANCE`]).
    pub lbfgs: LbfgsOptions,
    /// Parallelism of the matrix products.
    pub parallelism: Par,
}

impl Default for PIdentityOptions {
    fn default() -> Self {
        Self {
            p: None,
            restarts: 1,
            seed: 0,
            lbfgs: LbfgsOptions {
                function_tolerance: PIDENTITY_FUNCTION_TOLERANCE,
                ..LbfgsOptions::default()
            },
            parallelism: Par::rayon(0),
        }
    }
}

impl PIdentityOptions {
    /// The extra rows p on a domain of n cells: `p`, or HDMM's `⌈n/16⌉`
    /// but at least `min(n, 4)`; at least 1.
    pub fn rows(&self, n: usize) -> usize {
        self.p.unwrap_or(n.div_ceil(16).max(n.min(4))).max(1)
    }
}

/// p-Identity's relative-decrease stop: an objective lower by a
/// millionth is no error anyone can measure, and the long tail of a
/// non-convex search costs most of its time (HDMM, through SciPy's
/// L-BFGS-B, stops at the first iteration below 1e-4).
pub const PIDENTITY_FUNCTION_TOLERANCE: f64 = 1e-6;

/// The p-Identity optimizer (ε-DP or (ε,δ)-DP by the problem's model).
#[derive(Debug, Clone, Copy, Default)]
pub struct PIdentity {
    /// Settings.
    pub options: PIdentityOptions,
}

/// The p-Identity objective and gradient at `Θ` (p×n), for the privacy
/// model's normalization. `None` if `R` fails to factor (non-finite Θ) or
/// the Woodbury form loses more than eight digits (see
/// [`MAX_CANCELLATION`]): the optimizer treats such points as +∞.
///
/// The Gram enters once, through `S = (ΘΔ) V` (one p×n by n×n product);
/// everything else is p×p or p×n: `T = SΔ = ΘV'`, `Y = R⁻¹Θ`,
/// `U = R⁻¹T = YV'`, `f = tr V' − ⟨Θ, U⟩`,
/// `∇f = −2 (U − (UΘᵀ) Y) + 2 (V'ⱼⱼ − Σₖ Θₖⱼ Uₖⱼ)/δⱼ · ∂δⱼ/∂Θ`.
/// No n×n matrix is formed, inverted or factored.
pub fn objective_and_gradient(
    gram: MatRef<'_, f64>,
    theta: MatRef<'_, f64>,
    privacy: PrivacyModel,
    par: Par,
) -> Option<(f64, Mat<f64>)> {
    let (p, n) = (theta.nrows(), theta.ncols());
    let delta: Vec<f64> = (0..n)
        .map(|j| match privacy {
            PrivacyModel::Pure => 1.0 + theta.col(j).iter().sum::<f64>(),
            PrivacyModel::Approx => (1.0 + theta.col(j).squared_norm_l2()).sqrt(),
        })
        .collect();
    let theta_delta = Mat::from_fn(p, n, |i, j| theta[(i, j)] * delta[j]);
    let mut u = gemm(theta_delta.as_ref(), gram, par);
    for (j, d) in delta.iter().enumerate() {
        u.col_mut(j).iter_mut().for_each(|v| *v *= d);
    }
    let mut r = gemm(theta, theta.transpose(), par);
    for i in 0..p {
        r[(i, i)] += 1.0;
    }
    let chol = Cholesky::factor(r.as_ref()).ok()?;
    let y = chol.solve(theta).ok()?;
    chol.solve_in_place(u.as_mut()).ok()?;
    // (V'P)ⱼⱼ = V'ⱼⱼ − Σₖ Θₖⱼ Uₖⱼ, and f is their sum.
    let diag_vpp: Vec<f64> = (0..n)
        .map(|j| {
            let theta_u: f64 = theta
                .col(j)
                .iter()
                .zip(u.col(j).iter())
                .map(|(a, b)| a * b)
                .sum();
            delta[j] * delta[j] * gram[(j, j)] - theta_u
        })
        .collect();
    let trace_vp: f64 = (0..n).map(|j| delta[j] * delta[j] * gram[(j, j)]).sum();
    let f: f64 = diag_vpp.iter().sum();
    // Woodbury subtracts two terms of size tr V'; beyond a cancellation
    // factor of 1e8 the value keeps fewer than 8 digits and a descent
    // method would chase rounding errors, so the point is refused.
    if !(f > 0.0 && trace_vp <= MAX_CANCELLATION * f) {
        return None;
    }
    let ut = gemm(u.as_ref(), theta.transpose(), par); // p×p
    let mut grad = gemm(ut.as_ref(), y.as_ref(), par);
    for j in 0..n {
        let d_delta = 2.0 * diag_vpp[j] / delta[j];
        for i in 0..p {
            let ddj = match privacy {
                PrivacyModel::Pure => 1.0,
                PrivacyModel::Approx => theta[(i, j)] / delta[j],
            };
            grad[(i, j)] = 2.0 * (grad[(i, j)] - u[(i, j)]) + d_delta * ddj;
        }
    }
    (f.is_finite() && grad.as_ref().is_all_finite()).then_some((f, grad))
}

/// Largest `tr V' / f` accepted by [`objective_and_gradient`].
pub const MAX_CANCELLATION: f64 = 1e8;

/// `[I; Θ] D` with unit column sensitivity.
pub fn strategy(theta: &Mat<f64>, privacy: PrivacyModel) -> Mat<f64> {
    let (p, n) = (theta.nrows(), theta.ncols());
    let delta: Vec<f64> = (0..n)
        .map(|j| match privacy {
            PrivacyModel::Pure => 1.0 + theta.col(j).iter().map(|v| v.abs()).sum::<f64>(),
            PrivacyModel::Approx => (1.0 + theta.col(j).squared_norm_l2()).sqrt(),
        })
        .collect();
    Mat::from_fn(n + p, n, |i, j| {
        let v = if i < n {
            if i == j { 1.0 } else { 0.0 }
        } else {
            theta[(i - n, j)]
        };
        v / delta[j]
    })
}

/// The variables of the L-BFGS runs: Θ itself, column-major p×n (a view,
/// not a copy), bounded below by 0 under ε-DP (the program's `Θ ≥ 0`,
/// kept by the projected L-BFGS of [`crate::solvers::lbfgs`], as HDMM keeps it by
/// L-BFGS-B's bounds).
fn theta_of(x: &[f64], p: usize) -> MatRef<'_, f64> {
    MatRef::from_column_major_slice(x, p, x.len() / p)
}

/// p-Identity's own search (restarts of L-BFGS), without the identity
/// candidate [`PIdentity`] compares it with.
pub(crate) struct Search(pub(crate) PIdentityOptions);

impl StrategyOptimizer for Search {
    fn name(&self) -> &'static str {
        "pidentity"
    }

    fn optimize(&self, problem: &Problem, observer: &mut dyn Observer) -> Result<Optimized> {
        let start = Instant::now();
        let o = self.0;
        let n = problem.domain_size();
        let p = o.rows(n);
        if o.restarts == 0 {
            return Err(DpError::InvalidParameter {
                name: "restarts",
                reason: "must be at least 1".into(),
            });
        }
        o.lbfgs.validate()?;
        if o.p == Some(0) || p > 64 * n.max(1) {
            return Err(DpError::InvalidParameter {
                name: "p",
                reason: format!("must lie in 1..={} (64 n)", 64 * n),
            });
        }
        let privacy = problem.privacy();
        let (v, scale) = problem.normalized_gram()?;
        let par = o.parallelism;
        let lbfgs = LbfgsOptions {
            nonnegative: privacy == PrivacyModel::Pure,
            ..o.lbfgs
        };
        let mut rng = ChaCha8Rng::seed_from_u64(o.seed);
        let mut best: Option<(Mat<f64>, f64, Termination, Vec<f64>)> = None;
        let mut total_iterations = 0;
        for restart in 0..o.restarts {
            observer.observe(&Event::Stage {
                iteration: total_iterations,
                stage: Stage::Restart(restart),
            });
            let theta0 = Mat::from_fn(p, n, |_, _| rng.random::<f64>());
            let x0: Vec<f64> = (0..p * n).map(|k| theta0[(k % p, k / p)]).collect();
            let eval = |x: &[f64], g: &mut [f64]| -> f64 {
                match objective_and_gradient(v.as_ref(), theta_of(x, p), privacy, par) {
                    Some((f, grad)) => {
                        for (j, gj) in g.chunks_exact_mut(p).enumerate() {
                            gj.iter_mut()
                                .zip(grad.col(j).iter())
                                .for_each(|(a, b)| *a = *b);
                        }
                        f
                    }
                    None => f64::INFINITY,
                }
            };
            let run = Executor::new(lbfgs.budget, observer)
                .offset(total_iterations)
                .scale(scale)
                .run(Lbfgs::new(eval, x0, &lbfgs));
            total_iterations += run.iterations;
            let result = run.output;
            let theta = theta_of(&result.x, p).to_owned();
            if best.as_ref().is_none_or(|b| result.value < b.1) {
                best = Some((theta, result.value, run.termination, run.history));
            }
        }
        let (theta, _, termination, history) = best.ok_or_else(|| DpError::NotConverged {
            solver: "p-Identity",
            reason: "no restart produced a strategy".into(),
        })?;
        let draft = Draft {
            iterations: total_iterations,
            history,
            diagnostics: vec![("p", p as f64)],
            ..Draft::new(strategy(&theta, privacy), termination)
        };
        draft.finish(problem, start)
    }
}

impl StrategyOptimizer for PIdentity {
    fn name(&self) -> &'static str {
        "pidentity"
    }

    /// The better of p-Identity's search and the identity (Θ = 0 is in
    /// the family, so p-Identity is never worse than the identity).
    fn optimize(&self, problem: &Problem, observer: &mut dyn Observer) -> Result<Optimized> {
        BestOf {
            name: "pidentity",
            candidates: vec![Box::new(Search(self.options)), Box::new(Identity)],
        }
        .optimize(problem, observer)
    }
}

/// [`PIdentity`] in the registry; weakened: 3 L-BFGS iterations.
pub const DESCRIPTOR: Descriptor = Descriptor::new(
    "pidentity",
    &["p-Identity"],
    "p-Identity (HDMM): identity plus p optimized rows, L-BFGS (projected onto Θ ≥ 0 under ε-DP)",
    |_| Box::new(PIdentity::default()),
)
.with_weakened(|| adjusted(|p: &mut PIdentity| p.options.lbfgs.budget.max_iterations = 3));

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn gram(n: usize) -> Mat<f64> {
        let w = Mat::from_fn(n + 3, n, |i, j| {
            (((i * 7 + j * 13) % 11) as f64 - 3.0) / 4.0
        });
        dp_linalg::gram(w.as_ref(), dp_linalg::Par::Seq)
    }

    /// The Woodbury objective equals `tr(V (AᵀA)⁻¹)` of the strategy with
    /// unit sensitivity, and the gradient matches central differences.
    #[test]
    fn objective_and_gradient_match_direct_evaluation() {
        let (p, n) = (3, 6);
        let v = gram(n);
        let theta = Mat::from_fn(p, n, |i, j| 0.1 + ((i * 5 + j * 3) % 7) as f64 / 7.0);
        for privacy in [PrivacyModel::Pure, PrivacyModel::Approx] {
            let (f, g) =
                objective_and_gradient(v.as_ref(), theta.as_ref(), privacy, Par::Seq).unwrap();
            let a = strategy(&theta, privacy);
            let eval = dp_core::accuracy::evaluate_strategy_gram(v.as_ref(), a.as_ref()).unwrap();
            let direct = privacy.objective(&eval);
            assert!(
                (f - direct).abs() < 1e-10 * direct,
                "{privacy:?} {f} {direct}"
            );
            crate::dense::assert_gradient_by_central_differences(
                &format!("{privacy:?}"),
                |x| {
                    objective_and_gradient(v.as_ref(), x.as_ref(), privacy, Par::Seq)
                        .unwrap()
                        .0
                },
                &theta,
                &g,
                1e-6,
                1e-6,
            );
        }
    }
}

#[cfg(test)]
mod optimizer_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use dp_workloads::workload::{AllRange, Workload};

    /// On all ranges p-Identity beats the identity by a wide margin under
    /// both models, its report matches the recomputed objective, and the
    /// history never increases.
    #[test]
    fn beats_identity_on_ranges_under_both_models() {
        let w = AllRange::new(64).unwrap();
        for privacy in [PrivacyModel::Pure, PrivacyModel::Approx] {
            let pr = Problem::from_gram(w.gram(), privacy).unwrap();
            let r = PIdentity::default().optimize(&pr, &mut ()).unwrap();
            let identity = pr.objective(Mat::<f64>::identity(64, 64).as_ref()).unwrap();
            assert!(
                r.report.objective < 0.75 * identity,
                "{privacy:?} {} {identity}",
                r.report.objective
            );
            assert!(
                (pr.objective(r.strategy.as_ref()).unwrap() - r.report.objective).abs()
                    < 1e-9 * identity
            );
            let h = &r.report.objective_history;
            assert!(!h.is_empty());
        }
    }

    /// Where the identity is optimal (a workload that is the identity),
    /// p-Identity returns it rather than something worse.
    #[test]
    fn never_worse_than_identity() {
        let g = Mat::<f64>::identity(10, 10);
        let pr = Problem::from_gram(g, PrivacyModel::Pure).unwrap();
        let r = PIdentity::default().optimize(&pr, &mut ()).unwrap();
        assert!(r.report.objective <= 10.0 * (1.0 + 1e-12));
        let bad = PIdentity {
            options: PIdentityOptions {
                restarts: 0,
                ..Default::default()
            },
        };
        assert!(bad.optimize(&pr, &mut ()).is_err());
    }
}
