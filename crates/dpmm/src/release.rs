//! `dpmm release`: records in, private answers with error bars out.
//!
//! Order of operations, so that a refused or malformed release spends
//! nothing and writes nothing:
//!
//! 1. Validate everything that does not read the data: ε (and δ), the
//!    schema, the workload (its spec, or the one a `--plan` file carries)
//!    against the schema's domain, the plan (optimized now, or read from
//!    `--plan`, planning and the file's reading both sized first against
//!    `--max-memory`), the memory every later step will hold (count
//!    tables, measurement, reconstruction, answers: [`crate::resources`]),
//!    the quantized strategy, the reconstruction prepared from it (the
//!    workload must lie in the strategy's row space; an iterative solve is
//!    dry-run on data-independent values) and from it the figures reported
//!    (a plan file's own are checked against them, never echoed), the
//!    ledger (opened, locked, its hash chain verified, enough budget left).
//! 2. Aggregate the records (or the pre-aggregated table) into only the
//!    count tables the strategy reads; memory is those tables.
//! 3. Charge the ledger: written and fsync'ed under its lock.
//! 4. Measure through the privacy kernel (exact discrete noise, CKS20).
//! 5. Reconstruct by least squares with the strategy actually measured
//!    (the prepared reconstruction refuses any other), and every query's
//!    exact variance (post-processing).
//! 6. Write the answers and the JSON sidecar to temporary files, then
//!    rename them into place ([`crate::output`]: nothing is left behind on
//!    an error or a signal).
//!
//! Nothing exact about the data is printed, logged or written: not the
//! number of records, not the number of rows dropped.

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::Args;
use dp_core::kernel::zcdp_cost_of_pure;
use dp_core::ledger::{Ledger, LedgerBudget};
use dp_core::{Cost, MarginalStrategy, Measurement, MeasurementNoise};
use dp_opt::PrivacyModel;
use dp_opt::multidim::reconstruct::{
    Reconstruction, ReconstructionMethod, Reconstructor, VarianceMethod, reconstruct,
};
use dp_opt::multidim::{PlanObjective, PlanOptions, plan_strategy};
use dp_workloads::spec::load_spec;
use dp_workloads::structured::StructuredWorkload;
use dpmm_records::{Layout, PrivateCounts, Rows, Schema, aggregate as aggregate_rows};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use crate::Failure;
use crate::release_figures::{
    Figures, check_plan_file as check_plan_figures, group_rmse, recompute,
};
use crate::release_plan::{QueryLabels, Strategy};
use crate::resources::{MemoryArgs, Spinner, check_plan_file, release_need};

/// The two-sided 95% standard normal quantile.
const Z95: f64 = 1.959_963_984_540_054;

/// `dpmm release`.
#[derive(Args)]
pub struct ReleaseArgs {
    /// Records: CSV with a header row, plain or gzip'ed, or Parquet with the
    /// `parquet` feature (detected by content).
    #[arg(long, required_unless_present = "counts", conflicts_with = "counts")]
    pub data: Option<PathBuf>,
    /// Instead of records: a pre-aggregated table (the schema's columns
    /// and a `count` column), e.g. from one GROUP BY in DuckDB.
    #[arg(long)]
    pub counts: Option<PathBuf>,
    /// The records schema (columns and public domains, DESIGN.md §7).
    #[arg(long)]
    pub schema: PathBuf,
    /// The workload spec: the queries to answer, in this order (optional
    /// with `--plan`, whose file carries the spec it was planned for).
    #[arg(long, required_unless_present = "plan")]
    pub workload: Option<PathBuf>,
    /// A plan file (from `dpmm plan`) to measure instead of optimizing now;
    /// its domain must be the schema's. The queries are `--workload`'s when
    /// given (the strategy must support them), else the plan's own.
    #[arg(long)]
    pub plan: Option<PathBuf>,
    /// When planning now: total (the sum of the queries' variances, the
    /// default) or max (the largest per-query variance; (ε, δ) and
    /// marginal workloads only). A plan file states its own.
    #[arg(long, conflicts_with = "plan")]
    pub objective: Option<PlanObjective>,
    /// ε of this release.
    #[arg(long, allow_hyphen_values = true)]
    pub epsilon: f64,
    /// δ of this release: (ε, δ)-DP by the discrete Gaussian, charged in
    /// ρ-zCDP; without it, pure ε-DP by the discrete Laplace.
    #[arg(long, allow_hyphen_values = true)]
    pub delta: Option<f64>,
    /// The ledger to charge (`dpmm ledger init`).
    #[arg(long)]
    pub ledger: PathBuf,
    /// The answers CSV; a JSON sidecar is written beside it (`<out>.json`).
    #[arg(long)]
    pub out: PathBuf,
    /// The memory limit (`--max-memory`).
    #[command(flatten)]
    pub memory: MemoryArgs,
}

/// Everything validated before the data is read.
struct Prepared {
    schema: Schema,
    workload: StructuredWorkload,
    strategy: Strategy,
    kernel_strategy: MarginalStrategy,
    /// The reconstruction prepared (and dry-run) before the charge.
    reconstructor: Reconstructor,
    /// The figures reported, recomputed from `kernel_strategy`.
    figures: Figures,
    layout: Layout,
    ledger: Ledger,
    cost: Cost,
    /// What the ledger is charged, in its unit.
    charge: f64,
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Runs the release; every error is one line.
pub fn run(args: &ReleaseArgs) -> Result<(), Failure> {
    let mut p = prepare(args)?;
    // The outputs must be writable before anything is charged: a release
    // whose answers cannot be written would spend budget for nothing.
    for path in [args.out.clone(), sidecar_path(&args.out)] {
        check_output(&path, args)?;
        crate::output::check_writable(&path)?;
    }
    let counts = aggregate(args, &p)?;
    let marginals = counts.into_kernel()?;
    let label = format!(
        "release {} (epsilon {}{})",
        args.out.display(),
        args.epsilon,
        args.delta
            .map(|d| format!(", delta {d}"))
            .unwrap_or_default()
    );
    // The durable charge precedes every draw (Ledger::open_session).
    let mut session = p.ledger.open_session(p.charge, &label)?;
    let entry = p.ledger.entries().len() - 1;
    let m = session.measure_marginals(&p.kernel_strategy, &marginals, p.cost)?;
    drop(marginals);
    let rec = p
        .reconstructor
        .run(&p.workload, &m.strategy, &m.values, m.variance)?;
    write_outputs(args, &p, &m, &rec, entry)
}

fn prepare(args: &ReleaseArgs) -> Result<Prepared, Failure> {
    let cost = crate::ledger_cmd::cost_for(args.epsilon, args.delta)?;
    let model = match cost {
        Cost::Epsilon(_) => PrivacyModel::Pure,
        Cost::Rho(_) => PrivacyModel::Approx,
    };
    let schema = Schema::from_path(&args.schema)?;
    let limit = args.memory.limit();
    // The workload a plan file carries, when another one is released.
    let mut planned_for = None;
    let (workload, strategy) = match &args.plan {
        Some(path) => {
            check_plan_file(path, limit)?;
            let (strategy, embedded) = Strategy::from_file(path, &schema)?;
            let workload = match (&args.workload, embedded) {
                (Some(spec), embedded) => {
                    planned_for = embedded;
                    load_workload(spec, &schema)?
                }
                (None, Some(w)) => w,
                (None, None) => {
                    return Err(Failure::BadInput(format!(
                        "{}: the plan file carries no workload (plans from `cargo xtask plan` \
                         do not): give the workload spec with --workload",
                        path.display()
                    )));
                }
            };
            (workload, strategy)
        }
        None => {
            let spec = args.workload.as_ref().ok_or("give --workload or --plan")?;
            let workload = load_workload(spec, &schema)?;
            let options = PlanOptions {
                objective: args.objective.unwrap_or_default(),
                max_memory: Some(limit),
                ..PlanOptions::default()
            };
            let spinner = Spinner::start("planning");
            let plan = plan_strategy(&workload, model, &options);
            spinner.finish();
            (workload, Strategy::from_plan(&plan?))
        }
    };
    // Every later step sized before any of them runs.
    let layout = crate::resources::layout(schema.domain(), &strategy.tables(), limit)?;
    release_need(&workload, &strategy, &layout).check(limit)?;
    let shape = schema.domain().shape();
    let kernel_strategy = MarginalStrategy::new(shape.clone(), strategy.terms.clone())?;
    // Dry run before anything is spent, with the same checks as the real
    // reconstruction (row space, sizes, and, on the conjugate-gradient
    // path, convergence): on values that depend on nothing private (a
    // fixed pseudo-random sequence in [-1, 1]), so that an iterative solve
    // has a nonzero right-hand side to converge on; all zeros would stop
    // at iteration 0 and leave a failing solve to after the charge.
    let rows = kernel_strategy.nrows();
    let mut probe: Vec<f64> = Vec::new();
    probe
        .try_reserve_exact(rows)
        .map_err(|_| format!("the dry run's {rows} values cannot be allocated"))?;
    probe.extend((0..rows as u64).map(|i| {
        let h = (i.wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
        2.0 * (h as f64 / (1u64 << 53) as f64) - 1.0
    }));
    let measured = kernel_strategy.measured_strategy();
    let reconstructor = Reconstructor::new(&workload, &measured)?;
    let dry = match reconstructor.unit_variances() {
        // Closed form: the variances need no values and nothing iterates.
        Some(variances) => Reconstruction {
            answers: Vec::new(),
            variances: variances.to_vec(),
            method: ReconstructionMethod::OrthogonalTerms,
            variance_method: VarianceMethod::Exact,
            solver: None,
        },
        None => reconstructor.run(&workload, &measured, &probe, 1.0)?,
    };
    drop(measured);
    let figures = recompute(&workload, &kernel_strategy, model, &strategy.figures, &dry)?;
    if let Some(path) = &args.plan {
        let own = match &planned_for {
            None if args.workload.is_none() => Some(figures.clone()),
            None => None,
            Some(w) => {
                let dry = reconstruct(w, &kernel_strategy.measured_strategy(), &probe, 1.0)?;
                Some(recompute(
                    w,
                    &kernel_strategy,
                    model,
                    &strategy.figures,
                    &dry,
                )?)
            }
        };
        check_plan_figures(path, &strategy.figures, &figures, own.as_ref())?;
    }
    drop(probe);
    let ledger = crate::ledger_cmd::open(&args.ledger)?;
    let charge = match (ledger.budget(), cost) {
        (LedgerBudget::PureDp { .. }, Cost::Epsilon(e)) => e,
        (LedgerBudget::Zcdp { .. }, Cost::Epsilon(e)) => zcdp_cost_of_pure(e)?,
        (LedgerBudget::Zcdp { .. }, Cost::Rho(r)) => r,
        (LedgerBudget::PureDp { .. }, Cost::Rho(_)) => {
            return Err(Failure::BadInput(format!(
                "{} holds pure ε: an (ε, δ) release needs a ledger created with --total-delta",
                args.ledger.display()
            )));
        }
    };
    if charge > ledger.remaining() {
        return Err(Failure::BadInput(format!(
            "budget exceeded: this release needs {charge} but {} has {} left",
            args.ledger.display(),
            ledger.remaining()
        )));
    }
    Ok(Prepared {
        schema,
        workload,
        strategy,
        kernel_strategy,
        reconstructor,
        figures,
        layout,
        ledger,
        cost,
        charge,
    })
}

/// The workload spec at `spec`, which must be on the schema's domain.
fn load_workload(spec: &Path, schema: &Schema) -> Result<StructuredWorkload, Failure> {
    let workload = load_spec(spec).map_err(text)?;
    if workload.domain() != schema.domain() {
        return Err(Failure::BadInput(format!(
            "{}: its domain (names and sizes, in order) is not the schema's",
            spec.display()
        )));
    }
    Ok(workload)
}

/// A reader that advances a progress bar by the bytes it reads.
struct Progress<R> {
    inner: R,
    bar: ProgressBar,
}

impl<R: Read> Read for Progress<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bar.inc(n as u64);
        Ok(n)
    }
}

fn aggregate(args: &ReleaseArgs, p: &Prepared) -> Result<PrivateCounts, Failure> {
    let (path, rows) = match (&args.data, &args.counts) {
        (Some(d), None) => (d, Rows::Records),
        (None, Some(c)) => (c, Rows::CountsTable),
        _ => return Err("give exactly one of --data and --counts".into()),
    };
    if dpmm_records::source::is_parquet(path) {
        return aggregate_parquet(path, rows, p);
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    // Only a percentage of the input file, and only on a terminal: no
    // count of records is shown.
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("aggregating {wide_bar} {percent}%")
            .map_err(|e| Failure::Internal(e.to_string()))?,
    );
    let input = Progress {
        inner: std::io::BufReader::with_capacity(1 << 20, file),
        bar: bar.clone(),
    };
    let name = path.display().to_string();
    let counts = aggregate_rows(input, &name, &p.schema, &p.layout, rows);
    bar.finish_and_clear();
    Ok(counts?)
}

/// Records from a Parquet file (the `parquet` feature).
#[cfg(feature = "parquet")]
fn aggregate_parquet(path: &Path, rows: Rows, p: &Prepared) -> Result<PrivateCounts, Failure> {
    if rows == Rows::CountsTable {
        return Err(Failure::BadInput(format!(
            "{}: a counts table must be CSV",
            path.display()
        )));
    }
    dpmm_records::parquet_input::aggregate_parquet_file(path, &p.schema, &p.layout)
        .map_err(|e| Failure::BadInput(e.to_string()))
}

/// Without the `parquet` feature a Parquet file is refused, not read as CSV.
#[cfg(not(feature = "parquet"))]
fn aggregate_parquet(path: &Path, _: Rows, _: &Prepared) -> Result<PrivateCounts, Failure> {
    Err(format!(
        "{}: a Parquet file; this dpmm is built without the `parquet` feature \
         (cargo install --path crates/dpmm --features parquet)",
        path.display()
    )
    .into())
}

/// Refuses an output path that is a directory or names one of the inputs
/// (the ledger and its head above all: renaming the answers over them
/// would erase the record of what was spent).
fn check_output(out: &Path, args: &ReleaseArgs) -> Result<(), Failure> {
    if out.is_dir() {
        return Err(Failure::BadInput(format!(
            "{}: is a directory",
            out.display()
        )));
    }
    let resolve = |p: &Path| -> Option<PathBuf> {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(dir.canonicalize().ok()?.join(p.file_name()?))
    };
    let target = resolve(out);
    let head = dp_core::ledger::head_path(&args.ledger);
    let inputs = [
        Some(&args.ledger),
        Some(&head),
        args.data.as_ref(),
        args.counts.as_ref(),
        Some(&args.schema),
        args.workload.as_ref(),
        args.plan.as_ref(),
    ];
    for input in inputs.into_iter().flatten() {
        if target.is_some() && resolve(input) == target {
            return Err(Failure::BadInput(format!(
                "{}: the output would overwrite the input {}",
                out.display(),
                input.display()
            )));
        }
    }
    Ok(())
}

/// `<out>.json`, the JSON sidecar beside the answers.
fn sidecar_path(out: &Path) -> PathBuf {
    PathBuf::from(format!("{}.json", out.display()))
}

/// `s` as one CSV field: quoted when it holds a separator, quote or line
/// break.
fn push_csv_field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// Queries per chunk of the answers CSV formatted on one thread.
const CSV_CHUNK: usize = 1 << 16;

/// The answers CSV: one row per query, unweighted (a spec weight steers
/// the plan; the answer is of the query itself). Numbers are written by
/// `ryu` (shortest round-trip form, exponent for very small or large
/// values), chunks of rows formatted on rayon's pool.
fn answers_csv(p: &Prepared, rec: &Reconstruction) -> String {
    use rayon::prelude::*;
    let labels = QueryLabels::new(&p.workload, &p.schema);
    let n = labels.len().min(rec.answers.len()).min(rec.variances.len());
    let chunks: Vec<String> = (0..n.div_ceil(CSV_CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut out = String::new();
            let mut label = String::new();
            let mut number = ryu::Buffer::new();
            for q in c * CSV_CHUNK..((c + 1) * CSV_CHUNK).min(n) {
                label.clear();
                let w = labels.write(q, &mut label);
                push_csv_field(&mut out, &label);
                let (a, se) = (rec.answers[q] / w, rec.variances[q].max(0.0).sqrt() / w);
                for v in [a, se, a - Z95 * se, a + Z95 * se] {
                    out.push(',');
                    out.push_str(number.format(v));
                }
                out.push('\n');
            }
            out
        })
        .collect();
    let mut out = String::from("query,answer,std_error,ci_low,ci_high\n");
    out.reserve(chunks.iter().map(String::len).sum());
    for chunk in chunks {
        out.push_str(&chunk);
    }
    out
}

fn sidecar(
    args: &ReleaseArgs,
    p: &Prepared,
    m: &Measurement,
    rec: &Reconstruction,
    entry: usize,
) -> String {
    let (noise, scale) = match m.noise {
        MeasurementNoise::DiscreteLaplace { scale } => ("discrete Laplace (CKS20, exact)", scale),
        MeasurementNoise::DiscreteGaussian { sigma } => ("discrete Gaussian (CKS20, exact)", sigma),
    };
    let rho = match p.cost {
        Cost::Rho(r) => Some(r),
        Cost::Epsilon(_) => None,
    };
    let unit = match p.ledger.budget() {
        LedgerBudget::PureDp { .. } => "epsilon",
        LedgerBudget::Zcdp { .. } => "rho (zCDP)",
    };
    let figures = &p.figures;
    let value = json!({
        "mechanism": format!("matrix mechanism: {noise} noise on a structured strategy, least-squares reconstruction"),
        "noise": noise,
        "noise_scale": scale,
        "noise_variance_per_row": m.variance,
        "granularity": m.granularity,
        "sensitivity": m.sensitivity,
        "strategy_rows": m.values.len(),
        "epsilon": args.epsilon,
        "delta": args.delta,
        "rho": rho,
        "charged": p.charge,
        "charged_unit": unit,
        "plan": {
            "method": p.strategy.method,
            "privacy": figures.privacy,
            "objective_name": figures.objective_name,
            "objective": figures.objective,
            "lower_bound": figures.lower_bound,
            "duality_gap": figures.duality_gap,
            "figures": "recomputed from the strategy measured, on the queries answered; \
                        lower_bound only where it has a closed form (marginal workloads)",
        },
        "groups": group_rmse(&p.workload, rec),
        "reconstruction": rec.method,
        "variances": match rec.variance_method {
            VarianceMethod::Exact => "exact",
            VarianceMethod::SingleTermBound => {
                "upper bounds (the best single strategy term's Gauss-Markov variance): \
                 std_error and the intervals are conservative"
            }
        },
        "queries": rec.answers.len(),
        "intervals": intervals_method(&m.noise),
        "ledger": {"path": args.ledger.display().to_string(), "entry": entry},
    });
    let mut s = serde_json::to_string_pretty(&value).unwrap_or_default();
    s.push('\n');
    s
}

/// How the 95% intervals are made, for the sidecar: a normal
/// approximation around the exact variance. Each answer's noise is a
/// linear combination of the strategy rows' independent draws; under pure
/// ε-DP these are discrete Laplace, whose tails are heavier than normal,
/// so an answer carrying few draws is covered less often (a single Laplace
/// draw: P(|X| ≤ 1.96σ) = 1 − e^(−1.96·√2) ≈ 93.7%).
fn intervals_method(noise: &MeasurementNoise) -> &'static str {
    match noise {
        MeasurementNoise::DiscreteLaplace { .. } => {
            "95% normal approximation: answer ± 1.96 std_error, std_error from the exact variance \
             of each answer; the noise is a sum of discrete Laplace draws, heavier-tailed than \
             normal, so an answer carrying few draws is covered less often (a single draw: about \
             93.7%)"
        }
        MeasurementNoise::DiscreteGaussian { .. } => {
            "95% normal approximation: answer ± 1.96 std_error, std_error from the exact variance \
             of each answer; the noise is a sum of discrete Gaussian draws"
        }
    }
}

fn write_outputs(
    args: &ReleaseArgs,
    p: &Prepared,
    m: &Measurement,
    rec: &Reconstruction,
    entry: usize,
) -> Result<(), Failure> {
    let side_path = sidecar_path(&args.out);
    // The sidecar first: answers never appear without theirs.
    crate::output::write_all_atomically(&[
        (&side_path, sidecar(args, p, m, rec, entry).as_bytes()),
        (&args.out, answers_csv(p, rec).as_bytes()),
    ])?;
    eprintln!(
        "wrote {} ({} queries) and {}; ledger entry {entry}",
        args.out.display(),
        rec.answers.len(),
        side_path.display()
    );
    Ok(())
}
