//! COA against independent truth: a brute-force optimum for n = 2, the SVD
//! lower bound, the closed-form strategies, and its own certificate.

#![allow(clippy::unwrap_used)]

use dp_linalg::Mat;
use dp_opt::optimizers::coa::Coa;
use dp_opt::optimizers::coa::interior_point::{InteriorPointOptions, minimize_trace_inverse};
use dp_opt::{PrivacyModel, Problem, StrategyOptimizer, by_name};
use dp_workloads::Workload;
use dp_workloads::workload::{AllRange, Prefix};

/// n = 2, `V = [[5, 2], [2, 1]]`: feasible `X = [[1, t], [t, 1]]`,
/// `F(t) = (V₁₁ + V₂₂ − 2tV₁₂)/(1 − t²)`, minimized by golden section;
/// both COA and its interior-point fallback (on the Gram root) reach it.
#[test]
fn two_cells_match_a_brute_force_search() {
    let v = Mat::from_fn(2, 2, |i, j| [[5.0, 2.0], [2.0, 1.0]][i][j]);
    let f = |t: f64| (v[(0, 0)] + v[(1, 1)] - 2.0 * t * v[(0, 1)]) / (1.0 - t * t);
    let (mut lo, mut hi) = (-0.999_999, 0.999_999);
    for _ in 0..200 {
        let (a, b) = (lo + (hi - lo) * 0.382, lo + (hi - lo) * 0.618);
        if f(a) < f(b) { hi = b } else { lo = a }
    }
    let best = f(0.5 * (lo + hi));
    let root = dp_linalg::gram_root(v.as_ref()).unwrap();
    let p = Problem::from_gram(v, PrivacyModel::Approx).unwrap();
    let r = Coa::default().optimize(&p, &mut ()).unwrap();
    assert!(r.report.converged());
    assert!(
        (r.report.objective - best).abs() < 1e-9 * best,
        "{} vs {best}",
        r.report.objective
    );
    let solved = minimize_trace_inverse(
        root.as_ref(),
        None,
        &InteriorPointOptions::default(),
        &mut (),
    )
    .unwrap();
    assert!(solved.termination.converged(), "{:?}", solved.termination);
    assert!(
        (solved.objective - best).abs() < 1e-7 * best,
        "{} vs {best}",
        solved.objective
    );
    assert!(solved.lower_bound <= best * (1.0 + 1e-12));
}

#[test]
fn certified_optimum_on_ranges_prefix_and_a_rank_deficient_workload() {
    let low_rank = Mat::from_fn(8, 24, |i, j| {
        (((i * 7 + j * 3) % 5) as f64) * ((i % 3) as f64 + 1.0)
    });
    let cases: Vec<(String, Mat<f64>, f64)> = vec![
        (
            "AllRange(24)".into(),
            AllRange::new(24).unwrap().gram(),
            1e-6,
        ),
        ("Prefix(40)".into(), Prefix::new(40).unwrap().gram(), 1e-6),
        (
            "low rank".into(),
            dp_linalg::gram(low_rank.as_ref(), dp_linalg::Par::Seq),
            1e-4,
        ),
    ];
    for (name, gram, tol) in cases {
        let p = Problem::from_gram(gram, PrivacyModel::Approx).unwrap();
        let r = Coa::default().optimize(&p, &mut ()).unwrap();
        let cert = r.report.certificate.unwrap();
        assert!(r.report.converged(), "{name}: {:?}", r.report.termination);
        assert!(
            cert.relative_gap <= tol,
            "{name}: gap {}",
            cert.relative_gap
        );
        let recomputed = p.objective(r.strategy.as_ref()).unwrap();
        assert!((recomputed - r.report.objective).abs() < 1e-9 * recomputed);
        assert!(
            recomputed >= p.svd_bound().unwrap() * (1.0 - 1e-9),
            "{name}"
        );
        assert!(cert.lower_bound <= recomputed * (1.0 + 1e-9), "{name}");
        for other in ["identity", "hierarchical", "wavelet", "svdb"] {
            let o = by_name(other).unwrap().optimize(&p, &mut ()).unwrap();
            assert!(
                recomputed <= o.report.objective * (1.0 + 1e-9),
                "{name}: {other} beats COA"
            );
        }
    }
}

#[test]
fn pure_privacy_and_bad_input_are_refused() {
    let p = Problem::from_gram(Prefix::new(4).unwrap().gram(), PrivacyModel::Pure).unwrap();
    assert!(Coa::default().optimize(&p, &mut ()).is_err());
    let mut nan = Prefix::new(3).unwrap().gram();
    nan[(0, 1)] = f64::NAN;
    assert!(Problem::from_gram(nan, PrivacyModel::Approx).is_err());
    let one = Problem::from_gram(Mat::from_fn(1, 1, |_, _| 4.0), PrivacyModel::Approx).unwrap();
    let r = Coa::default().optimize(&one, &mut ()).unwrap();
    assert!((r.report.objective - 4.0).abs() < 1e-12);
}

fn ranges(m: usize, n: usize, seed: u64) -> Mat<f64> {
    dp_workloads::generators::wrange(m, n, seed)
        .unwrap()
        .explicit()
        .unwrap()
}

/// The hidden-workload families of the issue at test size: every run must
/// certify itself, beat the closed forms, and agree with the paper's
/// Algorithm 3 (identity start, full homotopy) to within the gaps.
#[test]
fn battery_of_workload_families_is_certified() {
    use dp_opt::optimizers::coa::CoaOptions;
    let n = 64;
    let r = ranges(96, n, 3);
    // Permute the columns of the same ranges.
    let perm: Vec<usize> = (0..n).map(|j| (j * 37 + 11) % n).collect();
    let permuted = Mat::from_fn(r.nrows(), n, |i, j| r[(i, perm[j])]);
    let marg = dp_workloads::marginals::k_way_marginals(&[4, 4, 4], 2)
        .unwrap()
        .explicit()
        .unwrap();
    let sparse = dp_workloads::generators::wdiscrete(
        80,
        n,
        dp_workloads::generators::DiscreteEntries::ZeroOne { p: 0.05 },
        5,
    )
    .unwrap()
    .explicit()
    .unwrap();
    let low = dp_workloads::generators::wrelated(80, n, 12, 9)
        .unwrap()
        .explicit()
        .unwrap();
    let few_ranges = ranges(30, n, 4); // rank ≤ 30 < n
    let scaled = Mat::from_fn(r.nrows(), n, |i, j| {
        r[(i, j)] * 10f64.powf(((i * 7) % 5) as f64 - 2.0) // rows × 1e-2 … 1e2
    });
    let cases: Vec<(&str, Mat<f64>, f64)> = vec![
        ("ranges", r.clone(), 1e-6),
        ("permuted ranges", permuted, 1e-6),
        ("prefix", Prefix::new(n).unwrap().explicit().unwrap(), 1e-6),
        ("2-way marginals", marg, 1e-6),
        ("sparse predicates", sparse, 1e-6),
        ("low rank (s = 12)", low, 1e-4),
        ("rank-deficient ranges", few_ranges, 1e-4),
        ("rows scaled over 4 orders", scaled, 1e-4),
    ];
    for (name, w, tol) in cases {
        let p = Problem::from_workload(w.as_ref(), PrivacyModel::Approx).unwrap();
        let fast = Coa::default().optimize(&p, &mut ()).unwrap();
        let cert = fast.report.certificate.unwrap();
        assert!(
            fast.report.converged(),
            "{name}: {:?}",
            fast.report.termination
        );
        assert!(
            cert.relative_gap <= tol,
            "{name}: gap {}",
            cert.relative_gap
        );
        // The recomputed objective from W itself (not the Gram).
        let eval =
            dp_core::accuracy::evaluate_strategy(w.as_ref(), fast.strategy.as_ref()).unwrap();
        assert!(eval.support.supported, "{name}");
        assert!(
            (eval.l2_obj() - fast.report.objective).abs() <= 1e-8 * eval.l2_obj(),
            "{name}"
        );
        assert!(cert.lower_bound <= eval.l2_obj() * (1.0 + 1e-12), "{name}");
        // The dual bound dominates the SVD bound (its value at constant y);
        // 1e-7 covers the √(rounding-level eigenvalues) the SVD bound sums
        // for rank-deficient Grams and the root drops.
        let svd = p.svd_bound().unwrap();
        assert!(
            cert.lower_bound >= svd * (1.0 - 1e-7),
            "{name}: {} vs {svd}",
            cert.lower_bound
        );
        for other in ["identity", "hierarchical", "wavelet", "svdb"] {
            let o = by_name(other).unwrap().optimize(&p, &mut ()).unwrap();
            assert!(
                eval.l2_obj() <= o.report.objective * (1.0 + 1e-9),
                "{name}: {other}"
            );
        }
        let paper = Coa {
            options: CoaOptions::paper(),
        }
        .optimize(&p, &mut ())
        .unwrap();
        let both = fast.report.objective.max(paper.report.objective);
        assert!(
            (fast.report.objective - paper.report.objective).abs() <= 2.0 * tol * both,
            "{name}: default {} vs paper {}",
            fast.report.objective,
            paper.report.objective
        );
    }
}

/// No panic and no NaN: tiny, singular, huge-valued and idle-cell inputs,
/// each against a value known independently.
#[test]
fn robust_on_tiny_singular_and_huge_inputs() {
    let solve = |gram: Mat<f64>| {
        let p = Problem::from_gram(gram, PrivacyModel::Approx).unwrap();
        Coa::default()
            .optimize(&p, &mut ())
            .unwrap()
            .report
            .objective
    };
    // W = [1 1]: measuring x₁ + x₂ once (Δ₂ = 1) is optimal, error 1.
    assert!((solve(Mat::from_fn(2, 2, |_, _| 1.0)) - 1.0).abs() < 1e-9);
    // An idle cell changes nothing: same optimum as the 2-cell problem.
    let two = Mat::from_fn(2, 2, |i, j| [[2.0, 1.0], [1.0, 2.0]][i][j]);
    let with_idle = Mat::from_fn(
        3,
        3,
        |i, j| if i == 2 || j == 2 { 0.0 } else { two[(i, j)] },
    );
    let base = solve(two);
    assert!((solve(with_idle) - base).abs() < 1e-9 * base);
    // Scale invariance: F(cV) = c F(V), at c = 1e±150.
    let v = Mat::from_fn(5, 5, |i, j| 1.0 + (i.min(j)) as f64);
    let f = solve(v.clone());
    for c in [1e150, 1e-150] {
        let fc = solve(Mat::from_fn(5, 5, |i, j| c * v[(i, j)]));
        assert!((fc / c - f).abs() < 1e-9 * f, "scale {c}");
    }
    // n = 2 with a rank-1 Gram, and a Gram with an idle (zero) cell.
    for gram in [
        Mat::from_fn(2, 2, |_, _| 1.0),
        Mat::from_fn(3, 3, |i, j| {
            if i == 2 || j == 2 {
                0.0
            } else {
                [[2.0, 1.0], [1.0, 2.0]][i][j]
            }
        }),
        Mat::from_fn(5, 5, |i, j| 1e150 * (1.0 + (i.min(j)) as f64)),
        Mat::from_fn(5, 5, |i, j| 1e-150 * (1.0 + (i.min(j)) as f64)),
    ] {
        let p = Problem::from_gram(gram, PrivacyModel::Approx).unwrap();
        let r = Coa::default().optimize(&p, &mut ()).unwrap();
        assert!(r.report.objective.is_finite() && r.report.objective > 0.0);
        assert!(r.strategy.norm_max().is_finite());
        assert!(r.report.converged(), "{:?}", r.report.termination);
        // Δ₂ = 1.
        let d2 = (0..r.strategy.ncols())
            .map(|j| r.strategy.col(j).norm_l2())
            .fold(0.0, f64::max);
        assert!((d2 - 1.0).abs() < 1e-9);
    }
    // Zero and infinite workloads are refused before optimizing.
    assert!(Problem::from_gram(Mat::zeros(3, 3), PrivacyModel::Approx).is_err());
    let inf = Mat::from_fn(2, 2, |i, j| if i == j { f64::INFINITY } else { 0.0 });
    assert!(Problem::from_gram(inf, PrivacyModel::Approx).is_err());
    // Options out of range are refused.
    let mut bad = Coa::default();
    bad.options.theta_decay = 1.5;
    let p = Problem::from_gram(Prefix::new(4).unwrap().gram(), PrivacyModel::Approx).unwrap();
    assert!(bad.optimize(&p, &mut ()).is_err());
}

/// The Gaussian mechanism with COA's strategy: released answers are
/// unbiased and their mean squared error per query matches the closed
/// form `c² · (W (AᵀA)⁻¹ Wᵀ)ᵢᵢ` (Monte Carlo, 4,000 releases, fixed seed),
/// and the total is `l2_obj · c²`.
#[test]
fn gaussian_mechanism_with_the_coa_strategy_end_to_end() {
    let w = ranges(20, 16, 8);
    let budget = dp_core::PrivacyBudget::approx(0.5, 1e-6).unwrap();
    let (mech, report) =
        dp_opt::optimized_mechanism(&Coa::default(), w.as_ref(), budget, &mut ()).unwrap();
    assert!(report.converged());
    let noise = mech.noise();
    // The default (ε,δ) calibration: discrete Gaussian at the zCDP ρ of an
    // (ε,δ) session, σ = Δ₂/√(2ρ).
    let rho = dp_core::kernel::zcdp_rho_for(0.5, 1e-6).unwrap();
    // Bracketed independently: above the standard conversion's
    // (√(ε + ln 1/δ) − √ln 1/δ)² = 0.0044438 (ρ-zCDP ⇒ (ρ + 2√(ρ ln 1/δ), δ)),
    // which CKS20's exact conversion improves on, and below 0.0077012, the
    // largest ρ = Δ²/(2σ²) at which the continuous Gaussian's exact privacy
    // profile (Balle and Wang 2018) gives δ = 1e-6 at ε = 0.5 (no
    // conversion from zCDP alone can beat the mechanism's own profile);
    // both computed outside this code.
    assert!((0.004_443_8..0.007_701_2).contains(&rho), "{rho}");
    let c = (0.5 / rho).sqrt();
    assert!((noise.scale - c).abs() < 1e-9 * c, "σ = c·Δ₂ with Δ₂ = 1");
    let per_query =
        dp_core::accuracy::expected_per_query_squared_error(w.as_ref(), mech.strategy(), &noise)
            .unwrap();
    let total: f64 = per_query.iter().sum();
    assert!((total - report.objective * c * c).abs() < 1e-8 * total);
    let x: Vec<f64> = (0..16).map(|i| (i * 13 % 7) as f64 * 10.0).collect();
    let truth: Vec<f64> = (0..20)
        .map(|i| (0..16).map(|j| w[(i, j)] * x[j]).sum())
        .collect();
    let mut rng = dp_core::experiments::SeededSession::unlimited(42);
    let data = dp_core::PrivateHistogram::from_f64_counts(&x).unwrap();
    let reps = 4000;
    let mut sq = [0.0; 20];
    let mut bias = [0.0; 20];
    for _ in 0..reps {
        let a = mech.release(w.as_ref(), &data, &mut rng).unwrap();
        for i in 0..20 {
            let e = a[i] - truth[i];
            sq[i] += e * e / reps as f64;
            bias[i] += e / reps as f64;
        }
    }
    for i in 0..20 {
        // Squared Gaussian error: sd of the mean of e² is √2·v/√reps.
        let v = per_query[i];
        assert!(
            (sq[i] - v).abs() < 5.0 * (2.0f64).sqrt() * v / (reps as f64).sqrt(),
            "query {i}"
        );
        assert!(bias[i].abs() < 5.0 * (v / reps as f64).sqrt(), "query {i}");
    }
}

/// Ranges with rows scaled by 10^U(−k, k), rank-deficient (80 ranges over
/// 64 cells have coinciding endpoints) or made full rank by identity rows.
fn scaled_ranges(k: f64, with_identity: bool, seed: u64) -> Mat<f64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let n = 64;
    let base = ranges(80, n, seed);
    let rows = base.nrows() + if with_identity { n } else { 0 };
    let scales: Vec<f64> = (0..rows)
        .map(|_| 10f64.powf(rng.random_range(-k..k)))
        .collect();
    Mat::from_fn(rows, n, |i, j| {
        let v = if i < base.nrows() {
            base[(i, j)]
        } else {
            f64::from(u8::from(i - base.nrows() == j))
        };
        v * scales[i]
    })
}

/// Rows scaled over 4 and 6 orders of magnitude, rank-deficient and full
/// rank: the class on which Newton in X or in the dual multipliers stalls
/// without the interior-point fallback (gaps up to 6.7e-3, strategies 0.5%
/// above the optimum). Each run must be certified to the bar
/// (1e-4 for such workloads) and to COA's own tolerance plus the reported
/// rounding floor, support the explicit W, and report the objective the
/// error formula gives on W itself.
#[test]
fn badly_scaled_workloads_are_certified() {
    for (k, with_identity, seed) in [
        (2.0, false, 1),
        (2.0, false, 2),
        (3.0, false, 3),
        (3.0, false, 4),
        (2.0, true, 5),
        (3.0, true, 6),
    ] {
        let w = scaled_ranges(k, with_identity, seed);
        let name = format!("10^±{k} identity={with_identity} seed={seed}");
        let p = Problem::from_workload(w.as_ref(), PrivacyModel::Approx).unwrap();
        let r = Coa::default().optimize(&p, &mut ()).unwrap();
        let cert = r.report.certificate.unwrap();
        let floor = r
            .report
            .diagnostics
            .iter()
            .find(|d| d.0 == "rounding_floor")
            .map_or(0.0, |d| d.1);
        assert!(r.report.converged(), "{name}: {:?}", r.report.termination);
        assert!(
            cert.relative_gap <= 1e-4,
            "{name}: gap {}",
            cert.relative_gap
        );
        assert!(
            cert.relative_gap <= 1e-6 + floor,
            "{name}: gap {} floor {floor}",
            cert.relative_gap
        );
        let eval = dp_core::accuracy::evaluate_strategy(w.as_ref(), r.strategy.as_ref()).unwrap();
        assert!(eval.support.supported, "{name}");
        // The solver's objective comes from the Gram, whose root drops
        // directions below its rounding level (n·ε·λ_max); the explicit W
        // still has a little energy there (measured up to 1.7e-7 of the
        // objective at 10^±3), so the two agree to 1e-6 and the bar is
        // checked on W.
        assert!(
            (eval.l2_obj() - r.report.objective).abs() <= 1e-6 * eval.l2_obj(),
            "{name}"
        );
        let gap_on_w = (eval.l2_obj() - cert.lower_bound) / eval.l2_obj();
        assert!(gap_on_w <= 1e-4, "{name}: gap on W {gap_on_w}");
        assert!(cert.lower_bound <= eval.l2_obj(), "{name}");
    }
}
