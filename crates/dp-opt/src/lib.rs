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
//! use dp_opt::{Problem, PrivacyModel, StrategyOptimizer, optimizers::classic::Hierarchical};
//! use dp_workloads::workload::{AllRange, Workload};
//!
//! let w = AllRange::new(64).unwrap();
//! let problem = Problem::from_gram(w.gram(), PrivacyModel::Pure).unwrap();
//! let result = Hierarchical { branching: 2 }.optimize(&problem, &mut ()).unwrap();
//! assert!(result.report.converged());
//! assert_eq!(result.strategy.nrows(), 127);
//! ```

mod dense;
pub mod descriptor;
pub mod mechanisms;
pub mod optimizers;
mod problem;
pub mod registry;
mod report;
pub mod solvers;
pub mod support;
pub mod verify;

pub use optimizers::best_of::{BestOf, Fallback};
pub use optimizers::epsilon_default::{
    EPSILON_DEFAULT, EPSILON_DEFAULT_PIDENTITY_TOLERANCE, EpsilonDefault,
};
pub use problem::{PrivacyModel, Problem};
pub use registry::{Descriptor, Params, REGISTRY, optimizer_names};
pub use report::{
    BoundSource, CandidateReport, Certificate, Draft, Event, FnObserver, Observer, OptimizeReport,
    Optimized, Recorder, Stage,
};
pub use solvers::engine::{Budget, Executor, Solver, Termination};

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
    let privacy = PrivacyModel::of(budget);
    let problem = Problem::from_workload(workload, privacy)?;
    let optimized = optimizer.optimize(&problem, observer)?;
    let mechanism = dp_core::MatrixMechanism::new(optimized.strategy.as_ref(), budget)?;
    Ok((mechanism, optimized.report))
}
