//! `cargo xtask bench peers`: dpmm beside HDMM (McKenna et al., VLDB
//! 2018; dpcomp-org/hdmm, AGPL-3.0) in one run, on the 1-D workloads of
//! issue 21's table: COA against HDMM's `McKennaConvex` under (ε,δ)-DP
//! and `epsilon-default` against HDMM's `PIdentity` (p = n/16) under ε-DP.
//!
//! HDMM is never vendored: when `HDMM_SRC` names its `src/` directory and
//! a Python with numpy and scipy is found (`PEER_PYTHON`, else `python3`),
//! a short driver of ours calls HDMM's public API in a child process.
//! Both sides start from the same Gram matrix `WᵀW` (HDMM receives a
//! square root `R = Λ^{1/2}Vᵀ` of the Gram (`RᵀR = WᵀW`), from which its optimizers
//! form the same Gram), both times exclude reading it, and both
//! objectives are recomputed here by [`Problem::objective`] from the
//! returned strategies. Beside wall-clock seconds each side reports the
//! CPU seconds of its process over the run (all threads: ours may use
//! two, HDMM's BLAS is held to one), the measure that survives a machine
//! shared with other work.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use dp_core::{DpError, Result};
use dp_linalg::Mat;
use dp_opt::{PrivacyModel, Problem};
use dp_workloads::Workload;
use dp_workloads::generators::{DiscreteEntries, wdiscrete, wrange, wrelated};
use dp_workloads::workload::{AllRange, Prefix};
use serde::Serialize;

use crate::procfs::{Pid, cpu_seconds};

/// Queries of the random workloads (the issue's m = 1024).
pub const PEER_QUERIES: usize = 1024;

/// The workloads of the table.
pub const PEER_WORKLOADS: [&str; 5] = ["allrange", "prefix", "wrange", "wdiscrete", "wrelated"];

/// `WᵀW` of the workload `kind` over n cells (WRelated with s = n/5).
pub fn peer_gram(kind: &str, n: usize, seed: u64) -> Result<Mat<f64>> {
    let m = PEER_QUERIES;
    Ok(match kind {
        "allrange" => AllRange::new(n)?.gram(),
        "prefix" => Prefix::new(n)?.gram(),
        "wrange" => wrange(m, n, seed)?.gram(),
        "wdiscrete" => wdiscrete(m, n, DiscreteEntries::LRM, seed)?.gram(),
        "wrelated" => wrelated(m, n, (n / 5).max(1), seed)?.gram(),
        other => {
            return Err(DpError::InvalidParameter {
                name: "workload",
                reason: format!("unknown '{other}' (one of {})", PEER_WORKLOADS.join(", ")),
            });
        }
    })
}

/// One optimizer's run: seconds and recomputed objective.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Side {
    /// Wall-clock seconds of the optimization.
    pub seconds: f64,
    /// CPU seconds (user + system, every thread) of the optimization,
    /// where the platform reports them.
    pub cpu_seconds: Option<f64>,
    /// `l1_obj` or `l2_obj` of the returned strategy.
    pub objective: f64,
    /// The relative duality gap the optimizer certified (COA; `None` for
    /// HDMM and for optimizers without a certificate).
    pub certified_gap: Option<f64>,
}

/// One row of the table: ours against HDMM's (if it ran).
#[derive(Debug, Clone, Serialize)]
pub struct PeerRow {
    /// Workload name.
    pub workload: String,
    /// Domain size.
    pub n: usize,
    /// `"approx"` or `"pure"`.
    pub privacy: &'static str,
    /// Our optimizer.
    pub ours_name: &'static str,
    /// Our run.
    pub ours: Side,
    /// HDMM's optimizer.
    pub peer_name: &'static str,
    /// HDMM's run (`None` without HDMM).
    pub peer: Option<Side>,
}

impl PeerRow {
    /// HDMM's seconds over ours (> 1: we are faster).
    pub fn time_ratio(&self) -> Option<f64> {
        self.peer.map(|p| p.seconds / self.ours.seconds)
    }

    /// HDMM's CPU seconds over ours (> 1: we used less CPU).
    pub fn cpu_ratio(&self) -> Option<f64> {
        let peer = self.peer?.cpu_seconds?;
        Some(peer / self.ours.cpu_seconds?)
    }

    /// Our objective over HDMM's (< 1: our error is lower).
    pub fn objective_ratio(&self) -> Option<f64> {
        self.peer.map(|p| self.ours.objective / p.objective)
    }

    /// One cell of the side-by-side table: both times, the time ratio,
    /// the CPU-time ratio, the objective ratio (to six decimals, the
    /// precision issue 21's `≤ 1 + 1e-6` needs) and our certified gap
    /// where there is one (ours alone when HDMM did not run).
    pub fn cell(&self) -> String {
        let ours = format!("{:.2} s", self.ours.seconds);
        let cpu = self
            .cpu_ratio()
            .map_or(String::new(), |c| format!(" (CPU {c:.2}×)"));
        let gap = self
            .ours
            .certified_gap
            .map_or(String::new(), |g| format!(", certified gap {g:.1e}"));
        match (self.peer, self.time_ratio(), self.objective_ratio()) {
            (Some(p), Some(t), Some(o)) => format!(
                "{ours} vs {:.2} s — {t:.2}×{cpu}, objective ratio {o:.6}{gap}",
                p.seconds
            ),
            _ => format!(
                "{ours} (no HDMM), objective {:.6e}{gap}",
                self.ours.objective
            ),
        }
    }
}

/// The lines above the side-by-side table (issue 21's layout).
pub fn table_preamble(load: Option<f64>) -> [String; 3] {
    [
        format!(
            "time ratio = HDMM's seconds / ours (> 1: dpmm faster), CPU = the same for CPU \
             seconds; objective ratio = ours / HDMM's (< 1: dpmm lower error); load average at \
             start {}",
            load.map_or("?".into(), |l| format!("{l:.1}"))
        ),
        "| workload | n | (ε,δ): coa vs HDMM McKennaConvex | ε-DP: epsilon-default vs HDMM PIdentity |"
            .into(),
        "|---|---|---|---|".into(),
    ]
}

/// One line of the side-by-side table: workload `kind` at size `n`, with
/// the (ε,δ) and ε-DP columns from `rows` ("not run" where absent).
pub fn table_line(kind: &str, n: usize, rows: &[PeerRow]) -> String {
    let column = |model: PrivacyModel| {
        rows.iter()
            .find(|r| r.privacy == model.name())
            .map_or("not run".into(), PeerRow::cell)
    };
    format!(
        "| {kind} | {n} | {} | {} |",
        column(PrivacyModel::Approx),
        column(PrivacyModel::Pure)
    )
}

/// Runs our optimizer `name` on `gram` under `privacy`.
pub fn run_ours(gram: &Mat<f64>, privacy: PrivacyModel, name: &str) -> Result<Side> {
    let problem = Problem::from_gram(gram.clone(), privacy)?;
    let optimizer = dp_opt::by_name(name)?;
    let cpu = cpu_seconds(Pid::Current);
    let started = Instant::now();
    let result = optimizer.optimize(&problem, &mut ())?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(Side {
        seconds,
        cpu_seconds: cpu_seconds(Pid::Current).zip(cpu).map(|(b, a)| b - a),
        objective: problem.objective(result.strategy.as_ref())?,
        certified_gap: result.report.certificate.map(|c| c.relative_gap),
    })
}

/// The driver run by HDMM's Python: loads `WᵀW`, hands HDMM a square
/// root, times the template's optimization and saves its strategy.
const DRIVER: &str = r#"
import sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from hdmm import templates, matrix
G = np.load(sys.argv[2]); n = G.shape[0]
w, V = np.linalg.eigh(G)
R = (V * np.sqrt(np.clip(w, 0, None))).T
E = matrix.EkteloMatrix(R)
t = time.perf_counter()
c = time.process_time()
if sys.argv[3] == "mckenna":
    tm = templates.McKennaConvex(n)
else:
    tm = templates.PIdentity(max(n // 16, 1), n, seed=0)
tm.optimize(E)
A = tm.strategy().dense_matrix()
dt = time.perf_counter() - t
dc = time.process_time() - c
np.save(sys.argv[4], A)
print(dt, dc)
"#;

/// `PEER_PYTHON` (default `python3`) and the source directory named by
/// the environment variable `src_var`, if that Python, with the directory
/// first on its path, imports `modules`.
pub(crate) fn peer_python(src_var: &str, modules: &str) -> Option<(PathBuf, PathBuf)> {
    let src = PathBuf::from(std::env::var_os(src_var)?);
    let python = std::env::var_os("PEER_PYTHON").map_or("python3".into(), PathBuf::from);
    let probe = format!(
        "import sys; sys.path.insert(0, {:?}); import {modules}",
        src.display().to_string()
    );
    let ok = Command::new(&python)
        .args(["-c", &probe])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some((python, src))
}

/// HDMM's source and a Python able to run it.
#[derive(Debug, Clone)]
pub struct Hdmm {
    python: PathBuf,
    src: PathBuf,
}

impl Hdmm {
    /// From `HDMM_SRC` and `PEER_PYTHON` (default `python3`), if that
    /// Python imports numpy, scipy and HDMM; `None` otherwise.
    pub fn from_env() -> Option<Self> {
        let (python, src) = peer_python("HDMM_SRC", "numpy, scipy, hdmm")?;
        Some(Self { python, src })
    }

    /// Runs the Python source `script` with HDMM's source directory and
    /// `args` as its arguments, OpenBLAS on one thread (as both HDMM
    /// drivers, this table's and `hdmm-peers`', have always run it); its
    /// output, whatever its status.
    pub fn script(&self, script: &str, args: &[&std::ffi::OsStr]) -> Result<std::process::Output> {
        Command::new(&self.python)
            .args(["-c", script])
            .arg(&self.src)
            .args(args)
            .env("OPENBLAS_NUM_THREADS", "1")
            .output()
            .map_err(|e| DpError::Io(format!("cannot run {}: {e}", self.python.display())))
    }

    /// Runs HDMM's `McKennaConvex` (`mckenna`) or `PIdentity` on the Gram
    /// stored at `gram_path`; the strategy and HDMM's wall-clock and CPU
    /// seconds.
    pub fn run(
        &self,
        gram_path: &Path,
        template: &str,
        dir: &Path,
    ) -> Result<(Mat<f64>, f64, f64)> {
        let out = dir.join(format!("hdmm_{template}.npy"));
        let o = self.script(
            DRIVER,
            &[gram_path.as_os_str(), template.as_ref(), out.as_os_str()],
        )?;
        if !o.status.success() {
            return Err(DpError::Io(format!(
                "HDMM {template} failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        let text = String::from_utf8_lossy(&o.stdout);
        let times: Vec<f64> = text
            .split_whitespace()
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| DpError::Io(format!("HDMM driver printed '{}'", text.trim())))?;
        let &[seconds, cpu] = times.as_slice() else {
            return Err(DpError::Io(format!(
                "HDMM driver printed '{}'",
                text.trim()
            )));
        };
        Ok((dp_workloads::npy::read_matrix(&out)?, seconds, cpu))
    }
}

/// The rows of one workload and size for `models` ((ε,δ) and/or ε, in
/// that order); HDMM's columns are empty without `hdmm`.
pub fn measure(
    kind: &str,
    n: usize,
    models: &[PrivacyModel],
    hdmm: Option<&Hdmm>,
    dir: &Path,
) -> Result<Vec<PeerRow>> {
    let gram = peer_gram(kind, n, 20121)?;
    let gram_path = dir.join(format!("{kind}_{n}_gram.npy"));
    if hdmm.is_some() {
        dp_workloads::npy::write_matrix(&gram_path, gram.as_ref())?;
    }
    let mut rows = Vec::new();
    for (privacy, ours_name, peer_name, template) in [
        (PrivacyModel::Approx, "coa", "hdmm McKennaConvex", "mckenna"),
        (
            PrivacyModel::Pure,
            "epsilon-default",
            "hdmm PIdentity",
            "pidentity",
        ),
    ] {
        if !models.contains(&privacy) {
            continue;
        }
        let ours = run_ours(&gram, privacy, ours_name)?;
        let peer = match hdmm {
            Some(h) => {
                let (strategy, seconds, cpu) = h.run(&gram_path, template, dir)?;
                let problem = Problem::from_gram(gram.clone(), privacy)?;
                Some(Side {
                    seconds,
                    cpu_seconds: Some(cpu),
                    objective: problem.objective(strategy.as_ref())?,
                    certified_gap: None,
                })
            }
            None => None,
        };
        rows.push(PeerRow {
            workload: kind.into(),
            n,
            privacy: privacy.name(),
            ours_name,
            ours,
            peer_name,
            peer,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The table's workloads have the Gram of their definition (AllRange
    /// and Prefix against brute force on n = 6), an unknown name is an
    /// error, and a row's ratios are the quotients of its sides.
    #[test]
    fn grams_and_ratios() {
        let n = 6;
        let all = peer_gram("allrange", n, 1).unwrap();
        // (WᵀW)ᵢⱼ = number of ranges [a, b] containing i and j.
        for i in 0..n {
            for j in 0..n {
                let (lo, hi) = (i.min(j), i.max(j));
                assert_eq!(all[(i, j)], ((lo + 1) * (n - hi)) as f64);
            }
        }
        let prefix = peer_gram("prefix", n, 1).unwrap();
        assert_eq!(prefix[(0, 0)], n as f64);
        assert_eq!(prefix[(2, 4)], (n - 4) as f64);
        for kind in ["wrange", "wdiscrete", "wrelated"] {
            assert_eq!(peer_gram(kind, n, 1).unwrap().nrows(), n);
        }
        assert!(peer_gram("nope", n, 1).is_err());
        let row = PeerRow {
            workload: "x".into(),
            n,
            privacy: "pure",
            ours_name: "a",
            ours: Side {
                seconds: 2.0,
                cpu_seconds: Some(4.0),
                objective: 3.0,
                certified_gap: Some(2.5e-9),
            },
            peer_name: "b",
            peer: Some(Side {
                seconds: 8.0,
                cpu_seconds: Some(6.0),
                objective: 6.0,
                certified_gap: None,
            }),
        };
        assert_eq!(row.time_ratio(), Some(4.0));
        assert_eq!(row.cpu_ratio(), Some(1.5));
        assert_eq!(row.objective_ratio(), Some(0.5));
        assert!(
            row.cell()
                .contains("4.00× (CPU 1.50×), objective ratio 0.500000, certified gap 2.5e-9"),
            "{}",
            row.cell()
        );
    }
}
