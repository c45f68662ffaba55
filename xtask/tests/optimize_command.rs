//! `cargo xtask optimize` for the closed-form strategies: objectives
//! against closed forms and an independent pseudo-inverse computation.

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

mod common;

use std::path::Path;

use common::{arg, tmpdir, xtask};

use dp_linalg::{Mat, gram, pseudo_inverse_symmetric, trace_of_product};
use dp_workloads::npy::{read_matrix, write_matrix};

fn optimize(w: &Path, optimizer: &str, privacy: &str, out: &Path) -> serde_json::Value {
    let mut args = vec!["optimize", "--workload", arg(w), "--optimizer", optimizer];
    args.extend(["--privacy", privacy, "--out", arg(out), "--json"]);
    xtask(&args).ok().json()
}

/// Δ² · tr(WᵀW (AᵀA)⁺) with the pseudo-inverse of the Gram matrix (a
/// different route from the library's SVD of A).
fn reference(w: &Mat<f64>, a: &Mat<f64>, pure: bool) -> f64 {
    let pinv =
        pseudo_inverse_symmetric(gram(a.as_ref(), dp_linalg::Par::Seq).as_ref(), None).unwrap();
    let t = trace_of_product(
        gram(w.as_ref(), dp_linalg::Par::Seq).as_ref(),
        pinv.as_ref(),
    )
    .unwrap();
    let delta = (0..a.ncols())
        .map(|j| {
            if pure {
                a.col(j).iter().map(|v| v.abs()).sum::<f64>()
            } else {
                a.col(j).iter().map(|v| v * v).sum::<f64>().sqrt()
            }
        })
        .fold(0.0, f64::max);
    delta * delta * t
}

#[test]
fn closed_form_strategies_report_recomputed_objectives() {
    let dir = tmpdir("closed");
    // Ranges over 13 cells (not a power of two) and a rank-2 workload.
    let ranges = Mat::from_fn(20, 13, |i, j| {
        let a = (i * 5) % 13;
        let b = (a + i % 7).min(12);
        if (a..=b).contains(&j) { 1.0 } else { 0.0 }
    });
    let low_rank = Mat::from_fn(6, 13, |i, j| {
        ((i % 2 + 1) * (j % 3)) as f64 + (i / 2) as f64
    });
    for (tag, w) in [("ranges", ranges), ("lowrank", low_rank)] {
        let wp = dir.join(format!("{tag}.npy"));
        write_matrix(&wp, w.as_ref()).unwrap();
        let fro2: f64 = (0..w.ncols()).map(|j| w.col(j).squared_norm_l2()).sum();
        let sigma = dp_linalg::ThinSvd::values_only(w.as_ref()).unwrap();
        let bound = sigma.iter().sum::<f64>().powi(2) / 13.0;
        for optimizer in ["identity", "hierarchical", "wavelet", "svdb"] {
            for privacy in ["pure", "approx"] {
                if tag == "lowrank" && optimizer != "svdb" && optimizer != "identity" {
                    continue;
                }
                let out = dir.join(format!("{tag}-{optimizer}-{privacy}.npy"));
                let v = optimize(&wp, optimizer, privacy, &out);
                let a = read_matrix(&out).unwrap();
                let obj = v["objective"].as_f64().unwrap();
                let r = reference(&w, &a, privacy == "pure");
                assert!(
                    (obj - r).abs() <= 1e-9 * r,
                    "{tag} {optimizer} {privacy}: {obj} vs {r}"
                );
                assert!((v["svd_bound"].as_f64().unwrap() - bound).abs() <= 1e-9 * bound);
                let kind = v["termination"]["kind"].as_str().unwrap();
                assert!(matches!(kind, "converged" | "closed_form"), "{v}");
                assert!(v.get("converged").is_none(), "{v}");
                assert_eq!(v["n"], 13);
                assert_eq!(v["m"], w.nrows());
                if optimizer == "identity" {
                    assert!((obj - fro2).abs() <= 1e-9 * fro2);
                }
                if privacy == "approx" {
                    assert!(obj >= bound * (1.0 - 1e-12));
                }
                if optimizer == "svdb" {
                    // tr(WᵀW (AᵀA)⁺) = Σσ for the SVD-bound strategy.
                    let t = obj
                        / if privacy == "pure" {
                            dp_core::sensitivity_l1(a.as_ref()).unwrap().powi(2)
                        } else {
                            dp_core::sensitivity_l2(a.as_ref()).unwrap().powi(2)
                        };
                    assert!((t - sigma.iter().sum::<f64>()).abs() < 1e-9 * t);
                }
            }
        }
    }
}

#[test]
fn unknown_optimizer_and_bad_workload_are_refused() {
    let dir = tmpdir("bad");
    let wp = dir.join("w.npy");
    write_matrix(&wp, Mat::<f64>::identity(3, 3).as_ref()).unwrap();
    let zero = dir.join("z.npy");
    write_matrix(&zero, Mat::<f64>::zeros(3, 3).as_ref()).unwrap();
    for (w, opt) in [(&wp, "nope"), (&zero, "identity")] {
        let args = ["optimize", "--workload", arg(w), "--optimizer", opt];
        let run = xtask(&[&args[..], &["--privacy", "pure"]].concat());
        run.refused();
        if opt == "nope" {
            // The error lists every registered optimizer.
            for d in dp_opt::REGISTRY {
                assert!(run.stderr.contains(d.name), "{}", run.stderr);
            }
        }
    }
}

/// `optimize --help` lists every registered optimizer with its
/// description; a branching factor for an optimizer without one is refused.
#[test]
fn help_lists_the_registry_and_parameters_are_checked() {
    let help = xtask(&["optimize", "--help"]).ok().stdout;
    for d in dp_opt::REGISTRY {
        let line = help.lines().find(|l| l.trim_start().starts_with(d.name));
        assert!(line.is_some_and(|l| l.contains(d.description)), "{help}");
    }
    let dir = tmpdir("branching");
    let wp = dir.join("w.npy");
    write_matrix(&wp, Mat::<f64>::identity(4, 4).as_ref()).unwrap();
    let run = |opt: &str| {
        let args = ["optimize", "--workload", arg(&wp), "--optimizer", opt];
        xtask(&[&args[..], &["--privacy", "pure", "--branching", "4"]].concat())
    };
    let refused = run("wavelet");
    refused.refused();
    assert!(refused.stderr.contains("branching"), "{}", refused.stderr);
    // A 4-ary tree over 4 cells: the 4 leaves and the root.
    assert_eq!(run("hierarchical").ok().json()["p"], 5);
}

/// `bench coa` runs each size in a child process and prints one row per
/// size (converged, certified) and the fitted exponent; `--json` gives the
/// same rows as objects.
#[test]
fn bench_coa_prints_time_objective_gap_and_memory() {
    let coa = ["bench", "coa", "--workload", "prefix", "--sizes", "16,32"];
    let out = xtask(&coa).ok().stdout;
    assert!(out.contains("fitted exponent"), "{out}");
    assert!(out.lines().next().unwrap().contains("peak MB"), "{out}");
    let json_rows = |args: &[&str]| xtask(&[args, &["--json"]].concat()).ok().json_lines();
    let rows = json_rows(&coa);
    assert_eq!(rows.len(), 2);
    for (row, n) in rows.iter().zip([16.0, 32.0]) {
        assert_eq!(row["n"].as_f64(), Some(n));
        assert_eq!(
            row["termination"]["kind"].as_str(),
            Some("converged"),
            "{row}"
        );
        assert!(row["duality_gap"].as_f64().unwrap() <= 1e-6, "{row}");
        assert_eq!(
            row["workload_rank"].as_f64(),
            Some(n),
            "prefix has full rank"
        );
        let objective = row["objective"].as_f64().unwrap();
        // Independent bracket: the SVD bound below, the identity above.
        let g =
            dp_workloads::Workload::gram(&dp_workloads::workload::Prefix::new(n as usize).unwrap());
        let identity: f64 = (0..n as usize).map(|i| g[(i, i)]).sum();
        let svd = dp_core::svd_lower_bound_from_gram(g.as_ref()).unwrap();
        assert!(
            objective >= svd * (1.0 - 1e-9) && objective <= identity,
            "{row}"
        );
    }
    // LRM against the rank: one row per r, with its residual.
    let rows = json_rows(&[
        "bench",
        "lrm",
        "--workload",
        "wrange",
        "--sizes",
        "16",
        "--m",
        "16",
        "--ranks",
        "8,16",
    ]);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0]["rank"].as_f64(), rows[1]["rank"].as_f64()),
        (Some(8.0), Some(16.0))
    );
    // Independent bounds: never above the identity's l1_obj (‖W‖_F², what
    // LRM falls back to), never below the SVD bound (Σσᵢ)²/n, which bounds
    // l2_obj ≤ l1_obj of every strategy.
    let w = dp_workloads::generators::wrange(16, 16, 2016).unwrap();
    let g = dp_workloads::Workload::gram(&w);
    let identity: f64 = (0..16).map(|i| g[(i, i)]).sum();
    let svd = dp_core::svd_lower_bound_from_gram(g.as_ref()).unwrap();
    for row in &rows {
        let objective = row["objective"].as_f64().unwrap();
        assert!(objective <= identity * (1.0 + 1e-9), "{row}");
        assert!(objective >= svd * (1.0 - 1e-9), "{row}");
    }
    xtask(&["bench", "coa", "--sizes", "0"]).refused();
}

/// `plan --objective max`: the report and the plan file name the
/// objective and certify it; ε-DP, a workload that is not marginals and
/// an unknown objective are refused with one line and status 2.
#[test]
fn plan_max_variance_objective_and_its_refusals() {
    let dir = tmpdir("plan-objective");
    let (spec, prefix, out) = (
        dir.join("spec.json"),
        dir.join("prefix.json"),
        dir.join("plan.json"),
    );
    let domain =
        r#"[{"name": "a", "size": 2}, {"name": "b", "size": 3}, {"name": "c", "size": 4}]"#;
    let marginals =
        r#"[{"marginal": ["a"]}, {"marginal": ["a", "b"], "weight": 2.0}, {"marginal": ["c"]}]"#;
    let text = |q: &str| format!(r#"{{"domain": {domain}, "queries": {q}}}"#);
    std::fs::write(&spec, text(marginals)).unwrap();
    std::fs::write(&prefix, text(r#"[{"kron": {"a": "prefix"}}]"#)).unwrap();
    let approx = ["--privacy", "approx", "--epsilon", "1", "--delta", "1e-6"];
    let run = |w: &Path, privacy: &[&str], objective: &str| {
        let mut args = vec!["plan", "--workload", arg(w), "--objective", objective];
        args.extend_from_slice(privacy);
        args.extend(["--out", arg(&out)]);
        xtask(&args)
    };
    let report = run(&spec, &approx, "max").ok().json();
    assert_eq!(report["objective_name"], "max_variance");
    assert_eq!(report["termination"]["kind"], "converged");
    assert!(report["duality_gap"].as_f64().unwrap() <= 1e-6);
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(file["objective_name"], "max_variance");
    assert_eq!(file["objective"], report["objective"]);
    let total = run(&spec, &approx, "total").ok().json();
    assert_eq!(total["objective_name"], "l2_obj");
    run(&spec, &["--privacy", "pure", "--epsilon", "1"], "max").refused();
    run(&prefix, &approx, "max").refused();
    run(&spec, &approx, "median").refused();
}
