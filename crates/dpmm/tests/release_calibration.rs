//! The release pipeline end to end on generated records (aggregate →
//! kernel measurement on marginal tables → least squares with the
//! measured strategy → per-query variances), through the test-only seeded
//! sessions of `dp_core::experiments` (a release cannot take them): the
//! answers are unbiased and the reported standard errors calibrated.
//!
//! Statistics: R independent runs; for each query q the z-scores
//! `(answer − truth)/std_error` are i.i.d. over runs with mean 0 and
//! variance 1 if the release is right (the Laplace variance is exact; the
//! discrete Gaussian's σ² is an upper bound within a relative e^{-2π²σ²}
//! of it, negligible here). Their sample mean has standard deviation
//! 1/√R; their sample variance at most √((κ−1)/R) with κ ≤ 6 the
//! kurtosis of a linear combination of Laplace (or Gaussian) variables.
//! Both are checked at 4.5 standard deviations per query, a false alarm
//! rate below 1e-4 over the whole test.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use dp_core::experiments::SeededSession;
use dp_core::{Cost, MarginalStrategy};
use dp_opt::PrivacyModel;
use dp_plan::reconstruct::reconstruct;
use dp_plan::{PlanOptions, plan_strategy};
use dp_workloads::spec::parse_spec;
use dpmm_records::{DEFAULT_CELL_LIMIT, Layout, Rows, Schema, aggregate};

const RUNS: usize = 1000;

fn records() -> (String, Vec<f64>) {
    let (a, b) = (["x", "y", "z"], ["no", "yes"]);
    let mut text = String::from("a,b,c\n");
    let mut x = vec![0.0; 24];
    let mut s: u64 = 12345;
    for _ in 0..500 {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (i, j, k) = ((s >> 33) % 3, (s >> 40) % 4, (s >> 50) % 2);
        // Skewed: more mass on small b.
        let j = j.min((s >> 20) % 4);
        text.push_str(&format!("{},{}.5,{}\n", a[i as usize], j, b[k as usize]));
        x[(i * 8 + j * 2 + k) as usize] += 1.0;
    }
    (text, x)
}

#[test]
fn answers_are_unbiased_and_standard_errors_calibrated() {
    let schema = Schema::from_json(
        r#"{"domain": [
            {"name": "a", "column": "a", "values": ["x", "y", "z"]},
            {"name": "b", "column": "b", "bins": {"start": 0, "stop": 4, "width": 1}},
            {"name": "c", "column": "c", "values": ["no", "yes"]}]}"#,
    )
    .unwrap();
    let spec = |queries: &str| {
        parse_spec(
            &format!(
                r#"{{"domain": [{{"name":"a","size":3}},{{"name":"b","size":4}},{{"name":"c","size":2}}],
                    "queries": {queries}}}"#
            ),
            std::path::Path::new("."),
        )
        .unwrap()
    };
    let (text, x) = records();
    // Pure: a Kronecker p-Identity plan (one term on the full table);
    // approx: the residual plan (terms on 0-, 1- and 2-way tables).
    for (model, cost, workload, method) in [
        (
            PrivacyModel::Pure,
            Cost::Epsilon(1.0),
            spec(r#"[{"marginals": {"k": 2}}, {"kron": {"b": "prefix"}}]"#),
            "kron-pidentity",
        ),
        (
            PrivacyModel::Approx,
            Cost::Rho(0.5),
            spec(r#"[{"marginals": {"k": 2}}, {"marginal": []}]"#),
            "residual",
        ),
    ] {
        let truth = workload.answer(&x).unwrap();
        let plan = plan_strategy(&workload, model, &PlanOptions::default()).unwrap();
        assert_eq!(plan.method, method);
        let strategy = MarginalStrategy::new(vec![3, 4, 2], &plan.strategy.terms).unwrap();
        let tables: Vec<Vec<usize>> = strategy.supports().to_vec();
        let mut unique: Vec<Vec<usize>> = Vec::new();
        for t in tables {
            if !unique.contains(&t) {
                unique.push(t);
            }
        }
        // Only the tables the strategy reads, as for a large domain.
        let layout = Layout::marginals(schema.domain(), &unique, DEFAULT_CELL_LIMIT).unwrap();
        let data = aggregate(
            text.as_bytes(),
            "generated",
            &schema,
            &layout,
            Rows::Records,
        )
        .unwrap()
        .into_kernel()
        .unwrap();
        let q = truth.len();
        let (mut sum, mut sum2) = (vec![0.0; q], vec![0.0; q]);
        for run in 0..RUNS {
            let mut session = SeededSession::unlimited(1000 + run as u64);
            let m = session.measure_marginals(&strategy, &data, cost).unwrap();
            let r = reconstruct(&workload, &m.strategy, &m.values, m.variance).unwrap();
            for i in 0..q {
                let z = (r.answers[i] - truth[i]) / r.variances[i].sqrt();
                sum[i] += z;
                sum2[i] += z * z;
            }
        }
        let n = RUNS as f64;
        for i in 0..q {
            let mean = sum[i] / n;
            let var = (sum2[i] - n * mean * mean) / (n - 1.0);
            assert!(
                mean.abs() <= 4.5 / n.sqrt(),
                "{model:?} query {i}: mean z {mean}"
            );
            assert!(
                (var - 1.0).abs() <= 4.5 * (5.0 / n).sqrt(),
                "{model:?} query {i}: var z {var}"
            );
        }
    }
}
