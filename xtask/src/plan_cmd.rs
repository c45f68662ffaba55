//! `cargo xtask plan` (docs/formats.md): the same library entry point as
//! `dpmm plan`, [`plan::plan_spec_to_file`], printed as JSON.
use crate::output::{PrivacyAndCalibration, print_json};
use dp_core::Result;
use dp_plan::{PlanObjective, PlanOptions, plan};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Workload spec v1 (JSON).
    #[arg(long)]
    workload: PathBuf,
    #[command(flatten)]
    privacy: PrivacyAndCalibration,
    /// Write the plan file (JSON) here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The loss: total (sum of variances) or max (worst query; (ε,δ) marginals).
    #[arg(long, default_value = "total")]
    objective: PlanObjective,
    /// The registered optimizer that solves OPT_⊗'s factors (`xtask
    /// optimize --help` lists them; default coa under approx, pidentity
    /// under pure).
    #[arg(long)]
    factor_optimizer: Option<String>,
}

pub fn run(args: &PlanArgs) -> Result<()> {
    let (budget, calibration) = (args.privacy.budget()?, args.privacy.calibration()?);
    let report = plan::plan_spec_to_file(
        &args.workload,
        budget,
        calibration,
        &PlanOptions {
            objective: args.objective,
            factor_optimizer: args
                .factor_optimizer
                .as_deref()
                .map(dp_opt::registry::descriptor)
                .transpose()?,
            ..PlanOptions::default()
        },
        args.out.as_deref(),
    )?;
    print_json(&report)
}
