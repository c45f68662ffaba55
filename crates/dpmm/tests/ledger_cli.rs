//! `dpmm ledger verify` and `dpmm ledger repair` as a curator runs them:
//! a torn last line is reported, repaired, and the next release works; a
//! ledger cut back is refused as rolled back by every command; concurrent
//! releases charge exactly what the budget allows.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::{Path, PathBuf};

use common::{Run, arg, dpmm, sex_age_case};

const SPEC: &str = r#"{"domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 4}],
  "queries": [{"marginal": ["sex", "age"]}]}"#;

/// A scratch directory for `test` with a schema, a spec, records and a
/// new pure ε = 1 ledger; returns the directory and the ledger.
fn setup(test: &str) -> (PathBuf, PathBuf) {
    let dir = sex_age_case(&format!("ledger-{test}"), SPEC);
    let ledger = dir.join("ledger.jsonl");
    let init = ["ledger", "init", "--ledger", arg(&ledger)];
    assert_eq!(
        dpmm(&[&init[..], &["--total-epsilon", "1"]].concat()).code,
        0
    );
    (dir, ledger)
}

/// `dpmm release` at ε = `epsilon` writing `out` in `dir`.
fn release(dir: &Path, ledger: &Path, out: &str, epsilon: &str) -> Run {
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    dpmm(&[
        "release",
        "--data",
        &path("records.csv"),
        "--schema",
        &path("schema.json"),
        "--workload",
        &path("spec.json"),
        "--epsilon",
        epsilon,
        "--ledger",
        arg(ledger),
        "--out",
        &path(out),
    ])
}

fn ledger_command(verb: &str, ledger: &Path) -> Run {
    dpmm(&["ledger", verb, "--ledger", arg(ledger)])
}

/// The names in `dir` that are neither inputs nor the ledger's files.
fn outputs_in(dir: &Path) -> Vec<String> {
    let inputs = [
        "schema.json",
        "spec.json",
        "records.csv",
        "ledger.jsonl",
        "ledger.jsonl.head",
    ];
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !inputs.contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

#[test]
fn a_torn_last_line_is_reported_repaired_and_the_next_release_works() {
    let (dir, ledger) = setup("torn");
    assert_eq!(release(&dir, &ledger, "first.csv", "0.25").code, 0);
    let intact = std::fs::read(&ledger).unwrap();
    for tail in [&b"{\"seq\":2,\"prev\":\"9f"[..], b"\n", b"\0\0\0\0\0\0"] {
        let mut torn = intact.clone();
        torn.extend_from_slice(tail);
        std::fs::write(&ledger, &torn).unwrap();
        let verify = ledger_command("verify", &ledger);
        assert!(verify.is_refusal(), "{verify:?}");
        assert!(verify.stderr.contains("torn final line"), "{verify:?}");
        assert!(verify.stderr.contains("ledger repair"), "{verify:?}");
        assert!(ledger_command("show", &ledger).is_refusal());
        let refused = release(&dir, &ledger, "refused.csv", "0.25");
        assert!(refused.is_refusal(), "{refused:?}");
        assert_eq!(std::fs::read(&ledger).unwrap(), torn, "{tail:?}");
        let repair = ledger_command("repair", &ledger);
        assert_eq!(repair.code, 0, "{repair:?}");
        let said = format!("removed line 3 of {}", ledger.display());
        assert!(repair.stdout.contains(&said), "{repair:?}");
        assert!(repair.stdout.contains(&format!("{} bytes", tail.len())));
        assert_eq!(std::fs::read(&ledger).unwrap(), intact, "{tail:?}");
        let verify = ledger_command("verify", &ledger);
        assert_eq!(verify.code, 0, "{verify:?}");
        assert!(verify.stdout.contains("sound") && verify.stdout.contains("matches"));
    }
    let again = ledger_command("repair", &ledger);
    assert!(again.stdout.contains("nothing to repair"), "{again:?}");
    assert_eq!(std::fs::read(&ledger).unwrap(), intact);
    let next = release(&dir, &ledger, "next.csv", "0.25");
    assert_eq!(next.code, 0, "{next:?}");
    let text = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert_eq!(
        outputs_in(&dir),
        ["first.csv", "first.csv.json", "next.csv", "next.csv.json"]
    );
}

/// A fresh ledger charged by two releases (`a.csv`, `b.csv`) of `epsilon`
/// each, and its text.
fn charged_twice(test: &str, epsilon: &str) -> (PathBuf, PathBuf, String) {
    let (dir, ledger) = setup(test);
    for out in ["a.csv", "b.csv"] {
        assert_eq!(release(&dir, &ledger, out, epsilon).code, 0);
    }
    let text = std::fs::read_to_string(&ledger).unwrap();
    (dir, ledger, text)
}

#[test]
fn a_ledger_with_its_last_entry_deleted_is_refused_as_rolled_back() {
    let (dir, ledger, text) = charged_twice("rollback", "0.5");
    let cut: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(&ledger, &cut).unwrap();
    for verb in ["verify", "show", "repair"] {
        let run = ledger_command(verb, &ledger);
        assert!(run.is_refusal(), "{verb}: {run:?}");
        assert!(run.stderr.contains("rolled back"), "{verb}: {run:?}");
    }
    let run = release(&dir, &ledger, "c.csv", "0.5");
    assert!(
        run.is_refusal() && run.stderr.contains("rolled back"),
        "{run:?}"
    );
    assert_eq!(std::fs::read_to_string(&ledger).unwrap(), cut);
    assert_eq!(
        outputs_in(&dir),
        ["a.csv", "a.csv.json", "b.csv", "b.csv.json"]
    );
}

#[test]
fn repair_refuses_damage_that_is_not_a_torn_last_line() {
    let (_, ledger, text) = charged_twice("damage", "0.25");
    let lines: Vec<&str> = text.lines().collect();
    for damaged in [
        format!(
            "{}\n{}\n{}\n",
            lines[0],
            lines[1].replace("0.25", "0.0025"),
            lines[2]
        ),
        format!("{}\ngarbage\n{}\n", lines[0], lines[2]),
    ] {
        std::fs::write(&ledger, &damaged).unwrap();
        let verify = ledger_command("verify", &ledger);
        assert!(verify.is_refusal(), "{verify:?}");
        let repair = ledger_command("repair", &ledger);
        assert!(repair.is_refusal(), "{repair:?}");
        assert!(repair.stderr.contains("line 2"), "{repair:?}");
        assert_eq!(std::fs::read_to_string(&ledger).unwrap(), damaged);
    }
}

/// A ledger whose head is gone (one written before heads existed) still
/// releases, with one warning line, and is anchored from then on.
#[test]
fn a_ledger_without_its_head_releases_with_one_warning() {
    let (dir, ledger) = setup("no-head");
    assert_eq!(release(&dir, &ledger, "a.csv", "0.25").code, 0);
    let head = dir.join("ledger.jsonl.head");
    std::fs::remove_file(&head).unwrap();
    let verify = ledger_command("verify", &ledger);
    assert_eq!(verify.code, 0, "{verify:?}");
    assert!(verify.stdout.contains("warning: ") && !head.exists());
    let run = release(&dir, &ledger, "b.csv", "0.25");
    assert_eq!(run.code, 0, "{run:?}");
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    assert_eq!(warnings.len(), 1, "{run:?}");
    assert!(warnings[0].contains("no head anchor"), "{run:?}");
    // The warning, the line saying what was written, and the note on
    // records the schema may drop.
    assert_eq!(run.stderr.lines().count(), 3, "{run:?}");
    assert!(
        run.stderr.lines().any(|l| l.starts_with("note: ")),
        "{run:?}"
    );
    assert!(head.exists());
    let verify = ledger_command("verify", &ledger);
    assert!(verify.stdout.contains("matches entry 2"), "{verify:?}");
}

/// Eight releases at once on a ledger with budget for two: the lock lets
/// one through at a time (the others are refused with one line), so the
/// charges never exceed the budget, every success is charged exactly once
/// and every refusal not at all; releasing one at a time afterwards
/// charges exactly up to the budget.
#[test]
fn concurrent_releases_charge_exactly_what_the_budget_allows() {
    let (dir, ledger) = setup("concurrent");
    let runs: Vec<(String, Run)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|k| {
                let (dir, ledger) = (&dir, &ledger);
                s.spawn(move || {
                    let out = format!("c{k}.csv");
                    let run = release(dir, ledger, &out, "0.5");
                    (out, run)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut succeeded = 0;
    for (out, run) in &runs {
        if run.code == 0 {
            succeeded += 1;
            assert!(dir.join(out).exists());
        } else {
            assert!(run.is_refusal(), "{run:?}");
            assert!(!dir.join(out).exists());
        }
    }
    let charges = std::fs::read_to_string(&ledger).unwrap().lines().count() - 1;
    assert_eq!(charges, succeeded);
    assert!((1..=2).contains(&succeeded), "{runs:?}");
    for k in 0.. {
        let run = release(&dir, &ledger, &format!("s{k}.csv"), "0.5");
        if run.code != 0 {
            assert!(run.is_refusal() && run.stderr.contains("budget"), "{run:?}");
            break;
        }
    }
    let verify = ledger_command("verify", &ledger);
    assert!(
        verify
            .stdout
            .contains("2 charges, spent 1.000000e0 of 1.000000e0")
    );
    assert!(
        outputs_in(&dir).iter().all(|n| !n.contains(".tmp")),
        "{:?}",
        outputs_in(&dir)
    );
}

/// Answers written over the ledger's head would erase the anchor: refused
/// like answers over the ledger itself, with nothing spent.
#[test]
fn the_output_may_not_be_the_ledgers_head() {
    let (dir, ledger) = setup("out-head");
    let before = std::fs::read(&ledger).unwrap();
    let head = std::fs::read(dir.join("ledger.jsonl.head")).unwrap();
    let run = release(&dir, &ledger, "ledger.jsonl.head", "0.25");
    assert!(run.is_refusal(), "{run:?}");
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
    assert_eq!(std::fs::read(dir.join("ledger.jsonl.head")).unwrap(), head);
}

/// `dpmm ledger init` on a ledger that exists refuses, says that it
/// exists and leaves it as it was; on a head whose ledger is gone it
/// refuses too. Neither message advises removing the head (the guard
/// against a ledger deleted and started again).
#[test]
fn init_never_replaces_a_ledger_nor_advises_removing_its_head() {
    let (_, ledger) = setup("init-existing");
    let head = format!("{}.head", ledger.display());
    let (before, head_before) = (
        std::fs::read(&ledger).unwrap(),
        std::fs::read(&head).unwrap(),
    );
    let init = [
        "ledger",
        "init",
        "--ledger",
        arg(&ledger),
        "--total-epsilon",
        "5",
    ];
    let run = dpmm(&init);
    assert!(run.is_refusal(), "{run:?}");
    assert!(run.stderr.contains("already exists"), "{run:?}");
    assert!(!run.stderr.contains("remove"), "{run:?}");
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
    assert_eq!(std::fs::read(&head).unwrap(), head_before);
    std::fs::remove_file(&ledger).unwrap();
    let run = dpmm(&init);
    assert!(run.is_refusal(), "{run:?}");
    assert!(run.stderr.contains("is missing but its head"), "{run:?}");
    assert!(!run.stderr.contains("remove"), "{run:?}");
    assert!(!ledger.exists());
}
