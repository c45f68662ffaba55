//! Every numeric flag of `dpmm plan` on hostile values (NaN, ±inf, 0,
//! negative, subnormal, huge, not a number): exit 0 exactly when the value
//! is in the documented range, otherwise status 2 with one line — never a
//! panic, a hang or infinite noise printed as a result.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
#[path = "common/flag_values.rs"]
mod flag_values;

use common::{Run, arg, dpmm, scratch_dir};
use flag_values::{flag_value, in_range};
use proptest::prelude::*;

const SPEC: &str = r#"{"domain": [{"name": "a", "size": 3}, {"name": "b", "size": 2}],
  "queries": [{"marginal": ["a"]}, {"kron": {"a": "prefix", "b": "identity"}}]}"#;

/// `dpmm plan` on a small spec; `test` names a scratch directory of its
/// own (tests run in parallel).
fn plan(test: &str, privacy: &str, epsilon: &str, delta: Option<&str>) -> Run {
    let dir = scratch_dir(&format!("flags-{test}"));
    let spec = dir.join("spec.json");
    std::fs::write(&spec, SPEC).unwrap();
    let out = dir.join("plan.json");
    let mut args = vec!["plan", "--workload", arg(&spec), "--out", arg(&out)];
    args.extend(["--privacy", privacy, "--epsilon", epsilon]);
    if let Some(d) = delta {
        args.extend(["--delta", d]);
    }
    dpmm(&args)
}

#[test]
fn the_issue_19_bar_values_are_refused_with_one_line() {
    let cases: [(&str, &str, Option<&str>); 10] = [
        ("approx", "1e-310", Some("1e-6")),
        ("pure", "1e-310", None),
        ("approx", "0", Some("1e-6")),
        ("pure", "0", None),
        ("approx", "1", Some("1")),
        ("approx", "1", Some("0")),
        ("approx", "NaN", Some("1e-6")),
        ("pure", "inf", None),
        ("approx", "1", Some("-inf")),
        ("approx", "1", Some("NaN")),
    ];
    for (privacy, eps, delta) in cases {
        let run = plan("bar", privacy, eps, delta);
        assert!(run.is_refusal(), "{privacy} {eps} {delta:?}: {run:?}");
        assert!(run.stdout.is_empty());
        let flag = if eps == "1" { "delta" } else { "epsilon" };
        assert!(run.stderr.contains(flag), "{}", run.stderr);
    }
    // δ is required under approx and refused under pure.
    assert!(plan("bar", "approx", "1", None).is_refusal());
    assert!(plan("bar", "pure", "1", Some("1e-6")).is_refusal());
    // And a valid budget plans.
    let ok = plan("bar", "approx", "1", Some("1e-6"));
    assert_eq!(ok.code, 0, "{}", ok.stderr);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn approx_flags_succeed_exactly_in_range(eps in flag_value(), delta in flag_value()) {
        let run = plan("approx", "approx", &eps, Some(&delta));
        let valid = in_range(&eps, 1e-6, 100.0) && in_range(&delta, 1e-100, 0.5);
        if valid {
            prop_assert_eq!(run.code, 0, "{}", run.stderr);
        } else {
            prop_assert!(run.is_refusal(), "{:?} {:?}: {:?}", eps, delta, run);
        }
    }

    #[test]
    fn pure_epsilon_succeeds_exactly_in_range(eps in flag_value()) {
        let run = plan("pure", "pure", &eps, None);
        if in_range(&eps, 1e-6, 100.0) {
            prop_assert_eq!(run.code, 0, "{}", run.stderr);
        } else {
            prop_assert!(run.is_refusal(), "{:?}: {:?}", eps, run);
        }
    }
}
