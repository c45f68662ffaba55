//! Malformed workload specs given to `dpmm plan`: each is refused with one
//! line and exit status 2 (issue 18's bar), and the lines are snapshots so
//! a change of wording is a reviewed change. The `--json` report's stable
//! fields (everything but the timing) are a snapshot too.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::Path;

use common::{Run, arg, dpmm, scratch_dir};
use serde_json::Value;

/// A `rows × cols` matrix of ones as `.npy`.
fn ones_npy(path: &Path, rows: usize, cols: usize) {
    let ones = dp_linalg::Mat::from_fn(rows, cols, |_, _| 1.0);
    dp_workloads::npy::write_matrix(path, ones.as_ref()).unwrap();
}

const AB: &str = r#"[{"name": "a", "size": 3}, {"name": "b", "size": 4}]"#;

fn spec(domain: &str, queries: &str) -> String {
    format!(r#"{{"domain": {domain}, "queries": {queries}}}"#)
}

/// Two attributes named `a`.
const TWICE_A: &str = r#"[{"name": "a", "size": 3}, {"name": "a", "size": 2}]"#;
/// An attribute of size 0.
const EMPTY_A: &str = r#"[{"name": "a", "size": 0}]"#;

/// Malformed specs: (name, domain, queries), one a line.
#[rustfmt::skip]
const BAD_SPECS: &[(&str, &str, &str)] = &[
    ("unknown attribute", AB, r#"[{"kron": {"zzz": "identity"}}]"#),
    ("unknown marginal attribute", AB, r#"[{"marginal": ["a", "c"]}]"#),
    ("size mismatch", AB, r#"[{"kron": {"b": {"matrix": "ones_2x3.npy"}}}]"#),
    ("reversed range", AB, r#"[{"kron": {"a": {"ranges": [[2, 1]]}}}]"#),
    ("range outside", AB, r#"[{"kron": {"b": {"ranges": [[0, 4]]}}}]"#),
    ("negative range", AB, r#"[{"kron": {"b": {"ranges": [[-1, 2]]}}}]"#),
    ("missing npy file", AB, r#"[{"kron": {"a": {"matrix": "nope.npy"}}}]"#),
    ("duplicate names", TWICE_A, "[]"),
    ("zero size", EMPTY_A, r#"[{"kron": {}}]"#),
    ("unknown factor", AB, r#"[{"kron": {"a": "diagonal"}}]"#),
    ("bad weight", AB, r#"[{"kron": {}, "weight": -1}]"#),
    ("k too large", AB, r#"[{"marginals": {"k": 3}}]"#),
    ("no queries", AB, "[]"),
];

/// The malformed cases: (name, spec text or None for a missing file).
fn cases() -> Vec<(&'static str, Option<String>)> {
    let mut cases: Vec<_> = BAD_SPECS
        .iter()
        .map(|&(name, domain, queries)| (name, Some(spec(domain, queries))))
        .collect();
    cases.push(("not json", Some("{\"domain\": [".into())));
    cases.push(("missing spec file", None));
    cases
}

/// `dpmm plan` on the spec at `path`, writing `out`, with `more` flags.
fn plan(path: &Path, out: &Path, more: &[&str]) -> Run {
    let args = ["plan", "--workload", arg(path), "--out", arg(out)];
    dpmm(&[&args[..], more].concat())
}

/// The (ε, δ) flags of the tests' approx plans.
const APPROX: &[&str] = &["--privacy", "approx", "--epsilon", "1", "--delta", "1e-6"];

#[test]
fn every_malformed_spec_is_one_line_and_exit_2() {
    let dir = scratch_dir("bad-specs");
    ones_npy(&dir.join("ones_2x3.npy"), 2, 3);
    let mut lines = Vec::new();
    for (i, (name, text)) in cases().into_iter().enumerate() {
        let path = dir.join(format!("spec{i}.json"));
        match &text {
            Some(t) => std::fs::write(&path, t).unwrap(),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
        let out = dir.join(format!("plan{i}.json"));
        let _ = std::fs::remove_file(&out);
        let run = plan(&path, &out, APPROX);
        assert!(run.is_refusal(), "{name}: {run:?}");
        assert!(!out.exists(), "{name}: a plan file was written");
        let dir_text = format!("{}{}", dir.display(), std::path::MAIN_SEPARATOR);
        lines.push(format!(
            "{name}: {}",
            run.stderr.trim_end().replace(&dir_text, "<dir>/")
        ));
    }
    insta::assert_snapshot!(lines.join("\n"));
}

/// 70 binary attributes: 2^70 cells overflow u64, but planning needs no
/// cell index (factors and residual subsets only), so both models plan;
/// the refusal belongs where cells are indexed (measuring a histogram).
#[test]
fn a_domain_beyond_u64_plans_without_cell_indices() {
    let dir = scratch_dir("u64-domain");
    let binary: Vec<String> = (0..70)
        .map(|i| format!(r#"{{"name": "q{i}", "size": 2}}"#))
        .collect();
    let path = dir.join("spec.json");
    let queries = r#"[{"kron": {"q0": "prefix", "q69": "identity"}}, {"marginals": {"k": 1}}]"#;
    std::fs::write(&path, spec(&format!("[{}]", binary.join(", ")), queries)).unwrap();
    let out = dir.join("plan.json");
    for privacy in [
        &["pure", "--epsilon", "1"][..],
        &["approx", "--epsilon", "1", "--delta", "1e-9"],
    ] {
        let run = plan(
            &path,
            &out,
            &[&["--json", "--privacy"][..], privacy].concat(),
        );
        assert_eq!(run.code, 0, "{privacy:?}: {}", run.stderr);
        let report: Value = serde_json::from_str(&run.stdout).unwrap();
        let cells = report["cells"].as_f64().unwrap();
        assert!((cells - 2f64.powi(70)).abs() <= 1e-12 * cells, "{cells}");
        assert_eq!(report["queries"].as_f64().unwrap(), 4.0 + 140.0);
    }
}

/// Rounds every number to 6 significant digits, and to 0 below 1e-12 in
/// magnitude (a closed form's gap at rounding level): the last bits of a
/// floating-point result are not part of the contract.
fn round(v: &mut Value) {
    match v {
        Value::Number(n) => {
            if let Some(x) = n.as_f64().filter(|x| x.fract() != 0.0) {
                let x = if x.abs() < 1e-12 { 0.0 } else { x };
                *v = format!("{x:.5e}").parse::<f64>().unwrap().into();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(round),
        Value::Object(map) => map.values_mut().for_each(round),
        _ => {}
    }
}

#[test]
fn json_report_of_a_small_marginal_spec() {
    let dir = scratch_dir("json-report");
    let path = dir.join("spec.json");
    let queries = r#"[{"marginals": {"k": 1}}, {"marginal": ["a", "b"], "weight": 2}]"#;
    std::fs::write(&path, spec(AB, queries)).unwrap();
    let out = dir.join("plan.json");
    let run = plan(&path, &out, &[&["--json"][..], APPROX].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut report: Value = serde_json::from_str(&run.stdout).unwrap();
    let obj = report.as_object_mut().unwrap();
    assert!(obj.remove("seconds").unwrap().as_f64().unwrap() >= 0.0);
    assert_eq!(obj.remove("out").unwrap(), Value::from(arg(&out)));
    round(&mut report);
    insta::assert_json_snapshot!(report);
}
