//! Matrix mechanism paper, Theorem 6.30: maximum and average error of
//! I_n, H_n and Y_n on all range queries as n grows — Θ(log³ n) for H_n
//! and Y_n, Θ(n) for I_n — computed in closed form for every range and
//! measured by releasing all ranges of a real histogram.

use dp_core::{MatrixMechanism, PrivacyBudget, Result, sensitivity_l1};
use dp_linalg::{Cholesky, Mat};
use dp_workloads::datasets::Histogram;
use dp_workloads::strategies::{hierarchical, identity, wavelet};
use dp_workloads::workload::AllRange;

use super::common::{at_domain_size, load_dataset, measure_per_query};
use super::runner::{Grid, GridExperiment};
use crate::stats::fitted_exponent;
use crate::{About, Panel, Plot, Point, PointSetting, Progress, RunConfig, Series};

/// Closed-form average, closed-form max, measured mean, CI low, CI high.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row(f64, f64, f64, f64, f64);

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

/// The experiment.
pub(crate) const EXPERIMENT: Grid<RangeErrorGrowth> = Grid {
    about: About {
        name: "mm-range-error",
        reproduces: "Matrix mechanism paper (Li et al.), Theorem 6.30: max and total error of I_n, H_n, Y_n on all range queries",
    },
    experiment: RangeErrorGrowth,
};

/// The three strategies, in grid order.
const NAMES: [&str; 3] = ["I_n (LM)", "H_n (HM)", "Y_n (WM)"];

/// What the run shares.
pub(crate) struct Setup {
    budget: PrivacyBudget,
    rng: dp_core::Session,
    setting: PointSetting,
    /// The dataset at its own resolution (`None`: the synthetic stand-in).
    loaded: Option<Histogram>,
    /// The dataset's name as used (without the `@n` of a merge).
    dataset_used: String,
}

/// One grid value: the domain size `2^k` and the strategy (index into
/// [`NAMES`]).
pub(crate) struct Case {
    k: usize,
    strategy: usize,
}

impl GridExperiment for RangeErrorGrowth {
    type Setup = Setup;
    type Value = Case;
    type Row = Row;

    fn setup(&self, cfg: &RunConfig, progress: &mut dyn Progress) -> Result<Setup> {
        Ok(Setup {
            budget: PrivacyBudget::pure(EPSILON)?,
            rng: dp_core::experiments::SeededSession::unlimited(cfg.seed),
            setting: PointSetting {
                parameter: "n",
                epsilon: EPSILON,
                delta: None,
                seed: cfg.seed,
                repetitions: cfg.repetitions.unwrap_or(cfg.by_scale(20, 20, 50)),
            },
            loaded: load_dataset(DATASET, cfg, progress),
            dataset_used: String::new(),
        })
    }

    fn grid(&self, cfg: &RunConfig, _: &Setup) -> Vec<Case> {
        (4..=cfg.by_scale(6, 10, 12))
            .flat_map(|k| (0..NAMES.len()).map(move |strategy| Case { k, strategy }))
            .collect()
    }

    fn measure(&self, setup: &mut Setup, case: &Case, points: &mut Vec<Point>) -> Result<Row> {
        let n = 1usize << case.k;
        let hist = at_domain_size(setup.loaded.as_ref(), n)?;
        setup.dataset_used = hist.name.split('@').next().unwrap_or(DATASET).to_string();
        let workload = AllRange::new(n)?;
        let start = std::time::Instant::now();
        let strategy = match case.strategy {
            0 => identity(n)?,
            1 => hierarchical(n, 2)?,
            _ => wavelet(n)?,
        };
        let delta = sensitivity_l1(strategy.as_ref())?;
        let scale = 2.0 * delta * delta / (EPSILON * EPSILON);
        let (avg, max) = profile_range_stats(&strategy)?;
        let mech = MatrixMechanism::new(strategy.as_ref(), setup.budget)?;
        let reps = setup.setting.repetitions;
        let measured = measure_per_query(&mech, &workload, &hist.counts, reps, &mut setup.rng)?;
        points.push(
            setup
                .setting
                .point(
                    NAMES[case.strategy],
                    &format!("AllRange({n})"),
                    &hist.name,
                    n as f64,
                )
                .with_error(&measured)
                .with_expected(Some(scale * avg))
                .with_metric(format!(
                    "average squared error per range query (max over ranges, closed form: {:.6e})",
                    scale * max
                ))
                .with_seconds(start.elapsed().as_secs_f64()),
        );
        Ok(Row(
            scale * avg,
            scale * max,
            measured.mean,
            measured.low(),
            measured.high(),
        ))
    }

    fn describe(&self, case: &Case, _: &Row) -> String {
        format!("n = {}, {}", 1usize << case.k, NAMES[case.strategy])
    }

    fn report(&self, setup: &Setup, grid: &[Case], rows: &[Row]) -> Result<(String, Vec<Plot>)> {
        let mut ks: Vec<usize> = grid.iter().map(|c| c.k).collect();
        ks.dedup();
        // [strategy][k] → the row.
        let by_strategy: Vec<Vec<Row>> = (0..NAMES.len())
            .map(|s| {
                grid.iter()
                    .zip(rows)
                    .filter(|(c, _)| c.strategy == s)
                    .map(|(_, r)| *r)
                    .collect()
            })
            .collect();
        let ns: Vec<f64> = ks.iter().map(|&k| (1usize << k) as f64).collect();
        let summary = summary(setup, &ks, &ns, &by_strategy);
        Ok((summary, plots(&ns, &by_strategy)))
    }
}

fn summary(setup: &Setup, ks: &[usize], ns: &[f64], rows: &[Vec<Row>]) -> String {
    let (dataset_used, reps) = (&setup.dataset_used, setup.setting.repetitions);
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
    for (s, name) in NAMES.iter().enumerate() {
        let avg: Vec<f64> = rows[s].iter().map(|r| r.0).collect();
        let max: Vec<f64> = rows[s].iter().map(|r| r.1).collect();
        let inside = rows[s].iter().filter(|r| r.3 <= r.0 && r.0 <= r.4).count();
        let (claim, growth_avg, growth_max) = if s == 0 {
            (
                "Θ(n/ε²)",
                format!("n^{:.2}", fitted_exponent(ns, &avg)),
                format!("n^{:.2}", fitted_exponent(ns, &max)),
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
        for (s, name) in NAMES.iter().enumerate() {
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
            .zip(ns)
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
    summary
}

fn plots(ns: &[f64], rows: &[Vec<Row>]) -> Vec<Plot> {
    let series = |pick: Pick, measured: bool| {
        NAMES
            .iter()
            .enumerate()
            .map(|(s, name)| {
                let points = rows[s]
                    .iter()
                    .zip(ns)
                    .map(|(r, &n)| {
                        let (y, ci) = pick(r);
                        (n, y, ci)
                    })
                    .collect();
                if measured {
                    Series::markers(format!("{name} measured"), s, points)
                } else {
                    Series::line(format!("{name} closed form"), s, points)
                }
            })
            .collect::<Vec<_>>()
    };
    let mut avg_series = series(|r| (r.0, None), false);
    avg_series.extend(series(|r| (r.2, Some((r.3, r.4))), true));
    vec![
        Plot::log_log(
            "average_error",
            "All ranges: average squared error per query (ε = 1)",
            ("domain size n", "average squared error"),
            Panel::only(avg_series),
        ),
        Plot::log_log(
            "max_error",
            "All ranges: maximum squared error over queries (ε = 1)",
            ("domain size n", "max squared error"),
            Panel::only(series(|r| (r.1, None), false)),
        ),
    ]
}
