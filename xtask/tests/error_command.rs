//! `cargo xtask error` end to end: hand-written `.npy` files (int64,
//! float64, C and Fortran order), objectives against closed forms, and the
//! refusal of bad input with one line and exit status 2 (never a panic).

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

mod common;

use std::path::Path;

use common::{Run, arg, f64_matrix, tmpdir, write_npy, xtask};

fn i64_matrix(path: &Path, rows: &[&[i64]]) {
    let mut payload = Vec::new();
    for row in rows {
        for v in *row {
            payload.extend_from_slice(&v.to_le_bytes());
        }
    }
    write_npy(path, "<i8", false, &[rows.len(), rows[0].len()], &payload);
}

/// `xtask error` on workload `w` and strategy `a` under `privacy`, with
/// `extra` arguments.
fn error(w: &Path, a: &Path, privacy: &str, extra: &[&str]) -> Run {
    let mut args = vec!["error", "--workload", arg(w), "--strategy", arg(a)];
    args.extend(["--privacy", privacy]);
    args.extend(extra);
    xtask(&args)
}

/// H₄ of the matrix mechanism paper, Figure 1: the binary hierarchy of
/// ranges [lo, hi) over 4 cells, as 0/1 rows.
fn h4_rows() -> Vec<Vec<f64>> {
    [(0, 4), (0, 2), (2, 4), (0, 1), (1, 2), (2, 3), (3, 4)]
        .iter()
        .map(|&(lo, hi)| {
            (0..4)
                .map(|j| f64::from(u8::from((lo..hi).contains(&j))))
                .collect()
        })
        .collect()
}

#[test]
fn objectives_of_h4_and_the_lrm_example() {
    let dir = tmpdir("obj");
    let h4 = dir.join("h4.npy");
    let h4f = dir.join("h4f.npy");
    let rows = h4_rows();
    let rows: Vec<&[f64]> = rows.iter().map(Vec::as_slice).collect();
    f64_matrix(&h4, &rows, false);
    f64_matrix(&h4f, &rows, true);
    // Workload e₁ (int64): its error profile entry is 13/21, Δ₁(H₄)² = 9.
    let e1 = dir.join("e1.npy");
    i64_matrix(&e1, &[&[1, 0, 0, 0]]);
    for strategy in [&h4, &h4f] {
        let v = error(&e1, strategy, "pure", &["--epsilon", "0.5"])
            .ok()
            .json();
        let l1 = v["l1_obj"].as_f64().unwrap();
        assert!((l1 / (9.0 * 13.0 / 21.0) - 1.0).abs() < 1e-12, "{l1}");
        assert_eq!(v["supported"], true);
        // Total error = 2 l1_obj / ε².
        let tot = v["expected_total_squared_error"].as_f64().unwrap();
        assert!((tot / (2.0 * l1 / 0.25) - 1.0).abs() < 1e-12);
    }
    // LRM example with the identity strategy: l1_obj = ‖W‖²_F = 20.
    let w = dir.join("w.npy");
    i64_matrix(&w, &[&[0, 2, 1, 1], &[0, 1, 0, 2], &[1, 0, 2, 2]]);
    let id = dir.join("id.npy");
    f64_matrix(
        &id,
        &[
            &[1., 0., 0., 0.],
            &[0., 1., 0., 0.],
            &[0., 0., 1., 0.],
            &[0., 0., 0., 1.],
        ],
        true,
    );
    let v = error(&w, &id, "pure", &[]).ok().json();
    assert!((v["l1_obj"].as_f64().unwrap() - 20.0).abs() < 1e-12);
    assert!((v["expected_total_squared_error"].as_f64().unwrap() - 40.0).abs() < 1e-11);
    // approx: l2_obj = Δ₂(I)² · 20 = 20.
    let extra = ["--epsilon", "0.5", "--delta", "1e-5"];
    let v = error(&w, &id, "approx", &extra).ok().json();
    assert!((v["l2_obj"].as_f64().unwrap() - 20.0).abs() < 1e-12);
}

#[test]
fn rank_deficient_strategies_report_support() {
    let dir = tmpdir("rank");
    let a = dir.join("a.npy");
    f64_matrix(
        &a,
        &[&[1., 1., 0., 0.], &[0., 0., 1., 1.], &[2., 2., 0., 0.]],
        false,
    );
    let ok = dir.join("ok.npy");
    f64_matrix(&ok, &[&[1., 1., 1., 1.], &[3., 3., -1., -1.]], false);
    let bad = dir.join("bad.npy");
    f64_matrix(&bad, &[&[1., 0., 0., 0.]], false);
    let v = error(&ok, &a, "pure", &[]).ok().json();
    assert_eq!(v["supported"], true);
    // tr = 4 (see dp-core's closed-form test), Δ₁ = 3 → l1_obj = 36.
    assert!((v["l1_obj"].as_f64().unwrap() - 36.0).abs() < 1e-11);
    let v = error(&bad, &a, "approx", &[]).ok().json();
    assert_eq!(v["supported"], false);
    assert!(v["expected_total_squared_error"].is_null());
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tmpdir("bad");
    let good = dir.join("good.npy");
    f64_matrix(&good, &[&[1., 0.], &[0., 1.]], false);
    let nan = dir.join("nan.npy");
    f64_matrix(&nan, &[&[1., f64::NAN], &[0., 1.]], false);
    let inf = dir.join("inf.npy");
    f64_matrix(&inf, &[&[1., f64::INFINITY], &[0., 1.]], false);
    let one_d = dir.join("oned.npy");
    write_npy(&one_d, "<f8", false, &[2], &[0u8; 16]);
    let empty = dir.join("empty.npy");
    write_npy(&empty, "<f8", false, &[0, 2], &[]);
    let complex = dir.join("complex.npy");
    write_npy(&complex, "<c16", false, &[1, 1], &[0u8; 16]);
    let truncated = dir.join("trunc.npy");
    write_npy(&truncated, "<f8", false, &[2, 2], &[0u8; 20]);
    let text = dir.join("text.npy");
    std::fs::write(&text, "not numpy").unwrap();
    let zero = dir.join("zero.npy");
    f64_matrix(&zero, &[&[0., 0.]], false);
    let wide = dir.join("wide.npy");
    f64_matrix(&wide, &[&[1., 0., 0.]], false);
    let missing = dir.join("missing.npy");
    let good = good.as_path();
    let cases: [(&Path, &Path, &str, &[&str], &str); 14] = [
        (&nan, good, "pure", &[], "non-finite"),
        (good, &inf, "pure", &[], "non-finite"),
        (&one_d, good, "pure", &[], "2-d"),
        (&empty, good, "pure", &[], "empty"),
        (&complex, good, "pure", &[], "dtype"),
        (&truncated, good, "pure", &[], "truncated"),
        (&text, good, "pure", &[], "not a valid .npy"),
        (&zero, good, "pure", &[], "zero"),
        (&wide, good, "pure", &[], "mismatch"),
        (&missing, good, "pure", &[], "cannot open"),
        (good, good, "pure", &["--epsilon", "0"], "epsilon"),
        (good, good, "pure", &["--epsilon", "-2"], "epsilon"),
        (good, good, "approx", &["--delta", "1.5"], "delta"),
        (good, good, "approx", &["--delta", "0"], "delta"),
    ];
    for (w, a, privacy, extra, needle) in cases {
        let r = error(w, a, privacy, extra);
        r.refused();
        let what = format!("{w:?} {a:?} {privacy} {extra:?}");
        assert!(
            r.stderr.to_lowercase().contains(needle),
            "{what}: {}",
            r.stderr
        );
        assert!(!r.stdout.contains("NaN"));
    }
}
