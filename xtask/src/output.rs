//! Shared command-line plumbing: privacy flags and JSON output.

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};
use dp_core::{DpError, GaussianCalibration, PrivacyBudget, Result};
use dp_opt::PrivacyModel;

/// `--privacy pure|approx`: [`PrivacyModel`] as a command-line value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Privacy(pub PrivacyModel);

impl ValueEnum for Privacy {
    fn value_variants<'a>() -> &'a [Self] {
        &[Privacy(PrivacyModel::Pure), Privacy(PrivacyModel::Approx)]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self.0 {
            PrivacyModel::Pure => "ε-DP, Laplace noise, objective l1_obj",
            PrivacyModel::Approx => "(ε,δ)-DP, Gaussian noise, objective l2_obj",
        };
        Some(PossibleValue::new(self.0.name()).help(help))
    }
}

/// `--privacy`, `--epsilon`, `--delta`, `--calibration`.
#[derive(Debug, Args)]
pub struct PrivacyArgs {
    /// pure (ε-DP, Laplace) or approx ((ε,δ)-DP, Gaussian).
    #[arg(long, value_enum)]
    pub privacy: Privacy,
    /// ε (default 1).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub epsilon: f64,
    /// δ for approx (default 1e-6).
    #[arg(long, default_value_t = 1e-6, allow_negative_numbers = true)]
    pub delta: f64,
    /// Gaussian calibration: zcdp (default: what `dpmm plan` and a release
    /// use, discrete Gaussian at the ρ of the exact (ε,δ) conversion),
    /// analytic, classic, coa, projection.
    #[arg(long, default_value = "zcdp")]
    pub calibration: String,
}

impl PrivacyArgs {
    pub fn budget(&self) -> Result<PrivacyBudget> {
        match self.privacy.0 {
            PrivacyModel::Pure => PrivacyBudget::pure(self.epsilon),
            PrivacyModel::Approx => PrivacyBudget::approx(self.epsilon, self.delta),
        }
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
