//! Issue 30's bar for the records reader, through `dpmm release` as a
//! curator runs it: two record files that differ by one arbitrary line,
//! each released at ε = 50 with its own fresh ledger, give answers that
//! differ by less than 5 everywhere.
//!
//! At ε = 50 the noise is small (a standard error well below 1 here), so a
//! difference of 5 means the one line moved counts by several records:
//! the open-quote attack did (one line `x,"p` swallowed every line up to
//! the next quote, ~900 records here).

mod common;

use std::path::PathBuf;

use common::dpmm;

/// Every policy left to its default (drop).
const SCHEMA: &str = r#"{"domain": [
  {"name": "sex", "column": "sex", "values": ["f", "m"]},
  {"name": "age", "column": "age", "bins": {"start": 20, "stop": 60, "width": 10}},
  {"name": "region", "column": "region", "values": ["n", "s", "e", "w"]}
]}"#;

const SPEC: &str = r#"{"domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 4},
  {"name": "region", "size": 4}],
  "queries": [{"marginals": {"k": 1}}, {"marginals": {"k": 2}}]}"#;

/// 2 + 4 + 4 one-way and 8 + 8 + 16 two-way counts.
const QUERIES: usize = 42;

const RECORDS: usize = 1000;

/// The base file: `RECORDS` lines after the header, the one at 900
/// holding quoted fields (the first quote an open quote would reach).
fn base_lines() -> Vec<Vec<u8>> {
    let mut lines = vec![b"id,sex,age,region".to_vec()];
    for i in 0..RECORDS {
        let sex = ["f", "m"][i % 2];
        let age = 20 + (i * 7) % 40;
        let region = ["n", "s", "e", "w"][i % 4];
        let line = if i == 900 {
            format!("{i},\"{sex}\",{age},\"{region}\"")
        } else {
            format!("{i},{sex},{age},{region}")
        };
        lines.push(line.into_bytes());
    }
    lines
}

fn join(lines: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
}

/// Releases `records` at ε = 50 with a fresh ledger in its own directory;
/// the answers in workload order.
fn release(name: &str, records: &[u8]) -> Vec<f64> {
    release_with(name, records, &[])
}

/// [`release`] with more arguments for `dpmm release`.
fn release_with(name: &str, records: &[u8], extra: &[&str]) -> Vec<f64> {
    let dir = std::env::temp_dir().join(format!("dpmm-stability-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = |file: &str| -> PathBuf { dir.join(file) };
    std::fs::write(path("schema.json"), SCHEMA).expect("write");
    std::fs::write(path("spec.json"), SPEC).expect("write");
    std::fs::write(path("records.csv"), records).expect("write");
    let s = |file: &str| path(file).to_str().expect("utf-8").to_string();
    let init = dpmm(&[
        "ledger",
        "init",
        "--ledger",
        &s("ledger.jsonl"),
        "--total-epsilon",
        "50",
    ]);
    assert!(init.code == 0, "{}", init.stderr);
    let files: Vec<String> = [
        "records.csv",
        "schema.json",
        "spec.json",
        "ledger.jsonl",
        "answers.csv",
    ]
    .iter()
    .map(|f| s(f))
    .collect();
    let mut args = vec![
        "release",
        "--data",
        &files[0],
        "--schema",
        &files[1],
        "--workload",
        &files[2],
        "--epsilon",
        "50",
        "--ledger",
        &files[3],
        "--out",
        &files[4],
    ];
    args.extend_from_slice(extra);
    let out = dpmm(&args);
    assert!(out.code == 0, "{name}: {}", out.stderr);
    let text = std::fs::read_to_string(path("answers.csv")).expect("answers");
    let _ = std::fs::remove_dir_all(&dir);
    let answers: Vec<f64> = text
        .lines()
        .skip(1)
        .map(|row| {
            // query, answer, std_error, ci_low, ci_high: the answer is the
            // fourth field from the end (the query may hold commas).
            let fields: Vec<&str> = row.rsplitn(5, ',').collect();
            fields[3].parse().expect("a number")
        })
        .collect();
    assert_eq!(answers.len(), QUERIES, "{name}");
    answers
}

#[test]
fn files_one_line_apart_give_answers_less_than_five_apart() {
    let base = base_lines();
    let reference = release("base", &join(&base));
    // The sex one-way counts are 500 each: the release is of this file.
    assert!((reference[0] - 500.0).abs() < 5.0, "{}", reference[0]);
    let inserted: [(&str, usize, &[u8]); 8] = [
        ("open quote", 1, b"x,\"p"),
        ("open quote in a record", 2, b"1,f,30,\"n"),
        ("valid record", 500, b"7,m,25,e"),
        ("not UTF-8", 3, b"9,f,\xff\xfe,n"),
        ("carriage returns", 10, b"9,f,\r30,\rn\r"),
        ("extra field", 20, b"9,f,30,n,extra"),
        ("quote after text", 30, b"9,f\"\",30,n"),
        ("last line, unterminated quote", RECORDS + 1, b"\"9,f,30,n"),
    ];
    for (name, at, line) in inserted {
        let mut lines = base.clone();
        lines.insert(at, line.to_vec());
        let answers = release(name, &join(&lines));
        let worst = largest_move(&reference, &answers);
        assert!(worst < 5.0, "{name}: an answer moved by {worst}");
    }
    // One line removed.
    let mut removed = base.clone();
    removed.remove(400);
    let answers = release("removed", &join(&removed));
    let worst = largest_move(&reference, &answers);
    assert!(worst < 5.0, "removed: an answer moved by {worst}");
}

/// The largest change of an answer between two releases.
fn largest_move(before: &[f64], after: &[f64]) -> f64 {
    assert_eq!(before.len(), after.len());
    before
        .iter()
        .zip(after)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
}

/// Issue 49's bar: with `--privacy-unit id --max-records-per-unit K`, one
/// person added with 50 records moves every answer by less than K + 5 at
/// ε = 50 (the kernel keeps K of them); without a unit the same person
/// moves a count by 50.
#[test]
fn one_person_added_with_fifty_records_moves_answers_by_less_than_k_plus_five() {
    let base = base_lines();
    let mut added = base.clone();
    for i in 0..50 {
        // One cell for all 50: the largest move they can make.
        added.push(format!("person,f,{},n", 20 + i % 3).into_bytes());
    }
    for k in ["1", "3"] {
        let unit = ["--privacy-unit", "id", "--max-records-per-unit", k];
        let reference = release_with(&format!("unit-{k}"), &join(&base), &unit);
        let answers = release_with(&format!("unit-{k}-added"), &join(&added), &unit);
        let worst = largest_move(&reference, &answers);
        let bound: f64 = k.parse::<f64>().unwrap_or(0.0) + 5.0;
        assert!(worst < bound, "K = {k}: an answer moved by {worst}");
    }
    let reference = release("records", &join(&base));
    let answers = release("records-added", &join(&added));
    let worst = largest_move(&reference, &answers);
    assert!(worst > 45.0, "without a unit: {worst}");
}
