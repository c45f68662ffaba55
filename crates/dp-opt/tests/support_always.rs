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
        for d in REGISTRY {
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

/// The explicit matrix of a workload.
fn dense(w: impl dp_workloads::Workload) -> Mat<f64> {
    w.explicit().unwrap()
}

/// The SVD bound strategy supports the workload families, checked
/// against the explicit W: ranges, prefix, all ranges, sparse predicates,
/// 2-way marginals, low rank, rank-deficient ranges and rows scaled over
/// four orders of magnitude. On these (well conditioned, or exactly rank
/// deficient) the strategy from W's QR has the rank of the one from the
/// Gram alone, and the same `l2_obj` (`l1_obj` depends on the basis each
/// decomposition picks inside a repeated singular value's subspace).
#[test]
fn svdb_supports_the_workload_families() {
    use dp_workloads::generators::{DiscreteEntries, wdiscrete, wrange, wrelated};
    use dp_workloads::workload::{AllRange, Prefix};
    let n = 128;
    let ranges = dense(wrange(192, n, 3).unwrap());
    let scaled = Mat::from_fn(ranges.nrows(), n, |i, j| {
        ranges[(i, j)] * 10f64.powf(((i * 7) % 5) as f64 - 2.0)
    });
    let sparse = wdiscrete(160, n, DiscreteEntries::ZeroOne { p: 0.05 }, 5).unwrap();
    let marginals = dp_workloads::marginals::k_way_marginals(&[4, 4, 4], 2).unwrap();
    let families = vec![
        ("WRange 192x128", ranges),
        ("rows scaled over 4 orders", scaled),
        (
            "rank-deficient WRange 40x128",
            dense(wrange(40, n, 4).unwrap()),
        ),
        (
            "WRelated 160x128, s = 25",
            dense(wrelated(160, n, 25, 9).unwrap()),
        ),
        ("WDiscrete 160x128", dense(sparse)),
        ("Prefix 128", dense(Prefix::new(n).unwrap())),
        ("AllRange 64", dense(AllRange::new(64).unwrap())),
        ("2-way marginals 4x4x4", dense(marginals)),
    ];
    let svdb = dp_opt::by_name("svdb").unwrap();
    for (label, w) in families {
        for privacy in [dp_opt::PrivacyModel::Pure, dp_opt::PrivacyModel::Approx] {
            let problem = Problem::from_workload(w.as_ref(), privacy).unwrap();
            let out = svdb.optimize(&problem, &mut ()).unwrap();
            let support =
                check_support(w.as_ref(), out.strategy.as_ref(), DEFAULT_SUPPORT_TOLERANCE)
                    .unwrap();
            assert!(
                support.supported,
                "{label}: relative residual {:.2e}",
                support.relative_residual
            );
            let gram_only = Problem::from_gram(problem.gram().to_owned(), privacy).unwrap();
            let closed = svdb.optimize(&gram_only, &mut ()).unwrap();
            assert_eq!(
                out.strategy.nrows(),
                closed.strategy.nrows(),
                "{label}: rank"
            );
            let (objective, closed) = (out.report.objective, closed.report.objective);
            assert!(
                privacy == dp_opt::PrivacyModel::Pure
                    || (objective - closed).abs() <= 1e-9 * closed,
                "{label}: {objective} from W's QR vs {closed} from its Gram"
            );
        }
    }
}
