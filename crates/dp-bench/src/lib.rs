//! Experiment reproductions for `cargo xtask experiment`.
//!
//! Each [`Experiment`] reproduces one figure or table of a paper
//! (docs/architecture.md lists them): it measures points (a CSV row each,
//! with the seed, repetitions, mean squared error and a 95% confidence
//! interval, and the closed-form expectation where one exists), draws them
//! as an SVG in the paper's layout, and writes a `SUMMARY.md` that puts the
//! paper's claim beside what was measured.
//!
//! ```no_run
//! use dp_bench::{RunConfig, registry, run_experiment};
//! let exp = registry().into_iter().find(|e| e.name() == "mm-range-error").unwrap();
//! let cfg = RunConfig::new("results".into());
//! let written = run_experiment(exp.as_ref(), &cfg, &mut ()).unwrap();
//! println!("outputs in {}", written.dir.display());
//! ```

pub mod audit;
pub mod experiments;
pub mod guards_bench;
pub mod output;
pub mod peers;
pub mod procfs;
#[cfg(feature = "cli")]
pub mod progress;
pub mod regress;
pub mod release_bench;
pub mod rp_peers;
pub mod scaling;
pub mod stats;

use std::path::PathBuf;

use dp_core::Result;

pub use output::{
    Panel, Plot, Point, PointSetting, Series, SeriesPoint, with_error_bar, write_outputs,
};

/// How large a run is: every experiment's sizes, grids and budgets are
/// chosen by it ([`RunConfig::by_scale`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scale {
    /// A reduced grid (small sizes, few points) for the integration test
    /// that every experiment runs end to end; not a reproduction.
    Smoke,
    /// Sizes that keep each figure's shape and run in minutes on 2 cores.
    #[default]
    Reduced,
    /// The paper's full scale.
    Full,
}

/// How an experiment is run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Smoke, reduced (the default) or the paper's full scale.
    pub scale: Scale,
    /// Root of the outputs; each experiment writes into `out/NAME/`.
    pub out: PathBuf,
    /// Seed of every random draw (workload generators and noise).
    pub seed: u64,
    /// Explicit dataset directory (`--datasets`), searched first.
    pub datasets: Option<PathBuf>,
    /// Override of the number of repetitions per point (tests use few).
    pub repetitions: Option<usize>,
}

impl RunConfig {
    /// Default scale, seed 2024, outputs under `out`.
    pub fn new(out: PathBuf) -> Self {
        Self {
            scale: Scale::Reduced,
            out,
            seed: 2024,
            datasets: None,
            repetitions: None,
        }
    }

    /// Refuses `repetitions: Some(0)`: a mean and a confidence interval
    /// over no release do not exist (they would be NaN).
    pub fn validate(&self) -> Result<()> {
        if self.repetitions == Some(0) {
            return Err(dp_core::DpError::InvalidParameter {
                name: "repetitions",
                reason: "must be at least 1".into(),
            });
        }
        Ok(())
    }

    /// The value for this run's scale: `smoke` for a smoke run, `full` at
    /// the paper's scale, `default` otherwise (every experiment's sizes,
    /// grids and budgets are chosen this way).
    pub fn by_scale<T>(&self, smoke: T, default: T, full: T) -> T {
        match self.scale {
            Scale::Smoke => smoke,
            Scale::Reduced => default,
            Scale::Full => full,
        }
    }
}

/// Receives progress lines from a running experiment (the command line
/// shows a progress bar on a terminal, plain lines otherwise).
pub trait Progress {
    /// Total number of steps, when known.
    fn start(&mut self, _total: u64) {}
    /// One step done, with a short description.
    fn step(&mut self, _message: &str) {}
    /// A free-form line (which dataset was used, a stand-in, …).
    fn note(&mut self, _message: &str) {}
}

impl Progress for () {}

/// What an experiment produced.
#[derive(Debug, Clone)]
pub struct ExperimentResult {
    /// Every measured point.
    pub points: Vec<Point>,
    /// The plots to draw (one SVG each).
    pub plots: Vec<Plot>,
    /// Markdown body of SUMMARY.md (the runner adds the header).
    pub summary: String,
}

/// An experiment's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct About {
    /// Command-line name, e.g. `lrm-fig5`.
    pub name: &'static str,
    /// What it reproduces, e.g. "LRM paper, Figure 5: vary n on WRange".
    pub reproduces: &'static str,
}

/// One reproduction of a paper's figure or table.
pub trait Experiment {
    /// Its name and what it reproduces.
    fn about(&self) -> About;
    /// Command-line name, e.g. `lrm-fig5`.
    fn name(&self) -> &'static str {
        self.about().name
    }
    /// What it reproduces, e.g. "LRM paper, Figure 5: vary n on WRange".
    fn reproduces(&self) -> &'static str {
        self.about().reproduces
    }
    /// Why it cannot run yet (a mechanism that is not implemented), or
    /// `None` when it runs.
    fn pending(&self) -> Option<&'static str> {
        None
    }
    /// The experiment whose run includes every run of this one (`all`
    /// runs that one only, so nothing is planned twice), or `None`.
    fn part_of(&self) -> Option<&'static str> {
        None
    }
    /// Runs it.
    fn run(&self, cfg: &RunConfig, progress: &mut dyn Progress) -> Result<ExperimentResult>;
}

/// Every experiment, in `experiment list` order.
pub fn registry() -> Vec<Box<dyn Experiment>> {
    experiments::all()
}

/// The experiments `name` selects: `all` the ones that can run and are not
/// [`Experiment::part_of`] another, otherwise the one of that name; an
/// error for an unknown name.
pub fn select(
    experiments: Vec<Box<dyn Experiment>>,
    name: &str,
) -> Result<Vec<Box<dyn Experiment>>> {
    let chosen: Vec<_> = experiments
        .into_iter()
        .filter(|e| match name {
            "all" => e.pending().is_none() && e.part_of().is_none(),
            _ => e.name() == name,
        })
        .collect();
    if chosen.is_empty() && name != "all" {
        return Err(dp_core::DpError::InvalidParameter {
            name: "experiment",
            reason: format!("unknown experiment '{name}' (see `cargo xtask experiment list`)"),
        });
    }
    Ok(chosen)
}

/// Where a run's outputs went.
#[derive(Debug, Clone)]
pub struct Written {
    /// The experiment's output directory.
    pub dir: PathBuf,
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// Runs `experiment` and writes its CSV, SVG(s) and SUMMARY.md.
pub fn run_experiment(
    experiment: &dyn Experiment,
    cfg: &RunConfig,
    progress: &mut dyn Progress,
) -> Result<Written> {
    if let Some(why) = experiment.pending() {
        return Err(dp_core::DpError::InvalidParameter {
            name: "experiment",
            reason: format!("{} is pending: {why}", experiment.name()),
        });
    }
    cfg.validate()?;
    let start = std::time::Instant::now();
    let result = experiment.run(cfg, progress)?;
    write_outputs(experiment, cfg, &result, start.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_takes_all_runnable_one_by_name_and_refuses_unknown_names() {
        let runnable = registry().iter().filter(|e| e.pending().is_none()).count();
        let all = select(registry(), "all").unwrap_or_else(|e| panic!("{e}"));
        // hdmm-census's runs are hdmm-peers' census rows: run once.
        assert_eq!(all.len(), runnable - 1);
        assert!(all.iter().all(|e| e.name() != "hdmm-census"));
        assert!(all.iter().any(|e| e.name() == "hdmm-peers"));
        let one = select(registry(), "lrm-fig5").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            one.iter().map(|e| e.name()).collect::<Vec<_>>(),
            ["lrm-fig5"]
        );
        assert!(matches!(
            select(registry(), "nope").err(),
            Some(dp_core::DpError::InvalidParameter {
                name: "experiment",
                ..
            })
        ));
    }
}
