//! Every numeric flag of `cargo xtask error|optimize|plan` on hostile
//! values (NaN, ±inf, 0, negative, subnormal, huge, not a number): exit 0
//! exactly when the value is valid, otherwise status 2 with one line
//! `error: …` — never a panic (status 70) or a hang.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
#[path = "../../crates/dpmm/tests/common/flag_values.rs"]
mod flag_values;

use common::{Run, arg, f64_matrix, tmpdir, xtask};
use flag_values::{flag_value, in_range};
use proptest::prelude::*;

fn refused(run: &Run) -> bool {
    run.code == 2 && run.stderr.lines().count() == 1 && run.stderr.starts_with("error: ")
}

struct Files {
    w: std::path::PathBuf,
    a: std::path::PathBuf,
    spec: std::path::PathBuf,
}

/// The inputs, in a directory of `test`'s own (tests run in parallel).
fn files(test: &str) -> Files {
    let dir = tmpdir(&format!("flags-{test}"));
    let (w, a, spec) = (dir.join("w.npy"), dir.join("a.npy"), dir.join("spec.json"));
    f64_matrix(&w, &[&[1., 0., 0.], &[1., 1., 0.], &[1., 1., 1.]], false);
    f64_matrix(&a, &[&[1., 0., 0.], &[0., 1., 0.], &[0., 0., 1.]], false);
    let text = r#"{"domain": [{"name": "a", "size": 3}], "queries": [{"kron": {"a": "prefix"}}]}"#;
    std::fs::write(&spec, text).unwrap();
    Files { w, a, spec }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn error_and_plan_budget_flags(eps in flag_value(), delta in flag_value()) {
        let f = files("budget");
        let valid = in_range(&eps, 1e-6, 100.0) && in_range(&delta, 1e-100, 0.5);
        let budget = ["--privacy", "approx", "--epsilon", &eps, "--delta", &delta];
        let runs = [
            xtask(&[&["error", "--workload", arg(&f.w), "--strategy", arg(&f.a)][..], &budget].concat()),
            xtask(&[&["plan", "--workload", arg(&f.spec)][..], &budget].concat()),
        ];
        for run in runs {
            if valid {
                prop_assert_eq!(run.code, 0, "{}", run.stderr);
            } else {
                prop_assert!(refused(&run), "{:?} {:?}: {} {}", eps, delta, run.code, run.stderr);
            }
        }
    }

    #[test]
    fn optimize_branching_flag(branching in prop_oneof![
        flag_value(),
        (0u64..6).prop_map(|b| b.to_string()),
        Just("18446744073709551616".to_string()),
    ]) {
        let f = files("branching");
        let args = ["optimize", "--workload", arg(&f.w), "--optimizer", "hierarchical",
            "--privacy", "pure", "--branching", &branching];
        let run = xtask(&args);
        if branching.parse::<usize>().is_ok_and(|b| b >= 2) {
            prop_assert_eq!(run.code, 0, "{}", run.stderr);
        } else {
            prop_assert!(refused(&run), "{:?}: {} {}", branching, run.code, run.stderr);
        }
    }

    /// `--effort` (epsilon-default's total time as a multiple of
    /// p-Identity's): any finite number at least 1 runs; anything else is
    /// refused, as is an effort given to an optimizer that takes none.
    #[test]
    fn optimize_effort_flag(effort in flag_value()) {
        let f = files("effort");
        let run = |optimizer: &str| xtask(&["optimize", "--workload", arg(&f.w), "--optimizer",
            optimizer, "--privacy", "pure", "--effort", &effort]);
        let default = run("epsilon-default");
        if in_range(&effort, 1.0, f64::MAX) {
            prop_assert_eq!(default.code, 0, "{}", default.stderr);
        } else {
            prop_assert!(refused(&default), "{:?}: {} {}", effort, default.code, default.stderr);
        }
        let other = run("identity");
        prop_assert!(refused(&other), "{:?}: {} {}", effort, other.code, other.stderr);
    }
}
