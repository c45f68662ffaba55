//! Huge domains through the binary: `dpmm plan` and `dpmm release` end
//! with a result or one line and exit status 2 — never an abort, a panic
//! or an internal error — and a release that writes no answers leaves the
//! ledger byte for byte as it was (every sizing and refusal comes before
//! the charge). Times are measured in release builds (README); here only
//! the outcome is asserted.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Run, arg, dpmm, dpmm_within, remove_ledger, scratch_dir};

/// [`dpmm`] with a longer bound: a release of ten million answers takes
/// minutes in a debug build (seconds in a release build, README). The
/// bound catches a hang; it does not time the run.
fn dpmm_long(args: &[&str]) -> Run {
    dpmm_within(args, Duration::from_secs(1200))
}

/// A domain of `sizes` named `a0, a1, …`: the spec with `queries`, a schema
/// of integer bins `[0, size)` and a few records.
fn case(dir: &Path, name: &str, sizes: &[usize], queries: &str) -> (PathBuf, PathBuf, PathBuf) {
    let domain: Vec<String> = sizes
        .iter()
        .enumerate()
        .map(|(i, s)| format!(r#"{{"name": "a{i}", "size": {s}}}"#))
        .collect();
    let columns: Vec<String> = sizes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            format!(r#"{{"name": "a{i}", "column": "a{i}", "bins": {{"start": 0, "stop": {s}, "width": 1}}}}"#)
        })
        .collect();
    let spec = dir.join(format!("{name}.spec.json"));
    let schema = dir.join(format!("{name}.schema.json"));
    let data = dir.join(format!("{name}.csv"));
    std::fs::write(
        &spec,
        format!(
            r#"{{"domain": [{}], "queries": {queries}}}"#,
            domain.join(", ")
        ),
    )
    .unwrap();
    std::fs::write(
        &schema,
        format!(r#"{{"domain": [{}]}}"#, columns.join(", ")),
    )
    .unwrap();
    let header: Vec<String> = (0..sizes.len()).map(|i| format!("a{i}")).collect();
    let mut csv = header.join(",") + "\n";
    for r in 0..50usize {
        let row: Vec<String> = sizes.iter().map(|s| ((r * 7919) % s).to_string()).collect();
        csv += &(row.join(",") + "\n");
    }
    std::fs::write(&data, csv).unwrap();
    (spec, schema, data)
}

/// Runs `dpmm args` ([`dpmm_long`]) and whether it succeeded
/// ([`result_or_refusal`]), checking that `out` exists exactly then.
fn succeeded_writing(args: &[&str], out: &Path, what: &str) -> bool {
    let ok = result_or_refusal(&dpmm_long(args), what);
    assert_eq!(
        ok,
        out.exists(),
        "{what}: an output exactly when it succeeds"
    );
    ok
}

/// A result (status 0) or a refusal (status 2, one line); never anything
/// else.
fn result_or_refusal(run: &Run, what: &str) -> bool {
    assert!(
        run.code == 0 || run.is_refusal(),
        "{what}: status {}, stderr {:?}",
        run.code,
        run.stderr
    );
    run.code == 0
}

/// `dpmm plan` of `spec` under `privacy` at ε = 1, writing `out`.
fn plan_args<'a>(spec: &'a Path, privacy: &'a str, out: &'a Path) -> Vec<&'a str> {
    vec![
        "plan",
        "--workload",
        arg(spec),
        "--privacy",
        privacy,
        "--epsilon",
        "1",
        "--out",
        arg(out),
    ]
}

/// `dpmm ledger init` of `ledger` holding ε = `total_epsilon`.
fn ledger_init_args<'a>(ledger: &'a Path, total_epsilon: &'a str) -> Vec<&'a str> {
    vec![
        "ledger",
        "init",
        "--ledger",
        arg(ledger),
        "--total-epsilon",
        total_epsilon,
    ]
}

/// `dpmm release` of the case `files` at ε = `epsilon`, charged to
/// `ledger`, writing `out`.
fn release_args<'a>(
    (spec, schema, data): &'a (PathBuf, PathBuf, PathBuf),
    epsilon: &'a str,
    ledger: &'a Path,
    out: &'a Path,
) -> Vec<&'a str> {
    vec![
        "release",
        "--data",
        arg(data),
        "--schema",
        arg(schema),
        "--workload",
        arg(spec),
        "--epsilon",
        epsilon,
        "--ledger",
        arg(ledger),
        "--out",
        arg(out),
    ]
}

/// `--delta` for the privacy model (`None`: pure).
fn delta_args(delta: Option<&str>) -> Vec<&str> {
    delta.map_or_else(Vec::new, |d| vec!["--delta", d])
}

/// Plans and releases `spec` under both privacy models; checks the
/// outcomes and the ledger; returns whether (plan, release) produced
/// results, per model.
fn plan_and_release(
    dir: &Path,
    name: &str,
    files: &(PathBuf, PathBuf, PathBuf),
) -> Vec<(bool, bool)> {
    let models = [("pure", None), ("approx", Some("1e-6"))];
    plan_and_release_under(dir, name, files, &models)
}

/// [`plan_and_release`] under the given `(privacy, δ)` models.
fn plan_and_release_under(
    dir: &Path,
    name: &str,
    files: &(PathBuf, PathBuf, PathBuf),
    models: &[(&str, Option<&str>)],
) -> Vec<(bool, bool)> {
    let mut out = Vec::new();
    for &(privacy, delta) in models {
        let tag = format!("{name}-{privacy}");
        let plan = dir.join(format!("{tag}.plan.json"));
        let mut args = plan_args(&files.0, privacy, &plan);
        args.extend(delta_args(delta));
        let planned = succeeded_writing(&args, &plan, &format!("plan {tag}"));
        let ledger = dir.join(format!("{tag}.ledger.jsonl"));
        remove_ledger(&ledger);
        let mut init = ledger_init_args(&ledger, "10");
        if delta.is_some() {
            init.extend(["--total-delta", "1e-5"]);
        }
        assert_eq!(dpmm(&init).code, 0, "{tag}: ledger init");
        let before = std::fs::read(&ledger).unwrap();
        let answers = dir.join(format!("{tag}.answers.csv"));
        let mut args = release_args(files, "1", &ledger, &answers);
        args.extend(delta_args(delta));
        let released = succeeded_writing(&args, &answers, &format!("release {tag}"));
        let after = std::fs::read(&ledger).unwrap();
        if released {
            assert!(after.len() > before.len(), "{tag}: a release is charged");
            let _ = std::fs::remove_file(&answers);
        } else {
            assert_eq!(after, before, "{tag}: a refused release spends nothing");
        }
        out.push((planned, released));
    }
    out
}

/// A 5-way marginal over 10¹⁵ cells: its 10¹⁵ answers cannot be held, so
/// the release is refused, under either model.
#[test]
fn a_five_way_marginal_over_1e15_cells() {
    let dir = scratch_dir("guards-5way");
    let files = case(
        &dir,
        "m5",
        &[1000; 5],
        r#"[{"marginal": ["a0", "a1", "a2", "a3", "a4"]}]"#,
    );
    for (_, released) in plan_and_release(&dir, "m5", &files) {
        assert!(!released);
    }
}

/// An attribute of 10⁵ values: queried, every plan needs a dense factor of
/// 10¹⁰ entries (refused); summed out of every query, it costs nothing and
/// the release succeeds.
#[test]
fn an_attribute_of_1e5_values() {
    let dir = scratch_dir("guards-1e5");
    for (name, queries) in [
        ("identity", r#"[{"kron": {"a0": "identity"}}]"#),
        (
            "prefix",
            r#"[{"kron": {"a0": "prefix", "a1": "identity"}}]"#,
        ),
        ("marginals", r#"[{"marginals": {"k": 1}}]"#),
    ] {
        let files = case(&dir, name, &[100_000, 3], queries);
        for (planned, released) in plan_and_release(&dir, name, &files) {
            assert!(!planned && !released, "{name}");
        }
    }
    let files = case(
        &dir,
        "unused",
        &[100_000, 3, 4],
        r#"[{"marginal": ["a1", "a2"]}]"#,
    );
    for (planned, released) in plan_and_release(&dir, "unused", &files) {
        assert!(planned && released);
    }
}

/// All 2-way marginals over 1000⁵ cells under ε-DP (the default model):
/// ten tables of 10⁶ cells, ten million answers. Under (ε, δ) the
/// residual strategy's dense 999×1000 factors make a debug build's run
/// minutes long, so that model is measured in release builds by
/// `cargo xtask bench guards`, beside these cases.
#[test]
fn all_two_way_marginals_over_1000_to_the_5() {
    let dir = scratch_dir("guards-2way");
    let files = case(&dir, "k2", &[1000; 5], r#"[{"marginals": {"k": 2}}]"#);
    plan_and_release_under(&dir, "k2", &files, &[("pure", None)]);
}

/// `--max-memory` is parsed with units, refused when zero or malformed,
/// and a limit too small for the release refuses it before the charge.
#[test]
fn max_memory_limits_and_refuses_before_the_charge() {
    let dir = scratch_dir("guards-limit");
    let files = case(&dir, "small", &[3, 4], r#"[{"marginals": {"k": 1}}]"#);
    let ledger = dir.join("ledger.jsonl");
    remove_ledger(&ledger);
    assert_eq!(dpmm(&ledger_init_args(&ledger, "1")).code, 0);
    let before = std::fs::read(&ledger).unwrap();
    let answers = dir.join("answers.csv");
    let release = |limit: &str| {
        let mut args = release_args(&files, "0.5", &ledger, &answers);
        args.extend(["--max-memory", limit]);
        dpmm(&args)
    };
    for bad in ["0", "8X", "1.5.1G", "lots"] {
        let run = release(bad);
        assert!(run.is_refusal(), "{bad}: {run:?}");
        assert!(run.stderr.contains("max-memory"), "{bad}: {}", run.stderr);
    }
    let run = release("1k");
    assert!(run.is_refusal(), "{run:?}");
    assert!(
        run.stderr.contains("over the memory limit of 1.0 kB"),
        "{}",
        run.stderr
    );
    assert!(!answers.exists());
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
    let run = release("1GiB");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(answers.exists());
    let plan = dir.join("plan.json");
    let mut args = plan_args(&files.0, "pure", &plan);
    args.extend(["--max-memory", "100"]);
    let run = dpmm(&args);
    assert!(run.is_refusal(), "{run:?}");
    assert!(!plan.exists());
}
