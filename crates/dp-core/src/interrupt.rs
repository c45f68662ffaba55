//! Cooperative cancellation of long computations (a plan, an
//! optimization, reading records), for callers that run them on a worker
//! thread and want to stop them from another: the Python binding on
//! Ctrl-C, the `dpmm` command on SIGINT.
//!
//! An [`Interrupt`] is a shared flag. [`Interrupt::run`] makes it the
//! calling thread's current token for the duration of a closure; the
//! iteration engine checks it before every iteration (a triggered token
//! ends the run as interrupted), and the library's checkpoints call
//! [`check`], which fails with [`DpError::Interrupted`]. The token is
//! per thread: loops run on the thread that called [`Interrupt::run`]
//! see it; the data-parallel kernels they call (matrix products, which
//! finish in bounded time) do not need to.
//!
//! Work that must not stop halfway (everything after a ledger charge: the
//! draws, the reconstruction, writing the answers) runs inside
//! [`commit`], where no token is current, so a budget once spent always
//! yields its answers; [`committed`] tells a signal handler that such work
//! is under way.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::{DpError, Result};

/// Threads inside [`commit`].
static COMMITTED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static CURRENT: RefCell<Option<Interrupt>> = const { RefCell::new(None) };
}

/// A cancellation flag: cloned handles share it.
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<State>);

#[derive(Debug, Default)]
struct State {
    triggered: AtomicBool,
    /// Whether work under this token has begun a [`commit`].
    committed: AtomicBool,
}

impl Interrupt {
    /// A token not yet triggered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the work running under this token to stop at its next check.
    pub fn trigger(&self) {
        self.0.triggered.store(true, Ordering::SeqCst);
    }

    /// Whether [`Self::trigger`] was called.
    pub fn is_triggered(&self) -> bool {
        self.0.triggered.load(Ordering::SeqCst)
    }

    /// Whether work under this token has begun a [`commit`] (and so may
    /// have charged a ledger). Read after [`Self::trigger`], `false` is
    /// final: [`commit`] marks the token before it reads the trigger, so
    /// work that had not begun one by then never will, and a caller may
    /// stop waiting for it (it ends at its next check, having spent
    /// nothing).
    pub fn has_committed(&self) -> bool {
        self.0.committed.load(Ordering::SeqCst)
    }

    /// Runs `f` with this token current on the calling thread (the one
    /// current before is restored afterwards, also on a panic).
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        with_current(Some(self.clone()), f)
    }
}

/// Runs `f` with `token` current, restoring the previous one on exit.
fn with_current<R>(token: Option<Interrupt>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Interrupt>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = previous);
        }
    }
    let previous = CURRENT.with(|c| c.replace(token));
    let _restore = Restore(previous);
    f()
}

/// The calling thread's current token, to make current with
/// [`Interrupt::run`] on the threads its work spreads to (a worker does
/// not inherit it).
pub fn current() -> Option<Interrupt> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Whether the calling thread's current token was triggered (`false`
/// without one).
pub fn interrupted() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(Interrupt::is_triggered))
}

/// A checkpoint: [`DpError::Interrupted`] when the calling thread's
/// current token was triggered.
pub fn check() -> Result<()> {
    if interrupted() {
        Err(DpError::Interrupted)
    } else {
        Ok(())
    }
}

/// Runs `f`, work that must run to its end once begun (everything after
/// a ledger charge), with no token current, unless the calling thread's
/// token was triggered before it began: then `f` does not run and the
/// result is [`DpError::Interrupted`]. While `f` runs, [`committed`] is
/// true.
///
/// The commitment is counted, and the token marked
/// ([`Interrupt::has_committed`]), before the token is read, so a thread
/// that triggers a token and then finds `committed()` false knows that the
/// work it interrupted will not charge anything.
pub fn commit<R>(f: impl FnOnce() -> R) -> Result<R> {
    struct Section;
    impl Drop for Section {
        fn drop(&mut self) {
            COMMITTED.fetch_sub(1, Ordering::SeqCst);
        }
    }
    COMMITTED.fetch_add(1, Ordering::SeqCst);
    let _section = Section;
    CURRENT.with(|c| {
        if let Some(token) = c.borrow().as_ref() {
            token.0.committed.store(true, Ordering::SeqCst);
        }
    });
    check()?;
    Ok(with_current(None, f))
}

/// Whether some thread of this process is inside [`commit`]: work that
/// must not be abandoned (a process should not exit under it).
pub fn committed() -> bool {
    COMMITTED.load(Ordering::SeqCst) > 0
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn a_token_is_seen_only_inside_its_run_and_on_its_thread() {
        let token = Interrupt::new();
        token.trigger();
        assert!(!interrupted());
        assert_eq!(check(), Ok(()));
        token.run(|| {
            assert!(interrupted());
            assert_eq!(check(), Err(DpError::Interrupted));
            // Another thread has no current token, unless it is handed
            // over.
            std::thread::scope(|s| {
                assert!(!s.spawn(interrupted).join().unwrap());
                let handed = current();
                assert!(
                    s.spawn(move || handed.unwrap().run(interrupted))
                        .join()
                        .unwrap()
                );
            });
            // A triggered token refuses to commit.
            assert_eq!(commit(|| unreachable!()), Err(DpError::Interrupted));
            assert!(interrupted());
        });
        assert!(!interrupted());
    }

    #[test]
    fn a_trigger_from_another_thread_reaches_the_worker() {
        let token = Interrupt::new();
        let remote = token.clone();
        std::thread::scope(|s| {
            let worker = s.spawn(|| {
                token.run(|| {
                    while !interrupted() {
                        std::thread::yield_now();
                    }
                })
            });
            remote.trigger();
            worker.join().unwrap();
        });
        assert!(token.is_triggered());
    }

    #[test]
    fn committed_work_runs_without_the_token_and_is_counted() {
        let token = Interrupt::new();
        let inside = token.run(|| {
            commit(|| {
                token.trigger();
                (interrupted(), committed())
            })
        });
        assert_eq!(inside, Ok((false, true)), "no token inside, counted");
        assert!(token.has_committed(), "and the token marked");
        assert!(!token.run(|| commit(|| ()).is_ok()), "triggered now");
        // A commit refused by its trigger still marks the token: the
        // mark comes before the trigger is read.
        let refused = Interrupt::new();
        refused.trigger();
        assert!(!refused.has_committed());
        assert_eq!(refused.run(|| commit(|| ())), Err(DpError::Interrupted));
        assert!(refused.has_committed());
    }

    #[test]
    fn a_token_found_uncommitted_after_its_trigger_never_commits() {
        // The race a caller that stops waiting relies on, run many times:
        // the trigger lands before, during or after the worker's commit.
        for _ in 0..2000 {
            let token = Interrupt::new();
            let remote = token.clone();
            let (charged, abandonable) = std::thread::scope(|s| {
                let worker = s.spawn(|| token.run(|| commit(|| ()).is_ok()));
                remote.trigger();
                let abandonable = !remote.has_committed();
                (worker.join().unwrap(), abandonable)
            });
            assert!(!(charged && abandonable));
        }
    }

    #[test]
    fn the_previous_token_is_restored_after_a_panic() {
        let outer = Interrupt::new();
        outer.trigger();
        outer.run(|| {
            let inner = Interrupt::new();
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                inner.run(|| panic!("inside"))
            }));
            assert!(caught.is_err());
            assert!(interrupted(), "the outer, triggered token is current again");
        });
    }
}
