//! Helpers of the `dpmm` command-line tests: a scratch directory per test
//! and a run of the built binary with a hang detector.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses a subset; a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A fresh directory for `test` under Cargo's scratch directory.
pub fn scratch_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("dpmm-{test}"));
    // Fresh on every run: a file left by an earlier run must not pass for
    // one this run wrote.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A path as a command-line argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The outcome of one `dpmm` run.
#[derive(Debug)]
pub struct Run {
    /// Exit status.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// The bad-input contract: status 2, exactly one line `error: …`.
    pub fn is_refusal(&self) -> bool {
        self.code == 2 && self.stderr.lines().count() == 1 && self.stderr.starts_with("error: ")
    }
}

/// Runs the built `dpmm` with `args`. A run still going after a minute is
/// a hang (the test fails); this bounds the test, it does not time it.
pub fn dpmm(args: &[&str]) -> Run {
    dpmm_within(args, Duration::from_secs(60))
}

/// [`dpmm`] with another bound on the run (a hang detector, not a timer).
pub fn dpmm_within(args: &[&str], bound: Duration) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dpmm"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > bound {
            let _ = child.kill();
            panic!("dpmm {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Removes a ledger left by an earlier run, with its head anchor (which
/// would otherwise refuse a new ledger at the same path).
pub fn remove_ledger(ledger: &Path) {
    let _ = std::fs::remove_file(ledger);
    let _ = std::fs::remove_file(format!("{}.head", ledger.display()));
}

/// A records schema of two attributes, `sex` (f, m) and `age` (four
/// ten-year bins from 20), for the tests that release small files.
pub const SEX_AGE_SCHEMA: &str = r#"{"domain": [
  {"name": "sex", "column": "sex", "values": ["f", "m"]},
  {"name": "age", "column": "age", "bins": {"start": 20, "stop": 60, "width": 10}}
]}"#;

/// A spec on [`SEX_AGE_SCHEMA`]'s domain mixing marginals and a prefix
/// over age (2 + 4 + 8 + 4 queries; no closed-form lower bound).
pub const SEX_AGE_MIXED_SPEC: &str = r#"{"domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 4}],
  "queries": [{"marginals": {"k": 1}}, {"marginal": ["sex", "age"]}, {"kron": {"age": "prefix"}}]}"#;

/// A fresh scratch directory for `test` holding `schema.json`
/// ([`SEX_AGE_SCHEMA`]), `spec.json` (`spec`) and `records.csv`: 200
/// records spread over both sexes and every age bin.
pub fn sex_age_case(test: &str, spec: &str) -> PathBuf {
    let dir = scratch_dir(test);
    std::fs::write(dir.join("schema.json"), SEX_AGE_SCHEMA).unwrap();
    std::fs::write(dir.join("spec.json"), spec).unwrap();
    let mut records = String::from("sex,age\n");
    for i in 0..200 {
        let sex = if i % 3 == 0 { "m" } else { "f" };
        records.push_str(&format!("{sex},{}\n", 20 + (i * 7) % 40));
    }
    std::fs::write(dir.join("records.csv"), records).unwrap();
    dir
}

/// [`sex_age_case`] with a pure-ε ledger holding `epsilon` at
/// `ledger.jsonl`: the directory, the ledger's path and its bytes now.
pub fn sex_age_case_with_ledger(
    test: &str,
    spec: &str,
    epsilon: f64,
) -> (PathBuf, PathBuf, Vec<u8>) {
    let dir = sex_age_case(test, spec);
    let book = dir.join("ledger.jsonl");
    dpmm::ledger::create(&book, dpmm::PrivacyBudget::pure(epsilon).unwrap()).unwrap();
    let before = std::fs::read(&book).unwrap();
    (dir, book, before)
}
