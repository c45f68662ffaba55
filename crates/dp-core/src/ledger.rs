//! A persistent privacy accountant for the command line: an append-only
//! file of JSON lines, one per event, chained by SHA-256.
//!
//! - The first line records the total budget (pure ε or ρ-zCDP); each
//!   later line one charge. Each line carries the hash of the previous
//!   one and its own hash over `(seq, prev, record)`, so editing,
//!   deleting or reordering lines, or cutting one, is detected on open and
//!   the ledger is refused (never reset). Removing whole lines from the
//!   end leaves a valid shorter chain and cannot be detected from the file
//!   alone (no more than replacing the file with an older copy): the
//!   ledger guards against accidents and concurrent releases, not against
//!   whoever may edit it.
//! - [`Ledger::charge`] appends the line and `fsync`s it before it
//!   returns; a release charges first and produces output afterwards, so
//!   a crash between the two loses budget, never privacy.
//! - An open ledger holds an exclusive lock on the file (`File::try_lock`),
//!   so two releases cannot spend the same budget concurrently; a second
//!   opener gets a typed error instead of waiting.
//!
//! ```
//! use dp_core::ledger::{Ledger, LedgerBudget};
//! let dir = std::env::temp_dir().join(format!("dp-core-ledger-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("budget.jsonl");
//! # let _ = std::fs::remove_file(&path);
//! Ledger::init(&path, LedgerBudget::PureDp { epsilon: 1.0 }).unwrap();
//! let mut ledger = Ledger::open(&path).unwrap();
//! let mut session = ledger.open_session(0.6, "first release").unwrap();
//! assert!(ledger.open_session(0.6, "second release").is_err());
//! assert!((ledger.remaining() - 0.4).abs() < 1e-12);
//! # drop(session); drop(ledger); std::fs::remove_dir_all(&dir).unwrap();
//! ```

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::kernel::{Session, add_up, check_epsilon, check_rho};
use crate::sampling::NoiseSource;
use crate::{DpError, Result};

/// The total budget a ledger guards.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum LedgerBudget {
    /// Pure ε-DP.
    PureDp {
        /// Total ε.
        epsilon: f64,
    },
    /// ρ-zCDP.
    Zcdp {
        /// Total ρ.
        rho: f64,
    },
}

impl LedgerBudget {
    fn total(self) -> f64 {
        match self {
            Self::PureDp { epsilon } => epsilon,
            Self::Zcdp { rho } => rho,
        }
    }

    fn check_amount(self, amount: f64) -> Result<f64> {
        match self {
            Self::PureDp { .. } => check_epsilon(amount),
            Self::Zcdp { .. } => check_rho(amount),
        }
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
}

impl Ledger {
    /// Creates a new ledger holding `budget`; refuses an existing file.
    pub fn init(path: &Path, budget: LedgerBudget) -> Result<()> {
        budget.check_amount(budget.total())?;
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
        };
        ledger.append(Record::Init { budget })?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // Make the new directory entry durable too (best effort on
            // platforms that cannot open directories).
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }

    /// Opens, locks and verifies a ledger: every line parses, the chain
    /// of hashes is intact, the first line is the only `Init`, every
    /// charge is valid and the total never exceeds the budget.
    pub fn open(path: &Path) -> Result<Self> {
        let file = open_locked(OpenOptions::new().read(true).append(true), path, "open")?;
        let corrupt = |n: usize, why: &str| {
            DpError::Ledger(format!(
                "{} line {n}: {why}; refusing the ledger",
                path.display()
            ))
        };
        let mut records = Vec::new();
        let mut prev = GENESIS.to_string();
        let mut budget = None;
        let mut spent = 0.0;
        let reader = BufReader::new(&file);
        for (n, line) in reader.split(b'\n').enumerate() {
            let bytes = line.map_err(|e| DpError::Ledger(e.to_string()))?;
            let line: Line =
                serde_json::from_slice(&bytes).map_err(|_| corrupt(n + 1, "not a ledger entry"))?;
            if line.seq != n as u64
                || line.prev != prev
                || hash_of(line.seq, &line.prev, &line.record)? != line.hash
            {
                return Err(corrupt(
                    n + 1,
                    "hash chain broken (edited, reordered or truncated)",
                ));
            }
            match (&line.record, budget) {
                (Record::Init { budget: b }, None) => {
                    b.check_amount(b.total())
                        .map_err(|_| corrupt(n + 1, "invalid budget"))?;
                    budget = Some(*b);
                }
                (Record::Charge { amount, .. }, Some(b)) => {
                    b.check_amount(*amount)
                        .map_err(|_| corrupt(n + 1, "invalid charge"))?;
                    spent = add_up(spent, *amount);
                    if spent > b.total() {
                        return Err(corrupt(n + 1, "charges exceed the budget"));
                    }
                }
                _ => return Err(corrupt(n + 1, "misplaced entry")),
            }
            prev = line.hash;
            records.push(line.record);
        }
        let budget = budget.ok_or_else(|| corrupt(0, "empty"))?;
        Ok(Self {
            file,
            path: path.to_owned(),
            budget,
            records,
            spent,
            last_hash: prev,
        })
    }

    fn append(&mut self, record: Record) -> Result<()> {
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
        let io = |e: std::io::Error| {
            DpError::Ledger(format!("cannot write {}: {e}", self.path.display()))
        };
        self.file.write_all(text.as_bytes()).map_err(io)?;
        self.file.sync_all().map_err(io)?;
        self.records.push(record);
        self.last_hash = hash;
        Ok(())
    }

    /// Charges `amount` (ε or ρ, the budget's unit): refused with
    /// [`DpError::BudgetExceeded`] and nothing written when it would
    /// overspend; otherwise durable (written and fsync'ed) on return.
    pub fn charge(&mut self, amount: f64, label: &str) -> Result<()> {
        let amount = self.budget.check_amount(amount)?;
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
        Ok(())
    }

    /// Charges `amount` and returns a [`Session`] holding exactly that
    /// budget, drawing from operating-system entropy: the durable charge
    /// precedes every draw the session can make.
    pub fn open_session(&mut self, amount: f64, label: &str) -> Result<Session> {
        let noise = NoiseSource::from_os_entropy()?;
        self.charge(amount, label)?;
        let budget = match self.budget {
            LedgerBudget::PureDp { .. } => crate::SessionBudget::PureDp { epsilon: amount },
            LedgerBudget::Zcdp { .. } => crate::SessionBudget::Zcdp { rho: amount },
        };
        Ok(Session::with_source(budget, noise))
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
