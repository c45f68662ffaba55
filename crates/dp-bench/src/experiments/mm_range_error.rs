//! Matrix mechanism paper, Theorem 6.30: maximum and average error of
//! I_n, H_n and Y_n on all range queries as n grows — Θ(log³ n) for H_n
//! and Y_n, Θ(n) for I_n — computed in closed form for every range and
//! measured by releasing all ranges of a real histogram.

use dp_core::{MatrixMechanism, PrivacyBudget, Result, sensitivity_l1};
use dp_linalg::{Cholesky, Mat};
use dp_workloads::strategies::{hierarchical, identity, wavelet};
use dp_workloads::workload::AllRange;

use super::common::{histogram, measure_per_query};
use crate::stats::fitted_exponent;
use crate::{About, Experiment, ExperimentResult, Panel, Plot, Point, Progress, RunConfig, Series};

/// Closed-form average, closed-form max, measured mean, CI low, CI high.
#[derive(Debug, Clone, Copy)]
struct Row(f64, f64, f64, f64, f64);

/// Picks a plotted value (and error bar) from a row.
type Pick = fn(&Row) -> (f64, Option<(f64, f64)>);

/// `mm-range-error`.
pub struct RangeErrorGrowth;

const EPSILON: f64 = 1.0;
const DATASET: &str = "SEARCHLOGS";

/// Average and maximum over all ranges of `w (AᵀA)⁻¹ wᵀ`, from 2-D prefix
/// sums of the profile (O(n²) for all n(n+1)/2 ranges).
fn profile_range_stats(strategy: &Mat<f64>) -> Result<(f64, f64)> {
    let n = strategy.ncols();
    let chol =
        Cholesky::factor(dp_linalg::gram(strategy.as_ref(), dp_linalg::Par::rayon(0)).as_ref())?;
    let profile = chol.inverse();
    let mut p = vec![0.0; (n + 1) * (n + 1)];
    for i in 0..n {
        for j in 0..n {
            p[(i + 1) * (n + 1) + j + 1] =
                profile[(i, j)] + p[i * (n + 1) + j + 1] + p[(i + 1) * (n + 1) + j]
                    - p[i * (n + 1) + j];
        }
    }
    let at = |i: usize, j: usize| p[i * (n + 1) + j];
    let (mut sum, mut max) = (0.0, 0.0_f64);
    for a in 0..n {
        for b in a..n {
            let e = at(b + 1, b + 1) - at(a, b + 1) - at(b + 1, a) + at(a, a);
            sum += e;
            max = max.max(e);
        }
    }
    Ok((sum / (n * (n + 1) / 2) as f64, max))
}

const ABOUT: About = About {
    name: "mm-range-error",
    reproduces: "Matrix mechanism paper (Li et al.), Theorem 6.30: max and total error of I_n, H_n, Y_n on all range queries",
};

impl Experiment for RangeErrorGrowth {
    fn about(&self) -> About {
        ABOUT
    }

    fn run(&self, cfg: &RunConfig, progress: &mut dyn Progress) -> Result<ExperimentResult> {
        let max_k = cfg.by_scale(6, 10, 12);
        let ks: Vec<usize> = (4..=max_k).collect();
        let reps = cfg.repetitions.unwrap_or(cfg.by_scale(20, 20, 50));
        let budget = PrivacyBudget::pure(EPSILON)?;
        let mut rng = dp_core::experiments::SeededSession::unlimited(cfg.seed);
        let names = ["I_n (LM)", "H_n (HM)", "Y_n (WM)"];
        let mut points = Vec::new();
        // [strategy][k] → (avg expected, max expected, measured mean, ci)
        let mut rows: Vec<Vec<Row>> = vec![Vec::new(); 3];
        let mut dataset_used = String::new();
        progress.start((ks.len() * 3) as u64);
        for &k in &ks {
            let n = 1usize << k;
            let hist = histogram(DATASET, n, cfg, progress)?;
            dataset_used = hist.name.split('@').next().unwrap_or(DATASET).to_string();
            let workload = AllRange::new(n)?;
            for (s, name) in names.iter().enumerate() {
                let start = std::time::Instant::now();
                let strategy = match s {
                    0 => identity(n)?,
                    1 => hierarchical(n, 2)?,
                    _ => wavelet(n)?,
                };
                let delta = sensitivity_l1(strategy.as_ref())?;
                let scale = 2.0 * delta * delta / (EPSILON * EPSILON);
                let (avg, max) = profile_range_stats(&strategy)?;
                let mech = MatrixMechanism::new(strategy.as_ref(), budget)?;
                let measured = measure_per_query(&mech, &workload, &hist.counts, reps, &mut rng)?;
                rows[s].push(Row(
                    scale * avg,
                    scale * max,
                    measured.mean,
                    measured.low(),
                    measured.high(),
                ));
                points.push(Point {
                    mechanism: name.to_string(),
                    workload: format!("AllRange({n})"),
                    dataset: hist.name.clone(),
                    parameter: "n".into(),
                    value: n as f64,
                    epsilon: EPSILON,
                    delta: None,
                    seed: cfg.seed,
                    repetitions: reps,
                    mean_squared_error: Some(measured.mean),
                    ci95_low: Some(measured.low()),
                    ci95_high: Some(measured.high()),
                    expected_squared_error: Some(scale * avg),
                    metric: format!(
                        "average squared error per range query (max over ranges, closed form: {:.6e})",
                        scale * max
                    ),
                    seconds: start.elapsed().as_secs_f64(),
                });
                progress.step(&format!("n = {n}, {name}"));
            }
        }
        let ns: Vec<f64> = ks.iter().map(|&k| (1usize << k) as f64).collect();
        let logs: Vec<f64> = ks.iter().map(|&k| (k + 1) as f64).collect();
        let mut summary = String::from(
            "Error is the squared error of one range query at ε = 1 (Laplace noise, variance 2Δ²/ε² per strategy row), \
             averaged over all n(n+1)/2 ranges (\"average\") or the largest over them (\"max\"); the paper's TotalError is m × average. \
             Closed forms come from the error profile (AᵀA)⁻¹; the measured column releases all ranges of the ",
        );
        summary += &format!(
            "{dataset_used} histogram (merged to n) {reps} times per point, mean with a 95% confidence interval.\n\n"
        );
        summary += "| strategy | paper: MaxError | paper: TotalError/m | measured growth of average | measured growth of max | closed form inside the measured 95% CI |\n|---|---|---|---|---|---|\n";
        for (s, name) in names.iter().enumerate() {
            let avg: Vec<f64> = rows[s].iter().map(|r| r.0).collect();
            let max: Vec<f64> = rows[s].iter().map(|r| r.1).collect();
            let inside = rows[s].iter().filter(|r| r.3 <= r.0 && r.0 <= r.4).count();
            let (claim, growth_avg, growth_max) = if s == 0 {
                (
                    "Θ(n/ε²)",
                    format!("n^{:.2}", fitted_exponent(&ns, &avg)),
                    format!("n^{:.2}", fitted_exponent(&ns, &max)),
                )
            } else {
                (
                    "Θ(log³n/ε²)",
                    format!("(log₂n+1)^{:.2}", fitted_exponent(&logs, &avg)),
                    format!("(log₂n+1)^{:.2}", fitted_exponent(&logs, &max)),
                )
            };
            summary += &format!(
                "| {name} | {claim} | {claim} | {growth_avg} | {growth_max} | {inside}/{} |\n",
                rows[s].len()
            );
        }
        summary += "\nPer point (closed-form average, closed-form max, measured average [95% CI]):\n\n| n | strategy | average | max | measured |\n|---|---|---|---|---|\n";
        for (i, &k) in ks.iter().enumerate() {
            for (s, name) in names.iter().enumerate() {
                let r = rows[s][i];
                summary += &format!(
                    "| {} | {name} | {:.4} | {:.4} | {:.4} [{:.4}, {:.4}] |\n",
                    1usize << k,
                    r.0,
                    r.1,
                    r.2,
                    r.3,
                    r.4
                );
            }
        }
        summary += "\nAgreement with the paper: the fitted exponents are the slopes of log error against log(log₂ n + 1) (H, Y) and log n (I) over the grid; \
                    Θ(log³ n) shows as an exponent approaching 3 from below as lower-order terms fade (the full scale, up to n = 4096, is closer). \
                    ";
        let crossover = |s: usize| {
            rows[s]
                .iter()
                .zip(&rows[0])
                .zip(&ns)
                .find(|((r, i), _)| r.0 < i.0)
                .map(|(_, &n)| format!("n = {n}"))
                .unwrap_or_else(|| "beyond the grid".into())
        };
        summary += &format!(
            "On average over all ranges, H_n first beats I_n at {} and Y_n at {} (closed forms): the asymptotic advantage needs \
             moderately large domains because Δ₁(H_n)² = (log₂ n + 1)² multiplies the profile.\n",
            crossover(1),
            crossover(2)
        );
        if dataset_used == "SYNTHETIC" {
            summary += "\n**The real dataset was not found: the measured column used the embedded SYNTHETIC histogram.** (The error of these data-independent mechanisms does not depend on the data.)\n";
        }
        let series = |pick: Pick, measured: bool| {
            names
                .iter()
                .enumerate()
                .map(|(s, name)| Series {
                    name: format!(
                        "{name}{}",
                        if measured {
                            " measured"
                        } else {
                            " closed form"
                        }
                    ),
                    points: rows[s]
                        .iter()
                        .zip(&ns)
                        .map(|(r, &n)| {
                            let (y, ci) = pick(r);
                            (n, y, ci)
                        })
                        .collect(),
                    markers_only: measured,
                    color: s,
                })
                .collect::<Vec<_>>()
        };
        let mut avg_series = series(|r| (r.0, None), false);
        avg_series.extend(series(|r| (r.2, Some((r.3, r.4))), true));
        let plots = vec![
            Plot {
                file_stem: "average_error".into(),
                title: "All ranges: average squared error per query (ε = 1)".into(),
                x_label: "domain size n".into(),
                y_label: "average squared error".into(),
                log_x: true,
                log_y: true,
                panels: Panel::only(avg_series),
            },
            Plot {
                file_stem: "max_error".into(),
                title: "All ranges: maximum squared error over queries (ε = 1)".into(),
                x_label: "domain size n".into(),
                y_label: "max squared error".into(),
                log_x: true,
                log_y: true,
                panels: Panel::only(series(|r| (r.1, None), false)),
            },
        ];
        Ok(ExperimentResult {
            points,
            plots,
            summary,
        })
    }
}
