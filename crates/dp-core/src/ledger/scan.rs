//! Reading a ledger file: every complete line verified (parse, chain,
//! budget), and a final line that was never completely written told
//! apart from damage anywhere else.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::{GENESIS, LedgerBudget, Line, Record, hash_of};
use crate::kernel::add_up;
use crate::{DpError, Result};

/// The longest line a ledger entry can be (its label is a file name and a
/// few numbers); a longer line is no entry, torn or whole, and reading
/// stops there instead of holding an arbitrary file in memory.
const MAX_LINE: u64 = 1 << 20;

/// A final line that was never completely written: no terminating
/// newline, or a blank or unparsable last line. A charge is written and
/// fsync'ed before any noise is drawn for it, so no noise was drawn for a
/// torn line; [`super::Ledger::repair`] removes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornLine {
    /// Its line number, from 1.
    pub line: usize,
    /// Its length in bytes, its newline included when it has one.
    pub bytes: u64,
    /// Why it is torn: `"no terminating newline"`, `"blank"` or
    /// `"not a ledger entry"`.
    pub reason: &'static str,
}

/// A ledger file as read.
pub(super) struct Scan {
    pub budget: LedgerBudget,
    /// Every complete entry's record, the `Init` first.
    pub records: Vec<Record>,
    /// Every complete entry's hash, in order (the head anchor names one).
    pub hashes: Vec<String>,
    pub spent: f64,
    /// The length in bytes of the complete entries: where a torn line
    /// starts.
    pub complete_len: u64,
    pub torn: Option<TornLine>,
}

impl Scan {
    /// The last complete entry's hash.
    pub fn last_hash(&self) -> &str {
        self.hashes.last().map_or(GENESIS, String::as_str)
    }
}

/// Reads and verifies the ledger open as `file` (named `path` in errors):
/// every complete line parses, the chain of hashes is intact, the first
/// line is the only `Init`, every charge is valid and the total never
/// exceeds the budget. Only the final line may be torn ([`TornLine`]); a
/// bad line anywhere else refuses the ledger.
pub(super) fn scan(file: &File, path: &Path) -> Result<Scan> {
    let corrupt = |n: usize, why: &str| {
        DpError::Ledger(format!(
            "{} line {n}: {why}; refusing the ledger",
            path.display()
        ))
    };
    let io = |e: std::io::Error| DpError::Ledger(format!("cannot read {}: {e}", path.display()));
    let mut reader = BufReader::new(file);
    let mut entries = Entries::default();
    let mut torn = None;
    let mut buf = Vec::new();
    for n in 1.. {
        buf.clear();
        (&mut reader)
            .take(MAX_LINE + 1)
            .read_until(b'\n', &mut buf)
            .map_err(io)?;
        if buf.is_empty() {
            break;
        }
        let bytes = buf.len() as u64;
        if bytes > MAX_LINE {
            return Err(corrupt(n, "longer than any ledger entry"));
        }
        let Some(body) = buf.strip_suffix(b"\n") else {
            torn = Some(TornLine {
                line: n,
                bytes,
                reason: "no terminating newline",
            });
            break;
        };
        let at_end = reader.fill_buf().map_err(io)?.is_empty();
        match serde_json::from_slice::<Line>(body) {
            Ok(line) => {
                entries.push(line).map_err(|why| corrupt(n, why))?;
                entries.len += bytes;
            }
            Err(_) if at_end => {
                let blank = body.iter().all(u8::is_ascii_whitespace);
                torn = Some(TornLine {
                    line: n,
                    bytes,
                    reason: if blank { "blank" } else { "not a ledger entry" },
                });
            }
            Err(_) => return Err(corrupt(n, "not a ledger entry")),
        }
    }
    let budget = entries.budget.ok_or_else(|| {
        corrupt(
            1,
            "no complete entry (an interrupted `ledger init`?), so no budget",
        )
    })?;
    Ok(Scan {
        budget,
        records: entries.records,
        hashes: entries.hashes,
        spent: entries.spent,
        complete_len: entries.len,
        torn,
    })
}

/// The complete entries read so far.
#[derive(Default)]
struct Entries {
    budget: Option<LedgerBudget>,
    records: Vec<Record>,
    hashes: Vec<String>,
    spent: f64,
    /// Bytes of the complete lines, newlines included.
    len: u64,
}

impl Entries {
    /// Verifies `line` as the next entry and keeps it; the error says why
    /// it cannot be.
    fn push(&mut self, line: Line) -> std::result::Result<(), &'static str> {
        let prev = self.hashes.last().map_or(GENESIS, String::as_str);
        let hash = hash_of(line.seq, &line.prev, &line.record).map_err(|_| "not a ledger entry")?;
        if line.seq != self.records.len() as u64 || line.prev != prev || hash != line.hash {
            return Err("hash chain broken (edited, reordered or truncated)");
        }
        match (&line.record, self.budget) {
            (Record::Init { budget }, None) => {
                super::check_amount(*budget, budget.total()).map_err(|_| "invalid budget")?;
                self.budget = Some(*budget);
            }
            (Record::Charge { amount, .. }, Some(budget)) => {
                super::check_amount(budget, *amount).map_err(|_| "invalid charge")?;
                self.spent = add_up(self.spent, *amount);
                if self.spent > budget.total() {
                    return Err("charges exceed the budget");
                }
            }
            _ => return Err("misplaced entry"),
        }
        self.records.push(line.record);
        self.hashes.push(line.hash);
        Ok(())
    }
}
