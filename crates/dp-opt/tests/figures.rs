//! Issue 30 item 9: the figures an optimizer reports are what they claim.
//! On every 1-D workload family the project generates (AllRange, Prefix,
//! WRange, WDiscrete, WRelated, identity-like, and the same with rows
//! scaled over eight decades), under both privacy models and for every
//! registered optimizer, the reported objective is the returned
//! strategy's objective recomputed independently — from the explicit W
//! and the strategy's own SVD, never from `WᵀW` or a formed `AᵀA` — within
//! 1e-6 relative, and a reported lower bound never exceeds it.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use dp_core::evaluate_strategy;
use dp_linalg::Mat;
use dp_opt::{Params, PrivacyModel, Problem, REGISTRY};
use dp_workloads::Workload;
use dp_workloads::generators::{DiscreteEntries, wdiscrete, wrange, wrelated};
use dp_workloads::workload::{AllRange, Identity, Prefix};

/// W with row i scaled by 10^(−4 + 8i/(m−1)).
fn badly_scaled(w: &Mat<f64>) -> Mat<f64> {
    let m = w.nrows();
    Mat::from_fn(m, w.ncols(), |i, j| {
        w[(i, j)] * 10f64.powf(-4.0 + 8.0 * i as f64 / (m - 1).max(1) as f64)
    })
}

fn dense(w: impl Workload) -> Mat<f64> {
    w.explicit().unwrap()
}

fn families() -> Vec<(String, Mat<f64>)> {
    let n = 12;
    let plain = vec![
        ("AllRange", dense(AllRange::new(n).unwrap())),
        ("Prefix", dense(Prefix::new(n).unwrap())),
        ("WRange 18x12", dense(wrange(18, n, 3).unwrap())),
        (
            "WRange 6x12 (rank-deficient)",
            dense(wrange(6, n, 5).unwrap()),
        ),
        (
            "WDiscrete 16x12",
            dense(wdiscrete(16, n, DiscreteEntries::LRM, 7).unwrap()),
        ),
        ("WRelated 16x12 s=4", dense(wrelated(16, n, 4, 9).unwrap())),
        ("Identity", dense(Identity::new(n).unwrap())),
    ];
    let mut out = Vec::new();
    for (label, w) in plain {
        out.push((format!("badly scaled {label}"), badly_scaled(&w)));
        out.push((label.to_string(), w));
    }
    out
}

/// `Δ(A)² ‖W A⁺‖²_F` from the explicit W and A's thin SVD.
fn independent_objective(w: &Mat<f64>, a: &Mat<f64>, privacy: PrivacyModel) -> f64 {
    privacy.objective(&evaluate_strategy(w.as_ref(), a.as_ref()).unwrap())
}

#[test]
fn reported_objectives_are_the_returned_strategies_and_bounds_stay_below() {
    let mut failures = Vec::new();
    let mut worst: f64 = 0.0;
    for (label, w) in families() {
        for d in REGISTRY {
            for &privacy in d.privacy {
                let problem = Problem::from_workload(w.as_ref(), privacy).unwrap();
                let optimizer = d.build(&Params::default()).unwrap();
                let tag = format!("{} / {} / {label}", d.name, privacy.name());
                let out = match optimizer.optimize(&problem, &mut ()) {
                    Ok(out) => out,
                    // A typed refusal reports no figure. COA drops cells
                    // whose Gram diagonal is below 1e-14 of the largest
                    // (the scaled identity's first two, at 1e-8 and 3e-7
                    // of 1e8), and its completion misses them by more than
                    // the support tolerance: known, and no wrong figure.
                    Err(e) if d.name == "coa" && label == "badly scaled Identity" => {
                        assert!(e.to_string().contains("does not support"), "{tag}: {e}");
                        continue;
                    }
                    Err(e) => {
                        failures.push(format!("{tag}: error {e}"));
                        continue;
                    }
                };
                let truth = independent_objective(&w, &out.strategy, privacy);
                let reported = out.report.objective;
                let rel = (reported - truth).abs() / truth;
                worst = worst.max(rel);
                if rel.is_nan() || rel > 1e-6 {
                    failures.push(format!(
                        "{tag}: reported {reported:e}, recomputed {truth:e} ({rel:.1e})"
                    ));
                }
                if let Some(c) = out.report.certificate
                    && (c.lower_bound.is_nan() || c.lower_bound > reported)
                {
                    failures.push(format!(
                        "{tag}: lower bound {:e} above the objective {reported:e}",
                        c.lower_bound
                    ));
                }
            }
        }
    }
    eprintln!("worst relative difference {worst:.2e}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
