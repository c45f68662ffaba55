//! The ε-DP optimizers (LRM, p-Identity, AM, ESM and the default) on a
//! battery of small workloads of every family, against independent truth:
//! the objective recomputed from the strategy, the identity strategy, and
//! COA's certified (ε,δ) optimum, which bounds every strategy's `l2_obj`
//! and hence (Δ₁ ≥ Δ₂) its `l1_obj` from below.

#![allow(clippy::unwrap_used)]

use dp_linalg::Mat;
use dp_opt::{PrivacyModel, Problem, by_name};
use dp_workloads::Workload;
use dp_workloads::workload::{AllRange, Prefix};

/// The registered optimizer `name` on `problem`.
fn run(name: &str, problem: &Problem) -> dp_opt::Optimized {
    by_name(name).unwrap().optimize(problem, &mut ()).unwrap()
}

/// Per battery workload: its name, its (ε,δ) problem, `optimizer`'s result
/// on it, and COA's certified lower bound, which that result must not be
/// below (checked here).
fn against_coa(optimizer: &str) -> Vec<(String, Problem, dp_opt::Optimized, f64)> {
    let mut out = Vec::new();
    for (name, gram) in battery() {
        let approx = Problem::from_gram(gram, PrivacyModel::Approx).unwrap();
        let bound = run("coa", &approx).report.certificate.unwrap().lower_bound;
        let got = run(optimizer, &approx);
        assert!(
            got.report.objective >= bound * (1.0 - 1e-7),
            "{name}: {optimizer} {} below COA's bound {bound}",
            got.report.objective
        );
        out.push((name, approx, got, bound));
    }
    out
}

fn battery() -> Vec<(String, Mat<f64>)> {
    let n = 32;
    let mut out: Vec<(String, Mat<f64>)> = vec![
        ("AllRange(32)".into(), AllRange::new(n).unwrap().gram()),
        ("Prefix(32)".into(), Prefix::new(n).unwrap().gram()),
    ];
    let explicit = |w: Mat<f64>| dp_linalg::gram(w.as_ref(), dp_linalg::Par::Seq);
    let wr = dp_workloads::generators::wrange(48, n, 3).unwrap();
    out.push(("WRange(48x32)".into(), wr.gram()));
    let perm: Vec<usize> = (0..n).map(|j| (j * 13 + 5) % n).collect();
    let g = wr.gram();
    out.push((
        "permuted WRange".into(),
        Mat::from_fn(n, n, |i, j| g[(perm[i], perm[j])]),
    ));
    out.push((
        "WMarginal(40x32)".into(),
        dp_workloads::generators::wmarginal(40, n, 5)
            .unwrap()
            .gram(),
    ));
    out.push((
        "WRelated(64x32, s=6)".into(),
        dp_workloads::generators::wrelated(64, n, 6, 9)
            .unwrap()
            .gram(),
    ));
    // Sparse 0/1 predicates, 3 cells each.
    out.push((
        "sparse predicates".into(),
        explicit(Mat::from_fn(40, n, |i, j| {
            f64::from(u8::from(
                j == i % n || j == (i * 7 + 3) % n || j == (i * 11 + 1) % n,
            ))
        })),
    ));
    // Rank-deficient: 20 ranges over 32 cells.
    out.push((
        "rank-deficient ranges".into(),
        explicit(Mat::from_fn(20, n, |i, j| {
            let (a, b) = ((i * 5) % n, (i * 5) % n + 1 + i % 9);
            f64::from(u8::from(j >= a && j <= b.min(n - 1)))
        })),
    ));
    // Rows scaled over four orders of magnitude.
    out.push((
        "scaled rows".into(),
        explicit(Mat::from_fn(40, n, |i, j| {
            let scale = 10f64.powi((i % 5) as i32 - 2);
            scale * f64::from(u8::from(j >= i % n && j <= (i % n + 6).min(n - 1)))
        })),
    ));
    out
}

#[test]
fn every_epsilon_optimizer_returns_a_valid_strategy_never_worse_than_identity() {
    for (name, gram) in battery() {
        let n = gram.nrows();
        let pure = Problem::from_gram(gram.clone(), PrivacyModel::Pure).unwrap();
        let approx = Problem::from_gram(gram.clone(), PrivacyModel::Approx).unwrap();
        let identity = Mat::<f64>::identity(n, n);
        let id_l1 = pure.objective(identity.as_ref()).unwrap();
        let coa = run("coa", &approx);
        let floor = coa.report.certificate.unwrap().lower_bound;
        for opt in ["lrm", "pidentity", "am", "esm", "epsilon-default"] {
            let r = run(opt, &pure);
            // Supported and finite: the objective recomputes from scratch.
            let recomputed = pure.objective(r.strategy.as_ref()).unwrap();
            assert!(recomputed.is_finite() && r.strategy.as_ref().is_all_finite());
            assert!(
                (recomputed - r.report.objective).abs() <= 1e-9 * recomputed,
                "{name} {opt}: report {} vs recomputed {recomputed}",
                r.report.objective
            );
            // No strategy beats the certified (ε,δ) bound.
            assert!(recomputed >= floor * (1.0 - 1e-7), "{name} {opt}");
            // Honest flag: a converged run says why.
            if r.report.converged() {
                assert!(!matches!(
                    r.report.termination,
                    dp_opt::Termination::MaxIterations { .. } | dp_opt::Termination::Timeout { .. }
                ));
            }
            if matches!(opt, "lrm" | "pidentity" | "epsilon-default") {
                assert!(
                    recomputed <= id_l1 * (1.0 + 1e-12),
                    "{name} {opt}: {recomputed} above identity {id_l1}"
                );
            }
        }
    }
}

/// The LRM paper's 3-query example (Yuan et al. 2012, §3): the paper
/// reports 39/ε² total (2·l1_obj with Laplace variance 2/ε²), noise on the
/// data 40/ε². LRM and p-Identity each land within 39.2/ε², never below
/// COA's certified (ε,δ) floor (l1_obj ≥ l2_obj ≥ the (ε,δ) optimum),
/// with sensitivity at most 1; p-Identity's is exactly 1 and it reports
/// convergence. (The paper's 39 is not a floor: LRM gets below it.)
#[test]
fn three_query_example_reaches_the_paper_optimum() {
    let w = [[0., 2., 1., 1.], [0., 1., 0., 2.], [1., 0., 2., 2.]];
    let w = Mat::from_fn(3, 4, |i, j| w[i][j]);
    let problem = Problem::from_workload(w.as_ref(), PrivacyModel::Pure).unwrap();
    let approx = Problem::from_workload(w.as_ref(), PrivacyModel::Approx).unwrap();
    let floor = run("coa", &approx).report.certificate.unwrap().lower_bound;
    for opt in ["lrm", "pidentity"] {
        let r = run(opt, &problem);
        let total = 2.0 * problem.objective(r.strategy.as_ref()).unwrap();
        assert!(
            total <= 39.2 && total >= 2.0 * floor * (1.0 - 1e-7),
            "{opt}: {total}"
        );
        let d1 = dp_core::sensitivity::sensitivity_l1(r.strategy.as_ref()).unwrap();
        assert!(d1 <= 1.0 + 1e-12, "{opt}: {d1}");
        if opt == "pidentity" {
            assert!(r.report.converged() && (d1 - 1.0).abs() < 1e-12, "{d1}");
        }
    }
}

/// ESM solves COA's program non-convexly (a local method, no
/// certificate): within 20% of COA's certified optimum on every workload
/// of the battery, and never below it.
#[test]
fn esm_is_within_twenty_percent_of_coa() {
    for (name, _, esm, opt) in against_coa("esm") {
        assert!(
            esm.report.objective <= 1.2 * opt,
            "{name}: ESM {} vs COA {opt} ({:?}, {} iterations)",
            esm.report.objective,
            esm.report.termination,
            esm.report.iterations
        );
    }
}

/// AM's (ε,δ) strategy is within its family's certificate and never below
/// COA's bound; the default ε-DP optimizer refuses (ε,δ) problems.
#[test]
fn am_certificate_and_default_optimizer_model() {
    for (name, approx, am, _) in against_coa("am") {
        let lb = am
            .report
            .diagnostics
            .iter()
            .find(|(k, _)| *k == "am_lower_bound")
            .unwrap()
            .1;
        assert!(lb <= am.report.objective * (1.0 + 1e-9), "{name}");
        assert!(
            by_name("epsilon-default")
                .unwrap()
                .optimize(&approx, &mut ())
                .is_err()
        );
    }
}

/// LRM's default solver leaves the identity on range workloads, where the
/// identity is a KKT point of formulation (7) (every column a vertex of its
/// L1 ball, `(WᵀW)ⱼⱼ ≥ (WᵀW)ᵢⱼ`): on WRange it must land well below the
/// identity and near p-Identity (an independent optimizer of the same
/// objective over a smaller family), in both of its regimes (the
/// eliminated-B form, r ≥ n, and the penalty path, r < n/2).
#[test]
fn lrm_beats_the_identity_on_ranges() {
    for (m, n) in [(96, 64), (16, 64)] {
        let w = dp_workloads::generators::wrange(m, n, 11).unwrap();
        let problem = Problem::from_gram(w.gram(), PrivacyModel::Pure).unwrap();
        let identity = problem
            .objective(Mat::<f64>::identity(n, n).as_ref())
            .unwrap();
        let lrm = run("lrm", &problem);
        let pid = by_name("pidentity")
            .unwrap()
            .optimize(&problem, &mut ())
            .unwrap();
        let recomputed = problem.objective(lrm.strategy.as_ref()).unwrap();
        eprintln!(
            "WRange({m}x{n}): identity {identity:.1} lrm {recomputed:.1} ({:?}) pidentity {:.1}",
            lrm.report.termination, pid.report.objective
        );
        assert!(
            (recomputed - lrm.report.objective).abs() <= 1e-9 * recomputed,
            "{recomputed} vs {}",
            lrm.report.objective
        );
        assert!(recomputed < 0.7 * identity, "{m}x{n}");
        assert!(recomputed < 1.1 * pid.report.objective, "{m}x{n}");
    }
}

/// LRM's (ε,δ) form (program (4) of the COA paper, columns of L in the
/// unit L2 ball) is a Burer–Monteiro factorization of COA's convex program
/// `min tr(WᵀW X⁻¹)` over `diag(X) ≤ 1` with `X = LᵀL`; with more rows
/// than L's rank its local minima are global (Journée, Bach, Absil and
/// Sepulchre 2010), so it should reach COA's certified optimum, and it can
/// never go below it. Its strategy is L2-normalized (Δ₂ = 1).
#[test]
fn lrm_approx_form_reaches_coa_optimum() {
    for (name, gram) in battery() {
        let approx = Problem::from_gram(gram.clone(), PrivacyModel::Approx).unwrap();
        let coa = run("coa", &approx);
        let floor = coa.report.certificate.unwrap().lower_bound;
        let lrm = run("lrm", &approx);
        let recomputed = approx.objective(lrm.strategy.as_ref()).unwrap();
        eprintln!(
            "{name}: COA {:.4} (floor {floor:.4}) LRM-L2 {recomputed:.4} ({:?})",
            coa.report.objective, lrm.report.termination
        );
        assert!(recomputed >= floor * (1.0 - 1e-7), "{name}");
        assert!(
            (recomputed - lrm.report.objective).abs() <= 1e-9 * recomputed,
            "{name}"
        );
        let n = gram.nrows();
        let delta2 = (0..n)
            .map(|j| {
                lrm.strategy
                    .col(j)
                    .iter()
                    .map(|v| v * v)
                    .sum::<f64>()
                    .sqrt()
            })
            .fold(0.0, f64::max);
        assert!((delta2 - 1.0).abs() < 1e-9, "{name}: Δ₂ = {delta2}");
        // Measured: within 0.11% on every workload here, low-rank ones
        // (the penalty path) included.
        assert!(
            recomputed <= 1.01 * floor,
            "{name}: LRM-L2 {recomputed} vs COA floor {floor}"
        );
    }
}
