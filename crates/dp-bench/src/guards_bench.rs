//! `cargo xtask bench guards`: the huge-domain cases of issue 30 through
//! the real `dpmm` binary — a 5-way marginal over 10¹⁵ cells, attributes
//! of 10⁵ values (queried, and summed out), all 2-way marginals over
//! 1000⁵ cells — each planned (`dpmm plan`) and released from its spec
//! (`dpmm release --workload`, which plans again) under ε-DP and under
//! (ε, δ). Per step: the outcome (a result, or a refusal: exit status 2
//! and one line), wall and CPU seconds, peak memory, and for a release
//! whether the ledger is unchanged (it must be, unless answers were
//! written). The bar is a result or a refusal within 30 s per step.
//!
//! Every file is written to a scratch directory under the system's
//! temporary directory and removed at the end.

use std::path::Path;
use std::process::Command;

use dp_core::{DpError, Result};

use crate::procfs;
use crate::release_bench::{ChildCost, Scratch, io_error, run_child};

/// One case: a name, the attribute sizes and the spec's queries.
struct Case {
    name: &'static str,
    sizes: &'static [usize],
    queries: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "5-way marginal, 1000^5",
        sizes: &[1000; 5],
        queries: r#"[{"marginal": ["a0", "a1", "a2", "a3", "a4"]}]"#,
    },
    Case {
        name: "identity on 10^5 values",
        sizes: &[100_000, 3],
        queries: r#"[{"kron": {"a0": "identity"}}]"#,
    },
    Case {
        name: "1-way marginals, 10^5 x 3",
        sizes: &[100_000, 3],
        queries: r#"[{"marginals": {"k": 1}}]"#,
    },
    Case {
        name: "10^5 values summed out",
        sizes: &[100_000, 3, 4],
        queries: r#"[{"marginal": ["a1", "a2"]}]"#,
    },
    Case {
        name: "all 2-way marginals, 1000^5",
        sizes: &[1000; 5],
        queries: r#"[{"marginals": {"k": 2}}]"#,
    },
];

/// The privacy models: name and δ (none: ε-DP).
const MODELS: [(&str, Option<&str>); 2] = [("pure", None), ("approx", Some("1e-6"))];

/// Writes the spec, schema (integer bins) and 50 records of `case`.
fn write_case(dir: &Path, case: &Case) -> Result<()> {
    let names: Vec<String> = (0..case.sizes.len()).map(|i| format!("a{i}")).collect();
    let domain: Vec<String> = names
        .iter()
        .zip(case.sizes)
        .map(|(n, s)| format!(r#"{{"name": "{n}", "size": {s}}}"#))
        .collect();
    let columns: Vec<String> = names
        .iter()
        .zip(case.sizes)
        .map(|(n, s)| {
            format!(
                r#"{{"name": "{n}", "column": "{n}", "bins": {{"start": 0, "stop": {s}, "width": 1}}}}"#
            )
        })
        .collect();
    let mut csv = names.join(",") + "\n";
    for r in 0..50usize {
        let row: Vec<String> = case
            .sizes
            .iter()
            .map(|s| ((r * 7919) % s).to_string())
            .collect();
        csv += &(row.join(",") + "\n");
    }
    let files = [
        (
            "spec.json",
            format!(
                r#"{{"domain": [{}], "queries": {}}}"#,
                domain.join(", "),
                case.queries
            ),
        ),
        (
            "schema.json",
            format!(r#"{{"domain": [{}]}}"#, columns.join(", ")),
        ),
        ("data.csv", csv),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).map_err(|e| io_error(dir, e))?;
    }
    Ok(())
}

/// What one step ended with.
fn outcome(status: std::process::ExitStatus, log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    match status.code() {
        Some(0) => "result".into(),
        Some(2) if text.trim().lines().count() == 1 => "refused".into(),
        Some(c) => format!("FAILED (status {c}): {}", text.trim()),
        None => format!("FAILED (killed): {}", text.trim()),
    }
}

fn row(case: &str, model: &str, step: &str, what: &str, c: &ChildCost, ledger: &str) -> String {
    format!(
        "| {case} | {model} | {step} | {what} | {:.1} | {} | {} | {ledger} |",
        c.wall_seconds,
        c.cpu_seconds.map_or("?".into(), |s| format!("{s:.1}")),
        c.peak_rss_bytes
            .map_or("?".into(), |b| format!("{:.0}", b / 1_048_576.0)),
    )
}

/// Runs every case with the `dpmm` binary at `dpmm`, printing one table
/// row per step as it is measured and the load averages around it.
pub fn print_bench(dpmm: &Path) -> Result<()> {
    if !dpmm.is_file() {
        return Err(DpError::Io(format!(
            "{}: no dpmm binary (cargo build --release -p dpmm)",
            dpmm.display()
        )));
    }
    let dir = std::env::temp_dir().join(format!("dpmm-bench-guards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
    let scratch = Scratch(dir);
    let dir = &scratch.0;
    let path = |name: &str| dir.join(name).display().to_string();
    let log = dir.join("stderr.txt");
    println!("load average before: {}", procfs::load_averages_text());
    println!("| case | privacy | step | outcome | wall s | CPU s | peak MiB | ledger |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut failures = 0;
    for (k, case) in CASES.iter().enumerate() {
        write_case(dir, case)?;
        for (model, delta) in MODELS {
            let delta_args: Vec<&str> = delta.map_or_else(Vec::new, |d| vec!["--delta", d]);
            let (status, cost) = run_child(
                Command::new(dpmm)
                    .args(["plan", "--workload", &path("spec.json"), "--privacy", model])
                    .args(["--epsilon", "1", "--out", &path("plan.json")])
                    .args(&delta_args),
                &log,
            )?;
            let what = outcome(status, &log);
            failures += usize::from(what.starts_with("FAILED") || cost.wall_seconds > 30.0);
            println!("{}", row(case.name, model, "plan", &what, &cost, ""));
            let ledger = path(&format!("case{k}-{model}.ledger.jsonl"));
            let mut init = vec![
                "ledger",
                "init",
                "--ledger",
                &ledger,
                "--total-epsilon",
                "10",
            ];
            if delta.is_some() {
                init.extend(["--total-delta", "1e-5"]);
            }
            let (status, _) = run_child(Command::new(dpmm).args(&init), &log)?;
            if !status.success() {
                return Err(DpError::Io(format!(
                    "ledger init failed: {}",
                    outcome(status, &log)
                )));
            }
            let before = std::fs::read(&ledger).map_err(|e| io_error(Path::new(&ledger), e))?;
            let answers = path("answers.csv");
            let (status, cost) = run_child(
                Command::new(dpmm)
                    .args(["release", "--data", &path("data.csv")])
                    .args([
                        "--schema",
                        &path("schema.json"),
                        "--workload",
                        &path("spec.json"),
                    ])
                    .args(["--epsilon", "1", "--ledger", &ledger, "--out", &answers])
                    .args(&delta_args),
                &log,
            )?;
            let what = outcome(status, &log);
            let after = std::fs::read(&ledger).map_err(|e| io_error(Path::new(&ledger), e))?;
            let written = Path::new(&answers).exists();
            let ledger_state = match (after == before, written) {
                (true, false) => "unchanged",
                (false, true) => "charged",
                (true, true) => "UNCHARGED WITH ANSWERS",
                (false, false) => "CHARGED WITHOUT ANSWERS",
            };
            let ledger_ok = matches!(ledger_state, "unchanged" | "charged");
            failures +=
                usize::from(what.starts_with("FAILED") || cost.wall_seconds > 30.0 || !ledger_ok);
            println!(
                "{}",
                row(case.name, model, "release", &what, &cost, ledger_state)
            );
            let _ = std::fs::remove_file(&answers);
            let _ = std::fs::remove_file(format!("{answers}.json"));
            let _ = std::fs::remove_file(dir.join("plan.json"));
        }
    }
    println!("load average after: {}", procfs::load_averages_text());
    if failures > 0 {
        return Err(DpError::NotConverged {
            solver: "bench guards",
            reason: format!("{failures} step(s) failed, took over 30 s or left the ledger wrong"),
        });
    }
    Ok(())
}
