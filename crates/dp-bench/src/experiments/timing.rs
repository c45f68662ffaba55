//! COA paper, Figures 11–13: running time of the strategy optimizers
//! (ESM, AM, LRM, COA) against m at fixed n (Fig. 11) and against n at
//! fixed m (Figs. 12–13), per workload. Times are wall-clock seconds of
//! one optimization on this machine (2 cores), including forming WᵀW;
//! ESM and LRM run under a budget at the default scale, flagged when it
//! binds (their time is then a lower bound). Each point also carries the
//! closed-form expected error `c² l2_obj` of the strategy found, so speed
//! is never reported without the quality it bought.

use dp_core::calibration::GaussianCalibration;
use dp_core::{PrivacyBudget, Result};
use dp_opt::{PrivacyModel, Problem};

use super::common::gaussian_multiplier;
use super::mechanisms::strategy;
use super::sweep::{DELTA, EPSILON, Family, related_rank};
use crate::stats::fitted_exponent;
use crate::{About, Experiment, ExperimentResult, Panel, Plot, Point, Progress, RunConfig, Series};

/// Which figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Vary m at fixed n (Fig. 11).
    M,
    /// Vary n at fixed m = 1024 (Fig. 12).
    N1024,
    /// Vary n at fixed m = 2048 (Fig. 13).
    N2048,
}

/// One timing figure.
pub struct Timing {
    /// Name and what it reproduces.
    pub about: About,
    /// Which axis.
    pub axis: Axis,
}

const MECHANISMS: [&str; 4] = ["ESM", "AM", "LRM", "COA"];

impl Experiment for Timing {
    fn about(&self) -> About {
        self.about
    }

    fn run(&self, cfg: &RunConfig, progress: &mut dyn Progress) -> Result<ExperimentResult> {
        // (grid, fixed): the paper's fixed sizes at --full, reduced by
        // default.
        let (grid, fixed): (Vec<usize>, usize) = match (self.axis, cfg.smoke, cfg.full) {
            (_, true, _) => (vec![16, 32], 32),
            (Axis::M, false, false) => (vec![128, 512, 2048, 8192], 256),
            (Axis::M, false, true) => (vec![128, 256, 512, 1024, 2048, 4096, 8192], 1024),
            (Axis::N1024, false, false) => (vec![64, 128, 256], 1024),
            (Axis::N1024, false, true) => (vec![64, 128, 256, 512, 1024, 2048], 1024),
            (Axis::N2048, false, false) => (vec![64, 128, 256], 2048),
            (Axis::N2048, false, true) => (vec![32, 128, 512, 2048], 2048),
        };
        let families: Vec<Family> = if cfg.full {
            vec![
                Family::Discrete,
                Family::Marginal,
                Family::Range,
                Family::Related,
            ]
        } else {
            vec![Family::Range, Family::Related]
        };
        let budget_seconds = cfg.by_scale(Some(2.0), Some(15.0), None);
        let budget = PrivacyBudget::approx(EPSILON, DELTA)?;
        let c = gaussian_multiplier(budget, GaussianCalibration::Coa)?;
        progress.start((grid.len() * families.len() * MECHANISMS.len()) as u64);
        let mut points = Vec::new();
        let mut panels = Vec::new();
        let mut summary = format!(
            "Wall-clock seconds of one strategy optimization ((ε,δ) = ({EPSILON}, {DELTA}), {} threads on this machine), with the \
             closed-form expected total squared error c²·l2_obj of the strategy found (c = √(2 ln(2/δ))/ε). {} fixed at {fixed}.{}\n\n",
            std::thread::available_parallelism().map_or(1, |p| p.get()),
            if self.axis == Axis::M { "n" } else { "m" },
            match budget_seconds {
                Some(t) => format!(
                    " ESM and LRM run under a {t} s budget at this scale; a flagged time is a lower bound."
                ),
                None => String::new(),
            }
        );
        let param = if self.axis == Axis::M { "m" } else { "n" };
        summary += &format!(
            "| workload | {param} | mechanism | seconds | expected error | converged |\n|---|---|---|---|---|---|\n"
        );
        let mut growth = String::new();
        for family in &families {
            let mut times: Vec<Vec<f64>> = vec![Vec::new(); MECHANISMS.len()];
            for &value in &grid {
                let (m, n) = if self.axis == Axis::M {
                    (value, fixed)
                } else {
                    (fixed, value)
                };
                let n = if *family == Family::Marginal {
                    n.next_power_of_two().max(4)
                } else {
                    n
                };
                let s = related_rank(m, n);
                let w = family.generate(m, n, s, cfg.seed ^ value as u64)?;
                let problem = Problem::from_workload(w.matrix(), PrivacyModel::Approx)?;
                for (j, mech) in MECHANISMS.iter().enumerate() {
                    let (a, converged, seconds) = strategy(mech, &problem, budget_seconds)?;
                    let expected = c * c * problem.objective(a.as_ref())?;
                    times[j].push(seconds);
                    summary += &format!(
                        "| {} | {value} | {mech} | {seconds:.3} | {expected:.4e} | {} |\n",
                        family.label(),
                        if converged { "yes" } else { "**no**" }
                    );
                    points.push(Point {
                        mechanism: (*mech).into(),
                        workload: dp_workloads::Workload::name(&w),
                        dataset: "-".into(),
                        parameter: param.into(),
                        value: value as f64,
                        epsilon: EPSILON,
                        delta: Some(DELTA),
                        seed: cfg.seed,
                        repetitions: 0,
                        mean_squared_error: None,
                        ci95_low: None,
                        ci95_high: None,
                        expected_squared_error: Some(expected),
                        metric: format!(
                            "seconds of one optimization (column seconds); expected total squared error in closed form; {}",
                            if converged { "converged" } else { "not converged" }
                        ),
                        seconds,
                    });
                    progress.step(&format!(
                        "{} {param} = {value}: {mech} {seconds:.2} s",
                        family.label()
                    ));
                }
            }
            let xs: Vec<f64> = grid.iter().map(|&v| v as f64).collect();
            for (j, mech) in MECHANISMS.iter().enumerate() {
                let ys: Vec<f64> = times[j].iter().map(|t| t.max(1e-4)).collect();
                growth += &format!(
                    "| {} | {mech} | {param}^{:.2} | {:.2}× |\n",
                    family.label(),
                    fitted_exponent(&xs, &ys),
                    ys.iter().copied().fold(0.0, f64::max)
                        / ys.iter().copied().fold(f64::INFINITY, f64::min)
                );
            }
            panels.push(Panel {
                title: family.label().into(),
                series: MECHANISMS
                    .iter()
                    .enumerate()
                    .map(|(j, name)| Series {
                        name: (*name).into(),
                        points: xs
                            .iter()
                            .zip(&times[j])
                            .map(|(&x, &t)| (x, t.max(1e-4), None))
                            .collect(),
                        markers_only: false,
                        color: j + 3,
                    })
                    .collect(),
            });
        }
        let plots = vec![Plot {
            file_stem: "time".into(),
            title: format!(
                "optimization time against {param} ({} = {fixed})",
                if self.axis == Axis::M { "n" } else { "m" }
            ),
            x_label: param.into(),
            y_label: "seconds".into(),
            log_x: true,
            log_y: true,
            panels,
        }];
        summary += &format!(
            "\n**Growth** (fitted exponent of time against {param}, and max/min time over the grid):\n\n| workload | mechanism | fitted growth | max/min |\n|---|---|---|---|\n{growth}"
        );
        summary += if self.axis == Axis::M {
            "\n**The paper's claim (Fig. 11):** COA's running time does not depend on m (it works on WᵀW, O(n³) per Newton step), while LRM's grows with m. \
             Read COA's row above: its exponent in m is near 0 (only forming WᵀW, O(mn²), depends on m). \
             **Differs for LRM:** dpmm's LRM also works only on WᵀW (through its rank × n Gram root), so m enters only through rank(W) ≤ min(m, n) \
             and the solver it selects: while the rank is below n/2 it runs the penalty path on a growing root, once it reaches n/2 the barrier form \
             with r = n + n/16, whose time no longer depends on m (and on WRange is often shorter). The authors' LRM iterates on the m × r matrix B, \
             O(min(m,n)²(m+n)) per step, hence their growth in m.\n"
        } else {
            "\n**The paper's claim (Figs. 12–13):** COA's time grows as n³ per Newton step with few steps; LRM's grows with min(m,n)²(m+n) times many iterations; \
             for large n and small m COA may be slower than LRM.\n"
        };
        Ok(ExperimentResult {
            points,
            plots,
            summary,
        })
    }
}

/// Figures 11–13.
pub fn all() -> Vec<Timing> {
    vec![
        Timing {
            about: About {
                name: "coa-fig11",
                reproduces: "COA paper, Figure 11: running time of ESM, AM, LRM and COA against m (n fixed)",
            },
            axis: Axis::M,
        },
        Timing {
            about: About {
                name: "coa-fig12",
                reproduces: "COA paper, Figure 12: running time against n (m = 1024)",
            },
            axis: Axis::N1024,
        },
        Timing {
            about: About {
                name: "coa-fig13",
                reproduces: "COA paper, Figure 13: running time against n (m = 2048)",
            },
            axis: Axis::N2048,
        },
    ]
}
