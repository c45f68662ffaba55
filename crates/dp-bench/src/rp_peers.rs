//! `cargo xtask bench rp-peers`: dpmm beside ResidualPlanner (Xiao, He,
//! Zhang, Kifer, NeurIPS 2023; dkifer/ResidualPlanner, GPL-3.0) in one run,
//! on ResidualPlanner's own synthetic headline workload: every marginal of
//! 0..=k attributes on d attributes of n values, planned for the sum of
//! the queries' variances and for the largest one.
//!
//! ResidualPlanner is never vendored: when `RP_SRC` names its
//! `residual_planner/selection_only` directory and a Python with numpy,
//! scipy, pandas and cvxpy is found (`PEER_PYTHON`, else `python3`), a
//! short driver of ours calls its public entry point (`workload_allkway`,
//! then `get_noise_level`) in a child process; without a Gurobi licence
//! the max-variance program goes to cvxpy's CLARABEL. Its sum of
//! variances at privacy cost 1 (ρ = 1/2) equals dpmm's `l2_obj`, and its
//! max-variance objective dpmm's `max_variance`, so the objectives
//! compare directly. Both times cover building the workload and planning,
//! not starting the process or importing modules; ours runs in this
//! process.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use dp_core::{DpError, Result};
use dp_opt::PrivacyModel;
use dp_plan::{PlanObjective, PlanOptions, plan_strategy};
use serde::Serialize;

/// The attribute counts of the table.
pub const RP_DIMENSIONS: [usize; 4] = [10, 20, 50, 100];

/// The attribute count of the max-variance row past the peer (its paper
/// reports d = 200 killed after more than an hour), dpmm alone.
pub const BEYOND_DIMENSION: usize = 200;

/// The driver run by ResidualPlanner's Python: argv = source directory,
/// n, d, k, objective; prints seconds and objective.
const DRIVER: &str = r#"
import sys, time
sys.path.insert(0, sys.argv[1])
from workload import workload_allkway
n, d, k, objective = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
if objective == "maxvar":
    import cvxpy as cp
    solve = cp.Problem.solve
    cp.Problem.solve = lambda self, *a, **kw: solve(self, *a, **{"solver": cp.CLARABEL, **kw})
t = time.perf_counter()
system, _ = workload_allkway(n, d, k, choice=objective)
if objective == "sumvar":
    value = float(system.get_noise_level())
else:
    value = float(system.get_noise_level(solver="cvxpy"))
print(time.perf_counter() - t, value)
"#;

/// ResidualPlanner's source and a Python able to run it.
#[derive(Debug, Clone)]
pub struct ResidualPlanner {
    python: PathBuf,
    src: PathBuf,
}

impl ResidualPlanner {
    /// From `RP_SRC` and `PEER_PYTHON` (default `python3`), if that Python
    /// imports numpy, scipy, pandas, cvxpy and ResidualPlanner's
    /// `workload` module; `None` otherwise.
    pub fn from_env() -> Option<Self> {
        let (python, src) =
            crate::peers::peer_python("RP_SRC", "numpy, scipy, pandas, cvxpy, workload")?;
        Some(Self { python, src })
    }

    /// Plans the workload of `n`, `d`, `k` for `objective` (`sumvar` or
    /// `maxvar`): ResidualPlanner's seconds and objective.
    pub fn run(&self, n: usize, d: usize, k: usize, objective: &str) -> Result<(f64, f64)> {
        let o = Command::new(&self.python)
            .args(["-c", DRIVER])
            .arg(&self.src)
            .args([n.to_string(), d.to_string(), k.to_string()])
            .arg(objective)
            .env("OPENBLAS_NUM_THREADS", "1")
            .output()
            .map_err(|e| DpError::Io(format!("cannot run {}: {e}", self.python.display())))?;
        let text = String::from_utf8_lossy(&o.stdout);
        let fields: Vec<f64> = text
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        match (o.status.success(), fields.as_slice()) {
            (true, &[seconds, value]) => Ok((seconds, value)),
            _ => Err(DpError::Io(format!(
                "ResidualPlanner {objective} at d = {d} failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ))),
        }
    }
}

/// One row: a workload and objective, both sides.
#[derive(Debug, Clone, Serialize)]
pub struct RpRow {
    /// Values per attribute.
    pub n: usize,
    /// Attributes.
    pub d: usize,
    /// Largest marginal size.
    pub k: usize,
    /// `sumvar` or `maxvar`.
    pub objective: &'static str,
    /// Marginals in the workload.
    pub marginals: usize,
    /// ResidualPlanner's seconds and objective, when it ran.
    pub rp: Option<(f64, f64)>,
    /// dpmm's seconds (building the workload and planning).
    pub seconds: f64,
    /// dpmm's objective.
    pub value: f64,
    /// dpmm's certified relative gap.
    pub gap: Option<f64>,
    /// For the max-variance objective, the optimum by the symmetry
    /// reduction ([`dp_plan::max_variance::symmetric_all_k_way_optimum`]),
    /// an independent check of dpmm's (and the only one past the peer).
    pub reduced: Option<f64>,
    /// The peak resident memory of dpmm's planning, bytes (the process's
    /// peak reset before it starts; `None` where that is refused).
    pub peak_rss_bytes: Option<f64>,
}

impl RpRow {
    /// ResidualPlanner's time over ours.
    pub fn time_ratio(&self) -> Option<f64> {
        self.rp.map(|(s, _)| s / self.seconds)
    }

    /// Our objective over ResidualPlanner's.
    pub fn objective_ratio(&self) -> Option<f64> {
        self.rp.map(|(_, v)| self.value / v)
    }
}

/// The spec of every 0..=k-way marginal on `d` attributes of `n` values.
fn spec(n: usize, d: usize, k: usize) -> String {
    let domain: Vec<String> = (0..d)
        .map(|i| format!(r#"{{"name": "a{i}", "size": {n}}}"#))
        .collect();
    let queries: Vec<String> = (0..=k)
        .map(|j| format!(r#"{{"marginals": {{"k": {j}}}}}"#))
        .collect();
    format!(
        r#"{{"domain": [{}], "queries": [{}]}}"#,
        domain.join(", "),
        queries.join(", ")
    )
}

/// Plans the workload of `n`, `d`, `k` for `objective` with dpmm (and
/// ResidualPlanner when given).
pub fn measure(
    n: usize,
    d: usize,
    k: usize,
    objective: &'static str,
    rp: Option<&ResidualPlanner>,
) -> Result<RpRow> {
    let kind = match objective {
        "sumvar" => PlanObjective::TotalVariance,
        "maxvar" => PlanObjective::MaxVariance,
        other => {
            return Err(DpError::InvalidParameter {
                name: "objective",
                reason: format!("'{other}' (sumvar or maxvar)"),
            });
        }
    };
    let rp = rp.map(|r| r.run(n, d, k, objective)).transpose()?;
    let text = spec(n, d, k);
    let reset = crate::procfs::reset_peak_rss();
    let started = Instant::now();
    let workload = dp_workloads::spec::parse_spec(&text, std::path::Path::new("."))?;
    let options = PlanOptions {
        objective: kind,
        ..PlanOptions::default()
    };
    let plan = plan_strategy(&workload, PrivacyModel::Approx, &options)?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(RpRow {
        n,
        d,
        k,
        objective,
        marginals: (0..=k.min(d))
            .map(|j| (0..j).fold(1usize, |c, i| c * (d - i) / (i + 1)))
            .sum(),
        rp,
        seconds,
        value: plan.objective,
        gap: plan.certificate.map(|c| c.relative_gap),
        reduced: match kind {
            PlanObjective::MaxVariance => {
                Some(dp_plan::max_variance::symmetric_all_k_way_optimum(d, n, k)?)
            }
            PlanObjective::TotalVariance => None,
        },
        peak_rss_bytes: reset
            .then(|| crate::procfs::peak_rss_bytes(crate::procfs::Pid::Current))
            .flatten(),
    })
}

/// Every answer of the sum-of-variances plan reconstructed with its exact
/// variance, as a release does after measuring.
#[derive(Debug, Clone, Serialize)]
pub struct ReconstructionRow {
    /// Attributes.
    pub d: usize,
    /// Answers reconstructed (every cell of every marginal).
    pub answers: usize,
    /// Strategy rows measured.
    pub measurements: usize,
    /// Seconds to quantize the strategy as the kernel does and prepare
    /// the reconstruction (checks, pseudo-inverses, every variance).
    pub prepare_seconds: f64,
    /// Seconds to reconstruct every answer from the measured values.
    pub run_seconds: f64,
    /// The peak resident memory of planning and reconstructing, bytes.
    pub peak_rss_bytes: Option<f64>,
}

/// Plans every 0..=k-way marginal on `d` attributes of `n` values for the
/// sum of variances, then reconstructs every answer and its variance from
/// synthetic measured values (the work does not depend on them; a
/// release's come from the data).
pub fn reconstruct_all(n: usize, d: usize, k: usize) -> Result<ReconstructionRow> {
    let reset = crate::procfs::reset_peak_rss();
    let workload = dp_workloads::spec::parse_spec(&spec(n, d, k), std::path::Path::new("."))?;
    let plan = plan_strategy(&workload, PrivacyModel::Approx, &PlanOptions::default())?;
    let started = Instant::now();
    let kernel =
        dp_core::kernel::MarginalStrategy::new(plan.strategy.shape.clone(), &plan.strategy.terms)?;
    let measured = kernel.measured_strategy();
    let reconstructor = dp_plan::reconstruct::Reconstructor::new(&workload, measured)?;
    let prepare_seconds = started.elapsed().as_secs_f64();
    let measurements: usize = measured
        .terms
        .iter()
        .map(|t| t.factors.iter().map(|f| f.nrows()).product::<usize>())
        .sum();
    // Deterministic values in (−100, 100) (splitmix64 of the row).
    let values: Vec<f64> = (0..measurements as u64)
        .map(|i| {
            let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 53) as f64 * 200.0 - 100.0
        })
        .collect();
    let started = Instant::now();
    let r = reconstructor.run(&workload, measured, &values, 1.0)?;
    let run_seconds = started.elapsed().as_secs_f64();
    Ok(ReconstructionRow {
        d,
        answers: r.answers.len(),
        measurements,
        prepare_seconds,
        run_seconds,
        peak_rss_bytes: reset
            .then(|| crate::procfs::peak_rss_bytes(crate::procfs::Pid::Current))
            .flatten(),
    })
}

/// The reconstruction table's header lines.
pub fn reconstruction_preamble() -> [String; 3] {
    [
        "every answer and its exact variance from the sum-of-variances plan (synthetic measured values), dpmm alone:".into(),
        "| d | answers | measurements | prepare s | reconstruct s | peak RSS MiB |".into(),
        "|---|---|---|---|---|---|".into(),
    ]
}

/// One row of the reconstruction table.
pub fn reconstruction_line(r: &ReconstructionRow) -> String {
    format!(
        "| {} | {} | {} | {:.3} | {:.3} | {} |",
        r.d,
        r.answers,
        r.measurements,
        r.prepare_seconds,
        r.run_seconds,
        r.peak_rss_bytes
            .map_or("–".into(), |b| format!("{:.0}", b / (1024.0 * 1024.0)))
    )
}

/// The table's header lines.
pub fn table_preamble(load: Option<f64>, with_rp: bool) -> [String; 3] {
    let load = load.map_or("?".into(), |l| format!("{l:.1}"));
    [
        format!(
            "every 0..=k-way marginal on d attributes of n values, (ε,δ) plans; ResidualPlanner {}; load average {load}",
            if with_rp { "run as a peer" } else { "not found (set RP_SRC)" }
        ),
        "| d | objective | ResidualPlanner s | dpmm s | time ratio RP/dpmm | RP objective | dpmm objective | ratio dpmm/RP | dpmm certified gap | dpmm/symmetry-reduced optimum − 1 | dpmm peak RSS MiB |".into(),
        "|---|---|---|---|---|---|---|---|---|---|---|".into(),
    ]
}

/// One row of the table.
pub fn table_line(r: &RpRow) -> String {
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("–".into(), f);
    format!(
        "| {} | {} | {} | {:.3} | {} | {} | {:.7e} | {} | {} | {} | {} |",
        r.d,
        r.objective,
        opt(r.rp.map(|p| p.0), &|s| format!("{s:.3}")),
        r.seconds,
        opt(r.time_ratio(), &|x| format!("{x:.1}")),
        opt(r.rp.map(|p| p.1), &|v| format!("{v:.7e}")),
        r.value,
        opt(r.objective_ratio(), &|x| format!("{x:.8}")),
        opt(r.gap, &|g| format!("{g:.1e}")),
        opt(r.reduced, &|v| format!("{:.1e}", r.value / v - 1.0)),
        opt(r.peak_rss_bytes, &|b| format!(
            "{:.0}",
            b / (1024.0 * 1024.0)
        )),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Without the peer, ours alone: the sum-of-variances plan of every
    /// 0..=2-way marginal on 3 attributes of 3 values reaches the SVD
    /// bound of the dense workload (a marginal workload attains it), and
    /// the max-variance plan is certified.
    #[test]
    fn ours_alone_reaches_the_svd_bound_and_reports_no_peer() {
        let row = measure(3, 3, 2, "sumvar", None).unwrap();
        assert!(row.rp.is_none() && row.time_ratio().is_none());
        assert_eq!(row.marginals, 1 + 3 + 3);
        let w = dp_workloads::spec::parse_spec(&spec(3, 3, 2), std::path::Path::new("."))
            .unwrap()
            .dense_matrix()
            .unwrap();
        let bound = dp_core::accuracy::svd_lower_bound(w.as_ref()).unwrap();
        assert!(
            (row.value - bound).abs() <= 1e-9 * bound,
            "{} vs {bound}",
            row.value
        );
        let max = measure(3, 3, 2, "maxvar", None).unwrap();
        assert!(max.gap.unwrap() <= 1e-7 && max.value < row.value, "{max:?}");
        assert!(
            (max.value / max.reduced.unwrap() - 1.0).abs() <= 1e-7,
            "{max:?}"
        );
        assert!(row.reduced.is_none());
        let line = table_line(&row);
        assert!(line.starts_with("| 3 | sumvar | – |"), "{line}");
        assert!(measure(3, 3, 2, "median", None).is_err());
    }

    /// Every answer of all 0..=2-way marginals on 4 attributes of 3
    /// values (1 + 4·3 + 6·9 cells) from one measurement per residual
    /// basis row (1 + 4·2 + 6·4), and the table line says so.
    #[test]
    fn reconstruction_counts_every_cell_and_every_measurement() {
        let row = reconstruct_all(3, 4, 2).unwrap();
        assert_eq!((row.answers, row.measurements), (67, 33));
        assert!(reconstruction_line(&row).starts_with("| 4 | 67 | 33 |"));
    }
}
