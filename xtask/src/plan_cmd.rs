//! `cargo xtask plan` (DESIGN.md §7): the same library entry point as
//! `dpmm plan`, [`plan::plan_spec_to_file`], printed as JSON.
use crate::output::{PrivacyArgs, print_json};
use dp_core::{DpError, Result};
use dp_opt::multidim::{PlanObjective, PlanOptions, plan};
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
    /// The loss: total (sum of variances) or max (worst query; (ε,δ) marginals).
    #[arg(long, default_value = "total")]
    objective: PlanObjective,
}

pub fn run(args: &PlanArgs) -> Result<()> {
    let (budget, calibration) = (args.privacy.budget()?, args.privacy.calibration()?);
    let mut options = PlanOptions::default();
    options.objective = args.objective;
    let report = plan::plan_spec_to_file(
        &args.workload,
        budget,
        calibration,
        &options,
        args.out.as_deref(),
    )?;
    let value = serde_json::to_value(&report)
        .map_err(|e| DpError::Io(format!("cannot format output: {e}")))?;
    print_json(&value)
}
