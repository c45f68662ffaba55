//! (ε, δ) over the documented ranges (ε in [1e-6, 100], δ in [1e-100,
//! 0.5]) through the binary: a ledger, a plan and a release on the
//! embedded census extract at the corners and at the points once reported
//! to fail, and one line with exit status 2 just outside. The whole grid
//! is tested at the library level (`dp_core::kernel::accounting`).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::Path;

use common::{Run, arg, dpmm, remove_ledger, scratch_dir};

/// The corners of the ranges and the reported failures (80, 1e-4),
/// (100, 1e-4), (50, 0.5).
const POINTS: [(&str, &str); 7] = [
    ("1e-6", "1e-100"),
    ("1e-6", "0.5"),
    ("100", "1e-100"),
    ("100", "0.5"),
    ("80", "1e-4"),
    ("100", "1e-4"),
    ("50", "0.5"),
];

fn fertility(p: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.join(p).to_str().unwrap().to_string()
}

/// `dpmm ledger init` of an (ε, δ) ledger at `ledger`.
fn ledger_init(ledger: &Path, eps: &str, delta: &str) -> Run {
    dpmm(&[
        "ledger",
        "init",
        "--ledger",
        arg(ledger),
        "--total-epsilon",
        eps,
        "--total-delta",
        delta,
    ])
}

/// `dpmm plan` of `spec` under (ε, δ) into `plan`, with `extra` flags.
fn plan_approx(spec: &str, eps: &str, delta: &str, plan: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "plan",
        "--workload",
        spec,
        "--privacy",
        "approx",
        "--epsilon",
        eps,
        "--delta",
        delta,
        "--out",
    ];
    args.push(arg(plan));
    args.extend(extra);
    dpmm(&args)
}

#[test]
fn ledger_plan_and_release_work_across_the_documented_ranges() {
    let dir = scratch_dir("privacy-ranges");
    let (data, schema, spec) = (
        fertility("datasets/fertility1980.csv.gz"),
        fertility("examples/fertility1980/schema.json"),
        fertility("examples/fertility1980/spec.json"),
    );
    for (k, (eps, delta)) in POINTS.iter().enumerate() {
        let ledger = dir.join(format!("ledger-{k}.jsonl"));
        remove_ledger(&ledger);
        let run = ledger_init(&ledger, eps, delta);
        assert_eq!(run.code, 0, "ledger ({eps}, {delta}): {}", run.stderr);
        let plan = dir.join(format!("plan-{k}.json"));
        let run = plan_approx(&spec, eps, delta, &plan, &["--json"]);
        assert_eq!(run.code, 0, "plan ({eps}, {delta}): {}", run.stderr);
        let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let scale = report["noise_scale"].as_f64().unwrap();
        assert!(
            scale.is_finite() && scale > 0.0,
            "({eps}, {delta}): {scale}"
        );
        // The whole budget in one release: the charge equals the total.
        let answers = dir.join(format!("answers-{k}.csv"));
        let run = dpmm(&[
            "release",
            "--data",
            &data,
            "--schema",
            &schema,
            "--plan",
            arg(&plan),
            "--epsilon",
            eps,
            "--delta",
            delta,
            "--ledger",
            arg(&ledger),
            "--out",
            arg(&answers),
        ]);
        assert_eq!(run.code, 0, "release ({eps}, {delta}): {}", run.stderr);
        assert!(answers.exists());
    }
}

#[test]
fn just_outside_the_ranges_is_one_line_and_exit_2() {
    let dir = scratch_dir("privacy-ranges-outside");
    let spec = fertility("examples/fertility1980/spec.json");
    for (eps, delta) in [
        ("1e-7", "1e-6"),
        ("100.5", "1e-6"),
        ("1", "0.6"),
        ("1", "1e-101"),
    ] {
        let ledger = dir.join("ledger.jsonl");
        remove_ledger(&ledger);
        let run = ledger_init(&ledger, eps, delta);
        assert!(run.is_refusal(), "ledger ({eps}, {delta}): {run:?}");
        assert!(!ledger.exists());
        let plan = dir.join("plan.json");
        let run = plan_approx(&spec, eps, delta, &plan, &[]);
        assert!(run.is_refusal(), "plan ({eps}, {delta}): {run:?}");
    }
}
