//! The mechanisms of the papers' figures by their labels: the strategy
//! each one releases through.

use dp_core::Result;
use dp_linalg::Mat;
use dp_opt::{Problem, StrategyOptimizer};

/// The optimizer behind a figure's mechanism label (the papers' names, as
/// the optimizer registry records them: LM / GM noise on the data, WM the
/// Haar wavelet, HM the binary hierarchy, ESM, AM, LRM, COA); those that take
/// a wall-clock budget get `budget_seconds`. An unknown label is an error
/// listing the known ones (the registry's).
pub(crate) fn optimizer(
    label: &str,
    budget_seconds: Option<f64>,
) -> Result<Box<dyn StrategyOptimizer>> {
    let descriptor = dp_opt::registry::by_label(label)?;
    let takes_budget = descriptor
        .params
        .contains(&dp_opt::registry::Param::MaxSeconds);
    let params = dp_opt::Params {
        max_seconds: budget_seconds.filter(|_| takes_budget),
        ..dp_opt::Params::default()
    };
    descriptor.build(&params)
}

/// The strategy of mechanism `label` for `problem` (and whether its
/// optimizer converged, and its seconds, WᵀW being formed once by the
/// caller).
pub(crate) fn strategy(
    label: &str,
    problem: &Problem,
    budget_seconds: Option<f64>,
) -> Result<(Mat<f64>, bool, f64)> {
    let optimizer = optimizer(label, budget_seconds)?;
    let start = std::time::Instant::now();
    let out = optimizer.optimize(problem, &mut ())?;
    Ok((
        out.strategy,
        out.report.converged(),
        start.elapsed().as_secs_f64(),
    ))
}
