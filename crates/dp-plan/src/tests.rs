//! Structured plans against their densified counterparts.

#![allow(clippy::unwrap_used)]

use dp_core::evaluate_strategy_gram;
use dp_linalg::Mat;
use dp_workloads::domain::Domain;
use dp_workloads::structured::{AttrSet, Factor, Queries, QueryGroup, StructuredWorkload};

use super::*;
use dp_opt::{Problem, StrategyOptimizer};

fn kron_group(label: &str, weight: f64, factors: Vec<Factor>) -> QueryGroup {
    QueryGroup {
        label: label.into(),
        weight,
        queries: Queries::Kron(factors),
    }
}

fn marginal_group(label: &str, weight: f64, sets: Vec<u128>) -> QueryGroup {
    QueryGroup {
        label: label.into(),
        weight,
        queries: Queries::Marginals(sets.into_iter().map(AttrSet::from_bits).collect()),
    }
}

/// On [`domain3`]: the 2-way marginals on {a, b} and {b, c} (weight 1),
/// `kron`, and the total with weight `total`.
fn two_way_kron_and_total(kron: QueryGroup, total: f64) -> StructuredWorkload {
    let groups = vec![
        marginal_group("two-way", 1.0, vec![0b011, 0b110]),
        kron,
        marginal_group("total", total, vec![0]),
    ];
    StructuredWorkload::new(domain3(), groups).unwrap()
}

fn dense_objective(w: &StructuredWorkload, a: &Mat<f64>, privacy: PrivacyModel) -> f64 {
    let eval = evaluate_strategy_gram(w.dense_gram().unwrap().as_ref(), a.as_ref()).unwrap();
    assert!(eval.support.supported);
    privacy.objective(&eval)
}

/// Checks the plan's objective, sensitivity and per-group objectives
/// against the dense strategy evaluated on the dense Grams.
fn check_against_dense(w: &StructuredWorkload, plan: &StructuredPlan) {
    let a = plan.strategy.dense().unwrap();
    let privacy = plan.privacy;
    let obj = dense_objective(w, &a, privacy);
    assert!(
        (obj - plan.objective).abs() <= 1e-10 * obj,
        "{obj} vs {}",
        plan.objective
    );
    let sens = match privacy {
        PrivacyModel::Approx => dp_core::sensitivity_l2(a.as_ref()).unwrap(),
        PrivacyModel::Pure => dp_core::sensitivity_l1(a.as_ref()).unwrap(),
    };
    assert!((sens - plan.sensitivity).abs() <= 1e-10 * sens);
    for (g, ge) in w.groups().iter().zip(&plan.groups) {
        let single = StructuredWorkload::new(w.domain().clone(), vec![g.clone()]).unwrap();
        let o = dense_objective(&single, &a, privacy);
        assert!(
            (o - ge.objective).abs() <= 1e-10 * obj,
            "{}: {o} vs {}",
            g.label,
            ge.objective
        );
        assert_eq!(ge.queries, single.num_queries());
    }
}

fn domain3() -> Domain {
    Domain::from_pairs(&[("a", 5), ("b", 4), ("c", 3)]).unwrap()
}

/// OPT_⊗ solves its factors with the registered optimizer it is given:
/// with `identity` under ε-DP the single product's strategy is I ⊗ I ⊗ I
/// (Δ₁ = 1), whose `l1_obj` is the trace of the densified workload Gram.
/// An optimizer that does not optimize for the plan's model is refused.
#[test]
fn the_factor_optimizer_comes_from_the_registry() {
    let w = single_product();
    let options = PlanOptions {
        factor_optimizer: Some(dp_opt::registry::descriptor("identity").unwrap()),
        ..PlanOptions::default()
    };
    let plan = plan_strategy(&w, PrivacyModel::Pure, &options).unwrap();
    assert_eq!(plan.method, "kron-identity");
    let g = w.dense_gram().unwrap();
    let trace: f64 = (0..g.nrows()).map(|i| g[(i, i)]).sum();
    assert!(
        (plan.objective - trace).abs() <= 1e-12 * trace,
        "{} vs {trace}",
        plan.objective
    );
    let default = plan_strategy(&w, PrivacyModel::Pure, &PlanOptions::default()).unwrap();
    assert_eq!(default.method, "kron-pidentity");
    let coa = PlanOptions {
        factor_optimizer: Some(dp_opt::registry::descriptor("coa").unwrap()),
        ..PlanOptions::default()
    };
    let refused = plan_strategy(&w, PrivacyModel::Pure, &coa);
    assert!(
        matches!(
            &refused,
            Err(DpError::InvalidParameter {
                name: "factor_optimizer",
                ..
            })
        ),
        "{refused:?}"
    );
}

/// AllRange(5) ⊗ Prefix(4) ⊗ two ranges of 3, weight 1.5.
fn single_product() -> StructuredWorkload {
    let factors = vec![
        Factor::AllRange(5),
        Factor::Prefix(4),
        Factor::ranges("c", 3, vec![(0, 1), (1, 2)]).unwrap(),
    ];
    StructuredWorkload::new(domain3(), vec![kron_group("k", 1.5, factors)]).unwrap()
}

#[test]
fn opt_kron_single_product_matches_dense_coa_within_the_certified_gap() {
    let w = single_product();
    let plan = plan_strategy(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    assert_eq!(plan.method, "kron-coa");
    check_against_dense(&w, &plan);
    let cert = plan.certificate.unwrap();
    assert!(cert.relative_gap <= 1e-6, "{cert:?}");
    let problem = Problem::from_gram(w.dense_gram().unwrap(), PrivacyModel::Approx).unwrap();
    let dense = dp_opt::optimizers::coa::Coa::default()
        .optimize(&problem, &mut ())
        .unwrap();
    let dense_cert = dense.report.certificate.unwrap();
    // Each side's lower bound is below the other's objective, and the two
    // optima agree within the larger certified gap.
    assert!(cert.lower_bound <= dense.report.objective * (1.0 + 1e-12));
    assert!(dense_cert.lower_bound <= plan.objective * (1.0 + 1e-12));
    let gap = cert.relative_gap.max(dense_cert.relative_gap);
    let diff = (plan.objective - dense.report.objective).abs() / plan.objective;
    assert!(diff <= gap + 1e-12, "{diff} > {gap}");
}

#[test]
fn identical_factors_and_closed_forms() {
    // AllRange(4)^{⊗3}: the objective is the cube of the 1-D optimum.
    let d = Domain::from_pairs(&[("a", 4), ("b", 4), ("c", 4)]).unwrap();
    let w = StructuredWorkload::new(
        d.clone(),
        vec![kron_group("k", 1.0, vec![Factor::AllRange(4); 3])],
    )
    .unwrap();
    let plan = plan_strategy(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    let one =
        Problem::from_gram(Factor::AllRange(4).gram().unwrap(), PrivacyModel::Approx).unwrap();
    let one = dp_opt::optimizers::coa::Coa::default()
        .optimize(&one, &mut ())
        .unwrap();
    let want = one.report.objective.powi(3);
    assert!((plan.objective - want).abs() <= 1e-10 * want);
    check_against_dense(&w, &plan);
    // Identity ⊗ total: l2_obj = n_a exactly (the SVD bound), strategy I ⊗ 1ᵀ.
    let w = StructuredWorkload::new(
        d,
        vec![kron_group(
            "k",
            2.0,
            vec![Factor::Identity(4), Factor::Total(4), Factor::Total(4)],
        )],
    )
    .unwrap();
    let plan = kron::opt_kron(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    assert!((plan.objective - 4.0 * 4.0).abs() <= 1e-12 * 16.0);
    assert!(plan.certificate.unwrap().relative_gap.abs() <= 1e-12);
}

/// On [`domain3`]: two Kronecker products (20 and 30 rows) and two
/// marginals (15 and 1 rows), with different weights.
fn kron_union() -> StructuredWorkload {
    let groups = vec![
        kron_group(
            "k1",
            1.0,
            vec![Factor::Prefix(5), Factor::Identity(4), Factor::Total(3)],
        ),
        kron_group(
            "k2",
            0.5,
            vec![Factor::Total(5), Factor::AllRange(4), Factor::Identity(3)],
        ),
        marginal_group("m", 2.0, vec![0b101, 0b000]),
    ];
    StructuredWorkload::new(domain3(), groups).unwrap()
}

#[test]
fn opt_kron_unions_match_dense_for_both_models() {
    let w = kron_union();
    for privacy in [PrivacyModel::Approx, PrivacyModel::Pure] {
        let plan = plan_strategy(&w, privacy, &PlanOptions::default()).unwrap();
        check_against_dense(&w, &plan);
        assert!(plan.rounds >= 2);
        // Never worse than measuring the identity (what one pass starts from
        // is no better than the identity after optimization).
        let ident = dense_objective(&w, &Mat::identity(60, 60), privacy);
        assert!(
            plan.objective <= ident,
            "{privacy:?}: {} > {ident}",
            plan.objective
        );
    }
}

/// OPT_⊗ on `w` with 1 to `most` passes allowed, both privacy models:
/// the passes are deterministic and the best one is kept, so allowing more
/// never gives a worse plan; `check` sees each plan and its budget.
fn passes_never_worsen(
    w: &StructuredWorkload,
    most: usize,
    check: impl Fn(&StructuredPlan, usize),
) {
    for privacy in [PrivacyModel::Approx, PrivacyModel::Pure] {
        let mut previous = f64::INFINITY;
        for max_rounds in 1..=most {
            let options = PlanOptions {
                max_rounds,
                ..PlanOptions::default()
            };
            let plan = kron::opt_kron(w, privacy, &options).unwrap();
            check(&plan, max_rounds);
            assert!(
                plan.objective <= previous * (1.0 + 1e-12),
                "{privacy:?}, {max_rounds} passes: {} > {previous}",
                plan.objective
            );
            previous = plan.objective;
        }
    }
}

/// On a small union: each plan is the dense evaluation of its own
/// strategy, and its termination says how the passes ended: at the budget
/// (one pass never ends a union otherwise), or by the rule that stopped
/// them early.
#[test]
fn opt_kron_keeps_its_best_pass_and_says_how_the_passes_ended() {
    let w = kron_union();
    passes_never_worsen(&w, 6, |plan, max_rounds| {
        check_against_dense(&w, plan);
        match &plan.termination {
            Termination::MaxIterations { iterations } => {
                assert_eq!((*iterations, plan.rounds), (max_rounds, max_rounds));
            }
            Termination::Converged { .. } | Termination::Stalled { .. } => {
                assert!(max_rounds > 1 && plan.rounds <= max_rounds);
            }
            other => panic!("{other}"),
        }
    });
    // A single product: one pass, converged.
    let d = Domain::from_pairs(&[("a", 4), ("b", 4)]).unwrap();
    let factors = vec![Factor::AllRange(4), Factor::Prefix(4)];
    let w = StructuredWorkload::new(d, vec![kron_group("k", 1.0, factors)]).unwrap();
    let plan = kron::opt_kron(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    assert_eq!(plan.rounds, 1);
    assert!(plan.termination.converged(), "{}", plan.termination);
    // `opt_kron` checks its options itself.
    let bad = PlanOptions {
        max_rounds: 0,
        ..PlanOptions::default()
    };
    assert!(kron::opt_kron(&w, PrivacyModel::Approx, &bad).is_err());
}

/// The same on the CPS 1988 spec (109,440 cells, too many to densify),
/// where p-Identity's local factor solves let a pass raise the objective:
/// each plan's objective is the Kronecker evaluation of its own factors.
#[test]
fn opt_kron_on_cps_keeps_its_best_pass() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cps1988/spec.json");
    let w = dp_workloads::spec::load_spec(&path).unwrap();
    let raised = std::cell::Cell::new(false);
    passes_never_worsen(&w, 10, |plan, _| {
        if let Termination::Stalled { reason } = &plan.termination {
            raised.set(raised.get() || reason.contains("raised the objective"));
        }
        let [term] = plan.strategy.terms.as_slice() else {
            panic!("OPT_⊗ gives one product, not {}", plan.strategy.terms.len())
        };
        let factors: Vec<Mat<f64>> = term.factors.iter().map(|(_, a)| (**a).clone()).collect();
        let own = evaluate::kron_objective(&w, &factors, plan.privacy).unwrap();
        assert!(
            (own - plan.objective).abs() <= 1e-10 * own,
            "{own} vs {}",
            plan.objective
        );
    });
    assert!(
        raised.get(),
        "no run ended on a pass that raised the objective"
    );
}

/// A rise within the pass's summed certified factor gaps is rounding of
/// exact solves (converged); past them and the round tolerance, a stall;
/// and only converged, certified solves contribute a gap.
#[test]
fn a_rise_within_the_factor_gaps_is_convergence() {
    let options = PlanOptions::default();
    let end = |slack| kron::passes_end(2, (1.0, 1.0 + 5e-6, slack), &options, f64::INFINITY);
    assert!(matches!(end(1e-5), Some(Termination::Converged { .. })));
    assert!(matches!(end(0.0), Some(Termination::Stalled { .. })));
    assert!(matches!(end(1e-6), Some(Termination::Stalled { .. })));
    // Improvements are judged by the round tolerance alone.
    let improved = kron::passes_end(2, (1.0 + 5e-7, 1.0, 0.0), &options, f64::INFINITY);
    assert!(matches!(improved, Some(Termination::Converged { .. })));
    assert!(kron::passes_end(2, (2.0, 1.0, 1.0), &options, f64::INFINITY).is_none());
    // Only a converged solve's certificate excuses a rise: COA stopped
    // short (gap 1 when it found no bound) or uncertified excuses none.
    let cert = |relative_gap| {
        Some(Certificate {
            lower_bound: 1.0 - relative_gap,
            relative_gap,
        })
    };
    let converged = Termination::Converged {
        criterion: "gap".into(),
    };
    let short = Termination::MaxIterations { iterations: 10 };
    assert_eq!(kron::certified_slack(&converged, cert(3e-7)), 3e-7);
    assert_eq!(kron::certified_slack(&short, cert(1.0)), 0.0);
    assert_eq!(kron::certified_slack(&converged, None), 0.0);
    assert_eq!(kron::certified_slack(&converged, cert(f64::NAN)), 0.0);
}

#[test]
fn marginal_closed_form_attains_the_dense_svd_bound() {
    let w = two_way_kron_and_total(
        kron_group(
            "a",
            3.0,
            vec![Factor::Identity(5), Factor::Total(4), Factor::Total(3)],
        ),
        0.3,
    );
    let plan = plan_strategy(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    assert_eq!(plan.method, "residual");
    check_against_dense(&w, &plan);
    // The dense SVD bound.
    let bound = dp_core::svd_lower_bound_from_gram(w.dense_gram().unwrap().as_ref()).unwrap();
    assert!(
        (plan.objective - bound).abs() <= 1e-10 * bound,
        "{} vs {bound}",
        plan.objective
    );
    let cert = plan.certificate.unwrap();
    assert!(cert.relative_gap.abs() <= 1e-12);
    // Attained: strictly better than OPT_⊗ can certify on this union.
    let kron = kron::opt_kron(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    assert!(kron.objective >= plan.objective * (1.0 - 1e-12));
}

#[test]
fn bad_options_are_refused() {
    let w = kron_union();
    let bad = PlanOptions {
        max_rounds: 0,
        ..PlanOptions::default()
    };
    assert!(plan_strategy(&w, PrivacyModel::Pure, &bad).is_err());
    let bad = PlanOptions {
        round_tolerance: f64::NAN,
        ..PlanOptions::default()
    };
    assert!(plan_strategy(&w, PrivacyModel::Pure, &bad).is_err());
    for t in [f64::NAN, -1.0] {
        let bad = PlanOptions {
            max_seconds: Some(t),
            ..PlanOptions::default()
        };
        assert!(plan_strategy(&w, PrivacyModel::Pure, &bad).is_err());
        assert!(kron::opt_kron(&w, PrivacyModel::Approx, &bad).is_err());
    }
}

/// A zero-second budget makes no pass: the plan is the identity factors
/// the passes start from (Δ = 1, objective `tr(WᵀW)` under both models),
/// ended by the clock after 0 rounds; an unreached time limit changes
/// nothing.
#[test]
fn opt_kron_with_a_zero_second_budget_returns_the_identity_start() {
    let w = kron_union();
    let g = w.dense_gram().unwrap();
    let trace: f64 = (0..g.nrows()).map(|i| g[(i, i)]).sum();
    for privacy in [PrivacyModel::Approx, PrivacyModel::Pure] {
        let timed = PlanOptions {
            max_seconds: Some(0.0),
            ..PlanOptions::default()
        };
        let plan = kron::opt_kron(&w, privacy, &timed).unwrap();
        assert_eq!(plan.termination, Termination::Timeout { seconds: 0.0 });
        assert_eq!(plan.rounds, 0);
        assert_eq!(plan.sensitivity, 1.0);
        assert!(
            (plan.objective - trace).abs() <= 1e-12 * trace,
            "{privacy:?}: {} vs {trace}",
            plan.objective
        );
        check_against_dense(&w, &plan);
        let [term] = plan.strategy.terms.as_slice() else {
            panic!("one product expected")
        };
        for (i, a) in &term.factors {
            let n = plan.strategy.shape[*i];
            assert_eq!(**a, Mat::<f64>::identity(n, n));
        }
        let unlimited = kron::opt_kron(&w, privacy, &PlanOptions::default()).unwrap();
        let generous = PlanOptions {
            max_seconds: Some(1e9),
            ..PlanOptions::default()
        };
        let limited = kron::opt_kron(&w, privacy, &generous).unwrap();
        assert_eq!(limited.objective.to_bits(), unlimited.objective.to_bits());
        assert_eq!(
            (limited.rounds, &limited.termination),
            (unlimited.rounds, &unlimited.termination)
        );
    }
}

#[test]
fn plan_report_errors_match_dense_per_query_errors() {
    use dp_core::{GaussianCalibration, NoiseCalibration, PrivacyBudget};
    let w = kron_union();
    for budget in [
        PrivacyBudget::pure(0.7).unwrap(),
        PrivacyBudget::approx(0.9, 1e-6).unwrap(),
    ] {
        let (plan, report) = plan::plan_workload(
            &w,
            budget,
            GaussianCalibration::Analytic,
            &PlanOptions::default(),
        )
        .unwrap();
        let a = plan.strategy.dense().unwrap();
        let noise =
            NoiseCalibration::for_strategy(a.as_ref(), budget, GaussianCalibration::Analytic)
                .unwrap();
        assert!((noise.scale - report.noise_scale).abs() <= 1e-12 * noise.scale);
        let wm = w.dense_matrix().unwrap();
        let per_query =
            dp_core::expected_per_query_squared_error(wm.as_ref(), a.as_ref(), &noise).unwrap();
        let weighted: f64 = per_query.iter().sum();
        let objective =
            report.figures.objective * noise.variance() / (plan.sensitivity * plan.sensitivity);
        assert!((weighted - objective).abs() <= 1e-10 * weighted);
        // The groups' rows, in order: 20, 30 and 15 + 1, of weights 1,
        // 0.5 and 2; errors per answer as released, unweighted.
        let mut start = 0;
        let mut total = 0.0;
        for ((rows, weight), g) in [(20, 1.0), (30, 0.5), (16, 2.0)]
            .into_iter()
            .zip(&report.groups)
        {
            let err: f64 = per_query[start..start + rows].iter().sum::<f64>() / (weight * weight);
            total += err;
            let rmse = (err / rows as f64).sqrt();
            assert_eq!(g.queries, rows as f64);
            assert!((err - g.expected_squared_error).abs() <= 1e-10 * err);
            assert!((rmse - g.rmse).abs() <= 1e-10 * rmse, "{}", g.label);
            start += rows;
        }
        assert_eq!((start, report.groups.len()), (per_query.len(), 3));
        assert!((total - report.expected_total_squared_error).abs() <= 1e-10 * total);
        let file = plan::plan_file(&w, &plan);
        assert_eq!(file.terms.len(), plan.strategy.terms.len());
    }
}

/// Every k-way marginal of `domain` with weight 1, as one group.
fn all_k_way(domain: &Domain, k: u32) -> StructuredWorkload {
    let d = domain.len();
    let sets: Vec<u128> = (0..1u128 << d).filter(|s| s.count_ones() == k).collect();
    StructuredWorkload::new(
        domain.clone(),
        vec![marginal_group(&format!("{k}-way"), 1.0, sets)],
    )
    .unwrap()
}

/// The dense OPT_M strategy `[θ_S M_S]` on `sets`.
fn dense_marginals_strategy(w: &StructuredWorkload, sets: &[AttrSet], theta: &[f64]) -> Mat<f64> {
    let n = w.domain().cells("densify").unwrap();
    let blocks: Vec<Mat<f64>> = sets
        .iter()
        .zip(theta)
        .map(|(s, &t)| {
            let mats: Vec<Mat<f64>> = w
                .marginal_factors(s)
                .iter()
                .map(|f| f.explicit().unwrap())
                .collect();
            dp_workloads::structured::kron_all(&mats) * t
        })
        .collect();
    dp_linalg::stack_rows(&blocks, n).unwrap()
}

fn mixed_marginal_workload() -> StructuredWorkload {
    two_way_kron_and_total(
        kron_group(
            "c",
            2.5,
            vec![Factor::Total(5), Factor::Total(4), Factor::Identity(3)],
        ),
        0.4,
    )
}

#[test]
fn opt_m_objective_equals_the_densified_l1_obj_for_both_families() {
    let w = mixed_marginal_workload();
    let weights = w.marginal_weights().unwrap();
    // Full power set (8 sets) and the workload's down-set
    // ({∅, a, b, c, ab, bc}).
    for (full_max, size) in [(16, 8), (0, 6)] {
        let family = opt_m::Family::new(&w.domain().shape(), &weights, full_max).unwrap();
        assert_eq!(family.sets.len(), size);
        for seed in 0..3u32 {
            let theta: Vec<f64> = (0..size)
                .map(|k| 0.2 + ((k as f64 + 1.0) * (seed as f64 + 1.7)).sin().abs())
                .collect();
            let closed = family.ln_objective(&theta, None).exp();
            let a = dense_marginals_strategy(&w, &family.sets, &theta);
            let dense = dense_objective(&w, &a, PrivacyModel::Pure);
            assert!(
                (closed - dense).abs() <= 1e-10 * dense,
                "{closed} vs {dense}"
            );
        }
    }
    // A strategy without the 2-way marginal on {b, c} nor {a, b, c} does
    // not support the workload: +∞, as the dense support test says.
    let family = opt_m::Family::new(&w.domain().shape(), &weights, 16).unwrap();
    let theta: Vec<f64> = family
        .sets
        .iter()
        .map(|s| {
            if s.contains(1) && s.contains(2) {
                0.0
            } else {
                1.0
            }
        })
        .collect();
    assert_eq!(family.ln_objective(&theta, None), f64::INFINITY);
    let a = dense_marginals_strategy(&w, &family.sets, &theta);
    let eval = evaluate_strategy_gram(w.dense_gram().unwrap().as_ref(), a.as_ref()).unwrap();
    assert!(!eval.support.supported);
}

#[test]
fn opt_m_gradient_matches_finite_differences() {
    let w = mixed_marginal_workload();
    let weights = w.marginal_weights().unwrap();
    for full_max in [16, 0] {
        let family = opt_m::Family::new(&w.domain().shape(), &weights, full_max).unwrap();
        let theta: Vec<f64> = (0..family.sets.len())
            .map(|k| 0.3 + 0.1 * k as f64)
            .collect();
        let mut g = vec![0.0; theta.len()];
        family.ln_objective(&theta, Some(&mut g));
        for k in 0..theta.len() {
            let h = 1e-6;
            let (mut up, mut down) = (theta.clone(), theta.clone());
            up[k] += h;
            down[k] -= h;
            let fd =
                (family.ln_objective(&up, None) - family.ln_objective(&down, None)) / (2.0 * h);
            assert!(
                (fd - g[k]).abs() <= 1e-7 * (1.0 + g[k].abs()),
                "{k}: {fd} vs {}",
                g[k]
            );
        }
    }
}

#[test]
fn opt_m_beats_kron_pidentity_on_all_two_way_marginals_of_six_attributes() {
    let domain =
        Domain::from_pairs(&[("a", 3), ("b", 3), ("c", 3), ("d", 3), ("e", 3), ("f", 3)]).unwrap();
    let w = all_k_way(&domain, 2);
    let weights = w.marginal_weights().unwrap();
    let m = opt_m::opt_marginals(&w, &weights, &opt_m::OptMOptions::default()).unwrap();
    let k = kron::opt_kron(&w, PrivacyModel::Pure, &PlanOptions::default()).unwrap();
    assert!(
        m.objective <= k.objective,
        "{} > {}",
        m.objective,
        k.objective
    );
    check_against_dense(&w, &m);
    assert!((m.sensitivity - 1.0).abs() <= 1e-12);
    // plan_strategy keeps the better one and certifies it by the SVD
    // bound, which is below it.
    let plan = plan_strategy(&w, PrivacyModel::Pure, &PlanOptions::default()).unwrap();
    assert_eq!(plan.method, "opt-m");
    assert_eq!(plan.objective, m.objective);
    let cert = plan.certificate.unwrap();
    assert!(cert.lower_bound <= plan.objective && cert.relative_gap > 0.0);
    // Measuring each workload marginal once with equal weights, a point
    // of the template, is no better than the optimum.
    let family = opt_m::Family::new(&domain.shape(), &weights, 16).unwrap();
    let equal: Vec<f64> = family
        .sets
        .iter()
        .map(|s| if s.len() == 2 { 1.0 } else { 0.0 })
        .collect();
    let naive = family.ln_objective(&equal, None).exp();
    assert!(
        m.objective <= naive * (1.0 + 1e-12),
        "{} > {naive}",
        m.objective
    );
}

#[test]
fn plan_file_keys_factors_in_domain_order() {
    let d = Domain::from_pairs(&[("zeta", 3), ("alpha", 2)]).unwrap();
    let w = StructuredWorkload::new(
        d,
        vec![kron_group(
            "k",
            1.0,
            vec![Factor::Prefix(3), Factor::Identity(2)],
        )],
    )
    .unwrap();
    let plan = plan_strategy(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    let text = serde_json::to_string(&plan::plan_file(&w, &plan).terms[0]).unwrap();
    let (z, a) = (
        text.find("\"zeta\"").unwrap(),
        text.find("\"alpha\"").unwrap(),
    );
    assert!(z < a, "{text}");
}

#[test]
fn evaluated_kron_and_marginals_strategies_match_dense() {
    let w = kron_union();
    for privacy in [PrivacyModel::Approx, PrivacyModel::Pure] {
        // A Kronecker strategy of explicit (rectangular, full column rank)
        // factors.
        let factors: Vec<Mat<f64>> = [5usize, 4, 3]
            .iter()
            .map(|&n| Mat::from_fn(n + 2, n, |i, j| 1.0 + ((i * 7 + j * 3) % 5) as f64))
            .collect();
        let got = evaluate::kron_objective(&w, &factors, privacy).unwrap();
        let a = dp_workloads::structured::kron_all(&factors);
        let want = dense_objective(&w, &a, privacy);
        assert!((got - want).abs() <= 1e-10 * want, "{got} vs {want}");
        // OPT_⊗'s own strategy evaluates to its reported objective.
        let plan = kron::opt_kron(&w, privacy, &PlanOptions::default()).unwrap();
        let term = &plan.strategy.terms[0];
        let own: Vec<Mat<f64>> = (0..3).map(|i| plan.strategy.factor(term, i)).collect();
        let got = evaluate::kron_objective(&w, &own, privacy).unwrap();
        assert!((got - plan.objective).abs() <= 1e-10 * plan.objective);
        // A weighted union of marginals on all 8 sets.
        let sets: Vec<AttrSet> = (0..8).map(AttrSet::from_bits).collect();
        let theta: Vec<f64> = (0..8).map(|k| 0.3 + (k as f64 * 1.3).sin().abs()).collect();
        let pairs: Vec<(AttrSet, f64)> = sets.iter().cloned().zip(theta.iter().copied()).collect();
        let got = evaluate::marginals_objective(&w, &pairs, privacy).unwrap();
        let a = dense_marginals_strategy(&w, &sets, &theta);
        let want = dense_objective(&w, &a, privacy);
        assert!((got - want).abs() <= 1e-10 * want, "{got} vs {want}");
    }
    // Without a marginal covering {a, b}, k1 is not supported.
    let partial = [(0b110, 1.0), (0b101, 1.0)].map(|(s, t)| (AttrSet::from_bits(s), t));
    let got = evaluate::marginals_objective(&w, &partial, PrivacyModel::Pure).unwrap();
    assert_eq!(got, f64::INFINITY);
    let a = dense_marginals_strategy(&w, &[0b110, 0b101].map(AttrSet::from_bits), &[1.0; 2]);
    let eval = evaluate_strategy_gram(w.dense_gram().unwrap().as_ref(), a.as_ref()).unwrap();
    assert!(!eval.support.supported);
    // Wrong shapes are refused.
    let two = vec![Mat::identity(5, 5), Mat::identity(4, 4)];
    assert!(evaluate::kron_objective(&w, &two, PrivacyModel::Pure).is_err());
    assert!(
        evaluate::marginals_objective(&w, &[(AttrSet::from_bits(0b1000), 1.0)], PrivacyModel::Pure)
            .is_err()
    );
}

#[test]
fn opt_m_is_no_worse_than_hdmms_point_on_weighted_census_marginals() {
    // Weighted marginals on the SF1 domain (sex, hispanic, race,
    // relationship, age); HDMM's marginals template returned the point
    // below (its weights on {race, age}, {hispanic, race}, {sex, age},
    // {sex, hispanic, relationship} and the total). From the uniform start
    // alone, OPT_M stopped in a worse local minimum.
    let w = dp_workloads::structured::sf1::census_marginals().unwrap();
    let weights = w.marginal_weights().unwrap();
    let family = opt_m::Family::new(&w.domain().shape(), &weights, 16).unwrap();
    let point = [
        (0b10100, 0.3566),
        (0b00110, 0.1416),
        (0b10001, 0.2782),
        (0b01011, 0.176),
        (0, 0.0477),
    ]
    .map(|(s, t)| (AttrSet::from_bits(s), t));
    let theta: Vec<f64> = family
        .sets
        .iter()
        .map(|s| point.iter().find(|p| p.0 == *s).map_or(0.0, |p| p.1))
        .collect();
    let hdmm = family.ln_objective(&theta, None).exp();
    let m = opt_m::opt_marginals(&w, &weights, &opt_m::OptMOptions::default()).unwrap();
    assert!(m.objective <= hdmm, "{} > {hdmm}", m.objective);
    // The same point through the general evaluation.
    let pairs: Vec<(AttrSet, f64)> = point.to_vec();
    let general = evaluate::marginals_objective(&w, &pairs, PrivacyModel::Pure).unwrap();
    assert!((general - hdmm).abs() <= 1e-10 * hdmm);
    let plan = plan_strategy(&w, PrivacyModel::Pure, &PlanOptions::default()).unwrap();
    assert_eq!(
        (plan.method.as_str(), plan.objective),
        ("opt-m", m.objective)
    );
}

/// A weighted census-domain marginal workload drawn at random (the
/// `hdmm-census-random` experiment's second): HDMM's marginals template,
/// one L-BFGS-B run from a random point, returned the point below (weights
/// on {age}, {hispanic, race, relationship}, {sex, race} and {sex, race,
/// age}). No start of OPT_M reaches its basin; the support moves do.
#[test]
fn support_moves_reach_hdmms_basin_on_random_census_marginals() {
    let domain = dp_workloads::structured::sf1::census_marginals()
        .unwrap()
        .domain()
        .clone();
    let sets: Vec<(AttrSet, f64)> = [
        (&[][..], 1.3649718668438615),
        (&[0], 1.9773726086759567),
        (&[1], 0.9706957813958883),
        (&[2], 3.949239296120846),
        (&[4], 1.30950948275022),
        (&[0, 2], 2.4322999823108264),
        (&[2, 4], 0.9968165754146805),
        (&[0, 2, 4], 1.5089620463238285),
        (&[1, 2, 3], 3.2796731832228527),
    ]
    .iter()
    .map(|(m, w)| (AttrSet::from_members(m.iter().copied()), *w))
    .collect();
    let w = StructuredWorkload::weighted_marginals(domain, &sets).unwrap();
    let weights = w.marginal_weights().unwrap();
    let point: Vec<(AttrSet, f64)> = [
        (&[4][..], 0.05269),
        (&[1, 2, 3], 0.35455),
        (&[0, 2], 0.14941),
        (&[0, 2, 4], 0.44336),
    ]
    .iter()
    .map(|(m, t)| (AttrSet::from_members(m.iter().copied()), *t))
    .collect();
    let hdmm = evaluate::marginals_objective(&w, &point, PrivacyModel::Pure).unwrap();
    let starts_only = opt_m::OptMOptions {
        support_rounds: 0,
        ..opt_m::OptMOptions::default()
    };
    let stuck = opt_m::opt_marginals(&w, &weights, &starts_only).unwrap();
    assert!(
        stuck.objective > 1.01 * hdmm,
        "{} vs {hdmm}",
        stuck.objective
    );
    let m = opt_m::opt_marginals(&w, &weights, &opt_m::OptMOptions::default()).unwrap();
    assert!(m.objective <= hdmm, "{} > {hdmm}", m.objective);
    // The plan's reported objective is its strategy's, evaluated apart.
    let theta: Vec<(AttrSet, f64)> = m
        .strategy
        .terms
        .iter()
        .map(|t| (t.factors.iter().map(|(i, _)| *i).collect(), t.weight))
        .collect();
    let own = evaluate::marginals_objective(&w, &theta, PrivacyModel::Pure).unwrap();
    assert!(
        (own - m.objective).abs() <= 1e-9 * own,
        "{own} vs {}",
        m.objective
    );
}

#[test]
fn commuting_unions_are_certified_by_their_structured_svd_bound() {
    // kron_union's first product beside one whose factor Grams commute
    // with it per attribute (the identity with prefix, all-range with the
    // identity, the identity with total).
    let groups = vec![
        kron_union().groups()[0].clone(),
        kron_group(
            "k2",
            0.7,
            vec![
                Factor::Identity(5),
                Factor::AllRange(4),
                Factor::Identity(3),
            ],
        ),
    ];
    let w = StructuredWorkload::new(domain3(), groups).unwrap();
    let dense = dp_core::svd_lower_bound_from_gram(w.dense_gram().unwrap().as_ref()).unwrap();
    for privacy in [PrivacyModel::Approx, PrivacyModel::Pure] {
        let plan = plan_strategy(&w, privacy, &PlanOptions::default()).unwrap();
        let cert = plan.certificate.unwrap();
        assert!(
            (cert.lower_bound - dense).abs() <= 1e-9 * dense,
            "{} vs {dense}",
            cert.lower_bound
        );
        assert!(cert.lower_bound <= plan.objective);
    }
    // Prefix and total on one attribute do not commute: no bound.
    let plan = plan_strategy(&kron_union(), PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    assert!(plan.certificate.is_none());
}

/// Two commuting Grams `Q D_k Qᵀ` whose classes (1, 1) and (x, 2) the
/// generic combination `Σ G_k/((k + 1.37)‖G_k‖)` maps to the same value
/// (x chosen for that, with `‖·‖` the Frobenius norm: (1 − x)/√(1 + x²)
/// = k = 1.37/(2.37·√5)): the combination is a multiple of I, its
/// eigenvectors need not be `Q`'s, and the joint spectrum must then be
/// refused or be the true one — never values of mixed vectors.
#[test]
fn a_joint_spectrum_is_never_read_off_mixed_eigenvectors() {
    let k = 1.37 / (2.37 * 5f64.sqrt());
    let a = 1.0 - k * k;
    let x = (1.0 - (1.0 - a * a).sqrt()) / a;
    assert!(((1.0 - x) / (1.0 + x * x).sqrt() - k).abs() < 1e-12);
    let (c, s) = (0.6f64, 0.8f64);
    let q = Mat::from_fn(2, 2, |i, j| match (i, j) {
        (0, 0) | (1, 1) => c,
        (0, 1) => -s,
        _ => s,
    });
    let rotate = |d: [f64; 2]| {
        let dm = Mat::from_fn(2, 2, |i, j| if i == j { d[i] } else { 0.0 });
        &q * &dm * q.transpose()
    };
    let grams = [rotate([1.0, x]), rotate([1.0, 2.0])];
    if let Some(mut spectrum) = super::kron::joint_spectrum(&grams) {
        spectrum.sort_by(|a, b| b.0[0].total_cmp(&a.0[0]));
        let want = [[1.0, 1.0], [x, 2.0]];
        assert_eq!(spectrum.len(), 2, "{spectrum:?}");
        for ((got, mult), w) in spectrum.iter().zip(want) {
            assert_eq!(*mult, 1.0);
            assert!(
                (got[0] - w[0]).abs() < 1e-9 && (got[1] - w[1]).abs() < 1e-9,
                "{spectrum:?}"
            );
        }
    }
}
