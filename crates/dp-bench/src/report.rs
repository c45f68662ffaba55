//! The JSON reports of `cargo xtask error` and `optimize`: every figure
//! recomputed from the matrices (never taken from solver bookkeeping);
//! the command only reads the files and prints.

use dp_core::accuracy::evaluate_strategy;
use dp_core::{GaussianCalibration, NoiseCalibration, PrivacyBudget, Result};
use dp_linalg::MatRef;
use dp_opt::{OptimizeReport, PrivacyModel};
use serde_json::{Map, Value, json};

use crate::verify::VerifiedStrategy;

/// A finite number as JSON, `null` otherwise (JSON has no NaN).
pub fn num(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { Value::Null }
}

fn object(pairs: impl IntoIterator<Item = (&'static str, Value)>) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// `error`: the objective (`l1_obj` or `l2_obj`), the noise, whether `a`
/// supports `w` and, when it does, the expected total squared error.
pub fn error_report(
    w: MatRef<'_, f64>,
    a: MatRef<'_, f64>,
    budget: PrivacyBudget,
    calibration: GaussianCalibration,
) -> Result<Value> {
    let eval = evaluate_strategy(w, a)?;
    let noise = NoiseCalibration::for_strategy(a, budget, calibration)?;
    let supported = eval.support.supported;
    let model = PrivacyModel::of(budget);
    // When W leaves A's row space the least-squares answers are biased by
    // an amount that depends on the data: no expected error exists, and the
    // objective is only the variance term.
    let total = if supported {
        num(noise.variance() * eval.trace)
    } else {
        Value::Null
    };
    let mut obj = object([
        ("privacy", json!(model.name())),
        ("n", json!(w.ncols())),
        ("m", json!(w.nrows())),
        ("p", json!(a.nrows())),
        ("epsilon", json!(budget.epsilon().get())),
        ("supported", json!(supported)),
        ("support_residual", num(eval.support.relative_residual)),
        ("strategy_rank", json!(eval.support.strategy_rank)),
        ("trace", num(eval.trace)),
        ("expected_total_squared_error", total),
        ("noise_scale", num(noise.scale)),
    ]);
    obj.extend(object(match budget.delta() {
        None => vec![
            ("l1_obj", num(eval.l1_obj())),
            ("sensitivity_l1", num(eval.sensitivity_l1)),
            ("noise", json!("laplace")),
        ],
        Some(delta) => vec![
            ("l2_obj", num(eval.l2_obj())),
            ("sensitivity_l2", num(eval.sensitivity_l2)),
            ("delta", json!(delta.get())),
            ("noise", json!("gaussian")),
            ("calibration", json!(calibration.name())),
        ],
    }));
    if !supported {
        obj.insert(
            "note".into(),
            json!("the strategy does not support the workload: least squares is biased by a data-dependent amount, so there is no expected error; l1_obj/l2_obj show the variance term only"),
        );
    }
    Ok(Value::Object(obj))
}

/// `optimize`: what the optimizer returned (`p` strategy rows for an
/// `m × n` workload), with the objective and certificate recomputed by
/// [`crate::verify::verify_strategy`].
pub fn optimize_report(
    optimizer: &str,
    model: PrivacyModel,
    (m, n, p): (usize, usize, usize),
    report: &OptimizeReport,
    checked: &VerifiedStrategy,
) -> Value {
    let mut obj = object([
        ("optimizer", json!(optimizer)),
        ("privacy", json!(model.name())),
        ("n", json!(n)),
        ("m", json!(m)),
        ("p", json!(p)),
        ("seconds", num(report.seconds)),
        ("objective", num(checked.objective)),
        ("svd_bound", num(checked.svd_bound)),
        ("iterations", json!(report.iterations)),
        ("termination", json!(report.termination)),
        ("chosen", json!(report.chosen)),
        ("supported", json!(true)),
    ]);
    obj.extend(
        report
            .diagnostics
            .iter()
            .map(|(k, v)| (k.to_string(), num(*v))),
    );
    if let (Some(bound), Some(gap)) = (checked.lower_bound, checked.duality_gap) {
        obj.insert("lower_bound".into(), num(bound));
        obj.insert("duality_gap".into(), num(gap));
        if gap < 0.0 {
            obj.insert(
                "numerical_failure".into(),
                json!("the lower bound exceeds the recomputed objective"),
            );
        }
    }
    Value::Object(obj)
}
