//! The library's one error type: every fallible function of `dpmm`
//! returns [`Result`], whose error says which of the caller's inputs was
//! wrong (the schema [`Error::Schema`], the workload spec
//! [`Error::Workload`], the records or counts [`Error::Data`], ε, δ or an
//! option [`Error::Parameter`], the ledger [`Error::Ledger`], another input
//! such as a plan file, an output path or a memory limit
//! [`Error::BadInput`]), that a release would spend more privacy than the
//! ledger holds ([`Error::BudgetExceeded`], a refusal of valid input that
//! spends nothing), that the caller interrupted it, or that dpmm failed on
//! valid input ([`Error::Internal`]: a solver or factorization that
//! failed, no operating-system entropy, a bug). Its message is one line,
//! fit for a command line (the `dpmm` binary exits with status 2 for the
//! input's kinds and an overspend, 1 otherwise) or a Python exception (one
//! class per kind).

use std::fmt;

use dp_core::DpError;
use dpmm_records::{RecordsError, SchemaError};

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The schema is wrong: its JSON, a column, a domain, a policy.
    Schema(String),
    /// The workload spec is wrong, or does not fit the schema's domain.
    Workload(String),
    /// The records or counts cannot be read as the schema says: a file
    /// that cannot be opened or parsed, a missing column, a malformed
    /// record under the `error` policy.
    Data(String),
    /// ε, δ or an option is out of its range.
    Parameter(String),
    /// The ledger cannot be created, opened, verified or written.
    Ledger(String),
    /// Another input is wrong: a plan or measurement file, an output path,
    /// a memory limit (the `dpmm` binary: exit status 2, as for every
    /// kind of input above).
    BadInput(String),
    /// The release costs more than the ledger (or session) has left; it
    /// was refused before any noise was drawn and nothing was spent (the
    /// `dpmm` binary: exit status 2).
    BudgetExceeded(String),
    /// dpmm failed on valid input (the `dpmm` binary: exit status 1).
    Internal(String),
    /// The caller interrupted the operation ([`dp_core::interrupt`])
    /// before anything was charged: nothing was spent.
    Interrupted,
}

impl Error {
    /// The same error, its message followed by `(warning: …)`: a warning
    /// that must reach the caller even though the operation failed.
    pub fn with_warning(self, warning: &str) -> Self {
        self.map_message(|m| format!("{m} (warning: {warning})"))
    }

    /// The same kind of error with its message rewritten by `f`.
    pub fn map_message(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            Self::Schema(m) => Self::Schema(f(m)),
            Self::Workload(m) => Self::Workload(f(m)),
            Self::Data(m) => Self::Data(f(m)),
            Self::Parameter(m) => Self::Parameter(f(m)),
            Self::Ledger(m) => Self::Ledger(f(m)),
            Self::BadInput(m) => Self::BadInput(f(m)),
            Self::BudgetExceeded(m) => Self::BudgetExceeded(f(m)),
            Self::Internal(m) => Self::Internal(f(m)),
            Self::Interrupted => Self::Interrupted,
        }
    }

    /// Whether the caller's input is at fault (every kind but an
    /// overspend, an interrupt and an internal failure).
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            Self::Schema(_)
                | Self::Workload(_)
                | Self::Data(_)
                | Self::Parameter(_)
                | Self::Ledger(_)
                | Self::BadInput(_)
        )
    }

    /// The kind's name, as the Python exception class names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Schema(_) => "schema",
            Self::Workload(_) => "workload",
            Self::Data(_) => "data",
            Self::Parameter(_) => "parameter",
            Self::Ledger(_) => "ledger",
            Self::BadInput(_) => "input",
            Self::BudgetExceeded(_) => "budget",
            Self::Internal(_) => "internal",
            Self::Interrupted => "cancelled",
        }
    }

    /// A bad-input failure whose message is `what: reason` (a path, a
    /// flag) — for the operating system's errors on files the user named.
    pub fn file(what: &std::path::Path, reason: impl fmt::Display) -> Self {
        Self::BadInput(format!("{}: {reason}", what.display()))
    }
}

impl fmt::Display for Error {
    /// The message on one line: line breaks inside it (a parser's, the
    /// operating system's) become `"; "`. Without a prefix: the `dpmm`
    /// binary prints `error: …` or `internal error: …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (Self::Schema(m)
        | Self::Workload(m)
        | Self::Data(m)
        | Self::Parameter(m)
        | Self::Ledger(m)
        | Self::BadInput(m)
        | Self::BudgetExceeded(m)
        | Self::Internal(m)) = self
        else {
            return write!(f, "interrupted: nothing was spent");
        };
        let one_line: Vec<&str> = m.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        write!(f, "{}", one_line.join("; "))
    }
}

impl std::error::Error for Error {}

/// The result of every fallible function of `dpmm`.
pub type Result<T> = std::result::Result<T, Error>;

impl From<DpError> for Error {
    fn from(e: DpError) -> Self {
        match e {
            DpError::NotConverged { .. } | DpError::Linalg(_) | DpError::Entropy(_) => {
                Self::Internal(e.to_string())
            }
            DpError::BudgetExceeded { .. } => Self::BudgetExceeded(e.to_string()),
            DpError::Interrupted => Self::Interrupted,
            DpError::InvalidEpsilon(_)
            | DpError::InvalidDelta(_)
            | DpError::InvalidParameter { .. }
            | DpError::CalibrationOutOfRange { .. } => Self::Parameter(e.to_string()),
            DpError::Ledger(_) => Self::Ledger(e.to_string()),
            // The workload asks what the strategy did not measure.
            DpError::NotEstimable(_) => Self::Workload(e.to_string()),
            _ => Self::BadInput(e.to_string()),
        }
    }
}

/// A message about the user's input (a file, a flag, a plan).
impl From<String> for Error {
    fn from(m: String) -> Self {
        Self::BadInput(m)
    }
}

impl From<&str> for Error {
    fn from(m: &str) -> Self {
        Self::BadInput(m.to_string())
    }
}

impl From<SchemaError> for Error {
    fn from(e: SchemaError) -> Self {
        Self::Schema(e.to_string())
    }
}

impl From<RecordsError> for Error {
    fn from(e: RecordsError) -> Self {
        match e {
            RecordsError::Interrupted => Self::Interrupted,
            RecordsError::Internal(m) => Self::Internal(m),
            RecordsError::TooManyCells { .. } | RecordsError::OutOfMemory { .. } => {
                Self::BadInput(e.to_string())
            }
            RecordsError::BadMarginal { .. } | RecordsError::LayoutMismatch => {
                Self::Workload(e.to_string())
            }
            RecordsError::BadContributions(_) | RecordsError::BadTiming(_) => {
                Self::Parameter(e.to_string())
            }
            e => Self::Data(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line_and_codes_follow_the_kind() {
        let f = Error::BadInput("a\n\n  b\r\nc".into());
        assert_eq!(f.to_string(), "a; b; c");
        assert!(matches!(f, Error::BadInput(_)));
        let f: Error = DpError::InvalidEpsilon(0.0).into();
        assert!(matches!(f, Error::Parameter(_)) && f.is_input());
        let f: Error = DpError::Ledger("torn".into()).into();
        assert!(matches!(f, Error::Ledger(_)) && f.is_input());
        let f: Error = DpError::NotEstimable("a × b".into()).into();
        assert!(matches!(f, Error::Workload(_)));
        let f: Error = RecordsError::MissingValue {
            column: "c".into(),
            attribute: "a".into(),
        }
        .into();
        assert!(matches!(f, Error::Data(_)) && f.kind() == "data");
        let f: Error = DpError::NotConverged {
            solver: "s",
            reason: "r".into(),
        }
        .into();
        assert!(matches!(f, Error::Internal(_)));
        assert_eq!(f.to_string(), "s did not converge: r");
        let f: Error = DpError::BudgetExceeded {
            requested: 2.0,
            remaining: 1.0,
        }
        .into();
        assert!(matches!(f, Error::BudgetExceeded(_)));
        let warned = f.with_warning("w");
        assert!(matches!(&warned, Error::BudgetExceeded(m) if m.ends_with("(warning: w)")));
    }
}
