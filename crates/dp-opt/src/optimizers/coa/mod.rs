//! COA (Yuan et al., "Convex optimization for linear query processing
//! under approximate differential privacy", KDD 2016): the optimal
//! strategy for (ε,δ)-DP.
//!
//! Program (10): `min F(X) = ⟨X⁻¹, V⟩ s.t. diag(X) = 1, X ≻ 0` with
//! `V = WᵀW + θI`. Algorithm 1 takes Newton steps whose direction solves
//! the equality-constrained quadratic model (15) by the modified conjugate
//! gradient of Algorithm 2 (Hessian products `−G D X⁻¹ − X⁻¹ D G`, the
//! diagonal held at zero), with Armijo backtracking (16) that uses a
//! Cholesky factorization as the positive-definiteness test and reuses it
//! for `X⁻¹`. Algorithm 3 is the homotopy over θ (θ₀ = 1, × 0.1) with warm
//! starts. The strategy is `A = chol(X)ᵀ`, so `Δ₂(A)² = max diag(X) = 1`
//! and `l2_obj(A) = ⟨X⁻¹, WᵀW⟩`.
//!
//! Beyond the paper: every run carries a certificate. The multipliers
//! `yᵢ = (X⁻¹VX⁻¹)ᵢᵢ` of the iterate give a lower bound through the dual
//! (see [`dual`]); where that bound is loose (rank-deficient W, whose
//! optimum lies on the boundary) the dual is improved directly and its own
//! strategy `Σ^{1/2}QᵀD^{-1/2}` competes with the primal one; where both
//! Newton paths fall short, the interior-point method of
//! [`interior_point`] on the row-space form of Program (10) takes over.
//! The run stops on the relative duality gap, computed against the
//! original `WᵀW` (θ = 0).
//!
//! Modules: [`primal`] (Algorithms 1 and 3), `newton` (Algorithm 2 and
//! the Newton system), [`dual`] (the Lagrange dual and its projected
//! Newton maximization), [`interior_point`] (the certifying fallback),
//! `support` (completing a strategy's support), [`options`].

mod descriptor;
pub mod dual;
pub mod interior_point;
mod newton;
pub mod options;
pub mod primal;
mod support;

use std::time::Instant;

use dp_core::{DpError, Result};
use dp_linalg::{Cholesky, GramSpectrum, Mat, MatRef};

use crate::report::{BoundSource, Event};
use crate::solvers::engine::Termination;
use crate::solvers::projected_newton::DualEvaluation;
use crate::{
    Certificate, Observer, OptimizeReport, Optimized, PrivacyModel, Problem, StrategyOptimizer,
};

pub use descriptor::DESCRIPTOR;
use dual::{certified_lower_bound, maximize_trace_dual};
use interior_point::{InteriorPointOptions, minimize_trace_inverse};
pub use options::{CoaOptions, CoaStart};
use primal::{Bound, Trace, primal_certificate, svd_bound_start};
use support::complete_support;

/// COA behind the optimizer trait ((ε,δ)-DP only).
#[derive(Debug, Clone, Copy, Default)]
pub struct Coa {
    /// Options.
    pub options: CoaOptions,
}

/// Cells no query touches (zero columns of W) need no measurement: they
/// are removed before optimizing and get zero strategy columns.
fn active_cells(gram: MatRef<'_, f64>) -> Vec<usize> {
    let scale = (0..gram.nrows()).map(|i| gram[(i, i)]).fold(0.0, f64::max);
    (0..gram.nrows())
        .filter(|&i| gram[(i, i)] > 1e-14 * scale)
        .collect()
}

/// Columns `active[k]` of an `r × full_n` matrix from column k of `m`; the
/// rest zero.
fn embed(m: &Mat<f64>, active: &[usize], full_n: usize) -> Mat<f64> {
    let mut out = Mat::zeros(m.nrows(), full_n);
    for (k, &j) in active.iter().enumerate() {
        out.col_mut(j).copy_from(m.col(k));
    }
    out
}

/// Program (10)'s data as COA solves it: W restricted to the cells some
/// query touches and `V₀ = WᵀW` normalized to mean eigenvalue 1 (F scales
/// linearly, the optimal X is unchanged).
struct Normalized {
    /// The active cells ([`active_cells`]).
    active: Vec<usize>,
    /// The full domain size.
    full_n: usize,
    /// The normalization: `V₀ = WᵀW / scale` on the active cells.
    scale: f64,
    /// `V₀`.
    v0: Mat<f64>,
    /// Its Gram root (`RᵀR = V₀`).
    root: Mat<f64>,
    /// The root the reported bound is certified on ([`certified_root`]).
    certified_root: Mat<f64>,
    /// Its smallest eigenvalue (relative, as the mean is 1).
    lambda_min: f64,
    /// Whether `V₀` counts as positive definite.
    full_rank: bool,
}

impl Normalized {
    fn new(problem: &Problem, full_rank_threshold: f64) -> Result<Self> {
        let full_n = problem.domain_size();
        let active = active_cells(problem.gram());
        let n = active.len();
        if n == 0 {
            return Err(DpError::ZeroMatrix {
                what: "workload".into(),
            });
        }
        let scale = active.iter().map(|&i| problem.gram()[(i, i)]).sum::<f64>() / n as f64;
        let v0 = Mat::from_fn(n, n, |i, j| problem.gram()[(active[i], active[j])] / scale);
        let spectrum = GramSpectrum::new(v0.as_ref())?;
        let root = spectrum.root(0.0);
        let certified_root = certified_root(&spectrum, n);
        let lambda_min = spectrum.values().first().copied().unwrap_or(0.0);
        let full_rank = root.nrows() == n && lambda_min > full_rank_threshold;
        Ok(Self {
            active,
            full_n,
            scale,
            v0,
            root,
            certified_root,
            lambda_min,
            full_rank,
        })
    }

    fn n(&self) -> usize {
        self.active.len()
    }
}

/// What the Newton paths produced: strategies over the active cells with
/// their objectives `F`, the best dual point, and why a stage stalled.
struct Found {
    strategies: Vec<(Mat<f64>, f64)>,
    bound: Option<Bound>,
    stalled: Option<String>,
}

/// A strategy over the full domain as returned: the matrix, its objective
/// (`l2_obj` of the problem) and the relative cost of completing its
/// support (0 when none was needed; see [`finalize`]).
type Returned = (Mat<f64>, f64, f64);

impl Coa {
    /// Algorithm 3 (the homotopy over θ with Algorithm 1 at each θ) when
    /// `V₀` is positive definite, ending with a stage at θ = 0; the paper's
    /// homotopy down to `theta_handoff` when it is not and the start is the
    /// identity. Returns what it found and, when the dual must be improved
    /// (rank-deficient `V₀`, or a primal bound looser than the tolerance),
    /// the multipliers to start the dual from.
    fn newton_paths(
        &self,
        nz: &Normalized,
        trace: &mut Trace,
        observer: &mut dyn Observer,
    ) -> Result<(Found, Option<Vec<f64>>)> {
        let o = self.options;
        let par = o.parallelism;
        let (v0, root, n) = (&nz.v0, &nz.root, nz.n());
        let mut found = Found {
            strategies: Vec::new(),
            bound: None,
            stalled: None,
        };
        let mut dual_start: Vec<f64> = vec![1.0; n];
        let mut need_dual = !nz.full_rank;
        if nz.full_rank {
            let mut x = match o.start {
                CoaStart::Identity => Mat::<f64>::identity(n, n),
                CoaStart::SvdBound => svd_bound_start(root, 0.0, par),
            };
            let mut stalled = None;
            if o.start == CoaStart::Identity {
                stalled = self.homotopy(v0, &mut x, 0.0, nz.lambda_min, trace, observer)?;
            }
            let certified = &nz.certified_root;
            let (mut s, mut f, mut point) =
                self.final_stage(v0, certified, &mut x, trace, observer)?;
            if s.is_some() && o.start == CoaStart::SvdBound {
                // The direct stage failed: fall back to the paper's homotopy.
                x = svd_bound_start(root, o.theta_initial, par);
                stalled = self.homotopy(v0, &mut x, 0.0, nz.lambda_min, trace, observer)?;
                (s, f, point) = self.final_stage(v0, certified, &mut x, trace, observer)?;
            }
            found.stalled = stalled.or(s);
            // The strategy chol(X)ᵀ (Δ₂ = 1 since diag X = 1) and F(X).
            if let Some(f) = f
                && let Ok(chol) = Cholesky::factor(x.as_ref())
            {
                found
                    .strategies
                    .push((chol.lower().transpose().to_owned(), f));
            }
            if let Some(p) = point {
                observer.observe(&Event::LowerBound {
                    iteration: trace.iterations,
                    bound: p.lower_bound * nz.scale,
                    source: BoundSource::PrimalMultipliers,
                });
                let gap = found
                    .strategies
                    .last()
                    .map_or(f64::INFINITY, |c| (c.1 - p.lower_bound) / c.1);
                if gap > o.gap_tolerance {
                    need_dual = true;
                    dual_start.clone_from(&p.y);
                }
                found.bound = Some(p);
            } else {
                need_dual = true;
            }
        } else if o.start == CoaStart::Identity {
            // Paper mode: primal homotopy down to θ_handoff, then the dual
            // from the multipliers it suggests.
            let mut x = Mat::<f64>::identity(n, n);
            let last = o.theta_handoff.max(o.theta_min);
            found.stalled = self.homotopy(v0, &mut x, last, nz.lambda_min, trace, observer)?;
            if let Ok(p) = primal_certificate(&x, v0, &nz.certified_root, par) {
                dual_start = p.y;
            }
        }
        Ok((found, need_dual.then_some(dual_start)))
    }

    /// Projected Newton on the dual over the whole root from `y0` (see
    /// [`dual`]); its strategy joins the candidates and its bound replaces
    /// a weaker one. Where the root's spectrum is very wide the dual
    /// Hessian (which carries `1/(sₖsₗ(sₖ+sₗ))`) defeats conjugate
    /// gradients; the interior-point fallback takes over there.
    fn dual_path(
        &self,
        nz: &Normalized,
        y0: &[f64],
        found: &mut Found,
        trace: &mut Trace,
        observer: &mut dyn Observer,
    ) -> Result<()> {
        let o = self.options;
        let par = o.parallelism;
        let Ok(solved) = maximize_trace_dual(
            nz.root.as_ref(),
            y0,
            o.gap_tolerance * 0.8,
            o.dual_iterations,
            par,
        ) else {
            return Ok(());
        };
        trace.iterations += solved.iterations;
        let (strategy, _) = solved.point.strategy(nz.root.as_ref(), par);
        let (strategy, objective, _) = complete_support(strategy, &nz.v0, false)?;
        observer.observe(&Event::LowerBound {
            iteration: trace.iterations,
            bound: solved.point.lower_bound() * nz.scale,
            source: BoundSource::Dual,
        });
        observer.observe(&Event::Candidate {
            iteration: trace.iterations,
            name: "dual",
            objective: Some(objective * nz.scale),
        });
        trace.history.push(objective * nz.scale);
        found.strategies.push((strategy, objective));
        if found
            .bound
            .as_ref()
            .is_none_or(|b| solved.point.lower_bound() > b.lower_bound)
        {
            found.bound = Some(Bound {
                lower_bound: solved.point.lower_bound(),
                y: solved.point.base.y,
                certified: false,
            });
        }
        Ok(())
    }

    /// The certifying fallback: the interior-point method of
    /// [`interior_point`] on the whole root, from the best multipliers so
    /// far. Newton in X or in y loses accuracy where W is rank-deficient
    /// and its rows are scaled over many orders of magnitude; this method
    /// reaches gaps of 1e-9 there, at a cost of about fifty n×n Newton
    /// systems. Returns its strategy as returned and its multipliers, or
    /// `None` when it failed.
    fn interior_point_path(
        &self,
        problem: &Problem,
        nz: &Normalized,
        start: Option<&Bound>,
        trace: &mut Trace,
        observer: &mut dyn Observer,
    ) -> Result<Option<(Returned, Vec<f64>)>> {
        let o = self.options;
        let start_y = start.map(|b| b.y.clone());
        let Ok(solved) = minimize_trace_inverse(
            nz.root.as_ref(),
            start_y.as_deref(),
            &InteriorPointOptions {
                gap_tolerance: 0.1 * o.gap_tolerance,
                parallelism: o.parallelism,
                ..InteriorPointOptions::default()
            },
            observer,
        ) else {
            return Ok(None);
        };
        trace.iterations += solved.newton_steps;
        let returned = finalize(problem, nz, solved.strategy)?;
        observer.observe(&Event::LowerBound {
            iteration: trace.iterations,
            bound: solved.lower_bound * nz.scale,
            source: BoundSource::InteriorPoint,
        });
        observer.observe(&Event::Candidate {
            iteration: trace.iterations,
            name: "interior point",
            objective: Some(returned.1),
        });
        trace.history.push(returned.1);
        Ok(Some((returned, solved.multipliers)))
    }
}

/// A strategy over the active cells embedded into the full domain (zero
/// columns for idle cells), with its objective. A strategy with fewer than
/// n rows may miss directions where W still has energy just above the
/// Gram's rounding level (the support test on the explicit W catches
/// them); such directions are completed at the model's weight
/// (`complete_support`, forced: any energy above ε·tr V per direction),
/// which costs about `2√(t/F)` relative, returned as the third element.
fn finalize(problem: &Problem, nz: &Normalized, a: Mat<f64>) -> Result<Returned> {
    let complete = |a: Mat<f64>| -> Result<Returned> {
        let (active_strategy, _, cost) = complete_support(a, &nz.v0, true)?;
        let full = embed(&active_strategy, &nz.active, nz.full_n);
        let objective = problem.objective(full.as_ref())?;
        Ok((full, objective, cost))
    };
    if a.nrows() < nz.n() {
        return complete(a);
    }
    let strategy = embed(&a, &nz.active, nz.full_n);
    match problem.objective(strategy.as_ref()) {
        Err(DpError::UnsupportedWorkload { .. }) => complete(a),
        other => Ok((strategy, other?, 0.0)),
    }
}

/// The root the reported bound is certified on, whichever path produced
/// the multipliers: a root of a Gram that stays ⪯ V₀ despite the
/// eigensolver's rounding. It keeps the eigenvalues above `n·ε·λ_max`
/// (below that a computed eigenvalue may be pure rounding, and keeping it
/// can push the "bound" above the optimum on low-rank W) and lowers each
/// by `τ = 2√n·ε·λ_max`, a margin over the `p(n)·ε·‖V‖` eigenvalue error
/// of a backward-stable solver (LAPACK Users' Guide §4.7, p(n) modest).
fn certified_root(spectrum: &GramSpectrum, n: usize) -> Mat<f64> {
    let tau = 2.0 * (n as f64).sqrt() * f64::EPSILON * spectrum.lambda_max();
    spectrum.root(tau)
}

/// Convergence and its reason: the relative gap meets `gap_tolerance`
/// widened by `floor`, the relative cost of answering directions whose
/// Gram eigenvalues lie below its rounding level (`n·ε·λ_max`; the Gram
/// fixes their energy only to about a percent, and no strategy answers
/// them for free). `floor` is zero unless such directions were completed.
fn termination(
    relative_gap: f64,
    floor: f64,
    gap_tolerance: f64,
    stalled: Option<String>,
    iterations: usize,
) -> Termination {
    if relative_gap <= gap_tolerance + floor {
        Termination::Converged {
            criterion: if floor > 0.0 {
                format!(
                    "relative duality gap {relative_gap:.2e} <= {gap_tolerance:.0e} + {floor:.2e} \
                     (the cost of answering workload directions below the Gram's \
                     rounding level)"
                )
            } else {
                format!("relative duality gap {relative_gap:.2e} <= {gap_tolerance:.0e}")
            },
        }
    } else if let Some(reason) = stalled {
        Termination::Stalled { reason }
    } else {
        Termination::MaxIterations { iterations }
    }
}

impl StrategyOptimizer for Coa {
    fn name(&self) -> &'static str {
        "coa"
    }

    fn optimize(&self, problem: &Problem, observer: &mut dyn Observer) -> Result<Optimized> {
        let start = Instant::now();
        if problem.privacy() != PrivacyModel::Approx {
            return Err(DpError::InvalidParameter {
                name: "privacy",
                reason: "COA minimizes l2_obj: it is an (ε,δ)-DP optimizer (use --privacy approx)"
                    .into(),
            });
        }
        let o = self.options;
        o.validate()?;
        let nz = Normalized::new(problem, o.full_rank_threshold)?;
        let mut trace = Trace {
            scale: nz.scale,
            history: Vec::new(),
            iterations: 0,
        };
        let (mut found, dual_start) = self.newton_paths(&nz, &mut trace, observer)?;
        if let Some(y0) = dual_start {
            self.dual_path(&nz, &y0, &mut found, &mut trace, observer)?;
        }
        let certify = |y: &[f64]| {
            certified_lower_bound(nz.certified_root.as_ref(), y).map_or(0.0, |b| b * nz.scale)
        };
        let (best_strategy, _) = found
            .strategies
            .into_iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .ok_or_else(|| DpError::NotConverged {
                solver: "COA",
                reason: found
                    .stalled
                    .clone()
                    .unwrap_or_else(|| "no strategy produced".into()),
            })?;
        let (mut strategy, mut objective, mut floor) = finalize(problem, &nz, best_strategy)?;
        let mut lower_bound = found.bound.as_ref().map_or(0.0, |b| {
            if b.certified {
                b.lower_bound * nz.scale
            } else {
                certify(&b.y)
            }
        });
        // The fallback runs only when the paths above fall short of the
        // tolerance, judged on the strategy as it will be returned.
        let gap_before = (objective - lower_bound) / objective;
        if o.interior_point_fallback && (gap_before.is_nan() || gap_before > o.gap_tolerance) {
            let bound = found.bound.as_ref();
            if let Some((candidate, multipliers)) =
                self.interior_point_path(problem, &nz, bound, &mut trace, observer)?
            {
                if candidate.1 < objective {
                    (strategy, objective, floor) = candidate;
                }
                lower_bound = lower_bound.max(certify(&multipliers));
            }
        }
        // Never clamped: a bound above the objective is a numerical
        // failure (the objective is evaluated stably from the strategy's
        // own QR, the bound on a root kept below V₀), reported as such.
        let relative_gap = (objective - lower_bound) / objective;
        let termination = if relative_gap < 0.0 {
            Termination::Stalled {
                reason: format!(
                    "numerical failure: the returned strategy's objective {objective:.9e} is \
                     below its certified lower bound {lower_bound:.9e}"
                ),
            }
        } else {
            termination(
                relative_gap,
                floor,
                o.gap_tolerance,
                found.stalled,
                o.max_newton_steps,
            )
        };
        Ok(Optimized {
            strategy,
            report: OptimizeReport {
                objective_history: trace.history,
                iterations: trace.iterations,
                termination,
                seconds: start.elapsed().as_secs_f64(),
                objective,
                certificate: Some(Certificate {
                    lower_bound,
                    relative_gap,
                }),
                diagnostics: vec![("rounding_floor", floor)],
                candidates: Vec::new(),
                chosen: None,
            },
        })
    }
}
