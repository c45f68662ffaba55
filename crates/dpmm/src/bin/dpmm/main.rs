//! `dpmm`: the command for people who hold records — flags and file paths
//! over the `dpmm` library (docs/architecture.md).
//!
//! * `dpmm plan` optimizes a strategy for a workload spec and prints its
//!   expected errors with the certificate ([`dpmm::Plan`]).
//! * `dpmm release` and `dpmm ledger`: private answers from records
//!   ([`dpmm::Release`]), and the persistent privacy budget
//!   ([`dpmm::ledger`]).
//! * `dpmm schema draft records.csv[.gz]` writes a starting schema from
//!   the CSV's header line (and nothing after it) for a person to complete
//!   from public knowledge.
//!
//! Every failure is one line on stderr, exit status 2 for bad input (a
//! file, a flag, a spec, a schema, a record, a budget), 1 for an internal
//! failure ([`dpmm::Error`]). SIGINT, SIGTERM and SIGHUP end the command
//! at once, with status 128 + the signal and no temporary file left
//! ([`dpmm::output`]), at any step but a release's after its charge, which
//! finishes so that its answers are kept (a second signal abandons them).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use dpmm::cli::PrivacyArgs;
use dpmm::dp_core::interrupt::Interrupt;
use dpmm::dp_plan::resources::default_memory_limit;
use dpmm::dpmm_records::{DRAFT_NOTE, Source, draft_from_path};
use dpmm::resources::{Spinner, parse_memory};
use dpmm::{Data, Document, Error, Plan, PlanObjective, Release, Workload, ledger, privacy};

/// Optimized linear queries under differential privacy, for data curators.
#[derive(Parser)]
#[command(name = "dpmm", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Optimize a strategy for a workload spec (data-independent, reusable):
    /// write the plan file, print the expected error per query group and
    /// the certificate.
    Plan(PlanArgs),
    /// Records schemas: how CSV columns become the attributes of a domain.
    #[command(subcommand)]
    Schema(SchemaCommand),
    /// Release private answers to a workload from records: validate,
    /// aggregate, charge the ledger, measure (exact discrete noise),
    /// reconstruct, write answers with standard errors and 95% intervals.
    Release(ReleaseArgs),
    /// Answer new linear queries from a release's measurement file by
    /// least squares, with exact standard errors and 95% intervals: no
    /// data is read and nothing is charged.
    Query(QueryArgs),
    /// The persistent privacy budget: create a ledger, show it, verify it,
    /// repair a torn final line.
    #[command(subcommand)]
    Ledger(LedgerCommand),
    /// Continual release: time-stamped records in (a file or standard
    /// input, read whole, lines in any order), the running counts of a
    /// workload of marginals at every step out; the ledger charged once
    /// for the whole horizon.
    Stream(StreamArgs),
    /// The curator's check, NOT PRIVATE: what the schema makes of the
    /// records — rows read, malformed rows, per attribute the values
    /// outside the domain, missing or not a number (the most frequent
    /// shown), the share a release would drop. Exact figures for the
    /// curator's eyes only: never publish them. Spends and writes nothing.
    Check(CheckArgs),
}

/// Who the records are about: `--privacy-unit` and `--weight`, shared by
/// `release` and `check`.
#[derive(Args)]
struct PeopleArgs {
    /// The privacy unit: the column naming whom each record is about (a
    /// person, a household, a driver). The kernel then keeps at most
    /// --max-records-per-unit records of each unit, chosen at random, and
    /// scales the noise to protect all of a unit's records. Without it
    /// the unit is one record: a person with many records is protected
    /// less.
    #[arg(long, requires = "max_records_per_unit")]
    privacy_unit: Option<String>,
    /// The most records of one privacy unit kept (1 to 65,536).
    #[arg(long, requires = "privacy_unit", allow_hyphen_values = true)]
    max_records_per_unit: Option<u32>,
    /// The column of each record's weight (a finite non-negative number;
    /// any other value makes the record malformed). Answers, standard
    /// errors and intervals are then in weighted units.
    #[arg(long, requires = "max_weight")]
    weight: Option<String>,
    /// The bound each weight is clipped to: the noise is scaled by it.
    #[arg(long, requires = "weight", allow_hyphen_values = true)]
    max_weight: Option<f64>,
}

impl PeopleArgs {
    fn unit(&self) -> Option<(String, u32)> {
        self.privacy_unit.clone().zip(self.max_records_per_unit)
    }

    fn weight(&self) -> Option<(String, f64)> {
        self.weight.clone().zip(self.max_weight)
    }
}

/// `dpmm check`'s flags.
#[derive(Args)]
struct CheckArgs {
    /// Records: CSV with a header row (plain or gzip'ed) or Parquet,
    /// detected by content; `-` reads CSV from standard input.
    #[arg(long, required_unless_present = "counts", conflicts_with = "counts")]
    data: Option<PathBuf>,
    /// Instead of records: a pre-aggregated table (the schema's columns
    /// and a `count` column of whole numbers, the multiplicity of
    /// identical records; never a weight: give weights with --weight).
    #[arg(long)]
    counts: Option<PathBuf>,
    /// The records schema.
    #[arg(long)]
    schema: PathBuf,
    /// A workload spec to check against the schema's domain as well.
    #[arg(long)]
    workload: Option<PathBuf>,
    /// For a stream: the time column (with --steps and --start).
    #[arg(long, requires = "steps")]
    time_column: Option<String>,
    /// For a stream: the horizon T.
    #[arg(long, requires = "time_column")]
    steps: Option<u64>,
    /// For a stream: its calendar (--start, --step, --timezone).
    #[command(flatten)]
    clock: ClockArgs,
    /// The privacy unit and weights a release would state.
    #[command(flatten)]
    people: PeopleArgs,
    /// For a stream with a privacy unit: the most steps of one unit it
    /// keeps (the check counts the units it would leave steps out of).
    #[arg(long, requires_all = ["time_column", "privacy_unit"], allow_hyphen_values = true)]
    max_steps_per_unit: Option<u32>,
    /// With --max-steps-per-unit: the least distance between two kept
    /// steps (default 1).
    #[arg(long, requires = "max_steps_per_unit", allow_hyphen_values = true)]
    min_separation: Option<u32>,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

/// A stream's calendar, shared by `stream` and `check`: public input,
/// never taken from the data.
#[derive(Args)]
struct ClockArgs {
    /// Step 0's time: a whole number (the default, 0), or with --step a
    /// date (2017-01-01) or local date-time (2017-01-01T06:00).
    #[arg(long, allow_hyphen_values = true)]
    start: Option<String>,
    /// Read times as ISO 8601 dates and date-times (with or without an
    /// offset) or Arrow dates and timestamps, in steps of a day, hour,
    /// week, month or N seconds ("900s") from --start.
    #[arg(long, requires = "start")]
    step: Option<String>,
    /// The IANA time zone days, weeks and months are counted in, and
    /// times without an offset are read in (default UTC; with --step).
    #[arg(long, requires = "step")]
    timezone: Option<String>,
}

impl ClockArgs {
    /// Step 0's whole-number time, and the calendar when --step is given.
    fn clock(&self) -> Result<(i64, Option<dpmm::dpmm_records::Calendar>), Error> {
        dpmm::stream::clock(
            self.start.as_deref(),
            self.step.as_deref(),
            self.timezone.as_deref(),
        )
        // The flags' names, as the command line gives them.
        .map_err(|e| e.map_message(|m| m.replace("start: ", "--start: ")))
    }

    fn given(&self) -> bool {
        self.start.is_some() || self.step.is_some() || self.timezone.is_some()
    }
}

/// A stream's privacy unit and how much of it is kept.
#[derive(Args)]
struct StreamUnitArgs {
    /// The privacy unit: the column naming whom each record is about. The
    /// kernel then keeps at most --max-records-per-unit records of a unit
    /// in each step, in at most --max-steps-per-unit of its steps at least
    /// --min-separation apart, chosen at random, and scales the noise to
    /// protect all of them. Without it the unit is one record.
    #[arg(long, requires_all = ["max_records_per_unit", "max_steps_per_unit"])]
    privacy_unit: Option<String>,
    /// The most records of one unit kept in one step (1 to 65,536).
    #[arg(long, requires = "privacy_unit", allow_hyphen_values = true)]
    max_records_per_unit: Option<u32>,
    /// The most steps of one unit kept.
    #[arg(long, requires = "privacy_unit", allow_hyphen_values = true)]
    max_steps_per_unit: Option<u32>,
    /// The least distance, in steps, between two kept steps of one unit
    /// (default 1).
    #[arg(long, requires = "max_steps_per_unit", allow_hyphen_values = true)]
    min_separation: Option<u32>,
}

impl StreamUnitArgs {
    fn people(&self) -> dpmm::dpmm_records::People {
        dpmm::dpmm_records::People {
            unit: self.privacy_unit.clone().zip(self.max_records_per_unit),
            steps: self.max_steps_per_unit.map(|max_steps| {
                dpmm::dp_core::kernel::records::StepBound {
                    max_steps,
                    min_separation: self.min_separation.unwrap_or(1),
                }
            }),
            ..dpmm::dpmm_records::People::records()
        }
    }
}

/// `dpmm stream`'s flags.
#[derive(Args)]
struct StreamArgs {
    /// The records (CSV with a header, plain or gzip'ed, or Parquet); `-`
    /// reads CSV from standard input (to its end).
    #[arg(long)]
    data: PathBuf,
    /// The column holding each record's time: a whole number (step =
    /// time − --start), or with --step a date or date-time.
    #[arg(long)]
    time_column: String,
    /// The horizon T: steps 0..T are released (all of them, records or
    /// not).
    #[arg(long)]
    steps: usize,
    /// The stream's calendar.
    #[command(flatten)]
    clock: ClockArgs,
    /// The records schema (JSON; docs/formats.md).
    #[arg(long)]
    schema: PathBuf,
    /// The workload spec: marginals (docs/formats.md).
    #[arg(long)]
    workload: PathBuf,
    /// The privacy unit and its bounds.
    #[command(flatten)]
    unit: StreamUnitArgs,
    /// `--epsilon`, and `--delta` for a stream measured with Gaussian
    /// noise (without it: pure ε, a k-ary tree with Laplace noise).
    #[command(flatten)]
    privacy: PrivacyArgs,
    /// The ledger to charge (once, for the horizon).
    #[arg(long)]
    ledger: PathBuf,
    /// The running counts: step,time,query,answer,std_error,ci_low,ci_high
    /// (time: when the step begins).
    #[arg(long)]
    out: PathBuf,
    /// Bands of the strategy C of an (ε, δ) stream (default: T, up to
    /// 4096 and 2^24 / cells a step; as many as steps gives the square
    /// root factorization).
    #[arg(long)]
    bands: Option<usize>,
    /// Also write an HTML report here: what was spent and is left, and
    /// each table's running counts over the steps with their 95% bands.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Also write running counts that are non-negative, non-decreasing in
    /// time and consistent across tables (post-processing, no further
    /// budget) to running.nonneg.csv beside --out: biased, so without
    /// error columns.
    #[arg(long)]
    nonneg: bool,
}

#[derive(Subcommand)]
enum SchemaCommand {
    /// Write a starting schema from a CSV's header line only (plain or
    /// gzip'ed). Domains must then be written from PUBLIC knowledge, never
    /// from the private data; the draft is refused until they are.
    Draft {
        /// The records file (CSV with a header; gzip detected by content).
        records: PathBuf,
        /// Write the draft here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// `dpmm plan`'s flags.
#[derive(Debug, Args)]
struct PlanArgs {
    /// The workload spec v1 (JSON; docs/formats.md).
    #[arg(long)]
    workload: PathBuf,
    /// `--privacy`, `--epsilon`, `--delta`.
    #[command(flatten)]
    privacy: PrivacyArgs,
    /// Write the plan file (JSON) here.
    #[arg(long)]
    out: PathBuf,
    /// Print the report as one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// The loss to minimize: total (the sum of the queries' variances) or
    /// max (the largest per-query variance; `--privacy approx` and
    /// marginal workloads only).
    #[arg(long, default_value = "total")]
    objective: PlanObjective,
    /// Also write an HTML report of the expected error per query group
    /// here (one self-contained page, no network).
    #[arg(long)]
    report: Option<PathBuf>,
    /// The memory limit (`--max-memory`).
    #[command(flatten)]
    memory: MemoryArgs,
}

/// `dpmm release`.
#[derive(Args)]
struct ReleaseArgs {
    /// Records: CSV with a header row, plain or gzip'ed, or Parquet
    /// (detected by content). `dpmm check` shows what the schema makes of
    /// them (not private, for the curator only).
    #[arg(long, required_unless_present = "counts", conflicts_with = "counts")]
    data: Option<PathBuf>,
    /// Instead of records: a pre-aggregated table (the schema's columns
    /// and a `count` column of whole numbers, the multiplicity of
    /// identical records; never a weight: give weights with --weight),
    /// e.g. from one GROUP BY in DuckDB. Each row's records are protected
    /// one by one: a table has no privacy unit.
    #[arg(long)]
    counts: Option<PathBuf>,
    /// The records schema (columns and public domains, docs/formats.md).
    #[arg(long)]
    schema: PathBuf,
    /// The workload spec: the queries to answer, in this order (optional
    /// with `--plan`, whose file carries the spec it was planned for).
    #[arg(long, required_unless_present = "plan")]
    workload: Option<PathBuf>,
    /// A plan file (from `dpmm plan`) to measure instead of optimizing now;
    /// its domain must be the schema's. The queries are `--workload`'s when
    /// given (the strategy must support them), else the plan's own.
    #[arg(long)]
    plan: Option<PathBuf>,
    /// When planning now: total (the sum of the queries' variances, the
    /// default) or max (the largest per-query variance; (ε, δ) and
    /// marginal workloads only). A plan file states its own.
    #[arg(long, conflicts_with = "plan")]
    objective: Option<PlanObjective>,
    /// This release's `--epsilon` and `--delta` (without δ, pure ε-DP by
    /// the discrete Laplace).
    #[command(flatten)]
    privacy: PrivacyArgs,
    /// The ledger to charge (`dpmm ledger init`).
    #[arg(long)]
    ledger: PathBuf,
    /// The answers: CSV, or a Parquet table when the name ends in
    /// `.parquet`; a JSON sidecar is written beside it (`<out>.json`).
    #[arg(long)]
    out: PathBuf,
    /// Also write an HTML report here: what was spent and is left, the
    /// plan's figures, every table as a chart with its 95% intervals (one
    /// self-contained page, no network).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Also write non-negative, consistent tables estimated from the same
    /// answers (post-processing, no further budget; marginal workloads
    /// only) to `answers.nonneg.csv` (`.parquet`) beside `--out`: biased, so without
    /// error columns.
    #[arg(long)]
    nonneg: bool,
    /// Also write the measurement file here (Parquet): the noisy
    /// measurements, the strategy as measured, the noise law and what was
    /// charged, nothing else derived from the data. It may be published
    /// with the answers; `dpmm query` answers new queries from it at no
    /// privacy cost.
    #[arg(long, value_name = "FILE")]
    measurements: Option<PathBuf>,
    /// The memory limit (`--max-memory`).
    #[command(flatten)]
    memory: MemoryArgs,
    /// The privacy unit and weights.
    #[command(flatten)]
    people: PeopleArgs,
}

/// `dpmm query`.
#[derive(Args)]
struct QueryArgs {
    /// A release's measurement file (`dpmm release --measurements`).
    #[arg(long, value_name = "FILE")]
    measurements: PathBuf,
    /// Print the marginals the file can answer (each with every marginal
    /// inside it), one per line, and nothing else.
    #[arg(long, conflicts_with_all = ["workload", "out", "report", "nonneg"])]
    list: bool,
    /// The workload spec to answer, on the release's domain: every query
    /// must lie in the row space of the strategy measured.
    #[arg(long, required_unless_present = "list")]
    workload: Option<PathBuf>,
    /// The answers: CSV, or a Parquet table when the name ends in
    /// `.parquet`; a JSON sidecar is written beside it (`<out>.json`).
    #[arg(long, required_unless_present = "list")]
    out: Option<PathBuf>,
    /// Also write an HTML report of the answers here (the release report's
    /// page).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Also write non-negative, consistent tables estimated from the same
    /// answers (marginal workloads only) beside `--out`.
    #[arg(long)]
    nonneg: bool,
    /// The memory limit (`--max-memory`).
    #[command(flatten)]
    memory: MemoryArgs,
}

/// `dpmm ledger …`.
#[derive(Subcommand)]
enum LedgerCommand {
    /// Create a ledger holding a total budget (refuses an existing file).
    Init {
        /// The ledger file to create (JSON lines).
        #[arg(long)]
        ledger: PathBuf,
        /// Total ε of every release charged to this ledger.
        #[arg(long, allow_hyphen_values = true)]
        total_epsilon: f64,
        /// Total δ: the ledger then holds ρ-zCDP, converted exactly
        /// (CKS20 Corollary 13) from (ε, δ).
        #[arg(long, allow_hyphen_values = true)]
        total_delta: Option<f64>,
    },
    /// Show the budget, spent and left, entry by entry.
    Show {
        /// The ledger file.
        #[arg(long)]
        ledger: PathBuf,
    },
    /// Check the hash chain, the totals and the head anchor (a rollback)
    /// without changing anything: exit 0 when sound, 2 otherwise.
    Verify {
        /// The ledger file.
        #[arg(long)]
        ledger: PathBuf,
    },
    /// Remove a torn final line (never completely written, so no noise was
    /// drawn for it) and nothing else; refuses any other damage.
    Repair {
        /// The ledger file.
        #[arg(long)]
        ledger: PathBuf,
    },
}

/// `--max-memory`, shared by `dpmm plan` and `dpmm release`.
#[derive(Debug, Clone, Args)]
struct MemoryArgs {
    /// The memory this command may use, in bytes or with a unit: 8G or 8GB
    /// (10⁹ bytes each), 8GiB (2³⁰), also k, M, T and their binary forms.
    /// Every step the inputs size (planning, count tables, measurement,
    /// reconstruction) is checked against it before it runs, and before
    /// anything is charged. Default: half the physical memory (MemTotal in
    /// /proc/meminfo), 4 GiB where that cannot be read.
    #[arg(long, value_parser = parse_memory, value_name = "SIZE")]
    max_memory: Option<u64>,
}

impl MemoryArgs {
    /// The limit in bytes.
    fn limit(&self) -> u64 {
        self.max_memory.unwrap_or_else(default_memory_limit)
    }
}

fn run(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Command::Plan(args) => plan(&args),
        Command::Release(args) => release(args),
        Command::Query(args) => query(&args),
        Command::Stream(args) => stream(&args),
        Command::Check(args) => check(args),
        Command::Ledger(command) => {
            let text = match command {
                LedgerCommand::Init {
                    ledger,
                    total_epsilon,
                    total_delta,
                } => {
                    let budget = privacy::budget(total_epsilon, total_delta)?;
                    eprintln!("{}", ledger::create(&ledger, budget)?);
                    return Ok(());
                }
                LedgerCommand::Show { ledger } => ledger::show(&ledger)?,
                LedgerCommand::Verify { ledger } => ledger::verify(&ledger)?,
                LedgerCommand::Repair { ledger } => ledger::repair(&ledger)?,
            };
            println!("{text}");
            Ok(())
        }
        Command::Schema(SchemaCommand::Draft { records, out }) => schema_draft(&records, out),
    }
}

fn plan(args: &PlanArgs) -> Result<(), Error> {
    let budget = args.privacy.budget()?;
    let spinner = Spinner::start("planning");
    let workload = Workload::load(args.workload.as_path())?;
    let plan = spinner
        .show(|| Plan::optimize(&workload, budget, args.objective, Some(args.memory.limit())));
    spinner.finish();
    let plan = plan?;
    plan.save(&args.out)?;
    if let Some(report) = &args.report {
        if report == &args.out {
            return Err(Error::file(report, "is also the plan file's path"));
        }
        let html = plan.summary().report_html();
        dpmm::output::write_atomically(report, html.as_bytes())?;
    }
    if args.json {
        println!("{}", plan.report_json(Some(&args.out))?);
    } else {
        println!(
            "{}plan written to {}",
            plan.report_text(),
            args.out.display()
        );
    }
    Ok(())
}

fn release(args: ReleaseArgs) -> Result<(), Error> {
    let data = match (args.data, args.counts) {
        (Some(d), None) => Data::Records(d),
        (None, Some(c)) => Data::CountsTable(c),
        _ => {
            return Err(Error::BadInput(
                "give exactly one of --data and --counts".into(),
            ));
        }
    };
    let release = Release {
        schema: args.schema.clone().into(),
        workload: args.workload.map(Into::into),
        plan: args.plan.map(Into::into),
        objective: args.objective,
        budget: args.privacy.budget()?,
        ledger: args.ledger,
        out: Some(args.out.clone()),
        max_memory: Some(args.memory.limit()),
        progress: true,
        report: args.report.clone(),
        nonneg: args.nonneg,
        privacy_unit: args.people.unit(),
        weight: args.people.weight(),
        measurements: args.measurements.clone(),
    };
    let answers = release.run(data)?;
    for warning in answers.warnings() {
        eprintln!("warning: {warning}");
    }
    eprintln!(
        "wrote {} ({} queries) and {}{}; ledger entry {}",
        args.out.display(),
        answers.len(),
        dpmm::answers::sidecar_path(&args.out).display(),
        args.report
            .map(|r| format!(" and {}", r.display()))
            .unwrap_or_default(),
        answers.ledger_entry()
    );
    drop_note(&args.schema);
    Ok(())
}

fn query(args: &QueryArgs) -> Result<(), Error> {
    let measurements = dpmm::Measurements::load(&args.measurements)?;
    if args.list {
        let sets = measurements.estimable()?;
        if sets.is_empty() {
            eprintln!("note: the strategy measured estimates no marginal, not even the total");
        }
        for set in sets {
            println!(
                "{}",
                if set.is_empty() {
                    "total".into()
                } else {
                    set.join(" × ")
                }
            );
        }
        return Ok(());
    }
    let (Some(workload), Some(out)) = (&args.workload, &args.out) else {
        return Err(Error::BadInput(
            "give --workload and --out, or --list".into(),
        ));
    };
    measurements.check_outputs(
        Some(workload),
        Some(out),
        args.nonneg,
        args.report.as_deref(),
    )?;
    let options = dpmm::measurements::AnswerOptions {
        nonneg: args.nonneg,
        max_memory: Some(args.memory.limit()),
    };
    let spinner = Spinner::start("answering");
    let answers = spinner.show(|| measurements.answer_with(workload.as_path(), &options));
    spinner.finish();
    let answers = answers?;
    for warning in answers.warnings() {
        eprintln!("warning: {warning}");
    }
    dpmm::Measurements::write(&answers, Some(out), args.report.as_deref())?;
    eprintln!(
        "wrote {} ({} queries) and {}{}; nothing was charged",
        out.display(),
        answers.len(),
        dpmm::answers::sidecar_path(out).display(),
        args.report
            .as_ref()
            .map(|r| format!(" and {}", r.display()))
            .unwrap_or_default(),
    );
    Ok(())
}

fn check(args: CheckArgs) -> Result<(), Error> {
    let data = match (args.data, args.counts) {
        (Some(d), None) if d.as_os_str() == "-" => Data::Csv {
            reader: Box::new(std::io::stdin()),
            name: "standard input".into(),
            rows: dpmm::Rows::Records,
        },
        (Some(d), None) => Data::Records(d),
        (None, Some(c)) => Data::CountsTable(c),
        _ => {
            return Err(Error::BadInput(
                "give exactly one of --data and --counts".into(),
            ));
        }
    };
    let time = match (args.time_column, args.steps) {
        (Some(column), Some(steps)) => {
            let (start, calendar) = args.clock.clock()?;
            Some(dpmm::check::StreamTime {
                column,
                steps,
                start,
                calendar,
            })
        }
        _ if args.clock.given() => {
            return Err(Error::BadInput(
                "--start, --step and --timezone check a stream: give --time-column and --steps"
                    .into(),
            ));
        }
        _ => None,
    };
    let schema = args.schema.into();
    let workload = args.workload.map(Document::from);
    let people = dpmm::dpmm_records::People {
        unit: args.people.unit(),
        weight: args.people.weight(),
        steps: args
            .max_steps_per_unit
            .map(|max_steps| dpmm::dp_core::kernel::records::StepBound {
                max_steps,
                min_separation: args.min_separation.unwrap_or(1),
            }),
        ..dpmm::dpmm_records::People::records()
    };
    let report = dpmm::check::check(&schema, data, workload.as_ref(), time.as_ref(), &people)?;
    if args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| Error::Internal(format!("the report as JSON: {e}")))?;
        println!("{text}");
    } else {
        print!("{}", dpmm::check::render(&report));
    }
    Ok(())
}

/// The note a release or stream prints after it has run: whether its
/// schema can drop records, said without looking at the data.
fn drop_note(schema: &Path) {
    if let Ok(schema) = dpmm::Schema::from_path(schema)
        && let Some(note) = dpmm::check::drop_note(&schema)
    {
        eprintln!("{note}");
    }
}

fn stream(args: &StreamArgs) -> Result<(), Error> {
    let (start, calendar) = args.clock.clock()?;
    let run = dpmm::stream::StreamRelease {
        schema: args.schema.clone().into(),
        workload: args.workload.clone().into(),
        budget: args.privacy.budget()?,
        ledger: args.ledger.clone(),
        time_column: args.time_column.clone(),
        start,
        calendar,
        steps: args.steps,
        bands: args.bands,
        nonneg: args.nonneg,
        people: args.unit.people(),
        report: args.report.clone(),
    };
    let stdin = args.data.as_os_str() == "-";
    let input = if stdin {
        Source::Csv {
            reader: Box::new(std::io::stdin()),
            name: "standard input".into(),
        }
    } else {
        Source::file(&args.data)?
    };
    // The ledger and its head above all: renaming the running counts over
    // them would erase the record of what was spent.
    let head = dpmm::dp_core::ledger::head_path(&args.ledger);
    let inputs: Vec<PathBuf> = [&args.schema, &args.workload, &args.ledger, &head]
        .into_iter()
        .chain((!stdin).then_some(&args.data))
        .cloned()
        .collect();
    let sidecar = dpmm::answers::sidecar_path(&args.out);
    let nonneg = args.nonneg.then(|| dpmm::stream::nonneg_path(&args.out));
    let outputs: Vec<&PathBuf> = [&args.out, &sidecar]
        .into_iter()
        .chain(nonneg.as_ref())
        .chain(args.report.as_ref())
        .collect();
    if (1..outputs.len()).any(|i| outputs[..i].contains(&outputs[i])) {
        return Err(Error::BadInput(
            "the running counts, their sidecar, --nonneg's file and --report need paths of \
             their own"
                .into(),
        ));
    }
    for path in outputs {
        dpmm::output::check_output(path, &inputs)?;
        dpmm::output::check_writable(path)?;
    }
    let spinner = Spinner::plain("streaming");
    let summary = spinner.show(|| run.run(input, &args.out));
    spinner.finish();
    let summary = summary?;
    eprintln!(
        "wrote {} ({} steps × {} queries, {}); ledger entry {}",
        args.out.display(),
        args.steps,
        summary.queries,
        summary.noise.describe(),
        summary.ledger_entry
    );
    drop_note(&args.schema);
    Ok(())
}

fn schema_draft(records: &Path, out: Option<PathBuf>) -> Result<(), Error> {
    let draft = draft_from_path(records)?;
    let mut json = draft.to_json();
    json.push('\n');
    match out {
        Some(path) => std::fs::write(&path, json).map_err(|e| Error::file(&path, e))?,
        None => std::io::stdout()
            .write_all(json.as_bytes())
            .map_err(|e| Error::BadInput(format!("standard output: {e}")))?,
    }
    eprintln!("NOTE: {DRAFT_NOTE}");
    Ok(())
}

/// Prints `failure` as one line on stderr and returns its exit status: 2
/// for bad input, 1 for an internal failure.
fn report(failure: &Error) -> ExitCode {
    match failure {
        Error::Internal(_) => {
            eprintln!("internal error: {failure}");
            ExitCode::from(1)
        }
        // Bad input, an overspend, and any kind a later dpmm adds.
        _ => {
            eprintln!("error: {failure}");
            ExitCode::from(2)
        }
    }
}

/// What a failed `clap` parse ends in: `--help` and `--version` print in
/// full and succeed; a usage error is the line it prints first (`error:
/// invalid value …`, without its usage block and `--help` hint) and
/// status 2.
fn parse_exit(e: &clap::Error) -> ExitCode {
    if !e.use_stderr() {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let rendered = e.render().to_string();
    let first = rendered
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("invalid command line");
    report(&Error::BadInput(
        first.strip_prefix("error: ").unwrap_or(first).to_string(),
    ))
}

fn main() -> ExitCode {
    // A panic is a bug: one line and the internal-failure status, never a
    // backtrace.
    std::panic::set_hook(Box::new(|info| {
        dpmm::output::remove_all_temporaries();
        report(&Error::Internal(format!("{info} (please report)")));
        std::process::exit(1);
    }));
    let token = Interrupt::new();
    if let Err(failure) = dpmm::output::exit_on_signals(token.clone()) {
        return report(&failure);
    }
    match Cli::try_parse() {
        Ok(cli) => token
            .run(|| run(cli))
            .map_or_else(|failure| report(&failure), |()| ExitCode::SUCCESS),
        Err(e) => parse_exit(&e),
    }
}
