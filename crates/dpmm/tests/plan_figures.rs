//! Issue 30 item 5: a plan file's figures are data, not truth. `dpmm
//! release --plan` reports figures recomputed from the strategy it
//! measures; a file whose figures were edited gives a sidecar whose
//! figures equal the unedited file's, or a refusal (exit 2, one line,
//! nothing written, the ledger unchanged).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::{Path, PathBuf};

use common::{SEX_AGE_MIXED_SPEC, arg, dpmm, sex_age_case};
use serde_json::Value;

/// Marginals and a prefix over age: no closed-form lower bound.
const MIXED: &str = SEX_AGE_MIXED_SPEC;

/// Marginals only: the singular value bound is a closed form.
const MARGINALS: &str = r#"{"domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 4}],
  "queries": [{"marginals": {"k": 1}, "weight": 2}, {"marginal": ["sex", "age"]}]}"#;

struct Case {
    dir: PathBuf,
    /// `--delta` for plan, ledger and release (`None`: pure ε-DP).
    delta: Option<&'static str>,
}

impl Case {
    fn new(name: &str, spec: &str, delta: Option<&'static str>) -> Self {
        let dir = sex_age_case(&format!("plan-figures-{name}"), spec);
        let case = Self { dir, delta };
        let mut init = vec!["ledger", "init", "--ledger"];
        let ledger = case.path("ledger.jsonl");
        init.extend([arg(&ledger), "--total-epsilon", "50"]);
        if let Some(d) = delta {
            init.extend(["--total-delta", d]);
        }
        assert_eq!(dpmm(&init).code, 0);
        let plan = case.path("plan.json");
        let spec = case.path("spec.json");
        let mut args = vec!["plan", "--workload", arg(&spec), "--epsilon", "1"];
        args.extend(["--out", arg(&plan)]);
        match delta {
            Some(d) => args.extend(["--privacy", "approx", "--delta", d]),
            None => args.extend(["--privacy", "pure"]),
        }
        let run = dpmm(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        case
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn plan(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.path("plan.json")).unwrap()).unwrap()
    }

    /// Releases with the plan file `plan` (written as `name.json`) and, if
    /// given, `--workload`; the sidecar, or `None` after checking that the
    /// run was a refusal that wrote and spent nothing.
    fn release(&self, name: &str, plan: &Value, workload: bool) -> Option<Value> {
        let file = self.path(&format!("{name}.json"));
        std::fs::write(&file, plan.to_string()).unwrap();
        let (ledger, out) = (self.path("ledger.jsonl"), self.path(&format!("{name}.csv")));
        let before = std::fs::read(&ledger).unwrap();
        let (schema, data) = (self.path("schema.json"), self.path("records.csv"));
        let spec = self.path("spec.json");
        let mut args = vec!["release", "--plan", arg(&file), "--schema", arg(&schema)];
        args.extend(["--data", arg(&data), "--ledger", arg(&ledger)]);
        args.extend(["--out", arg(&out), "--epsilon", "1"]);
        if let Some(d) = self.delta {
            args.extend(["--delta", d]);
        }
        if workload {
            args.extend(["--workload", arg(&spec)]);
        }
        let run = dpmm(&args);
        if run.code == 0 {
            let text = std::fs::read_to_string(format!("{}.json", out.display())).unwrap();
            return Some(serde_json::from_str(&text).unwrap());
        }
        assert!(run.is_refusal(), "{name}: {run:?}");
        assert_eq!(std::fs::read(&ledger).unwrap(), before, "{name}: spent");
        assert!(!Path::new(&out).exists(), "{name}: answers written");
        None
    }
}

/// The figures a sidecar reports about the strategy.
fn figures(side: &Value) -> (Value, Value) {
    let mut plan = side["plan"].clone();
    plan.as_object_mut().unwrap().remove("figures");
    (plan, side["groups"].clone())
}

type Edit = (&'static str, fn(&mut Value));

/// Edits of a plan file's figures (the strategy untouched).
fn edits() -> Vec<Edit> {
    vec![
        ("objective doubled", |p| {
            p["objective"] = (p["objective"].as_f64().unwrap() * 2.0).into();
        }),
        ("objective within rounding", |p| {
            p["objective"] = (p["objective"].as_f64().unwrap() * (1.0 + 1e-9)).into();
        }),
        ("gap 0.001", |p| {
            let f = p["objective"].as_f64().unwrap();
            p["lower_bound"] = (f * 0.999).into();
            p["duality_gap"] = 0.001.into();
        }),
        ("lower bound above the objective", |p| {
            p["lower_bound"] = (p["objective"].as_f64().unwrap() * 1.5).into();
        }),
        ("lower bound removed", |p| {
            p["lower_bound"] = Value::Null;
        }),
        ("sensitivity halved", |p| {
            p["sensitivity"] = (p["sensitivity"].as_f64().unwrap() / 2.0).into();
        }),
    ]
}

/// Pure and approx plans, on a workload with and without a closed-form
/// bound: the unedited plan releases with figures that are its strategy's
/// (the objective is the plan's to its tolerance and the sum of the
/// answers' variances in objective units; the marginal workload's lower
/// bound its singular value bound, below the objective); every edited
/// file releases with the same figures or is refused; a file relabelled
/// with the other privacy model is refused.
#[test]
fn edited_plan_figures_never_reach_the_sidecar() {
    for (name, spec, delta) in [
        ("pure-mixed", MIXED, None),
        ("approx-marginals", MARGINALS, Some("1e-6")),
        ("pure-marginals", MARGINALS, None),
    ] {
        let case = Case::new(name, spec, delta);
        let plan = case.plan();
        let side = case.release("unedited", &plan, false).unwrap();
        let truth = figures(&side);
        let reported = truth.0["objective"].as_f64().unwrap();
        let recorded = plan["objective"].as_f64().unwrap();
        assert!(
            (reported - recorded).abs() <= 1e-6 * recorded,
            "{name}: {reported} vs {recorded}"
        );
        check_against_answers(&case, &side, spec);
        match truth.0["lower_bound"].as_f64() {
            Some(bound) => {
                assert_eq!(spec, MARGINALS, "{name}");
                assert!(bound <= reported, "{name}");
                let gap = truth.0["duality_gap"].as_f64().unwrap();
                assert!((gap - (reported - bound) / reported).abs() <= 1e-15);
            }
            None => assert_eq!(spec, MIXED, "{name}"),
        }
        // The same plan with --workload: the same figures.
        let with_spec = case.release("with-spec", &plan, true).unwrap();
        assert_eq!(figures(&with_spec), truth, "{name}");
        for (what, edit) in edits() {
            let mut edited = plan.clone();
            edit(&mut edited);
            for workload in [false, true] {
                let label = format!("{name}: {what} (--workload {workload})");
                if let Some(side) = case.release("edited", &edited, workload) {
                    assert_eq!(figures(&side), truth, "{label}");
                } else {
                    assert!(
                        !what.contains("rounding") && !what.contains("removed"),
                        "{label}: refused"
                    );
                }
                let _ = std::fs::remove_file(case.path("edited.csv"));
                let _ = std::fs::remove_file(case.path("edited.csv.json"));
            }
        }
        let mut other = plan.clone();
        let (privacy, objective_name) = match delta {
            Some(_) => ("pure", "l1_obj"),
            None => ("approx", "l2_obj"),
        };
        other["privacy"] = privacy.into();
        other["objective_name"] = objective_name.into();
        assert!(
            case.release("relabelled", &other, false).is_none(),
            "{name}"
        );
        let _ = std::fs::remove_dir_all(&case.dir);
    }
}

/// The sidecar's objective is the answers' own: `Δ² Σ_q (w_q·se_q)² / v`
/// over the answers CSV's standard errors (weights from the spec).
fn check_against_answers(case: &Case, side: &Value, spec: &str) {
    let text = std::fs::read_to_string(case.path("unedited.csv")).unwrap();
    let errors: Vec<f64> = text
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').nth(2).unwrap().parse().unwrap())
        .collect();
    // MARGINALS weighs its 6 one-way rows by 2.
    let weight = |q: usize| if spec == MARGINALS && q < 6 { 2.0 } else { 1.0 };
    let sum: f64 = errors
        .iter()
        .enumerate()
        .map(|(q, e)| (weight(q) * e).powi(2))
        .sum();
    let v = side["noise_variance_per_row"].as_f64().unwrap();
    let sens = side["sensitivity"].as_f64().unwrap();
    let objective = side["plan"]["objective"].as_f64().unwrap();
    let from_answers = sens * sens * sum / v;
    assert!(
        (from_answers - objective).abs() <= 1e-9 * objective,
        "{from_answers} vs {objective}"
    );
}
