//! The command-line flags both command lines share (`dpmm` and
//! `cargo xtask`), so that a privacy budget is stated, checked and read
//! the same way everywhere (feature `cli`, on by default).

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};
use dp_core::{DpError, PrivacyBudget, Result};
use dp_opt::PrivacyModel;

/// `--privacy pure|approx`: a [`PrivacyModel`] as a command-line value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrivacyFlag(pub PrivacyModel);

impl ValueEnum for PrivacyFlag {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            PrivacyFlag(PrivacyModel::Pure),
            PrivacyFlag(PrivacyModel::Approx),
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self.0 {
            PrivacyModel::Pure => "ε-DP: discrete Laplace noise, objective l1_obj",
            PrivacyModel::Approx => {
                "(ε,δ)-DP: discrete Gaussian noise under zCDP, objective l2_obj"
            }
        };
        Some(PossibleValue::new(self.0.name()).help(help))
    }
}

/// `--privacy`, `--epsilon`, `--delta`: the privacy of a plan, an
/// evaluation or a release. δ makes it (ε,δ)-DP, its absence pure ε-DP;
/// `--privacy` may say so too and must then agree. [`PrivacyArgs::budget`]
/// is the curator's reading (`dpmm`: ε required, no δ ever assumed);
/// [`PrivacyArgs::budget_or`] the research commands' (`cargo xtask error`
/// and `plan`, whose documented defaults are ε = 1 and, under `--privacy
/// approx`, δ = 10⁻⁶).
#[derive(Debug, Clone, Args)]
pub struct PrivacyArgs {
    /// pure (ε-DP) or approx ((ε,δ)-DP); implied by --delta when omitted.
    #[arg(long, value_enum)]
    pub privacy: Option<PrivacyFlag>,
    /// ε, in [1e-6, 100] (`dpmm` requires it).
    #[arg(long, allow_hyphen_values = true)]
    pub epsilon: Option<f64>,
    /// δ, in [1e-100, 0.5]: (ε,δ)-DP by the discrete Gaussian, charged in
    /// ρ-zCDP; refused with --privacy pure.
    #[arg(long, allow_hyphen_values = true)]
    pub delta: Option<f64>,
}

impl PrivacyArgs {
    /// The budget the flags state, validated (ranges of
    /// `dp_core::kernel`): `--epsilon` is required, `--privacy approx`
    /// needs `--delta` and `pure` refuses it
    /// ([`DpError::InvalidParameter`]).
    pub fn budget(&self) -> Result<PrivacyBudget> {
        let Some(epsilon) = self.epsilon else {
            return refuse("--epsilon is required");
        };
        if self.privacy.map(|p| p.0) == Some(PrivacyModel::Approx) && self.delta.is_none() {
            return refuse("--privacy approx needs --delta (no default δ is assumed)");
        }
        self.budget_or(epsilon, f64::NAN)
    }

    /// The same with defaults for what the flags leave out: `epsilon`, and
    /// `delta` under `--privacy approx` without `--delta`.
    pub fn budget_or(&self, epsilon: f64, delta: f64) -> Result<PrivacyBudget> {
        let epsilon = self.epsilon.unwrap_or(epsilon);
        match (self.privacy.map(|p| p.0), self.delta) {
            (Some(PrivacyModel::Pure), Some(_)) => {
                refuse("--delta applies to --privacy approx only (pure ε-DP has no δ)")
            }
            (Some(PrivacyModel::Approx), None) => PrivacyBudget::approx(epsilon, delta),
            (_, None) => PrivacyBudget::pure(epsilon),
            (_, Some(delta)) => PrivacyBudget::approx(epsilon, delta),
        }
    }
}

fn refuse<T>(reason: &str) -> Result<T> {
    Err(DpError::InvalidParameter {
        name: "privacy",
        reason: reason.into(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        privacy: PrivacyArgs,
    }

    fn budget(args: &[&str]) -> Result<PrivacyBudget> {
        let mut all = vec!["prog"];
        all.extend(args);
        Cli::try_parse_from(all).unwrap().privacy.budget()
    }

    #[test]
    fn delta_decides_and_privacy_must_agree() {
        let pure = PrivacyBudget::pure(0.5).unwrap();
        let approx = PrivacyBudget::approx(0.5, 1e-6).unwrap();
        assert_eq!(budget(&["--epsilon", "0.5"]).unwrap(), pure);
        assert_eq!(
            budget(&["--epsilon", "0.5", "--privacy", "pure"]).unwrap(),
            pure
        );
        assert_eq!(
            budget(&["--epsilon", "0.5", "--delta", "1e-6"]).unwrap(),
            approx
        );
        let both = ["--epsilon", "0.5", "--delta", "1e-6", "--privacy", "approx"];
        assert_eq!(budget(&both).unwrap(), approx);
        assert!(budget(&["--epsilon", "0.5", "--privacy", "approx"]).is_err());
        assert!(budget(&["--epsilon", "0.5", "--privacy", "pure", "--delta", "1e-6"]).is_err());
        // Out of the documented ranges: refused, never clamped.
        assert!(budget(&["--epsilon", "-1"]).is_err());
        assert!(budget(&["--epsilon", "101"]).is_err());
        assert!(budget(&["--epsilon", "1", "--delta", "0.6"]).is_err());
        assert!(budget(&["--epsilon", "NaN"]).is_err());
        assert!(budget(&[]).is_err(), "ε is required");
    }

    #[test]
    fn the_research_defaults_fill_only_what_is_missing() {
        let or = |args: &[&str]| {
            let mut all = vec!["prog"];
            all.extend(args);
            Cli::try_parse_from(all)
                .unwrap()
                .privacy
                .budget_or(1.0, 1e-6)
        };
        assert_eq!(or(&[]).unwrap(), PrivacyBudget::pure(1.0).unwrap());
        let approx = PrivacyBudget::approx(1.0, 1e-6).unwrap();
        assert_eq!(or(&["--privacy", "approx"]).unwrap(), approx);
        let given = ["--privacy", "approx", "--epsilon", "2", "--delta", "1e-9"];
        assert_eq!(
            or(&given).unwrap(),
            PrivacyBudget::approx(2.0, 1e-9).unwrap()
        );
        assert!(or(&["--privacy", "pure", "--delta", "1e-6"]).is_err());
        assert!(or(&["--epsilon", "0"]).is_err());
    }
}
