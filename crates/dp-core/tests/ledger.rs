//! The ledger survives crashes and sees rollbacks: a torn final line is
//! reported, refused and removed byte-exactly by `repair`, which refuses
//! every other damage; a ledger cut back, replaced or forked is refused
//! against its head; one longer than its head, or without a head, opens.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};

use dp_core::DpError;
use dp_core::ledger::{Anchor, Ledger, LedgerBudget, TornLine};

/// A fresh directory for `name`; returns the ledger path in it.
fn ledger_in(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dp-core-ledger2-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("ledger.jsonl")
}

fn head_of(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.head", path.display()))
}

/// The names in `path`'s directory, sorted.
fn files_beside(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A pure ε = 1 ledger at `path` with charges 0.25 and 0.25.
fn two_charges(path: &Path) {
    Ledger::init(path, LedgerBudget::PureDp { epsilon: 1.0 }).unwrap();
    let mut ledger = Ledger::open(path).unwrap();
    ledger.charge(0.25, "a").unwrap();
    ledger.charge(0.25, "b").unwrap();
}

/// The line a third charge of 0.125 labelled `label` appends to the
/// ledger at `path` (made on a copy, so `path` is unchanged).
fn next_line(path: &Path, label: &str) -> String {
    let copy = path.with_file_name(format!("copy-{label}.jsonl"));
    std::fs::copy(path, &copy).unwrap();
    std::fs::copy(head_of(path), head_of(&copy)).unwrap();
    Ledger::open(&copy).unwrap().charge(0.125, label).unwrap();
    let text = std::fs::read_to_string(&copy).unwrap();
    std::fs::remove_file(&copy).unwrap();
    std::fs::remove_file(head_of(&copy)).unwrap();
    text.lines().last().unwrap().to_string()
}

fn is_ledger_error(r: &Result<impl std::fmt::Debug, DpError>, needle: &str) -> bool {
    matches!(r, Err(DpError::Ledger(m)) if m.contains(needle))
}

#[test]
fn a_torn_final_line_is_reported_refused_and_removed_exactly() {
    let path = ledger_in("torn");
    two_charges(&path);
    let intact = std::fs::read(&path).unwrap();
    let head = std::fs::read(head_of(&path)).unwrap();
    let whole = next_line(&path, "c");
    let cases: Vec<(String, &str)> = vec![
        (whole.clone(), "no terminating newline"),
        (
            whole[..whole.len() / 2].to_string(),
            "no terminating newline",
        ),
        ("\0\0\0\0\0\0\0\0".into(), "no terminating newline"),
        ("\n".into(), "blank"),
        (" \t\r\n".into(), "blank"),
        (format!("{}\n", &whole[..40]), "not a ledger entry"),
        ("\0\0\0\0\n".into(), "not a ledger entry"),
    ];
    for (tail, reason) in cases {
        let mut torn = intact.clone();
        torn.extend_from_slice(tail.as_bytes());
        std::fs::write(&path, &torn).unwrap();
        assert!(is_ledger_error(&Ledger::open(&path), "torn"), "{tail:?}");
        assert_eq!(std::fs::read(&path).unwrap(), torn, "open changed {tail:?}");
        let expected = TornLine {
            line: 4,
            bytes: tail.len() as u64,
            reason,
        };
        let found = Ledger::verify(&path).unwrap();
        assert_eq!(found.torn.as_ref(), Some(&expected), "{tail:?}");
        assert_eq!((found.entries, found.spent), (3, 0.5));
        assert_eq!(found.anchor, Anchor::Matches);
        let repaired = Ledger::repair(&path).unwrap();
        assert_eq!(repaired.torn, Some(expected), "{tail:?}");
        assert_eq!(std::fs::read(&path).unwrap(), intact, "{tail:?}");
        assert_eq!(std::fs::read(head_of(&path)).unwrap(), head);
        assert_eq!(Ledger::verify(&path).unwrap().torn, None);
    }
    // Nothing to repair: nothing changes.
    assert_eq!(Ledger::repair(&path).unwrap().torn, None);
    assert_eq!(std::fs::read(&path).unwrap(), intact);
    // The repaired ledger charges again, and holds only its two files.
    let mut ledger = Ledger::open(&path).unwrap();
    assert_eq!(ledger.anchor(), Anchor::Matches);
    ledger.charge(0.5, "after repair").unwrap();
    drop(ledger);
    assert_eq!(Ledger::verify(&path).unwrap().spent, 1.0);
    assert_eq!(files_beside(&path), ["ledger.jsonl", "ledger.jsonl.head"]);
}

#[test]
fn repair_refuses_every_other_damage_and_changes_nothing() {
    let path = ledger_in("damage");
    two_charges(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cases = [
        // A bad line in the middle, blank or garbage.
        format!("{}\n\n{}\n{}\n", lines[0], lines[1], lines[2]),
        format!("{}\nxx\n{}\n", lines[0], lines[2]),
        // The last entry edited: valid JSON, broken chain.
        format!(
            "{}\n{}\n{}\n",
            lines[0],
            lines[1],
            lines[2].replace("0.25", "0.125")
        ),
        // Two bad lines at the end: only the final one may be torn.
        format!("{text}\n{{\"seq\""),
        // A middle entry removed.
        format!("{}\n{}\n", lines[0], lines[2]),
    ];
    for damaged in cases {
        std::fs::write(&path, &damaged).unwrap();
        assert!(Ledger::open(&path).is_err(), "{damaged}");
        assert!(Ledger::verify(&path).is_err(), "{damaged}");
        assert!(Ledger::repair(&path).is_err(), "{damaged}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), damaged);
    }
    // A final line the head records was once complete: damaged, not torn.
    let damaged = format!("{}\n{}\n{{\"seq\":2,\n", lines[0], lines[1]);
    std::fs::write(&path, &damaged).unwrap();
    assert!(is_ledger_error(&Ledger::verify(&path), "rolled back"));
    assert!(is_ledger_error(&Ledger::repair(&path), "rolled back"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), damaged);
    // An interrupted `init`: no complete entry, nothing to keep.
    std::fs::write(&path, &lines[0][..30]).unwrap();
    std::fs::remove_file(head_of(&path)).unwrap();
    assert!(Ledger::repair(&path).is_err());
    // A line longer than any entry is not read whole, torn or not.
    let long = format!("{text}{}", "x".repeat(3 << 20));
    std::fs::write(&path, &long).unwrap();
    assert!(is_ledger_error(&Ledger::verify(&path), "longer than"));
}

#[test]
fn a_rolled_back_replaced_or_forked_ledger_is_refused() {
    let path = ledger_in("rollback");
    Ledger::init(&path, LedgerBudget::Zcdp { rho: 1.0 }).unwrap();
    Ledger::open(&path).unwrap().charge(0.25, "a").unwrap();
    let after_a = std::fs::read(&path).unwrap();
    let fork = next_line(&path, "fork");
    Ledger::open(&path).unwrap().charge(0.25, "b").unwrap();
    let intact = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = intact.lines().collect();
    let cases = [
        // The last entry deleted, i.e. the file restored from before it.
        (String::from_utf8(after_a.clone()).unwrap(), "rolled back"),
        // Everything but the budget deleted.
        (format!("{}\n", lines[0]), "rolled back"),
        // Another history of the same length.
        (
            format!("{}\n{}\n{fork}\n", lines[0], lines[1]),
            "rolled back",
        ),
    ];
    for (text, needle) in cases {
        std::fs::write(&path, &text).unwrap();
        assert!(is_ledger_error(&Ledger::open(&path), needle), "{text}");
        assert!(is_ledger_error(&Ledger::verify(&path), needle), "{text}");
        assert!(is_ledger_error(&Ledger::repair(&path), needle), "{text}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }
    // A head that is not one refuses the ledger too.
    std::fs::write(&path, &intact).unwrap();
    let head = std::fs::read(head_of(&path)).unwrap();
    for garbage in ["", "{}", "{\"entries\":0,\"hash\":\"genesis\"}", "x"] {
        std::fs::write(head_of(&path), garbage).unwrap();
        assert!(is_ledger_error(&Ledger::open(&path), "not a ledger head"));
    }
    std::fs::write(head_of(&path), &head).unwrap();
    assert_eq!(Ledger::open(&path).unwrap().anchor(), Anchor::Matches);
}

/// A crash between a charge and its head's update leaves the ledger one
/// entry ahead of its head: accepted, and the head brought up to date
/// (to exactly what the update would have written).
#[test]
fn a_ledger_longer_than_its_head_opens_and_updates_the_head() {
    let path = ledger_in("behind");
    Ledger::init(&path, LedgerBudget::PureDp { epsilon: 1.0 }).unwrap();
    let head_at_init = std::fs::read(head_of(&path)).unwrap();
    two_charges_on_open(&path);
    let head_now = std::fs::read(head_of(&path)).unwrap();
    std::fs::write(head_of(&path), &head_at_init).unwrap();
    let found = Ledger::verify(&path).unwrap();
    assert_eq!(found.anchor, Anchor::Behind { head: 1 });
    assert_eq!(std::fs::read(head_of(&path)).unwrap(), head_at_init);
    let ledger = Ledger::open(&path).unwrap();
    assert_eq!(ledger.anchor(), Anchor::Behind { head: 1 });
    assert_eq!(std::fs::read(head_of(&path)).unwrap(), head_now);
    drop(ledger);
    assert_eq!(Ledger::verify(&path).unwrap().anchor, Anchor::Matches);
}

fn two_charges_on_open(path: &Path) {
    let mut ledger = Ledger::open(path).unwrap();
    ledger.charge(0.25, "a").unwrap();
    ledger.charge(0.25, "b").unwrap();
}

/// A ledger written before heads existed (these lines are what the
/// previous version wrote for `ledger init --total-epsilon 1` and one
/// release at ε = 0.6): it opens, is given a head, and is then protected.
#[test]
fn a_ledger_from_before_heads_opens_and_is_anchored_from_then_on() {
    let path = ledger_in("old");
    std::fs::write(&path, OLD_LEDGER).unwrap();
    let found = Ledger::verify(&path).unwrap();
    assert_eq!((found.entries, found.anchor), (2, Anchor::Missing));
    assert!(!head_of(&path).exists(), "verify wrote a head");
    let mut ledger = Ledger::open(&path).unwrap();
    assert_eq!(ledger.anchor(), Anchor::Missing);
    assert_eq!(ledger.spent(), 0.6);
    ledger.charge(0.25, "new").unwrap();
    drop(ledger);
    // The old lines are untouched; the new one is appended.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(OLD_LEDGER));
    assert_eq!(text.lines().count(), 3);
    // Cutting the new charge is now a rollback.
    std::fs::write(&path, OLD_LEDGER).unwrap();
    assert!(is_ledger_error(&Ledger::open(&path), "rolled back"));
}

const OLD_LEDGER: &str = include_str!("ledger_before_heads.jsonl");

/// Deleting a ledger and starting again at the same path would reset its
/// budget: refused while its head remains.
#[test]
fn init_refuses_a_path_whose_head_remains() {
    let path = ledger_in("reinit");
    two_charges(&path);
    std::fs::remove_file(&path).unwrap();
    let head = std::fs::read(head_of(&path)).unwrap();
    let again = Ledger::init(&path, LedgerBudget::PureDp { epsilon: 1.0 });
    assert!(is_ledger_error(&again, "head"));
    assert!(!path.exists());
    assert_eq!(std::fs::read(head_of(&path)).unwrap(), head);
}
