//! What an optimizer returns and how it reports progress: typed
//! [`Event`]s to an [`Observer`] while it runs, an [`OptimizeReport`]
//! (built in one place, [`Draft::finish`]) when it is done.

use std::time::Instant;

use dp_core::Result;
use dp_linalg::{Mat, MatRef};
use serde::Serialize;

use crate::Problem;
use crate::solvers::Termination;

/// A certificate of (near-)optimality: a lower bound on the optimum.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Certificate {
    /// A proven lower bound on the optimal objective.
    pub lower_bound: f64,
    /// `(objective − lower_bound) / objective`.
    pub relative_gap: f64,
}

/// One candidate of a [`crate::BestOf`] run.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateReport {
    /// The candidate optimizer's name.
    pub name: &'static str,
    /// Its strategy's objective recomputed by [`Problem::objective`]
    /// (`None` when it failed or its strategy does not support W).
    pub objective: Option<f64>,
    /// Why it stopped (`None` when it failed).
    pub termination: Option<Termination>,
    /// Its error, when it failed.
    pub error: Option<String>,
}

/// The report every optimizer returns.
#[derive(Debug, Clone, Serialize)]
pub struct OptimizeReport {
    /// Objective after each iteration (the solver's own value; the final
    /// objective is recomputed from the strategy in `objective`).
    pub objective_history: Vec<f64>,
    /// Iterations taken.
    pub iterations: usize,
    /// Why it stopped; [`Termination::converged`] says whether the
    /// tolerance was met.
    pub termination: Termination,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Objective of the returned strategy, recomputed from it.
    pub objective: f64,
    /// Optimality certificate, when the method provides one.
    pub certificate: Option<Certificate>,
    /// Method-specific figures (LRM: `residual`, `rank`, `trace_btb`).
    pub diagnostics: Vec<(&'static str, f64)>,
    /// For a combination of optimizers, every candidate, and which won
    /// (`chosen`, the name of the candidate whose strategy is returned).
    pub candidates: Vec<CandidateReport>,
    /// The winning candidate's name (`None` for a single optimizer).
    pub chosen: Option<&'static str>,
}

impl OptimizeReport {
    /// Whether the run met its tolerance (derived from `termination`).
    pub fn converged(&self) -> bool {
        self.termination.converged()
    }
}

/// A strategy with its report.
#[derive(Debug, Clone)]
pub struct Optimized {
    /// The strategy `A` (p×n).
    pub strategy: Mat<f64>,
    /// How it was found.
    pub report: OptimizeReport,
}

/// What an optimizer hands over at the end; [`Draft::finish`] recomputes
/// the objective from the strategy (never trusting the solver's own
/// bookkeeping), refuses a strategy that does not support the workload
/// and stamps the time.
#[derive(Debug, Clone)]
pub struct Draft {
    /// The strategy.
    pub strategy: Mat<f64>,
    /// Why the run stopped.
    pub termination: Termination,
    /// Iterations taken.
    pub iterations: usize,
    /// Objective after each iteration (empty: the final objective alone).
    pub history: Vec<f64>,
    /// Optimality certificate, if any.
    pub certificate: Option<Certificate>,
    /// Method-specific figures.
    pub diagnostics: Vec<(&'static str, f64)>,
}

impl Draft {
    /// A draft with no iterations, history, certificate or diagnostics.
    pub fn new(strategy: Mat<f64>, termination: Termination) -> Self {
        Self {
            strategy,
            termination,
            iterations: 0,
            history: Vec::new(),
            certificate: None,
            diagnostics: Vec::new(),
        }
    }

    /// The report: objective recomputed by [`Problem::objective`] (an error
    /// if the strategy does not support W), seconds since `started`.
    pub fn finish(self, problem: &Problem, started: Instant) -> Result<Optimized> {
        let objective = problem.objective(self.strategy.as_ref())?;
        let history = if self.history.is_empty() {
            vec![objective]
        } else {
            self.history
        };
        Ok(Optimized {
            strategy: self.strategy,
            report: OptimizeReport {
                objective_history: history,
                iterations: self.iterations,
                termination: self.termination,
                seconds: started.elapsed().as_secs_f64(),
                objective,
                certificate: self.certificate,
                diagnostics: self.diagnostics,
                candidates: Vec::new(),
                chosen: None,
            },
        })
    }
}

/// A stage of a multi-stage method.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Stage {
    /// A restart from a new random point (p-Identity; LRM's random start
    /// after its p-Identity start).
    Restart(usize),
    /// A smoothing level of the soft-max (ESM).
    Smoothing(f64),
    /// A barrier weight μ (AM's and COA's interior points).
    BarrierWeight(f64),
    /// A homotopy weight θ (COA's primal Newton loop).
    Homotopy(f64),
}

/// Where a lower bound on the optimum came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BoundSource {
    /// Multipliers read off a primal point (COA).
    PrimalMultipliers,
    /// The dual Newton solve (COA).
    Dual,
    /// A centred point of an interior-point method.
    InteriorPoint,
}

/// A progress event.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// An iteration ended with this objective (workload units).
    Iteration {
        /// Iteration number.
        iteration: usize,
        /// Objective.
        objective: f64,
    },
    /// A new stage starts at this iteration.
    Stage {
        /// Iteration number.
        iteration: usize,
        /// Which stage.
        stage: Stage,
    },
    /// The projected-gradient norm `‖P(x − ∇f) − x‖∞` (SPG).
    ProjectedGradient {
        /// Iteration number.
        iteration: usize,
        /// The norm.
        norm: f64,
    },
    /// A proven lower bound on the optimum (workload units).
    LowerBound {
        /// Iteration number.
        iteration: usize,
        /// The bound.
        bound: f64,
        /// Its source.
        source: BoundSource,
    },
    /// A damped Newton step (COA's primal loop).
    Newton {
        /// Iteration number.
        iteration: usize,
        /// Newton decrement relative to the objective.
        decrement: f64,
        /// Conjugate-gradient iterations of the step.
        cg_iterations: usize,
        /// Accepted step length.
        step: f64,
        /// Line-search trials.
        trials: usize,
    },
    /// An outer step of LRM's factorization `W ≈ B L`.
    Factorization {
        /// Outer iteration number.
        iteration: usize,
        /// Penalty weight β.
        penalty: f64,
        /// `‖W − B L‖_F` (workload units).
        residual: f64,
        /// `tr(BᵀB)` (workload units).
        trace_btb: f64,
        /// Inner solver iterations of this step.
        inner_iterations: usize,
    },
    /// A candidate strategy with its recomputed objective (COA's dual and
    /// interior-point candidates, [`crate::BestOf`]'s members).
    Candidate {
        /// Iteration number.
        iteration: usize,
        /// Which candidate.
        name: &'static str,
        /// Its objective (`None`: failed or unsupported).
        objective: Option<f64>,
    },
    /// The strategy Gram iterate `X = AᵀA` (COA's primal Newton loop:
    /// unit diagonal over the cells the workload touches), for
    /// convergence studies that release with every iterate.
    GramIterate {
        /// Iteration number.
        iteration: usize,
        /// The iterate.
        gram: MatRef<'a, f64>,
    },
}

impl Event<'_> {
    /// The event without borrowed data (`None` for [`Event::GramIterate`]).
    pub fn detached(&self) -> Option<Event<'static>> {
        Some(match *self {
            Event::Iteration {
                iteration,
                objective,
            } => Event::Iteration {
                iteration,
                objective,
            },
            Event::Stage { iteration, stage } => Event::Stage { iteration, stage },
            Event::ProjectedGradient { iteration, norm } => {
                Event::ProjectedGradient { iteration, norm }
            }
            Event::LowerBound {
                iteration,
                bound,
                source,
            } => Event::LowerBound {
                iteration,
                bound,
                source,
            },
            Event::Newton {
                iteration,
                decrement,
                cg_iterations,
                step,
                trials,
            } => Event::Newton {
                iteration,
                decrement,
                cg_iterations,
                step,
                trials,
            },
            Event::Factorization {
                iteration,
                penalty,
                residual,
                trace_btb,
                inner_iterations,
            } => Event::Factorization {
                iteration,
                penalty,
                residual,
                trace_btb,
                inner_iterations,
            },
            Event::Candidate {
                iteration,
                name,
                objective,
            } => Event::Candidate {
                iteration,
                name,
                objective,
            },
            Event::GramIterate { .. } => return None,
        })
    }
}

/// Receives progress events. `()` ignores them.
pub trait Observer {
    /// Called for every event, in order.
    fn observe(&mut self, event: &Event<'_>);
}

impl Observer for () {
    fn observe(&mut self, _event: &Event<'_>) {}
}

/// Passes every event to a closure.
pub struct FnObserver<F>(pub F);

impl<F: FnMut(&Event<'_>)> Observer for FnObserver<F> {
    fn observe(&mut self, event: &Event<'_>) {
        (self.0)(event);
    }
}

/// Records every event but the Gram iterates (for tests and convergence
/// plots; observe [`Event::GramIterate`] directly to keep those).
#[derive(Debug, Default, Clone)]
pub struct Recorder {
    /// Events in arrival order.
    pub events: Vec<Event<'static>>,
}

impl Observer for Recorder {
    fn observe(&mut self, event: &Event<'_>) {
        self.events.extend(event.detached());
    }
}
