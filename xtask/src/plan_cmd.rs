//! `cargo xtask plan`: a workload spec (DESIGN.md §7) → optimized
//! structured strategy; prints the report and optionally writes the plan
//! file. The logic lives in `dp_opt::multidim::plan`.

use std::path::PathBuf;

use clap::Args;
use dp_core::{DpError, Result};
use dp_opt::multidim::PlanOptions;
use dp_opt::multidim::plan::{plan_file, plan_spec};

use crate::output::{PrivacyArgs, print_json};

#[derive(Debug, Args)]
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

fn to_json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| DpError::Io(format!("cannot format output: {e}")))
}

pub fn run(args: &PlanArgs) -> Result<()> {
    let budget = args.privacy.budget()?;
    let calibration = args.privacy.calibration()?;
    let (workload, plan, report) =
        plan_spec(&args.workload, budget, calibration, &PlanOptions::default())?;
    if let Some(out) = &args.out {
        let text = serde_json::to_string(&to_json(&plan_file(&workload, &plan))?)
            .map_err(|e| DpError::Io(format!("cannot format the plan: {e}")))?;
        std::fs::write(out, text)
            .map_err(|e| DpError::Io(format!("{}: cannot write: {e}", out.display())))?;
    }
    print_json(&to_json(&report)?)
}
