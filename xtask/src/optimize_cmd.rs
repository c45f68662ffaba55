//! `cargo xtask optimize`: optimize a strategy for a workload file.

use std::path::PathBuf;

use clap::Args;
use dp_bench::verify::verify_strategy;
use dp_core::Result;
use dp_opt::{Problem, StrategyOptimizer, by_name, classic::Hierarchical};
use dp_workloads::npy::{read_matrix, write_matrix};
use serde_json::json;

use crate::output::{Privacy, num, print_json};

#[derive(Debug, Args)]
pub struct OptimizeArgs {
    /// Workload matrix W (m×n, .npy).
    #[arg(long)]
    workload: PathBuf,
    /// identity, hierarchical, wavelet, svdb (see `dp_opt::OPTIMIZER_NAMES`).
    #[arg(long)]
    optimizer: String,
    /// pure (minimize l1_obj) or approx (minimize l2_obj).
    #[arg(long, value_enum)]
    privacy: Privacy,
    /// Write the strategy here (.npy, float64).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print JSON (the default and only format; kept for scripts).
    #[arg(long)]
    json: bool,
    /// Branching factor of the hierarchical strategy.
    #[arg(long, default_value_t = 2)]
    branching: usize,
}

pub fn run(args: &OptimizeArgs) -> Result<()> {
    let w = read_matrix(&args.workload)?;
    let model = args.privacy.0;
    let optimizer: Box<dyn StrategyOptimizer> = if args.optimizer == "hierarchical" {
        Box::new(Hierarchical {
            branching: args.branching,
        })
    } else {
        by_name(&args.optimizer)?
    };
    let problem = Problem::from_workload(w.as_ref(), model)?;
    let result = optimizer.optimize(&problem, &mut ())?;
    // The objective and gap printed are recomputed from the strategy and
    // the explicit workload, never taken from solver bookkeeping.
    let checked = verify_strategy(
        w.as_ref(),
        result.strategy.as_ref(),
        model,
        result.report.certificate,
    )?;
    if let Some(out) = &args.out {
        write_matrix(out, result.strategy.as_ref())?;
    }
    let report = &result.report;
    let mut obj = serde_json::Map::new();
    for (k, v) in [
        ("optimizer", json!(optimizer.name())),
        ("privacy", json!(model.name())),
        ("n", json!(w.ncols())),
        ("m", json!(w.nrows())),
        ("p", json!(result.strategy.nrows())),
        ("seconds", num(report.seconds)),
        ("objective", num(checked.objective)),
        ("svd_bound", num(checked.svd_bound)),
        ("iterations", json!(report.iterations)),
        ("converged", json!(report.converged)),
        ("termination", json!(format!("{:?}", report.termination))),
        ("supported", json!(true)),
    ] {
        obj.insert(k.into(), v);
    }
    for (k, v) in &report.diagnostics {
        obj.insert((*k).into(), num(*v));
    }
    if let (Some(bound), Some(gap)) = (checked.lower_bound, checked.duality_gap) {
        obj.insert("lower_bound".into(), num(bound));
        obj.insert("duality_gap".into(), num(gap));
    }
    if let Some(out) = &args.out {
        obj.insert("out".into(), json!(out.display().to_string()));
    }
    print_json(&serde_json::Value::Object(obj))
}
