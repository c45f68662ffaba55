//! Output files that are whole or absent, and never left half-done.
//!
//! Every file `dpmm` writes (the answers, their sidecar, a plan) is first
//! written to a temporary file in the output's own directory (so the
//! rename stays within one file system and is atomic), fsync'ed, renamed
//! into place, and then the directory is fsync'ed so that the rename
//! itself survives a crash.
//!
//! Every temporary file is registered while it exists, and removed on
//! every failure path: an error (its guard's `Drop`), a panic (the panic
//! hook calls [`remove_temporaries`]), and SIGINT, SIGTERM or SIGHUP. For
//! those, [`exit_on_signals`] runs a thread that removes the registered
//! temporaries and exits at once with status 128 + the signal's number
//! (130 for Ctrl-C, 143 for SIGTERM), without waiting for the main thread
//! — unless the release has charged the ledger: from the charge on
//! ([`dp_core::interrupt::commit`]) the first signal only says that the
//! release is finishing, so that a budget spent yields its answers, and a
//! second one abandons them (the charge stands, no answers are written).
//! So every step before the charge can be interrupted promptly, long
//! data-independent ones (planning) included, and an interrupted release
//! spends nothing. Temporaries are created, renamed and removed under the
//! registry's lock, which the exiting handler keeps, so no temporary
//! appears and no rename happens once the handler has begun. SIGKILL
//! cannot be caught: a process killed by it may leave a
//! `.NAME.tmp-PID-K` file behind.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use dp_core::interrupt::Interrupt;

use crate::Error;

/// Whether a signal arrived (ends the tests' pause early).
static SIGNALLED: AtomicBool = AtomicBool::new(false);

/// Every temporary file that exists now.
static TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Makes temporary names unique within the process.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The registry, whatever thread panicked while holding it.
fn registry() -> MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(PoisonError::into_inner)
}

fn remove_all(temporaries: &mut Vec<PathBuf>) {
    for path in temporaries.drain(..) {
        let _ = std::fs::remove_file(path);
    }
}

/// Starts the thread that, on SIGINT, SIGTERM or SIGHUP, triggers
/// `token` (the one the main thread's work runs under) and then, unless
/// that work has committed to a charge ([`dp_core::interrupt::committed`]),
/// removes the registered temporary files and exits with 128 + the
/// signal's number. Committed work is left to finish on the first signal
/// and abandoned on the second. Triggering first makes the check safe:
/// work that had not committed by then never will.
#[cfg(unix)]
pub fn exit_on_signals(token: Interrupt) -> Result<(), Error> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use signal_hook::iterator::Signals;
    let internal = |e: std::io::Error| Error::Internal(format!("cannot handle signals: {e}"));
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(internal)?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut warned = false;
            for signal in signals.forever() {
                token.trigger();
                SIGNALLED.store(true, Ordering::SeqCst);
                if dp_core::interrupt::committed() && !warned {
                    eprintln!(
                        "dpmm: the ledger is already charged: finishing the release so that \
                         its answers are kept (signal again to abandon them)"
                    );
                    warned = true;
                    continue;
                }
                // Held until the process ends: no temporary is created or
                // renamed after this point.
                let mut temporaries = registry();
                remove_all(&mut temporaries);
                dp_core::kernel::records::remove_spills();
                std::process::exit(128 + signal);
            }
        })
        .map_err(internal)?;
    Ok(())
}

/// Elsewhere the platform's default handling stands (only the error and
/// panic paths remove temporaries).
#[cfg(not(unix))]
pub fn exit_on_signals(_token: Interrupt) -> Result<(), Error> {
    Ok(())
}

/// Removes the registered temporary files (from the panic hook). Does not
/// wait: if the registry is held, the signal handler is already removing
/// them, or the panicking thread holds it, and waiting would never end.
pub fn remove_temporaries() {
    match TEMPORARIES.try_lock() {
        Ok(mut temporaries) => remove_all(&mut temporaries),
        Err(TryLockError::Poisoned(p)) => remove_all(&mut p.into_inner()),
        Err(TryLockError::WouldBlock) => {}
    }
}

/// Removes the registered temporary files and the privacy kernel's spill
/// directories (private records a release with a privacy unit wrote
/// while bounding contributions), for a handler about to end the process.
pub fn remove_all_temporaries() {
    remove_temporaries();
    dp_core::kernel::records::remove_spills();
}

/// A registered temporary file beside `target`: removed when dropped,
/// unless renamed onto its target.
struct Temporary {
    path: PathBuf,
    target: PathBuf,
    renamed: bool,
}

impl Temporary {
    /// Creates `.NAME.tmp-PID-K` beside `target` (never an existing file:
    /// `create_new` follows no link an attacker may have planted) and
    /// registers it in the same step.
    fn create(target: &Path) -> Result<(Self, File), Error> {
        let name = target
            .file_name()
            .ok_or_else(|| Error::file(target, "not a file name"))?
            .to_string_lossy()
            .into_owned();
        let mut temporaries = registry();
        for _ in 0..64 {
            let k = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = target.with_file_name(format!(".{name}.tmp-{}-{k}", std::process::id()));
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    temporaries.push(path.clone());
                    let temporary = Self {
                        path,
                        target: target.to_owned(),
                        renamed: false,
                    };
                    return Ok((temporary, file));
                }
                // A stale file of an earlier process with this id.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::file(target, e)),
            }
        }
        Err(Error::file(target, "no free temporary name beside it"))
    }

    /// A temporary beside `target` holding `content`, fsync'ed.
    fn holding(target: &Path, content: &Content<'_>) -> Result<Self, Error> {
        let (temporary, mut file) = Self::create(target)?;
        match content {
            Content::Bytes(bytes) => file.write_all(bytes).map_err(|e| Error::file(target, e))?,
            Content::Stream(write) => {
                let mut out = std::io::BufWriter::with_capacity(1 << 20, &mut file);
                write(&mut out)?;
                out.flush().map_err(|e| Error::file(target, e))?;
            }
        }
        file.sync_all().map_err(|e| Error::file(target, e))?;
        Ok(temporary)
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if !self.renamed {
            let mut temporaries = registry();
            let _ = std::fs::remove_file(&self.path);
            temporaries.retain(|p| p != &self.path);
        }
    }
}

/// An output written as it is produced (a stream's running counts) into
/// a registered temporary beside its target, and renamed into place, with
/// companions (its sidecar), by [`Staged::commit_with`]: until then the
/// target is untouched, and a failure or signal removes the temporary.
/// The rename replaces whatever the target path names, a link included,
/// and never writes through it.
pub struct Staged {
    temporary: Temporary,
    file: std::io::BufWriter<File>,
}

impl Staged {
    /// The temporary beside `target`, empty.
    pub fn create(target: &Path) -> Result<Self, Error> {
        let (temporary, file) = Temporary::create(target)?;
        Ok(Self {
            temporary,
            file: std::io::BufWriter::with_capacity(1 << 20, file),
        })
    }

    /// Flushes and fsyncs the output, writes each of `companions` to its
    /// own temporary, then renames them all into place under one hold of
    /// the registry ([`write_all_atomically`]).
    pub fn commit_with(self, companions: &[(&Path, &[u8])]) -> Result<(), Error> {
        let Self {
            temporary,
            mut file,
        } = self;
        let target = temporary.target.clone();
        file.flush().map_err(|e| Error::file(&target, e))?;
        let file = file
            .into_inner()
            .map_err(|e| Error::file(&target, e.to_string()))?;
        file.sync_all().map_err(|e| Error::file(&target, e))?;
        let mut temporaries = vec![temporary];
        for &(path, bytes) in companions {
            temporaries.push(Temporary::holding(path, &Content::Bytes(bytes))?);
        }
        pause_for_tests();
        rename_all(&mut temporaries)?;
        let mut dirs: Vec<&Path> = std::iter::once(target.as_path())
            .chain(companions.iter().map(|&(path, _)| path))
            .map(directory)
            .collect();
        dirs.dedup();
        for dir in dirs {
            sync_dir(dir).map_err(|e| Error::file(dir, e))?;
        }
        Ok(())
    }
}

impl Write for Staged {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Checks, before anything is spent, that `target` can be written: a
/// temporary beside it is created and removed.
pub fn check_writable(target: &Path) -> Result<(), Error> {
    Temporary::create(target).map(drop)
}

/// Writes `bytes` to `path` atomically ([`write_all_atomically`]).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write_all_atomically(&[(path, bytes)])
}

/// What one file of [`write_contents_atomically`] holds.
pub enum Content<'a> {
    /// These bytes.
    Bytes(&'a [u8]),
    /// What this writes, streamed into the temporary file (a file too
    /// large to hold in memory as one buffer).
    Stream(&'a (dyn Fn(&mut (dyn Write + Send)) -> Result<(), Error> + Sync)),
}

/// Writes each `(path, bytes)`: every temporary written and fsync'ed
/// first, then all renamed in order under one hold of the registry (a
/// signal never separates them), then their directories fsync'ed. If a
/// rename fails, the files already renamed in this call are removed, so
/// that a sidecar never sits beside answers it does not describe; every
/// temporary is removed.
pub fn write_all_atomically(files: &[(&Path, &[u8])]) -> Result<(), Error> {
    let contents: Vec<(&Path, Content<'_>)> = files
        .iter()
        .map(|&(path, bytes)| (path, Content::Bytes(bytes)))
        .collect();
    write_contents_atomically(&contents)
}

/// [`write_all_atomically`] for contents that may be streamed.
pub fn write_contents_atomically(files: &[(&Path, Content<'_>)]) -> Result<(), Error> {
    let mut temporaries = files
        .iter()
        .map(|(path, content)| Temporary::holding(path, content))
        .collect::<Result<Vec<_>, _>>()?;
    pause_for_tests();
    rename_all(&mut temporaries)?;
    let mut dirs: Vec<&Path> = files.iter().map(|(path, _)| directory(path)).collect();
    dirs.dedup();
    for dir in dirs {
        sync_dir(dir).map_err(|e| Error::file(dir, e))?;
    }
    Ok(())
}

/// The directory `path` is in.
fn directory(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Makes the entries of directory `dir` durable (a rename into it), where
/// the platform can open a directory.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    if cfg!(unix) {
        File::open(dir)?.sync_all()
    } else {
        Ok(())
    }
}

fn rename_all(temporaries: &mut [Temporary]) -> Result<(), Error> {
    let mut registry = registry();
    for i in 0..temporaries.len() {
        let t = &temporaries[i];
        if let Err(e) = std::fs::rename(&t.path, &t.target) {
            for done in &temporaries[..i] {
                let _ = std::fs::remove_file(&done.target);
            }
            return Err(Error::file(&t.target, e));
        }
        let path = t.path.clone();
        temporaries[i].renamed = true;
        registry.retain(|p| p != &path);
    }
    Ok(())
}

/// Test hook, in debug builds only: with `DPMM_TEST_PAUSE_BEFORE_RENAME`
/// set, wait (up to a minute, or a moment after a signal) with the
/// temporaries written, so that a test can signal the process while they
/// exist.
fn pause_for_tests() {
    #[cfg(debug_assertions)]
    if std::env::var_os("DPMM_TEST_PAUSE_BEFORE_RENAME").is_some() {
        eprintln!("paused before the rename");
        let start = std::time::Instant::now();
        while start.elapsed().as_secs() < 60 && !SIGNALLED.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Room for a second signal.
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// Refuses an output path that is a directory or names one of `inputs`
/// (resolved through their directories, so `./a` and `a` are one file).
pub fn check_output(out: &Path, inputs: &[PathBuf]) -> Result<(), Error> {
    if out.is_dir() {
        return Err(Error::file(out, "is a directory"));
    }
    let resolve = |p: &Path| -> Option<PathBuf> {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(dir.canonicalize().ok()?.join(p.file_name()?))
    };
    let Some(target) = resolve(out) else {
        return Ok(());
    };
    for input in inputs {
        if resolve(input).as_ref() == Some(&target) {
            return Err(Error::BadInput(format!(
                "{}: the output would overwrite the input {}",
                out.display(),
                input.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

    use super::*;
    use dp_testkit::names_in;

    /// The registry is the process's: these tests take turns, so that one
    /// test's cleanup never removes another's temporaries.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `test` in a fresh directory for `name`, its turn taken
    /// ([`serial`]); then no temporary under the directory may still be
    /// registered, and the directory is removed.
    fn in_scratch(name: &str, test: impl FnOnce(&Path)) {
        let _turn = serial();
        let dir = std::env::temp_dir().join(format!("dpmm-output-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        test(&dir);
        assert!(!registry().iter().any(|p| p.starts_with(&dir)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_land_whole_and_nothing_else_remains() {
        in_scratch("whole", |dir| {
            let (a, b) = (dir.join("answers.csv"), dir.join("answers.csv.json"));
            std::fs::write(&a, "old answers").unwrap();
            write_all_atomically(&[(&b, b"{}\n"), (&a, b"query,answer\n")]).unwrap();
            assert_eq!(std::fs::read(&a).unwrap(), b"query,answer\n");
            assert_eq!(std::fs::read(&b).unwrap(), b"{}\n");
            check_writable(&a).unwrap();
            write_atomically(&dir.join("plan.json"), b"plan").unwrap();
            assert_eq!(
                names_in(dir),
                ["answers.csv", "answers.csv.json", "plan.json"]
            );
        });
    }

    #[test]
    fn a_target_that_cannot_be_written_is_refused_and_leaves_nothing() {
        in_scratch("unwritable", |dir| {
            std::fs::write(dir.join("file"), "x").unwrap();
            let targets = [
                dir.join("missing").join("answers.csv"),
                dir.join("file").join("answers.csv"),
                PathBuf::from("/proc/dpmm-answers.csv"),
                PathBuf::from("/"),
            ];
            for target in &targets {
                assert!(
                    matches!(check_writable(target), Err(Error::BadInput(_))),
                    "{}",
                    target.display()
                );
                let written = write_atomically(target, b"answers");
                assert!(matches!(written, Err(Error::BadInput(_))));
            }
            // A directory without write permission (unless this runs as a
            // user who may write anyway, such as root).
            let locked = dir.join("locked");
            std::fs::create_dir(&locked).unwrap();
            let mut permissions = std::fs::metadata(&locked).unwrap().permissions();
            permissions.set_readonly(true);
            std::fs::set_permissions(&locked, permissions.clone()).unwrap();
            if std::fs::write(locked.join("probe"), "").is_err() {
                assert!(write_atomically(&locked.join("answers.csv"), b"a").is_err());
                assert!(names_in(&locked).is_empty());
            }
            #[allow(clippy::permissions_set_readonly_false)]
            // undoes the line above, in a scratch directory
            permissions.set_readonly(false);
            std::fs::set_permissions(&locked, permissions).unwrap();
            let _ = std::fs::remove_file(locked.join("probe"));
            assert_eq!(names_in(dir), ["file", "locked"]);
        });
    }

    /// A rename that fails after another succeeded: the one renamed is
    /// removed, every temporary too, and the target in the way untouched.
    #[test]
    fn a_failed_rename_leaves_neither_half_nor_temporaries() {
        in_scratch("rename", |dir| {
            let (side, answers) = (dir.join("answers.csv.json"), dir.join("answers.csv"));
            std::fs::create_dir(&answers).unwrap();
            std::fs::write(answers.join("inside"), "x").unwrap();
            let written = write_all_atomically(&[(&side, b"{}"), (&answers, b"q,a\n")]);
            assert!(matches!(written, Err(Error::BadInput(_))));
            assert_eq!(names_in(dir), ["answers.csv"]);
            assert_eq!(names_in(&answers), ["inside"]);
        });
    }

    /// The panic hook's cleanup removes every registered temporary.
    #[test]
    fn remove_temporaries_removes_what_is_registered() {
        in_scratch("panic", |dir| {
            let (temporary, file) = Temporary::create(&dir.join("answers.csv")).unwrap();
            drop(file);
            assert_eq!(names_in(dir).len(), 1);
            remove_temporaries();
            assert!(names_in(dir).is_empty());
            drop(temporary);
        });
    }
}
