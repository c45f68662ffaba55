//! `cargo xtask optimize`: optimize a strategy for a workload file.

use std::path::PathBuf;

use clap::Args;
use dp_core::Result;
use dp_opt::Params;
use dp_workloads::npy::{read_matrix, write_matrix};
use serde_json::json;

use crate::output::print_json;
use crate::report::optimize_report;
use dpmm::cli::PrivacyFlag;

#[derive(Debug, Args)]
pub struct OptimizeArgs {
    /// Workload matrix W (m×n, .npy).
    #[arg(long)]
    workload: PathBuf,
    /// The optimizer (`--help` lists every registered one).
    #[arg(long, long_help = registered_optimizers())]
    optimizer: String,
    /// pure (minimize l1_obj) or approx (minimize l2_obj).
    #[arg(long, value_enum)]
    privacy: PrivacyFlag,
    /// Write the strategy here (.npy, float64).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print JSON (the default and only format; kept for scripts).
    #[arg(long)]
    json: bool,
    /// Branching factor, for the optimizers that take one (hierarchical;
    /// default 2).
    #[arg(long)]
    branching: Option<usize>,
    /// Total time as a multiple of the optimizer's fast first stage, for
    /// the optimizers that take one (epsilon-default: a multiple of
    /// p-Identity's time, default 1.5; at least 1).
    #[arg(long)]
    effort: Option<f64>,
}

/// `--optimizer`'s long help: every registered optimizer with its
/// one-line description, from the registry.
fn registered_optimizers() -> String {
    let width = dp_opt::REGISTRY
        .iter()
        .map(|d| d.name.len())
        .max()
        .unwrap_or(0);
    let mut help = String::from("The optimizer, one of:");
    for d in dp_opt::REGISTRY {
        help += &format!("\n  {:width$}  {}", d.name, d.description);
    }
    help
}

pub fn run(args: &OptimizeArgs) -> Result<()> {
    let w = read_matrix(&args.workload)?;
    let model = args.privacy.0;
    let params = Params {
        branching: args.branching,
        effort: args.effort,
        ..Params::default()
    };
    let o = dpmm::matrix::optimize(w.as_ref(), &args.optimizer, model, &params, &mut ())?;
    if let Some(out) = &args.out {
        write_matrix(out, o.strategy.as_ref())?;
    }
    let dims = (w.nrows(), w.ncols(), o.strategy.nrows());
    let mut report = optimize_report(o.optimizer, model, dims, &o.report, &o.verified);
    if let (Some(out), Some(obj)) = (&args.out, report.as_object_mut()) {
        obj.insert("out".into(), json!(out.display().to_string()));
    }
    print_json(&report)
}
