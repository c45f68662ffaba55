//! The regression gate behind `cargo xtask regress` (and `.ci/run`).
//!
//! Every optimizer runs on fixed, seeded workloads ([`cases`]); the
//! objective of its strategy, recomputed from the strategy with
//! [`Problem::objective`], and its time, as a ratio to a dense 256×256
//! product timed in the same run ([`ReferenceProduct`]), are compared with
//! a committed [`Baseline`]:
//!
//! - an objective worse than the baseline by more than a relative
//!   [`OBJECTIVE_TOLERANCE`] fails, on every machine (an improvement is
//!   reported, and blessing records it);
//! - a time ratio above [`TIME_FACTOR`] times the ratio recorded for this
//!   processor kind ([`processor_key`]) fails. Ratios are not portable
//!   between processors (the reference follows the vector units, the
//!   optimizers' small solves do not), so they are gated only against a
//!   ratio measured on the same kind: the committed one, or else one this
//!   machine recorded on its first run ([`LocalTimes`], outside the
//!   repository). A processor with neither is measured, recorded, and not
//!   gated on that first run. Cases faster than [`MIN_TIMED_SECONDS`] per
//!   run are reported but never gated: too short to time.
//!
//! Times are per run, from repeating each case until at least 0.2 s have
//! passed (at least 3 runs) and taking the fastest of three such batches
//! ([`time_per_run`]); the reference product likewise. A case over its
//! time limit is timed again (twice at most) and keeps its best ratio, so
//! that a machine shared with other work does not fail the gate on one
//! slow batch while a sustained slowdown still does; [`bless`] records the
//! median of three measurements. [`weakened`] gives each optimizer a
//! deliberately weakened variant, to show the gate catches it.
//!
//! A plain JSON baseline rather than a textual snapshot: the comparison
//! is a tolerance on numbers, which a snapshot cannot express.

mod baseline;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::PathBuf;
use std::time::Instant;

pub use baseline::{
    Baseline, LocalTimes, MachineRatios, ObjectiveRecord, RatioRecord, local_times_path,
    processor_key,
};
use dp_core::{DpError, Result};
use dp_linalg::Mat;
use dp_opt::{PrivacyModel, Problem, StrategyOptimizer};
use dp_workloads::Workload;
use dp_workloads::generators::wrange;
use dp_workloads::workload::{AllRange, Prefix};
use serde::Serialize;

/// Relative objective worsening tolerated.
pub const OBJECTIVE_TOLERANCE: f64 = 1e-6;
/// Time-ratio growth tolerated, against a ratio of the same processor kind.
pub const TIME_FACTOR: f64 = 1.5;
/// Cases faster than this per run are not time-gated.
pub const MIN_TIMED_SECONDS: f64 = 0.005;
/// Size of the reference product the time ratios are relative to.
pub const REFERENCE_SIZE: usize = 256;
/// What the baseline's time ratios are relative to.
pub const REFERENCE_DESCRIPTION: &str = "dense 256x256 f64 product (faer), same run, one thread";

/// One measured case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// Case name.
    pub name: String,
    /// Objective of the returned strategy.
    pub objective: f64,
    /// Seconds per run over the reference product's seconds (0 when not
    /// timed).
    pub time_ratio: f64,
    /// Seconds per run (0 when not timed).
    pub seconds: f64,
}

/// One fixed case of the gate: an optimizer, a privacy model and a
/// seeded workload's Gram matrix.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// Case name, `optimizer/privacy/workload`.
    pub name: &'static str,
    /// Registry name of the optimizer.
    pub optimizer: &'static str,
    /// Objective the optimizer minimizes.
    pub privacy: PrivacyModel,
    /// Builds `WᵀW`.
    pub gram: fn() -> Result<Mat<f64>>,
}

/// The gate's cases, in baseline order.
pub fn cases() -> Vec<Case> {
    use PrivacyModel::{Approx, Pure};
    let case = |name, optimizer, privacy, gram| Case {
        name,
        optimizer,
        privacy,
        gram,
    };
    vec![
        case("coa/approx/AllRange(128)", "coa", Approx, || {
            Ok(AllRange::new(128)?.gram())
        }),
        case("coa/approx/WRange(128x128,s1)", "coa", Approx, || {
            Ok(wrange(128, 128, 1)?.gram())
        }),
        case("coa/approx/WRelated(128x128,r25,s2)", "coa", Approx, || {
            Ok(dp_workloads::generators::wrelated(128, 128, 25, 2)?.gram())
        }),
        case("pidentity/pure/AllRange(64)", "pidentity", Pure, || {
            Ok(AllRange::new(64)?.gram())
        }),
        case("am/approx/WRange(64x64,s3)", "am", Approx, || {
            Ok(wrange(64, 64, 3)?.gram())
        }),
        case("esm/approx/AllRange(32)", "esm", Approx, || {
            Ok(AllRange::new(32)?.gram())
        }),
        case("lrm/pure/WRange(32x32,s4)", "lrm", Pure, || {
            Ok(wrange(32, 32, 4)?.gram())
        }),
        case("lrm/approx/WRange(32x32,s4)", "lrm", Approx, || {
            Ok(wrange(32, 32, 4)?.gram())
        }),
        case(
            "hierarchical/approx/Prefix(256)",
            "hierarchical",
            Approx,
            || Ok(Prefix::new(256)?.gram()),
        ),
        case("wavelet/pure/AllRange(256)", "wavelet", Pure, || {
            Ok(AllRange::new(256)?.gram())
        }),
    ]
}

/// The weakened variant of optimizer `name` the gate must catch: its
/// registry entry's reduced settings ([`dp_opt::Descriptor::weakened`]).
/// An error for an unknown name or one without such a variant.
pub fn weakened(name: &str) -> Result<Box<dyn StrategyOptimizer>> {
    dp_opt::registry::descriptor(name)?.weakened()
}

/// A dense n×n `f64` product (dp-linalg's product kernel, the current
/// rayon pool): the yardstick the
/// benchmarks and the regression gate express times in, so that they
/// compare across machines as ratios.
pub struct ReferenceProduct {
    a: Mat<f64>,
    c: Mat<f64>,
}

impl ReferenceProduct {
    /// Fixed integer-valued operands of size n.
    pub fn new(n: usize) -> Self {
        Self {
            a: Mat::from_fn(n, n, |i, j| ((i * 31 + j * 17) % 13) as f64 - 6.0),
            c: Mat::zeros(n, n),
        }
    }

    /// One product `C = A·A`, into preallocated storage.
    pub fn run(&mut self) {
        dp_linalg::gemm_into(
            &mut self.c,
            self.a.as_ref(),
            self.a.as_ref(),
            dp_linalg::Par::rayon(0),
        );
    }
}

/// Seconds per call of `f`: repeat until 0.2 s (at least 3 calls), best
/// of three batches.
pub fn time_per_run(mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let start = Instant::now();
        let mut runs = 0u32;
        while runs < 3 || start.elapsed().as_secs_f64() < 0.2 {
            f()?;
            runs += 1;
        }
        best = best.min(start.elapsed().as_secs_f64() / f64::from(runs));
    }
    Ok(best)
}

fn reference_seconds() -> Result<f64> {
    let mut reference = ReferenceProduct::new(REFERENCE_SIZE);
    time_per_run(|| {
        reference.run();
        Ok(())
    })
}

/// Measures every case (or only those named in `only`), with the
/// optimizer named by `worsen` replaced by its [`weakened`] variant, and
/// times them when `with_time`.
pub fn measure(
    worsen: Option<&str>,
    with_time: bool,
    only: Option<&[String]>,
) -> Result<Vec<CaseResult>> {
    if let Some(name) = worsen {
        // An optimizer no case runs would leave the gate checking nothing.
        weakened(name)?;
        if !cases().iter().any(|c| c.optimizer == name) {
            return Err(DpError::InvalidParameter {
                name: "worsen",
                reason: format!("no regression case runs '{name}'"),
            });
        }
    }
    let reference = if with_time { reference_seconds()? } else { 1.0 };
    let mut out = Vec::new();
    for case in cases() {
        if only.is_some_and(|names| !names.iter().any(|n| n == case.name)) {
            continue;
        }
        let problem = Problem::from_gram((case.gram)()?, case.privacy)?;
        let opt = if worsen == Some(case.optimizer) {
            weakened(case.optimizer)?
        } else {
            dp_opt::by_name(case.optimizer)?
        };
        let result = opt.optimize(&problem, &mut ())?;
        let objective = problem.objective(result.strategy.as_ref())?;
        let seconds = if with_time {
            time_per_run(|| opt.optimize(&problem, &mut ()).map(|_| ()))?
        } else {
            0.0
        };
        out.push(CaseResult {
            name: case.name.into(),
            objective,
            time_ratio: seconds / reference,
            seconds,
        });
    }
    Ok(out)
}

/// Why a case fails the gate.
#[derive(Debug, Clone, PartialEq)]
pub enum Regression {
    /// Objective worse than the baseline beyond [`OBJECTIVE_TOLERANCE`]
    /// (or not a number).
    Objective {
        /// Case name.
        case: String,
        /// Measured objective.
        now: f64,
        /// Baseline objective.
        base: f64,
    },
    /// Time ratio above [`TIME_FACTOR`] times this processor kind's.
    Time {
        /// Case name.
        case: String,
        /// Measured ratio.
        now: f64,
        /// Baseline ratio.
        base: f64,
    },
    /// A baseline case that was not measured.
    Missing {
        /// Case name.
        case: String,
    },
}

impl fmt::Display for Regression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Objective { case, now, base } => write!(
                f,
                "{case}: objective {now:.10e} worse than the baseline {base:.10e} (relative {:.2e} > {OBJECTIVE_TOLERANCE:.0e})",
                now / base - 1.0,
            ),
            Self::Time { case, now, base } => write!(
                f,
                "{case}: time {now:.1}× the reference product, baseline {base:.1}× (limit {TIME_FACTOR}×)"
            ),
            Self::Missing { case } => write!(f, "{case}: not measured"),
        }
    }
}

/// Compares measured cases with the baseline: every regression, in
/// baseline order (objective before time within a case). Time ratios
/// count only against `times`, the ratios of this processor kind, and
/// only for cases long enough to time ([`MIN_TIMED_SECONDS`]).
pub fn compare(
    baseline: &Baseline,
    times: Option<&MachineRatios>,
    current: &[CaseResult],
) -> Vec<Regression> {
    let mut failures = Vec::new();
    for base in &baseline.objectives {
        let case = base.name.clone();
        let Some(now) = current.iter().find(|c| c.name == base.name) else {
            failures.push(Regression::Missing { case });
            continue;
        };
        // NaN compares as not-less-or-equal and fails.
        let within = |value: f64, limit: f64| value.partial_cmp(&limit).is_some_and(|o| o.is_le());
        if !within(now.objective, base.objective * (1.0 + OBJECTIVE_TOLERANCE)) {
            failures.push(Regression::Objective {
                case: case.clone(),
                now: now.objective,
                base: base.objective,
            });
        }
        let base_ratio = times.and_then(|t| t.ratio(&case));
        if let Some(base_ratio) = base_ratio.filter(|_| now.seconds >= MIN_TIMED_SECONDS)
            && !within(now.time_ratio, base_ratio * TIME_FACTOR)
        {
            failures.push(Regression::Time {
                case,
                now: now.time_ratio,
                base: base_ratio,
            });
        }
    }
    failures
}

/// Cases whose objective beats the baseline beyond the tolerance, as
/// messages that suggest blessing.
pub fn improvements(baseline: &Baseline, current: &[CaseResult]) -> Vec<String> {
    current
        .iter()
        .filter_map(|c| {
            let base = baseline.objectives.iter().find(|b| b.name == c.name)?;
            (c.objective < base.objective * (1.0 - OBJECTIVE_TOLERANCE)).then(|| {
                format!(
                    "{}: objective improved to {:.10e} (baseline {:.10e}); --bless to record",
                    c.name, c.objective, base.objective
                )
            })
        })
        .collect()
}

/// What the time half of the gate compared against.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TimeGate {
    /// Times were not measured (`--no-time`).
    Off,
    /// Gated against ratios of this processor kind.
    Gated {
        /// [`processor_key`].
        processor: String,
        /// `committed baseline` or the local store's path.
        source: String,
    },
    /// No ratios for this processor kind: measured, recorded in the local
    /// store (when one could be written), not gated this time.
    FirstRun {
        /// [`processor_key`].
        processor: String,
        /// Where the ratios were recorded, if anywhere.
        recorded: Option<String>,
    },
}

/// The outcome of one gate run.
#[derive(Debug, Clone)]
pub struct GateOutcome {
    /// Every case as measured (time ratios the best of up to three).
    pub cases: Vec<CaseResult>,
    /// What fails the gate.
    pub regressions: Vec<Regression>,
    /// Objectives better than the baseline.
    pub improvements: Vec<String>,
    /// What the times were compared against.
    pub time_gate: TimeGate,
}

/// Runs the gate against `baseline`: measures, re-times a case over its
/// time limit (twice at most, keeping its best ratio), and compares. Times
/// are gated against this processor's committed ratios, else those in
/// the local store at `local`; with neither, the measured ratios are
/// recorded there (not for a `worsen` run) and not gated.
pub fn check(
    baseline: &Baseline,
    worsen: Option<&str>,
    with_time: bool,
    local: Option<PathBuf>,
) -> Result<GateOutcome> {
    let processor = processor_key();
    let store = match &local {
        Some(path) if with_time => LocalTimes::read(path)?,
        _ => LocalTimes::default(),
    };
    let (times, source) = match (baseline.machine(&processor), store.machine(&processor)) {
        (Some(t), _) => (Some(t.clone()), "committed baseline".to_string()),
        (None, Some(t)) => (
            Some(t.clone()),
            local
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string()),
        ),
        (None, None) => (None, String::new()),
    };
    let times = times.filter(|_| with_time);
    let mut current = measure(worsen, with_time, None)?;
    for _ in 0..2 {
        let slow: Vec<String> = compare(baseline, times.as_ref(), &current)
            .into_iter()
            .filter_map(|r| match r {
                Regression::Time { case, .. } => Some(case),
                _ => None,
            })
            .collect();
        if slow.is_empty() {
            break;
        }
        for again in measure(worsen, true, Some(&slow))? {
            if let Some(c) = current.iter_mut().find(|c| c.name == again.name)
                && again.time_ratio < c.time_ratio
            {
                *c = again;
            }
        }
    }
    let time_gate = match (&times, with_time) {
        (_, false) => TimeGate::Off,
        (Some(_), true) => TimeGate::Gated { processor, source },
        (None, true) => {
            let recorded = match (&local, worsen) {
                (Some(path), None) => {
                    let mut store = store;
                    store.machines.push(machine_ratios(
                        &processor,
                        "recorded on this machine's first gate run".into(),
                        &current,
                    ));
                    // A store that cannot be written leaves this run
                    // ungated, as it would be anyway: not a failure.
                    store.write(path).ok().map(|()| path.display().to_string())
                }
                _ => None,
            };
            TimeGate::FirstRun {
                processor,
                recorded,
            }
        }
    };
    Ok(GateOutcome {
        regressions: compare(baseline, times.as_ref(), &current),
        improvements: improvements(baseline, &current),
        cases: current,
        time_gate,
    })
}

/// The time ratios of `cases` as this processor's entry, with the load
/// averages at the time in its note.
fn machine_ratios(processor: &str, why: String, cases: &[CaseResult]) -> MachineRatios {
    MachineRatios {
        processor: processor.into(),
        note: format!(
            "{why}; load averages {}",
            crate::procfs::load_averages_text()
        ),
        cases: cases
            .iter()
            .map(|c| RatioRecord {
                name: c.name.clone(),
                time_ratio: c.time_ratio,
            })
            .collect(),
    }
}

/// Blesses `baseline`: the objectives of one measurement, and this
/// processor's time ratios, each the median of three (the gate compares
/// the best of up to three, so a machine hiccup neither sets too tight a
/// baseline nor fails a run). Other processors' ratios are kept; `why`
/// goes into this processor's note.
pub fn bless(mut baseline: Baseline, worsen: Option<&str>, why: &str) -> Result<Baseline> {
    let runs = [
        measure(worsen, true, None)?,
        measure(worsen, true, None)?,
        measure(worsen, true, None)?,
    ];
    let cases = median_ratios(&runs);
    baseline.reference = REFERENCE_DESCRIPTION.into();
    baseline.objectives = cases
        .iter()
        .map(|c| ObjectiveRecord {
            name: c.name.clone(),
            objective: c.objective,
        })
        .collect();
    baseline.set_machine(machine_ratios(&processor_key(), why.into(), &cases));
    Ok(baseline)
}

/// The first run's cases, each with the median time ratio of the runs
/// that measured it.
fn median_ratios(runs: &[Vec<CaseResult>]) -> Vec<CaseResult> {
    let Some((first, rest)) = runs.split_first() else {
        return Vec::new();
    };
    let mut cases = first.clone();
    for c in &mut cases {
        let mut ratios = vec![c.time_ratio];
        ratios.extend(
            rest.iter()
                .filter_map(|run| run.iter().find(|o| o.name == c.name))
                .map(|o| o.time_ratio),
        );
        ratios.sort_by(f64::total_cmp);
        c.time_ratio = ratios[ratios.len() / 2];
    }
    cases
}
