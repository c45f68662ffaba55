//! `dpmm stream` as a curator runs it: running counts whose errors match
//! their stated standard errors, the ledger charged once, bad lines
//! dropped as in `release`, refusals that spend nothing.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{Run, arg, dpmm, scratch_dir};

/// sex (2) × age (100 one-year bins): 2 + 100 + 200 = 302 cells a step.
const SCHEMA: &str = r#"{"domain": [
  {"name": "sex", "column": "sex", "values": ["f", "m"]},
  {"name": "age", "column": "age", "bins": {"start": 0, "stop": 100, "width": 1}}
]}"#;
const SPEC: &str = r#"{"domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 100}],
  "queries": [{"marginals": {"k": 1}}, {"marginal": ["sex", "age"]}]}"#;
const STEPS: usize = 48;

/// A scratch directory with the schema, the spec, an (ε, δ) ledger and a
/// records file for `STEPS` days starting at day 100: every record in time
/// order, with bad lines mixed in (a wrong field count, a time that is not
/// an integer, a day outside the horizon, an age outside the domain), and
/// the true running counts per (step, query label).
fn setup(test: &str) -> (PathBuf, PathBuf, HashMap<(usize, String), f64>) {
    let dir = scratch_dir(&format!("stream-{test}"));
    std::fs::write(dir.join("schema.json"), SCHEMA).unwrap();
    std::fs::write(dir.join("spec.json"), SPEC).unwrap();
    let ledger = dir.join("ledger.jsonl");
    let init = dpmm(&[
        "ledger",
        "init",
        "--ledger",
        arg(&ledger),
        "--total-epsilon",
        "4",
        "--total-delta",
        "1e-6",
    ]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    let mut text = String::from("day,sex,age\n");
    let mut counts: HashMap<String, f64> = HashMap::new();
    let mut truth = HashMap::new();
    let mut state = 7u64;
    for step in 0..STEPS {
        let n = 20 + (step * 37) % 50;
        for _ in 0..n {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let sex = if (state >> 33).is_multiple_of(3) {
                "m"
            } else {
                "f"
            };
            let age = (state >> 40) % 100;
            text.push_str(&format!("{},{sex},{age}\n", 100 + step));
            for label in [
                format!("sex = {sex}"),
                format!("age = {age}"),
                format!("sex = {sex} & age = {age}"),
            ] {
                *counts.entry(label).or_default() += 1.0;
            }
        }
        text.push_str(&format!("{},f\n", 100 + step));
        text.push_str("soon,f,3\n");
        text.push_str("99999,m,3\n");
        text.push_str(&format!("{},m,130\n", 100 + step));
        for (label, c) in &counts {
            truth.insert((step, label.clone()), *c);
        }
    }
    std::fs::write(dir.join("records.csv"), text).unwrap();
    (dir, ledger, truth)
}

fn stream_args(dir: &Path, ledger: &Path, data: &str, extra: &[&str]) -> Vec<String> {
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let mut args: Vec<String> = [
        "stream",
        "--data",
        data,
        "--time-column",
        "day",
        "--start",
        "100",
        "--steps",
        &STEPS.to_string(),
        "--schema",
        &path("schema.json"),
        "--workload",
        &path("spec.json"),
        "--ledger",
        arg(ledger),
        "--out",
        &path("running.csv"),
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    args.extend(extra.iter().map(ToString::to_string));
    args
}

fn run_stream(dir: &Path, ledger: &Path, extra: &[&str]) -> Run {
    let data = dir.join("records.csv");
    let args = stream_args(dir, ledger, arg(&data), extra);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    dpmm(&refs)
}

fn status(ledger: &Path) -> dpmm::ledger::Status {
    dpmm::ledger::status(ledger).unwrap()
}

/// One row of `running.csv`: step, query, (answer, std_error, low, high).
type Row = (usize, String, [f64; 4]);

/// The rows of `running.csv`.
fn rows(dir: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(dir.join("running.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("step,time,query,answer,std_error,ci_low,ci_high")
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 7, "{l}");
            let step: usize = f[0].parse().unwrap();
            // Whole-number times: the step's time is --start (100) + step.
            assert_eq!(f[1], (100 + step).to_string());
            let v = |i: usize| f[i].parse::<f64>().unwrap();
            (step, f[2].to_string(), [v(3), v(4), v(5), v(6)])
        })
        .collect()
}

#[test]
fn running_counts_have_honest_standard_errors_and_one_charge() {
    let (dir, ledger, truth) = setup("calibrated");
    let run = run_stream(&dir, &ledger, &["--epsilon", "4", "--delta", "1e-6"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Charged once, the whole budget (ε = 4, δ = 10⁻⁶ as ρ).
    let s = status(&ledger);
    assert_eq!(s.releases, 1);
    assert!(
        (s.spent - s.total).abs() <= 1e-12 * s.total,
        "{} of {}",
        s.spent,
        s.total
    );
    let rows = rows(&dir);
    assert_eq!(rows.len(), STEPS * 302);
    let mut z = Vec::new();
    let mut covered = 0usize;
    for (step, query, [answer, se, low, high]) in &rows {
        assert!(*step < STEPS);
        let t = truth.get(&(*step, query.clone())).copied().unwrap_or(0.0);
        assert!(se.is_finite() && *se > 0.0);
        z.push((answer - t) / se);
        covered += usize::from(*low <= t && t <= *high);
    }
    let n = z.len() as f64;
    let mean = z.iter().sum::<f64>() / n;
    let std = (z.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    assert!((0.9..=1.1).contains(&std), "z-score std {std}");
    assert!(mean.abs() < 0.2, "z-score mean {mean}");
    let coverage = covered as f64 / n;
    assert!(
        (0.9..=0.99).contains(&coverage),
        "95% intervals cover {coverage}"
    );
    // One step's standard error is shared by its rows and grows with t.
    let se_at = |s: usize| rows.iter().find(|r| r.0 == s).unwrap().2[1];
    assert!(se_at(STEPS - 1) > se_at(0));
}

/// z-scores of the running counts against the truth: their mean and
/// standard deviation, and the share of 95% intervals that cover it.
fn z_scores(rows: &[Row], truth: &HashMap<(usize, String), f64>) -> (f64, f64, f64) {
    let mut z = Vec::new();
    let mut covered = 0usize;
    for (step, query, [answer, se, low, high]) in rows {
        let t = truth.get(&(*step, query.clone())).copied().unwrap_or(0.0);
        assert!(se.is_finite() && *se > 0.0);
        z.push((answer - t) / se);
        covered += usize::from(*low <= t && t <= *high);
    }
    let n = z.len() as f64;
    let mean = z.iter().sum::<f64>() / n;
    let std = (z.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    (mean, std, covered as f64 / n)
}

#[test]
fn pure_epsilon_streams_are_measured_by_a_laplace_tree() {
    let (dir, _, truth) = setup("pure");
    let ledger = dir.join("pure.jsonl");
    let init = dpmm(&[
        "ledger",
        "init",
        "--ledger",
        arg(&ledger),
        "--total-epsilon",
        "3",
    ]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    let run = run_stream(&dir, &ledger, &["--epsilon", "3"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s = status(&ledger);
    assert_eq!((s.releases, s.spent), (1, 3.0));
    let rows = rows(&dir);
    assert_eq!(rows.len(), STEPS * 302);
    let (mean, std, coverage) = z_scores(&rows, &truth);
    assert!((0.9..=1.1).contains(&std), "z-score std {std}");
    assert!(mean.abs() < 0.2, "z-score mean {mean}");
    assert!(
        (0.94..=0.995).contains(&coverage),
        "95% intervals cover {coverage}"
    );
    // The sidecar: the tree, its L1 sensitivity (one record is in 3
    // tables and one node of each of the tree's levels), the charge in ε.
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("running.csv.json")).unwrap())
            .unwrap();
    let arity = sidecar["arity"].as_u64().unwrap() as usize;
    let levels = dpmm::dp_core::kernel::tree::levels(arity, STEPS);
    assert_eq!(arity, dpmm::dp_core::kernel::tree::best_arity(STEPS));
    assert_eq!(sidecar["levels"], levels);
    assert_eq!(sidecar["sensitivity"], (3 * levels) as f64);
    assert_eq!(sidecar["sensitivity_norm"], "L1");
    assert_eq!(sidecar["laplace_scale"], (3 * levels) as f64 / 3.0);
    assert_eq!(
        (
            sidecar["charged"].as_f64(),
            sidecar["charged_unit"].as_str()
        ),
        (Some(3.0), Some("epsilon"))
    );
    assert!(sidecar["delta"].is_null());
    // The standard error after n steps: D(n) draws of the discrete
    // Laplace, D(n) the base-k digit sum of n.
    let var = dpmm::dp_core::kernel::discrete_laplace_variance(levels as f64);
    for (step, _, [_, se, _, _]) in rows.iter().step_by(97) {
        let d = dpmm::dp_core::kernel::tree::draws(arity, step + 1) as f64;
        assert!((se * se / (d * var) - 1.0).abs() < 1e-12);
    }
}

#[test]
fn records_from_standard_input() {
    let (dir, ledger, _) = setup("stdin");
    let args = stream_args(&dir, &ledger, "-", &["--epsilon", "1", "--delta", "1e-7"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_dpmm"))
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let records = std::fs::read(dir.join("records.csv")).unwrap();
    child.stdin.take().unwrap().write_all(&records).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(rows(&dir).len(), STEPS * 302);
    assert_eq!(status(&ledger).releases, 1);
}

#[test]
fn refusals_spend_nothing_and_write_nothing() {
    let (dir, ledger, _) = setup("refusals");
    let bad_spec = dir.join("prefix.json");
    std::fs::write(
        &bad_spec,
        r#"{"domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 100}],
            "queries": [{"kron": {"age": "prefix"}}]}"#,
    )
    .unwrap();
    let records = dir.join("records.csv");
    let approx = ["--epsilon", "1", "--delta", "1e-6"];
    // The arguments of a good run at (1, 10⁻⁶) with `flag` set to `value`
    // (or the flags `extra` added).
    let with = |flag: &str, value: &str, extra: &[&str]| -> Vec<String> {
        let mut a = stream_args(&dir, &ledger, arg(&records), &[&approx[..], extra].concat());
        if let Some(i) = a.iter().position(|x| x == flag) {
            a[i + 1] = value.to_string();
        }
        a
    };
    let cases: Vec<Vec<String>> = vec![
        // Pure ε is measured by a tree: no bands.
        stream_args(
            &dir,
            &ledger,
            arg(&records),
            &["--epsilon", "0.1", "--bands", "4"],
        ),
        // More than the ledger holds.
        with("--epsilon", "8", &[]),
        // Not a marginal workload.
        with("--workload", arg(&bad_spec), &[]),
        // No such time column.
        with("--time-column", "when", &[]),
        with("", "", &["--bands", "0"]),
        with("--data", arg(&dir.join("nothing.csv")), &[]),
        // Zero steps; more steps × cells than a stream holds.
        with("--steps", "0", &[]),
        with("--steps", "1000000", &[]),
    ];
    for args in &cases {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = dpmm(&refs);
        assert!(run.is_refusal(), "{args:?}: {} {}", run.code, run.stderr);
        assert_eq!(status(&ledger).releases, 0, "{args:?}");
        assert!(!dir.join("running.csv").exists(), "{args:?}");
    }
}

#[test]
fn lines_in_any_order_count_at_their_own_steps() {
    // The same records, days reversed: the running counts are those of
    // the records' own days (each line lands at its time value, whatever
    // comes before or after it).
    let (dir, ledger, truth) = setup("order");
    let text = std::fs::read_to_string(dir.join("records.csv")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let header = lines.remove(0);
    lines.reverse();
    std::fs::write(
        dir.join("records.csv"),
        format!("{header}\n{}\n", lines.join("\n")),
    )
    .unwrap();
    let run = run_stream(&dir, &ledger, &["--epsilon", "4", "--delta", "1e-6"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let z: Vec<f64> = rows(&dir)
        .iter()
        .map(|(step, query, [a, se, ..])| {
            (a - truth.get(&(*step, query.clone())).copied().unwrap_or(0.0)) / se
        })
        .collect();
    let n = z.len() as f64;
    let mean = z.iter().sum::<f64>() / n;
    let std = (z.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    assert!(
        (0.9..=1.1).contains(&std) && mean.abs() < 0.2,
        "{mean} {std}"
    );
}

#[test]
fn under_the_error_policy_a_bad_line_is_refused_before_the_charge() {
    let (dir, ledger, _) = setup("strict");
    let strict = SCHEMA.replacen(r#"{"domain""#, r#"{"malformed": "error", "domain""#, 1);
    std::fs::write(dir.join("schema.json"), strict).unwrap();
    let run = run_stream(&dir, &ledger, &["--epsilon", "1", "--delta", "1e-6"]);
    assert!(run.is_refusal(), "{} {}", run.code, run.stderr);
    assert_eq!(status(&ledger).releases, 0);
    assert!(!dir.join("running.csv").exists());
}

/// The running counts are renamed into place with their sidecar, never
/// written through a link: an `--out` that is a link to the ledger
/// replaces the link and leaves the ledger whole; the ledger's head and
/// the records are refused as outputs before anything is spent.
#[cfg(unix)]
#[test]
fn the_output_never_overwrites_the_ledger_and_has_a_sidecar() {
    let (dir, ledger, _) = setup("links");
    let records = dir.join("records.csv");
    let approx = ["--epsilon", "1", "--delta", "1e-6"];
    let with_out = |out: &Path| -> Run {
        let mut a = stream_args(&dir, &ledger, arg(&records), &approx);
        let i = a.iter().position(|x| x == "--out").unwrap();
        a[i + 1] = arg(out).to_string();
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        dpmm(&refs)
    };
    let head = dir.join("ledger.jsonl.head");
    for refused in [&head, &records] {
        let run = with_out(refused);
        assert!(run.is_refusal(), "{}", run.stderr);
        assert_eq!(status(&ledger).releases, 0);
    }
    let link = dir.join("running.csv");
    std::os::unix::fs::symlink(&ledger, &link).unwrap();
    let before = std::fs::read(&ledger).unwrap();
    let run = with_out(&link);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The ledger has its one new entry and verifies; the link is gone,
    // replaced by the running counts.
    let verify = dpmm(&["ledger", "verify", "--ledger", arg(&ledger)]);
    assert_eq!(verify.code, 0, "{}", verify.stderr);
    assert_eq!(status(&ledger).releases, 1);
    assert!(std::fs::read(&ledger).unwrap().starts_with(&before));
    assert!(
        !std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(rows(&dir).len(), STEPS * 302);
    // The sidecar: what was charged, and whom the release protects.
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("running.csv.json")).unwrap())
            .unwrap();
    assert_eq!(sidecar["ledger"]["entry"], 1);
    assert_eq!(sidecar["steps"], STEPS);
    let rho = status(&ledger).spent;
    assert!((sidecar["charged"].as_f64().unwrap() - rho).abs() <= 1e-12 * rho);
    assert!(
        sidecar["privacy_unit"]
            .as_str()
            .unwrap()
            .starts_with("one record")
    );
    // No temporary is left beside the output.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
}

/// Unix seconds of a UTC date-time, by hand (days from civil).
fn unix(y: i64, m: i64, d: i64, h: i64, min: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe - 719_468) * 86_400 + h * 3_600 + min * 60
}

/// Issue 49's bar: ISO timestamps with `--step day --timezone
/// America/Chicago` give the same running counts as a hand-made local
/// day mapping (Chicago is UTC−5 from 2017-03-12 08:00 UTC to 2017-11-05
/// 07:00 UTC and UTC−6 otherwise): z-scores against it with standard
/// deviation 0.85–1.15, and the year's last evening counted in 2017.
#[test]
fn iso_times_in_a_time_zone_count_at_their_local_day() {
    let dir = scratch_dir("stream-iso");
    std::fs::write(dir.join("schema.json"), SCHEMA).unwrap();
    std::fs::write(dir.join("spec.json"), SPEC).unwrap();
    let ledger = dir.join("ledger.jsonl");
    let init = dpmm(&[
        "ledger",
        "init",
        "--ledger",
        arg(&ledger),
        "--total-epsilon",
        "8",
        "--total-delta",
        "1e-6",
    ]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    const DAYS: usize = 365;
    let local_day = |s: i64| {
        let dst = (unix(2017, 3, 12, 8, 0)..unix(2017, 11, 5, 7, 0)).contains(&s);
        let offset = if dst { -5 } else { -6 } * 3_600;
        (s + offset - unix(2017, 1, 1, 0, 0)).div_euclid(86_400)
    };
    let mut text = String::from("when,sex,age\n");
    let mut per_day = vec![HashMap::<String, f64>::new(); DAYS];
    let mut state = 11u64;
    let (first, last) = (unix(2016, 12, 31, 0, 0), unix(2018, 1, 1, 12, 0));
    for i in 0..6_000 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // The last 40 records fall on the year's last evening, after 18:00
        // local time: in 2018 by UTC.
        let s = if i < 40 {
            unix(2018, 1, 1, 0, 30) + i * 60
        } else {
            first + (state >> 24) as i64 % (last - first)
        };
        let sex = ["f", "m"][(state >> 40) as usize % 2];
        let age = (state >> 44) % 100;
        // Written two ways: in UTC and at Chicago's standard offset.
        let when = match i % 2 {
            0 => format!("@{s}"),
            _ => format!("#{s}"),
        };
        text.push_str(&format!("{when},{sex},{age}\n"));
        let d = local_day(s);
        if (0..DAYS as i64).contains(&d) {
            for label in [
                format!("sex = {sex}"),
                format!("age = {age}"),
                format!("sex = {sex} & age = {age}"),
            ] {
                *per_day[d as usize].entry(label).or_default() += 1.0;
            }
        }
    }
    let text = rewrite_times(&text);
    std::fs::write(dir.join("records.csv"), text).unwrap();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let run = dpmm(&[
        "stream",
        "--data",
        &path("records.csv"),
        "--time-column",
        "when",
        "--steps",
        "365",
        "--step",
        "day",
        "--start",
        "2017-01-01",
        "--timezone",
        "America/Chicago",
        "--schema",
        &path("schema.json"),
        "--workload",
        &path("spec.json"),
        "--epsilon",
        "8",
        "--delta",
        "1e-6",
        "--ledger",
        arg(&ledger),
        "--out",
        &path("running.csv"),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = std::fs::read_to_string(dir.join("running.csv")).unwrap();
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("step,time,query,answer,std_error,ci_low,ci_high")
    );
    let mut running: HashMap<String, f64> = HashMap::new();
    let mut last_step = usize::MAX;
    let mut z = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let step: usize = f[0].parse().unwrap();
        if step != last_step {
            for (label, c) in &per_day[step] {
                *running.entry(label.clone()).or_default() += c;
            }
            last_step = step;
        }
        if step == 0 {
            assert_eq!(f[1], "2017-01-01");
        }
        if step == 364 {
            assert_eq!(f[1], "2017-12-31");
        }
        let truth = running.get(f[2]).copied().unwrap_or(0.0);
        let (answer, se): (f64, f64) = (f[3].parse().unwrap(), f[4].parse().unwrap());
        z.push((answer - truth) / se);
    }
    assert_eq!(z.len(), DAYS * 302);
    let n = z.len() as f64;
    let mean = z.iter().sum::<f64>() / n;
    let std = (z.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    assert!((0.85..=1.15).contains(&std), "z std {std}");
    assert!(mean.abs() < 0.15, "z mean {mean}");
}

/// `@S` as the UTC time `…Z` of Unix second `S`, `#S` as the same instant
/// at −06:00 (civil dates by hand: the inverse of `unix`).
fn rewrite_times(text: &str) -> String {
    let civil = |s: i64| {
        let z = s.div_euclid(86_400) + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = doy - (153 * mp + 2) / 5 + 1;
        let m = if mp < 10 { mp + 3 } else { mp - 9 };
        let y = yoe + era * 400 + i64::from(m <= 2);
        let r = s.rem_euclid(86_400);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
            r / 3600,
            r % 3600 / 60,
            r % 60
        )
    };
    text.lines()
        .map(|line| {
            let (when, rest) = line.split_once(',').unwrap();
            let when = if let Some(s) = when.strip_prefix('@') {
                format!("{}Z", civil(s.parse().unwrap()))
            } else if let Some(s) = when.strip_prefix('#') {
                format!("{}-06:00", civil(s.parse::<i64>().unwrap() - 6 * 3600))
            } else {
                when.to_string()
            };
            format!("{when},{rest}\n")
        })
        .collect()
}

/// `--nonneg`: running counts that are non-negative and non-decreasing in
/// every series, whose tables agree at every step (the 1-way margins are
/// the sums of the 2-way table), and no further from the truth than the
/// unbiased ones; written beside the output with the sidecar's account.
#[test]
fn nonneg_running_counts_are_monotone_consistent_and_no_worse() {
    let (dir, ledger, truth) = setup("nonneg");
    // A small budget: many unbiased running counts are negative or fall.
    // The projection's thousands of iterations take seconds in a debug
    // build, and many more on a loaded machine: a longer hang bound.
    let data = dir.join("records.csv");
    let args = stream_args(
        &dir,
        &ledger,
        arg(&data),
        &["--epsilon", "0.5", "--delta", "1e-6", "--nonneg"],
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = common::dpmm_within(&refs, std::time::Duration::from_secs(600));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let unbiased = rows(&dir);
    let text = std::fs::read_to_string(dir.join("running.nonneg.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("step,time,query,answer"));
    let mut series: HashMap<String, Vec<f64>> = HashMap::new();
    let mut at: HashMap<(usize, String), f64> = HashMap::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let (step, query, v): (usize, String, f64) = (
            f[0].parse().unwrap(),
            f[2].to_string(),
            f[3].parse().unwrap(),
        );
        series.entry(query.clone()).or_default().push(v);
        at.insert((step, query), v);
    }
    assert_eq!(at.len(), STEPS * 302);
    for (query, s) in &series {
        assert!(s.iter().all(|&v| v >= 0.0), "{query}");
        assert!(s.windows(2).all(|w| w[0] <= w[1]), "{query}: {s:?}");
    }
    let negative = unbiased.iter().filter(|r| r.2[0] < 0.0).count();
    assert!(
        negative > 100,
        "the test needs negative unbiased counts: {negative}"
    );
    // Consistency: sex = f is the sum over ages of (sex = f, age), up to
    // what the projection's last step moved each of the 101 cells (the
    // iterate returned is the cone's projection of a consistent one: each
    // cell within the sidecar's largest_adjustment of it).
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("running.csv.json")).unwrap())
            .unwrap();
    let moved = sidecar["nonneg"]["largest_adjustment"].as_f64().unwrap();
    for step in 0..STEPS {
        let one = at[&(step, "sex = f".to_string())];
        let two: f64 = (0..100)
            .map(|a| at[&(step, format!("sex = f & age = {a}"))])
            .sum();
        assert!(
            (one - two).abs() <= 1e-9 * one.max(1.0) + 101.0 * moved,
            "step {step}: {one} vs {two} (largest adjustment {moved})"
        );
    }
    let squared = |value: &dyn Fn(&Row) -> f64| -> f64 {
        unbiased
            .iter()
            .map(|r| {
                let t = truth.get(&(r.0, r.1.clone())).copied().unwrap_or(0.0);
                (value(r) - t).powi(2)
            })
            .sum()
    };
    let before = squared(&|r| r.2[0]);
    let after = squared(&|r| at[&(r.0, r.1.clone())]);
    assert!(after <= before, "nonneg {after} vs unbiased {before}");
    assert!(sidecar["nonneg"]["iterations"].as_u64().is_some());
}

/// A stream whose privacy unit is a person: each person's records are
/// kept in at most 2 steps at least 5 apart, at most 2 a step. People
/// within the bound are counted whole (the running counts are unbiased
/// against the truth, with standard errors for the larger sensitivity);
/// one person with 50 records in 50 steps moves a running count by at
/// most 4; the sidecar states the bound. Under (ε, δ) and pure ε alike.
#[test]
fn a_person_with_many_records_is_bounded_in_steps_and_records() {
    let (dir, _, _) = setup("units");
    let mut text = String::from("day,sex,age,person\n");
    let mut counts: HashMap<String, f64> = HashMap::new();
    let mut truth: HashMap<(usize, String), f64> = HashMap::new();
    let mut state = 11u64;
    let mut person = 0u64;
    let mut at: Vec<Vec<(String, u64)>> = vec![Vec::new(); STEPS];
    // 600 people, each with 1–2 records in each of 2 steps 5 to 20 apart.
    for _ in 0..600 {
        person += 1;
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let first = (state >> 33) as usize % (STEPS - 21);
        let second = first + 5 + (state >> 45) as usize % 16;
        for step in [first, second] {
            for _ in 0..1 + (state >> 50) % 2 {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let sex = if (state >> 33).is_multiple_of(3) {
                    "m"
                } else {
                    "f"
                };
                at[step].push((format!("{sex},{}", (state >> 40) % 100), person));
            }
        }
    }
    for (step, rows) in at.iter().enumerate() {
        for (row, p) in rows {
            text.push_str(&format!("{},{row},{p}\n", 100 + step));
            let (sex, age) = row.split_once(',').unwrap();
            for label in [
                format!("sex = {sex}"),
                format!("age = {age}"),
                format!("sex = {sex} & age = {age}"),
            ] {
                *counts.entry(label).or_default() += 1.0;
            }
        }
        for (label, c) in &counts {
            truth.insert((step, label.clone()), *c);
        }
        // The heavy person: one record in every step but two.
        if step < 50 - 2 {
            text.push_str(&format!("{},f,30,heavy\n", 100 + step));
        }
    }
    std::fs::write(dir.join("records.csv"), &text).unwrap();
    let unit = [
        "--privacy-unit",
        "person",
        "--max-records-per-unit",
        "2",
        "--max-steps-per-unit",
        "2",
        "--min-separation",
        "5",
    ];
    for (name, privacy, init) in [
        (
            "approx",
            vec!["--epsilon", "2", "--delta", "1e-6"],
            vec!["--total-epsilon", "2", "--total-delta", "1e-6"],
        ),
        ("pure", vec!["--epsilon", "2"], vec!["--total-epsilon", "2"]),
    ] {
        let ledger = dir.join(format!("{name}.jsonl"));
        let mut args = vec!["ledger", "init", "--ledger", arg(&ledger)];
        args.extend(&init);
        assert_eq!(dpmm(&args).code, 0);
        let run = run_stream(&dir, &ledger, &[&privacy[..], &unit[..]].concat());
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        let rows = rows(&dir);
        // The heavy person moves a count by at most 4 (2 steps × 2).
        let (mean, std, coverage) = z_scores(&rows, &truth);
        assert!((0.85..=1.15).contains(&std), "{name}: z-score std {std}");
        assert!(mean.abs() < 0.15, "{name}: z-score mean {mean}");
        assert!(
            (0.9..=0.99).contains(&coverage),
            "{name}: coverage {coverage}"
        );
        let sidecar: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("running.csv.json")).unwrap())
                .unwrap();
        let unit = &sidecar["privacy_unit"];
        assert_eq!(
            (
                &unit["column"],
                &unit["max_records_per_unit"],
                &unit["max_steps_per_unit"],
                &unit["min_separation"]
            ),
            (
                &serde_json::json!("person"),
                &serde_json::json!(2),
                &serde_json::json!(2),
                &serde_json::json!(5)
            )
        );
        // The sensitivity is that of 2 participations of 2 records in 3
        // tables: L1 2 × 2 × 3 × levels for the tree; for the Gaussian
        // (the steps closer than its bands) 2 × √(2² × 3) times the norm
        // of C̃'s first column, which is at least 1 (c₀ = 1).
        if name == "pure" {
            let levels = sidecar["levels"].as_f64().unwrap();
            assert_eq!(sidecar["sensitivity"].as_f64().unwrap(), 12.0 * levels);
        } else {
            assert!(sidecar["sensitivity"].as_f64().unwrap() >= 2.0 * 12f64.sqrt());
            assert_eq!(sidecar["sensitivity_exact"], false);
        }
    }
    // A unit without a step bound, and weights, are refused before the
    // charge.
    let ledger = dir.join("approx.jsonl");
    let spent = status(&ledger).releases;
    for extra in [
        &["--privacy-unit", "person", "--max-records-per-unit", "2"][..],
        &["--max-steps-per-unit", "2"][..],
    ] {
        let run = run_stream(
            &dir,
            &ledger,
            &[&["--epsilon", "0.1", "--delta", "1e-6"][..], extra].concat(),
        );
        assert!(run.is_refusal(), "{extra:?}: {}", run.stderr);
        assert_eq!(status(&ledger).releases, spent);
    }
}

/// `--report`: one self-contained page with the privacy lines and, per
/// table of the workload, its running counts in their 95% bands (the
/// eight cells of the largest last count), the non-negative ones dashed;
/// written with the other outputs, and refused on a path of another
/// output before the charge.
#[test]
fn the_report_draws_every_table_of_running_counts_in_its_bands() {
    let (dir, ledger, _) = setup("report");
    let report = dir.join("stream.html");
    let approx = ["--epsilon", "1", "--delta", "1e-6", "--nonneg"];
    let run = run_stream(
        &dir,
        &ledger,
        &[&approx[..], &["--report", arg(&report)]].concat(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script") && !html.contains("http"));
    // Three tables (sex, age, sex × age): 2 + 8 + 8 lines, each a band,
    // a line and a dashed non-negative line.
    assert_eq!(html.matches("<svg").count(), 3);
    assert_eq!(html.matches("<polygon").count(), 18);
    assert_eq!(html.matches("stroke-dasharray").count(), 18);
    assert!(html.contains("the column") || html.contains("one record"));
    // The largest last running count of the sex table is drawn first, as
    // the CSV has it.
    let rows = rows(&dir);
    let last = |label: &str| {
        rows.iter()
            .find(|r| r.0 == STEPS - 1 && r.1 == label)
            .unwrap()
            .2[0]
    };
    let first = if last("sex = f") >= last("sex = m") {
        "sex = f"
    } else {
        "sex = m"
    };
    let at = html.find("<h3>sex</h3>").unwrap();
    assert!(html[at..].find(&format!(">{first}<")).is_some());
    // A report on another output's path is refused, spending nothing.
    let releases = status(&ledger).releases;
    let out = dir.join("running.csv");
    let clash = run_stream(
        &dir,
        &ledger,
        &[&approx[..], &["--report", arg(&out)]].concat(),
    );
    assert!(clash.is_refusal(), "{}", clash.stderr);
    assert_eq!(status(&ledger).releases, releases);
}
