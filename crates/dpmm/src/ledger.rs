//! The persistent privacy budget of a dataset (`dpmm ledger init`,
//! `show`, `verify` and `repair`) (dp-core's hash-chained, fsync'ed, locked
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

use std::fmt::Write;
use std::path::Path;

use dp_core::PrivacyBudget;
use dp_core::ledger::{Anchor, Ledger, LedgerBudget, Record, Verification};

use crate::privacy::{epsilon_for, ledger_budget};
use crate::{Error, Result};

/// Opens the ledger at `path` (locked, verified) for a measurement costing
/// `cost`: what it will be charged, in its unit, refused (nothing written)
/// when the ledger's kind cannot pay for it or too little is left. `what`
/// names the measurement in the refusal ("this release", "this stream").
pub(crate) fn open_for(path: &Path, cost: dp_core::Cost, what: &str) -> Result<(Ledger, f64)> {
    let ledger = Ledger::open(path)?;
    let charge = crate::privacy::charge(ledger.budget(), cost)
        .map_err(|e| Error::Ledger(format!("{}: {e}", path.display())))?;
    if charge > ledger.remaining() {
        return Err(Error::BudgetExceeded(format!(
            "budget exceeded: {what} needs {charge} but {} has {} left",
            path.display(),
            ledger.remaining()
        )));
    }
    Ok((ledger, charge))
}

/// The one-line warning for a ledger at `path` that has charges but no
/// head anchor (a rollback before now cannot be detected), read without
/// changing anything ([`Ledger::verify`]); `None` otherwise, and when it
/// cannot be read (opening it says why). Opening the ledger writes a head,
/// so the warning exists once: [`crate::Release::run`] asks before it
/// opens and hands the warning back on success and failure alike.
pub fn head_warning(path: &Path) -> Option<String> {
    let v = Ledger::verify(path).ok()?;
    (v.anchor == Anchor::Missing && v.entries > 1).then(|| missing_head(path))
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

/// `dpmm ledger verify`: checks the hash chain, the totals and the head
/// anchor without changing anything; the report, or the damage as an
/// error (a torn final line names the repair).
pub fn verify(path: &Path) -> Result<String> {
    let v = Ledger::verify(path)?;
    if let Some(torn) = &v.torn {
        return Err(Error::Ledger(format!(
            "{} line {}: a torn final line ({}, {} bytes), never completely written, so no \
             noise was drawn for it; `dpmm ledger repair --ledger {}` removes it",
            path.display(),
            torn.line,
            torn.reason,
            torn.bytes,
            path.display()
        )));
    }
    Ok(format!(
        "{}\n{}\nsound",
        totals_line(path, &v),
        anchor_line(path, v.anchor, v.entries)
    ))
}

/// `dpmm ledger repair`: removes a torn final line (never completely
/// written, so no noise was drawn for it) and nothing else; says what it
/// removed.
pub fn repair(path: &Path) -> Result<String> {
    let v = Ledger::repair(path)?;
    let mut out = match &v.torn {
        Some(torn) => format!(
            "removed line {} of {}: a torn final line ({}, {} bytes), never completely \
             written, so no noise was drawn for it",
            torn.line,
            path.display(),
            torn.reason,
            torn.bytes
        ),
        None => format!("{}: nothing to repair (no torn final line)", path.display()),
    };
    out = format!("{out}\n{}", totals_line(path, &v));
    if v.anchor == Anchor::Missing && v.entries > 1 {
        out = format!("{out}\nwarning: {}", missing_head(path));
    }
    Ok(out)
}

/// A ledger's budget as numbers, in its own unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Status {
    /// `epsilon` (a pure ε ledger) or `rho` (a ρ-zCDP one).
    pub unit: &'static str,
    /// The total it holds.
    pub total: f64,
    /// What the releases charged to it have spent.
    pub spent: f64,
    /// What is left.
    pub remaining: f64,
    /// The releases charged.
    pub releases: usize,
}

/// The ledger's budget, read without changing anything (the chain and
/// the head are checked as [`verify`] checks them; a torn final line,
/// which [`repair`] removes, counts for nothing).
pub fn status(path: &Path) -> Result<Status> {
    let v = Ledger::verify(path)?;
    Ok(Status::of(v.budget, v.spent, v.entries))
}

impl Status {
    /// The status of a ledger holding `budget`, `spent` of it by `entries`
    /// lines (its first line is the budget).
    fn of(budget: LedgerBudget, spent: f64, entries: usize) -> Self {
        let (unit, total) = match budget {
            LedgerBudget::PureDp { epsilon } => ("epsilon", epsilon),
            LedgerBudget::Zcdp { rho } => ("rho", rho),
        };
        Self {
            unit,
            total,
            spent,
            remaining: (total - spent).max(0.0),
            releases: entries.saturating_sub(1),
        }
    }

    /// The status of an open (locked) ledger.
    pub(crate) fn of_open(ledger: &Ledger) -> Self {
        Self::of(ledger.budget(), ledger.spent(), ledger.entries().len())
    }
}

/// `dpmm ledger init`: creates a ledger holding `budget` (refusing an
/// existing file), creating its directory like `mkdir -p`; says what it
/// holds.
pub fn create(path: &Path, budget: PrivacyBudget) -> Result<String> {
    let held = ledger_budget(budget)?;
    // Like `mkdir -p`: a new ledger may start a new results folder.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::file(dir, e))?;
    }
    Ledger::init(path, held).map_err(|e| Error::Ledger(e.to_string()))?;
    Ok(match held {
        LedgerBudget::PureDp { epsilon } => {
            format!("created {}: pure ε = {epsilon}", path.display())
        }
        LedgerBudget::Zcdp { rho } => format!(
            "created {}: ρ-zCDP total ρ = {rho:.6e}, the largest ρ whose exact conversion \
             (CKS20 Corollary 13) is ({}, {})-DP",
            path.display(),
            budget.epsilon().get(),
            budget.delta().map_or(0.0, |d| d.get())
        ),
    })
}

/// `dpmm ledger show`: the budget, spent and left, entry by entry.
/// A ledger with charges but no head ends with a `warning:` line.
pub fn show(path: &Path) -> Result<String> {
    let warning = head_warning(path);
    let ledger = Ledger::open(path)?;
    let mut out = String::new();
    let (unit, total) = match ledger.budget() {
        LedgerBudget::PureDp { epsilon } => {
            out += &format!("budget: pure ε-DP, total ε = {epsilon}\n");
            out += "composition: sequential, the ε of the releases add up\n";
            ("ε", epsilon)
        }
        LedgerBudget::Zcdp { rho } => {
            out += &format!("budget: ρ-zCDP, total ρ = {rho:.6e}\n");
            out += "composition: the ρ of the releases add up; (ε, δ) by the exact conversion \
                    of Canonne, Kamath, Steinke 2020 (Corollary 13); a pure ε release costs \
                    ε²/2\n";
            ("ρ", rho)
        }
    };
    let _ = writeln!(out, "entry  charged ({unit})  label");
    for (seq, record) in ledger.entries().iter().enumerate() {
        if let Record::Charge { amount, label } = record {
            let _ = writeln!(out, "{seq:>5}  {amount:<13.6e}  {label}");
        }
    }
    let _ = writeln!(out, "spent:  {:.6e} of {total:.6e} {unit}", ledger.spent());
    let _ = write!(out, "left:   {:.6e} {unit}", ledger.remaining());
    if let LedgerBudget::Zcdp { .. } = ledger.budget() {
        for delta in [1e-6, 1e-9] {
            let _ = write!(
                out,
                "\nspent so far as (ε, δ = {delta:e}): ε ≤ {:.6}",
                epsilon_for(ledger.spent(), delta)
            );
        }
    }
    if let Some(warning) = warning {
        let _ = write!(out, "\nwarning: {warning}");
    }
    Ok(out)
}
