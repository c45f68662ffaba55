//! Combinations of optimizers: [`BestOf`] runs every candidate and keeps
//! the strategy with the smallest objective recomputed by
//! [`Problem::objective`] (never a solver's own claim); [`Fallback`] runs
//! the first and falls back to the next only when it fails or returns a
//! strategy that does not support the workload. Both list every candidate
//! tried in [`crate::OptimizeReport::candidates`] and name the winner.

use std::time::Instant;

use dp_core::{DpError, Result};

use crate::report::{CandidateReport, Event, Observer};
use crate::{Optimized, Problem, StrategyOptimizer};

/// One candidate's run, before selection.
pub struct CandidateRun {
    /// The candidate's name.
    pub name: &'static str,
    /// Its outcome.
    pub outcome: Result<Optimized>,
}

/// The candidate with the smallest recomputed objective (the first on a
/// tie), with every candidate's objective and termination in the report.
/// An error if no candidate returned a strategy that supports W, or if a
/// candidate refused its parameters (a caller's mistake, never hidden by
/// another candidate's success).
pub fn choose(
    solver: &'static str,
    problem: &Problem,
    runs: Vec<CandidateRun>,
    started: Instant,
    observer: &mut dyn Observer,
) -> Result<Optimized> {
    // Candidates stopped by an interrupt are not evaluated (seconds each
    // on a large problem): the caller asked to stop.
    dp_core::interrupt::check()?;
    let mut reports = Vec::with_capacity(runs.len());
    let mut best: Option<(usize, f64, Optimized)> = None;
    for (index, run) in runs.into_iter().enumerate() {
        if let Err(e @ DpError::InvalidParameter { .. }) = run.outcome {
            return Err(e);
        }
        let checked = run
            .outcome
            .and_then(|o| problem.objective(o.strategy.as_ref()).map(|f| (f, o)));
        if let Err(DpError::Interrupted) = checked {
            return Err(DpError::Interrupted);
        }
        let report = match &checked {
            Ok((f, o)) => CandidateReport {
                name: run.name,
                objective: Some(*f),
                termination: Some(o.report.termination.clone()),
                error: None,
            },
            Err(e) => CandidateReport {
                name: run.name,
                objective: None,
                termination: None,
                error: Some(e.to_string()),
            },
        };
        observer.observe(&Event::Candidate {
            iteration: index,
            name: run.name,
            objective: report.objective,
        });
        reports.push(report);
        if let Ok((f, o)) = checked
            && best.as_ref().is_none_or(|b| f < b.1)
        {
            best = Some((index, f, o));
        }
    }
    let Some((index, objective, mut winner)) = best else {
        let reasons: Vec<String> = reports
            .iter()
            .map(|r| format!("{}: {}", r.name, r.error.as_deref().unwrap_or("?")))
            .collect();
        return Err(DpError::NotConverged {
            solver,
            reason: format!("no candidate produced a strategy: {}", reasons.join("; ")),
        });
    };
    winner.report.objective = objective;
    winner.report.chosen = Some(reports[index].name);
    winner.report.candidates = reports;
    winner.report.seconds = started.elapsed().as_secs_f64();
    Ok(winner)
}

/// Runs every candidate and keeps the best by recomputed objective.
pub struct BestOf {
    /// Name used in reports.
    pub name: &'static str,
    /// The candidates, in order (the first wins a tie).
    pub candidates: Vec<Box<dyn StrategyOptimizer>>,
}

impl StrategyOptimizer for BestOf {
    fn name(&self) -> &'static str {
        self.name
    }

    fn optimize(&self, problem: &Problem, observer: &mut dyn Observer) -> Result<Optimized> {
        let started = Instant::now();
        let runs = self
            .candidates
            .iter()
            .map(|c| CandidateRun {
                name: c.name(),
                outcome: c.optimize(problem, observer),
            })
            .collect();
        choose(self.name, problem, runs, started, observer)
    }
}

/// Runs `primary`; only if it fails or its strategy does not support W,
/// runs `fallback` (typically the identity, which supports every
/// workload). The report says which was returned and why.
pub struct Fallback {
    /// The optimizer tried first.
    pub primary: Box<dyn StrategyOptimizer>,
    /// The optimizer used when the first fails.
    pub fallback: Box<dyn StrategyOptimizer>,
}

impl StrategyOptimizer for Fallback {
    fn name(&self) -> &'static str {
        self.primary.name()
    }

    fn optimize(&self, problem: &Problem, observer: &mut dyn Observer) -> Result<Optimized> {
        let started = Instant::now();
        let first = self.primary.optimize(problem, observer);
        let supported = first
            .as_ref()
            .is_ok_and(|o| problem.objective(o.strategy.as_ref()).is_ok());
        if supported {
            return first;
        }
        let runs = vec![
            CandidateRun {
                name: self.primary.name(),
                outcome: first,
            },
            CandidateRun {
                name: self.fallback.name(),
                outcome: self.fallback.optimize(problem, observer),
            },
        ];
        choose(self.name(), problem, runs, started, observer)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::optimizers::classic::Identity;
    use crate::{Draft, PrivacyModel, Termination};
    use dp_linalg::Mat;
    use dp_workloads::workload::{AllRange, Workload};

    /// Returns a fixed strategy and claims a fixed (possibly false)
    /// objective.
    struct Fixed {
        name: &'static str,
        strategy: Mat<f64>,
        claim: f64,
    }

    impl StrategyOptimizer for Fixed {
        fn name(&self) -> &'static str {
            self.name
        }
        fn optimize(&self, _problem: &Problem, _o: &mut dyn Observer) -> Result<Optimized> {
            let mut d = Draft::new(self.strategy.clone(), Termination::ClosedForm);
            d.history = vec![self.claim];
            // Bypass the recomputation to model a solver misreporting.
            Ok(Optimized {
                strategy: d.strategy,
                report: crate::OptimizeReport {
                    objective_history: d.history,
                    iterations: 0,
                    termination: d.termination,
                    seconds: 0.0,
                    objective: self.claim,
                    certificate: None,
                    diagnostics: Vec::new(),
                    candidates: Vec::new(),
                    chosen: None,
                },
            })
        }
    }

    fn problem(n: usize) -> Problem {
        let w = AllRange::new(n).unwrap();
        Problem::from_gram(w.gram(), PrivacyModel::Approx).unwrap()
    }

    /// A candidate claiming objective 0 for the (worse on all ranges)
    /// identity loses to the hierarchical strategy: the choice follows the
    /// recomputed objectives, which match brute-force evaluation.
    #[test]
    fn keeps_the_truly_better_candidate() {
        let n = 16;
        let p = problem(n);
        let liar = Fixed {
            name: "liar",
            strategy: Mat::identity(n, n),
            claim: 0.0,
        };
        let h = dp_workloads::strategies::hierarchical(n, 2).unwrap();
        let honest = Fixed {
            name: "hier",
            strategy: h.clone(),
            claim: 1e300,
        };
        let best = BestOf {
            name: "best",
            candidates: vec![Box::new(liar), Box::new(honest)],
        };
        let r = best.optimize(&p, &mut ()).unwrap();
        assert_eq!(r.report.chosen, Some("hier"));
        assert_eq!(r.strategy, h);
        let truth_h = p.objective(h.as_ref()).unwrap();
        let truth_i = p.objective(Mat::<f64>::identity(n, n).as_ref()).unwrap();
        assert!(truth_h < truth_i);
        assert_eq!(r.report.objective, truth_h);
        assert_eq!(r.report.candidates.len(), 2);
        assert_eq!(r.report.candidates[0].objective, Some(truth_i));
        assert_eq!(r.report.candidates[1].objective, Some(truth_h));
    }

    /// A candidate whose strategy does not support W is listed with its
    /// error and never chosen; with no valid candidate the result is an
    /// error naming each failure.
    #[test]
    fn unsupported_candidates_are_rejected() {
        let n = 8;
        let p = problem(n);
        let half = Mat::from_fn(n / 2, n, |i, j| f64::from(u8::from(i == j)));
        let bad = || Fixed {
            name: "bad",
            strategy: half.clone(),
            claim: 0.0,
        };
        let best = BestOf {
            name: "best",
            candidates: vec![Box::new(bad()), Box::new(Identity)],
        };
        let r = best.optimize(&p, &mut ()).unwrap();
        assert_eq!(r.report.chosen, Some("identity"));
        assert!(r.report.candidates[0].error.is_some());
        assert_eq!(r.report.candidates[0].objective, None);
        let only_bad = BestOf {
            name: "best",
            candidates: vec![Box::new(bad())],
        };
        assert!(only_bad.optimize(&p, &mut ()).is_err());
        // Fallback: used only when the primary fails.
        let fb = Fallback {
            primary: Box::new(bad()),
            fallback: Box::new(Identity),
        };
        let r = fb.optimize(&p, &mut ()).unwrap();
        assert_eq!(r.report.chosen, Some("identity"));
        let fb = Fallback {
            primary: Box::new(crate::optimizers::classic::Hierarchical::default()),
            fallback: Box::new(Identity),
        };
        let r = fb.optimize(&p, &mut ()).unwrap();
        assert_eq!(r.report.chosen, None);
        assert!(r.report.candidates.is_empty());
    }
}
