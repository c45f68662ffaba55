//! The workload spec reader (spec v1) on untrusted text: arbitrary bytes,
//! JSON-shaped noise and mutated valid specs give a workload or a typed
//! error, never a panic or a hang.
//!
//! The suite runs proptest's default number of cases; the long run is
//! `PROPTEST_CASES=100000 cargo test --release -p dp-workloads --test spec_fuzz`
//! (and `--test npy_fuzz` for the `.npy` reader).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use dp_workloads::spec::parse_spec;
use proptest::prelude::*;

/// Every kind of entry and factor, with a matrix file beside it.
const SPEC: &str = r#"{
  "domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 6, "column": "AGEP"},
             {"name": "race", "size": 3}],
  "queries": [
    {"kron": {"sex": "identity", "age": "prefix"}},
    {"kron": {"age": {"ranges": [[0, 2], [3, 5]]}, "race": {"matrix": "groups.npy"}}, "weight": 2.0},
    {"kron": {"age": "allrange", "race": "total"}},
    {"kron": {}},
    {"marginal": ["sex", "race"]},
    {"marginals": {"k": 2}, "weight": 0.5}
  ]
}"#;

/// A directory holding `groups.npy` (2 × 3), made once.
fn base() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("spec-fuzz");
        std::fs::create_dir_all(&dir).unwrap();
        let groups = dp_linalg::Mat::from_fn(2, 3, |i, j| f64::from(u8::from(j <= i)));
        dp_workloads::npy::write_matrix(&dir.join("groups.npy"), groups.as_ref()).unwrap();
        dir
    })
}

/// A workload or a typed error (which may quote the spec, line breaks
/// and all: the command line prints every error as one line).
fn check(text: &str) -> Result<(), TestCaseError> {
    match parse_spec(text, base()) {
        Ok(workload) => prop_assert!(!workload.domain().shape().is_empty()),
        Err(e) => prop_assert!(!e.to_string().is_empty()),
    }
    Ok(())
}

/// `SPEC` with bytes overwritten, inserted and removed (digits and
/// structure characters favoured, so numbers and nesting change).
fn mutated() -> impl Strategy<Value = String> {
    dp_testkit::byte_edits(SPEC.as_bytes().to_vec(), b"0123456789-.e{}[]\",: ", 1..6)
        .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

/// Specs built from pieces: wrong types, odd sizes, names and factors.
fn structured() -> impl Strategy<Value = String> {
    let size = prop::sample::select(vec![
        "0",
        "1",
        "2",
        "5",
        "-1",
        "1.5",
        "1e3",
        "\"3\"",
        "null",
        "18446744073709551616",
    ]);
    let factor = prop::sample::select(vec![
        "\"identity\"",
        "\"total\"",
        "\"prefix\"",
        "\"allrange\"",
        "\"nope\"",
        "{\"ranges\": [[0, 1]]}",
        "{\"ranges\": [[1, 0], [0, 9]]}",
        "{\"ranges\": []}",
        "{\"matrix\": \"groups.npy\"}",
        "{\"matrix\": \"../missing.npy\"}",
        "{\"matrix\": \"groups.npy\", \"extra\": 1}",
        "3",
        "[]",
    ]);
    let name = prop::sample::select(vec!["a", "b", "", "a b", "\\n"]);
    let entry = prop_oneof![
        (name.clone(), factor.clone(), name.clone(), factor)
            .prop_map(|(n, f, m, g)| format!("{{\"kron\": {{\"{n}\": {f}, \"{m}\": {g}}}}}")),
        (name.clone(), name.clone())
            .prop_map(|(n, m)| format!("{{\"marginal\": [\"{n}\", \"{m}\"]}}")),
        prop::sample::select(vec!["0", "1", "2", "3", "-1", "99", "\"2\""])
            .prop_map(|k| format!("{{\"marginals\": {{\"k\": {k}}}}}")),
        prop::sample::select(vec!["0", "-1", "1e308", "NaN", "\"x\"", "1"])
            .prop_map(|w| format!("{{\"kron\": {{}}, \"weight\": {w}}}")),
    ];
    (
        prop::collection::vec((name, size), 0..4),
        prop::collection::vec(entry, 0..4),
    )
        .prop_map(|(domain, queries)| {
            let domain: Vec<String> = domain
                .iter()
                .map(|(n, s)| format!("{{\"name\": \"{n}\", \"size\": {s}}}"))
                .collect();
            format!(
                "{{\"domain\": [{}], \"queries\": [{}]}}",
                domain.join(", "),
                queries.join(", ")
            )
        })
}

#[test]
fn the_valid_spec_reads() {
    let workload = parse_spec(SPEC, base()).unwrap();
    assert_eq!(workload.domain().shape(), vec![2, 6, 3]);
}

proptest! {
    #[test]
    fn any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn mutated_valid_specs(text in mutated()) {
        check(&text)?;
    }

    #[test]
    fn specs_built_from_wrong_pieces(text in structured()) {
        check(&text)?;
    }
}
