//! The error type shared by every dpmm crate.

use dp_linalg::LinalgError;

/// Everything that can be wrong with an input or a computation in dpmm.
/// Each variant names the problem precisely enough for a one-line message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DpError {
    /// ε outside the documented range `[MIN_EPSILON, MAX_EPSILON]`.
    #[error("invalid epsilon {0:?}: epsilon must be in [1e-6, 100]")]
    InvalidEpsilon(f64),
    /// δ outside the documented range `[MIN_DELTA, MAX_DELTA]`.
    #[error("invalid delta {0:?}: delta must be in [1e-100, 0.5]")]
    InvalidDelta(f64),
    /// A matrix or vector with no entries.
    #[error("{what} is empty ({rows}x{cols})")]
    Empty {
        /// Which argument.
        what: String,
        /// Rows given.
        rows: usize,
        /// Columns given.
        cols: usize,
    },
    /// A NaN or infinite entry.
    #[error("{what} has a non-finite entry ({value}) at ({row}, {col})")]
    NonFinite {
        /// Which argument.
        what: String,
        /// Row of the first bad entry.
        row: usize,
        /// Column of the first bad entry.
        col: usize,
        /// The value found.
        value: f64,
    },
    /// A matrix that is identically zero where that makes the problem void.
    #[error("{what} is identically zero")]
    ZeroMatrix {
        /// Which argument.
        what: String,
    },
    /// Two arguments with incompatible shapes.
    #[error("dimension mismatch: {what}")]
    DimensionMismatch {
        /// What was expected and what was found.
        what: String,
    },
    /// The workload has rows outside the strategy's row space, so least
    /// squares cannot answer it without bias.
    #[error(
        "the strategy does not support the workload: relative residual {relative_residual:.3e} of W outside A's row space exceeds {tolerance:.1e}"
    )]
    UnsupportedWorkload {
        /// `‖W − W P_A‖_F / ‖W‖_F` with `P_A` the projector on A's row space.
        relative_residual: f64,
        /// The tolerance it was compared with.
        tolerance: f64,
    },
    /// A query outside the row space of the strategy measured: its least
    /// squares estimate would be biased, so it is not answered (the
    /// message names the query).
    #[error("{0}")]
    NotEstimable(String),
    /// A parameter outside its valid range.
    #[error("invalid {name}: {reason}")]
    InvalidParameter {
        /// The parameter.
        name: &'static str,
        /// Why it is invalid.
        reason: String,
    },
    /// A calibration used outside the range where its privacy proof holds.
    #[error("{calibration} calibration is not valid here: {reason}")]
    CalibrationOutOfRange {
        /// Which calibration.
        calibration: &'static str,
        /// Why.
        reason: String,
    },
    /// A numerical routine failed.
    #[error("linear algebra: {0}")]
    Linalg(#[from] LinalgError),
    /// An input file is missing, unreadable or malformed.
    #[error("{0}")]
    Io(String),
    /// The operating system could not provide entropy for the noise.
    #[error("no operating-system entropy for the noise source: {0}")]
    Entropy(String),
    /// A measurement would spend more than the session has left; nothing
    /// was drawn or released.
    #[error("privacy budget exceeded: the measurement costs {requested}, {remaining} remains")]
    BudgetExceeded {
        /// Cost of the refused measurement (ε or ρ).
        requested: f64,
        /// What the session still had.
        remaining: f64,
    },
    /// The caller interrupted the computation ([`crate::interrupt`]);
    /// nothing was charged or drawn.
    #[error("interrupted")]
    Interrupted,
    /// The persistent ledger is corrupted, edited or unusable.
    #[error("ledger: {0}")]
    Ledger(String),
    /// A step would need more memory than the limit allows; it was
    /// refused before allocating (the message names the step, the need,
    /// its largest part and the limit).
    #[error("{0}")]
    MemoryLimit(String),
    /// An iterative solver stopped without meeting its tolerance.
    #[error("{solver} did not converge: {reason}")]
    NotConverged {
        /// The solver.
        solver: &'static str,
        /// Why it stopped.
        reason: String,
    },
}

/// Result alias used throughout dpmm.
pub type Result<T> = std::result::Result<T, DpError>;
