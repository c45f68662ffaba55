//! HDMM (McKenna et al. VLDB 2018), §8: least-squares reconstruction time
//! against the number of cells (`reconstruction-scaling`; issue 18's bar:
//! 10⁹ cells in ≤ 15 s, memory O(cells)).
//!
//! The workload is `Prefix(10)^⊗d` (10^d cells), planned by OPT_⊗ (one
//! Kronecker term, square factors `Fᵢ`). Synthetic counts `x` are measured
//! without noise, `y = (⊗ Fᵢ) x`, in place; then, each timed: the least
//! squares `x̂ = (⊗ Fᵢ⁺) y` in place, checked against `x` (the strategy has
//! full column rank, so noiseless least squares returns `x`); the answers
//! `W x̂ = (⊗ Wᵢ) x̂` in place; and the answers straight from a fresh
//! measurement, `(⊗ Wᵢ Fᵢ⁺) y`, as [`dp_plan::reconstruct`] computes
//! them. One vector of the domain's size is held; the per-query variances
//! `v Πᵢ ‖(Wᵢ Fᵢ⁺)_{rᵢ}‖²` are kept as their factors, and their sum is
//! checked against the plan's objective.
//!
//! Times are wall-clock and CPU seconds of one run (shared cores); peak
//! memory is the process's `VmHWM` after the point (monotone, sizes
//! increase).

use std::time::Instant;

use dp_core::Result;
use dp_linalg::{Mat, Par, pseudo_inverse};
use dp_opt::PrivacyModel;
use dp_plan::reconstruct_kron::kron_apply_in_place;
use dp_plan::{PlanOptions, plan_strategy};
use dp_workloads::domain::Domain;
use dp_workloads::structured::{Factor, Queries, QueryGroup, StructuredWorkload};

use super::hdmm::peak_memory_mib;
use crate::procfs::{self, Pid};
use crate::{
    About, Experiment, ExperimentResult, Panel, Plot, Point, PointSetting, Progress, RunConfig,
    Series,
};

/// `reconstruction-scaling`.
pub struct Scaling;

const ABOUT: About = About {
    name: "reconstruction-scaling",
    reproduces: "HDMM paper, §8 scalability: least-squares reconstruction time against cells (Kronecker strategy, up to 10⁹ cells)",
};

/// This process's CPU seconds (user + system; 0 where `/proc` is absent).
fn cpu_seconds() -> f64 {
    procfs::cpu_seconds(Pid::Current).unwrap_or(0.0)
}

/// Synthetic count of cell `i` (0 to 6).
fn count(i: usize) -> f64 {
    (i.wrapping_mul(2_654_435_761) % 7) as f64
}

/// Runs `f` and returns its (wall, CPU) seconds.
fn timed(f: impl FnOnce() -> Result<()>) -> Result<(f64, f64)> {
    let (start, cpu) = (Instant::now(), cpu_seconds());
    f()?;
    Ok((start.elapsed().as_secs_f64(), cpu_seconds() - cpu))
}

/// One point: times of the least squares, the answers and the fused
/// answers, the least squares' largest error, and the variance check.
struct Row {
    cells: f64,
    least_squares: (f64, f64),
    answers: (f64, f64),
    fused: (f64, f64),
    ls_error: f64,
    variance_gap: f64,
}

fn measure(d: usize) -> Result<Row> {
    let names: Vec<String> = (0..d).map(|i| format!("a{i}")).collect();
    let pairs: Vec<(&str, usize)> = names.iter().map(|s| (s.as_str(), 10)).collect();
    let w = StructuredWorkload::new(
        Domain::from_pairs(&pairs)?,
        vec![QueryGroup {
            label: "prefix^d".into(),
            weight: 1.0,
            queries: Queries::Kron(vec![Factor::Prefix(10); d]),
        }],
    )?;
    let plan = plan_strategy(&w, PrivacyModel::Approx, &PlanOptions::default())?;
    let strategy = &plan.strategy;
    let not_square_kron = || dp_core::DpError::InvalidParameter {
        name: "reconstruction-scaling",
        reason: "the plan is not one Kronecker product of square factors".into(),
    };
    let [term] = strategy.terms.as_slice() else {
        return Err(not_square_kron());
    };
    let factors: Vec<Mat<f64>> = (0..d).map(|i| strategy.factor(term, i)).collect();
    if factors.iter().any(|f| f.nrows() != f.ncols()) {
        return Err(not_square_kron());
    }
    let pinvs = factors
        .iter()
        .map(|f| pseudo_inverse(f.as_ref(), None))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let wf = Factor::Prefix(10).explicit()?;
    let fused: Vec<Mat<f64>> = pinvs
        .iter()
        .map(|p| dp_linalg::gemm(wf.as_ref(), p.as_ref(), Par::Seq))
        .collect();
    // Σ variances at v = Δ₂(A)² is the plan's l2_obj: v Πᵢ ‖Wᵢ Fᵢ⁺‖²_F.
    let delta2: f64 = factors
        .iter()
        .map(|f| dp_core::sensitivity_l2(f.as_ref()))
        .product::<Result<f64>>()?;
    let total: f64 = fused
        .iter()
        .map(|q| dp_linalg::frobenius_norm(q.as_ref()).powi(2))
        .product::<f64>()
        * delta2
        * delta2;
    let variance_gap = (total - plan.objective).abs() / plan.objective;
    let cells = 10usize.pow(d as u32);
    let a: Vec<&Mat<f64>> = factors.iter().collect();
    let mut v: Vec<f64> = (0..cells).map(count).collect();
    kron_apply_in_place(&a, &mut v, Par::rayon(0))?;
    let p: Vec<&Mat<f64>> = pinvs.iter().collect();
    let least_squares = timed(|| kron_apply_in_place(&p, &mut v, Par::rayon(0)))?;
    let scale = 6.0;
    let ls_error = v
        .iter()
        .enumerate()
        .map(|(i, x)| (x - count(i)).abs() / scale)
        .fold(0.0, f64::max);
    // Independent truths, checked at every point (the smoke test too):
    // noiseless least squares with a full-column-rank strategy returns x,
    // and Σ variances equals the plan's l2_obj.
    if !(ls_error <= 1e-9 && variance_gap <= 1e-9) {
        return Err(dp_core::DpError::NotConverged {
            solver: "reconstruction-scaling",
            reason: format!(
                "at {cells} cells: least squares off x by {ls_error:e} (relative), Σ variances off l2_obj by {variance_gap:e}"
            ),
        });
    }
    let ws: Vec<&Mat<f64>> = vec![&wf; d];
    let answers = timed(|| kron_apply_in_place(&ws, &mut v, Par::rayon(0)))?;
    v.iter_mut().enumerate().for_each(|(i, x)| *x = count(i));
    kron_apply_in_place(&a, &mut v, Par::rayon(0))?;
    let q: Vec<&Mat<f64>> = fused.iter().collect();
    let fused = timed(|| kron_apply_in_place(&q, &mut v, Par::rayon(0)))?;
    Ok(Row {
        cells: cells as f64,
        least_squares,
        answers,
        fused,
        ls_error,
        variance_gap,
    })
}

fn point(row: &Row, what: &str, seconds: (f64, f64)) -> Point {
    let setting = PointSetting {
        parameter: "cells",
        epsilon: 1.0,
        delta: None,
        seed: 0,
        repetitions: 0,
    };
    setting
        .point(what, "Prefix(10)^⊗d", "synthetic", row.cells)
        .with_metric(format!(
            "wall seconds of one run ({:.2} CPU s); peak memory {:.0} MiB",
            seconds.1,
            peak_memory_mib().unwrap_or(f64::NAN)
        ))
        .with_seconds(seconds.0)
}

impl Experiment for Scaling {
    fn about(&self) -> About {
        ABOUT
    }

    fn run(&self, cfg: &RunConfig, progress: &mut dyn Progress) -> Result<ExperimentResult> {
        let dims: Vec<usize> = cfg.by_scale(vec![3, 4], vec![5, 6, 7, 8], vec![6, 7, 8, 9]);
        progress.start(dims.len() as u64);
        let mut summary = String::from(
            "Prefix(10)^⊗d planned by OPT_⊗ (one Kronecker term of square factors), measured without noise on synthetic counts; \
             wall (CPU) seconds of one run on shared cores, in place on one vector of the domain's size.\n\n\
             | cells | least squares x̂ = ⊗Fᵢ⁺y | answers ⊗Wᵢ x̂ | answers ⊗(WᵢFᵢ⁺) y | max abs(x̂ − x) / 6 | Σ variances vs l2_obj | peak MiB |\n|---|---|---|---|---|---|---|\n",
        );
        let (mut points, mut series) = (Vec::new(), vec![Vec::new(), Vec::new(), Vec::new()]);
        for d in dims {
            let row = measure(d)?;
            progress.step(&format!("10^{d} cells: {:.2} s", row.least_squares.0));
            let fmt = |t: (f64, f64)| format!("{:.2} ({:.2})", t.0, t.1);
            summary += &format!(
                "| 1e{d} | {} | {} | {} | {:.1e} | {:.1e} | {:.0} |\n",
                fmt(row.least_squares),
                fmt(row.answers),
                fmt(row.fused),
                row.ls_error,
                row.variance_gap,
                peak_memory_mib().unwrap_or(f64::NAN)
            );
            let parts = [
                ("least squares", row.least_squares),
                ("answers", row.answers),
                ("answers from y", row.fused),
            ];
            for (k, (what, t)) in parts.into_iter().enumerate() {
                series[k].push((row.cells, t.0.max(1e-4), None));
                points.push(point(&row, what, t));
            }
        }
        summary += &format!(
            "\n**HDMM's published figure (its §8, its machine):** least squares on 10⁹ cells 14–62 s. \
             Load average at the end of this run: {}.\n",
            procfs::load_averages_text()
        );
        let names = ["least squares", "answers", "answers from y"];
        let series = series
            .into_iter()
            .zip(names)
            .enumerate()
            .map(|(color, (points, name))| Series {
                name: name.into(),
                points,
                markers_only: false,
                color,
            })
            .collect();
        Ok(ExperimentResult {
            points,
            plots: vec![Plot {
                file_stem: "time".into(),
                title: "reconstruction time".into(),
                x_label: "cells".into(),
                y_label: "seconds".into(),
                log_x: true,
                log_y: true,
                panels: vec![Panel {
                    title: "Prefix(10)^⊗d".into(),
                    series,
                }],
            }],
            summary,
        })
    }
}
