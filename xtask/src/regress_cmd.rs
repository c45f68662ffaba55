//! `cargo xtask regress`: the regression gate `.ci/run` runs.
//!
//! Every optimizer runs on fixed, seeded workloads; the objective of its
//! strategy (recomputed from the strategy) and its time, as a ratio to a
//! dense 256×256 matrix product timed in the same run (everything on one
//! thread, so the ratio does not depend on free cores), are compared with
//! the committed baseline `xtask/regress-baseline.json`:
//!
//! - an objective worse than the baseline by more than a relative 1e-6
//!   fails (an improvement is reported, and `--bless` records it);
//! - a time ratio above 1.5× the baseline's fails.
//!
//! Times are per run, from repeating each case until at least 0.2 s have
//! passed (at least 3 runs) and taking the fastest of three such batches;
//! the reference product likewise; a case over its limit is timed again
//! (twice at most) and keeps its best ratio. `--bless` records the median
//! of three measurements. Measured on the 2-core machine, idle runs of the
//! same build differ by up to 1.7× on the smallest cases, which is why a
//! case gets three chances; a genuine 2× slowdown still fails. `--worsen NAME` deliberately weakens
//! one optimizer (COA: gap tolerance 0.05 and 2 Newton steps per stage;
//! the others: an iteration budget of 3, LRM's also a single penalty
//! stage) to show the gate catches it.
//!
//! A plain JSON baseline rather than an insta snapshot: the comparison is
//! a tolerance on numbers, which a textual snapshot cannot express.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use dp_core::{DpError, Result};
use dp_linalg::Mat;
use dp_opt::{PrivacyModel, Problem, StrategyOptimizer};
use dp_workloads::Workload;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::output::print_json;

/// Relative objective worsening tolerated.
const OBJECTIVE_TOLERANCE: f64 = 1e-6;
/// Time-ratio growth tolerated.
const TIME_FACTOR: f64 = 1.5;

/// Arguments of `cargo xtask regress`.
#[derive(Args, Debug)]
pub struct RegressArgs {
    /// Baseline file (default: xtask/regress-baseline.json in the
    /// workspace).
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Write the measured values as the new baseline instead of comparing.
    #[arg(long)]
    bless: bool,
    /// Deliberately weaken one optimizer (to test the gate).
    #[arg(long)]
    worsen: Option<String>,
    /// Skip the time comparison (objectives only).
    #[arg(long)]
    no_time: bool,
}

/// One measured case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    /// Case name.
    pub name: String,
    /// Objective of the returned strategy.
    pub objective: f64,
    /// Seconds per run over the reference product's seconds.
    pub time_ratio: f64,
}

/// The committed baseline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Baseline {
    /// What the time ratios are relative to.
    pub reference: String,
    /// The cases.
    pub cases: Vec<CaseResult>,
}

struct Case {
    name: &'static str,
    optimizer: &'static str,
    privacy: PrivacyModel,
    gram: fn() -> Result<Mat<f64>>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "coa/approx/AllRange(128)",
            optimizer: "coa",
            privacy: PrivacyModel::Approx,
            gram: || Ok(dp_workloads::workload::AllRange::new(128)?.gram()),
        },
        Case {
            name: "coa/approx/WRange(128x128,s1)",
            optimizer: "coa",
            privacy: PrivacyModel::Approx,
            gram: || Ok(dp_workloads::generators::wrange(128, 128, 1)?.gram()),
        },
        Case {
            name: "coa/approx/WRelated(128x128,r25,s2)",
            optimizer: "coa",
            privacy: PrivacyModel::Approx,
            gram: || Ok(dp_workloads::generators::wrelated(128, 128, 25, 2)?.gram()),
        },
        Case {
            name: "pidentity/pure/AllRange(64)",
            optimizer: "pidentity",
            privacy: PrivacyModel::Pure,
            gram: || Ok(dp_workloads::workload::AllRange::new(64)?.gram()),
        },
        Case {
            name: "am/approx/WRange(64x64,s3)",
            optimizer: "am",
            privacy: PrivacyModel::Approx,
            gram: || Ok(dp_workloads::generators::wrange(64, 64, 3)?.gram()),
        },
        Case {
            name: "esm/approx/AllRange(32)",
            optimizer: "esm",
            privacy: PrivacyModel::Approx,
            gram: || Ok(dp_workloads::workload::AllRange::new(32)?.gram()),
        },
        Case {
            name: "lrm/pure/WRange(32x32,s4)",
            optimizer: "lrm",
            privacy: PrivacyModel::Pure,
            gram: || Ok(dp_workloads::generators::wrange(32, 32, 4)?.gram()),
        },
        Case {
            name: "lrm/approx/WRange(32x32,s4)",
            optimizer: "lrm",
            privacy: PrivacyModel::Approx,
            gram: || Ok(dp_workloads::generators::wrange(32, 32, 4)?.gram()),
        },
        Case {
            name: "hierarchical/approx/Prefix(256)",
            optimizer: "hierarchical",
            privacy: PrivacyModel::Approx,
            gram: || Ok(dp_workloads::workload::Prefix::new(256)?.gram()),
        },
        Case {
            name: "wavelet/pure/AllRange(256)",
            optimizer: "wavelet",
            privacy: PrivacyModel::Pure,
            gram: || Ok(dp_workloads::workload::AllRange::new(256)?.gram()),
        },
    ]
}

/// The optimizer `name`, weakened (its registry entry's reduced settings)
/// if `worsen` names it.
fn optimizer(name: &str, worsen: bool) -> Result<Box<dyn StrategyOptimizer>> {
    let descriptor = dp_opt::registry::descriptor(name)?;
    if worsen {
        descriptor.weakened()
    } else {
        descriptor.build(&dp_opt::Params::default())
    }
}

/// Seconds per call of `f`: repeat until 0.2 s (at least 3 calls), best
/// of three batches.
fn time_per_run(mut f: impl FnMut() -> Result<()>) -> Result<f64> {
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
    let mut reference = crate::output::ReferenceProduct::new(256);
    time_per_run(|| {
        reference.run();
        Ok(())
    })
}

/// Measures every case (or only those named in `only`, if given).
pub fn measure(
    worsen: Option<&str>,
    with_time: bool,
    only: Option<&[String]>,
) -> Result<Vec<CaseResult>> {
    let reference = if with_time { reference_seconds()? } else { 1.0 };
    let mut out = Vec::new();
    for case in cases() {
        if only.is_some_and(|names| !names.iter().any(|n| n == case.name)) {
            continue;
        }
        let problem = Problem::from_gram((case.gram)()?, case.privacy)?;
        let opt = optimizer(case.optimizer, worsen == Some(case.optimizer))?;
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

/// Compares measured cases with the baseline: the regressions (objective
/// worse beyond 1e-6 relative, time ratio above 1.5×, case missing).
pub fn compare(baseline: &Baseline, current: &[CaseResult], with_time: bool) -> Vec<String> {
    let mut failures = Vec::new();
    for base in &baseline.cases {
        let Some(now) = current.iter().find(|c| c.name == base.name) else {
            failures.push(format!("{}: not measured", base.name));
            continue;
        };
        // NaN compares as not-less-or-equal and fails.
        let within = |value: f64, limit: f64| value.partial_cmp(&limit).is_some_and(|o| o.is_le());
        if !within(now.objective, base.objective * (1.0 + OBJECTIVE_TOLERANCE)) {
            failures.push(format!(
                "{}: objective {:.10e} worse than the baseline {:.10e} (relative {:.2e} > {:.0e})",
                base.name,
                now.objective,
                base.objective,
                now.objective / base.objective - 1.0,
                OBJECTIVE_TOLERANCE
            ));
        }
        if with_time && !within(now.time_ratio, base.time_ratio * TIME_FACTOR) {
            failures.push(format!(
                "{}: time {:.1}× the reference product, baseline {:.1}× (limit {TIME_FACTOR}×)",
                base.name, now.time_ratio, base.time_ratio
            ));
        }
    }
    failures
}

fn default_baseline() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regress-baseline.json")
}

pub fn run(args: &RegressArgs) -> Result<()> {
    // One thread for the reference product and the optimizers alike: the
    // ratio then does not depend on how many cores are free (measured on
    // the 2-core machine: with both threads, ratios moved 1.6× between
    // idle runs and 2× under load).
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()
        .map_err(|e| DpError::Io(format!("cannot configure the thread pool: {e}")))?;
    if let Some(name) = args.worsen.as_deref() {
        // An unknown name, one without a weakened variant or one no case
        // runs is an error, not a gate that silently checks nothing.
        dp_opt::registry::descriptor(name)?.weakened()?;
        if !cases().iter().any(|c| c.optimizer == name) {
            return Err(DpError::InvalidParameter {
                name: "worsen",
                reason: format!("no regression case runs '{name}'"),
            });
        }
    }
    let path = args.baseline.clone().unwrap_or_else(default_baseline);
    let with_time = !args.no_time;
    let mut current = measure(args.worsen.as_deref(), with_time || args.bless, None)?;
    if args.bless {
        // The recorded ratio is the median of three full measurements; the
        // gate compares the best of up to three (see above), so a machine
        // hiccup neither sets too tight a baseline nor fails a run.
        let again = [
            measure(args.worsen.as_deref(), true, None)?,
            measure(args.worsen.as_deref(), true, None)?,
        ];
        for c in &mut current {
            let mut ratios = vec![c.time_ratio];
            for run in &again {
                if let Some(other) = run.iter().find(|o| o.name == c.name) {
                    ratios.push(other.time_ratio);
                }
            }
            ratios.sort_by(f64::total_cmp);
            c.time_ratio = ratios[ratios.len() / 2];
        }
        let baseline = Baseline {
            reference: "dense 256x256 f64 product (faer), same run, one thread".into(),
            cases: current,
        };
        let text = serde_json::to_string_pretty(&baseline)
            .map_err(|e| DpError::Io(format!("cannot format the baseline: {e}")))?;
        std::fs::write(&path, text + "\n")
            .map_err(|e| DpError::Io(format!("cannot write {}: {e}", path.display())))?;
        return print_json(&json!({ "blessed": path.display().to_string() }));
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| DpError::Io(format!("cannot read {}: {e}", path.display())))?;
    let baseline: Baseline = serde_json::from_str(&text)
        .map_err(|e| DpError::Io(format!("bad baseline {}: {e}", path.display())))?;
    // A machine shared with other work makes single timings noisy: a case
    // over its time limit is measured again (twice at most, the reference
    // product with it) and keeps its best ratio before it counts.
    for _ in 0..2 {
        let slow: Vec<String> = compare(&baseline, &current, with_time)
            .iter()
            .filter(|f| f.contains(": time "))
            .filter_map(|f| f.split(": time ").next().map(str::to_owned))
            .collect();
        if slow.is_empty() {
            break;
        }
        for again in measure(args.worsen.as_deref(), true, Some(&slow))? {
            if let Some(c) = current.iter_mut().find(|c| c.name == again.name) {
                c.time_ratio = c.time_ratio.min(again.time_ratio);
            }
        }
    }
    let failures = compare(&baseline, &current, with_time);
    let improved: Vec<String> = current
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
        .collect();
    print_json(&json!({
        "cases": current,
        "regressions": failures,
        "improvements": improved,
    }))?;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(DpError::NotConverged {
            solver: "regress",
            reason: format!("{} regression(s): {}", failures.len(), failures.join("; ")),
        })
    }
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

    #[test]
    fn compare_flags_worse_objectives_slower_runs_and_missing_cases() {
        let baseline = Baseline {
            reference: String::new(),
            cases: vec![
                case("a", 100.0, 10.0),
                case("b", 50.0, 2.0),
                case("c", 1.0, 1.0),
            ],
        };
        let current = vec![
            case("a", 100.0 * (1.0 + 2e-6), 10.0),
            case("b", 50.0 * (1.0 + 5e-7), 3.1),
        ];
        let f = compare(&baseline, &current, true);
        assert_eq!(f.len(), 3, "{f:?}");
        assert!(f[0].starts_with("a: objective"));
        assert!(f[1].starts_with("b: time"));
        assert!(f[2].starts_with("c: not measured"));
        assert!(compare(&baseline, &current, false).len() == 2);
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
}
