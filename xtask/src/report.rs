//! The JSON reports of `cargo xtask error` and `optimize`: every figure
//! recomputed from the matrices (never taken from solver bookkeeping);
//! the command only reads the files and prints.

use dp_core::{GaussianCalibration, PrivacyBudget};
use dp_opt::verify::VerifiedStrategy;
use dp_opt::{OptimizeReport, PrivacyModel};
use dpmm::matrix::StrategyError;
use serde_json::{Map, Value, json};

/// A finite number as JSON, `null` otherwise (JSON has no NaN).
pub fn num(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { Value::Null }
}

fn object(pairs: impl IntoIterator<Item = (&'static str, Value)>) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// `error`: the objective (`l1_obj` or `l2_obj`), the noise, whether the
/// strategy supports the workload and, when it does, the expected total
/// squared error ([`dpmm::matrix::error`]), for an `m × n` workload and
/// `p` strategy rows.
pub fn error_report(
    e: &StrategyError,
    (m, n, p): (usize, usize, usize),
    budget: PrivacyBudget,
    calibration: GaussianCalibration,
) -> Value {
    let mut obj = object([
        ("privacy", json!(e.privacy.name())),
        ("n", json!(n)),
        ("m", json!(m)),
        ("p", json!(p)),
        ("epsilon", json!(budget.epsilon().get())),
        ("supported", json!(e.supported)),
        ("support_residual", num(e.support_residual)),
        ("strategy_rank", json!(e.strategy_rank)),
        ("trace", num(e.trace)),
        (
            "expected_total_squared_error",
            e.expected_total_squared_error.map_or(Value::Null, num),
        ),
        ("noise_scale", num(e.noise_scale)),
    ]);
    obj.extend(object(match budget.delta() {
        None => vec![
            ("l1_obj", num(e.objective)),
            ("sensitivity_l1", num(e.sensitivity)),
            ("noise", json!("laplace")),
        ],
        Some(delta) => vec![
            ("l2_obj", num(e.objective)),
            ("sensitivity_l2", num(e.sensitivity)),
            ("delta", json!(delta.get())),
            ("noise", json!("gaussian")),
            ("calibration", json!(calibration.name())),
        ],
    }));
    if !e.supported {
        obj.insert(
            "note".into(),
            json!("the strategy does not support the workload: least squares is biased by a data-dependent amount, so there is no expected error; l1_obj/l2_obj show the variance term only"),
        );
    }
    Value::Object(obj)
}

/// `optimize`: what the optimizer returned (`p` strategy rows for an
/// `m × n` workload), with the objective and certificate recomputed by
/// [`dpmm::matrix::optimize`].
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
