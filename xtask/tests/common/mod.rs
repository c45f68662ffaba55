//! Helpers shared by the command-line tests: a scratch directory per test
//! and a run of the built `xtask` binary.

#![allow(dead_code, clippy::unwrap_used, clippy::needless_range_loop)] // each test file uses a subset; a failed unwrap is a failed test; index loops mirror the layout

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

/// Writes a `.npy` file byte by byte (format 1.0), independently of the
/// crate under test.
pub fn write_npy(path: &Path, descr: &str, fortran: bool, shape: &[usize], payload: &[u8]) {
    let shape_txt = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape_txt}, }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(payload);
    std::fs::write(path, bytes).unwrap();
}

pub fn f64_matrix(path: &Path, rows: &[&[f64]], fortran: bool) {
    let (m, n) = (rows.len(), rows[0].len());
    let mut payload = Vec::new();
    if fortran {
        for j in 0..n {
            for row in rows {
                payload.extend_from_slice(&row[j].to_le_bytes());
            }
        }
    } else {
        for row in rows {
            for v in *row {
                payload.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    write_npy(path, "<f8", fortran, &[m, n], &payload);
}
