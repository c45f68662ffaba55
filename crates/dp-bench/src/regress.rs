//! The regression gate behind `cargo xtask regress` (and `.ci/run`).
//!
//! Every optimizer runs on fixed, seeded workloads ([`cases`]); the
//! objective of its strategy, recomputed from the strategy with
//! [`Problem::objective`], and its time, as a ratio to a dense 256×256
//! product timed in the same run ([`ReferenceProduct`]), are compared with
//! a committed [`Baseline`]:
//!
//! - an objective worse than the baseline by more than a relative
//!   [`OBJECTIVE_TOLERANCE`] fails (an improvement is reported, and
//!   blessing records it);
//! - a time ratio above [`TIME_FACTOR`] times the baseline's fails.
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

use std::fmt;
use std::path::Path;
use std::time::Instant;

use dp_core::{DpError, Result};
use dp_linalg::Mat;
use dp_opt::{PrivacyModel, Problem, StrategyOptimizer};
use dp_workloads::Workload;
use dp_workloads::generators::wrange;
use dp_workloads::workload::{AllRange, Prefix};
use serde::{Deserialize, Serialize};

/// Relative objective worsening tolerated.
pub const OBJECTIVE_TOLERANCE: f64 = 1e-6;
/// Time-ratio growth tolerated.
pub const TIME_FACTOR: f64 = 1.5;
/// Size of the reference product the time ratios are relative to.
pub const REFERENCE_SIZE: usize = 256;
/// What the baseline's time ratios are relative to.
pub const REFERENCE_DESCRIPTION: &str = "dense 256x256 f64 product (faer), same run, one thread";

/// One measured case: a row of the baseline file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    /// Case name.
    pub name: String,
    /// Objective of the returned strategy.
    pub objective: f64,
    /// Seconds per run over the reference product's seconds (0 when not
    /// timed).
    pub time_ratio: f64,
}

/// The committed baseline (`xtask/regress-baseline.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// What the time ratios are relative to.
    pub reference: String,
    /// The cases.
    pub cases: Vec<CaseResult>,
}

impl Baseline {
    /// Reads a baseline file.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| DpError::Io(format!("cannot read {}: {e}", path.display())))?;
        serde_json::from_str(&text)
            .map_err(|e| DpError::Io(format!("bad baseline {}: {e}", path.display())))
    }

    /// Writes the baseline as pretty-printed JSON with a final newline.
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| DpError::Io(format!("cannot format the baseline: {e}")))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| DpError::Io(format!("cannot write {}: {e}", path.display())))
    }
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
        let time_ratio = if with_time {
            time_per_run(|| opt.optimize(&problem, &mut ()).map(|_| ()))? / reference
        } else {
            0.0
        };
        out.push(CaseResult {
            name: case.name.into(),
            objective,
            time_ratio,
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
    /// Time ratio above [`TIME_FACTOR`] times the baseline's.
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
/// count only when `with_time`.
pub fn compare(baseline: &Baseline, current: &[CaseResult], with_time: bool) -> Vec<Regression> {
    let mut failures = Vec::new();
    for base in &baseline.cases {
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
        if with_time && !within(now.time_ratio, base.time_ratio * TIME_FACTOR) {
            failures.push(Regression::Time {
                case,
                now: now.time_ratio,
                base: base.time_ratio,
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
            let base = baseline.cases.iter().find(|b| b.name == c.name)?;
            (c.objective < base.objective * (1.0 - OBJECTIVE_TOLERANCE)).then(|| {
                format!(
                    "{}: objective improved to {:.10e} (baseline {:.10e}); --bless to record",
                    c.name, c.objective, base.objective
                )
            })
        })
        .collect()
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
}

/// Runs the gate against `baseline`: measures, re-times a case over its
/// time limit (twice at most, keeping its best ratio), and compares.
pub fn check(baseline: &Baseline, worsen: Option<&str>, with_time: bool) -> Result<GateOutcome> {
    let mut current = measure(worsen, with_time, None)?;
    for _ in 0..2 {
        let slow: Vec<String> = compare(baseline, &current, with_time)
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
            if let Some(c) = current.iter_mut().find(|c| c.name == again.name) {
                c.time_ratio = c.time_ratio.min(again.time_ratio);
            }
        }
    }
    Ok(GateOutcome {
        regressions: compare(baseline, &current, with_time),
        improvements: improvements(baseline, &current),
        cases: current,
    })
}

/// A new baseline: objectives of one measurement, each time ratio the
/// median of three (the gate compares the best of up to three, so a
/// machine hiccup neither sets too tight a baseline nor fails a run).
pub fn bless(worsen: Option<&str>) -> Result<Baseline> {
    let runs = [
        measure(worsen, true, None)?,
        measure(worsen, true, None)?,
        measure(worsen, true, None)?,
    ];
    Ok(Baseline {
        reference: REFERENCE_DESCRIPTION.into(),
        cases: median_ratios(&runs),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, objective: f64, time_ratio: f64) -> CaseResult {
        CaseResult {
            name: name.into(),
            objective,
            time_ratio,
        }
    }

    fn baseline() -> Baseline {
        Baseline {
            reference: String::new(),
            cases: vec![
                case("a", 100.0, 10.0),
                case("b", 50.0, 2.0),
                case("c", 1.0, 1.0),
            ],
        }
    }

    #[test]
    fn compare_flags_worse_objectives_slower_runs_and_missing_cases() {
        let baseline = baseline();
        let current = vec![
            case("a", 100.0 * (1.0 + 2e-6), 10.0),
            case("b", 50.0 * (1.0 + 5e-7), 3.1),
        ];
        let f = compare(&baseline, &current, true);
        assert_eq!(f.len(), 3, "{f:?}");
        assert!(matches!(&f[0], Regression::Objective { case, .. } if case == "a"));
        assert!(matches!(&f[1], Regression::Time { case, .. } if case == "b"));
        assert_eq!(f[2], Regression::Missing { case: "c".into() });
        assert!(f[0].to_string().starts_with("a: objective"));
        assert!(f[1].to_string().starts_with("b: time 3.1× the reference"));
        assert_eq!(f[2].to_string(), "c: not measured");
        assert_eq!(compare(&baseline, &current, false).len(), 2);
        let fine = vec![
            case("a", 99.0, 14.9),
            case("b", 50.0, 3.0),
            case("c", 1.0, 1.0),
        ];
        assert!(compare(&baseline, &fine, true).is_empty());
        // NaN never passes.
        let nan = vec![
            case("a", f64::NAN, 1.0),
            case("b", 50.0, 1.0),
            case("c", 1.0, 1.0),
        ];
        assert_eq!(compare(&baseline, &nan, true).len(), 1);
    }

    #[test]
    fn improvements_are_beyond_the_tolerance_only() {
        let current = vec![
            case("a", 100.0 * (1.0 - 2e-6), 10.0),
            case("b", 50.0 * (1.0 - 5e-7), 2.0),
            case("z", 0.0, 0.0),
        ];
        let better = improvements(&baseline(), &current);
        assert_eq!(better.len(), 1, "{better:?}");
        assert!(better[0].starts_with("a: objective improved"));
    }

    #[test]
    fn blessed_ratios_are_medians_of_the_runs() {
        let runs = [
            vec![case("a", 1.0, 5.0), case("b", 2.0, 1.0)],
            vec![case("a", 9.0, 1.0), case("b", 9.0, 3.0)],
            vec![case("a", 9.0, 3.0)],
        ];
        let blessed = median_ratios(&runs);
        // a: median of {5, 1, 3}; b: of {1, 3} the upper middle; the
        // objectives are the first run's.
        assert_eq!(blessed, vec![case("a", 1.0, 3.0), case("b", 2.0, 3.0)]);
    }

    #[test]
    fn the_baseline_file_round_trips_and_bad_files_are_errors() {
        let dir = std::env::temp_dir().join(format!("dp-bench-regress-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join("baseline.json");
        baseline().write(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Baseline::read(&path).ok(), Some(baseline()));
        std::fs::write(&path, "{").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(Baseline::read(&path), Err(DpError::Io(_))));
        assert!(matches!(
            Baseline::read(&dir.join("absent.json")),
            Err(DpError::Io(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_case_names_its_optimizer_and_model_and_unknown_weakenings_are_refused() {
        for c in cases() {
            let prefix = format!("{}/{}/", c.optimizer, c.privacy.name());
            assert!(c.name.starts_with(&prefix), "{}", c.name);
        }
        for name in ["coa", "pidentity", "esm", "am", "lrm"] {
            assert!(weakened(name).is_ok(), "{name}");
        }
        assert!(matches!(
            weakened("wavelet"),
            Err(DpError::InvalidParameter { name: "worsen", .. })
        ));
        assert!(measure(Some("nonesuch"), false, Some(&[])).is_err());
    }
}
