//! Shared command-line plumbing: privacy flags and JSON output.

use clap::Args;
use dp_core::{DpError, GaussianCalibration, PrivacyBudget, Result};

/// `--privacy`, `--epsilon`, `--delta` (the flags `dpmm` states a budget
/// with, [`dpmm::cli::PrivacyArgs`]) and `--calibration`.
#[derive(Debug, Args)]
pub struct PrivacyAndCalibration {
    #[command(flatten)]
    pub budget: dpmm::cli::PrivacyArgs,
    /// Gaussian calibration: zcdp (default: what `dpmm plan` and a release
    /// use, discrete Gaussian at the ρ of the exact (ε,δ) conversion),
    /// analytic, classic, coa, projection.
    #[arg(long, default_value = "zcdp")]
    pub calibration: String,
}

impl PrivacyAndCalibration {
    /// The budget, ε = 1 and (under `--privacy approx`) δ = 10⁻⁶ where
    /// the flags leave them out (docs/commands.md).
    pub fn budget(&self) -> Result<PrivacyBudget> {
        self.budget.budget_or(1.0, 1e-6)
    }

    pub fn calibration(&self) -> Result<GaussianCalibration> {
        GaussianCalibration::from_name(&self.calibration)
    }
}

/// Prints one JSON object (any serializable report).
pub fn print_json(value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| DpError::Io(format!("cannot format output: {e}")))?;
    println!("{text}");
    Ok(())
}
