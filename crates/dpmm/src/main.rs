//! `dpmm`: the command for people who hold records (DESIGN.md §3, §7).
//!
//! * `dpmm plan` optimizes a strategy for a workload spec and prints its
//!   expected errors with the certificate ([`plan_cmd`]).
//! * `dpmm release` and `dpmm ledger` ([`release`], [`ledger_cmd`]):
//!   private answers from records, and the persistent privacy budget.
//! * `dpmm schema draft records.csv[.gz]` writes a starting schema from
//!   the CSV's header line (and nothing after it) for a person to complete
//!   from public knowledge.
//!
//! Every subcommand returns `Result<(), Failure>` ([`failure`]): one line
//! on stderr, exit status 2 for bad input, 1 for an internal failure.
//! SIGINT, SIGTERM and SIGHUP end the command at once at any step, with
//! status 128 + the signal and no temporary file left ([`output`]).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dpmm_records::{DRAFT_NOTE, draft_from_path};

mod failure;
mod ledger_cmd;
mod output;
mod plan_cmd;
mod release;
mod release_figures;
mod release_plan;
mod resources;

use failure::Failure;

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
    Plan(plan_cmd::PlanArgs),
    /// Records schemas: how CSV columns become the attributes of a domain.
    #[command(subcommand)]
    Schema(SchemaCommand),
    /// Release private answers to a workload from records: validate,
    /// aggregate, charge the ledger, measure (exact discrete noise),
    /// reconstruct, write answers with standard errors and 95% intervals.
    Release(release::ReleaseArgs),
    /// The persistent privacy budget: create a ledger, show it, verify it,
    /// repair a torn final line.
    #[command(subcommand)]
    Ledger(ledger_cmd::LedgerCommand),
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

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Plan(args) => plan_cmd::run(&args),
        Command::Release(args) => release::run(&args),
        Command::Ledger(command) => ledger_cmd::run(command),
        Command::Schema(SchemaCommand::Draft { records, out }) => schema_draft(&records, out),
    }
}

fn schema_draft(records: &std::path::Path, out: Option<PathBuf>) -> Result<(), Failure> {
    let draft = draft_from_path(records)?;
    let mut json = draft.to_json();
    json.push('\n');
    match out {
        Some(path) => std::fs::write(&path, json).map_err(|e| Failure::file(&path, e))?,
        None => std::io::stdout()
            .write_all(json.as_bytes())
            .map_err(|e| Failure::BadInput(format!("standard output: {e}")))?,
    }
    eprintln!("NOTE: {DRAFT_NOTE}");
    Ok(())
}

fn main() -> ExitCode {
    // A panic is a bug: one line and the internal-failure status, never a
    // backtrace.
    std::panic::set_hook(Box::new(|info| {
        output::remove_temporaries();
        let message = Failure::Internal(format!("{info} (please report)"));
        eprintln!("{message}");
        std::process::exit(1);
    }));
    if let Err(failure) = output::exit_on_signals() {
        return failure.report();
    }
    match Cli::try_parse() {
        Ok(cli) => run(cli).map_or_else(|failure| failure.report(), |()| ExitCode::SUCCESS),
        Err(e) => failure::parse_exit(&e),
    }
}
