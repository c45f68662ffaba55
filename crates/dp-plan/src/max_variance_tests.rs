//! The max-variance plan against independent truth: dense per-query
//! variances, a closed form under symmetry, a direct minimization and
//! the dual bound at random points.

#![allow(clippy::unwrap_used)]

use dp_linalg::{Cholesky, Mat};
use dp_workloads::domain::Domain;
use dp_workloads::marginals::dense_projector;
use dp_workloads::structured::{AttrSet, Queries, QueryGroup, StructuredWorkload};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::{PlanObjective, PlanOptions, plan_strategy};

fn max_options() -> PlanOptions {
    PlanOptions {
        objective: PlanObjective::MaxVariance,
        ..PlanOptions::default()
    }
}

/// One group per marginal `(S, weight)`, so per-group errors are
/// per-marginal.
fn marginals(domain: &Domain, sets: &[(AttrSet, f64)]) -> StructuredWorkload {
    StructuredWorkload::weighted_marginals(domain.clone(), sets).unwrap()
}

/// Every k-subset of `d` attributes as a mask.
fn k_way(d: usize, k: u32) -> Vec<AttrSet> {
    (0..1u128 << d)
        .filter(|s| s.count_ones() == k)
        .map(AttrSet::from_bits)
        .collect()
}

/// Weighted sets given as masks.
fn bits(sets: &[(u128, f64)]) -> Vec<(AttrSet, f64)> {
    sets.iter()
        .map(|&(s, w)| (AttrSet::from_bits(s), w))
        .collect()
}

/// Per row q of the dense workload `wm`, `Δ₂² q G⁺ qᵀ` for the dense
/// Gram `G` with `Δ₂²` its largest diagonal entry (the pseudo-inverse
/// when G is singular, its Cholesky inverse otherwise).
fn dense_variances(wm: &Mat<f64>, g: &Mat<f64>, singular: bool) -> Vec<f64> {
    let sens2 = (0..g.nrows()).map(|i| g[(i, i)]).fold(0.0, f64::max);
    let inv = if singular {
        dp_linalg::pseudo_inverse_symmetric(g.as_ref(), None).unwrap()
    } else {
        Cholesky::factor(g.as_ref()).unwrap().inverse()
    };
    (0..wm.nrows())
        .map(|r| {
            let mut v = 0.0;
            for i in 0..wm.ncols() {
                for j in 0..wm.ncols() {
                    v += wm[(r, i)] * inv[(i, j)] * wm[(r, j)];
                }
            }
            sens2 * v
        })
        .collect()
}

fn max_of(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// The largest per-query variance of a plan, from its groups (each group
/// one marginal: every cell has the same variance).
fn group_max(plan: &StructuredPlan) -> f64 {
    plan.groups
        .iter()
        .map(|g| g.objective / g.queries)
        .fold(0.0, f64::max)
}

#[test]
fn symmetric_workloads_equalize_so_the_max_is_the_sum_optimum_over_the_queries() {
    // All k-way marginals on equal sizes with equal weights: the sum
    // optimum has equal variances, so it is also the max optimum and its
    // max is l2_obj / m.
    for (d, n, k) in [(5, 3, 2), (6, 4, 3), (4, 2, 1)] {
        let domain = Domain::from_pairs(
            &(0..d)
                .map(|i| (["a", "b", "c", "d", "e", "f"][i], n))
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let sets: Vec<(AttrSet, f64)> = k_way(d, k).into_iter().map(|s| (s, 1.5)).collect();
        let w = marginals(&domain, &sets);
        let sum = plan_strategy(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
        let max = plan_strategy(&w, PrivacyModel::Approx, &max_options()).unwrap();
        let want = sum.objective / w.num_queries();
        assert!(
            (max.objective - want).abs() <= 1e-9 * want,
            "{d} {n} {k}: {} vs {want}",
            max.objective
        );
        let c = max.certificate.unwrap();
        assert!(c.relative_gap.abs() <= 1e-9, "{c:?}");
        assert!(max.termination.converged());
        assert_eq!(max.objective_kind, PlanObjective::MaxVariance);
    }
}

fn small_domain() -> Domain {
    Domain::from_pairs(&[("a", 2), ("b", 3), ("c", 4)]).unwrap()
}

#[test]
fn objective_and_groups_match_the_dense_per_query_variances() {
    // {a}, {a, b}, {c} with different weights on sizes 2, 3, 4.
    let w = marginals(
        &small_domain(),
        &bits(&[(0b001, 1.0), (0b011, 2.0), (0b100, 0.5)]),
    );
    let plan = plan_strategy(&w, PrivacyModel::Approx, &max_options()).unwrap();
    let a = plan.strategy.dense().unwrap();
    let g = dp_linalg::gram(a.as_ref(), dp_linalg::Par::Seq);
    let v = dense_variances(&w.dense_matrix().unwrap(), &g, true);
    let dense_max = max_of(&v);
    assert!(
        (plan.objective - dense_max).abs() <= 1e-9 * dense_max,
        "{} vs {dense_max}",
        plan.objective
    );
    let sens = dp_core::sensitivity_l2(a.as_ref()).unwrap();
    assert!((sens - plan.sensitivity).abs() <= 1e-12);
    // Per group: the sum of its rows' dense variances.
    let mut row = 0;
    for ge in &plan.groups {
        let rows = ge.queries as usize;
        let total: f64 = v[row..row + rows].iter().sum();
        assert!((ge.objective - total).abs() <= 1e-9 * total, "{}", ge.label);
        row += rows;
    }
    assert_eq!(row, v.len());
    let c = plan.certificate.unwrap();
    assert!(c.relative_gap <= 1e-7 && c.lower_bound <= plan.objective);
    // The solver moved off the uniform start: the optimum is not the sum
    // plan's.
    let sum = plan_strategy(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    assert!(group_max(&sum) > plan.objective * 1.01);
}

/// Golden-section minimum of a convex function on `[lo, hi]` (the
/// bracket shrinks by 0.618 per evaluation: 50 give 4e-11 of it).
fn golden(f: &mut dyn FnMut(f64) -> f64, lo: f64, hi: f64) -> f64 {
    let r = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (lo, hi);
    let (mut x1, mut x2) = (b - r * (b - a), a + r * (b - a));
    let (mut f1, mut f2) = (f(x1), f(x2));
    for _ in 0..50 {
        if f1 <= f2 {
            (b, x2, f2) = (x2, x1, f1);
            x1 = b - r * (b - a);
            f1 = f(x1);
        } else {
            (a, x1, f1) = (x1, x2, f2);
            x2 = a + r * (b - a);
            f2 = f(x2);
        }
    }
    f1.min(f2)
}

#[test]
fn optimum_matches_a_direct_minimization_over_the_strategy_eigenvalues() {
    // {a} (weight 1) and {a, b} (weight 0.6) on sizes 2 and 3: residual
    // sets ∅, {a}, {b}, {a,b}. Minimize max_q Δ₂² q G⁻¹ qᵀ with the dense
    // G = Σ_T μ_T P_T over shares ν on the simplex (μ_T = ν_T N/mult_T)
    // by nested golden sections (the max of convex functions is convex,
    // and so is its partial minimum).
    let domain = Domain::from_pairs(&[("a", 2), ("b", 3)]).unwrap();
    let w = marginals(&domain, &bits(&[(0b01, 1.0), (0b11, 0.6)]));
    let p: Vec<Mat<f64>> = (0..4u128)
        .map(|t| dense_projector(&domain, &AttrSet::from_bits(t)))
        .collect();
    let mult = [1.0, 1.0, 2.0, 2.0];
    let wm = w.dense_matrix().unwrap();
    let worst = |nu: [f64; 4]| -> f64 {
        let mut g = Mat::<f64>::zeros(6, 6);
        for t in 0..4 {
            g += &p[t] * (nu[t] * 6.0 / mult[t]);
        }
        max_of(&dense_variances(&wm, &g, false))
    };
    let brute = golden(
        &mut |x0| {
            golden(
                &mut |x1| {
                    golden(
                        &mut |x2| worst([x0, x1, x2, 1.0 - x0 - x1 - x2]),
                        0.0,
                        1.0 - x0 - x1,
                    )
                },
                0.0,
                1.0 - x0,
            )
        },
        0.0,
        1.0,
    );
    let plan = plan_strategy(&w, PrivacyModel::Approx, &max_options()).unwrap();
    assert!(
        (plan.objective - brute).abs() <= 2e-6 * brute,
        "{} vs {brute}",
        plan.objective
    );
    assert!(plan.certificate.unwrap().lower_bound <= brute);
}

fn mixed_twelve() -> StructuredWorkload {
    let sizes = [2, 3, 4, 5, 2, 3, 7, 2, 6, 3, 4, 2];
    let names: Vec<String> = (0..12).map(|i| format!("x{i}")).collect();
    let pairs: Vec<(&str, usize)> = names.iter().map(|s| s.as_str()).zip(sizes).collect();
    let domain = Domain::from_pairs(&pairs).unwrap();
    let sets: Vec<(AttrSet, f64)> = k_way(12, 3).into_iter().map(|s| (s, 1.0)).collect();
    marginals(&domain, &sets)
}

#[test]
fn twelve_mixed_attributes_certified_and_better_at_the_max_than_the_sum_plan() {
    let w = mixed_twelve();
    let max = plan_strategy(&w, PrivacyModel::Approx, &max_options()).unwrap();
    let c = max.certificate.unwrap();
    assert!(c.relative_gap <= 1e-7, "{c:?} {:?}", max.termination);
    assert!(max.termination.converged());
    // The objective is the largest per-marginal variance of the groups
    // (a second code path).
    assert!((group_max(&max) - max.objective).abs() <= 1e-9 * max.objective);
    let sum = plan_strategy(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    let total = |p: &StructuredPlan| p.groups.iter().map(|g| g.objective).sum::<f64>();
    assert!(max.objective <= group_max(&sum));
    assert!(total(&max) >= sum.objective * (1.0 - 1e-12));
    assert!((total(&sum) - sum.objective).abs() <= 1e-9 * sum.objective);
}

#[test]
fn dual_bounds_never_exceed_primal_maxima_at_random_points() {
    let w = mixed_twelve();
    let weights = w.marginal_max_weights().unwrap();
    let spectrum = residual_spectrum(w.domain(), &weights).unwrap();
    let sets: Vec<AttrSet> = spectrum.iter().map(|e| e.set.clone()).collect();
    let c = Coefficients::new(&w.domain().shape(), &weights, &sets).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let simplex = |rng: &mut ChaCha8Rng, len: usize| -> Vec<f64> {
        // Spread over orders of magnitude, as iterates are.
        let v: Vec<f64> = (0..len)
            .map(|_| (-8.0 * rng.random::<f64>()).exp())
            .collect();
        let s: f64 = v.iter().sum();
        v.iter().map(|x| x / s).collect()
    };
    let plan = plan_strategy(&w, PrivacyModel::Approx, &max_options()).unwrap();
    let optimum_lower = plan.certificate.unwrap().lower_bound;
    for _ in 0..50 {
        let lambda = simplex(&mut rng, c.rows());
        let nu = simplex(&mut rng, sets.len());
        let lower = c.evaluate(&lambda).lower * c.scale;
        assert!(lower <= c.max_variance(&nu), "{lower}");
        // Every dual value is below the certified plan's objective, and
        // every primal point above the certified lower bound.
        assert!(lower <= plan.objective * (1.0 + 1e-12));
        assert!(c.max_variance(&nu) >= optimum_lower);
    }
}

#[test]
fn refused_under_pure_dp_and_for_non_marginal_workloads() {
    let w = marginals(&small_domain(), &bits(&[(0b001, 1.0)]));
    let e = plan_strategy(&w, PrivacyModel::Pure, &max_options()).unwrap_err();
    assert!(e.to_string().contains("max_variance"), "{e}");
    let prefix = StructuredWorkload::new(
        small_domain(),
        vec![QueryGroup {
            label: "prefix".into(),
            weight: 1.0,
            queries: Queries::Kron(vec![
                dp_workloads::structured::Factor::Prefix(2),
                dp_workloads::structured::Factor::Total(3),
                dp_workloads::structured::Factor::Total(4),
            ]),
        }],
    )
    .unwrap();
    let e = plan_strategy(&prefix, PrivacyModel::Approx, &max_options()).unwrap_err();
    assert!(e.to_string().contains("marginal workloads only"), "{e}");
    let bad = PlanOptions {
        gap_tolerance: 0.0,
        ..max_options()
    };
    assert!(plan_strategy(&w, PrivacyModel::Approx, &bad).is_err());
}

#[test]
fn an_exhausted_iteration_budget_is_reported_with_its_honest_gap() {
    let w = marginals(
        &small_domain(),
        &bits(&[(0b001, 1.0), (0b011, 2.0), (0b100, 0.5)]),
    );
    let short = PlanOptions {
        max_iterations: 1,
        ..max_options()
    };
    let plan = plan_strategy(&w, PrivacyModel::Approx, &short).unwrap();
    assert_eq!(
        plan.termination,
        Termination::MaxIterations { iterations: 1 }
    );
    let c = plan.certificate.unwrap();
    assert!(c.relative_gap > 1e-6 && c.lower_bound < plan.objective);
}

/// Budgets of k = 0..4 iterations stop after exactly k steps, reported
/// as the budget, and the method's monotonicity holds across them: the
/// dual bound never falls and the best upper bound never rises.
#[test]
fn an_iteration_budget_of_k_takes_exactly_k_steps() {
    let w = marginals(
        &small_domain(),
        &bits(&[(0b001, 1.0), (0b011, 2.0), (0b100, 0.5)]),
    );
    let (mut lower, mut upper) = (0.0, f64::INFINITY);
    for k in 0..=4 {
        let options = PlanOptions {
            max_iterations: k,
            ..max_options()
        };
        let plan = plan_strategy(&w, PrivacyModel::Approx, &options).unwrap();
        assert_eq!(
            plan.termination,
            Termination::MaxIterations { iterations: k }
        );
        assert_eq!(plan.rounds, k);
        let c = plan.certificate.unwrap();
        assert!(c.lower_bound >= lower && plan.objective <= upper, "{k}");
        assert!(c.lower_bound <= plan.objective);
        (lower, upper) = (c.lower_bound, plan.objective);
    }
}

/// A zero-second budget takes no step: the plan is the uniform λ's (the
/// plan of a zero-iteration budget), ended by the clock, and valid: its
/// objective is the dense largest variance of its own strategy. A NaN or
/// negative time limit is refused.
#[test]
fn a_zero_second_budget_returns_the_uniform_start() {
    let w = marginals(
        &small_domain(),
        &bits(&[(0b001, 1.0), (0b011, 2.0), (0b100, 0.5)]),
    );
    let timed = PlanOptions {
        max_seconds: Some(0.0),
        ..max_options()
    };
    let plan = plan_strategy(&w, PrivacyModel::Approx, &timed).unwrap();
    assert_eq!(plan.termination, Termination::Timeout { seconds: 0.0 });
    assert_eq!(plan.rounds, 0);
    let none = PlanOptions {
        max_iterations: 0,
        ..max_options()
    };
    let start = plan_strategy(&w, PrivacyModel::Approx, &none).unwrap();
    assert_eq!(plan.objective.to_bits(), start.objective.to_bits());
    assert_eq!(plan.certificate, start.certificate);
    let weights = |p: &StructuredPlan| -> Vec<u64> {
        p.strategy
            .terms
            .iter()
            .map(|t| t.weight.to_bits())
            .collect()
    };
    assert_eq!(weights(&plan), weights(&start));
    let g = dp_linalg::gram(plan.strategy.dense().unwrap().as_ref(), dp_linalg::Par::Seq);
    let dense_max = max_of(&dense_variances(&w.dense_matrix().unwrap(), &g, true));
    assert!((plan.objective - dense_max).abs() <= 1e-9 * dense_max);
    for t in [f64::NAN, -1.0] {
        let bad = PlanOptions {
            max_seconds: Some(t),
            ..max_options()
        };
        assert!(plan_strategy(&w, PrivacyModel::Approx, &bad).is_err());
        assert!(max_variance_marginal_plan(&w, &bad).is_err());
    }
}

#[test]
fn repeated_marginals_count_their_heaviest_row() {
    // {a} twice (weights 1 and 3): the max sees weight 3, as a workload
    // with {a} once at weight 3.
    let domain = small_domain();
    let twice = marginals(&domain, &bits(&[(0b001, 1.0), (0b001, 3.0), (0b110, 1.0)]));
    let once = marginals(&domain, &bits(&[(0b001, 3.0), (0b110, 1.0)]));
    let a = plan_strategy(&twice, PrivacyModel::Approx, &max_options()).unwrap();
    let b = plan_strategy(&once, PrivacyModel::Approx, &max_options()).unwrap();
    assert!((a.objective - b.objective).abs() <= 1e-6 * b.objective);
    let g = dp_linalg::gram(a.strategy.dense().unwrap().as_ref(), dp_linalg::Par::Seq);
    let dense_max = max_of(&dense_variances(&twice.dense_matrix().unwrap(), &g, true));
    assert!((a.objective - dense_max).abs() <= 1e-9 * dense_max);
}

/// Every 0..=3-way marginal on 100 attributes of 10 values (166,751
/// marginals, ResidualPlanner's headline workload): certified to the
/// default tolerance, at the optimum of the symmetry reduction. The dual
/// is flat at its maximum, and refusing steps that lowered it by rounding
/// once stalled this plan at a gap of 1.2·10⁻⁶.
#[test]
fn a_hundred_attributes_converge_to_the_reduced_optimum() {
    let d = 100;
    let names: Vec<String> = (0..d).map(|i| format!("a{i}")).collect();
    let pairs: Vec<(&str, usize)> = names.iter().map(|s| (s.as_str(), 10)).collect();
    let domain = Domain::from_pairs(&pairs).unwrap();
    let mut sets: Vec<(AttrSet, f64)> = vec![(AttrSet::EMPTY, 1.0)];
    for i in 0..d {
        sets.push((AttrSet::singleton(i), 1.0));
        for j in i + 1..d {
            sets.push((AttrSet::from_members([i, j]), 1.0));
            for k in j + 1..d {
                sets.push((AttrSet::from_members([i, j, k]), 1.0));
            }
        }
    }
    assert_eq!(sets.len(), 166_751);
    assert!(super::symmetric_all_k_way_optimum(2, 10, 3).is_err());
    // Binomials past f64 are refused, not returned as NaN.
    assert!(super::symmetric_all_k_way_optimum(5000, 10, 400).is_err());
    let w = marginals(&domain, &sets);
    let plan = plan_strategy(&w, PrivacyModel::Approx, &max_options()).unwrap();
    assert!(plan.termination.converged(), "{:?}", plan.termination);
    let c = plan.certificate.unwrap();
    assert!(c.relative_gap <= 1e-7, "{c:?}");
    let truth = super::symmetric_all_k_way_optimum(d, 10, 3).unwrap();
    // The dual bound holds up to the rounding of its sums over 1.7·10⁵
    // residual sets (it lands 8·10⁻¹² above).
    assert!(
        c.lower_bound <= truth * (1.0 + 1e-10),
        "{} > {truth}",
        c.lower_bound
    );
    assert!(
        (plan.objective - truth).abs() <= 1.1e-7 * truth,
        "{} vs {truth}",
        plan.objective
    );
}
