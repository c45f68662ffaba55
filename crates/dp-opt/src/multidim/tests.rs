//! Structured plans against their densified counterparts.

#![allow(clippy::unwrap_used)]

use dp_core::evaluate_strategy_gram;
use dp_linalg::Mat;
use dp_workloads::domain::Domain;
use dp_workloads::structured::{Factor, Queries, QueryGroup, StructuredWorkload};

use super::*;
use crate::{Problem, StrategyOptimizer};

fn kron_group(label: &str, weight: f64, factors: Vec<Factor>) -> QueryGroup {
    QueryGroup {
        label: label.into(),
        weight,
        queries: Queries::Kron(factors),
    }
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

#[test]
fn opt_kron_single_product_matches_dense_coa_within_the_certified_gap() {
    let factors = vec![
        Factor::AllRange(5),
        Factor::Prefix(4),
        Factor::ranges("c", 3, vec![(0, 1), (1, 2)]).unwrap(),
    ];
    let w = StructuredWorkload::new(domain3(), vec![kron_group("k", 1.5, factors)]).unwrap();
    let plan = plan_strategy(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    assert_eq!(plan.method, "kron-coa");
    check_against_dense(&w, &plan);
    let cert = plan.certificate.unwrap();
    assert!(cert.relative_gap <= 1e-6, "{cert:?}");
    let problem = Problem::from_gram(w.dense_gram().unwrap(), PrivacyModel::Approx).unwrap();
    let dense = crate::coa::Coa::default()
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
    let one = crate::coa::Coa::default().optimize(&one, &mut ()).unwrap();
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

#[test]
fn opt_kron_unions_match_dense_for_both_models() {
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
        QueryGroup {
            label: "m".into(),
            weight: 2.0,
            queries: Queries::Marginals(vec![0b101, 0b000]),
        },
    ];
    let w = StructuredWorkload::new(domain3(), groups).unwrap();
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

#[test]
fn marginal_closed_form_attains_the_dense_svd_bound() {
    let groups = vec![
        QueryGroup {
            label: "two-way".into(),
            weight: 1.0,
            queries: Queries::Marginals(vec![0b011, 0b110]),
        },
        kron_group(
            "a",
            3.0,
            vec![Factor::Identity(5), Factor::Total(4), Factor::Total(3)],
        ),
        QueryGroup {
            label: "total".into(),
            weight: 0.3,
            queries: Queries::Marginals(vec![0]),
        },
    ];
    let w = StructuredWorkload::new(domain3(), groups).unwrap();
    let plan = plan_strategy(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    assert_eq!(plan.method, "residual");
    check_against_dense(&w, &plan);
    // Dense SVD bound, zero eigenvalues (≤ 1e-12 λ_max) dropped.
    let g = w.dense_gram().unwrap();
    let eig = dp_linalg::SymmetricEigen::values_only(g.as_ref()).unwrap();
    let top = eig.iter().copied().fold(0.0, f64::max);
    let s: f64 = eig
        .iter()
        .filter(|&&l| l > 1e-12 * top)
        .map(|l| l.sqrt())
        .sum();
    let bound = s * s / 60.0;
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
fn helmert_rows_are_orthonormal_and_sum_to_zero() {
    for n in 1..7 {
        let q = marginal::helmert(n);
        let qqt = &q * q.transpose();
        for i in 0..n - 1 {
            assert!((0..n).map(|j| q[(i, j)]).sum::<f64>().abs() < 1e-14);
            for j in 0..n - 1 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((qqt[(i, j)] - want).abs() < 1e-14);
            }
        }
    }
}

#[test]
fn bad_options_are_refused() {
    let w = StructuredWorkload::new(
        domain3(),
        vec![kron_group(
            "k",
            1.0,
            vec![
                Factor::Identity(5),
                Factor::Identity(4),
                Factor::Identity(3),
            ],
        )],
    )
    .unwrap();
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
}

#[test]
fn plan_report_errors_match_dense_per_query_errors() {
    use dp_core::{GaussianCalibration, NoiseCalibration, PrivacyBudget};
    let groups = vec![
        kron_group(
            "k",
            1.0,
            vec![Factor::Prefix(5), Factor::Identity(4), Factor::Total(3)],
        ),
        QueryGroup {
            label: "m".into(),
            weight: 0.5,
            queries: Queries::Marginals(vec![0b110, 0b001]),
        },
    ];
    let w = StructuredWorkload::new(domain3(), groups).unwrap();
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
        let total: f64 = per_query.iter().sum();
        assert!((total - report.expected_total_squared_error).abs() <= 1e-10 * total);
        // Group 0 is the first 20 rows, group 1 the remaining 12 + 5.
        let g0: f64 = per_query[..20].iter().sum();
        let rmse1 = (per_query[20..].iter().sum::<f64>() / 17.0).sqrt();
        assert!((g0 - report.groups[0].expected_squared_error).abs() <= 1e-10 * total);
        assert!((rmse1 - report.groups[1].rmse).abs() <= 1e-10 * rmse1);
        let file = plan::plan_file(&w, &plan);
        assert_eq!(file.terms.len(), plan.strategy.terms.len());
    }
}
