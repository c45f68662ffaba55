//! A persistent privacy accountant for the command line: an append-only
//! file of JSON lines, one per event, chained by SHA-256, with a head
//! anchor beside it.
//!
//! - The first line records the total budget (pure ε or ρ-zCDP); each
//!   later line one charge. Each line carries the hash of the previous
//!   one and its own hash over `(seq, prev, record)`, so editing,
//!   deleting or reordering lines is detected on open and the ledger is
//!   refused (never reset).
//! - [`Ledger::charge`] appends the line and `fsync`s it before it
//!   returns; a release charges first and produces output afterwards, so
//!   a crash between the two loses budget, never privacy.
//! - A crash during the append leaves a torn final line (never completely
//!   written, so no noise was drawn for it): [`Ledger::open`] refuses it,
//!   [`Ledger::verify`] reports it and [`Ledger::repair`] removes it, and
//!   only it: a bad line anywhere else, or a broken chain, is not
//!   repairable.
//! - Rollback: after each charge the ledger's head (its number of entries
//!   and its last hash) is written atomically beside it, to
//!   `<ledger>.head` (a temporary file in the same directory, fsync'ed,
//!   renamed, the directory fsync'ed). A ledger shorter than its head, or
//!   whose entry at the head's index does not carry the head's hash (lines
//!   cut from its end, the file replaced by an older copy), is refused as
//!   rolled back. A ledger longer than its head (a crash between the
//!   append and the head's update) is accepted and its head brought up to
//!   date. A ledger without a head is accepted and given one
//!   ([`Anchor::Missing`], for the caller to warn about): ledgers written
//!   before heads existed must still open, and the file format of the
//!   lines is unchanged.
//! - What the head cannot detect: the ledger and its head restored
//!   together from an older copy, or the head deleted together with the
//!   end of the ledger (then it opens as [`Anchor::Missing`]); nor
//!   anything done by whoever can write the directory and recompute
//!   SHA-256. It guards against accidents, crashes and careless restores,
//!   not against the ledger's own administrator.
//! - An open ledger holds an exclusive lock on the file (`File::try_lock`),
//!   so two releases cannot spend the same budget concurrently; a second
//!   opener gets a typed error instead of waiting. The head is written
//!   under the same lock.
//!
//! ```
//! use dp_core::ledger::{Ledger, LedgerBudget};
//! let dir = std::env::temp_dir().join(format!("dp-core-ledger-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("budget.jsonl");
//! # let _ = std::fs::remove_file(&path);
//! # let _ = std::fs::remove_file(dir.join("budget.jsonl.head"));
//! Ledger::init(&path, LedgerBudget::PureDp { epsilon: 1.0 }).unwrap();
//! let mut ledger = Ledger::open(&path).unwrap();
//! let mut session = ledger.open_session(0.6, "first release").unwrap();
//! assert!(ledger.open_session(0.6, "second release").is_err());
//! assert!((ledger.remaining() - 0.4).abs() < 1e-12);
//! # drop(session); drop(ledger); std::fs::remove_dir_all(&dir).unwrap();
//! ```

mod anchor;
mod scan;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::kernel::{Session, add_up, check_epsilon, check_rho};
use crate::sampling::NoiseSource;
use crate::{DpError, Result};

pub use anchor::{Anchor, head_path};
pub use scan::TornLine;

/// The total budget a ledger guards: dp-core's one budget type (the
/// name is kept for the ledger's readers).
pub type LedgerBudget = crate::kernel::TotalBudget;

/// Validates a ledger amount (a total or a charge) in `budget`'s unit.
fn check_amount(budget: LedgerBudget, amount: f64) -> Result<f64> {
    match budget {
        LedgerBudget::PureDp { .. } => check_epsilon(amount),
        LedgerBudget::Zcdp { .. } => check_rho(amount),
    }
}

/// One event of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    /// The first line: the total budget.
    Init {
        /// The budget.
        budget: LedgerBudget,
    },
    /// A charge, in the budget's unit.
    Charge {
        /// ε or ρ spent.
        amount: f64,
        /// What it was for (no private data).
        label: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Line {
    seq: u64,
    prev: String,
    record: Record,
    hash: String,
}

fn hash_of(seq: u64, prev: &str, record: &Record) -> Result<String> {
    let body =
        serde_json::to_string(&(seq, prev, record)).map_err(|e| DpError::Ledger(e.to_string()))?;
    let digest = Sha256::digest(body.as_bytes());
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

const GENESIS: &str = "genesis";

/// An open, locked ledger.
#[derive(Debug)]
pub struct Ledger {
    file: File,
    path: PathBuf,
    budget: LedgerBudget,
    records: Vec<Record>,
    spent: f64,
    last_hash: String,
    anchor: Anchor,
    /// Set when an append failed: the file's end is then uncertain, and
    /// no further charge is made through this handle.
    failed: bool,
}

/// What [`Ledger::verify`] found in a ledger whose chain is intact and
/// which is not rolled back (those are errors).
#[derive(Debug, Clone, PartialEq)]
pub struct Verification {
    /// The total budget.
    pub budget: LedgerBudget,
    /// Complete entries, the `Init` included.
    pub entries: usize,
    /// Total charged by the complete entries.
    pub spent: f64,
    /// What the head anchor said.
    pub anchor: Anchor,
    /// A final line that was never completely written ([`Ledger::repair`]
    /// removes it; the ledger does not open until then).
    pub torn: Option<TornLine>,
}

impl Verification {
    fn of(scan: scan::Scan, anchor: Anchor) -> Self {
        Self {
            budget: scan.budget,
            entries: scan.records.len(),
            spent: scan.spent,
            anchor,
            torn: scan.torn,
        }
    }
}

impl Ledger {
    /// Creates a new ledger holding `budget`, with its head; refuses an
    /// existing file, and an existing head (a ledger was kept at this path:
    /// deleting it and starting again would reset its budget).
    pub fn init(path: &Path, budget: LedgerBudget) -> Result<()> {
        check_amount(budget, budget.total())?;
        let head = anchor::head_path(path);
        if path.exists() {
            return Err(DpError::Ledger(format!(
                "{} already exists and is never overwritten (`dpmm ledger show` shows a \
                 ledger's budget and charges); give a new path for a new ledger",
                path.display()
            )));
        }
        if head.exists() {
            return Err(DpError::Ledger(format!(
                "{} is missing but its head {} exists: a ledger was kept there and is gone, and \
                 starting one again would reset its budget; restore the ledger from a backup, \
                 or give a new path for a new ledger",
                path.display(),
                head.display()
            )));
        }
        let file = open_locked(
            OpenOptions::new().write(true).create_new(true),
            path,
            "create",
        )?;
        let mut ledger = Self {
            file,
            path: path.to_owned(),
            budget,
            records: Vec::new(),
            spent: 0.0,
            last_hash: GENESIS.into(),
            anchor: Anchor::Missing,
            failed: false,
        };
        ledger.append(Record::Init { budget })?;
        // Writes the head and makes the new directory entries durable.
        anchor::write(path, 1, &ledger.last_hash)
    }

    /// Opens, locks and verifies a ledger (every line parses, the chain of
    /// hashes is intact, the first line is the only `Init`, every charge is
    /// valid and the total never exceeds the budget), refuses a torn final
    /// line and a rollback, and brings the head up to date when it is
    /// behind or missing ([`Ledger::anchor`] says which).
    pub fn open(path: &Path) -> Result<Self> {
        let file = open_locked(OpenOptions::new().read(true).append(true), path, "open")?;
        let scan = scan::scan(&file, path)?;
        let anchor = anchor::check(path, &scan.hashes)?;
        if let Some(torn) = &scan.torn {
            return Err(DpError::Ledger(format!(
                "{} line {}: a torn final line ({}, {} bytes): it was never completely \
                 written, so no noise was drawn for it; `dpmm ledger repair` removes it",
                path.display(),
                torn.line,
                torn.reason,
                torn.bytes
            )));
        }
        if anchor != Anchor::Matches {
            anchor::write(path, scan.hashes.len(), scan.last_hash())?;
        }
        Ok(Self {
            file,
            path: path.to_owned(),
            budget: scan.budget,
            last_hash: scan.last_hash().to_owned(),
            records: scan.records,
            spent: scan.spent,
            anchor,
            failed: false,
        })
    }

    /// Checks a ledger without changing anything: the chain, the totals
    /// and the head. A broken chain, an invalid entry or a rollback is an
    /// error; a torn final line is reported in the result.
    pub fn verify(path: &Path) -> Result<Verification> {
        let file = open_locked(OpenOptions::new().read(true), path, "open")?;
        let scan = scan::scan(&file, path)?;
        let anchor = anchor::check(path, &scan.hashes)?;
        Ok(Verification::of(scan, anchor))
    }

    /// Removes a torn final line, and nothing else: what
    /// [`Ledger::verify`] finds, with `torn` the line removed (`None`:
    /// nothing to repair, nothing changed). Refuses everything
    /// [`Ledger::verify`] refuses, a rollback included: a head recording
    /// the torn line means it was once complete, not torn. After a repair
    /// the head is brought up to date.
    pub fn repair(path: &Path) -> Result<Verification> {
        let file = open_locked(OpenOptions::new().read(true).write(true), path, "open")?;
        let scan = scan::scan(&file, path)?;
        let anchor = anchor::check(path, &scan.hashes)?;
        if scan.torn.is_some() {
            file.set_len(scan.complete_len)
                .and_then(|()| file.sync_all())
                .map_err(|e| DpError::Ledger(format!("cannot repair {}: {e}", path.display())))?;
            anchor::write(path, scan.hashes.len(), scan.last_hash())?;
        }
        Ok(Verification::of(scan, anchor))
    }

    /// Appends `record` as one line, fsync'ed. A failed write is undone
    /// (the file cut back to its length before) where possible, and this
    /// handle refuses further appends either way.
    fn append(&mut self, record: Record) -> Result<()> {
        let io = |e: std::io::Error| {
            DpError::Ledger(format!("cannot write {}: {e}", self.path.display()))
        };
        if self.failed {
            return Err(DpError::Ledger(format!(
                "{}: an earlier write failed; open the ledger again",
                self.path.display()
            )));
        }
        let seq = self.records.len() as u64;
        let hash = hash_of(seq, &self.last_hash, &record)?;
        let line = Line {
            seq,
            prev: self.last_hash.clone(),
            record: record.clone(),
            hash: hash.clone(),
        };
        let mut text = serde_json::to_string(&line).map_err(|e| DpError::Ledger(e.to_string()))?;
        text.push('\n');
        let before = self.file.metadata().map_err(io)?.len();
        let written = (&self.file)
            .write_all(text.as_bytes())
            .and_then(|()| self.file.sync_all());
        if let Err(e) = written {
            self.failed = true;
            let _ = self
                .file
                .set_len(before)
                .and_then(|()| self.file.sync_all());
            return Err(io(e));
        }
        self.records.push(record);
        self.last_hash = hash;
        Ok(())
    }

    /// Charges `amount` (ε or ρ, the budget's unit): refused with
    /// [`DpError::BudgetExceeded`] and nothing written when it would
    /// overspend; otherwise durable (written and fsync'ed, the head
    /// updated) on return. An error after the line was written (the head
    /// could not be) leaves the charge spent: budget lost, never privacy.
    pub fn charge(&mut self, amount: f64, label: &str) -> Result<()> {
        let amount = check_amount(self.budget, amount)?;
        let after = add_up(self.spent, amount);
        if after > self.budget.total() {
            return Err(DpError::BudgetExceeded {
                requested: amount,
                remaining: self.remaining(),
            });
        }
        self.append(Record::Charge {
            amount,
            label: label.to_owned(),
        })?;
        self.spent = after;
        anchor::write(&self.path, self.records.len(), &self.last_hash)
    }

    /// Charges `amount` and returns a [`Session`] holding exactly that
    /// budget, drawing from operating-system entropy: the durable charge
    /// precedes every draw the session can make.
    pub fn open_session(&mut self, amount: f64, label: &str) -> Result<Session> {
        let noise = NoiseSource::from_os_entropy()?;
        self.charge(amount, label)?;
        let budget = match self.budget {
            LedgerBudget::PureDp { .. } => LedgerBudget::PureDp { epsilon: amount },
            LedgerBudget::Zcdp { .. } => LedgerBudget::Zcdp { rho: amount },
        };
        Ok(Session::with_source(Some(budget), noise))
    }

    /// The total budget.
    pub fn budget(&self) -> LedgerBudget {
        self.budget
    }

    /// Every record, the `Init` first.
    pub fn entries(&self) -> &[Record] {
        &self.records
    }

    /// Total charged (rounded upward).
    pub fn spent(&self) -> f64 {
        self.spent
    }

    /// Left to charge.
    pub fn remaining(&self) -> f64 {
        (self.budget.total() - self.spent).max(0.0)
    }

    /// What the head anchor said when the ledger was opened (it has been
    /// brought up to date since): [`Anchor::Missing`] on a ledger with
    /// charges deserves a warning, as a rollback before this point could
    /// not be checked.
    pub fn anchor(&self) -> Anchor {
        self.anchor
    }
}

/// Opens `path` with `options` and takes its exclusive lock, so that a
/// second release on the same ledger is refused rather than interleaved;
/// `verb` names the operation in the error.
fn open_locked(options: &OpenOptions, path: &Path, verb: &str) -> Result<File> {
    let file = options
        .open(path)
        .map_err(|e| DpError::Ledger(format!("cannot {verb} {}: {e}", path.display())))?;
    file.try_lock().map_err(|e| match e {
        std::fs::TryLockError::WouldBlock => {
            DpError::Ledger(format!("{} is in use by another release", path.display()))
        }
        std::fs::TryLockError::Error(e) => {
            DpError::Ledger(format!("cannot lock {}: {e}", path.display()))
        }
    })?;
    Ok(file)
}
