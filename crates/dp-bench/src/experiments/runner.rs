//! The shared runner of the grid experiments: each experiment declares
//! what its run shares (data, workloads, calibration, the seeded noise
//! source), its grid, how one grid value is measured and how the rows are
//! reported; [`Grid`] owns the loop, the progress count and the assembly
//! of the [`ExperimentResult`].

use dp_core::Result;

use crate::{About, Experiment, ExperimentResult, Plot, Point, Progress, RunConfig};

/// An experiment as a declarative grid, run by [`Grid`].
pub(crate) trait GridExperiment {
    /// What every grid value shares (built once per run).
    type Setup;
    /// One value of the grid.
    type Value;
    /// What one value measured, for the summary and the plots.
    type Row;

    /// Loads the data and builds what the whole run shares.
    fn setup(&self, cfg: &RunConfig, progress: &mut dyn Progress) -> Result<Self::Setup>;

    /// The grid, in the order it is measured (the seeded noise is drawn in
    /// this order, so the order is part of the experiment's numbers).
    fn grid(&self, cfg: &RunConfig, setup: &Self::Setup) -> Vec<Self::Value>;

    /// Measures one value: its CSV points go to `points`.
    fn measure(
        &self,
        setup: &mut Self::Setup,
        value: &Self::Value,
        points: &mut Vec<Point>,
    ) -> Result<Self::Row>;

    /// The experiment whose run includes every run of this one
    /// ([`crate::Experiment::part_of`]), or `None`.
    fn part_of(&self) -> Option<&'static str> {
        None
    }

    /// The progress line after `value` was measured.
    fn describe(&self, value: &Self::Value, row: &Self::Row) -> String;

    /// The summary (markdown) and the plots from every value's row, in
    /// grid order.
    fn report(
        &self,
        setup: &Self::Setup,
        grid: &[Self::Value],
        rows: &[Self::Row],
    ) -> Result<(String, Vec<Plot>)>;
}

/// A [`GridExperiment`] with its name, run as an [`Experiment`]: setup,
/// every grid value in order (one progress step each), then the report.
pub(crate) struct Grid<E> {
    /// Name and what it reproduces.
    pub about: About,
    /// The grid.
    pub experiment: E,
}

impl<E> Grid<E> {
    /// The experiment `name`, reproducing `reproduces`, run over `experiment`.
    pub(crate) const fn new(name: &'static str, reproduces: &'static str, experiment: E) -> Self {
        Self {
            about: About { name, reproduces },
            experiment,
        }
    }
}

impl<E: GridExperiment> Experiment for Grid<E> {
    fn about(&self) -> About {
        self.about
    }

    fn part_of(&self) -> Option<&'static str> {
        self.experiment.part_of()
    }

    fn run(&self, cfg: &RunConfig, progress: &mut dyn Progress) -> Result<ExperimentResult> {
        let experiment = &self.experiment;
        let mut setup = experiment.setup(cfg, progress)?;
        let grid = experiment.grid(cfg, &setup);
        progress.start(grid.len() as u64);
        let mut points = Vec::new();
        let mut rows = Vec::with_capacity(grid.len());
        for value in &grid {
            let row = experiment.measure(&mut setup, value, &mut points)?;
            progress.step(&experiment.describe(value, &row));
            rows.push(row);
        }
        let (summary, plots) = experiment.report(&setup, &grid, &rows)?;
        Ok(ExperimentResult {
            points,
            plots,
            summary,
        })
    }
}

/// The grid `outer × values` in outer-major order: `(i, v)` for each
/// `i < outer` and each `v` of `values` (a figure's workloads times the
/// values of its parameter).
pub(crate) fn product<T: Copy>(outer: usize, values: &[T]) -> Vec<(usize, T)> {
    (0..outer)
        .flat_map(|i| values.iter().map(move |&v| (i, v)))
        .collect()
}
