//! `dpmm`: the command for people who hold records (DESIGN.md §3, §7).
//!
//! So far one subcommand works: `dpmm schema draft records.csv[.gz]` writes
//! a starting schema from the CSV's header line (and nothing after it) for
//! a person to complete from public knowledge. Bad input: one line on
//! stderr, exit status 2.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dpmm_records::{DRAFT_NOTE, draft_from_path};

mod ledger_cmd;
mod release;
mod release_plan;

/// Optimized linear queries under differential privacy, for data curators.
#[derive(Parser)]
#[command(name = "dpmm", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Records schemas: how CSV columns become the attributes of a domain.
    #[command(subcommand)]
    Schema(SchemaCommand),
    /// Release private answers to a workload from records: validate,
    /// aggregate, charge the ledger, measure (exact discrete noise),
    /// reconstruct, write answers with standard errors and 95% intervals.
    Release(release::ReleaseArgs),
    /// The persistent privacy budget: create a ledger, show it.
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

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Release(args) => release::run(&args),
        Command::Ledger(command) => ledger_cmd::run(command),
        Command::Schema(SchemaCommand::Draft { records, out }) => {
            let draft = draft_from_path(&records).map_err(|e| e.to_string())?;
            let mut json = draft.to_json();
            json.push('\n');
            match out {
                Some(path) => {
                    std::fs::write(&path, json).map_err(|e| format!("{}: {e}", path.display()))?
                }
                None => std::io::stdout()
                    .write_all(json.as_bytes())
                    .map_err(|e| format!("standard output: {e}"))?,
            }
            eprintln!("NOTE: {DRAFT_NOTE}");
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    // clap itself exits with status 2 on a usage error.
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
