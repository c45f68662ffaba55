//! Shared command-line plumbing: privacy flags and JSON output.

use clap::{Args, ValueEnum};
use dp_core::{DpError, GaussianCalibration, PrivacyBudget, Result};

/// Which privacy model the objective refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Privacy {
    /// ε-DP, Laplace noise, objective l1_obj.
    Pure,
    /// (ε,δ)-DP, Gaussian noise, objective l2_obj.
    Approx,
}

impl Privacy {
    pub fn name(self) -> &'static str {
        match self {
            Privacy::Pure => "pure",
            Privacy::Approx => "approx",
        }
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
    /// Gaussian calibration: analytic (default), classic, coa, projection.
    #[arg(long, default_value = "analytic")]
    pub calibration: String,
}

impl PrivacyArgs {
    pub fn budget(&self) -> Result<PrivacyBudget> {
        match self.privacy {
            Privacy::Pure => PrivacyBudget::pure(self.epsilon),
            Privacy::Approx => PrivacyBudget::approx(self.epsilon, self.delta),
        }
    }

    pub fn calibration(&self) -> Result<GaussianCalibration> {
        GaussianCalibration::from_name(&self.calibration)
    }
}

/// Prints one JSON object.
pub fn print_json(value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| DpError::Io(format!("cannot format output: {e}")))?;
    println!("{text}");
    Ok(())
}

/// A finite number as JSON, `null` otherwise (JSON has no NaN).
pub fn num(x: f64) -> serde_json::Value {
    if x.is_finite() {
        serde_json::json!(x)
    } else {
        serde_json::Value::Null
    }
}

/// A dense n×n `f64` product (dp-linalg's product kernel, the current
/// rayon pool): the yardstick benchmarks and the regression gate express
/// times in, so they compare across machines as ratios.
pub struct ReferenceProduct {
    a: dp_linalg::Mat<f64>,
    c: dp_linalg::Mat<f64>,
}

impl ReferenceProduct {
    /// Operands of size n.
    pub fn new(n: usize) -> Self {
        Self {
            a: dp_linalg::Mat::from_fn(n, n, |i, j| ((i * 31 + j * 17) % 13) as f64 - 6.0),
            c: dp_linalg::Mat::zeros(n, n),
        }
    }

    /// One product `C = A·A`.
    pub fn run(&mut self) {
        dp_linalg::gemm_into(
            &mut self.c,
            self.a.as_ref(),
            self.a.as_ref(),
            dp_linalg::Par::rayon(0),
        );
    }
}
