//! `dpmm release` and `dpmm ledger` as a curator runs them: a release
//! writes one row per query; every bad input gives one line on stderr,
//! exit status 2, no answers file and an unchanged ledger.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{SEX_AGE_MIXED_SPEC as SPEC, SEX_AGE_SCHEMA as SCHEMA};

/// 2 + 4 + 8 + 4 queries.
const QUERIES: usize = 18;

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("dpmm-release-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let d = Dir(dir);
        d.write("schema.json", SCHEMA);
        d.write("spec.json", SPEC);
        d.write("records.csv", &records());
        d
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().expect("utf-8").to_string()
    }
    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.0.join(name), text).expect("write");
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn records() -> String {
    let mut s = String::from("id,sex,age\n");
    for i in 0..300 {
        let sex = if i % 3 == 0 { "m" } else { "f" };
        s.push_str(&format!("{i},{sex},{}\n", 20 + (i * 7) % 40));
    }
    s
}

/// The true answers of `SPEC` on `records()`, in workload order: sex,
/// age, sex × age (row-major), age prefixes.
fn true_answers() -> Vec<f64> {
    let mut table = [[0.0; 4]; 2];
    for i in 0..300 {
        table[usize::from(i % 3 == 0)][(i * 7) % 40 / 10] += 1.0;
    }
    let sex: Vec<f64> = table.iter().map(|r| r.iter().sum()).collect();
    let age: Vec<f64> = (0..4).map(|a| table[0][a] + table[1][a]).collect();
    let prefix: Vec<f64> = (0..4).map(|a| age[..=a].iter().sum()).collect();
    let cells: Vec<f64> = table.iter().flatten().copied().collect();
    [sex, age.clone(), cells, prefix].concat()
}

fn dpmm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpmm"))
        .args(args)
        .output()
        .expect("run dpmm")
}

/// Asserts that a run succeeded, showing its stderr otherwise.
fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A scratch directory `name` with a new ledger of total ε `total`.
fn dir_with_ledger(name: &str, total: &str) -> (Dir, String) {
    let d = Dir::new(name);
    let ledger = d.path("ledger.jsonl");
    init_ledger(&ledger, total);
    (d, ledger)
}

/// A new pure ε-DP ledger of `total` at `ledger`.
fn init_ledger(ledger: &str, total: &str) {
    assert_ok(&dpmm(&[
        "ledger",
        "init",
        "--ledger",
        ledger,
        "--total-epsilon",
        total,
    ]));
}

/// `dpmm release` charging `ledger` and writing `out`, with `extra` flags;
/// `--schema`, `--workload` (unless `--plan`), `--data` (unless
/// `--counts`) and `--epsilon` default to `d`'s files and 0.6 when `extra`
/// does not give them.
fn release(d: &Dir, ledger: &str, out: &str, extra: &[&str]) -> Output {
    let defaults = [
        ("--schema", d.path("schema.json")),
        ("--workload", d.path("spec.json")),
        ("--data", d.path("records.csv")),
        ("--epsilon", "0.6".to_string()),
    ];
    let mut args = vec!["release", "--ledger", ledger, "--out", out];
    for (flag, value) in &defaults {
        let given = extra.iter().any(|e| e.starts_with(flag))
            || (*flag == "--data" && extra.contains(&"--counts"))
            || (*flag == "--workload" && extra.contains(&"--plan"));
        if !given {
            args.extend([*flag, value.as_str()]);
        }
    }
    args.extend(extra);
    dpmm(&args)
}

/// Exit 2, exactly one line on stderr, no answers file, ledger unchanged.
fn assert_refused(out: &Output, answers: &str, ledger: &str, before: &[u8], what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
    assert!(!Path::new(answers).exists(), "{what}: answers written");
    assert!(
        !Path::new(&format!("{answers}.json")).exists(),
        "{what}: sidecar written"
    );
    assert_eq!(
        std::fs::read(ledger).expect("ledger"),
        before,
        "{what}: ledger changed"
    );
}

#[test]
fn a_release_succeeds_then_the_ledger_refuses_an_overspend() {
    let (d, ledger) = dir_with_ledger("overspend", "1");
    let first = d.path("first.csv");
    let out = release(&d, &ledger, &first, &[]);
    assert_ok(&out);
    let text = std::fs::read_to_string(&first).expect("answers");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "query,answer,std_error,ci_low,ci_high");
    assert_eq!(lines.len(), 1 + QUERIES);
    // Workload order and readable descriptions from the schema.
    assert!(lines[1].starts_with("sex = f,"), "{}", lines[1]);
    // (quoted: the interval holds a comma)
    assert!(lines[3].starts_with("\"age in [20, 30)\","), "{}", lines[3]);
    assert!(
        lines[7].starts_with("\"sex = f & age in [20, 30)\","),
        "{}",
        lines[7]
    );
    assert!(
        lines[18].starts_with("\"age in [20, 60)\","),
        "{}",
        lines[18]
    );
    let truth = true_answers();
    for (l, t) in lines[1..].iter().zip(&truth) {
        let f: Vec<f64> = l
            .rsplitn(5, ',')
            .take(4)
            .map(|v| v.parse().expect("number"))
            .collect();
        // f = [ci_high, ci_low, std_error, answer]
        assert!(f[2] > 0.0 && f[1] < f[3] && f[3] < f[0], "{l}");
        // Symmetric, between the normal quantile (many draws) and a
        // single Laplace draw's, ln(20)/√2 (dp_core::intervals).
        let (up, down) = (f[0] - f[3], f[3] - f[1]);
        assert!((up - down).abs() <= 1e-9 * f[0].abs().max(1.0), "{l}");
        assert!(up >= 1.959_963 * f[2] && up <= 2.118_303 * f[2], "{l}");
        // The counts of `records()`, counted here: within 6 standard
        // errors (a false alarm below 1e-4 over the 18 queries even for
        // Laplace tails).
        assert!((f[3] - t).abs() <= 6.0 * f[2], "{l}: truth {t}");
    }
    let side: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{first}.json")).expect("sidecar"))
            .expect("json");
    assert_eq!(side["ledger"]["entry"], 1);
    assert_eq!(side["charged"], 0.6);
    assert_eq!(side["queries"], QUERIES);
    assert_eq!(side["variances"], "exact");
    let intervals = side["intervals"].as_str().expect("intervals");
    assert!(intervals.contains("variance-gamma") && intervals.contains("discrete Laplace"));
    // Nothing about the data on stderr: no digits but the ledger entry,
    // and the note on dropped records says no figure.
    let err = String::from_utf8_lossy(&out.stderr);
    let (notes, lines): (Vec<&str>, Vec<&str>) = err.lines().partition(|l| l.starts_with("note: "));
    assert_eq!(notes.len(), 1, "{err}");
    assert!(!notes[0].contains(|c: char| c.is_ascii_digit()), "{err}");
    let lines = lines.join("\n");
    assert!(
        !lines.contains("300") && !lines.contains("records"),
        "{err}"
    );

    let before = std::fs::read(&ledger).expect("ledger");
    let second = d.path("second.csv");
    let out = release(&d, &ledger, &second, &[]);
    assert_refused(&out, &second, &ledger, &before, "overspend");
    let show = dpmm(&["ledger", "show", "--ledger", &ledger]);
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.status.success() && shown.contains("pure ε-DP"),
        "{shown}"
    );
}

#[test]
fn every_bad_input_is_one_line_exit_two_and_spends_nothing() {
    let (d, ledger) = dir_with_ledger("bad", "5");
    let before = std::fs::read(&ledger).expect("ledger");
    let out_path = d.path("answers.csv");
    d.write("malformed.csv", "sex,age\nf,25\nm,31,extra\n");
    d.write("unknown_column.csv", "sex,years\nf,25\n");
    d.write("outside.csv", "sex,age\nf,25\nm,75\n");
    // Drop is the default; these refusals need the explicit opt-in.
    d.write(
        "strict.json",
        &SCHEMA
            .replace(r#"{"domain""#, r#"{"malformed": "error", "domain""#)
            .replace(
                r#"{"start": 20, "stop": 60, "width": 10}"#,
                r#"{"start": 20, "stop": 60, "width": 10}, "outside": "error""#,
            ),
    );
    // Parquet's magic bytes: refused without the feature, and not a valid
    // file with it.
    d.write("not_really.parquet", "PAR1sex,age\nf,25\n");
    d.write(
        "bad_spec.json",
        r#"{"domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 4}],
            "queries": [{"marginal": ["income"]}]}"#,
    );
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "malformed row",
            vec![
                "--data".into(),
                d.path("malformed.csv"),
                "--schema".into(),
                d.path("strict.json"),
            ],
        ),
        (
            "unknown column",
            vec!["--data".into(), d.path("unknown_column.csv")],
        ),
        (
            "outside the domain",
            vec![
                "--data".into(),
                d.path("outside.csv"),
                "--schema".into(),
                d.path("strict.json"),
            ],
        ),
        (
            "parquet",
            vec!["--data".into(), d.path("not_really.parquet")],
        ),
        ("epsilon 0", vec!["--epsilon".into(), "0".into()]),
        ("epsilon negative", vec!["--epsilon=-1".into()]),
        (
            "epsilon negative, own word",
            vec!["--epsilon".into(), "-1".into()],
        ),
        ("delta 1", vec!["--delta".into(), "1".into()]),
    ];
    for (what, extra) in &cases {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let out = release(&d, &ledger, &out_path, &extra);
        assert_refused(&out, &out_path, &ledger, &before, what);
        if what.starts_with("epsilon") {
            // The line names the flag's value, not a parse of "-1" as a flag.
            assert!(String::from_utf8_lossy(&out.stderr).contains("epsilon"));
        }
    }
    // A spec naming an attribute the domain lacks.
    let bad_spec = d.path("bad_spec.json");
    let out = release(&d, &ledger, &out_path, &["--workload", &bad_spec]);
    assert_refused(&out, &out_path, &ledger, &before, "missing attribute");
    // Answers that could not be written: refused before the charge.
    let unwritable = d.path("no_such_dir/answers.csv");
    let out = release(&d, &ledger, &unwritable, &[]);
    assert_refused(
        &out,
        &unwritable,
        &ledger,
        &before,
        "output directory missing",
    );
    // An output that is a directory, or that names the ledger itself.
    let out = release(&d, &ledger, &d.path(""), &[]);
    assert_eq!(out.status.code(), Some(2), "output is a directory");
    assert_eq!(std::fs::read(&ledger).expect("ledger"), before);
    let out = release(&d, &ledger, &ledger, &[]);
    assert_eq!(out.status.code(), Some(2), "output is the ledger");
    assert_eq!(std::fs::read(&ledger).expect("ledger"), before);
    // A corrupted ledger: one byte of the budget edited.
    let text = String::from_utf8(before.clone()).expect("utf-8");
    let edited = text.replacen("5.0", "9.0", 1);
    assert_ne!(edited, text);
    std::fs::write(&ledger, &edited).expect("edit");
    let out = release(&d, &ledger, &out_path, &[]);
    assert_refused(
        &out,
        &out_path,
        &ledger,
        edited.as_bytes(),
        "corrupted ledger",
    );
}

/// The README's main job on the embedded census extract, from a fresh
/// folder: `ledger init` creates the results folder, `release` writes one
/// row per 2-way marginal cell (Σ over attribute pairs of the product of
/// their sizes, counted here from the spec's domain) with finite answers
/// and intervals that contain them, and a second release is refused.
#[test]
fn the_readme_main_job_runs_on_the_embedded_extract() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let file = |p: &str| root.join(p).to_str().expect("utf-8").to_string();
    let (data, schema, spec) = (
        file("datasets/fertility1980.csv.gz"),
        file("examples/fertility1980/schema.json"),
        file("examples/fertility1980/spec.json"),
    );
    let d = Dir::new("readme");
    let ledger = d.path("results/fertility1980/ledger.jsonl");
    let answers = d.path("results/fertility1980/answers.csv");
    init_ledger(&ledger, "1");
    let inputs = [
        "--data",
        &data,
        "--schema",
        &schema,
        "--workload",
        &spec,
        "--epsilon",
        "1",
    ];
    assert_ok(&release(&d, &ledger, &answers, &inputs));

    let spec_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&spec).expect("spec")).expect("json");
    let sizes: Vec<usize> = spec_json["domain"]
        .as_array()
        .expect("domain")
        .iter()
        .map(|a| a["size"].as_u64().expect("size") as usize)
        .collect();
    let expected: usize = (0..sizes.len())
        .flat_map(|i| (i + 1..sizes.len()).map(move |j| (i, j)))
        .map(|(i, j)| sizes[i] * sizes[j])
        .sum();
    let text = std::fs::read_to_string(&answers).expect("answers");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("query,answer,std_error,ci_low,ci_high"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), expected);
    for row in &rows {
        // The query text has no comma here: five plain fields.
        let f: Vec<f64> = row
            .split(',')
            .skip(1)
            .map(|v| v.parse().expect("number"))
            .collect();
        assert!(f.iter().all(|v| v.is_finite()) && f[1] > 0.0, "{row}");
        assert!(f[2] <= f[0] && f[0] <= f[3], "{row}");
    }
    let before = std::fs::read(&ledger).expect("ledger");
    let again = release(&d, &ledger, &answers, &inputs);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(std::fs::read(&ledger).expect("ledger"), before);
}

/// The first field (the query's description) of every answer row.
fn query_column(answers: &str) -> Vec<String> {
    let text = std::fs::read_to_string(answers).expect("answers");
    let queries = text.lines().skip(1).map(|l| match l.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next().unwrap_or_default().to_string(),
        None => l.split(',').next().unwrap_or_default().to_string(),
    });
    queries.collect()
}

#[test]
fn a_plan_file_alone_carries_its_workload_and_must_match_the_schema() {
    let (d, ledger) = dir_with_ledger("plan-alone", "5");
    // A spec with a matrix factor: the plan must not need its file later.
    let rows = [[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]];
    let npy = d.0.join("pairs.npy");
    let pairs = dp_linalg::Mat::from_fn(2, 4, |i, j| rows[i][j]);
    dp_workloads::npy::write_matrix(&npy, pairs.as_ref()).expect("npy");
    d.write(
        "matrix_spec.json",
        &SPEC.replace(
            r#"{"kron": {"age": "prefix"}}"#,
            r#"{"kron": {"age": "prefix"}}, {"kron": {"sex": "identity", "age": {"matrix": "pairs.npy"}}}"#,
        ),
    );
    let plan = d.path("plan.json");
    let spec = d.path("matrix_spec.json");
    assert_ok(&dpmm(&[
        "plan",
        "--workload",
        &spec,
        "--privacy",
        "pure",
        "--epsilon",
        "1",
        "--out",
        &plan,
    ]));
    std::fs::remove_file(&npy).expect("remove the matrix file");
    let alone = d.path("alone.csv");
    assert_ok(&release(&d, &ledger, &alone, &["--plan", &plan]));
    let with_spec = d.path("with_spec.csv");
    let spec_again = d.path("spec.json");
    assert_ok(&release(
        &d,
        &ledger,
        &with_spec,
        &["--plan", &plan, "--workload", &spec_again],
    ));
    let (a, b) = (query_column(&alone), query_column(&with_spec));
    // The plan's own workload: the spec's queries, then 2 × 2 matrix rows.
    assert_eq!(a.len(), QUERIES + 4);
    assert_eq!(a[..QUERIES], b[..]);
    assert_eq!(a[QUERIES], "sex = f & row 0 of the matrix on age");

    let before = std::fs::read(&ledger).expect("ledger");
    // A schema whose domain is not the plan's: one line, nothing spent.
    d.write(
        "schema5.json",
        &SCHEMA.replace(r#""stop": 60"#, r#""stop": 70"#),
    );
    let out = d.path("refused.csv");
    let schema5 = d.path("schema5.json");
    let run = release(&d, &ledger, &out, &["--plan", &plan, "--schema", &schema5]);
    assert_refused(&run, &out, &ledger, &before, "plan domain");
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("the plan's domain is not the schema's"),
        "{err}"
    );
    // A plan without its workload (as `cargo xtask plan` writes) needs
    // --workload.
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).expect("plan")).expect("json");
    file.as_object_mut().expect("object").remove("workload");
    d.write("bare_plan.json", &file.to_string());
    let bare = d.path("bare_plan.json");
    let run = release(&d, &ledger, &out, &["--plan", &bare]);
    assert_refused(&run, &out, &ledger, &before, "bare plan");
    assert!(String::from_utf8_lossy(&run.stderr).contains("--workload"));
    assert_ok(&release(
        &d,
        &ledger,
        &out,
        &["--plan", &bare, "--workload", &spec_again],
    ));

    // Broken plan files: one line each, naming what is wrong, nothing
    // spent.
    let before = std::fs::read(&ledger).expect("ledger");
    let out = d.path("broken.csv");
    let full: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).expect("plan")).expect("json");
    type Break = fn(&mut serde_json::Value);
    let broken: [(&str, Break, &str); 7] = [
        ("version", |f| f["version"] = 3.into(), "version 3"),
        (
            "matrix index",
            |f| {
                let factors = f["terms"][0]["factors"].as_object_mut().expect("factors");
                *factors.values_mut().next().expect("a factor") = 999.into();
            },
            "names matrix 999",
        ),
        (
            "privacy",
            |f| f["privacy"] = "laplace".into(),
            "privacy must be",
        ),
        ("terms", |f| f["terms"] = serde_json::json!([]), "non-empty"),
        (
            "objective",
            |f| {
                f.as_object_mut().expect("object").remove("objective");
            },
            "missing field `objective`",
        ),
        (
            "row length",
            |f| {
                let factors = f["terms"][0]["factors"].as_object_mut().expect("factors");
                let rows = factors.values_mut().next().expect("a factor");
                *rows = serde_json::json!([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]]);
            },
            "entries",
        ),
        (
            "factor type",
            |f| {
                let factors = f["terms"][0]["factors"].as_object_mut().expect("factors");
                let rows = factors.values_mut().next().expect("a factor");
                *rows = "identity".into();
            },
            "not a plan file",
        ),
    ];
    for (what, break_it, says) in broken {
        let mut file = full.clone();
        break_it(&mut file);
        d.write("broken_plan.json", &file.to_string());
        let run = release(&d, &ledger, &out, &["--plan", &d.path("broken_plan.json")]);
        assert_refused(&run, &out, &ledger, &before, what);
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains(says), "{what}: {err}");
    }
    // The same attribute named twice in one term (a repeated key, which a
    // JSON object may hold).
    let (name, rows) = full["terms"][0]["factors"]
        .as_object()
        .and_then(|f| f.iter().next())
        .expect("a factor");
    let twice = full.to_string().replacen(
        r#""factors":{"#,
        &format!(r#""factors":{{"{name}":{rows},"#),
        1,
    );
    d.write("broken_plan.json", &twice);
    let run = release(&d, &ledger, &out, &["--plan", &d.path("broken_plan.json")]);
    assert_refused(&run, &out, &ledger, &before, "attribute twice");
    assert!(String::from_utf8_lossy(&run.stderr).contains("named twice"));
    assert_refused(&run, &out, &ledger, &before, "attribute twice");
}

/// Records read from a pipe (`--data /dev/stdin`): the Parquet check must
/// not eat the first bytes of the CSV header.
#[test]
fn a_release_reads_records_from_a_pipe() {
    use std::io::Write;
    use std::process::Stdio;
    let (d, ledger) = dir_with_ledger("pipe", "1");
    let out = d.path("answers.csv");
    let mut child = Command::new(env!("CARGO_BIN_EXE_dpmm"))
        .args(["release", "--ledger", &ledger, "--out", &out])
        .args(["--schema", &d.path("schema.json")])
        .args(["--workload", &d.path("spec.json")])
        .args(["--data", "/dev/stdin", "--epsilon", "0.5"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run dpmm");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(records().as_bytes()).expect("pipe");
    drop(stdin);
    let run = child.wait_with_output().expect("wait");
    assert_ok(&run);
    let text = std::fs::read_to_string(&out).expect("answers");
    assert_eq!(text.lines().count(), 1 + QUERIES);
}

/// The standard errors of an answers CSV, in query order.
fn std_errors(answers: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(answers).expect("answers");
    text.lines()
        .skip(1)
        .map(|l| {
            l.rsplit(',')
                .nth(2)
                .expect("field")
                .parse()
                .expect("number")
        })
        .collect()
}

/// A max-variance plan released under (ε, δ): the sidecar names the
/// objective, and the error bars are the strategy's — the worst query's
/// `std_error² · Δ₂²/σ²` is the plan's objective `max_q Δ₂² q(AᵀA)⁺qᵀ`
/// (up to the kernel's quantization of the strategy: at most 30 bits per
/// factor on two attributes, far inside 1e-6). `--objective` beside
/// `--plan` is refused: the file states its own.
#[test]
fn a_max_variance_plan_releases_with_its_strategy_error_bars() {
    let d = Dir::new("max-variance");
    d.write(
        "marginals.json",
        &SPEC.replace(r#", {"kron": {"age": "prefix"}}"#, ""),
    );
    // One zCDP ledger for both releases: the second reopens it with the
    // first's ρ charged.
    let ledger = d.path("ledger.jsonl");
    let init = [
        "ledger",
        "init",
        "--ledger",
        &ledger,
        "--total-epsilon",
        "5",
    ];
    assert_ok(&dpmm(&[&init[..], &["--total-delta", "1e-5"]].concat()));
    let (spec, plan) = (d.path("marginals.json"), d.path("plan.json"));
    let mut args = vec![
        "plan",
        "--workload",
        &spec,
        "--objective",
        "max",
        "--out",
        &plan,
    ];
    args.extend(["--privacy", "approx", "--epsilon", "1", "--delta", "1e-6"]);
    assert_ok(&dpmm(&args));
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).expect("plan")).expect("json");
    let objective = file["objective"].as_f64().expect("objective");
    for (name, extra) in [
        ("from-file", vec!["--plan", &plan, "--delta", "1e-6"]),
        (
            "planned-now",
            vec!["--workload", &spec, "--objective", "max", "--delta", "1e-6"],
        ),
    ] {
        let out = d.path(&format!("{name}.csv"));
        assert_ok(&release(&d, &ledger, &out, &extra));
        let side: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(format!("{out}.json")).expect("sidecar"))
                .expect("json");
        assert_eq!(side["plan"]["objective_name"], "max_variance", "{name}");
        let v = side["noise_variance_per_row"].as_f64().expect("variance");
        let sens = side["sensitivity"].as_f64().expect("sensitivity");
        let errors = std_errors(&out);
        assert_eq!(errors.len(), 2 + 4 + 8);
        let worst = errors
            .iter()
            .map(|e| e * e * sens * sens / v)
            .fold(0.0, f64::max);
        assert!(
            (worst - objective).abs() <= 1e-6 * objective,
            "{name}: {worst} vs {objective}"
        );
    }
    let before = std::fs::read(&ledger).expect("ledger");
    let out = d.path("refused.csv");
    let run = release(
        &d,
        &ledger,
        &out,
        &["--plan", &plan, "--objective", "max", "--delta", "1e-6"],
    );
    assert_refused(&run, &out, &ledger, &before, "--objective with --plan");
}

/// The sidecar of a release `d` made with `extra` flags.
fn sidecar_of(d: &Dir, name: &str, extra: &[&str]) -> serde_json::Value {
    let ledger = d.path(&format!("{name}.jsonl"));
    init_ledger(&ledger, "5");
    let out = d.path(&format!("{name}.csv"));
    let run = release(d, &ledger, &out, extra);
    assert_ok(&run);
    let text = std::fs::read_to_string(format!("{out}.json")).expect("sidecar");
    serde_json::from_str(&text).expect("json")
}

/// Without `--privacy-unit` the sidecar says the unit is one record; with
/// it, the column and the bound, and the sensitivity (and every standard
/// error) is K times the record's; with `--weight`, W times.
#[test]
fn the_sidecar_states_the_privacy_unit_and_weights() {
    let d = Dir::new("unit");
    let mut text = String::from("person,sex,age,w\n");
    for i in 0..300 {
        let sex = if i % 3 == 0 { "m" } else { "f" };
        text.push_str(&format!(
            "{},{sex},{},{}\n",
            i % 100,
            20 + (i * 7) % 40,
            i % 4
        ));
    }
    d.write("people.csv", &text);
    let data = d.path("people.csv");
    let plain = sidecar_of(&d, "plain", &["--data", &data]);
    let unit = plain["privacy_unit"].as_str().expect("a sentence");
    assert!(unit.starts_with("one record"), "{unit}");
    assert!(plain["weights"].is_null());
    let bounded = sidecar_of(
        &d,
        "bounded",
        &[
            "--data",
            &data,
            "--privacy-unit",
            "person",
            "--max-records-per-unit",
            "3",
        ],
    );
    assert_eq!(bounded["privacy_unit"]["column"], "person");
    assert_eq!(bounded["privacy_unit"]["max_records_per_unit"], 3);
    let sensitivity = |v: &serde_json::Value| v["sensitivity"].as_f64().expect("sensitivity");
    assert_eq!(sensitivity(&bounded), 3.0 * sensitivity(&plain));
    let weighted = sidecar_of(
        &d,
        "weighted",
        &["--data", &data, "--weight", "w", "--max-weight", "2.5"],
    );
    assert_eq!(weighted["weights"]["max_weight"], 2.5);
    // 2.5 is on its grid (2^2 / 2^16): the sensitivity is exactly 2.5 times.
    assert_eq!(sensitivity(&weighted), 2.5 * sensitivity(&plain));
    let errors = |name: &str| std_errors(&d.path(name));
    for (a, b) in errors("plain.csv").iter().zip(errors("weighted.csv")) {
        assert!((b / a - 2.5).abs() < 1e-9, "{a} {b}");
    }
    for (a, b) in errors("plain.csv").iter().zip(errors("bounded.csv")) {
        assert!((b / a - 3.0).abs() < 1e-9, "{a} {b}");
    }
}

/// A privacy unit or weight that cannot be honoured is refused before the
/// charge: a counts table (its rows are no one), a column the data lacks,
/// a bound out of range.
#[test]
fn a_privacy_unit_or_weight_that_cannot_be_honoured_is_refused() {
    let (d, ledger) = dir_with_ledger("unit-bad", "5");
    let before = std::fs::read(&ledger).expect("ledger");
    let out_path = d.path("answers.csv");
    d.write("table.csv", "sex,age,count\nf,25,3\n");
    let table = d.path("table.csv");
    let cases: [(&str, Vec<&str>); 8] = [
        (
            "unit on a counts table",
            vec![
                "--counts",
                &table,
                "--privacy-unit",
                "sex",
                "--max-records-per-unit",
                "2",
            ],
        ),
        (
            "weight on a counts table",
            vec!["--counts", &table, "--weight", "age", "--max-weight", "2"],
        ),
        (
            "missing unit column",
            vec!["--privacy-unit", "person", "--max-records-per-unit", "2"],
        ),
        (
            "missing weight column",
            vec!["--weight", "w", "--max-weight", "2"],
        ),
        (
            "K = 0",
            vec!["--privacy-unit", "id", "--max-records-per-unit", "0"],
        ),
        ("W = 0", vec!["--weight", "id", "--max-weight", "0"]),
        ("W = inf", vec!["--weight", "id", "--max-weight", "inf"]),
        ("unit without K", vec!["--privacy-unit", "id"]),
    ];
    for (what, extra) in &cases {
        let out = release(&d, &ledger, &out_path, extra);
        assert_refused(&out, &out_path, &ledger, &before, what);
    }
}
