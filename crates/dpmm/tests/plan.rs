//! `dpmm plan` as a user runs it: the plan file is checked against an
//! independent densification (the workload matrix built here by hand from
//! the spec's definitions, the strategy read from the file's JSON); the
//! printed per-group errors against the closed-form noise variances.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{arg, dpmm, scratch_dir};
use dp_linalg::Mat;
use serde_json::Value;

/// Domain a:3, b:4, c:2 (24 cells) with a Kronecker product, a weighted
/// marginal and a one-attribute product: a union OPT_⊗ plans.
const UNION_SPEC: &str = r#"{
  "domain": [{"name": "a", "size": 3}, {"name": "b", "size": 4}, {"name": "c", "size": 2}],
  "queries": [
    {"kron": {"a": "prefix", "b": "allrange"}},
    {"marginal": ["b", "c"], "weight": 2.0},
    {"kron": {"c": "identity"}}
  ]
}"#;

/// Kronecker product of row-major dense matrices.
fn kron(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let mut out = Vec::new();
    for ra in a {
        for rb in b {
            out.push(
                ra.iter()
                    .flat_map(|x| rb.iter().map(move |y| x * y))
                    .collect(),
            );
        }
    }
    out
}

fn identity(n: usize) -> Vec<Vec<f64>> {
    (0..n)
        .map(|i| (0..n).map(|j| f64::from(u8::from(i == j))).collect())
        .collect()
}

fn total(n: usize) -> Vec<Vec<f64>> {
    vec![vec![1.0; n]]
}

fn prefix(n: usize) -> Vec<Vec<f64>> {
    (0..n)
        .map(|i| (0..n).map(|j| f64::from(u8::from(j <= i))).collect())
        .collect()
}

fn allrange(n: usize) -> Vec<Vec<f64>> {
    let mut rows = Vec::new();
    for lo in 0..n {
        for hi in lo..n {
            rows.push(
                (0..n)
                    .map(|j| f64::from(u8::from(lo <= j && j <= hi)))
                    .collect(),
            );
        }
    }
    rows
}

fn scaled(rows: Vec<Vec<f64>>, w: f64) -> Vec<Vec<f64>> {
    rows.into_iter()
        .map(|r| r.into_iter().map(|x| x * w).collect())
        .collect()
}

fn to_mat(rows: &[Vec<f64>]) -> Mat<f64> {
    Mat::from_fn(rows.len(), rows[0].len(), |i, j| rows[i][j])
}

/// The weights of [`UNION_SPEC`]'s groups.
const UNION_WEIGHTS: [f64; 3] = [1.0, 2.0, 1.0];

/// The groups of [`UNION_SPEC`], densified by hand (cells row-major, last
/// attribute fastest).
fn union_groups() -> Vec<Vec<Vec<f64>>> {
    vec![
        kron(&kron(&prefix(3), &allrange(4)), &total(2)),
        scaled(kron(&kron(&total(3), &identity(4)), &identity(2)), 2.0),
        kron(&kron(&total(3), &total(4)), &identity(2)),
    ]
}

/// The strategy of a plan file: `weight · ⊗ factors`, `[[1, …, 1]]` for an
/// attribute a term does not name, a factor given inline or as an index
/// into `matrices`, terms stacked.
fn strategy_from_file(file: &Value) -> Vec<Vec<f64>> {
    let domain: Vec<(String, usize)> = file["domain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_string(),
                a["size"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    let mut rows = Vec::new();
    for term in file["terms"].as_array().unwrap() {
        let mut product = vec![vec![term["weight"].as_f64().unwrap()]];
        for (name, size) in &domain {
            let factor: Vec<Vec<f64>> = match term["factors"].get(name) {
                Some(m) => match m.as_u64() {
                    Some(i) => &file["matrices"][i as usize],
                    None => m,
                }
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    r.as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_f64().unwrap())
                        .collect()
                })
                .collect(),
                None => total(*size),
            };
            assert!(factor.iter().all(|r| r.len() == *size));
            product = kron(&product, &factor);
        }
        rows.extend(product);
    }
    rows
}

/// `tr(W_gᵀ W_g (AᵀA)⁺)` by the dense evaluation (checks support too).
fn trace(w: &[Vec<f64>], a: &[Vec<f64>]) -> f64 {
    let eval =
        dp_core::accuracy::evaluate_strategy(to_mat(w).as_ref(), to_mat(a).as_ref()).unwrap();
    assert!(eval.support.supported);
    eval.trace
}

/// Largest column norm of `a`: L1 (`p = 1`) or L2 (`p = 2`).
fn sensitivity(a: &[Vec<f64>], p: i32) -> f64 {
    (0..a[0].len())
        .map(|j| {
            a.iter()
                .map(|r| r[j].abs().powi(p))
                .sum::<f64>()
                .powf(1.0 / f64::from(p))
        })
        .fold(0.0, f64::max)
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(a.abs())
}

/// Plans UNION_SPEC and checks the file and the report against the
/// densified truth; `per_row_variance(Δ)` is the noise variance per
/// strategy row for sensitivity Δ.
fn check_union(privacy: &[&str], p: i32, per_row_variance: impl Fn(f64) -> f64) {
    let dir = scratch_dir(&format!("plan-{}", privacy[1]));
    let spec = dir.join("spec.json");
    std::fs::write(&spec, UNION_SPEC).unwrap();
    let out_path = dir.join("plan.json");
    let mut args = vec!["plan", "--workload", arg(&spec), "--out", arg(&out_path)];
    args.extend_from_slice(privacy);
    args.push("--json");
    let out = dpmm(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();

    let a = strategy_from_file(&file);
    let groups = union_groups();
    let w: Vec<Vec<f64>> = groups.iter().flatten().cloned().collect();
    let delta = sensitivity(&a, p);
    let objective = delta * delta * trace(&w, &a);
    for source in [&file, &report] {
        assert!(close(
            source["objective"].as_f64().unwrap(),
            objective,
            1e-9
        ));
        assert!(close(source["sensitivity"].as_f64().unwrap(), delta, 1e-12));
    }
    if let Some(lb) = file["lower_bound"].as_f64() {
        assert!(lb <= objective * (1.0 + 1e-9));
    }
    let v = per_row_variance(delta);
    let reported = report["groups"].as_array().unwrap();
    assert_eq!(reported.len(), groups.len());
    // Errors per answer as released: a group's answers are its queries'
    // own values, its weight only what its errors count in the objective.
    let mut total = 0.0;
    for ((g, weight), r) in groups.iter().zip(UNION_WEIGHTS).zip(reported) {
        let error = v * trace(g, &a) / (weight * weight);
        let rmse = (error / g.len() as f64).sqrt();
        total += error;
        assert_eq!(r["queries"].as_f64().unwrap(), g.len() as f64);
        assert!(
            close(r["rmse"].as_f64().unwrap(), rmse, 1e-9),
            "{r} vs {rmse}"
        );
    }
    let reported_total = report["expected_total_squared_error"].as_f64().unwrap();
    assert!(close(reported_total, total, 1e-9));
}

#[test]
fn pure_plan_file_recomputes_objective_and_laplace_errors() {
    // Laplace of scale Δ₁/ε: variance 2(Δ₁/ε)².
    let eps = 0.5;
    check_union(&["--privacy", "pure", "--epsilon", "0.5"], 1, |d| {
        2.0 * (d / eps).powi(2)
    });
}

#[test]
fn approx_plan_file_recomputes_objective_and_zcdp_gaussian_errors() {
    // Discrete Gaussian at the zCDP ρ of (ε, δ): σ² = Δ₂²/(2ρ).
    let rho = dp_core::kernel::zcdp_rho_for(1.0, 1e-6).unwrap();
    let args = ["--privacy", "approx", "--epsilon", "1", "--delta", "1e-6"];
    check_union(&args, 2, |d| d * d / (2.0 * rho));
}

/// Domain a:2, b:3, c:4 with three marginals of different weights: not
/// symmetric, so the max-variance plan differs from the sum plan.
const MARGINAL_SPEC: &str = r#"{
  "domain": [{"name": "a", "size": 2}, {"name": "b", "size": 3}, {"name": "c", "size": 4}],
  "queries": [
    {"marginal": ["a"]},
    {"marginal": ["a", "b"], "weight": 2.0},
    {"marginal": ["c"], "weight": 0.5}
  ]
}"#;

/// `--privacy approx` at (ε, δ) = (1, 1e-6).
const APPROX: [&str; 6] = ["--privacy", "approx", "--epsilon", "1", "--delta", "1e-6"];

/// The rows of [`MARGINAL_SPEC`], densified by hand.
fn marginal_rows() -> Vec<Vec<f64>> {
    [
        kron(&kron(&identity(2), &total(3)), &total(4)),
        scaled(kron(&kron(&identity(2), &identity(3)), &total(4)), 2.0),
        scaled(kron(&kron(&total(2), &total(3)), &identity(4)), 0.5),
    ]
    .concat()
}

/// `dpmm plan --objective <objective>` on [`MARGINAL_SPEC`]: the JSON
/// report, the plan file and each row's `Δ₂² q(AᵀA)⁺qᵀ` recomputed from
/// the file's strategy.
fn plan_marginals(objective: &str) -> (Value, Value, Vec<f64>) {
    let dir = scratch_dir(&format!("plan-objective-{objective}"));
    let spec = dir.join("spec.json");
    std::fs::write(&spec, MARGINAL_SPEC).unwrap();
    let out_path = dir.join("plan.json");
    let mut args = vec!["plan", "--workload", arg(&spec), "--out", arg(&out_path)];
    args.extend(APPROX);
    args.extend(["--objective", objective, "--json"]);
    let out = dpmm(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    let a = strategy_from_file(&file);
    let delta = sensitivity(&a, 2);
    let variances = marginal_rows()
        .iter()
        .map(|q| delta * delta * trace(std::slice::from_ref(q), &a))
        .collect();
    (report, file, variances)
}

#[test]
fn max_variance_plan_file_recomputes_its_worst_query_and_beats_the_sum_plan_there() {
    let (report, file, variances) = plan_marginals("max");
    let worst = variances.iter().copied().fold(0.0, f64::max);
    for source in [&report, &file] {
        assert_eq!(source["objective_name"], "max_variance");
        assert!(close(source["objective"].as_f64().unwrap(), worst, 1e-9));
        assert!(source["lower_bound"].as_f64().unwrap() <= worst);
    }
    assert!(report["duality_gap"].as_f64().unwrap() <= 1e-6);
    // Errors: σ² = Δ₂²/(2ρ) per strategy row, so the worst query's is
    // σ²/Δ₂² · objective and the total the sum over rows.
    let rho = dp_core::kernel::zcdp_rho_for(1.0, 1e-6).unwrap();
    let per_unit = 1.0 / (2.0 * rho);
    let max_error = report["expected_max_squared_error"].as_f64().unwrap();
    assert!(close(max_error, per_unit * worst, 1e-9));
    // The total is over the answers as released: each row's variance over
    // its group's weight squared (rows: a, a×b at weight 2, c at 0.5).
    let weights = [[1.0; 2].as_slice(), &[2.0; 6], &[0.5; 4]].concat();
    let released: f64 = variances
        .iter()
        .zip(&weights)
        .map(|(v, w)| v / (w * w))
        .sum();
    let total = report["expected_total_squared_error"].as_f64().unwrap();
    assert!(close(total, per_unit * released, 1e-9));
    // The sum-of-variances plan is worse at its worst query, better in
    // total.
    let (sum_report, _, sum_variances) = plan_marginals("total");
    assert_eq!(sum_report["objective_name"], "l2_obj");
    assert!(sum_variances.iter().copied().fold(0.0, f64::max) > worst);
    assert!(sum_variances.iter().sum::<f64>() <= variances.iter().sum::<f64>());
}

#[test]
fn max_variance_is_refused_under_pure_dp_and_for_other_workloads() {
    let dir = scratch_dir("plan-objective-refused");
    let (marginal, union) = (dir.join("marginal.json"), dir.join("union.json"));
    std::fs::write(&marginal, MARGINAL_SPEC).unwrap();
    std::fs::write(&union, UNION_SPEC).unwrap();
    let out = dir.join("plan.json");
    let pure = ["--privacy", "pure", "--epsilon", "1"];
    for (spec, privacy, objective, says) in [
        (&marginal, &pure[..], "max", "(ε,δ)-DP only"),
        (&union, &APPROX[..], "max", "marginal workloads only"),
        (&marginal, &APPROX[..], "worst", "unknown objective"),
    ] {
        let mut args = vec!["plan", "--workload", arg(spec), "--out", arg(&out)];
        args.extend_from_slice(privacy);
        args.extend(["--objective", objective]);
        let run = dpmm(&args);
        assert!(run.is_refusal(), "{objective}: {run:?}");
        assert!(run.stderr.contains(says), "{}", run.stderr);
        assert!(!out.exists());
    }
}

/// A plan file names each distinct factor matrix once (`matrices`, version
/// 2); a version 1 file with every factor inline reads as the same plan,
/// and a bad matrix reference is refused with a typed error.
#[test]
fn shared_and_inline_factors_read_as_the_same_plan() {
    let dir = scratch_dir("plan-v1-v2");
    let spec = dir.join("spec.json");
    std::fs::write(&spec, UNION_SPEC).unwrap();
    let out_path = dir.join("plan.json");
    let out = dpmm(&[
        "plan",
        "--workload",
        arg(&spec),
        "--out",
        arg(&out_path),
        "--privacy",
        "approx",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v2: Value = serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    assert_eq!(v2["version"], 2);
    let matrices = v2["matrices"].as_array().unwrap();
    let named: usize = v2["terms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["factors"].as_object().unwrap().len())
        .sum();
    assert!(matrices.len() <= named);
    // The same plan with every factor inline, as dpmm wrote it before.
    let mut v1 = v2.clone();
    v1["version"] = 1.into();
    v1.as_object_mut().unwrap().remove("matrices");
    for t in v1["terms"].as_array_mut().unwrap() {
        for (_, f) in t["factors"].as_object_mut().unwrap() {
            *f = matrices[f.as_u64().unwrap() as usize].clone();
        }
    }
    assert_eq!(strategy_from_file(&v1), strategy_from_file(&v2));
    let load = |v: &Value| dpmm::SavedPlan::load(dpmm::Document::text(v.to_string(), "plan"), None);
    let (a, b) = (load(&v1).unwrap(), load(&v2).unwrap());
    assert_eq!(a.summary().objective, b.summary().objective);
    assert_eq!(a.summary().groups.len(), b.summary().groups.len());
    // An index past `matrices`, and a matrix on an attribute of another size.
    let mut past = v2.clone();
    past["terms"][0]["factors"]
        .as_object_mut()
        .unwrap()
        .values_mut()
        .for_each(|f| *f = 99.into());
    let e = load(&past).err().unwrap().to_string();
    assert!(e.contains("names matrix 99"), "{e}");
    let sizes: Vec<usize> = matrices
        .iter()
        .map(|m| m[0].as_array().unwrap().len())
        .collect();
    if let Some(other) = (0..sizes.len()).find(|&j| sizes[j] != sizes[0]) {
        let mut wrong = v2.clone();
        let first = wrong["terms"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find_map(|t| {
                t["factors"]
                    .as_object_mut()
                    .unwrap()
                    .values_mut()
                    .find(|f| f.as_u64() == Some(0))
            });
        *first.unwrap() = other.into();
        let e = load(&wrong).err().unwrap().to_string();
        assert!(e.contains("columns") || e.contains("entries"), "{e}");
    }
}

/// A pure-ε plan's lower bound is the singular-value bound of the (ε, δ)
/// program, and its report, JSON and page say so; an (ε, δ) plan's bound
/// is its own program's and carries no such note.
#[test]
fn a_pure_plan_says_what_its_lower_bound_is() {
    let dir = scratch_dir("plan-bound-note");
    let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/fertility1980/spec.json");
    for (privacy, noted) in [
        (&["--epsilon", "1"][..], true),
        (&["--epsilon", "1", "--delta", "1e-6"][..], false),
    ] {
        let out = dir.join("p.json");
        let page = dir.join("p.html");
        let _ = std::fs::remove_file(&out);
        let mut args = vec![
            "plan",
            "--workload",
            arg(&spec),
            "--out",
            arg(&out),
            "--report",
            arg(&page),
        ];
        args.extend(privacy);
        let text = dpmm(&args);
        assert_eq!(text.code, 0, "{text:?}");
        assert_eq!(
            text.stdout.contains("singular-value bound"),
            noted,
            "{}",
            text.stdout
        );
        assert_eq!(
            std::fs::read_to_string(&page)
                .unwrap()
                .contains("singular-value bound"),
            noted
        );
        let _ = std::fs::remove_file(&out);
        args.push("--json");
        let json: Value = serde_json::from_str(&dpmm(&args).stdout).unwrap();
        assert_eq!(json.get("lower_bound_note").is_some(), noted);
    }
}
