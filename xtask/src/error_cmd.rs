//! `cargo xtask error`: evaluate a (workload, strategy) pair.

use std::path::PathBuf;

use clap::Args;
use dp_core::accuracy::evaluate_strategy;
use dp_core::{NoiseCalibration, Result};
use dp_workloads::npy::read_matrix;
use serde_json::json;

use dp_opt::PrivacyModel;

use crate::output::{PrivacyArgs, num, print_json};

#[derive(Debug, Args)]
pub struct ErrorArgs {
    /// Workload matrix W (m×n, .npy).
    #[arg(long)]
    workload: PathBuf,
    /// Strategy matrix A (p×n, .npy).
    #[arg(long)]
    strategy: PathBuf,
    #[command(flatten)]
    privacy: PrivacyArgs,
}

pub fn run(args: &ErrorArgs) -> Result<()> {
    let budget = args.privacy.budget()?;
    let calibration = args.privacy.calibration()?;
    let w = read_matrix(&args.workload)?;
    let a = read_matrix(&args.strategy)?;
    let eval = evaluate_strategy(w.as_ref(), a.as_ref())?;
    let noise = NoiseCalibration::for_strategy(a.as_ref(), budget, calibration)?;
    let supported = eval.support.supported;
    // When W leaves A's row space the least-squares answers are biased by
    // an amount that depends on the data: no expected error exists, and the
    // objective is only the variance term.
    let total = if supported {
        num(noise.variance() * eval.trace)
    } else {
        serde_json::Value::Null
    };
    let mut obj = serde_json::Map::new();
    for (k, v) in [
        ("privacy", json!(args.privacy.privacy.0.name())),
        ("n", json!(w.ncols())),
        ("m", json!(w.nrows())),
        ("p", json!(a.nrows())),
        ("epsilon", json!(args.privacy.epsilon)),
        ("supported", json!(supported)),
        ("support_residual", num(eval.support.relative_residual)),
        ("strategy_rank", json!(eval.support.strategy_rank)),
        ("trace", num(eval.trace)),
        ("expected_total_squared_error", total),
        ("noise_scale", num(noise.scale)),
    ] {
        obj.insert(k.into(), v);
    }
    match args.privacy.privacy.0 {
        PrivacyModel::Pure => {
            obj.insert("l1_obj".into(), num(eval.l1_obj()));
            obj.insert("sensitivity_l1".into(), num(eval.sensitivity_l1));
            obj.insert("noise".into(), json!("laplace"));
        }
        PrivacyModel::Approx => {
            obj.insert("l2_obj".into(), num(eval.l2_obj()));
            obj.insert("sensitivity_l2".into(), num(eval.sensitivity_l2));
            obj.insert("delta".into(), json!(args.privacy.delta));
            obj.insert("noise".into(), json!("gaussian"));
            obj.insert("calibration".into(), json!(calibration.name()));
        }
    }
    if !supported {
        obj.insert(
            "note".into(),
            json!("the strategy does not support the workload: least squares is biased by a data-dependent amount, so there is no expected error; l1_obj/l2_obj show the variance term only"),
        );
    }
    print_json(&serde_json::Value::Object(obj))
}
