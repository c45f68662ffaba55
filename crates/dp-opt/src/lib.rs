//! Strategy optimizers for the matrix mechanism, behind one trait.
//!
//! An optimizer takes a [`Problem`] — the workload through its Gram matrix
//! `WᵀW` and the privacy model whose objective it minimizes (`l1_obj` for
//! ε-DP, `l2_obj` for (ε,δ)-DP) — and returns the strategy with an
//! [`OptimizeReport`]: objective per iteration, iterations, why it stopped,
//! seconds and, when the method has one, a certificate
//! of optimality. Progress goes to an [`Observer`]; the library never
//! prints (the shape of argmin, without its generic depth).
//!
//! ```
//! use dp_opt::{Problem, PrivacyModel, StrategyOptimizer, classic::Hierarchical};
//! use dp_workloads::workload::{AllRange, Workload};
//!
//! let w = AllRange::new(64).unwrap();
//! let problem = Problem::from_gram(w.gram(), PrivacyModel::Pure).unwrap();
//! let result = Hierarchical { branching: 2 }.optimize(&problem, &mut ()).unwrap();
//! assert!(result.report.converged());
//! assert_eq!(result.strategy.nrows(), 127);
//! ```

pub mod am;
pub mod best_of;
pub mod classic;
pub mod coa;
mod dense;
pub mod engine;
pub mod esm;
pub mod lbfgs;
pub mod lrm;
pub mod multidim;
pub mod pidentity;
mod problem;
pub mod projected_newton;
pub mod projection;
pub mod registry;
mod report;
pub mod spg;
pub mod support;

pub use best_of::{BestOf, Fallback};
pub use engine::{Budget, Executor, Solver, Termination};
pub use problem::{PrivacyModel, Problem};
pub use registry::{Descriptor, Params, REGISTRY, optimizer_names};
pub use report::{
    BoundSource, CandidateReport, Certificate, Draft, Event, FnObserver, Observer, OptimizeReport,
    Optimized, Recorder, Stage,
};

use dp_core::Result;

/// A strategy optimizer: given the workload's Gram matrix and a privacy
/// model, find a strategy `A` (p×n) with small `l1_obj` or `l2_obj`.
pub trait StrategyOptimizer {
    /// Name used on the command line and in reports.
    fn name(&self) -> &'static str;

    /// Runs the optimizer. A run that stops without meeting its tolerance
    /// is not an error: it returns its best iterate with the reason in
    /// `report.termination`.
    fn optimize(&self, problem: &Problem, observer: &mut dyn Observer) -> Result<Optimized>;
}

/// The optimizer called `name` with its default options (see
/// [`registry::REGISTRY`]); an unknown name is an error listing the
/// registered ones.
pub fn by_name(name: &str) -> Result<Box<dyn StrategyOptimizer>> {
    registry::descriptor(name)?.build(&registry::Params::default())
}

/// [`EpsilonDefault`] in the registry.
pub const EPSILON_DEFAULT: registry::Descriptor = registry::Descriptor {
    name: "epsilon-default",
    labels: &[],
    description: "default for ε-DP: the better of p-Identity and LRM (LRM on a time budget)",
    privacy: &[PrivacyModel::Pure],
    params: &[],
    builder: |_| Box::new(EpsilonDefault::default()),
    weakened: None,
};

/// The library's default ε-DP optimizer: `BestOf[p-Identity, LRM]`, the
/// better (by recomputed `l1_obj`) of the two. LRM runs with a wall-clock budget of
/// `max(lrm_min_seconds, lrm_time_factor × p-Identity's time)`: its
/// iterations cost O(n³) against p-Identity's O(p n²), and each wins on
/// some workloads (p-Identity on WRange 256×256, 7,965 vs 8,605; LRM's
/// penalty path on few ranges over a large domain, WRange 16×64, 159 vs
/// 219); a budget cut is reported as non-convergence of that candidate
/// only.
#[derive(Debug, Clone, Copy)]
pub struct EpsilonDefault {
    /// p-Identity's settings.
    pub pidentity: pidentity::PIdentityOptions,
    /// LRM's settings (its `max_seconds` is set from the budget below).
    pub lrm: lrm::LrmOptions,
    /// LRM's budget as a multiple of p-Identity's time …
    pub lrm_time_factor: f64,
    /// … but at least this many seconds.
    pub lrm_min_seconds: f64,
}

impl Default for EpsilonDefault {
    fn default() -> Self {
        Self {
            pidentity: pidentity::PIdentityOptions::default(),
            lrm: lrm::LrmOptions::default(),
            lrm_time_factor: 2.0,
            lrm_min_seconds: 5.0,
        }
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
        let started = std::time::Instant::now();
        let p = pidentity::PIdentity {
            options: self.pidentity,
        }
        .optimize(problem, observer);
        let p_seconds = p.as_ref().map_or(0.0, |p| p.report.seconds);
        let budget = (self.lrm_time_factor * p_seconds).max(self.lrm_min_seconds);
        let l = lrm::Lrm {
            options: lrm::LrmOptions {
                max_seconds: Some(budget),
                ..self.lrm
            },
        }
        .optimize(problem, observer);
        let runs = vec![
            best_of::CandidateRun {
                name: "pidentity",
                outcome: p,
            },
            best_of::CandidateRun {
                name: "lrm",
                outcome: l,
            },
        ];
        best_of::choose(self.name(), problem, runs, started, observer)
    }
}

/// The matrix mechanism with an optimized strategy, end to end: optimizes
/// the strategy for `workload` under the model `budget` implies (ε-DP:
/// `l1_obj`, Laplace; (ε,δ)-DP: `l2_obj`, discrete Gaussian with the zCDP
/// calibration of an (ε,δ) session, see [`dp_core::MatrixMechanism::new`])
/// and returns the mechanism
/// (release answers with [`dp_core::MatrixMechanism::release`]) with the
/// optimizer's report. For (ε,δ)-DP with COA the total expected squared
/// error is `report.objective · c(ε,δ)²` with `c` the multiplier of the
/// calibration (σ = c·Δ₂, Δ₂ = 1 for COA's strategy).
pub fn optimized_mechanism(
    optimizer: &dyn StrategyOptimizer,
    workload: dp_linalg::MatRef<'_, f64>,
    budget: dp_core::PrivacyBudget,
    observer: &mut dyn Observer,
) -> Result<(dp_core::MatrixMechanism, OptimizeReport)> {
    let privacy = if budget.delta().is_some() {
        PrivacyModel::Approx
    } else {
        PrivacyModel::Pure
    };
    let problem = Problem::from_workload(workload, privacy)?;
    let optimized = optimizer.optimize(&problem, observer)?;
    let mechanism = dp_core::MatrixMechanism::new(optimized.strategy.as_ref(), budget)?;
    Ok((mechanism, optimized.report))
}
