//! `dpmm ledger init`, `show`, `verify` and `repair`: the persistent
//! privacy budget of a dataset (dp-core's hash-chained, fsync'ed, locked
//! ledger, anchored by its head file against a rollback).
//!
//! `verify` checks the hash chain, the totals and the head without
//! changing anything; `repair` removes a torn final line (one never
//! completely written, so no noise was drawn for it) and nothing else. A
//! ledger without a head (written before heads existed) opens with a
//! one-line warning and is given one: refusing it would lock out every
//! existing ledger, and the warning says that a rollback before that point
//! could not be checked.
//!
//! A ledger stated in pure ε holds ε and takes only pure (Laplace)
//! releases. A ledger stated in (ε, δ) holds ρ-zCDP: the largest ρ whose
//! exact conversion (Canonne, Kamath, Steinke 2020, Corollary 13) is
//! (ε, δ)-DP; every release is charged in ρ (an (ε', δ') release the
//! largest ρ' whose conversion is (ε', δ')-DP, a pure ε' release ε'²/2),
//! and ρ-zCDP composes by addition, so the whole sequence of releases is
//! (ε, δ)-DP.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use dp_core::Cost;
use dp_core::kernel::{check_delta, check_epsilon, zcdp_delta, zcdp_rho_for};
use dp_core::ledger::{Anchor, Ledger, LedgerBudget, Record, Verification};

use crate::Failure;

/// `dpmm ledger …`.
#[derive(Subcommand)]
pub enum LedgerCommand {
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

/// Runs a ledger subcommand; errors are one line.
pub fn run(command: LedgerCommand) -> Result<(), Failure> {
    match command {
        LedgerCommand::Init {
            ledger,
            total_epsilon,
            total_delta,
        } => init(&ledger, total_epsilon, total_delta),
        LedgerCommand::Show { ledger } => show(&ledger),
        LedgerCommand::Verify { ledger } => verify(&ledger),
        LedgerCommand::Repair { ledger } => repair(&ledger),
    }
}

/// Opens the ledger at `path` for a command ([`Ledger::open`]), warning in
/// one line on stderr when it had charges but no head.
pub fn open(path: &Path) -> Result<Ledger, Failure> {
    let ledger = Ledger::open(path)?;
    if ledger.anchor() == Anchor::Missing && ledger.entries().len() > 1 {
        eprintln!("warning: {}", missing_head(path));
    }
    Ok(ledger)
}

fn missing_head(path: &Path) -> String {
    format!(
        "{} had no head anchor (a ledger from before anchors, or its head was deleted): \
         a rollback before now cannot be detected; one is written from now on",
        path.display()
    )
}

/// One line on the head anchor.
fn anchor_line(path: &Path, anchor: Anchor, entries: usize) -> String {
    match anchor {
        Anchor::Matches => format!("head anchor: matches entry {}", entries - 1),
        Anchor::Behind { head } => format!(
            "head anchor: {} entries behind (a release stopped between its charge and the \
             head's update); the next command that opens the ledger brings it up to date",
            entries as u64 - head
        ),
        Anchor::Missing if entries > 1 => format!("warning: {}", missing_head(path)),
        Anchor::Missing => "head anchor: none yet (no charges)".into(),
    }
}

/// The budget line of a verification.
fn totals_line(path: &Path, v: &Verification) -> String {
    let (unit, total) = match v.budget {
        LedgerBudget::PureDp { epsilon } => ("ε", epsilon),
        LedgerBudget::Zcdp { rho } => ("ρ (zCDP)", rho),
    };
    let charges = v.entries - 1;
    let plural = if charges == 1 { "" } else { "s" };
    format!(
        "{}: hash chain intact over {} entries; {charges} charge{plural}, spent {:.6e} of \
         {total:.6e} {unit}",
        path.display(),
        v.entries,
        v.spent
    )
}

fn verify(path: &Path) -> Result<(), Failure> {
    let v = Ledger::verify(path)?;
    if let Some(torn) = &v.torn {
        return Err(Failure::BadInput(format!(
            "{} line {}: a torn final line ({}, {} bytes), never completely written, so no \
             noise was drawn for it; `dpmm ledger repair --ledger {}` removes it",
            path.display(),
            torn.line,
            torn.reason,
            torn.bytes,
            path.display()
        )));
    }
    println!("{}", totals_line(path, &v));
    println!("{}", anchor_line(path, v.anchor, v.entries));
    println!("sound");
    Ok(())
}

fn repair(path: &Path) -> Result<(), Failure> {
    let v = Ledger::repair(path)?;
    match &v.torn {
        Some(torn) => println!(
            "removed line {} of {}: a torn final line ({}, {} bytes), never completely \
             written, so no noise was drawn for it",
            torn.line,
            path.display(),
            torn.reason,
            torn.bytes
        ),
        None => println!("{}: nothing to repair (no torn final line)", path.display()),
    }
    println!("{}", totals_line(path, &v));
    if v.anchor == Anchor::Missing && v.entries > 1 {
        println!("warning: {}", missing_head(path));
    }
    Ok(())
}

/// What the flags `--epsilon` (or `--total-epsilon`) and the optional
/// `--delta` state, validated (ranges of `dp_core::kernel::accounting`):
/// ε alone is pure ε-DP; (ε, δ) is the largest ρ-zCDP whose exact
/// conversion (CKS20 Corollary 13) is (ε, δ)-DP. The one reading of these
/// flags shared by `dpmm ledger init` and `dpmm release`.
pub fn cost_for(epsilon: f64, delta: Option<f64>) -> Result<Cost, Failure> {
    let epsilon = check_epsilon(epsilon)?;
    Ok(match delta {
        None => Cost::Epsilon(epsilon),
        Some(d) => Cost::Rho(zcdp_rho_for(epsilon, check_delta(d)?)?),
    })
}

/// The ledger budget for a total (ε) or (ε, δ) ([`cost_for`]).
pub fn budget_for(epsilon: f64, delta: Option<f64>) -> Result<LedgerBudget, Failure> {
    Ok(match cost_for(epsilon, delta)? {
        Cost::Epsilon(epsilon) => LedgerBudget::PureDp { epsilon },
        Cost::Rho(rho) => LedgerBudget::Zcdp { rho },
    })
}

fn init(path: &Path, epsilon: f64, delta: Option<f64>) -> Result<(), Failure> {
    let budget = budget_for(epsilon, delta)?;
    // Like `mkdir -p`: a new ledger may start a new results folder.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ledger::init(path, budget).map_err(|e| e.to_string())?;
    match budget {
        LedgerBudget::PureDp { epsilon } => {
            eprintln!("created {}: pure ε = {epsilon}", path.display())
        }
        LedgerBudget::Zcdp { rho } => eprintln!(
            "created {}: ρ-zCDP total ρ = {rho:.6e}, the largest ρ whose exact conversion \
             (CKS20 Corollary 13) is ({epsilon}, {})-DP",
            path.display(),
            delta.unwrap_or_default()
        ),
    }
    Ok(())
}

fn show(path: &Path) -> Result<(), Failure> {
    let ledger = open(path)?;
    let (unit, total) = match ledger.budget() {
        LedgerBudget::PureDp { epsilon } => {
            println!("budget: pure ε-DP, total ε = {epsilon}");
            println!("composition: sequential, the ε of the releases add up");
            ("ε", epsilon)
        }
        LedgerBudget::Zcdp { rho } => {
            println!("budget: ρ-zCDP, total ρ = {rho:.6e}");
            println!(
                "composition: the ρ of the releases add up; (ε, δ) by the exact conversion of \
                 Canonne, Kamath, Steinke 2020 (Corollary 13); a pure ε release costs ε²/2"
            );
            ("ρ", rho)
        }
    };
    println!("entry  charged ({unit})  label");
    for (seq, record) in ledger.entries().iter().enumerate() {
        if let Record::Charge { amount, label } = record {
            println!("{seq:>5}  {amount:<13.6e}  {label}");
        }
    }
    println!("spent:  {:.6e} of {total:.6e} {unit}", ledger.spent());
    println!("left:   {:.6e} {unit}", ledger.remaining());
    if let LedgerBudget::Zcdp { .. } = ledger.budget() {
        for delta in [1e-6, 1e-9] {
            println!(
                "spent so far as (ε, δ = {delta:e}): ε ≤ {:.6}",
                epsilon_for(ledger.spent(), delta)
            );
        }
    }
    Ok(())
}

/// The smallest ε (to 1e-9 relative, rounded up) whose CKS20 conversion of
/// ρ-zCDP is (ε, δ)-DP; 0 for ρ = 0.
fn epsilon_for(rho: f64, delta: f64) -> f64 {
    if rho <= 0.0 {
        return 0.0;
    }
    // ε = ρ + 2√(ρ ln 1/δ) is always enough (Bun–Steinke Prop. 1.3).
    let mut hi = rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt();
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if hi - lo <= 1e-9 * hi {
            break;
        }
        if zcdp_delta(rho, mid) <= delta {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}
