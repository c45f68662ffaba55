//! The plan file reader (`PlanFile`, docs/formats.md) on untrusted text:
//! arbitrary bytes and mutated valid plan files give a plan file or a
//! typed error, never a panic or a hang.
//!
//! The suite runs proptest's default number of cases; the long run is
//! `PROPTEST_CASES=100000 cargo test --release -p dp-opt --test plan_file_fuzz`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use dp_plan::plan::PlanFile;
use proptest::prelude::*;

/// A plan file as `cargo xtask plan` writes one (two terms, one with an
/// attribute left at its all-ones default).
const PLAN: &str = r#"{"version": 1, "privacy": "pure", "objective_name": "l1_obj",
 "objective": 12.5, "lower_bound": 11.0,
 "domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 3}],
 "sensitivity": 2.0,
 "terms": [
  {"weight": 1.0, "factors": {"sex": [[1, 0], [0, 1]], "age": [[1, 1, 1]]}},
  {"weight": 0.5, "factors": {"age": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]}}
 ]}"#;

fn read(text: &str) -> Result<PlanFile, serde_json::Error> {
    serde_json::from_str(text)
}

fn mutated() -> impl Strategy<Value = String> {
    dp_testkit::byte_edits(PLAN.as_bytes().to_vec(), b"0123456789-.eE{}[]\",: ", 1..6)
        .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

#[test]
fn the_valid_plan_reads_and_round_trips() {
    let plan = read(PLAN).unwrap();
    assert_eq!(plan.terms.len(), 2);
    assert_eq!(plan.terms[0].factors[0].0, "sex");
    let again = read(&serde_json::to_string(&plan).unwrap()).unwrap();
    assert_eq!(again.figures, plan.figures);
    // An attribute named twice in one term is refused, not collapsed.
    let twice = PLAN.replace(r#""age": [[1, 1, 1]]"#, r#""sex": [[1, 1]]"#);
    assert!(read(&twice).is_err());
}

proptest! {
    #[test]
    fn any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = read(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn mutated_plan_files(text in mutated()) {
        if let Ok(plan) = read(&text) {
            // Whatever parses serializes again (no value serde cannot write).
            prop_assert!(serde_json::to_string(&plan).is_ok());
        }
    }
}
