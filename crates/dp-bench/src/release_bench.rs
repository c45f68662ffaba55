//! `cargo xtask bench release`: the real `dpmm release` binary on
//! generated survey records, plain CSV, gzip'ed CSV and a pre-aggregated
//! counts table, at several record counts side by side: records per second
//! (wall and CPU time of the child) and the child's peak resident memory,
//! which must not grow with the number of records (issue 20's scale bar).
//!
//! The records are written to a scratch directory under the system's
//! temporary directory and deleted at the end. They follow a survey-like
//! schema ([`SCHEMA`]): three categorical attributes (one with values
//! outside its domain, two with missing values), two binned numeric ones
//! (ages past the last bin, incomes that are not numbers), and a record id
//! the schema does not read — every irregular value under the `drop`
//! policy, so the release exercises the filter (on about a quarter of the
//! rows, mostly incomes past the last bin).
//!
//! The strategy is planned once (`dpmm plan`, data-independent) and each
//! release reads it with `--plan`, so the time is the release's own: read,
//! aggregate, charge a fresh ledger, measure, reconstruct, write.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dp_core::{DpError, Result};
use flate2::{Compression, write::GzEncoder};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::procfs::{self, Pid};

/// The records schema of the generated survey (docs/formats.md).
pub const SCHEMA: &str = r#"{"domain": [
  {"name": "sex", "column": "sex", "values": ["female", "male"], "missing": "drop"},
  {"name": "age", "column": "age", "bins": {"start": 0, "stop": 100, "width": 5}, "outside": "drop"},
  {"name": "region", "column": "region", "values": ["northeast", "midwest", "south", "west"], "outside": "drop"},
  {"name": "education", "column": "education",
   "values": ["none", "primary", "secondary", "bachelor", "graduate"], "missing": "drop"},
  {"name": "income", "column": "income", "bins": [0, 10000, 25000, 50000, 75000, 100000, 150000, 250000],
   "outside": "drop", "unparsable": "drop", "missing": "drop"}
]}"#;

/// The workload: every 2-way marginal, and age prefixes (cumulative age
/// distribution) by sex.
pub const SPEC: &str = r#"{"domain": [
  {"name": "sex", "size": 2}, {"name": "age", "size": 20}, {"name": "region", "size": 4},
  {"name": "education", "size": 5}, {"name": "income", "size": 7}],
 "queries": [{"marginals": {"k": 2}}, {"kron": {"sex": "identity", "age": "prefix"}}]}"#;

const SEX: [&str; 3] = ["female", "male", ""];
const REGION: [&str; 5] = ["northeast", "midwest", "south", "west", "unknown"];
const EDUCATION: [&str; 6] = ["none", "primary", "secondary", "bachelor", "graduate", "NA"];
/// Incomes are multiples of 5,000 up to 300,000 (past the last bin edge),
/// or this marker (not a number).
const INCOME_STEPS: u32 = 61;

/// One generated record, as indices into the raw value lists (the raw
/// values, not the schema's cells: what a GROUP BY in a database sees).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Raw {
    sex: u8,
    age: u8,
    region: u8,
    education: u8,
    /// `INCOME_STEPS` stands for the unparsable marker.
    income: u8,
}

impl Raw {
    /// A draw: 2% missing sex, 0.5% unknown region, 1% missing education,
    /// 1% unparsable income; ages past 99 and incomes past 249,999 fall
    /// outside the bins.
    fn draw(rng: &mut StdRng) -> Self {
        let pick = |rng: &mut StdRng, irregular: f64, regular: u8| {
            if rng.random_bool(irregular) {
                regular
            } else {
                rng.random_range(0..regular)
            }
        };
        Self {
            sex: pick(rng, 0.02, 2),
            age: rng.random_range(0..105),
            region: pick(rng, 0.005, 4),
            education: pick(rng, 0.01, 5),
            income: pick(rng, 0.01, INCOME_STEPS as u8),
        }
    }

    /// The CSV fields `sex,age,region,education,income`.
    fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        let (s, r, e) = (
            SEX[self.sex as usize],
            REGION[self.region as usize],
            EDUCATION[self.education as usize],
        );
        write!(out, "{s},{},{r},{e},", self.age)?;
        if u32::from(self.income) == INCOME_STEPS {
            out.write_all(b"n/a")
        } else {
            write!(out, "{}", u32::from(self.income) * 5000)
        }
    }
}

/// The generated inputs of one record count.
struct Inputs {
    csv: PathBuf,
    gz: PathBuf,
    table: PathBuf,
    table_rows: usize,
}

pub(crate) fn io_error(path: &Path, e: impl std::fmt::Display) -> DpError {
    DpError::Io(format!("{}: {e}", path.display()))
}

/// Writes `n` records drawn with `seed` as `records.csv` and
/// `records.csv.gz` (gzip level 1, for generation speed) in `dir`, and
/// their GROUP BY over the schema's columns as `table.csv`.
fn write_inputs(dir: &Path, n: u64, seed: u64) -> Result<Inputs> {
    let csv = dir.join("records.csv");
    let gz = dir.join("records.csv.gz");
    let table = dir.join("table.csv");
    let create = |p: &Path| File::create(p).map_err(|e| io_error(p, e));
    let mut plain = BufWriter::with_capacity(1 << 20, create(&csv)?);
    let mut zipped = GzEncoder::new(
        BufWriter::with_capacity(1 << 20, create(&gz)?),
        Compression::fast(),
    );
    let mut groups: HashMap<Raw, u64> = HashMap::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let header = b"id,sex,age,region,education,income\n";
    let mut line = Vec::with_capacity(64);
    let written: std::io::Result<()> = (|| {
        plain.write_all(header)?;
        zipped.write_all(header)?;
        for id in 0..n {
            let raw = Raw::draw(&mut rng);
            *groups.entry(raw).or_default() += 1;
            line.clear();
            write!(line, "{id},")?;
            raw.write(&mut line)?;
            line.push(b'\n');
            plain.write_all(&line)?;
            zipped.write_all(&line)?;
        }
        plain.flush()?;
        zipped.finish()?.flush()
    })();
    written.map_err(|e| io_error(dir, e))?;
    let mut out = BufWriter::new(create(&table)?);
    let written: std::io::Result<()> = (|| {
        out.write_all(b"sex,age,region,education,income,count\n")?;
        for (raw, count) in &groups {
            raw.write(&mut out)?;
            writeln!(out, ",{count}")?;
        }
        out.flush()
    })();
    written.map_err(|e| io_error(&table, e))?;
    Ok(Inputs {
        csv,
        gz,
        table,
        table_rows: groups.len(),
    })
}

/// What one child process took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChildCost {
    /// Wall-clock seconds from spawn to exit.
    pub wall_seconds: f64,
    /// User + system CPU seconds (`/proc/PID/stat` of the exited child).
    pub cpu_seconds: Option<f64>,
    /// Peak resident set in bytes (last sample of `VmHWM`).
    pub peak_rss_bytes: Option<f64>,
}

/// Runs `cmd` to completion, sampling its peak memory every 2 ms (it only
/// grows, so the last sample is the peak but for the final moments); the
/// CPU time is read once the process has exited and before it is reaped,
/// so it is exact. Its stderr goes to `log`; a failure is an error with
/// that text.
pub fn run_measured(cmd: &mut Command, log: &Path) -> Result<ChildCost> {
    let (status, cost) = run_child(cmd, log)?;
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        return Err(DpError::Io(format!("{cmd:?} failed: {}", text.trim())));
    }
    Ok(cost)
}

/// Runs `cmd` with stderr to `log`: its exit status, wall and CPU time
/// and peak resident memory, whatever the status.
pub fn run_child(cmd: &mut Command, log: &Path) -> Result<(std::process::ExitStatus, ChildCost)> {
    let err_file = File::create(log).map_err(|e| io_error(log, e))?;
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(err_file)
        .spawn()
        .map_err(|e| DpError::Io(format!("cannot start {cmd:?}: {e}")))?;
    let pid = Pid::Of(child.id());
    let (mut peak, mut cpu) = (None, None);
    loop {
        // VmHWM is absent once the process has exited; its CPU time is
        // final while it is a zombie.
        peak = procfs::peak_rss_bytes(pid).or(peak);
        let stat = procfs::stat(pid);
        cpu = stat.map(|s| s.cpu_seconds).or(cpu);
        if stat.is_none_or(|s| s.state == 'Z') {
            // Exited (or no /proc): reap it.
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let status = child.wait().map_err(|e| DpError::Io(e.to_string()))?;
    let cost = ChildCost {
        wall_seconds: start.elapsed().as_secs_f64(),
        cpu_seconds: cpu,
        peak_rss_bytes: peak,
    };
    Ok((status, cost))
}

/// One measured release.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseRow {
    /// Records generated.
    pub records: u64,
    /// `csv`, `csv.gz` or `counts`.
    pub input: &'static str,
    /// Input size in bytes.
    pub bytes: u64,
    /// Rows of the input (records, or groups of the counts table).
    pub rows: u64,
    /// What the child took.
    pub cost: ChildCost,
}

impl ReleaseRow {
    /// The table's header line.
    pub fn header() -> String {
        format!(
            "{:>9} {:>7} {:>9} {:>9} {:>7} {:>7} {:>12} {:>12} {:>9}",
            "records",
            "input",
            "MB",
            "rows",
            "wall s",
            "cpu s",
            "rec/s wall",
            "rec/s cpu",
            "peak MiB"
        )
    }

    /// The row as a table line.
    pub fn line(&self) -> String {
        let per = |s: f64| self.records as f64 / s;
        let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".into(), f);
        let c = &self.cost;
        format!(
            "{:>9.0e} {:>7} {:>9.1} {:>9} {:>7.2} {:>7} {:>12.3e} {:>12} {:>9}",
            self.records as f64,
            self.input,
            self.bytes as f64 / 1e6,
            self.rows,
            c.wall_seconds,
            opt(c.cpu_seconds, &|s| format!("{s:.2}")),
            per(c.wall_seconds),
            opt(c.cpu_seconds, &|s| format!("{:.3e}", per(s))),
            opt(c.peak_rss_bytes, &|b| format!("{:.1}", b / 1048576.0)),
        )
    }
}

/// A scratch directory removed when dropped (the records are large).
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `cargo xtask bench release`: checks that `dpmm` is a file, then prints
/// one table line per release as it is measured, with the load average
/// before and after (the machine is shared).
pub fn print_bench(dpmm: &Path, sizes: &[usize]) -> Result<()> {
    if !dpmm.is_file() {
        return Err(DpError::Io(format!(
            "{}: no dpmm binary (cargo build --release -p dpmm)",
            dpmm.display()
        )));
    }
    println!("load average before: {}", procfs::load_averages_text());
    println!("{}", ReleaseRow::header());
    let sizes: Vec<u64> = sizes.iter().map(|&n| n as u64).collect();
    bench_release(dpmm, &sizes, 2024, |row| println!("{}", row.line()))?;
    println!("load average after: {}", procfs::load_averages_text());
    Ok(())
}

/// Runs the benchmark with the `dpmm` binary at `dpmm` on each record
/// count of `sizes` (seeded by `seed`), calling `report` with each row as
/// it is measured.
pub fn bench_release(
    dpmm: &Path,
    sizes: &[u64],
    seed: u64,
    mut report: impl FnMut(&ReleaseRow),
) -> Result<Vec<ReleaseRow>> {
    let dir = std::env::temp_dir().join(format!("dpmm-bench-release-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
    let scratch = Scratch(dir);
    let dir = &scratch.0;
    let path = |name: &str| dir.join(name).display().to_string();
    for (name, text) in [("schema.json", SCHEMA), ("spec.json", SPEC)] {
        std::fs::write(dir.join(name), text).map_err(|e| io_error(dir, e))?;
    }
    let log = dir.join("stderr.txt");
    let (schema, spec, plan) = (path("schema.json"), path("spec.json"), path("plan.json"));
    run_measured(
        Command::new(dpmm)
            .args(["plan", "--workload", &spec, "--privacy", "pure"])
            .args(["--epsilon", "1", "--out", &plan]),
        &log,
    )?;
    let mut rows = Vec::new();
    for &n in sizes {
        let inputs = write_inputs(dir, n, seed)?;
        for (input, file, flag, count) in [
            ("csv", &inputs.csv, "--data", n),
            ("csv.gz", &inputs.gz, "--data", n),
            (
                "counts",
                &inputs.table,
                "--counts",
                inputs.table_rows as u64,
            ),
        ] {
            let ledger = path("ledger.jsonl");
            // A fresh ledger: `ledger init` refuses a path whose head remains.
            let _ = std::fs::remove_file(&ledger);
            let _ = std::fs::remove_file(format!("{ledger}.head"));
            run_measured(
                Command::new(dpmm)
                    .args(["ledger", "init", "--ledger", &ledger])
                    .args(["--total-epsilon", "1"]),
                &log,
            )?;
            let mut release = Command::new(dpmm);
            release
                .args(["release", flag, &file.display().to_string()])
                .args(["--schema", &schema, "--plan", &plan])
                .args(["--epsilon", "1", "--ledger", &ledger])
                .args(["--out", &path("answers.csv")]);
            let cost = run_measured(&mut release, &log)?;
            let bytes = std::fs::metadata(file)
                .map_err(|e| io_error(file, e))?
                .len();
            let row = ReleaseRow {
                records: n,
                input,
                bytes,
                rows: count,
                cost,
            };
            report(&row);
            rows.push(row);
        }
        for f in [&inputs.csv, &inputs.gz, &inputs.table] {
            let _ = std::fs::remove_file(f);
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated counts table is the GROUP BY of the generated
    /// records: summing it back over the rows gives the same per-value
    /// totals as counting the records themselves.
    #[test]
    fn the_counts_table_is_the_group_by_of_the_records() {
        let dir = std::env::temp_dir().join(format!("dp-bench-release-gen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let scratch = Scratch(dir);
        let inputs = write_inputs(&scratch.0, 5000, 3).expect("inputs");
        let records = std::fs::read_to_string(&inputs.csv).expect("csv");
        let table = std::fs::read_to_string(&inputs.table).expect("table");
        let mut from_records: HashMap<String, u64> = HashMap::new();
        for line in records.lines().skip(1) {
            let (_, rest) = line.split_once(',').expect("id");
            *from_records.entry(rest.to_string()).or_default() += 1;
        }
        let mut from_table: HashMap<String, u64> = HashMap::new();
        for line in table.lines().skip(1) {
            let (key, count) = line.rsplit_once(',').expect("count");
            from_table.insert(key.to_string(), count.parse().expect("integer"));
        }
        assert_eq!(from_records, from_table);
        assert_eq!(inputs.table_rows, from_table.len());
        assert_eq!(records.lines().count(), 5001);
        // Some of every irregular kind is there for the policies to drop.
        for needle in [",,", ",unknown,", ",NA,", ",n/a"] {
            assert!(records.contains(needle), "{needle}");
        }
        let gz = std::fs::read(&inputs.gz).expect("gz");
        let mut unzipped = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut unzipped)
            .expect("gunzip");
        assert_eq!(unzipped, records);
    }
}
