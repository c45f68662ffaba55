//! Why a run stopped: the one stopping vocabulary of every optimizer and
//! solver ([`crate::solvers::engine`] reports it, [`crate::report`] records it).

use serde::{Deserialize, Serialize};

/// Why a run stopped. Serialized tagged by `kind`
/// (`{"kind":"converged","criterion":"…"}`, `{"kind":"timeout","seconds":5.0}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Termination {
    /// A closed-form strategy: nothing to iterate.
    ClosedForm,
    /// The stated tolerance was met.
    Converged {
        /// Which criterion (e.g. "relative duality gap 8.1e-8 <= 1e-6").
        criterion: String,
    },
    /// The iteration budget ran out first.
    MaxIterations {
        /// The budget.
        iterations: usize,
    },
    /// The wall-clock budget ran out first.
    Timeout {
        /// The budget in seconds.
        seconds: f64,
    },
    /// No further progress was possible (e.g. the line search failed).
    Stalled {
        /// Why.
        reason: String,
    },
    /// The caller interrupted the run ([`dp_core::interrupt`]).
    Interrupted,
}

impl Termination {
    /// Whether the run met its tolerance (or needed none).
    pub fn converged(&self) -> bool {
        matches!(self, Self::ClosedForm | Self::Converged { .. })
    }

    /// The serde tag: `"closed_form"`, `"converged"`, `"max_iterations"`,
    /// `"timeout"`, `"stalled"` or `"interrupted"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ClosedForm => "closed_form",
            Self::Converged { .. } => "converged",
            Self::MaxIterations { .. } => "max_iterations",
            Self::Timeout { .. } => "timeout",
            Self::Stalled { .. } => "stalled",
            Self::Interrupted => "interrupted",
        }
    }
}

impl std::fmt::Display for Termination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ClosedForm => write!(f, "closed form"),
            Self::Converged { criterion } => write!(f, "converged: {criterion}"),
            Self::MaxIterations { iterations } => {
                write!(f, "iteration budget ({iterations}) exhausted")
            }
            Self::Timeout { seconds } => write!(f, "wall-clock budget ({seconds} s) exhausted"),
            Self::Stalled { reason } => write!(f, "stalled: {reason}"),
            Self::Interrupted => write!(f, "interrupted"),
        }
    }
}
