//! `cargo xtask factorize` end to end: the square root and the tree at
//! their closed forms, the banded factorization under multi-participation
//! below both baselines, and one line with exit status 2 for bad input.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::xtask;

#[test]
fn baselines_print_their_closed_forms() {
    // T = 1024: the tree has 11 levels and step 1022 sums 10 blocks.
    let tree = xtask(&["factorize", "--steps", "1024", "--family", "tree", "--json"])
        .ok()
        .json();
    assert_eq!(tree["max_variance"], 110.0);
    assert_eq!(tree["sensitivity_exact"], true);
    // The square root at T = 4: a = 1, 1/2, 3/8, 5/16; max variance (Σ a²)².
    let sqrt = xtask(&["factorize", "--steps", "4", "--family", "sqrt"])
        .ok()
        .json();
    let energy: f64 = [1.0f64, 0.5, 0.375, 0.3125].iter().map(|a| a * a).sum();
    let got = sqrt["max_variance"].as_f64().unwrap();
    assert!((got - energy * energy).abs() < 1e-12, "{got}");
    // Every figure sits above the singular value bound.
    for v in [&tree, &sqrt] {
        let bound = v["lower_bound"]["total_squared_error"].as_f64().unwrap();
        assert!(v["total_squared_error"].as_f64().unwrap() >= bound);
    }
}

#[test]
fn banded_beats_both_baselines_under_multi_participation() {
    let run = |family: &str| {
        xtask(&[
            "factorize",
            "--steps",
            "256",
            "--family",
            family,
            "--participations",
            "4",
            "--separation",
            "64",
        ])
        .ok()
        .json()
    };
    let banded = run("banded");
    assert_eq!(banded["bands"], 64);
    assert_eq!(banded["sensitivity_exact"], true);
    for family in ["sqrt", "tree"] {
        let other = run(family);
        for figure in ["total_squared_error", "max_variance"] {
            // The baseline's sensitivity at its lower end: a pattern attains it.
            let s = other["sensitivity"].as_f64().unwrap();
            let lower = other["sensitivity_lower"].as_f64().unwrap();
            let at_least = other[figure].as_f64().unwrap() * (lower / s).powi(2);
            let ours = banded[figure].as_f64().unwrap();
            assert!(ours <= at_least, "{family} {figure}: {ours} vs {at_least}");
        }
    }
}

#[test]
fn bad_input_is_one_line_and_status_2() {
    for args in [
        vec!["factorize", "--steps", "0", "--family", "sqrt"],
        vec![
            "factorize",
            "--steps",
            "8",
            "--family",
            "banded",
            "--bands",
            "9",
        ],
        vec![
            "factorize",
            "--steps",
            "8",
            "--family",
            "tree",
            "--workload",
            "decayed:0.5",
        ],
        vec![
            "factorize",
            "--steps",
            "8",
            "--family",
            "sqrt",
            "--workload",
            "window:x",
        ],
        vec![
            "factorize",
            "--steps",
            "8",
            "--family",
            "sqrt",
            "--participations",
            "2",
        ],
        vec![
            "factorize",
            "--steps",
            "8",
            "--family",
            "banded",
            "--participations",
            "0",
            "--separation",
            "2",
        ],
        vec!["factorize", "--steps", "5000", "--family", "dense"],
        vec!["factorize", "--steps", "8", "--family", "nope"],
        vec![
            "factorize",
            "--steps",
            "8",
            "--family",
            "sqrt",
            "--bands",
            "2",
        ],
        vec![
            "factorize",
            "--steps",
            "8",
            "--family",
            "banded",
            "--buffers",
            "2",
        ],
        vec![
            "factorize",
            "--steps",
            "8",
            "--family",
            "blt",
            "--workload",
            "window:3",
        ],
        vec!["factorize", "--steps", "99999999999", "--family", "sqrt"],
    ] {
        let run = xtask(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert_eq!(
            run.stderr.trim_end().lines().count(),
            1,
            "{args:?}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty());
    }
}
