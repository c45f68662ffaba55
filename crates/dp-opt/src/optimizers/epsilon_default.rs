//! The library's default ε-DP optimizer ([`EpsilonDefault`]): p-Identity,
//! then LRM from p-Identity's strategy, the better of the two.

use dp_core::Result;

use crate::descriptor::{Descriptor, Param};
use crate::optimizers::{best_of, lrm, pidentity};
use crate::{Observer, Optimized, PrivacyModel, Problem, StrategyOptimizer};

/// [`EpsilonDefault`] in the registry ([`Param::Effort`] sets
/// its time budget).
pub const EPSILON_DEFAULT: Descriptor = Descriptor {
    name: "epsilon-default",
    labels: &[],
    description: "default for ε-DP: p-Identity, then LRM from its strategy within `effort` × p-Identity's time (1.5)",
    privacy: &[PrivacyModel::Pure],
    params: &[Param::Effort],
    builder: |p| {
        let mut d = EpsilonDefault::default();
        if let Some(e) = p.effort {
            d.effort = e;
        }
        Box::new(d)
    },
    weakened: None,
};

/// The library's default ε-DP optimizer: p-Identity, then LRM from
/// p-Identity's strategy, and the better of the two by recomputed
/// `l1_obj` ([`best_of::choose`]), so never worse than p-Identity.
///
/// The run aims at `effort ×` p-Identity's own time: LRM gets what is
/// left, `effort · t − t` minus an estimate of its setup
/// ([`EpsilonDefault::lrm_seconds`]), as a real wall-clock Timeout on its
/// iterations, and is skipped (listed with the reason) when nothing is
/// left. The setup (the Gram root, the refit, the support completion) is
/// estimated, not clocked, so a run can exceed the aim by the estimate's
/// error. LRM's iterations cost O(n³) against p-Identity's O(p n²). Where
/// LRM's own rule picks its eliminated-B form (r ≥ n rows) it starts from
/// p-Identity's strategy (r = n + p) and can only improve it, since its
/// SPG keeps its best iterate; on low-rank workloads (r < n) it runs from
/// its own SVD start ([`lrm::Lrm::decompose_from`]).
#[derive(Debug, Clone, Copy)]
pub struct EpsilonDefault {
    /// p-Identity's settings (default: p-Identity's, stopping at
    /// [`EPSILON_DEFAULT_PIDENTITY_TOLERANCE`]).
    pub pidentity: pidentity::PIdentityOptions,
    /// LRM's settings (its `max_seconds` is set from the budget).
    pub lrm: lrm::LrmOptions,
    /// Total time as a multiple of p-Identity's time (≥ 1; 1 runs
    /// p-Identity alone).
    pub effort: f64,
}

/// The relative-decrease stop of `epsilon-default`'s p-Identity stage
/// (five consecutive iterations below it): ten times p-Identity's own
/// [`pidentity::PIDENTITY_FUNCTION_TOLERANCE`], because LRM continues
/// from its strategy; the last decade of p-Identity's tail costs about
/// half its iterations for a tenth of a percent of the objective.
pub const EPSILON_DEFAULT_PIDENTITY_TOLERANCE: f64 = 1e-5;

impl Default for EpsilonDefault {
    fn default() -> Self {
        let mut pidentity = pidentity::PIdentityOptions::default();
        pidentity.lbfgs.function_tolerance = EPSILON_DEFAULT_PIDENTITY_TOLERANCE;
        Self {
            pidentity,
            lrm: lrm::LrmOptions::default(),
            effort: 1.5,
        }
    }
}

/// LRM's fixed work outside its clock (the Gram root's eigendecomposition
/// with vectors, the eliminated-B form's first factorization, the support
/// completion and the refit) in units of a values-only n×n
/// eigendecomposition timed in the same run: LRM from a p-Identity start
/// with no iterations costs 8–12 such units at n = 512 and 1024 (see
/// `benches/MEASUREMENTS.md`); the larger is taken so that the run stays
/// within its effort.
pub const SETUP_EIGENSOLVES: f64 = 12.0;

impl EpsilonDefault {
    /// LRM's wall-clock budget after p-Identity took `p_seconds` of a run
    /// started `elapsed` seconds ago: `effort · p_seconds − elapsed −
    /// setup`, with `setup` LRM's own fixed work outside its clock (the
    /// Gram root's eigendecomposition with vectors, the refit and the
    /// support completion), estimated as [`SETUP_EIGENSOLVES`] times a
    /// values-only eigendecomposition of `WᵀW` timed in the same run.
    /// `None` when nothing is left.
    pub fn lrm_seconds(&self, p_seconds: f64, elapsed: f64, setup: f64) -> Option<f64> {
        let left = self.effort * p_seconds - elapsed - setup;
        (left > 0.0).then_some(left)
    }
}

impl StrategyOptimizer for EpsilonDefault {
    fn name(&self) -> &'static str {
        "epsilon-default"
    }

    fn optimize(&self, problem: &Problem, observer: &mut dyn Observer) -> Result<Optimized> {
        if problem.privacy() != PrivacyModel::Pure {
            return Err(dp_core::DpError::InvalidParameter {
                name: "privacy",
                reason: "the default ε-DP optimizer minimizes l1_obj (use --privacy pure)".into(),
            });
        }
        if !(self.effort.is_finite() && self.effort >= 1.0) {
            return Err(dp_core::DpError::InvalidParameter {
                name: "effort",
                reason: format!("must be a finite number >= 1, got {}", self.effort),
            });
        }
        let started = std::time::Instant::now();
        let p = pidentity::PIdentity {
            options: self.pidentity,
        }
        .optimize(problem, observer);
        let p_seconds = started.elapsed().as_secs_f64();
        let lrm_outcome = match &p {
            Ok(pid) => {
                // LRM's fixed work: first a floor that costs nothing (it
                // factors n×n matrices, over 10n³ flops, where one
                // p-Identity iteration's product is 2pn², so at least 5n/p
                // iterations' time); if that leaves time, the estimate
                // timed on this machine now.
                let n = problem.domain_size() as f64;
                let rows = self.pidentity.rows(problem.domain_size()) as f64;
                let per_iteration = p_seconds / pid.report.iterations.max(1) as f64;
                let floor = 5.0 * n / rows * per_iteration;
                let elapsed = started.elapsed().as_secs_f64();
                let setup = if self.lrm_seconds(p_seconds, elapsed, floor).is_some() {
                    let t = std::time::Instant::now();
                    let _ = dp_linalg::SymmetricEigen::values_only(problem.gram());
                    SETUP_EIGENSOLVES * t.elapsed().as_secs_f64()
                } else {
                    floor
                };
                match self.lrm_seconds(p_seconds, started.elapsed().as_secs_f64(), setup) {
                    Some(budget) => lrm::Lrm {
                        options: lrm::LrmOptions {
                            max_seconds: Some(budget),
                            ..self.lrm
                        },
                    }
                    .optimize_from(problem, Some(&pid.strategy), observer),
                    None => Err(dp_core::DpError::NotConverged {
                        solver: "LRM",
                        reason: format!(
                            "skipped: no time left within effort {} × p-Identity's {p_seconds:.3} s",
                            self.effort
                        ),
                    }),
                }
            }
            Err(e) => Err(dp_core::DpError::NotConverged {
                solver: "LRM",
                reason: format!("not run: p-Identity failed ({e})"),
            }),
        };
        let runs = vec![
            best_of::CandidateRun {
                name: "pidentity",
                outcome: p,
            },
            best_of::CandidateRun {
                name: "lrm",
                outcome: lrm_outcome,
            },
        ];
        best_of::choose(self.name(), problem, runs, started, observer)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use dp_workloads::Workload;

    fn problem() -> Problem {
        let w = dp_workloads::generators::wrange(48, 32, 3).unwrap();
        Problem::from_gram(w.gram(), PrivacyModel::Pure).unwrap()
    }

    /// LRM's budget is `effort · t − elapsed − setup`, none when that is
    /// not positive.
    #[test]
    fn lrm_budget_is_what_the_effort_leaves() {
        let d = EpsilonDefault::default();
        assert_eq!(d.lrm_seconds(2.0, 2.0, 0.25), Some(0.75));
        assert_eq!(d.lrm_seconds(2.0, 2.5, 0.5), None);
        let one = EpsilonDefault {
            effort: 1.0,
            ..EpsilonDefault::default()
        };
        assert_eq!(one.lrm_seconds(2.0, 2.0, 0.0), None);
    }

    /// With effort 1 LRM is skipped (listed with the reason) and the
    /// result is p-Identity's own. With an effort that leaves LRM time (it
    /// runs: no error listed) the result is never worse than p-Identity's
    /// (same seed, so the same p-Identity strategy) and lies between
    /// independent bounds: the SVD bound from below (`l1_obj ≥ l2_obj`,
    /// since a column's L1 norm is at least its L2 norm) and the
    /// identity's `l1_obj = tr(WᵀW)` from above.
    #[test]
    fn never_worse_than_pidentity_and_effort_one_skips_lrm() {
        let pr = problem();
        let pid = pidentity::PIdentity {
            options: EpsilonDefault::default().pidentity,
        }
        .optimize(&pr, &mut ())
        .unwrap();
        let one = EpsilonDefault {
            effort: 1.0,
            ..EpsilonDefault::default()
        }
        .optimize(&pr, &mut ())
        .unwrap();
        assert_eq!(one.report.chosen, Some("pidentity"));
        let lrm = &one.report.candidates[1];
        assert!(lrm.error.as_deref().unwrap().contains("skipped"), "{lrm:?}");
        assert_eq!(one.strategy, pid.strategy);
        let full = EpsilonDefault {
            effort: 1e6,
            ..EpsilonDefault::default()
        }
        .optimize(&pr, &mut ())
        .unwrap();
        let lrm = &full.report.candidates[1];
        assert_eq!((lrm.name, &lrm.error), ("lrm", &None), "{lrm:?}");
        let svd = dp_core::svd_lower_bound_from_gram(pr.gram()).unwrap();
        let identity: f64 = (0..32).map(|i| pr.gram()[(i, i)]).sum();
        let got = full.report.objective;
        assert!(svd <= got && got <= pid.report.objective && got < identity);
        // LRM's other solvers take no warm start: they run from their own.
        let reduced = EpsilonDefault {
            effort: 1e6,
            lrm: lrm::LrmOptions {
                solver: lrm::LrmSolver::Reduced,
                ..lrm::LrmOptions::default()
            },
            ..EpsilonDefault::default()
        }
        .optimize(&pr, &mut ())
        .unwrap();
        assert_eq!(reduced.report.candidates[1].error, None);
        let bad = EpsilonDefault {
            effort: 0.5,
            ..EpsilonDefault::default()
        };
        assert!(bad.optimize(&pr, &mut ()).is_err());
    }
}
