//! Sizing before the work: refusals are typed, fast and name the step;
//! estimates cover what the work provably holds.

#![allow(clippy::unwrap_used)]

use dp_workloads::domain::Domain;
use dp_workloads::structured::{AttrSet, Factor, Queries, QueryGroup, StructuredWorkload};

use super::*;
use crate::{PlanObjective, PlanOptions, plan_strategy};

const GB: u64 = 1_000_000_000;

fn workload(pairs: &[(&str, usize)], queries: Vec<Queries>) -> StructuredWorkload {
    let groups = queries
        .into_iter()
        .enumerate()
        .map(|(k, queries)| QueryGroup {
            label: format!("g{k}"),
            weight: 1.0,
            queries,
        })
        .collect();
    StructuredWorkload::new(Domain::from_pairs(pairs).unwrap(), groups).unwrap()
}

fn options(limit: u64) -> PlanOptions {
    PlanOptions {
        max_memory: Some(limit),
        ..PlanOptions::default()
    }
}

/// Every pair of the attributes (bit masks).
/// Sets given as masks.
fn bits(masks: &[u128]) -> Vec<AttrSet> {
    masks.iter().map(|&m| AttrSet::from_bits(m)).collect()
}

fn pairs(d: usize) -> Vec<AttrSet> {
    let mut out = Vec::new();
    for i in 0..d {
        for j in i + 1..d {
            out.push(AttrSet::from_members([i, j]));
        }
    }
    out
}

#[test]
fn sizes_read_as_people_write_them() {
    assert_eq!(format_bytes(80e9), "80.0 GB");
    assert_eq!(format_bytes(512.0), "512 B");
    assert_eq!(format_bytes(1.5e6), "1.5 MB");
    assert_eq!(format_bytes(1e25), "1.00e25 B");
    assert_eq!(format_bytes(f64::INFINITY), "an unbounded amount");
}

#[test]
fn a_need_passes_at_its_limit_and_names_its_largest_part_past_it() {
    let mut need = MemoryNeed::new("the step");
    need.add("small", 1000.0);
    need.add("large", 5000.0);
    need.add("unknown", f64::NAN);
    assert_eq!(need.bytes(), f64::INFINITY);
    let mut need = MemoryNeed::new("the step");
    need.add("small", 1000.0);
    need.add("large", 5000.0);
    assert_eq!(need.bytes(), 6000.0);
    assert!(need.check(6000).is_ok());
    let e = need.check(5999).unwrap_err();
    let DpError::MemoryLimit(m) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(
        m,
        "the step would need about 6.0 kB (the largest part: large, 5.0 kB), over the \
         memory limit of 6.0 kB"
    );
}

#[test]
fn the_default_limit_is_half_the_physical_memory() {
    // Linux (this project's machines) has /proc/meminfo.
    let total = physical_memory().unwrap();
    assert!(total > 0);
    assert_eq!(default_memory_limit(), total / 2);
    assert_eq!(PlanOptions::default().memory_limit(), total / 2);
}

/// An attribute of 10⁵ values, queried: any plan holds a dense factor on
/// it (10¹⁰ entries, 80 GB), so planning is refused before it allocates,
/// under both models and for each kind of query on it.
#[test]
fn a_huge_queried_attribute_is_refused_before_planning() {
    let n = 100_000;
    let kinds = [
        Queries::Kron(vec![Factor::Identity(n), Factor::Total(2)]),
        Queries::Kron(vec![Factor::Prefix(n), Factor::Identity(2)]),
        Queries::Marginals(bits(&[0b01])),
        Queries::Marginals(bits(&[0b11, 0b10])),
    ];
    for queries in kinds {
        let w = workload(&[("big", n), ("small", 2)], vec![queries]);
        for privacy in [PrivacyModel::Pure, PrivacyModel::Approx] {
            let need = planning_need(&w, privacy, &options(12 * GB));
            assert!(need.bytes() >= 8.0 * (n * n) as f64, "{need:?}");
            let e = plan_strategy(&w, privacy, &options(12 * GB)).unwrap_err();
            assert!(
                matches!(&e, DpError::MemoryLimit(m) if m.contains("attribute 'big'")),
                "{e}"
            );
        }
    }
}

/// The same attribute summed out of every marginal costs nothing: the
/// plans list no factor on it.
#[test]
fn a_huge_attribute_no_marginal_uses_plans_without_a_factor_on_it() {
    let w = workload(
        &[("big", 100_000), ("a", 3), ("b", 4)],
        vec![Queries::Marginals(bits(&[0b010, 0b110]))],
    );
    for privacy in [PrivacyModel::Pure, PrivacyModel::Approx] {
        let plan = plan_strategy(&w, privacy, &options(12 * GB)).unwrap();
        assert!(
            plan.strategy
                .terms
                .iter()
                .all(|t| t.factors.iter().all(|(i, _)| *i != 0)),
            "{privacy:?}"
        );
        assert_eq!(plan.strategy.shape, vec![100_000, 3, 4]);
    }
}

/// All 2-way marginals over 1000⁵ cells under ε-DP: OPT_⊗'s Kronecker
/// strategy would read a table of 10¹⁵ counts, so only OPT_M runs.
#[test]
fn the_kronecker_rival_is_skipped_when_its_table_cannot_be_held() {
    let names = ["a", "b", "c", "d", "e"];
    let dims: Vec<(&str, usize)> = names.iter().map(|&s| (s, 1000)).collect();
    let w = workload(&dims, vec![Queries::Marginals(pairs(5))]);
    let weights = w.marginal_weights().unwrap();
    assert!(!kron_rival_fits(&w, &weights, 12 * GB));
    let plan = plan_strategy(&w, PrivacyModel::Pure, &options(12 * GB)).unwrap();
    assert_eq!(plan.method, "opt-m");
    assert!(plan.certificate.is_some());
    // A small domain keeps the rival.
    let small: Vec<(&str, usize)> = names.iter().map(|&s| (s, 4)).collect();
    let w = workload(&small, vec![Queries::Marginals(pairs(5))]);
    assert!(kron_rival_fits(&w, &w.marginal_weights().unwrap(), 12 * GB));
}

#[test]
fn a_tiny_limit_refuses_every_planner() {
    let w = workload(
        &[("a", 30), ("b", 20)],
        vec![Queries::Marginals(bits(&[0b01, 0b11]))],
    );
    for privacy in [PrivacyModel::Pure, PrivacyModel::Approx] {
        let e = plan_strategy(&w, privacy, &options(1000)).unwrap_err();
        assert!(matches!(e, DpError::MemoryLimit(_)), "{e}");
    }
    let mut max = options(1000);
    max.objective = PlanObjective::MaxVariance;
    let e = plan_strategy(&w, PrivacyModel::Approx, &max).unwrap_err();
    assert!(matches!(e, DpError::MemoryLimit(_)), "{e}");
    let k = workload(
        &[("a", 30), ("b", 20)],
        vec![Queries::Kron(vec![
            Factor::Prefix(30),
            Factor::Identity(20),
        ])],
    );
    let e = plan_strategy(&k, PrivacyModel::Approx, &options(1000)).unwrap_err();
    assert!(matches!(e, DpError::MemoryLimit(_)), "{e}");
}

/// The plan file's sizing covers its JSON text and the numbers behind it.
#[test]
fn the_plan_file_need_covers_the_file() {
    let w = workload(
        &[("a", 7), ("b", 5), ("c", 3)],
        vec![
            Queries::Marginals(bits(&[0b011, 0b110])),
            Queries::Kron(vec![
                Factor::Prefix(7),
                Factor::Total(5),
                Factor::Identity(3),
            ]),
        ],
    );
    for privacy in [PrivacyModel::Pure, PrivacyModel::Approx] {
        let plan = plan_strategy(&w, privacy, &options(12 * GB)).unwrap();
        let text = serde_json::to_string(&super::super::plan::plan_file(&w, &plan)).unwrap();
        let distinct: std::collections::HashMap<_, usize> = plan
            .strategy
            .terms
            .iter()
            .flat_map(|t| t.factors.iter())
            .map(|(_, m)| (std::sync::Arc::as_ptr(m), m.nrows() * m.ncols()))
            .collect();
        let entries: usize = distinct.values().sum();
        let need = plan_file_need(&plan.strategy, w.domain()).bytes();
        assert!(
            need >= (text.len() + 8 * entries) as f64,
            "{need} < {}",
            text.len()
        );
    }
}

/// A 5-way marginal over 10¹⁵ cells has 10¹⁵ answers: their values and
/// variances alone are 1.6·10¹⁶ bytes.
#[test]
fn reconstruction_sizing_counts_every_answer() {
    let names = ["a", "b", "c", "d", "e"];
    let dims: Vec<(&str, usize)> = names.iter().map(|&s| (s, 1000)).collect();
    let w = workload(&dims, vec![Queries::Marginals(bits(&[0b11111]))]);
    let identity: TermShape = ((0..5).collect(), vec![1000; 5]);
    let need = reconstruction_need(&w, &[identity]);
    assert!(need.bytes() >= 1.6e16 + 8e15, "{}", need.bytes());
    let e = need.check(1_000_000_000_000).unwrap_err();
    assert!(
        e.to_string().starts_with("the reconstruction would need"),
        "{e}"
    );
}
