//! Issue 17 item 6: every registered optimizer, on every awkward input it
//! accepts, returns a strategy that supports the explicit W (checked by
//! `dp_core::check_support` against W itself, not the Gram matrix the
//! optimizers see) with a finite objective equal to the report's.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use dp_core::mechanism::DEFAULT_SUPPORT_TOLERANCE;
use dp_core::{check_support, evaluate_strategy};
use dp_linalg::Mat;
use dp_opt::{Problem, REGISTRY};

/// WRange with row i scaled by 10^(−4 + 8i/(m−1)): Gram eigenvalues over
/// about sixteen decades, the case on which AM used to leave a relative
/// residual of 1e-6.
fn badly_scaled_ranges(m: usize, n: usize, seed: u64) -> Mat<f64> {
    let w = dp_workloads::generators::wrange(m, n, seed).unwrap();
    let w = w.matrix();
    Mat::from_fn(m, n, |i, j| {
        w[(i, j)] * 10f64.powf(-4.0 + 8.0 * i as f64 / (m - 1) as f64)
    })
}

fn awkward() -> Vec<(&'static str, Mat<f64>)> {
    let ranges = |m, n, seed| {
        dp_workloads::generators::wrange(m, n, seed)
            .unwrap()
            .matrix()
            .to_owned()
    };
    // Rank 2 over 12 cells: two ranges, each repeated with other weights.
    let base = ranges(2, 12, 7);
    let rank_deficient = Mat::from_fn(6, 12, |i, j| base[(i % 2, j)] * (1.0 + i as f64));
    vec![
        ("badly scaled WRange 24x16", badly_scaled_ranges(24, 16, 3)),
        ("badly scaled WRange 12x8", badly_scaled_ranges(12, 8, 11)),
        ("rank-deficient 6x12 (rank 2)", rank_deficient),
        (
            "single row 1x10",
            Mat::from_fn(1, 10, |_, j| 1.0 + j as f64),
        ),
        ("n = 1", Mat::from_fn(1, 1, |_, _| 3.0)),
        (
            "n = 2",
            Mat::from_fn(2, 2, |i, j| f64::from(u8::from(j <= i))),
        ),
        (
            "few cells 4x20",
            Mat::from_fn(4, 20, |i, j| match j {
                3 => 1.0,
                11 => (i + 1) as f64,
                _ => 0.0,
            }),
        ),
    ]
}

#[test]
fn every_optimizer_supports_every_awkward_workload() {
    let mut failures = Vec::new();
    for (label, w) in awkward() {
        for d in REGISTRY.iter() {
            for &privacy in d.privacy {
                let problem = Problem::from_workload(w.as_ref(), privacy).unwrap();
                let optimizer = d.build(&dp_opt::Params::default()).unwrap();
                let tag = format!("{} / {} / {label}", d.name, privacy.name());
                let out = match optimizer.optimize(&problem, &mut ()) {
                    Ok(out) => out,
                    Err(e) => {
                        failures.push(format!("{tag}: error {e}"));
                        continue;
                    }
                };
                let a = out.strategy.as_ref();
                let support = check_support(w.as_ref(), a, DEFAULT_SUPPORT_TOLERANCE).unwrap();
                if !support.supported {
                    failures.push(format!(
                        "{tag}: relative residual {:.2e}",
                        support.relative_residual
                    ));
                    continue;
                }
                let eval = evaluate_strategy(w.as_ref(), a).unwrap();
                let objective = privacy.objective(&eval);
                // The report's objective is the returned strategy's, as the
                // explicit W evaluates it (not the solver's bookkeeping). The
                // two go through different pseudo-inverses (of the Gram and of
                // W's rows); a repaired strategy's small-weight rows make AᵀA
                // ill-conditioned, so they agree only to about κ(AᵀA)·ε (the
                // single row differs by 1e-8 relative); 1e-6 still catches any
                // objective the solver kept from its own iterations.
                let reported = out.report.objective;
                if !(objective.is_finite()
                    && (reported - objective).abs() <= 1e-6 * objective.abs().max(1e-300))
                {
                    failures.push(format!("{tag}: objective {reported} vs {objective}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The SVD bound strategy is a closed form on the Gram's numerically
/// nonzero spectrum: where the bare closed form misses part of W, the
/// registry's `svdb` appends rows and says so in its report. (From the
/// Gram alone a direction W lacks cannot be told from one rounded away,
/// so a rank-deficient W gets rows too, at a small weight.)
#[test]
fn svdb_repairs_and_reports_where_the_closed_form_misses_w() {
    use dp_opt::StrategyOptimizer;
    let svdb = REGISTRY.iter().find(|d| d.name == "svdb").unwrap();
    let mut repaired = 0;
    for (label, w) in awkward() {
        for &privacy in svdb.privacy {
            let problem = Problem::from_workload(w.as_ref(), privacy).unwrap();
            let bare = dp_opt::classic::SvdBound
                .optimize(&problem, &mut ())
                .unwrap();
            let bare_support = check_support(
                w.as_ref(),
                bare.strategy.as_ref(),
                DEFAULT_SUPPORT_TOLERANCE,
            )
            .unwrap();
            let out = svdb
                .build(&dp_opt::Params::default())
                .unwrap()
                .optimize(&problem, &mut ())
                .unwrap();
            let appended = out
                .report
                .diagnostics
                .iter()
                .find(|(k, _)| *k == "support_rows_appended")
                .map_or(0.0, |(_, v)| *v);
            if bare_support.supported {
                continue;
            }
            repaired += 1;
            assert!(appended >= 1.0, "{label}: {appended}");
            assert_eq!(
                out.strategy.nrows(),
                bare.strategy.nrows() + appended as usize,
                "{label}"
            );
        }
    }
    // The badly scaled cases are what the repair is for.
    assert!(repaired >= 2, "{repaired}");
}
