#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use super::*;
use crate::experiments::SeededSession;

fn spec(arity: usize, horizon: usize, dimension: usize) -> TreeSpec {
    TreeSpec {
        arity,
        horizon,
        dimension,
        participations: 1,
        separation: 1,
        contribution: Contribution::Counts(CountsBound::new(1)),
    }
}

/// `[0, n)` cut into aligned blocks from the left, each the largest
/// `kˡ`-block (`kˡ ≤ T`) that starts at the position and ends by `n`:
/// `(level, index)` of each.
fn greedy_blocks(k: usize, t: usize, n: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < n {
        let mut l = 0;
        let mut w = 1;
        while pos.is_multiple_of(w * k) && pos + w * k <= n && w * k <= t {
            w *= k;
            l += 1;
        }
        out.push((l, pos / w));
        pos += w;
    }
    out
}

#[test]
fn draws_levels_and_sensitivity_match_the_dense_tree() {
    for k in 2..=6usize {
        for t in 1..=60 {
            let h = (0..40u32).take_while(|&l| k.pow(l) <= t).count();
            assert_eq!(levels(k, t), h, "k {k} T {t}");
            let mut used = std::collections::BTreeSet::new();
            let mut most = 0;
            for n in 1..=t {
                let blocks = greedy_blocks(k, t, n);
                assert_eq!(draws(k, n), blocks.len(), "k {k} n {n}");
                most = most.max(blocks.len());
                used.extend(blocks);
            }
            assert_eq!(max_draws(k, t), most, "k {k} T {t}");
            // Every node any running count uses is in a level below h, so
            // a step is in at most h of them: the kernel's Δ₁ / L. Step 0
            // is in h of them (exact).
            let column = |s: usize| {
                used.iter()
                    .filter(|&&(l, j)| j * k.pow(l as u32) <= s && s < (j + 1) * k.pow(l as u32))
                    .count()
            };
            let worst = (0..t).map(column).max().unwrap();
            assert_eq!((worst, column(0)), (h, h), "k {k} T {t}");
        }
    }
}

#[test]
fn best_arity_minimizes_the_largest_variance() {
    for t in [1, 2, 7, 100, 365, 1000, 4096, 100_000] {
        let cost = |k: usize| {
            let h = levels(k, t);
            let most = (1..=t).map(|n| draws(k, n)).max().unwrap();
            h * h * most
        };
        let best = best_arity(t);
        assert!((2..=MAX_ARITY).all(|k| cost(best) <= cost(k)), "T {t}");
    }
}

/// Pseudo-random counts, `dim` a step.
fn data(horizon: usize, dim: usize, seed: u64) -> Vec<Vec<i64>> {
    let mut x = seed;
    (0..horizon)
        .map(|_| {
            (0..dim)
                .map(|_| {
                    x = x
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    ((x >> 33) % 50) as i64
                })
                .collect()
        })
        .collect()
}

#[test]
fn running_counts_are_the_exact_prefix_sums_plus_the_nodes_noise() {
    // At ε = 100 and Δ₁ ≤ 7 a draw is nonzero with probability below
    // 2e^{−14}: the running counts are the prefix sums.
    for k in 2..=5 {
        for t in [1, 9, 27, 50] {
            let dim = 700; // two chunks
            let mut session = SeededSession::pure(100.0, k as u64).unwrap();
            let mut stream = session
                .stream_tree(&spec(k, t, dim), Cost::Epsilon(100.0))
                .unwrap();
            let mut sums = vec![0i64; dim];
            for (step, row) in data(t, dim, 3).iter().enumerate() {
                let out = stream.next_count_slice(row).unwrap();
                for (s, v) in sums.iter_mut().zip(row) {
                    *s += v;
                }
                let wrong = out.iter().zip(&sums).filter(|(o, s)| **o != **s as f64);
                assert!(wrong.count() < 3, "k {k} T {t} step {step}");
                assert_eq!(stream.variance().0, draws(k, step + 1));
            }
            assert!(stream.next_count_slice(&vec![0; dim]).is_err());
        }
    }
}

#[test]
fn the_variance_is_the_draws_times_the_laplace_variance() {
    for k in [2, 3] {
        let (t, dim) = (12, 40_000);
        let mut session = SeededSession::pure(1.0, 40 + k as u64).unwrap();
        let mut stream = session
            .stream_tree(&spec(k, t, dim), Cost::Epsilon(1.0))
            .unwrap();
        let f = stream.figures();
        assert_eq!(f.sensitivity, levels(k, t) as f64);
        assert_eq!(f.scale, f.sensitivity);
        for step in 0..t {
            let out = stream.next_count_slice(&vec![5; dim]).unwrap();
            let truth = 5.0 * (step + 1) as f64;
            let mean = out.iter().sum::<f64>() / dim as f64;
            let var = out.iter().map(|v| (v - truth).powi(2)).sum::<f64>() / dim as f64;
            let (d, expected) = stream.variance();
            assert_eq!(expected, d as f64 * discrete_laplace_variance(f.scale));
            // Laplace sums: kurtosis ≤ 6, so the variance estimate's
            // relative sd is below √(7/dim) ≈ 1.3%; 6% is 4.5 sd.
            assert!((var / expected - 1.0).abs() < 0.06, "k {k} step {step}");
            assert!((mean - truth).abs() < 5.0 * (expected / dim as f64).sqrt());
        }
    }
}

#[test]
fn the_charge_is_epsilon_and_every_refusal_spends_nothing() {
    let mut session = SeededSession::pure(1.0, 1).unwrap();
    let refused = [
        (spec(1, 10, 3), Cost::Epsilon(0.5)),
        (spec(65, 10, 3), Cost::Epsilon(0.5)),
        (spec(2, 0, 3), Cost::Epsilon(0.5)),
        (spec(2, 10, 0), Cost::Epsilon(0.5)),
        (spec(2, 10, 3), Cost::Rho(0.5)),
        (
            TreeSpec {
                contribution: Contribution::Clipped { norm: 1.0 },
                ..spec(2, 10, 3)
            },
            Cost::Epsilon(0.5),
        ),
        (
            TreeSpec {
                participations: 0,
                ..spec(2, 10, 3)
            },
            Cost::Epsilon(0.5),
        ),
        (spec(2, 10, 3), Cost::Epsilon(1.5)),
        (spec(2, 1 << 20, 1 << 22), Cost::Epsilon(0.5)),
    ];
    for (s, cost) in &refused {
        assert!(session.stream_tree(s, *cost).is_err(), "{s:?} {cost:?}");
        assert_eq!(session.spent(), 0.0);
    }
    session
        .stream_tree(&spec(2, 10, 3), Cost::Epsilon(0.4))
        .unwrap();
    assert_eq!(session.spent(), 0.4);
    // Under zCDP a pure ε stream costs ε²/2 (rounded upward).
    let mut zcdp = SeededSession::zcdp(1.0, 1).unwrap();
    zcdp.stream_tree(&spec(3, 10, 3), Cost::Epsilon(0.5))
        .unwrap();
    assert!((0.125..0.125 * (1.0 + 1e-12)).contains(&zcdp.spent()));
}

#[test]
fn participations_multiply_the_sensitivity() {
    let s = TreeSpec {
        participations: 3,
        separation: 20,
        contribution: Contribution::Counts(CountsBound::of_units(4, 1, 3, 20)),
        ..spec(2, 50, 3)
    };
    // T = 50: h = 6; three steps 20 apart fit (0, 20, 40).
    let f = s.figures(2.0).unwrap();
    assert_eq!((f.levels, f.sensitivity, f.scale), (6, 72.0, 36.0));
    assert!(!f.sensitivity_exact);
    // Only two fit 30 apart.
    let f = TreeSpec {
        separation: 30,
        contribution: Contribution::Counts(CountsBound::of_units(4, 1, 3, 30)),
        ..s.clone()
    }
    .figures(2.0)
    .unwrap();
    assert_eq!(f.sensitivity, 48.0);
    assert!(spec(2, 50, 3).figures(2.0).unwrap().sensitivity_exact);
    // A unit of 5 records a step moves a step by 5 × 4 in L1.
    let units = TreeSpec {
        participations: 1,
        separation: 1,
        contribution: Contribution::Counts(CountsBound::of_units(4, 5, 1, 1)),
        ..spec(2, 50, 3)
    };
    assert_eq!(units.figures(2.0).unwrap().sensitivity, 120.0);
    // A spec whose participation is not the counts' is refused.
    assert!(
        TreeSpec {
            participations: 1,
            ..s.clone()
        }
        .figures(2.0)
        .is_err()
    );
}

/// The exact law of a sum of `d` discrete Laplace draws of `scale`,
/// `P(X = x)` for `|x| ≤ m`, by convolving the single draw's pmf
/// (`(1−p)/(1+p) · p^|x|`, truncated where its mass is below 1e-18).
fn sum_pmf(scale: f64, d: usize, m: i64) -> Vec<f64> {
    let p = (-1.0 / scale).exp();
    let reach = ((18.0 * std::f64::consts::LN_10) * scale).ceil() as i64 + 1;
    let one: Vec<f64> = (-reach..=reach)
        .map(|x| (1.0 - p) / (1.0 + p) * p.powi(x.unsigned_abs() as i32))
        .collect();
    let mut law = vec![1.0];
    for _ in 0..d {
        let mut next = vec![0.0; law.len() + one.len() - 1];
        for (i, a) in law.iter().enumerate() {
            for (j, b) in one.iter().enumerate() {
                next[i + j] += a * b;
            }
        }
        law = next;
    }
    let centre = (law.len() / 2) as i64;
    (-m..=m)
        .map(|x| law.get((centre + x) as usize).copied().unwrap_or(0.0))
        .collect()
}

#[test]
fn intervals_cover_at_least_95_percent_under_the_exact_law() {
    // Scales from far below to several times the grid, with the draws a
    // running count has (up to 40); the exact law by convolution.
    for scale in [0.05, 0.2, 0.5, 0.8, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0] {
        for d in 1..=40 {
            let h = half_width(scale, d);
            assert_eq!(h.fract(), 0.0);
            let cover: f64 = sum_pmf(scale, d, h as i64).iter().sum();
            assert!(cover >= 0.95, "scale {scale} draws {d}: {cover}");
            // Not wasteful: one integer less would cover less than 97.5%
            // (below half a count of scale the count is almost surely
            // exact, and the interval one count wide).
            if scale >= 0.5 {
                let less: f64 = sum_pmf(scale, d, h as i64 - 1).iter().sum();
                assert!(less < 0.975, "scale {scale} draws {d}: {less}");
            }
        }
    }
}
