//! The mechanisms of the papers' figures by their labels: the strategy
//! each one releases through.

use dp_core::{DpError, Result};
use dp_linalg::Mat;
use dp_opt::{Problem, StrategyOptimizer};

/// The optimizer behind a figure's mechanism label (the papers' names):
/// LM / GM noise on the data (the identity), WM the Haar wavelet, HM the
/// binary hierarchy, ESM and LRM under the wall-clock budget
/// `budget_seconds`, AM and COA; an error for any other label.
///
/// The one place the labels are mapped, until the optimizer registry
/// carries each optimizer's paper label.
pub(crate) fn optimizer(
    label: &str,
    budget_seconds: Option<f64>,
) -> Result<Box<dyn StrategyOptimizer>> {
    use dp_opt::{am::Am, classic, coa::Coa, esm::Esm, lrm::Lrm};
    Ok(match label {
        "LM" | "GM" => Box::new(classic::Identity),
        "WM" => Box::new(classic::Wavelet),
        "HM" => Box::new(classic::Hierarchical::default()),
        "ESM" => {
            let mut esm = Esm::default();
            esm.options.spg.max_seconds = budget_seconds;
            Box::new(esm)
        }
        "AM" => Box::new(Am::default()),
        "COA" => Box::new(Coa::default()),
        // Program (4) of the COA paper: L1 columns under ε-DP, L2 columns
        // under (ε,δ)-DP (the problem's privacy model).
        "LRM" => {
            let mut lrm = Lrm::default();
            lrm.options.max_seconds = budget_seconds;
            Box::new(lrm)
        }
        other => {
            return Err(DpError::InvalidParameter {
                name: "mechanism",
                reason: format!(
                    "unknown mechanism label '{other}' (known: LM, GM, WM, HM, ESM, AM, LRM, COA)"
                ),
            });
        }
    })
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
        out.report.converged,
        start.elapsed().as_secs_f64(),
    ))
}
