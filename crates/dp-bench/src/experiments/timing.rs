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
use super::runner::{Grid, GridExperiment, product};
use super::sweep::{DELTA, EPSILON, Family, related_rank};
use crate::stats::fitted_exponent;
use crate::{Panel, Plot, Point, PointSetting, Progress, RunConfig, Scale, Series};

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
pub(crate) struct Timing {
    /// Which axis.
    pub axis: Axis,
}

const MECHANISMS: [&str; 4] = ["ESM", "AM", "LRM", "COA"];

/// What the run shares.
pub(crate) struct Setup {
    /// The varied sizes.
    sizes: Vec<usize>,
    /// The fixed size (n for Fig. 11, m for Figs. 12–13).
    fixed: usize,
    families: Vec<Family>,
    /// ESM's and LRM's wall-clock budget.
    budget_seconds: Option<f64>,
    /// The Gaussian multiplier of the budget.
    c: f64,
    setting: PointSetting,
}

/// One optimization: seconds, expected error `c² l2_obj`, converged.
type Run = (f64, f64, bool);

impl Timing {
    fn param(&self) -> &'static str {
        if self.axis == Axis::M { "m" } else { "n" }
    }

    fn fixed_name(&self) -> &'static str {
        if self.axis == Axis::M { "n" } else { "m" }
    }
}

impl GridExperiment for Timing {
    type Setup = Setup;
    /// The workload (index into [`Setup::families`]) and the varied size.
    type Value = (usize, usize);
    /// Per mechanism, in [`MECHANISMS`] order.
    type Row = Vec<Run>;

    fn setup(&self, cfg: &RunConfig, _: &mut dyn Progress) -> Result<Setup> {
        // (grid, fixed): the paper's fixed sizes at --full, reduced by
        // default.
        let (sizes, fixed): (Vec<usize>, usize) = match (self.axis, cfg.scale) {
            (_, Scale::Smoke) => (vec![16, 32], 32),
            (Axis::M, Scale::Reduced) => (vec![128, 512, 2048, 8192], 256),
            (Axis::M, Scale::Full) => (vec![128, 256, 512, 1024, 2048, 4096, 8192], 1024),
            (Axis::N1024, Scale::Reduced) => (vec![64, 128, 256], 1024),
            (Axis::N1024, Scale::Full) => (vec![64, 128, 256, 512, 1024, 2048], 1024),
            (Axis::N2048, Scale::Reduced) => (vec![64, 128, 256], 2048),
            (Axis::N2048, Scale::Full) => (vec![32, 128, 512, 2048], 2048),
        };
        let families: Vec<Family> = if cfg.scale == Scale::Full {
            vec![
                Family::Discrete,
                Family::Marginal,
                Family::Range,
                Family::Related,
            ]
        } else {
            vec![Family::Range, Family::Related]
        };
        let budget = PrivacyBudget::approx(EPSILON, DELTA)?;
        Ok(Setup {
            sizes,
            fixed,
            families,
            budget_seconds: cfg.by_scale(Some(2.0), Some(15.0), None),
            c: gaussian_multiplier(budget, GaussianCalibration::Coa)?,
            setting: PointSetting {
                parameter: self.param(),
                epsilon: EPSILON,
                delta: Some(DELTA),
                seed: cfg.seed,
                repetitions: 0,
            },
        })
    }

    fn grid(&self, _: &RunConfig, setup: &Setup) -> Vec<(usize, usize)> {
        product(setup.families.len(), &setup.sizes)
    }

    fn measure(
        &self,
        setup: &mut Setup,
        &(f, value): &(usize, usize),
        points: &mut Vec<Point>,
    ) -> Result<Vec<Run>> {
        let family = setup.families[f];
        let (m, n) = if self.axis == Axis::M {
            (value, setup.fixed)
        } else {
            (setup.fixed, value)
        };
        let n = if family == Family::Marginal {
            n.next_power_of_two().max(4)
        } else {
            n
        };
        let w = family.generate(m, n, related_rank(m, n), setup.setting.seed ^ value as u64)?;
        let workload = dp_workloads::Workload::name(&w);
        let problem = Problem::from_workload(w.matrix(), PrivacyModel::Approx)?;
        let mut runs = Vec::with_capacity(MECHANISMS.len());
        for mech in MECHANISMS {
            let (a, converged, seconds) = strategy(mech, &problem, setup.budget_seconds)?;
            let expected = setup.c * setup.c * problem.objective(a.as_ref())?;
            points.push(
                setup
                    .setting
                    .point(mech, &workload, "-", value as f64)
                    .with_expected(Some(expected))
                    .with_metric(format!(
                        "seconds of one optimization (column seconds); expected total squared error in closed form; {}",
                        if converged { "converged" } else { "not converged" }
                    ))
                    .with_seconds(seconds),
            );
            runs.push((seconds, expected, converged));
        }
        Ok(runs)
    }

    fn describe(&self, &(_, value): &(usize, usize), runs: &Vec<Run>) -> String {
        let times: Vec<String> = MECHANISMS
            .iter()
            .zip(runs)
            .map(|(mech, run)| format!("{mech} {:.2} s", run.0))
            .collect();
        format!("{} = {value}: {}", self.param(), times.join(", "))
    }

    fn report(
        &self,
        setup: &Setup,
        grid: &[(usize, usize)],
        rows: &[Vec<Run>],
    ) -> Result<(String, Vec<Plot>)> {
        let param = self.param();
        let xs: Vec<f64> = setup.sizes.iter().map(|&v| v as f64).collect();
        let mut growth = String::new();
        let mut panels = Vec::new();
        for (f, family) in setup.families.iter().enumerate() {
            let of_family: Vec<&Vec<Run>> = grid
                .iter()
                .zip(rows)
                .filter(|((g, _), _)| *g == f)
                .map(|(_, runs)| runs)
                .collect();
            let mut series = Vec::new();
            for (j, mech) in MECHANISMS.iter().enumerate() {
                let ys: Vec<f64> = of_family.iter().map(|runs| runs[j].0.max(1e-4)).collect();
                growth += &format!(
                    "| {} | {mech} | {param}^{:.2} | {:.2}× |\n",
                    family.label(),
                    fitted_exponent(&xs, &ys),
                    ys.iter().copied().fold(0.0, f64::max)
                        / ys.iter().copied().fold(f64::INFINITY, f64::min)
                );
                let points = xs.iter().zip(&ys).map(|(&x, &t)| (x, t, None)).collect();
                series.push(Series::line(*mech, j + 3, points));
            }
            panels.push(Panel {
                title: family.label().into(),
                series,
            });
        }
        let plot = Plot::log_log(
            "time",
            format!(
                "optimization time against {param} ({} = {})",
                self.fixed_name(),
                setup.fixed
            ),
            (param, "seconds"),
            panels,
        );
        Ok((self.summary(setup, grid, rows, &growth), vec![plot]))
    }
}

impl Timing {
    fn summary(
        &self,
        setup: &Setup,
        grid: &[(usize, usize)],
        rows: &[Vec<Run>],
        growth: &str,
    ) -> String {
        let param = self.param();
        let mut summary = format!(
            "Wall-clock seconds of one strategy optimization ((ε,δ) = ({EPSILON}, {DELTA}), {} threads on this machine), with the \
             closed-form expected total squared error c²·l2_obj of the strategy found (c = √(2 ln(2/δ))/ε). {} fixed at {}.{}\n\n",
            std::thread::available_parallelism().map_or(1, |p| p.get()),
            self.fixed_name(),
            setup.fixed,
            match setup.budget_seconds {
                Some(t) => format!(
                    " ESM and LRM run under a {t} s budget at this scale; a flagged time is a lower bound."
                ),
                None => String::new(),
            }
        );
        summary += &format!(
            "| workload | {param} | mechanism | seconds | expected error | converged |\n|---|---|---|---|---|---|\n"
        );
        for (&(f, value), runs) in grid.iter().zip(rows) {
            for (mech, &(seconds, expected, converged)) in MECHANISMS.iter().zip(runs) {
                summary += &format!(
                    "| {} | {value} | {mech} | {seconds:.3} | {expected:.4e} | {} |\n",
                    setup.families[f].label(),
                    if converged { "yes" } else { "**no**" }
                );
            }
        }
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
        summary
    }
}

/// Figures 11–13.
pub(crate) fn all() -> Vec<Grid<Timing>> {
    [
        (
            "coa-fig11",
            "COA paper, Figure 11: running time of ESM, AM, LRM and COA against m (n fixed)",
            Axis::M,
        ),
        (
            "coa-fig12",
            "COA paper, Figure 12: running time against n (m = 1024)",
            Axis::N1024,
        ),
        (
            "coa-fig13",
            "COA paper, Figure 13: running time against n (m = 2048)",
            Axis::N2048,
        ),
    ]
    .map(|(name, reproduces, axis)| Grid::new(name, reproduces, Timing { axis }))
    .into()
}
