//! Helpers shared by the command-line tests: a scratch directory per test
//! and a run of the built `xtask` binary.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses a subset; a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory `dpmm-xtask-NAME-PID` under the system temp dir.
pub fn tmpdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dpmm-xtask-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A path as a command-line argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The outcome of one `xtask` run.
pub struct Run {
    /// Exit status (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Standard output as one JSON value.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap()
    }

    /// Standard output as one JSON value per line.
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Asserts status 0 and returns `self`.
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "stdout {}\nstderr {}",
            self.stdout, self.stderr
        );
        self
    }

    /// Asserts the command-line contract for bad input: status 2 and one
    /// line `error: …` on stderr.
    pub fn refused(&self) {
        assert_eq!(
            self.code, 2,
            "stdout {}\nstderr {}",
            self.stdout, self.stderr
        );
        assert_eq!(self.stderr.lines().count(), 1, "{}", self.stderr);
        assert!(self.stderr.starts_with("error: "), "{}", self.stderr);
    }
}

/// Runs the built `xtask` binary with `args`.
pub fn xtask(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
