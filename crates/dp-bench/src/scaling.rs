//! One point of `cargo xtask bench`: an optimizer's time, objective,
//! certificate (COA) or residual and rank (LRM) and peak memory at one
//! domain size n (and query count m), as a typed [`ScalingRow`].
//!
//! The command runs each point in a child process so that the peak
//! resident memory ([`crate::procfs::peak_rss_bytes`]) is that point's
//! own; a dense n×n product ([`ReferenceProduct`]) is timed in the same
//! process, so times compare across machines as ratios.

use std::time::Instant;

use dp_core::Result;
use dp_linalg::Mat;
use dp_opt::{
    PrivacyModel, Problem, StrategyOptimizer, Termination, optimizers::coa::Coa, optimizers::lrm,
};
use dp_workloads::Workload;
use serde::{Deserialize, Serialize};

use crate::regress::ReferenceProduct;

/// The optimizers the scaling benchmark measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ScalingTarget {
    /// COA (Yuan et al. 2016) on the (ε,δ) objective; reports the
    /// duality gap of its certificate.
    Coa,
    /// LRM (Yuan et al. 2012) on the ε-DP objective; reports the
    /// decomposition's rank and residual.
    Lrm,
}

impl ScalingTarget {
    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Coa => "coa",
            Self::Lrm => "lrm",
        }
    }
}

/// Workload families of the scaling benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ScalingWorkload {
    /// All ranges (implicit Gram).
    Allrange,
    /// WRange: m random ranges (explicit, seed 2016).
    Wrange,
    /// Prefix sums (implicit Gram).
    Prefix,
}

impl ScalingWorkload {
    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Allrange => "allrange",
            Self::Wrange => "wrange",
            Self::Prefix => "prefix",
        }
    }

    /// Whether the family has a query count m (only WRange).
    pub fn has_queries(self) -> bool {
        matches!(self, Self::Wrange)
    }

    /// `WᵀW` of the n-column member (m queries for WRange).
    pub fn gram(self, n: usize, m: usize) -> Result<Mat<f64>> {
        Ok(match self {
            Self::Allrange => dp_workloads::workload::AllRange::new(n)?.gram(),
            Self::Prefix => dp_workloads::workload::Prefix::new(n)?.gram(),
            Self::Wrange => dp_workloads::generators::wrange(m, n, 2016)?.gram(),
        })
    }
}

/// One measured point (one JSON object per line in the command's output;
/// the groups are flattened into it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScalingRow {
    /// Domain size.
    pub n: usize,
    /// Number of queries (WRange; as given otherwise).
    pub m: usize,
    /// rank(W), the dimension COA's dual and interior point work in.
    pub workload_rank: usize,
    /// What the optimizer returned.
    #[serde(flatten)]
    pub outcome: PointOutcome,
    /// Its certificate or decomposition, per optimizer.
    #[serde(flatten)]
    pub quality: PointQuality,
    /// Wall-clock times.
    #[serde(flatten)]
    pub times: PointTimes,
    /// Peak resident memory of the process (Linux only).
    #[serde(flatten)]
    pub memory: PointMemory,
}

/// The optimizer's result at one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointOutcome {
    /// Objective of the returned strategy.
    pub objective: f64,
    /// The SVD lower bound `(Σσᵢ(W))²/n` of the (ε,δ) objective.
    pub svd_bound: f64,
    /// Why the optimizer stopped.
    pub termination: Termination,
    /// Iterations the optimizer reports.
    pub iterations: usize,
}

/// What certifies or describes the result: one variant per optimizer, so
/// a row never carries the other optimizer's (absent) figures. In JSON the
/// variant is the `"optimizer"` key beside its fields.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "optimizer", rename_all = "lowercase")]
pub enum PointQuality {
    /// COA's certificate.
    Coa {
        /// Relative duality gap `(objective − bound)/objective` of the
        /// certificate (`None`: the run returned none).
        duality_gap: Option<f64>,
    },
    /// LRM's decomposition `W ≈ B L`.
    Lrm {
        /// Rows r of L.
        rank: usize,
        /// `‖W − BL‖_F` in the workload's own scale.
        residual: f64,
    },
}

impl PointQuality {
    /// The table's rank column (`"-"` for COA).
    fn rank_cell(&self) -> String {
        match self {
            Self::Coa { .. } => "-".into(),
            Self::Lrm { rank, .. } => rank.to_string(),
        }
    }

    /// The table's last quality column: COA's gap or LRM's residual (NaN
    /// where COA returned no certificate).
    fn figure(&self) -> f64 {
        match *self {
            Self::Coa { duality_gap } => duality_gap.unwrap_or(f64::NAN),
            Self::Lrm { residual, .. } => residual,
        }
    }
}

/// Seconds spent at one point.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointTimes {
    /// The optimizer (its own report).
    pub seconds: f64,
    /// The reference n×n product.
    pub gemm_seconds: f64,
    /// Forming `WᵀW`.
    pub gram_seconds: f64,
}

/// Peak resident memory at one point.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointMemory {
    /// Bytes (`VmHWM`).
    pub peak_rss_bytes: Option<f64>,
    /// The peak in units of one n×n `f64` matrix.
    pub peak_in_nxn_matrices: Option<f64>,
}

/// Measures `target` on the (n, m) member of `workload`; `rank` sets
/// LRM's decomposition rank (its own default when `None`).
pub fn measure_point(
    target: ScalingTarget,
    workload: ScalingWorkload,
    n: usize,
    m: usize,
    rank: Option<usize>,
) -> Result<ScalingRow> {
    // Forming WᵀW is the only step whose cost grows with m: every
    // optimizer sees the n×n Gram.
    let t = Instant::now();
    let g = workload.gram(n, m)?;
    let gram_seconds = t.elapsed().as_secs_f64();
    let problem = Problem::from_gram(g, PrivacyModel::Approx)?;
    let svd_bound = problem.svd_bound()?;
    let workload_rank = dp_linalg::gram_root(problem.gram())?.nrows();
    let mut reference = ReferenceProduct::new(n);
    let t = Instant::now();
    reference.run();
    let gemm_seconds = t.elapsed().as_secs_f64();
    drop(reference);
    let (r, quality) = match target {
        ScalingTarget::Lrm => {
            let problem = Problem::from_gram(problem.gram().to_owned(), PrivacyModel::Pure)?;
            let options = lrm::LrmOptions {
                rank,
                ..Default::default()
            };
            let r = lrm::Lrm { options }.optimize(&problem, &mut ())?;
            let diagnostic = |key: &'static str| {
                r.report
                    .diagnostics
                    .iter()
                    .find(|(name, _)| *name == key)
                    .map(|(_, v)| *v)
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| dp_core::DpError::NotConverged {
                        solver: "LRM",
                        reason: format!("its report has no finite, non-negative {key}"),
                    })
            };
            let quality = PointQuality::Lrm {
                rank: diagnostic("rank")? as usize,
                residual: diagnostic("residual")?,
            };
            (r, quality)
        }
        ScalingTarget::Coa => {
            let r = Coa::default().optimize(&problem, &mut ())?;
            let duality_gap = r.report.certificate.map(|c| c.relative_gap);
            (r, PointQuality::Coa { duality_gap })
        }
    };
    let report = &r.report;
    let peak = crate::procfs::peak_rss_bytes(crate::procfs::Pid::Current);
    Ok(ScalingRow {
        n,
        m,
        workload_rank,
        outcome: PointOutcome {
            objective: report.objective,
            svd_bound,
            termination: report.termination.clone(),
            iterations: report.iterations,
        },
        quality,
        times: PointTimes {
            seconds: report.seconds,
            gemm_seconds,
            gram_seconds,
        },
        memory: PointMemory {
            peak_rss_bytes: peak,
            peak_in_nxn_matrices: peak.map(|p| p / (8.0 * (n * n) as f64)),
        },
    })
}

/// The header of the benchmark's table; `lrm` names the residual column
/// (COA's is the duality gap).
pub fn table_header(lrm: bool) -> String {
    let gap = if lrm { "residual" } else { "gap" };
    let names = [
        "n",
        "m",
        "rank(W)",
        "r",
        "WᵀW s",
        "seconds",
        "t/gemm",
        "objective",
        gap,
        "stop",
        "peak MB",
        "peak/(n²·8)",
    ];
    let widths: [usize; 12] = [6, 6, 7, 6, 9, 9, 10, 20, 10, 14, 8, 11];
    let cells: Vec<String> = names
        .iter()
        .zip(widths)
        .map(|(h, w)| format!("{h:>w$}"))
        .collect();
    cells.join(" ")
}

impl ScalingRow {
    /// The row as a line of [`table_header`]'s table (`m` is 0 for
    /// families without a query count).
    pub fn table_line(&self, m: usize) -> String {
        let opt = |x: Option<f64>| x.unwrap_or(f64::NAN);
        let (o, q, t) = (&self.outcome, &self.quality, &self.times);
        format!(
            "{:>6} {:>6} {:>7} {:>6} {:>9.2} {:>9.2} {:>10.1} {:>20.10e} {:>10.2e} {:>14} {:>8.0} {:>11.1}",
            self.n,
            if m == 0 { "-".into() } else { m.to_string() },
            self.workload_rank,
            q.rank_cell(),
            t.gram_seconds,
            t.seconds,
            t.seconds / t.gemm_seconds,
            o.objective,
            q.figure(),
            o.termination.kind(),
            opt(self.memory.peak_rss_bytes) / 1e6,
            opt(self.memory.peak_in_nxn_matrices),
        )
    }
}

/// Runs one point in a child process of `exe` (`exe bench TARGET --child
/// …`, which calls [`measure_point`] and prints the row as JSON), so that
/// the peak memory measured is that point's own.
pub fn measure_in_child(
    exe: &std::path::Path,
    target: ScalingTarget,
    workload: ScalingWorkload,
    (n, m): (usize, usize),
    rank: Option<usize>,
) -> Result<ScalingRow> {
    use dp_core::DpError;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["bench", target.name(), "--child"])
        .args(["--workload", workload.name()])
        .args(["--sizes", &n.to_string(), "--m", &m.max(1).to_string()]);
    if let Some(r) = rank {
        cmd.args(["--ranks", &r.to_string()]);
    }
    let out = cmd.output().map_err(|e| DpError::Io(e.to_string()))?;
    if !out.status.success() {
        return Err(DpError::Io(format!(
            "child for n = {n} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| DpError::Io(format!("child output: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_point_reports_coa_certificate_and_lrm_rank() {
        let coa = measure_point(ScalingTarget::Coa, ScalingWorkload::Prefix, 16, 1, None)
            .unwrap_or_else(|e| panic!("{e}"));
        // Prefix(n) has full rank n; COA minimizes l2_obj, which the SVD
        // bound (Σσᵢ(W))²/n bounds from below for every strategy.
        assert_eq!(coa.workload_rank, 16);
        assert!(coa.outcome.objective >= coa.outcome.svd_bound * (1.0 - 1e-9));
        // Prefix has full rank, so COA's convergence promise is gap <= 1e-6
        // (no floor for completed directions).
        assert!(coa.outcome.termination.converged());
        assert!(matches!(coa.quality, PointQuality::Coa { duality_gap: Some(g) } if g <= 1e-6));
        // The row the child prints is the row the parent reads.
        let text = serde_json::to_string(&coa).unwrap_or_else(|e| panic!("{e}"));
        assert!(text.contains("\"optimizer\":\"coa\",\"duality_gap\":"));
        assert!(!text.contains("\"quality\"") && !text.contains("\"rank\""));
        let back: ScalingRow = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, coa);
        let lrm = measure_point(ScalingTarget::Lrm, ScalingWorkload::Wrange, 16, 8, Some(4))
            .unwrap_or_else(|e| panic!("{e}"));
        // 8 ranges on 16 cells: rank(W) ≤ 8.
        assert!(lrm.workload_rank <= 8);
        // The decomposition has the rank asked for, and no rank-4 B L is
        // nearer W than its best rank-4 approximation (Eckart–Young):
        // ‖W − BL‖_F² ≥ the sum of all but the 4 largest eigenvalues of WᵀW.
        let gram = ScalingWorkload::Wrange
            .gram(16, 8)
            .unwrap_or_else(|e| panic!("{e}"));
        let (_, ascending) =
            dp_linalg::gram_root_and_spectrum(gram.as_ref()).unwrap_or_else(|e| panic!("{e}"));
        let tail: f64 = ascending[..ascending.len() - 4].iter().sum();
        assert!(tail > 1e-3, "the test needs rank(W) > 4");
        let PointQuality::Lrm { rank, residual } = lrm.quality else {
            panic!("an LRM point reports LRM's quality: {:?}", lrm.quality)
        };
        assert_eq!(rank, 4);
        assert!(
            residual * residual >= tail * (1.0 - 1e-9),
            "{residual}² < {tail}"
        );
        let text = serde_json::to_string(&lrm).unwrap_or_else(|e| panic!("{e}"));
        assert!(text.contains("\"optimizer\":\"lrm\",\"rank\":4,\"residual\":"));
        let back: ScalingRow = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, lrm);
    }
}
