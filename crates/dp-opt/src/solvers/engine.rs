//! The iteration engine every iterative optimizer runs through, in the
//! shape of argmin's `Executor` (a [`Solver`] says how to start, step and
//! when it is done; the [`Executor`] owns the loop, the [`Budget`], the
//! objective history and the [`Observer`] events) without argmin's generic
//! parameter algebra: our iterates are concrete dense vectors and matrices.
//!
//! There is one stopping vocabulary, [`Termination`]: a solver reports
//! its own tests (tolerance met, no progress possible), the executor adds
//! [`Termination::Stalled`] when the objective is not finite (nothing can
//! follow from a NaN or infinite value), [`Termination::MaxIterations`]
//! and a real [`Termination::Timeout`] when the wall clock runs out (a
//! time cut is never reported as an iteration cap), and
//! [`Termination::Interrupted`] when the calling thread's
//! [`dp_core::interrupt`] token was triggered.

use std::time::Instant;

use crate::report::{Event, Observer};
pub use crate::solvers::termination::Termination;
use dp_core::{DpError, Result};

/// How long a run may go: iterations and, optionally, wall-clock seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Iterations allowed.
    pub max_iterations: usize,
    /// Seconds allowed (checked before each iteration), `None` for no limit.
    pub max_seconds: Option<f64>,
}

impl Budget {
    /// `max_iterations` iterations, no time limit.
    pub fn iterations(max_iterations: usize) -> Self {
        Self {
            max_iterations,
            max_seconds: None,
        }
    }

    /// The same budget with a wall-clock limit.
    pub fn with_seconds(self, max_seconds: Option<f64>) -> Self {
        Self {
            max_seconds,
            ..self
        }
    }

    /// Refuses a NaN or negative time limit.
    pub fn validate(&self) -> Result<()> {
        match self.max_seconds {
            Some(t) if t.is_nan() || t < 0.0 => Err(DpError::InvalidParameter {
                name: "max_seconds",
                reason: format!("must be a non-negative number of seconds, got {t}"),
            }),
            _ => Ok(()),
        }
    }
}

/// A running budget: the start time and the limits.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    started: Instant,
    budget: Budget,
}

impl Clock {
    /// Starts the clock now.
    pub fn start(budget: Budget) -> Self {
        Self {
            started: Instant::now(),
            budget,
        }
    }

    /// Seconds since the start.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Seconds left of the time budget (`None` without one).
    pub fn remaining(&self) -> Option<f64> {
        self.budget
            .max_seconds
            .map(|t| (t - self.elapsed()).max(0.0))
    }

    /// The budget's verdict after `iterations` iterations: an interrupt
    /// first, then the iteration cap, then the wall clock.
    pub fn check(&self, iterations: usize) -> Option<Termination> {
        if dp_core::interrupt::interrupted() {
            return Some(Termination::Interrupted);
        }
        if iterations >= self.budget.max_iterations {
            return Some(Termination::MaxIterations {
                iterations: self.budget.max_iterations,
            });
        }
        match self.budget.max_seconds {
            Some(t) if self.elapsed() >= t => Some(Termination::Timeout { seconds: t }),
            _ => None,
        }
    }
}

/// An iterative method, driven by an [`Executor`].
pub trait Solver {
    /// What the run hands back (the best iterate and its figures).
    type Output;

    /// What its iterations are, in a progress line.
    fn counts(&self) -> &'static str {
        "iterations"
    }

    /// Prepares the first iterate; returns its objective (a non-finite
    /// one ends the run as [`Termination::Stalled`]).
    fn init(&mut self) -> f64;

    /// The method's own stopping test on the current iterate (tolerance
    /// met, no progress possible), checked before every iteration and
    /// before the budget.
    fn terminate(&self) -> Option<Termination>;

    /// One iteration: the new objective (a non-finite one ends the run),
    /// or why no step could be taken.
    fn next_iter(&mut self) -> std::result::Result<f64, Termination>;

    /// Method-specific events after iteration `iteration` (beside the
    /// executor's [`Event::Iteration`]). None by default.
    fn events(&self, _iteration: usize, _observer: &mut dyn Observer) {}

    /// The output, given why the run stopped.
    fn finish(self, termination: &Termination) -> Self::Output;
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct Run<T> {
    /// The solver's output.
    pub output: T,
    /// Why it stopped.
    pub termination: Termination,
    /// Iterations taken.
    pub iterations: usize,
    /// Objective after each iteration, times the executor's scale.
    pub history: Vec<f64>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// Owns the loop: checks the solver's test and the budget before each
/// iteration, records the objective, sends the events.
pub struct Executor<'o> {
    budget: Budget,
    observer: &'o mut dyn Observer,
    offset: usize,
    scale: f64,
}

impl<'o> Executor<'o> {
    /// An executor with `budget` reporting to `observer`.
    pub fn new(budget: Budget, observer: &'o mut dyn Observer) -> Self {
        Self {
            budget,
            observer,
            offset: 0,
            scale: 1.0,
        }
    }

    /// Numbers the events from `offset + 1` (for a stage of a longer run).
    pub fn offset(self, offset: usize) -> Self {
        Self { offset, ..self }
    }

    /// Multiplies the recorded and reported objective by `scale` (solvers
    /// working on a normalized problem report in the workload's units).
    pub fn scale(self, scale: f64) -> Self {
        Self { scale, ..self }
    }

    /// Runs `solver` to termination.
    pub fn run<S: Solver>(self, mut solver: S) -> Run<S::Output> {
        let clock = Clock::start(self.budget);
        // Iterations against the budget, for a caller showing progress.
        let total = u64::try_from(self.budget.max_iterations)
            .ok()
            .filter(|&t| t < u64::MAX / 2)
            .unwrap_or(0);
        let _stage = dp_core::progress::stage(solver.counts(), total);
        let mut current = solver.init();
        let mut history = Vec::new();
        let mut iterations = 0;
        let termination = loop {
            if !current.is_finite() {
                break Termination::Stalled {
                    reason: format!("non-finite objective ({current})"),
                };
            }
            if let Some(t) = solver.terminate().or_else(|| clock.check(iterations)) {
                break t;
            }
            match solver.next_iter() {
                Ok(objective) => {
                    current = objective;
                    iterations += 1;
                    dp_core::progress::advance(iterations as u64);
                    let objective = objective * self.scale;
                    history.push(objective);
                    let iteration = self.offset + iterations;
                    self.observer.observe(&Event::Iteration {
                        iteration,
                        objective,
                    });
                    solver.events(iteration, self.observer);
                }
                Err(t) => {
                    iterations += 1;
                    break t;
                }
            }
        };
        Run {
            output: solver.finish(&termination),
            termination,
            iterations,
            history,
            seconds: clock.elapsed(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::report::Recorder;

    /// Halves x each step; converged once x ≤ tolerance. Optionally sleeps.
    struct Halving {
        x: f64,
        tolerance: f64,
        sleep_ms: u64,
        fail_at: Option<f64>,
    }

    impl Solver for Halving {
        type Output = f64;
        fn init(&mut self) -> f64 {
            self.x
        }
        fn terminate(&self) -> Option<Termination> {
            (self.x <= self.tolerance).then(|| Termination::Converged {
                criterion: format!("x <= {}", self.tolerance),
            })
        }
        fn next_iter(&mut self) -> std::result::Result<f64, Termination> {
            std::thread::sleep(std::time::Duration::from_millis(self.sleep_ms));
            if self.fail_at.is_some_and(|f| self.x <= f) {
                return Err(Termination::Stalled {
                    reason: "refused".into(),
                });
            }
            self.x /= 2.0;
            Ok(self.x)
        }
        fn finish(self, _: &Termination) -> f64 {
            self.x
        }
    }

    fn halving(tolerance: f64) -> Halving {
        Halving {
            x: 1.0,
            tolerance,
            sleep_ms: 0,
            fail_at: None,
        }
    }

    /// 1/2^k ≤ 1/1000 first at k = 10: converged after exactly 10 steps,
    /// with the history 1/2, 1/4, … and one Iteration event per step.
    #[test]
    fn converges_with_history_and_events() {
        let mut rec = Recorder::default();
        let run = Executor::new(Budget::iterations(100), &mut rec)
            .scale(3.0)
            .offset(5)
            .run(halving(1e-3));
        assert_eq!(run.iterations, 10);
        assert!(run.termination.converged());
        assert_eq!(run.output, 1.0 / 1024.0);
        let expect: Vec<f64> = (1..=10).map(|k| 3.0 / f64::from(1 << k)).collect();
        assert_eq!(run.history, expect);
        let its: Vec<usize> = rec
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Iteration { iteration, .. } => Some(*iteration),
                _ => None,
            })
            .collect();
        assert_eq!(its, (6..=15).collect::<Vec<_>>());
    }

    /// A budget below the steps needed ends as MaxIterations with the
    /// budget's count, not converged.
    #[test]
    fn stops_at_max_iterations() {
        let run = Executor::new(Budget::iterations(4), &mut ()).run(halving(1e-3));
        assert_eq!(run.iterations, 4);
        assert_eq!(
            run.termination,
            Termination::MaxIterations { iterations: 4 }
        );
        assert!(!run.termination.converged());
        assert_eq!(run.output, 1.0 / 16.0);
    }

    /// A wall-clock budget ends as Timeout (not MaxIterations), after
    /// about budget / step-time steps.
    #[test]
    fn stops_at_timeout() {
        let solver = Halving {
            sleep_ms: 20,
            ..halving(0.0)
        };
        let budget = Budget::iterations(1_000_000).with_seconds(Some(0.1));
        let run = Executor::new(budget, &mut ()).run(solver);
        assert_eq!(run.termination, Termination::Timeout { seconds: 0.1 });
        assert!(run.seconds >= 0.1);
        assert!((1..=6).contains(&run.iterations), "{}", run.iterations);
        assert!(!run.termination.converged());
    }

    /// A zero time budget takes no step at all.
    #[test]
    fn zero_seconds_takes_no_step() {
        let budget = Budget::iterations(10).with_seconds(Some(0.0));
        let run = Executor::new(budget, &mut ()).run(halving(1e-3));
        assert_eq!(run.iterations, 0);
        assert_eq!(run.termination, Termination::Timeout { seconds: 0.0 });
        assert_eq!(run.output, 1.0);
    }

    /// A non-finite objective at the start ends the run as Stalled before
    /// any step (a NaN would pass every `<=` tolerance test as false and
    /// run the budget out).
    #[test]
    fn non_finite_start_is_stalled() {
        for x in [f64::NAN, f64::INFINITY] {
            let solver = Halving { x, ..halving(1e-3) };
            let run = Executor::new(Budget::iterations(100), &mut ()).run(solver);
            assert_eq!(run.iterations, 0);
            assert!(matches!(run.termination, Termination::Stalled { .. }));
            assert!(run.history.is_empty());
        }
    }

    /// A solver that cannot step ends the run with its own reason.
    #[test]
    fn solver_refusal_is_reported() {
        let solver = Halving {
            fail_at: Some(0.3),
            ..halving(1e-3)
        };
        let run = Executor::new(Budget::iterations(100), &mut ()).run(solver);
        assert_eq!(run.output, 0.25);
        assert!(matches!(run.termination, Termination::Stalled { .. }));
        assert_eq!(run.history.len(), 2);
    }

    /// The serde form is tagged by kind, and NaN/negative budgets are refused.
    #[test]
    fn serde_form_and_validation() {
        let t = Termination::Timeout { seconds: 5.0 };
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"kind":"timeout","seconds":5.0}"#
        );
        let c = Termination::Converged {
            criterion: "gap".into(),
        };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"kind":"converged","criterion":"gap"}"#
        );
        assert_eq!(
            serde_json::to_string(&Termination::ClosedForm).unwrap(),
            r#"{"kind":"closed_form"}"#
        );
        let back: Termination =
            serde_json::from_str(r#"{"kind":"max_iterations","iterations":3}"#).unwrap();
        assert_eq!(back, Termination::MaxIterations { iterations: 3 });
        assert!(
            Budget::iterations(1)
                .with_seconds(Some(f64::NAN))
                .validate()
                .is_err()
        );
        assert!(
            Budget::iterations(1)
                .with_seconds(Some(-1.0))
                .validate()
                .is_err()
        );
        assert!(
            Budget::iterations(1)
                .with_seconds(Some(0.0))
                .validate()
                .is_ok()
        );
    }
}
