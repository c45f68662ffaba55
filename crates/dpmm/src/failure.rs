//! The one error-to-exit-status path of `dpmm`: every subcommand returns
//! `Result<(), Failure>`; `main` prints it as ONE line on stderr and exits
//! with status 2 for bad input (a file, a flag, a spec, a schema, a record,
//! a budget) or 1 for an internal failure (a solver or factorization that
//! failed on valid input, no operating-system entropy, a bug).

use std::fmt;
use std::process::ExitCode;

use dp_core::DpError;
use dpmm_records::{RecordsError, SchemaError};

/// Why a subcommand failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The user's input is wrong: exit status 2.
    BadInput(String),
    /// dpmm failed on valid input: exit status 1.
    Internal(String),
}

impl Failure {
    /// The exit status: 2 for bad input, 1 for an internal failure.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Self::BadInput(_) => ExitCode::from(2),
            Self::Internal(_) => ExitCode::from(1),
        }
    }

    /// Prints the one line on stderr and returns the exit status.
    pub fn report(&self) -> ExitCode {
        eprintln!("{self}");
        self.exit_code()
    }

    /// A bad-input failure whose message is `what: reason` (a path, a
    /// flag) — for the operating system's errors on files the user named.
    pub fn file(what: &std::path::Path, reason: impl fmt::Display) -> Self {
        Self::BadInput(format!("{}: {reason}", what.display()))
    }
}

impl fmt::Display for Failure {
    /// One line: line breaks inside a message (a parser's, the operating
    /// system's) become `"; "`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (Self::BadInput(m) | Self::Internal(m)) = self;
        let one_line: Vec<&str> = m.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        match self {
            Self::BadInput(_) => write!(f, "error: {}", one_line.join("; ")),
            Self::Internal(_) => write!(f, "internal error: {}", one_line.join("; ")),
        }
    }
}

impl From<DpError> for Failure {
    fn from(e: DpError) -> Self {
        match e {
            DpError::NotConverged { .. } | DpError::Linalg(_) | DpError::Entropy(_) => {
                Self::Internal(e.to_string())
            }
            _ => Self::BadInput(e.to_string()),
        }
    }
}

/// A message about the user's input (a file, a flag, a plan).
impl From<String> for Failure {
    fn from(m: String) -> Self {
        Self::BadInput(m)
    }
}

impl From<&str> for Failure {
    fn from(m: &str) -> Self {
        Self::BadInput(m.to_string())
    }
}

impl From<SchemaError> for Failure {
    fn from(e: SchemaError) -> Self {
        Self::BadInput(e.to_string())
    }
}

impl From<RecordsError> for Failure {
    fn from(e: RecordsError) -> Self {
        Self::BadInput(e.to_string())
    }
}

/// What a failed `clap` parse ends in: `--help` and `--version` print in
/// full and succeed; a usage error is its first line ([`usage_line`]) and
/// status 2.
pub fn parse_exit(e: &clap::Error) -> ExitCode {
    if e.use_stderr() {
        usage_line(e).report()
    } else {
        let _ = e.print();
        ExitCode::SUCCESS
    }
}

/// The line a clap usage error prints first (`error: invalid value …`),
/// without its usage block and `--help` hint.
pub fn usage_line(e: &clap::Error) -> Failure {
    let rendered = e.render().to_string();
    let first = rendered
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("invalid command line");
    Failure::BadInput(first.strip_prefix("error: ").unwrap_or(first).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line_and_codes_follow_the_kind() {
        let f = Failure::BadInput("a\n\n  b\r\nc".into());
        assert_eq!(f.to_string(), "error: a; b; c");
        assert_eq!(f.exit_code(), ExitCode::from(2));
        let f: Failure = DpError::InvalidEpsilon(0.0).into();
        assert!(matches!(f, Failure::BadInput(_)));
        let f: Failure = DpError::NotConverged {
            solver: "s",
            reason: "r".into(),
        }
        .into();
        assert_eq!(f.exit_code(), ExitCode::from(1));
        assert_eq!(f.to_string(), "internal error: s did not converge: r");
    }
}
