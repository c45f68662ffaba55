//! The papers' generators reproduce the statistics the papers state.

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

use dp_linalg::ThinSvd;
use dp_workloads::generators::*;
use dp_workloads::workload::Workload;

#[test]
fn wrange_mean_width_is_about_n_over_3() {
    let (m, n) = (4000, 300);
    let w = wrange(m, n, 17).unwrap();
    let mat = w.explicit().unwrap();
    let widths: Vec<f64> = (0..m).map(|i| mat.row(i).iter().sum()).collect();
    let mean = widths.iter().sum::<f64>() / m as f64;
    // E width = (n² − 1)/(3n) + 1 = 100.997; sd of |a − b| ≈ n/√18.
    let expected = ((n * n - 1) as f64) / (3.0 * n as f64) + 1.0;
    let se = n as f64 / 18f64.sqrt() / (m as f64).sqrt();
    assert!(
        (mean - expected).abs() < 5.0 * se,
        "mean width {mean} vs {expected}"
    );
    // Every row is one contiguous run of ones.
    for i in 0..m {
        let row: Vec<f64> = mat.row(i).iter().copied().collect();
        let first = row.iter().position(|&v| v == 1.0).unwrap();
        let last = row.iter().rposition(|&v| v == 1.0).unwrap();
        assert!(row[first..=last].iter().all(|&v| v == 1.0));
        assert!(row.iter().all(|&v| v == 0.0 || v == 1.0));
    }
    // Seeded: same seed, same workload; other seed, other workload.
    let again = wrange(m, n, 17).unwrap().explicit().unwrap();
    assert!((0..m).all(|i| (0..n).all(|j| again[(i, j)] == mat[(i, j)])));
    let other = wrange(m, n, 18).unwrap().explicit().unwrap();
    assert!((0..m).any(|i| (0..n).any(|j| other[(i, j)] != mat[(i, j)])));
}

#[test]
fn wrelated_has_rank_exactly_s() {
    for (m, n, s) in [(64, 48, 10), (40, 80, 40), (100, 60, 1)] {
        let w = wrelated(m, n, s, 5).unwrap().explicit().unwrap();
        assert_eq!(
            ThinSvd::new(w.as_ref()).unwrap().rank(),
            s,
            "m {m} n {n} s {s}"
        );
    }
    assert!(wrelated(10, 10, 11, 0).is_err());
    assert!(wrelated(10, 10, 0, 0).is_err());
}

#[test]
fn wdiscrete_entries_follow_the_stated_probabilities() {
    let (m, n) = (200, 250);
    let w = wdiscrete(m, n, DiscreteEntries::LRM, 3)
        .unwrap()
        .explicit()
        .unwrap();
    let total = (m * n) as f64;
    let plus = (0..m)
        .flat_map(|i| (0..n).map(move |j| (i, j)))
        .filter(|&(i, j)| w[(i, j)] == 1.0)
        .count() as f64;
    let minus = (0..m)
        .flat_map(|i| (0..n).map(move |j| (i, j)))
        .filter(|&(i, j)| w[(i, j)] == -1.0)
        .count() as f64;
    assert_eq!(plus + minus, total);
    let p = 0.02;
    assert!((plus / total - p).abs() < 5.0 * (p * (1.0 - p) / total).sqrt());
    let z = wdiscrete(m, n, DiscreteEntries::ZeroOne { p: 0.3 }, 4)
        .unwrap()
        .explicit()
        .unwrap();
    let ones = (0..m)
        .flat_map(|i| (0..n).map(move |j| (i, j)))
        .filter(|&(i, j)| z[(i, j)] == 1.0)
        .count() as f64;
    assert!((ones / total - 0.3).abs() < 5.0 * (0.21 / total).sqrt());
    assert!(wdiscrete(5, 5, DiscreteEntries::ZeroOne { p: 1.5 }, 0).is_err());
}

#[test]
fn wmarginal_queries_are_two_way_marginal_cells() {
    let (m, n) = (300, 64);
    let d = 6;
    let w = wmarginal(m, n, 9).unwrap().explicit().unwrap();
    for i in 0..m {
        // A 2-way marginal cell of d binary attributes holds n/4 cells.
        assert_eq!(w.row(i).iter().sum::<f64>(), (n / 4) as f64);
    }
    // Rank at most 1 + d + C(d, 2) = 22 (the span of all 2-way marginals).
    let rank = ThinSvd::new(w.as_ref()).unwrap().rank();
    assert!(rank <= 1 + d + d * (d - 1) / 2, "rank {rank}");
    assert!(
        rank >= 16,
        "300 random cells should span most of it, rank {rank}"
    );
    assert!(wmarginal(10, 48, 0).is_err());
    assert!(wmarginal(10, 2, 0).is_err());
}
