//! How far long data-independent work has come (planning, optimizing),
//! for a caller that shows it: the `dpmm` command's progress line.
//!
//! Work that can be counted opens a [`stage`] with its total (iterations
//! against the iteration budget, passes against the pass budget) and
//! [`advance`]s it; stages nest (an optimizer's iterations inside a
//! planner's pass). A caller that wants to see them makes a sink current
//! on the thread that runs the work with [`show`]; the sink is handed the
//! open stages, outermost first, at most every [`INTERVAL`]. Without a
//! sink every call is a thread-local read and nothing else. Nothing here
//! reads data: planning is public.

use std::cell::RefCell;
use std::sync::Arc;
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
}

/// What receives the open stages.
pub type Sink = Arc<dyn Fn(&[Stage]) + Send + Sync>;

struct State {
    sink: Sink,
    stages: Vec<Stage>,
    last: Option<Instant>,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Runs `f` with `sink` receiving the stages it opens on this thread.
pub fn show<R>(sink: Sink, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<State>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            STATE.with(|s| *s.borrow_mut() = previous);
        }
    }
    let previous = STATE.with(|s| {
        s.replace(Some(State {
            sink,
            stages: Vec::new(),
            last: None,
        }))
    });
    let _restore = Restore(previous);
    f()
}

/// An open stage; closed when dropped.
pub struct StageGuard {
    open: bool,
}

impl Drop for StageGuard {
    fn drop(&mut self) {
        if self.open {
            STATE.with(|s| {
                if let Some(state) = s.borrow_mut().as_mut() {
                    state.stages.pop();
                }
            });
        }
    }
}

/// Opens a stage counting `what` against `total` (0: no budget).
pub fn stage(what: &'static str, total: u64) -> StageGuard {
    let open = STATE.with(|s| match s.borrow_mut().as_mut() {
        Some(state) => {
            state.stages.push(Stage {
                what,
                done: 0,
                total,
            });
            true
        }
        None => false,
    });
    StageGuard { open }
}

/// Sets the innermost stage's count to `done`, and hands the stages to
/// the sink when [`INTERVAL`] has passed since it was last called.
pub fn advance(done: u64) {
    STATE.with(|s| {
        let mut borrowed = s.borrow_mut();
        let Some(state) = borrowed.as_mut() else {
            return;
        };
        if let Some(top) = state.stages.last_mut() {
            top.done = done;
        }
        if state.last.is_some_and(|t| t.elapsed() < INTERVAL) {
            return;
        }
        state.last = Some(Instant::now());
        let (sink, stages) = (state.sink.clone(), state.stages.clone());
        drop(borrowed);
        sink(&stages);
    });
}

/// The stages as one line: `passes 1/20 › iterations 37/1000 (3.7%)`,
/// the percentage of the innermost stage with a budget.
pub fn line(stages: &[Stage]) -> String {
    let parts: Vec<String> = stages
        .iter()
        .map(|s| match s.total {
            0 => format!("{} {}", s.what, s.done),
            t => format!("{} {}/{t}", s.what, s.done),
        })
        .collect();
    let mut out = parts.join(" › ");
    if let Some(s) = stages.iter().rev().find(|s| s.total > 0) {
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
}
