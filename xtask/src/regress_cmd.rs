//! `cargo xtask regress`: the regression gate `.ci/run` runs; the cases,
//! timing and comparison are [`dp_bench::regress`].

use std::path::PathBuf;

use clap::Args;
use dp_bench::regress::{self, Baseline};
use dp_core::{DpError, Result};
use serde_json::json;

use crate::output::print_json;

/// Arguments of `cargo xtask regress`.
#[derive(Args, Debug)]
pub struct RegressArgs {
    /// Baseline file (default: xtask/regress-baseline.json in the
    /// workspace).
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Record the objectives and this processor's time ratios, with the
    /// reason, instead of comparing.
    #[arg(long, value_name = "REASON")]
    bless: Option<String>,
    /// Deliberately weaken one optimizer (to test the gate).
    #[arg(long)]
    worsen: Option<String>,
    /// Skip the time comparison (objectives only).
    #[arg(long)]
    no_time: bool,
}

pub fn run(args: &RegressArgs) -> Result<()> {
    // One thread for the reference product and the optimizers alike, so
    // that the time ratios do not depend on how many cores are free.
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()
        .map_err(|e| DpError::Io(format!("cannot configure the thread pool: {e}")))?;
    let path = args
        .baseline
        .clone()
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regress-baseline.json"));
    let worsen = args.worsen.as_deref();
    let baseline = Baseline::read(&path)?;
    if let Some(why) = &args.bless {
        regress::bless(baseline, worsen, why)?.write(&path)?;
        return print_json(&json!({ "blessed": path.display().to_string() }));
    }
    let local = regress::local_times_path();
    let outcome = regress::check(&baseline, worsen, !args.no_time, local)?;
    let failures: Vec<String> = outcome
        .regressions
        .iter()
        .map(ToString::to_string)
        .collect();
    print_json(&json!({
        "cases": outcome.cases,
        "time_gate": outcome.time_gate,
        "regressions": failures,
        "improvements": outcome.improvements,
    }))?;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(DpError::NotConverged {
            solver: "regress",
            reason: format!("{} regression(s): {}", failures.len(), failures.join("; ")),
        })
    }
}
