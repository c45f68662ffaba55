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

/// Every k-way marginal of `domain` with weight 1, as one group.
fn all_k_way(domain: &Domain, k: u32) -> StructuredWorkload {
    let d = domain.len();
    let sets: Vec<u128> = (0..1u128 << d).filter(|s| s.count_ones() == k).collect();
    StructuredWorkload::new(
        domain.clone(),
        vec![QueryGroup {
            label: format!("{k}-way"),
            weight: 1.0,
            queries: Queries::Marginals(sets),
        }],
    )
    .unwrap()
}

/// The dense OPT_M strategy `[θ_S M_S]` on `sets`.
fn dense_marginals_strategy(w: &StructuredWorkload, sets: &[u128], theta: &[f64]) -> Mat<f64> {
    let n = w.domain().cells("densify").unwrap();
    let blocks: Vec<Mat<f64>> = sets
        .iter()
        .zip(theta)
        .map(|(&s, &t)| {
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
    let groups = vec![
        QueryGroup {
            label: "two-way".into(),
            weight: 1.0,
            queries: Queries::Marginals(vec![0b011, 0b110]),
        },
        kron_group(
            "c",
            2.5,
            vec![Factor::Total(5), Factor::Total(4), Factor::Identity(3)],
        ),
        QueryGroup {
            label: "total".into(),
            weight: 0.4,
            queries: Queries::Marginals(vec![0]),
        },
    ];
    StructuredWorkload::new(domain3(), groups).unwrap()
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
        .map(|&s| if s & 0b110 == 0b110 { 0.0 } else { 1.0 })
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
        .map(|s| if s.count_ones() == 2 { 1.0 } else { 0.0 })
        .collect();
    let naive = family.ln_objective(&equal, None).exp();
    assert!(
        m.objective <= naive * (1.0 + 1e-12),
        "{} > {naive}",
        m.objective
    );
}
