//! What an optimizer returns and how it reports progress.

use dp_linalg::{Mat, MatRef};
use serde::Serialize;

/// Why a run stopped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum TerminationReason {
    /// A closed-form strategy: nothing to iterate.
    ClosedForm,
    /// The stated tolerance was met.
    Converged {
        /// Which criterion (e.g. "relative duality gap 8.1e-8 <= 1e-6").
        criterion: String,
    },
    /// The iteration budget ran out first.
    MaxIterations,
    /// No further progress was possible (e.g. the line search failed).
    Stalled {
        /// Why.
        reason: String,
    },
}

/// A certificate of (near-)optimality: a lower bound on the optimum.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Certificate {
    /// A proven lower bound on the optimal objective.
    pub lower_bound: f64,
    /// `(objective − lower_bound) / objective`.
    pub relative_gap: f64,
}

/// The report every optimizer returns.
#[derive(Debug, Clone, Serialize)]
pub struct OptimizeReport {
    /// Objective after each iteration (the solver's own value; the final
    /// objective is recomputed from the strategy in `objective`).
    pub objective_history: Vec<f64>,
    /// Iterations taken.
    pub iterations: usize,
    /// Why it stopped.
    pub termination: TerminationReason,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Whether the stopping tolerance was met.
    pub converged: bool,
    /// Objective of the returned strategy, recomputed from it.
    pub objective: f64,
    /// Optimality certificate, when the method provides one.
    pub certificate: Option<Certificate>,
    /// Method-specific figures (LRM: `residual`, `rank`, `trace_btb`).
    pub diagnostics: Vec<(&'static str, f64)>,
}

/// A strategy with its report.
#[derive(Debug, Clone)]
pub struct Optimized {
    /// The strategy `A` (p×n).
    pub strategy: Mat<f64>,
    /// How it was found.
    pub report: OptimizeReport,
}

/// Receives key–value progress after each iteration. `()` ignores it.
pub trait Observer {
    /// Called after iteration `iteration` with named values.
    fn observe(&mut self, iteration: usize, values: &[(&'static str, f64)]);

    /// Called by optimizers whose iterate is a strategy Gram matrix
    /// `X = AᵀA` (COA's primal Newton loop: unit diagonal, over the cells
    /// the workload touches) after iteration `iteration`, for convergence
    /// studies that release with every iterate. Ignored by default.
    fn observe_gram(&mut self, _iteration: usize, _gram: MatRef<'_, f64>) {}
}

impl Observer for () {
    fn observe(&mut self, _iteration: usize, _values: &[(&'static str, f64)]) {}
}

/// Records every observation (for tests and convergence plots).
#[derive(Debug, Default, Clone)]
pub struct Recorder {
    /// `(iteration, name, value)` in arrival order.
    pub records: Vec<(usize, &'static str, f64)>,
}

impl Observer for Recorder {
    fn observe(&mut self, iteration: usize, values: &[(&'static str, f64)]) {
        self.records
            .extend(values.iter().map(|&(k, v)| (iteration, k, v)));
    }
}
