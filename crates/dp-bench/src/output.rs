//! CSV, SVG and SUMMARY.md outputs of an experiment run.

use std::path::{Path, PathBuf};

use dp_core::{DpError, Result};
use plotters::prelude::*;
use serde::Serialize;

use crate::stats::MeanCi;
use crate::{Experiment, ExperimentResult, RunConfig, Scale, Written};

/// One measured point: a CSV row.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Point {
    /// Mechanism (LM, WM, HM, COA, …) or strategy.
    pub mechanism: String,
    /// Workload description.
    pub workload: String,
    /// Dataset the measured error was taken on (`-` when none).
    pub dataset: String,
    /// Name of the varied parameter (n, m, s, r, gamma, iteration, …).
    pub parameter: String,
    /// Its value.
    pub value: f64,
    /// ε.
    pub epsilon: f64,
    /// δ (empty for ε-DP).
    pub delta: Option<f64>,
    /// Seed of the run.
    pub seed: u64,
    /// Repetitions behind the mean (0 when only a closed form is given).
    pub repetitions: usize,
    /// Mean measured squared error (normalization in `metric`).
    pub mean_squared_error: Option<f64>,
    /// Lower end of its 95% confidence interval.
    pub ci95_low: Option<f64>,
    /// Upper end of its 95% confidence interval.
    pub ci95_high: Option<f64>,
    /// The same quantity in closed form, when it has one.
    pub expected_squared_error: Option<f64>,
    /// What the error numbers are (e.g. "average squared error per query").
    pub metric: String,
    /// Seconds spent (strategy optimization plus measurement).
    pub seconds: f64,
}

/// What every point of one run shares: the varied parameter's name, the
/// privacy budget, the seed and the repetitions behind each mean. Points
/// are built from it ([`PointSetting::point`]) and completed with the
/// `with_*` methods, so that each experiment states only what differs.
#[derive(Debug, Clone)]
pub struct PointSetting {
    /// Name of the varied parameter (n, m, s, r, gamma, iteration, …).
    pub parameter: &'static str,
    /// ε.
    pub epsilon: f64,
    /// δ (`None` for ε-DP).
    pub delta: Option<f64>,
    /// Seed of the run.
    pub seed: u64,
    /// Repetitions behind each mean (0 when only a closed form is given).
    pub repetitions: usize,
}

impl PointSetting {
    /// A point of `mechanism` on `workload` over `dataset` at `value` of
    /// the parameter, with no error, metric or time yet.
    pub fn point(&self, mechanism: &str, workload: &str, dataset: &str, value: f64) -> Point {
        Point {
            mechanism: mechanism.into(),
            workload: workload.into(),
            dataset: dataset.into(),
            parameter: self.parameter.into(),
            value,
            epsilon: self.epsilon,
            delta: self.delta,
            seed: self.seed,
            repetitions: self.repetitions,
            mean_squared_error: None,
            ci95_low: None,
            ci95_high: None,
            expected_squared_error: None,
            metric: String::new(),
            seconds: 0.0,
        }
    }
}

impl Point {
    /// The measured mean and its 95% confidence interval.
    pub fn with_error(mut self, ci: &MeanCi) -> Self {
        self.mean_squared_error = Some(ci.mean);
        self.ci95_low = Some(ci.low());
        self.ci95_high = Some(ci.high());
        self
    }

    /// The closed-form expectation of the same quantity.
    pub fn with_expected(mut self, expected: Option<f64>) -> Self {
        self.expected_squared_error = expected;
        self
    }

    /// What the error numbers are.
    pub fn with_metric(mut self, metric: impl Into<String>) -> Self {
        self.metric = metric.into();
        self
    }

    /// Seconds spent.
    pub fn with_seconds(mut self, seconds: f64) -> Self {
        self.seconds = seconds;
        self
    }
}

/// `(x, y, optional error bar (low, high))`.
pub type SeriesPoint = (f64, f64, Option<(f64, f64)>);

/// A line (with optional error bars) in a plot.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// `(x, y, optional (low, high))`.
    pub points: Vec<SeriesPoint>,
    /// Markers only (measured points), no connecting line.
    pub markers_only: bool,
    /// Palette index (measured and closed-form series of one mechanism
    /// share it).
    pub color: usize,
}

impl Series {
    /// A line through `points`, in palette colour `color`.
    pub fn line(name: impl Into<String>, color: usize, points: Vec<SeriesPoint>) -> Self {
        Self {
            name: name.into(),
            points,
            markers_only: false,
            color,
        }
    }

    /// Markers only (measured points), in palette colour `color`.
    pub fn markers(name: impl Into<String>, color: usize, points: Vec<SeriesPoint>) -> Self {
        Self {
            markers_only: true,
            ..Self::line(name, color, points)
        }
    }
}

/// A plotted mean with its 95% confidence interval as the error bar, the
/// lower end clipped to a thousandth of the mean so that it stays on a
/// logarithmic axis.
pub fn with_error_bar(x: f64, ci: &MeanCi) -> SeriesPoint {
    (x, ci.mean, Some((ci.low().max(ci.mean * 1e-3), ci.high())))
}

/// A plot in the paper's layout: one panel, or a row of panels sharing
/// their axes (the papers' "(a) Search Log, (b) Net Trace, …" figures).
#[derive(Debug, Clone)]
pub struct Plot {
    /// File stem of the SVG.
    pub file_stem: String,
    /// Caption.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The panels, drawn left to right with common axis ranges.
    pub panels: Vec<Panel>,
}

impl Plot {
    /// A plot on logarithmic axes (the papers' error and time plots).
    pub fn log_log(
        file_stem: impl Into<String>,
        title: impl Into<String>,
        (x_label, y_label): (&str, &str),
        panels: Vec<Panel>,
    ) -> Self {
        Self {
            file_stem: file_stem.into(),
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            log_x: true,
            log_y: true,
            panels,
        }
    }

    /// The same plot with a linear x axis.
    pub fn linear_x(self) -> Self {
        Self {
            log_x: false,
            ..self
        }
    }
}

/// One panel of a plot.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Sub-caption (empty for a single-panel plot).
    pub title: String,
    /// The series.
    pub series: Vec<Series>,
}

impl Panel {
    /// The only panel of a plot.
    pub fn only(series: Vec<Series>) -> Vec<Panel> {
        vec![Panel {
            title: String::new(),
            series,
        }]
    }
}

fn io(path: &Path, e: impl std::fmt::Display) -> DpError {
    DpError::Io(format!("{}: {e}", path.display()))
}

/// Writes every point as one CSV row.
pub fn write_csv(path: &Path, points: &[Point]) -> Result<()> {
    let mut w = csv::Writer::from_path(path).map_err(|e| io(path, e))?;
    for p in points {
        w.serialize(p).map_err(|e| io(path, e))?;
    }
    w.flush().map_err(|e| io(path, e))
}

fn bounds(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        let pad = ((hi - lo) * 0.05).max(1e-12);
        (lo - pad, hi + pad)
    }
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Draws a plot as SVG (plotters): its panels side by side, with the same
/// axis ranges so that they compare at a glance.
pub fn write_svg(path: &Path, plot: &Plot) -> Result<()> {
    let all_series = || plot.panels.iter().flat_map(|p| p.series.iter());
    let xs = all_series().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = all_series().flat_map(|s| {
        s.points
            .iter()
            .flat_map(|p| [Some(p.1), p.2.map(|b| b.0), p.2.map(|b| b.1)])
            .flatten()
    });
    let x_range = bounds(xs, plot.log_x);
    let y_range = bounds(ys, plot.log_y);
    let k = plot.panels.len().max(1);
    let size = if k == 1 {
        (800, 560)
    } else {
        (480 * k as u32, 480)
    };
    let root = SVGBackend::new(path, size).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| io(path, e.to_string());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let area = if k == 1 {
        root.clone()
    } else {
        root.titled(&plot.title, ("sans-serif", 20))
            .map_err(|e| err(&e))?
    };
    for (panel, cell) in plot.panels.iter().zip(area.split_evenly((1, k))) {
        let caption = if k == 1 {
            plot.title.as_str()
        } else {
            panel.title.as_str()
        };
        draw_panel(&cell, plot, panel, caption, x_range, y_range).map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// A tick label: integers as integers, large or tiny values as `1e5`,
/// the rest with four significant digits.
fn tick(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e5).contains(&a) {
        let s = format!("{v:.1e}");
        s.replace(".0e", "e")
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type DrawResult = std::result::Result<(), String>;

/// One panel on `area`, in the plot's axis scales.
fn draw_panel(
    area: &Area<'_>,
    plot: &Plot,
    panel: &Panel,
    caption: &str,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> DrawResult {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(caption, ("sans-serif", 17))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(plot.x_label.as_str())
                .y_desc(plot.y_label.as_str())
                .x_label_formatter(&|v| tick(*v))
                .y_label_formatter(&|v| tick(*v))
                .draw()
                .map_err(|x| e(&x))?;
            for s in &panel.series {
                let color = PALETTE[s.color % PALETTE.len()];
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .filter(|p| p.1.is_finite() && (!plot.log_y || p.1 > 0.0))
                    .map(|p| (p.0, p.1))
                    .collect();
                if s.markers_only {
                    chart
                        .draw_series(pts.iter().map(|&p| Cross::new(p, 5, color.stroke_width(2))))
                        .map_err(|x| e(&x))?
                        .label(s.name.as_str())
                        .legend(move |(x, y)| Cross::new((x + 10, y), 5, color.stroke_width(2)));
                } else {
                    chart
                        .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                        .map_err(|x| e(&x))?
                        .label(s.name.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                        });
                    chart
                        .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                        .map_err(|x| e(&x))?;
                }
                let bars: Vec<_> = s
                    .points
                    .iter()
                    .filter_map(|p| p.2.map(|(lo, hi)| (p.0, lo, p.1, hi)))
                    .filter(|&(_, lo, y, hi)| {
                        lo.is_finite() && hi.is_finite() && (!plot.log_y || lo > 0.0 && y > 0.0)
                    })
                    .map(|(x, lo, y, hi)| ErrorBar::new_vertical(x, lo, y, hi, color, 6))
                    .collect();
                chart.draw_series(bars).map_err(|x| e(&x))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|x| e(&x))?;
        }};
    }
    match (plot.log_x, plot.log_y) {
        (true, true) => draw!(
            builder
                .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
                .map_err(|x| e(&x))?
        ),
        (true, false) => draw!(
            builder
                .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
                .map_err(|x| e(&x))?
        ),
        (false, true) => draw!(
            builder
                .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
                .map_err(|x| e(&x))?
        ),
        (false, false) => draw!(
            builder
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(|x| e(&x))?
        ),
    }
    Ok(())
}

/// Writes `points.csv`, one SVG per plot and `SUMMARY.md` into
/// `cfg.out/NAME/`.
pub fn write_outputs(
    experiment: &dyn Experiment,
    cfg: &RunConfig,
    result: &ExperimentResult,
    seconds: f64,
) -> Result<Written> {
    let dir = cfg.out.join(experiment.name());
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let mut files: Vec<PathBuf> = Vec::new();
    let csv_path = dir.join("points.csv");
    write_csv(&csv_path, &result.points)?;
    files.push(csv_path);
    for plot in &result.plots {
        let p = dir.join(format!("{}.svg", plot.file_stem));
        write_svg(&p, plot)?;
        files.push(p);
    }
    let summary_path = dir.join("SUMMARY.md");
    let header = format!(
        "# {}\n\nReproduces: {}\n\nScale: {} · seed {} · {:.1} s · command: `cargo xtask experiment {}{} --seed {}`\n\nFiles: {}\n\n",
        experiment.name(),
        experiment.reproduces(),
        match cfg.scale {
            Scale::Full => "full (paper)",
            Scale::Reduced => "default (reduced)",
            Scale::Smoke => "smoke (an end-to-end check, not a reproduction)",
        },
        cfg.seed,
        seconds,
        experiment.name(),
        match cfg.scale {
            Scale::Full => " --full",
            Scale::Reduced => "",
            Scale::Smoke => " --smoke",
        },
        cfg.seed,
        files
            .iter()
            .filter_map(|f| f.file_name().map(|n| format!("`{}`", n.to_string_lossy())))
            .collect::<Vec<_>>()
            .join(", ")
    );
    std::fs::write(&summary_path, header + &result.summary).map_err(|e| io(&summary_path, e))?;
    files.push(summary_path);
    Ok(Written { dir, files })
}

#[cfg(test)]
mod tests {
    use super::tick;

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick(128.0), "128");
        assert_eq!(tick(100_000.0), "1e5");
        assert_eq!(tick(2.5e6), "2.5e6");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(1e-4), "1e-4");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(-3.0), "-3");
    }
}
