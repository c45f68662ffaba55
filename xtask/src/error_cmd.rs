//! `cargo xtask error`: evaluate a (workload, strategy) pair
//! ([`dpmm::matrix::error`]).

use std::path::PathBuf;

use clap::Args;
use dp_core::Result;
use dp_workloads::npy::read_matrix;

use crate::output::{PrivacyAndCalibration, print_json};
use crate::report::error_report;

#[derive(Debug, Args)]
pub struct ErrorArgs {
    /// Workload matrix W (m×n, .npy).
    #[arg(long)]
    workload: PathBuf,
    /// Strategy matrix A (p×n, .npy).
    #[arg(long)]
    strategy: PathBuf,
    #[command(flatten)]
    privacy: PrivacyAndCalibration,
}

pub fn run(args: &ErrorArgs) -> Result<()> {
    let budget = args.privacy.budget()?;
    let calibration = args.privacy.calibration()?;
    let w = read_matrix(&args.workload)?;
    let a = read_matrix(&args.strategy)?;
    let e = dpmm::matrix::error(w.as_ref(), a.as_ref(), budget, calibration)?;
    let dims = (w.nrows(), w.ncols(), a.nrows());
    print_json(&error_report(&e, dims, budget, calibration))
}
