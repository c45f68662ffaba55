//! `cargo xtask plan` (DESIGN.md §7); the logic is `dp_opt::multidim::plan`.
use crate::output::{PrivacyArgs, print_json};
use dp_core::{DpError, Result};
use dp_opt::multidim::{PlanOptions, plan};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Workload spec v1 (JSON).
    #[arg(long)]
    workload: PathBuf,
    #[command(flatten)]
    privacy: PrivacyArgs,
    /// Write the plan file (JSON) here.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: &PlanArgs) -> Result<()> {
    let (budget, calibration) = (args.privacy.budget()?, args.privacy.calibration()?);
    let (w, p, report) =
        plan::plan_spec(&args.workload, budget, calibration, &PlanOptions::default())?;
    let io = |e: &dyn std::fmt::Display| DpError::Io(format!("cannot write output: {e}"));
    if let Some(out) = &args.out {
        let text = serde_json::to_string(&plan::plan_file(&w, &p)).map_err(|e| io(&e))?;
        std::fs::write(out, text).map_err(|e| io(&e))?;
    }
    print_json(&serde_json::to_value(&report).map_err(|e| io(&e))?)
}
