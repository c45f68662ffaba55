//! The head anchor beside a ledger (`<ledger>.head`): the number of
//! entries and the last entry's hash, rewritten atomically after every
//! charge, so that a ledger cut back to an earlier state (lines removed
//! from its end, or the file replaced by an older copy) no longer matches
//! it and is refused as rolled back.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{DpError, Result};

/// What the head anchor beside a ledger said when the ledger was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// The head records the ledger's last entry.
    Matches,
    /// The ledger has entries its head does not record yet (a crash
    /// between a charge and the head's update): accepted, and the head
    /// brought up to date.
    Behind {
        /// How many entries the head recorded.
        head: u64,
    },
    /// No head beside the ledger: one from before heads were written, or
    /// whose head was deleted. Nothing to check a rollback against;
    /// accepted, and a head written.
    Missing,
}

/// The head file's content.
#[derive(Serialize, Deserialize)]
struct Head {
    /// Entries in the ledger, its `Init` included.
    entries: u64,
    /// The hash of entry `entries - 1`.
    hash: String,
}

/// A head file holds two short fields; anything longer is not one.
const MAX_HEAD: u64 = 4096;

/// `<ledger>.head`, beside the ledger.
pub fn head_path(ledger: &Path) -> PathBuf {
    let mut name = ledger.file_name().unwrap_or_default().to_os_string();
    name.push(".head");
    ledger.with_file_name(name)
}

/// Checks the ledger at `path`, whose complete entries have `hashes`,
/// against its head: refused as rolled back when it is shorter than the
/// head or its entry at the head's index does not carry the head's hash,
/// and when the head is unreadable.
pub fn check(path: &Path, hashes: &[String]) -> Result<Anchor> {
    let head_file = head_path(path);
    let refuse =
        |why: String| DpError::Ledger(format!("{}: {why}; refusing the ledger", path.display()));
    let mut bytes = Vec::new();
    match File::open(&head_file) {
        Ok(f) => f.take(MAX_HEAD + 1).read_to_end(&mut bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Anchor::Missing),
        Err(e) => Err(e),
    }
    .map_err(|e| refuse(format!("cannot read its head {}: {e}", head_file.display())))?;
    let head: Head = serde_json::from_slice(&bytes)
        .ok()
        .filter(|h: &Head| h.entries > 0 && bytes.len() as u64 <= MAX_HEAD)
        .ok_or_else(|| {
            refuse(format!(
                "its head {} is not a ledger head, so a rollback cannot be ruled out",
                head_file.display()
            ))
        })?;
    let entries = hashes.len() as u64;
    if head.entries > entries {
        return Err(refuse(format!(
            "rolled back: it has {entries} complete entries but its head {} records {}, \
             so entries were removed after they were written",
            head_file.display(),
            head.entries
        )));
    }
    let index = usize::try_from(head.entries - 1).unwrap_or(usize::MAX);
    if hashes.get(index) != Some(&head.hash) {
        return Err(refuse(format!(
            "rolled back: its entry {index} is not the one its head {} records, \
             so the file was replaced by another ledger or an older copy",
            head_file.display()
        )));
    }
    Ok(if head.entries == entries {
        Anchor::Matches
    } else {
        Anchor::Behind { head: head.entries }
    })
}

/// Records `entries` and the last entry's `hash` as the head of the
/// ledger at `path`: a temporary file in the same directory, fsync'ed,
/// renamed over the head, then the directory fsync'ed so the rename is
/// durable too. Called under the ledger's exclusive lock, so one fixed
/// temporary name serves (a stale one, left by a crash, is replaced).
pub fn write(path: &Path, entries: usize, hash: &str) -> Result<()> {
    let head_file = head_path(path);
    let mut tmp_name = head_file.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = head_file.with_file_name(tmp_name);
    let io =
        |e: std::io::Error| DpError::Ledger(format!("cannot write {}: {e}", head_file.display()));
    let mut text = serde_json::to_string(&Head {
        entries: entries as u64,
        hash: hash.to_owned(),
    })
    .map_err(|e| DpError::Ledger(e.to_string()))?;
    text.push('\n');
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
        _ => {}
    }
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, &head_file));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    sync_dir(path).map_err(io)
}

/// Makes the directory entries of `path`'s directory durable (a created
/// or renamed file), where the platform can open a directory.
pub fn sync_dir(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if cfg!(unix) {
        File::open(dir)?.sync_all()
    } else {
        Ok(())
    }
}
