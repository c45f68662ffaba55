//! The library's own guarantees, beside the command's: answers written by
//! `Answers::write` never replace one of the release's inputs, the ledger
//! above all, whatever path the caller gives; warnings reach the caller
//! as values.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::{Path, PathBuf};

use common::{SEX_AGE_MIXED_SPEC, sex_age_case};
use dpmm::{Data, PrivacyBudget, Release, ledger};

/// A sex × age case in a directory named after `tag`, a ledger of pure
/// ε = 1 and a release of ε = `epsilon` on it: (directory, ledger,
/// release).
fn case(tag: &str, epsilon: f64) -> (PathBuf, PathBuf, Release) {
    let dir = sex_age_case(tag, SEX_AGE_MIXED_SPEC);
    let book = dir.join("ledger.jsonl");
    ledger::create(&book, PrivacyBudget::pure(1.0).unwrap()).unwrap();
    let release = Release::new(
        dir.join("schema.json"),
        dir.join("spec.json"),
        PrivacyBudget::pure(epsilon).unwrap(),
        &book,
    );
    (dir, book, release)
}

#[test]
fn answers_are_never_written_over_the_releases_inputs() {
    let (dir, book, release) = case("library-write", 0.5);
    let answers = release.run(Data::Records(dir.join("records.csv"))).unwrap();
    assert_eq!(answers.len(), 18);
    let ledger_bytes = std::fs::read(&book).unwrap();
    let head = dp_core_head(&book);
    let head_bytes = std::fs::read(&head).unwrap();
    for input in [
        &book,
        &head,
        &dir.join("schema.json"),
        &dir.join("records.csv"),
    ] {
        assert!(answers.write(input).is_err(), "{}", input.display());
    }
    // The sidecar's path (`<out>.json`) is checked too: `ledger` would put
    // it on `ledger.json`, but `spec` puts it on the spec itself.
    assert!(answers.write(&dir.join("spec")).is_err());
    assert_eq!(std::fs::read(&book).unwrap(), ledger_bytes);
    assert_eq!(std::fs::read(&head).unwrap(), head_bytes);
    // Elsewhere it writes.
    answers.write(&dir.join("answers.csv")).unwrap();
    let csv = std::fs::read_to_string(dir.join("answers.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 18);
    // The file is streamed; it holds what the in-memory form does, and a
    // writer that fails part-way fails the stream.
    assert_eq!(csv, answers.to_csv());
    struct Full(usize);
    impl std::io::Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0 < buf.len() {
                return Err(std::io::Error::other("device full"));
            }
            self.0 -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    assert!(answers.write_csv(&mut Full(csv.len())).is_ok());
    assert!(answers.write_csv(&mut Full(csv.len() - 1)).is_err());
}

fn dp_core_head(ledger: &Path) -> PathBuf {
    dpmm::dp_core::ledger::head_path(ledger)
}

/// A ledger whose head anchor was deleted releases, and the answers carry
/// the one warning (the library prints nothing); the release writes a new
/// head, so the next one has none; a refused release carries it in its
/// error.
#[test]
fn a_missing_head_is_a_warning_on_the_answers() {
    let (dir, book, release) = case("library-warning", 0.25);
    let data = || Data::Records(dir.join("records.csv"));
    assert!(release.run(data()).unwrap().warnings().is_empty());
    std::fs::remove_file(dp_core_head(&book)).unwrap();
    let warned = release.run(data()).unwrap();
    assert_eq!(warned.warnings().len(), 1);
    assert!(warned.warnings()[0].contains("no head anchor"));
    assert!(dp_core_head(&book).exists());
    assert!(release.run(data()).unwrap().warnings().is_empty());
    // Opening the ledger writes a head, so the warning exists once: a
    // release refused after that (here, for want of budget) carries it in
    // its error.
    std::fs::remove_file(dp_core_head(&book)).unwrap();
    let greedy = Release {
        budget: PrivacyBudget::pure(0.9).unwrap(),
        ..release
    };
    let refused = greedy.run(data()).err().unwrap();
    assert!(
        matches!(refused, dpmm::Error::BudgetExceeded(_)),
        "{refused}"
    );
    let refused = refused.to_string();
    assert!(refused.contains("budget exceeded") && refused.contains("no head anchor"));
    assert!(dp_core_head(&book).exists());
    assert!(
        ledger::show(&book)
            .unwrap()
            .lines()
            .all(|l| !l.starts_with("warning"))
    );
}
