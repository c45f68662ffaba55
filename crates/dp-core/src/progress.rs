//! How far long work has come (planning, optimizing, reading the
//! records, reconstructing, a stream's steps), for a caller that shows it:
//! the `dpmm` command's progress line, a Python `progress=` callable.
//!
//! Work that can be counted opens a [`stage`] with its total (iterations
//! against the iteration budget, passes against the pass budget, query
//! products reconstructed) and advances it; stages nest (an optimizer's
//! iterations inside a planner's pass). A caller that wants to see them
//! makes a sink current on the thread that runs the work with [`show`]; the
//! sink is handed the open stages, outermost first, at most every
//! [`INTERVAL`]. [`advance`] moves the calling thread's innermost stage;
//! a [`StageGuard`] can also be moved from other threads (the workers of a
//! parallel loop) with [`StageGuard::add`]. Without a sink every call is a
//! thread-local read and nothing else.
//!
//! What a stage shows must not say anything exact about private data: the
//! reading of records is a [`share`] stage, shown as a percentage only
//! (never a count of records or bytes).

use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The shortest time between two calls of a sink.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// One open stage: what is counted, how many are done, and of how many
/// (`total` 0 when there is no budget to count against).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// What is counted (`iterations`, `passes`).
    pub what: &'static str,
    /// Done so far.
    pub done: u64,
    /// The budget (0: none).
    pub total: u64,
    /// Shown as a percentage only, without `done` and `total` (the share
    /// of an input read: its size says how many records it holds).
    pub share: bool,
}

/// What receives the open stages.
pub type Sink = Arc<dyn Fn(&[Stage]) + Send + Sync>;

struct State {
    sink: Sink,
    stages: Vec<Stage>,
    last: Option<Instant>,
}

type Shared = Arc<Mutex<State>>;

thread_local! {
    static STATE: RefCell<Option<Shared>> = const { RefCell::new(None) };
}

/// Runs `f` with `sink` receiving the stages it opens on this thread.
pub fn show<R>(sink: Sink, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Shared>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            STATE.with(|s| *s.borrow_mut() = previous);
        }
    }
    let shared = Arc::new(Mutex::new(State {
        sink,
        stages: Vec::new(),
        last: None,
    }));
    let previous = STATE.with(|s| s.replace(Some(shared)));
    let _restore = Restore(previous);
    f()
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// Hands the stages to the sink when [`INTERVAL`] has passed since it
/// was last called (outside the lock: a sink may take its time).
fn emit(shared: &Shared, change: impl FnOnce(&mut State)) {
    let mut state = lock(shared);
    change(&mut state);
    if state.last.is_some_and(|t| t.elapsed() < INTERVAL) {
        return;
    }
    state.last = Some(Instant::now());
    let (sink, stages) = (state.sink.clone(), state.stages.clone());
    drop(state);
    sink(&stages);
}

/// An open stage; closed (with every stage opened inside it) when
/// dropped. It may be shared with other threads, which move it with
/// [`Self::add`].
pub struct StageGuard {
    open: Option<(Shared, usize)>,
}

impl StageGuard {
    /// Adds `n` to this stage's count (from any thread).
    pub fn add(&self, n: u64) {
        if let Some((shared, depth)) = &self.open {
            emit(shared, |state| {
                if let Some(stage) = state.stages.get_mut(*depth) {
                    stage.done = stage.done.saturating_add(n);
                }
            });
        }
    }

    /// Sets this stage's count to `done` (from any thread).
    pub fn set(&self, done: u64) {
        if let Some((shared, depth)) = &self.open {
            emit(shared, |state| {
                if let Some(stage) = state.stages.get_mut(*depth) {
                    stage.done = done;
                }
            });
        }
    }
}

impl Drop for StageGuard {
    fn drop(&mut self) {
        if let Some((shared, depth)) = &self.open {
            lock(shared).stages.truncate(*depth);
        }
    }
}

fn open(what: &'static str, total: u64, share: bool) -> StageGuard {
    let open = STATE.with(|s| {
        s.borrow().as_ref().map(|shared| {
            let mut state = lock(shared);
            state.stages.push(Stage {
                what,
                done: 0,
                total,
                share,
            });
            (shared.clone(), state.stages.len() - 1)
        })
    });
    StageGuard { open }
}

/// Opens a stage counting `what` against `total` (0: no budget).
pub fn stage(what: &'static str, total: u64) -> StageGuard {
    open(what, total, false)
}

/// Opens a stage shown as a percentage of `total` only ([`Stage::share`]);
/// a `total` of 0 is shown as nothing done.
pub fn share(what: &'static str, total: u64) -> StageGuard {
    open(what, total, true)
}

/// Sets the calling thread's innermost stage's count to `done`, and hands
/// the stages to the sink when [`INTERVAL`] has passed since it was last
/// called.
pub fn advance(done: u64) {
    let shared = STATE.with(|s| s.borrow().clone());
    if let Some(shared) = shared {
        emit(&shared, |state| {
            if let Some(top) = state.stages.last_mut() {
                top.done = done;
            }
        });
    }
}

/// The stages as one line: `passes 1/20 › iterations 37/1000 (3.7%)`,
/// the percentage of the innermost stage with a budget.
pub fn line(stages: &[Stage]) -> String {
    let parts: Vec<String> = stages
        .iter()
        .map(|s| match (s.share, s.total) {
            (true, 0) => format!("{} 0.0%", s.what),
            (true, t) => format!("{} {:.1}%", s.what, 100.0 * s.done as f64 / t as f64),
            (false, 0) => format!("{} {}", s.what, s.done),
            (false, t) => format!("{} {}/{t}", s.what, s.done),
        })
        .collect();
    let mut out = parts.join(" › ");
    if let Some(s) = stages.iter().rev().find(|s| s.total > 0)
        && !s.share
    {
        out.push_str(&format!(
            " ({:.1}%)",
            100.0 * s.done as f64 / s.total as f64
        ));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn nested_stages_reach_the_sink_outermost_first_and_close() {
        let seen: Arc<Mutex<Vec<Vec<Stage>>>> = Arc::default();
        let record = seen.clone();
        show(
            Arc::new(move |s: &[Stage]| record.lock().unwrap().push(s.to_vec())),
            || {
                let _outer = stage("passes", 4);
                advance(1);
                {
                    let _inner = stage("iterations", 10);
                    std::thread::sleep(INTERVAL);
                    advance(7);
                }
                std::thread::sleep(INTERVAL);
                advance(2);
            },
        );
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 3);
        assert_eq!(line(&seen[1]), "passes 1/4 › iterations 7/10 (70.0%)");
        assert_eq!(line(&seen[2]), "passes 2/4 (50.0%)");
        // No sink on this thread now: stages are not kept.
        let _ignored = stage("iterations", 3);
        advance(1);
        assert_eq!(seen.len(), 3);
    }

    #[test]
    fn workers_move_a_shared_stage_and_a_share_shows_only_its_percentage() {
        let seen: Arc<Mutex<Vec<Vec<Stage>>>> = Arc::default();
        let record = seen.clone();
        show(
            Arc::new(move |s: &[Stage]| record.lock().unwrap().push(s.to_vec())),
            || {
                let _read = share("read", 2048);
                advance(512);
                let products = stage("query products", 10);
                std::thread::scope(|scope| {
                    for _ in 0..10 {
                        scope.spawn(|| products.add(1));
                    }
                });
                std::thread::sleep(INTERVAL);
                products.add(0);
            },
        );
        let seen = seen.lock().unwrap();
        let last = seen.last().unwrap();
        assert_eq!(line(last), "read 25.0% › query products 10/10 (100.0%)");
        assert_eq!(line(&seen[0]), "read 25.0%", "no count of what was read");
        let empty = Stage {
            what: "read",
            done: 0,
            total: 0,
            share: true,
        };
        assert_eq!(line(&[empty]), "read 0.0%");
    }
}
