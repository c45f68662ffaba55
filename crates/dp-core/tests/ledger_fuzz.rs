//! The ledger reader (`Ledger::open`) on untrusted files: arbitrary bytes
//! and valid ledgers with bytes flipped, inserted, removed or cut give an
//! open ledger or a typed error, never a panic or a hang; an
//! opened ledger never shows more spent than its budget.
//!
//! The suite runs proptest's default number of cases; the long run is
//! `PROPTEST_CASES=100000 cargo test --release -p dp-core --test ledger_fuzz`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use dp_core::DpError;
use dp_core::ledger::{Ledger, LedgerBudget};
use proptest::prelude::*;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ledger-fuzz");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// The bytes of a valid ledger (a budget and two charges), made once.
fn valid_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let path = dir().join("valid.jsonl");
        Ledger::init(&path, LedgerBudget::PureDp { epsilon: 1.0 }).unwrap();
        let mut ledger = Ledger::open(&path).unwrap();
        ledger.charge(0.25, "first").unwrap();
        ledger.charge(0.5, "second \"quoted\"\nlabel").unwrap();
        drop(ledger);
        std::fs::read(&path).unwrap()
    })
}

/// Opens `bytes` written to a fresh file (one per thread, so a parallel
/// test runner cannot collide on its lock).
fn open(bytes: &[u8]) -> Result<(), TestCaseError> {
    let path = dir().join(format!("case-{:?}.jsonl", std::thread::current().id()));
    let _ = std::fs::remove_file(&path);
    std::fs::write(&path, bytes).unwrap();
    match Ledger::open(&path) {
        Ok(ledger) => {
            prop_assert!(ledger.spent() <= ledger.budget_total() + 1e-12);
        }
        Err(e) => {
            prop_assert!(matches!(e, DpError::Ledger(_) | DpError::Io(_)), "{:?}", e);
        }
    }
    Ok(())
}

trait Total {
    fn budget_total(&self) -> f64;
}

impl Total for Ledger {
    fn budget_total(&self) -> f64 {
        match self.budget() {
            LedgerBudget::PureDp { epsilon } => epsilon,
            LedgerBudget::Zcdp { rho } => rho,
        }
    }
}

#[test]
fn the_valid_ledger_opens_with_its_charges() {
    let path = dir().join("check.jsonl");
    std::fs::write(&path, valid_bytes()).unwrap();
    let ledger = Ledger::open(&path).unwrap();
    assert!((ledger.spent() - 0.75).abs() < 1e-12);
    assert_eq!(ledger.entries().len(), 3);
}

/// The valid ledger damaged by up to four byte edits, and sometimes cut.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let edits = dp_testkit::byte_edits(
        valid_bytes().to_vec(),
        b"0123456789abcdef-.e{}[]\",: \n",
        0..5,
    );
    (edits, any::<prop::sample::Index>(), any::<bool>()).prop_map(|(mut bytes, cut, truncate)| {
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        bytes
    })
}

proptest! {
    #[test]
    fn any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        open(&bytes)?;
    }

    #[test]
    fn mutated_ledgers(bytes in mutated()) {
        open(&bytes)?;
    }
}
