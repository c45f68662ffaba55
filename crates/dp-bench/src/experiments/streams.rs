//! Continual release (`streams`): the largest and the mean per-step
//! variance of the running-count factorizations of [`dp_stream`] — the
//! binary tree, the square root, the certified dense optimum, banded
//! Toeplitz and BLT — against the horizon T, under single participation
//! and under `k = 4` participations `T/4` apart (multi-epoch), beside the
//! singular value lower bound. Figures are in units of the noise
//! multiplier (`s²‖Bᵢ‖²`); no noise is drawn, every figure is exact.
//!
//! The published anchors placed beside ours: at `T = 2²⁰` the square
//! root's largest variance is about 30 and the tree's about 420 (the
//! figures issue 35 quotes), and the square root's follows
//! `((ln(T − 1) + γ + 4 ln 2)/π)²` (the classical asymptotics of
//! `Σ_{k<T} C(2k, k)²/16ᵏ`).

use dp_core::Result;
use dp_stream::{Family, Figures, Objective, Participation, Stream, factorize};

use crate::procfs;
use crate::{
    About, Experiment, ExperimentResult, Panel, Plot, PointSetting, Progress, RunConfig, Series,
};

/// `streams`.
pub struct Streams;

const ABOUT: About = About {
    name: "streams",
    reproduces: "Continual release (Denisov et al. 2022; Henzinger et al. 2023; Choquette-Choo et al. 2023; Dvijotham et al. 2024): largest and mean per-step variance of tree, square root, dense optimum, banded and BLT factorizations of running counts, T = 2⁸…2²⁰",
};

/// The families run at `t` under `participation`: the dense optimum up to
/// `dense_max` steps (COA, single participation), anything whose
/// multi-participation sensitivity needs dense Gram matrices up to 4096.
fn families(
    t: usize,
    participation: Participation,
    dense_max: usize,
) -> Vec<(Family, &'static str)> {
    let multi = participation != Participation::Single;
    let dense = t <= dp_stream::factorization::DENSE_MAX_STEPS;
    let mut out = Vec::new();
    // Banded: T·bands per evaluation of its program.
    if (multi && dense) || (!multi && t <= 1 << 16) {
        out.push((Family::Banded, "banded"));
    }
    if !multi || dense {
        out.extend([
            (Family::Tree, "tree"),
            (Family::Sqrt, "sqrt"),
            (Family::Blt, "BLT (8 buffers)"),
        ]);
    }
    if !multi && t <= dense_max {
        out.push((Family::Dense, "dense optimum"));
    }
    out
}

/// The table of pure ε streams beside (ε, δ) ones at ε = 1, single
/// participation, one record in one cell: the largest variance of a
/// running count, in counts², of the kernel's `k`-ary Laplace tree (the
/// binary tree and the best arity, `dpmm stream` without δ) and of the
/// Gaussian square root (`dpmm stream`'s default with δ) at δ = 10⁻⁶ and
/// 10⁻¹⁰, ρ by the exact conversion. Every figure is exact (the discrete
/// Laplace variance; the Gaussian's `σ²` before the kernel rounds it up by
/// at most 2⁻⁵⁸ relative).
fn pure_against_approx(sqrt_max: &[(u32, f64)]) -> Result<String> {
    use dp_core::kernel::tree;
    let epsilon = 1.0;
    let laplace = |k: usize, t: usize| {
        let h = tree::levels(k, t);
        let scale = h as f64 / epsilon;
        (tree::max_draws(k, t) as f64) * dp_core::kernel::discrete_laplace_variance(scale)
    };
    let mut out = String::from(
        "### Pure ε beside (ε, δ), ε = 1\n\nThe largest variance of a running count, in \
         counts², one record in one cell, single participation: the kernel's pure ε stream \
         (the `k`-ary tree with discrete Laplace noise, `dpmm stream` without `--delta`; \
         binary and the arity `dpmm stream` chooses) beside the Gaussian square root at two δ \
         (`dpmm stream --delta`). A smaller δ costs the Gaussian more; the tree's figure does \
         not depend on δ.\n\n| T | Laplace, binary tree | Laplace, best arity (k) | \
         Gaussian sqrt, δ = 1e-6 | Gaussian sqrt, δ = 1e-10 |\n|---|---|---|---|---|\n",
    );
    for &(e, multiplier) in sqrt_max {
        let t = 1usize << e;
        let k = tree::best_arity(t);
        let gaussian = |delta: f64| -> Result<f64> {
            Ok(multiplier / (2.0 * dp_core::kernel::zcdp_rho_for(epsilon, delta)?))
        };
        out += &format!(
            "| 2^{e} | {:.1} | {:.1} ({k}) | {:.1} | {:.1} |\n",
            laplace(2, t),
            laplace(k, t),
            gaussian(1e-6)?,
            gaussian(1e-10)?
        );
    }
    Ok(out + "\n")
}

/// One factorization's figures and seconds.
fn run_one(
    stream: &Stream,
    family: Family,
    participation: Participation,
) -> Result<(Figures, f64)> {
    let t = stream.steps();
    let bands = match participation {
        Participation::Single => t.min(64),
        Participation::Multi { separation, .. } => separation.min(t),
    };
    let objective = match family {
        // The dense optimum is for the total; BLT and banded here for the
        // largest variance, the figure of the anchors' tables.
        Family::Dense => Objective::Total,
        _ => Objective::Max,
    };
    let started = std::time::Instant::now();
    let (f, _) = factorize(
        stream,
        family,
        Some(bands),
        Some(8),
        participation,
        objective,
    )?;
    let figures = f.figures(participation)?;
    Ok((figures, started.elapsed().as_secs_f64()))
}

impl Experiment for Streams {
    fn about(&self) -> About {
        ABOUT
    }

    fn run(&self, cfg: &RunConfig, progress: &mut dyn Progress) -> Result<ExperimentResult> {
        let exponents: Vec<u32> = cfg.by_scale(
            vec![6, 8],
            vec![8, 10, 12, 14, 16, 18, 20],
            vec![8, 10, 11, 12, 14, 16, 18, 20],
        );
        let dense_max = cfg.by_scale(64, 1024, 2048);
        let schemas = [
            ("single participation", false),
            ("4 participations T/4 apart", true),
        ];
        progress.start((exponents.len() * schemas.len()) as u64);
        let setting = PointSetting {
            parameter: "T",
            epsilon: 0.0,
            delta: None,
            seed: cfg.seed,
            repetitions: 0,
        };
        let mut points = Vec::new();
        let mut summary = String::from(
            "Running counts over T steps, factorizations W = BC with both factors lower-triangular. \
             Largest and mean per-step variance `s²‖Bᵢ‖²` in units of the noise multiplier \
             (s the sensitivity under the schema: exact, or for the tree, square root and BLT \
             under several participations a sound upper bound whose lower end a pattern attains \
             — marked † where they differ); the lower bound is the singular value bound \
             `(Σσ)²/T²` on the mean variance, and so on the largest, valid for every schema. \
             Banded: `min(T, 64)` bands (single) or `T/4` (multi), optimized for the largest \
             variance like BLT; the dense optimum minimizes the total (COA, certified).\n\n",
        );
        let mut panels = Vec::new();
        // The square root's largest variance per exponent (single
        // participation), for the pure ε comparison.
        let mut sqrt_max: Vec<(u32, f64)> = Vec::new();
        for (name, multi) in schemas {
            summary += &format!(
                "### {name}\n\n| T | family | largest variance | mean variance | lower bound (mean) | sensitivity | seconds |\n|---|---|---|---|---|---|---|\n"
            );
            let mut series: Vec<Series> = Vec::new();
            for &e in &exponents {
                let t = 1usize << e;
                let participation = if multi {
                    Participation::Multi {
                        participations: 4,
                        separation: t / 4,
                    }
                } else {
                    Participation::Single
                };
                let stream = Stream::prefix(t)?;
                let bound = stream.lower_bound().map(|(total, _)| total / t as f64);
                for (family, label) in families(t, participation, dense_max) {
                    let (figures, seconds) = run_one(&stream, family, participation)?;
                    let mean = figures.total_squared_error / t as f64;
                    if !multi && family == Family::Sqrt {
                        sqrt_max.push((e, figures.max_variance));
                    }
                    let dagger = if figures.sensitivity.is_exact() {
                        ""
                    } else {
                        " †"
                    };
                    summary += &format!(
                        "| 2^{e} | {label} | {:.4} | {:.4} | {} | {:.4}{dagger} | {:.2} |\n",
                        figures.max_variance,
                        mean,
                        bound.map_or("–".into(), |b| format!("{b:.4}")),
                        figures.sensitivity.value,
                        seconds
                    );
                    points.push(
                        setting
                            .point(label, &format!("prefix sums, {name}"), "-", t as f64)
                            .with_expected(Some(figures.max_variance))
                            .with_metric(format!(
                                "largest per-step variance (units of the noise multiplier); mean {mean:.6}"
                            ))
                            .with_seconds(seconds),
                    );
                    match series.iter_mut().find(|s| s.name == label) {
                        Some(s) => s.points.push((t as f64, figures.max_variance, None)),
                        None => {
                            let color = series.len();
                            series.push(Series {
                                name: label.into(),
                                points: vec![(t as f64, figures.max_variance, None)],
                                markers_only: false,
                                color,
                            });
                        }
                    }
                }
                if let Some((_, max)) = stream.lower_bound() {
                    let label = "lower bound";
                    match series.iter_mut().find(|s| s.name == label) {
                        Some(s) => s.points.push((t as f64, max, None)),
                        None => {
                            let color = series.len() + 6;
                            series.push(Series {
                                name: label.into(),
                                points: vec![(t as f64, max, None)],
                                markers_only: false,
                                color,
                            });
                        }
                    }
                }
                progress.step(&format!("{name}, T = 2^{e}"));
            }
            summary += "\n";
            panels.push(Panel {
                title: name.into(),
                series,
            });
        }
        summary += &pure_against_approx(&sqrt_max)?;
        let gamma = 0.577_215_664_901_532_9_f64;
        let n = ((1u64 << 20) - 1) as f64;
        let sqrt_asymptotic =
            ((n.ln() + gamma + 4.0 * std::f64::consts::LN_2) / std::f64::consts::PI).powi(2);
        summary += &format!(
            "**Anchors.** At T = 2²⁰, single participation: square root about 30 and tree about 420 \
             (issue 35's figures); the square root's asymptotic form gives {sqrt_asymptotic:.4}. \
             The square root is the best Toeplitz factorization for the largest variance \
             (`dp_stream` tests it), so BLT, a Toeplitz family, approaches it from above.\n\n\
             Load average at the end of this run: {}.\n",
            procfs::load_averages_text()
        );
        Ok(ExperimentResult {
            points,
            plots: vec![Plot {
                file_stem: "max_variance".into(),
                title: "largest per-step variance of running counts".into(),
                x_label: "T (steps)".into(),
                y_label: "largest variance / noise multiplier²".into(),
                log_x: true,
                log_y: true,
                panels,
            }],
            summary,
        })
    }
}
