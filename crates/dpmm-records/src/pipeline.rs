//! Work on the records in parallel: the calling thread reads the input
//! into chunks (blocks of lines, slices of a record batch, row groups), in
//! order; worker threads turn each chunk into an encoded batch and count
//! it into their own accumulator; the accumulators are returned to be
//! merged. Sums do not depend on the order chunks are taken in, so the
//! result is the one a single pass gives.
//!
//! A refusal is the one a single pass would meet first: when chunk `i`
//! fails, chunks after it are skipped but every chunk before it is still
//! done, and the failure of the smallest index is returned. The caller's
//! interrupt ([`dp_core::interrupt`]) is checked before each chunk.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;

use crate::error::RecordsError;

/// Worker threads: rayon's (one per core, or `RAYON_NUM_THREADS`).
pub(crate) fn workers() -> usize {
    rayon::current_num_threads().clamp(1, 64)
}

/// Runs `work` on every chunk `next` yields, on `workers()` threads, each
/// with an accumulator from `make`; returns the accumulators.
pub(crate) fn run<C: Send, A: Send>(
    mut next: impl FnMut() -> Result<Option<C>, RecordsError>,
    make: impl Fn() -> A + Sync,
    work: impl Fn(&mut A, C) -> Result<(), RecordsError> + Sync,
) -> Result<Vec<A>, RecordsError> {
    let workers = workers();
    let (sender, receiver) = sync_channel::<(usize, C)>(workers);
    let receiver = Mutex::new(receiver);
    // Chunks from this index on are skipped: one before has failed.
    let stop_at = AtomicUsize::new(usize::MAX);
    let failure: Mutex<Option<(usize, RecordsError)>> = Mutex::new(None);
    let fail = |index: usize, error: RecordsError| {
        let mut slot = failure.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_none_or(|(i, _)| index < *i) {
            *slot = Some((index, error));
        }
        stop_at.fetch_min(index, Ordering::SeqCst);
    };
    let mut interrupted = false;
    // The workers check the caller's token too (a row group is read whole
    // by one of them).
    let token = dp_core::interrupt::current().unwrap_or_default();
    let accumulators = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    token.run(|| {
                        let mut accumulator = make();
                        loop {
                            let message = receiver.lock().unwrap_or_else(|p| p.into_inner()).recv();
                            let Ok((index, chunk)) = message else {
                                return accumulator;
                            };
                            if index >= stop_at.load(Ordering::SeqCst) {
                                continue;
                            }
                            if let Err(e) = work(&mut accumulator, chunk) {
                                fail(index, e);
                            }
                        }
                    })
                })
            })
            .collect();
        let mut index = 0usize;
        while stop_at.load(Ordering::SeqCst) == usize::MAX {
            if dp_core::interrupt::interrupted() {
                interrupted = true;
                stop_at.store(0, Ordering::SeqCst);
                break;
            }
            match next() {
                Ok(Some(chunk)) => {
                    if sender.send((index, chunk)).is_err() {
                        break;
                    }
                    index += 1;
                }
                Ok(None) => break,
                Err(e) => {
                    fail(index, e);
                    break;
                }
            }
        }
        drop(sender);
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect::<Vec<A>>()
    });
    if interrupted {
        return Err(RecordsError::Interrupted);
    }
    match failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some((_, e)) => Err(e),
        None => Ok(accumulators),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn every_chunk_is_worked_once_and_the_first_failure_wins() {
        let mut n = 0u64;
        let accumulators = run(
            || {
                n += 1;
                Ok((n <= 1000).then_some(n))
            },
            || 0u64,
            |sum, chunk| {
                *sum += chunk;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(accumulators.iter().sum::<u64>(), 1000 * 1001 / 2);
        // Chunks 300 and 700 fail: whatever the threads' timing, the
        // failure of the earlier one is returned.
        for _ in 0..20 {
            let mut n = 0u64;
            let got = run(
                || {
                    n += 1;
                    Ok((n <= 1000).then_some(n))
                },
                || (),
                |_, chunk| match chunk {
                    300 | 700 => Err(RecordsError::BadMarginal {
                        index: chunk as usize,
                        reason: String::new(),
                    }),
                    _ => Ok(()),
                },
            );
            assert!(matches!(
                got,
                Err(RecordsError::BadMarginal { index: 300, .. })
            ));
        }
        // A reading failure after a worked failure: the worked one, earlier.
        let mut n = 0u64;
        let got = run(
            || {
                n += 1;
                if n == 50 {
                    return Err(RecordsError::NoHeader("late".into()));
                }
                Ok(Some(n))
            },
            || (),
            |_, chunk| match chunk {
                10 => Err(RecordsError::LayoutMismatch),
                _ => Ok(()),
            },
        );
        assert_eq!(got.err(), Some(RecordsError::LayoutMismatch));
    }

    #[test]
    fn an_interrupt_stops_the_reading() {
        let token = dp_core::interrupt::Interrupt::new();
        token.trigger();
        let got = token.run(|| run(|| Ok(Some(1u8)), || (), |_, _| Ok(())));
        assert_eq!(got.err(), Some(RecordsError::Interrupted));
    }
}
