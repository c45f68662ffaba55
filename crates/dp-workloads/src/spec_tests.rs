//! Every malformed spec gives its typed error; a well-formed one loads
//! with the documented query order.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use dp_linalg::Mat;

use super::*;

fn bits(masks: &[u128]) -> Vec<AttrSet> {
    masks.iter().map(|&m| AttrSet::from_bits(m)).collect()
}

const DOMAIN: &str =
    r#"[{"name": "sex", "size": 2}, {"name": "age", "size": 4}, {"name": "race", "size": 3}]"#;

fn with_queries(q: &str) -> String {
    format!(r#"{{"domain": {DOMAIN}, "queries": {q}}}"#)
}

fn err(text: &str) -> StructuredError {
    parse_spec(text, Path::new(".")).expect_err(text)
}

fn spec_msg(text: &str, needle: &str) {
    match err(text) {
        StructuredError::Spec(m) => assert!(m.contains(needle), "{m:?} lacks {needle:?}"),
        other => panic!("{text}: expected a spec error, got {other:?}"),
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dpmm-spec-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn well_formed_spec_loads_in_order() {
    let dir = temp_dir("ok");
    let m = Mat::from_fn(2, 3, |i, j| (i + j) as f64);
    crate::npy::write_matrix(&dir.join("race.npy"), m.as_ref()).unwrap();
    let text = with_queries(
        r#"[{"kron": {"sex": "identity", "age": "prefix"}},
            {"kron": {"age": {"ranges": [[0, 1], [2, 3]]}, "race": {"matrix": "race.npy"}}, "weight": 2.0},
            {"kron": {}},
            {"marginal": ["race", "sex"]},
            {"marginals": {"k": 2}, "weight": 0.5}]"#,
    );
    std::fs::write(dir.join("w.json"), &text).unwrap();
    let w = load_spec(&dir.join("w.json")).unwrap();
    let g = w.groups();
    assert_eq!(g.len(), 5);
    assert_eq!(g[1].weight, 2.0);
    assert_eq!(g[4].weight, 0.5);
    // sex×age identity/prefix = 8 rows; 2 ranges × 2 matrix rows; total;
    // sex×race = 6; (sex,age) 8 + (sex,race) 6 + (age,race) 12.
    let rows: Vec<f64> = g.iter().map(|q| w.group_queries(q)).collect();
    assert_eq!(rows, vec![8.0, 4.0, 1.0, 6.0, 26.0]);
    match &g[3].queries {
        Queries::Marginals(s) => assert_eq!(s, &vec![AttrSet::from_bits(0b101)]),
        q => panic!("{q:?}"),
    }
    match &g[4].queries {
        Queries::Marginals(s) => assert_eq!(s, &bits(&[0b011, 0b101, 0b110])),
        q => panic!("{q:?}"),
    }
    match &g[2].queries {
        Queries::Kron(f) => assert!(f.iter().all(Factor::is_total)),
        q => panic!("{q:?}"),
    }
    // Answers follow the stated order: the first group's first rows are
    // prefix sums of age at sex = 0, race summed out. Cell (s, a, r) is
    // 12s + 3a + r (row-major, last fastest) and holds that index.
    let x: Vec<f64> = (0..24).map(|i| i as f64).collect();
    let a = w.answer(&x).unwrap();
    assert_eq!(a.len(), 8 + 4 + 1 + 6 + 26);
    assert_eq!(
        &a[..2],
        &[0.0 + 1.0 + 2.0, (0.0 + 1.0 + 2.0) + (3.0 + 4.0 + 5.0)]
    );
    // The 5th row is sex = 1, age ≤ 0: 12 + 13 + 14.
    assert_eq!(a[4], 39.0);
    std::fs::remove_dir_all(dir).unwrap();
}

/// The inlined spec stands alone: parsed where no matrix file exists it is
/// the same workload (labels, weights, every query of the dense matrix);
/// the file's rows are inline, an inline or named factor is the user's
/// text unchanged.
#[test]
fn an_inlined_spec_is_the_same_workload_without_its_files() {
    let dir = temp_dir("inline");
    let m = Mat::from_fn(2, 3, |i, j| (1 + i * 3 + j) as f64 / 4.0);
    crate::npy::write_matrix(&dir.join("race.npy"), m.as_ref()).unwrap();
    let text = with_queries(
        r#"[{"kron": {"age": {"ranges": [[0, 1], [2, 3]]}, "race": {"matrix": "race.npy"}}, "weight": 2.0},
            {"kron": {"sex": {"matrix": [[1, 0], [1, 1]]}, "race": "total"}},
            {"marginals": {"k": 2}, "weight": 0.5}]"#,
    );
    std::fs::write(dir.join("w.json"), &text).unwrap();
    let (w, inlined) = load_spec_inlined(&dir.join("w.json")).unwrap();
    let rows = &inlined["queries"][0]["kron"]["race"]["matrix"];
    assert_eq!(
        rows,
        &serde_json::json!([[0.25, 0.5, 0.75], [1.0, 1.25, 1.5]])
    );
    let original: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(inlined["queries"][1], original["queries"][1]);
    assert_eq!(inlined["queries"][2], original["queries"][2]);
    assert_eq!(inlined["domain"], original["domain"]);
    let elsewhere = temp_dir("inline-elsewhere");
    let alone = parse_spec(&inlined.to_string(), &elsewhere).unwrap();
    let from_file = load_spec(&dir.join("w.json")).unwrap();
    // The text form with its base directory inlines the same rows.
    let (from_text, inlined_text) = parse_spec_inlined(&text, &dir).unwrap();
    assert_eq!(inlined_text, inlined);
    for other in [&alone, &from_file, &from_text] {
        let labels = |w: &StructuredWorkload| -> Vec<(String, f64)> {
            w.groups()
                .iter()
                .map(|g| (g.label.clone(), g.weight))
                .collect()
        };
        assert_eq!(labels(other), labels(&w));
        assert_eq!(other.dense_matrix().unwrap(), w.dense_matrix().unwrap());
    }
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::remove_dir_all(elsewhere).unwrap();
}

#[test]
fn k_subsets_lexicographic() {
    assert_eq!(
        k_subsets(4, 2).unwrap(),
        bits(&[0b0011, 0b0101, 0b1001, 0b0110, 0b1010, 0b1100])
    );
    assert_eq!(k_subsets(3, 0).unwrap(), bits(&[0]));
    assert_eq!(k_subsets(3, 3).unwrap(), bits(&[0b111]));
    assert_eq!(k_subsets(100, 3).unwrap().len(), 161_700);
    assert!(k_subsets(100, 50).is_err());
}

#[test]
fn malformed_top_level() {
    spec_msg("{", "not valid JSON");
    spec_msg("[]", "expected an object");
    spec_msg(&format!(r#"{{"domain": {DOMAIN}}}"#), "missing 'queries'");
    spec_msg(r#"{"queries": []}"#, "missing 'domain'");
    spec_msg(
        &format!(r#"{{"domain": {DOMAIN}, "queries": [], "x": 1}}"#),
        "unknown key 'x'",
    );
    spec_msg(&with_queries("[]"), "is empty");
    spec_msg(&with_queries("{}"), "expected an array");
}

#[test]
fn malformed_domain() {
    let q = r#""queries": [{"kron": {}}]"#;
    assert_eq!(
        err(&format!(r#"{{"domain": [], {q}}}"#)),
        StructuredError::EmptyDomain
    );
    assert_eq!(
        err(&format!(
            r#"{{"domain": [{{"name": "a", "size": 2}}, {{"name": "a", "size": 3}}], {q}}}"#
        )),
        StructuredError::DuplicateAttribute("a".into())
    );
    assert_eq!(
        err(&format!(
            r#"{{"domain": [{{"name": "a", "size": 0}}], {q}}}"#
        )),
        StructuredError::ZeroSize("a".into())
    );
    spec_msg(
        &format!(r#"{{"domain": [{{"name": "a", "size": -2}}], {q}}}"#),
        "'size'",
    );
    spec_msg(
        &format!(r#"{{"domain": [{{"name": "a", "size": 2.5}}], {q}}}"#),
        "'size'",
    );
    spec_msg(
        &format!(r#"{{"domain": [{{"name": "a"}}], {q}}}"#),
        "'size'",
    );
    spec_msg(&format!(r#"{{"domain": [{{"size": 2}}], {q}}}"#), "'name'");
    spec_msg(
        &format!(r#"{{"domain": [{{"name": "a", "size": 2, "sise": 3}}], {q}}}"#),
        "unknown key 'sise'",
    );
    spec_msg(
        &format!(r#"{{"domain": {{"a": 2}}, {q}}}"#),
        "expected an array",
    );
}

#[test]
fn malformed_queries() {
    // Each malformed query list and the words its error must contain.
    for (queries, message) in [
        ("[3]", "expected an object"),
        (r#"[{"weight": 2}]"#, "exactly one of"),
        (r#"[{"kron": {}, "marginal": []}]"#, "exactly one of"),
        (r#"[{"range": {}}]"#, "unknown query kind 'range'"),
        (
            r#"[{"kron": {"age": "identiy"}}]"#,
            "unknown factor 'identiy'",
        ),
        (r#"[{"kron": {"age": 3}}]"#, "expected a factor name"),
        (r#"[{"kron": ["age"]}]"#, "expected an object"),
        (
            r#"[{"kron": {"age": {"ranges": []}}}]"#,
            "'ranges' is empty",
        ),
        (
            r#"[{"kron": {"age": {"ranges": [[1]]}}}]"#,
            "must be [lo, hi]",
        ),
        (
            r#"[{"kron": {"age": {"ranges": [[0, 1.5]]}}}]"#,
            "two integers",
        ),
        (
            r#"[{"kron": {"age": {"steps": 1}}}]"#,
            "expected {\"ranges\"",
        ),
        (r#"[{"marginal": ["sex", "sex"]}]"#, "listed twice"),
        (r#"[{"marginal": "sex"}]"#, "expected an array"),
        (r#"[{"marginals": {"k": -1}}]"#, "'k'"),
        (r#"[{"marginals": 2}]"#, "expected {\"k\""),
    ] {
        spec_msg(&with_queries(queries), message);
    }
    assert_eq!(
        err(&with_queries(r#"[{"kron": {"height": "identity"}}]"#)),
        StructuredError::UnknownAttribute("height".into())
    );
    for bad in ["[[2, 4]]", "[[3, 1]]", "[[-1, 0]]"] {
        let e = err(&with_queries(&format!(
            r#"[{{"kron": {{"age": {{"ranges": {bad}}}}}}}]"#
        )));
        assert!(
            matches!(e, StructuredError::BadRange { size: 4, .. }),
            "{e:?}"
        );
    }
    assert_eq!(
        err(&with_queries(r#"[{"marginal": ["sex", "height"]}]"#)),
        StructuredError::UnknownAttribute("height".into())
    );
    assert_eq!(
        err(&with_queries(r#"[{"marginals": {"k": 4}}]"#)),
        StructuredError::BadK { k: 4, d: 3 }
    );
}

#[test]
fn malformed_weights() {
    for w in ["-1", "0", "0.0"] {
        let e = err(&with_queries(&format!(
            r#"[{{"kron": {{}}, "weight": {w}}}]"#
        )));
        assert!(matches!(e, StructuredError::BadWeight(_)), "{e:?}");
    }
    spec_msg(
        &with_queries(r#"[{"kron": {}, "weight": "2"}]"#),
        "'weight' must be a number",
    );
    // JSON has no NaN literal: it is refused by the parser.
    spec_msg(
        &with_queries(r#"[{"kron": {}, "weight": NaN}]"#),
        "not valid JSON",
    );
    spec_msg(
        &with_queries(r#"[{"kron": {}, "weight": 1e999}]"#),
        "not valid JSON",
    );
}

#[test]
fn matrix_files() {
    let dir = temp_dir("mat");
    let text = with_queries(r#"[{"kron": {"race": {"matrix": "missing.npy"}}}]"#);
    assert!(matches!(
        parse_spec(&text, &dir),
        Err(StructuredError::File { .. })
    ));
    crate::npy::write_matrix(
        &dir.join("wide.npy"),
        Mat::from_fn(2, 5, |_, _| 1.0).as_ref(),
    )
    .unwrap();
    let text = with_queries(r#"[{"kron": {"race": {"matrix": "wide.npy"}}}]"#);
    assert_eq!(
        parse_spec(&text, &dir).unwrap_err(),
        StructuredError::SizeMismatch {
            attribute: "race".into(),
            expected: 3,
            found: 5
        }
    );
    crate::npy::write_matrix(&dir.join("zero.npy"), Mat::<f64>::zeros(2, 3).as_ref()).unwrap();
    let text = with_queries(r#"[{"kron": {"race": {"matrix": "zero.npy"}}}]"#);
    assert!(
        matches!(parse_spec(&text, &dir), Err(StructuredError::Spec(m)) if m.contains("all zero"))
    );
    // Rows inline read as the same matrix as its file.
    let rows = [[1.0, 0.0, 2.5], [0.0, -1.0, 1.0]];
    crate::npy::write_matrix(
        &dir.join("two.npy"),
        Mat::from_fn(2, 3, |i, j| rows[i][j]).as_ref(),
    )
    .unwrap();
    let from_file = with_queries(r#"[{"kron": {"race": {"matrix": "two.npy"}}}]"#);
    let inline = with_queries(r#"[{"kron": {"race": {"matrix": [[1, 0, 2.5], [0, -1, 1]]}}}]"#);
    let (a, b) = (parse_spec(&from_file, &dir), parse_spec(&inline, &dir));
    assert_eq!(format!("{:?}", a.unwrap()), format!("{:?}", b.unwrap()));
    for bad in ["3", "[[1, 0, 1], [1, 0]]", "[[1, 0, \"x\"]]", "[1, 0, 1]"] {
        let text = with_queries(&format!(r#"[{{"kron": {{"race": {{"matrix": {bad}}}}}}}]"#));
        assert!(
            matches!(parse_spec(&text, &dir), Err(StructuredError::Spec(_))),
            "{bad}"
        );
    }
    assert!(matches!(
        load_spec(&dir.join("nope.json")),
        Err(StructuredError::File { .. })
    ));
    std::fs::remove_dir_all(dir).unwrap();
}
