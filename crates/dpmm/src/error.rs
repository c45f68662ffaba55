//! The library's one error type: every fallible function of `dpmm`
//! returns [`Result`], whose error says whether the caller's input was
//! wrong ([`Error::BadInput`]), would spend more privacy than the ledger
//! holds ([`Error::BudgetExceeded`], a refusal of valid input that spends
//! nothing), or dpmm failed on valid input ([`Error::Internal`]: a solver
//! or factorization that failed, no operating-system entropy, a bug). Its
//! message is one line, fit for a
//! command line (the `dpmm` binary exits with status 2 or 1 accordingly)
//! or a Python exception.

use std::fmt;

use dp_core::DpError;
use dpmm_records::{RecordsError, SchemaError};

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The caller's input is wrong (the `dpmm` binary: exit status 2).
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
        match self {
            Self::BadInput(m) => Self::BadInput(format!("{m} (warning: {warning})")),
            Self::BudgetExceeded(m) => Self::BudgetExceeded(format!("{m} (warning: {warning})")),
            Self::Internal(m) => Self::Internal(format!("{m} (warning: {warning})")),
            Self::Interrupted => Self::Interrupted,
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
        let (Self::BadInput(m) | Self::BudgetExceeded(m) | Self::Internal(m)) = self else {
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
        Self::BadInput(e.to_string())
    }
}

impl From<RecordsError> for Error {
    fn from(e: RecordsError) -> Self {
        match e {
            RecordsError::Interrupted => Self::Interrupted,
            RecordsError::Internal(m) => Self::Internal(m),
            e => Self::BadInput(e.to_string()),
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
        assert!(matches!(f, Error::BadInput(_)));
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
