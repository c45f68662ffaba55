#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;

/// A domain of sizes [3, 4, 2]: the full table, two marginals and the
/// total.
fn layouts(steps: usize) -> Vec<TableLayout> {
    vec![
        TableLayout::new(vec![3, 4, 2], vec![vec![0, 1, 2]], steps, 1 << 20).unwrap(),
        TableLayout::new(
            vec![3, 4, 2],
            vec![vec![0, 2], vec![1], vec![]],
            steps,
            1 << 20,
        )
        .unwrap(),
    ]
}

/// Random records: codes per attribute, multiplicities (a tenth left out,
/// a few groups), units among `units`, weights in [0, 3), steps below
/// `steps`.
#[derive(Clone)]
struct Random {
    codes: Vec<Vec<u32>>,
    multiplicity: Vec<u64>,
    units: Vec<u128>,
    weights: Vec<f64>,
    steps: Vec<u32>,
}

/// A unit number as a hash would give it: spread over all 128 bits, so
/// that units fall in every partition.
fn spread(u: u64) -> u128 {
    u128::from(u).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)
}

fn random(rows: usize, units: u64, steps: u32, seed: u64) -> Random {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let shape = [3u32, 4, 2];
    Random {
        codes: shape
            .iter()
            .map(|&n| (0..rows).map(|_| rng.random_range(0..n)).collect())
            .collect(),
        multiplicity: (0..rows)
            .map(|_| match rng.random_range(0..10) {
                0 => 0,
                1 => rng.random_range(2..5),
                _ => 1,
            })
            .collect(),
        units: (0..rows)
            .map(|_| spread(rng.random_range(0..units)))
            .collect(),
        weights: (0..rows).map(|_| rng.random_range(0.0..3.0)).collect(),
        steps: (0..rows).map(|_| rng.random_range(0..steps)).collect(),
    }
}

/// Counts `batches` (each a range of the records) on two tallies.
fn count(
    layout: &TableLayout,
    contributions: Contributions,
    records: &Random,
    batches: &[std::ops::Range<usize>],
    memory: u64,
) -> Counted {
    count_in(
        layout,
        contributions,
        records,
        batches,
        memory,
        std::env::temp_dir(),
    )
}

/// [`count`], spilling under `dir`.
fn count_in(
    layout: &TableLayout,
    contributions: Contributions,
    records: &Random,
    batches: &[std::ops::Range<usize>],
    memory: u64,
    dir: std::path::PathBuf,
) -> Counted {
    let counting = Counting::new(layout.clone(), contributions, memory, dir, 2).unwrap();
    let mut tallies = vec![counting.tally().unwrap(), counting.tally().unwrap()];
    let steps = if layout.steps() > 1 {
        records.steps.clone()
    } else {
        Vec::new()
    };
    for (i, range) in batches.iter().enumerate() {
        let codes: Vec<Vec<u32>> = records
            .codes
            .iter()
            .map(|c| c[range.clone()].to_vec())
            .collect();
        let units: Vec<u128> = records.units[range.clone()].to_vec();
        let batch = Records {
            codes: &codes,
            multiplicity: &records.multiplicity[range.clone()],
            units: contributions.max_records_per_unit.map(|_| &units[..]),
            weights: contributions
                .max_weight
                .map(|_| &records.weights[range.clone()]),
            steps: if steps.is_empty() {
                &[]
            } else {
                &steps[range.clone()]
            },
        };
        tallies[i % 2].add(&batch).unwrap();
    }
    counting.finish(tallies).unwrap()
}

/// The tables counted by hand: each record's multiplicity at its cell.
fn brute_force(layout: &TableLayout, records: &Random) -> Vec<Vec<u64>> {
    layout
        .tables()
        .iter()
        .map(|t| {
            let sizes: Vec<usize> = t.iter().map(|&a| layout.shape()[a]).collect();
            let cells: usize = sizes.iter().product();
            let mut out = vec![0u64; cells * layout.steps()];
            for r in 0..records.multiplicity.len() {
                let mut cell = 0;
                for (&a, &n) in t.iter().zip(&sizes) {
                    cell = cell * n + records.codes[a][r] as usize;
                }
                let step = if layout.steps() > 1 {
                    records.steps[r] as usize
                } else {
                    0
                };
                out[step * cells + cell] += records.multiplicity[r];
            }
            out
        })
        .collect()
}

fn tables_of(counted: &Counted) -> Vec<Vec<u64>> {
    counted
        .tables_for_tests()
        .into_iter()
        .map(|(_, c)| c)
        .collect()
}

#[test]
fn records_without_a_unit_count_as_the_brute_force() {
    let records = random(5000, 100, 7, 1);
    let batches = [0..1, 1..2000, 2000..2000, 2000..5000];
    for steps in [1, 7] {
        for layout in layouts(steps) {
            let counted = count(
                &layout,
                Contributions::default(),
                &records,
                &batches,
                1 << 20,
            );
            assert_eq!(tables_of(&counted), brute_force(&layout, &records));
            assert_eq!((counted.scale(), counted.unit()), (1, 1.0));
        }
    }
}

/// Records where each unit's records all share one cell: the counts are
/// then exact whatever records are kept, `Σ min(n_u, K)` per cell.
fn one_cell_per_unit(units: u64, seed: u64) -> (Random, Vec<Vec<u64>>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut records = Random {
        codes: vec![Vec::new(), Vec::new(), Vec::new()],
        multiplicity: Vec::new(),
        units: Vec::new(),
        weights: Vec::new(),
        steps: Vec::new(),
    };
    let mut sizes = Vec::new();
    for u in 0..units {
        let cell: [u32; 3] = [
            rng.random_range(0..3),
            rng.random_range(0..4),
            rng.random_range(0..2),
        ];
        let n: u32 = if rng.random_range(0..4) == 0 {
            rng.random_range(5..60)
        } else {
            rng.random_range(1..4)
        };
        sizes.push((cell, n));
        for _ in 0..n {
            for (a, &c) in cell.iter().enumerate() {
                records.codes[a].push(c);
            }
            records.multiplicity.push(1);
            records.units.push(spread(u));
            records.weights.push(1.0);
            records.steps.push(0);
        }
    }
    // Shuffle, so that a unit's records are spread over the batches.
    let rows = records.multiplicity.len();
    let mut order: Vec<usize> = (0..rows).collect();
    for i in (1..rows).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let shuffled = Random {
        codes: records
            .codes
            .iter()
            .map(|c| order.iter().map(|&i| c[i]).collect())
            .collect(),
        multiplicity: order.iter().map(|&i| records.multiplicity[i]).collect(),
        units: order.iter().map(|&i| records.units[i]).collect(),
        weights: order.iter().map(|&i| records.weights[i]).collect(),
        steps: order.iter().map(|&i| records.steps[i]).collect(),
    };
    let want = |k: u64| {
        let mut full = vec![0u64; 24];
        for &(cell, n) in &sizes {
            full[(cell[0] * 4 + cell[1]) as usize * 2 + cell[2] as usize] += u64::from(n).min(k);
        }
        vec![full]
    };
    (shuffled, want(3))
}

#[test]
fn at_most_k_records_of_a_unit_are_kept_with_or_without_spilling() {
    let (records, want) = one_cell_per_unit(3000, 2);
    let layout = TableLayout::new(vec![3, 4, 2], vec![vec![0, 1, 2]], 1, 1 << 20).unwrap();
    let rows = records.multiplicity.len();
    let batches = [0..rows / 3, rows / 3..rows];
    let k3 = Contributions {
        max_records_per_unit: Some(3),
        max_weight: None,
        steps: None,
    };
    // Ample memory, then so little that every few entries spill.
    for memory in [1 << 26, 64 * 1024] {
        let counted = count(&layout, k3, &records, &batches, memory);
        assert_eq!(tables_of(&counted), want, "memory {memory}");
        assert_eq!(counted.scale(), 3);
    }
    // No spill directory is left behind.
    let left = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("dpmm-records-{}-", std::process::id()))
        })
        .count();
    assert_eq!(left, 0);
}

/// Which of a unit's records are kept is a uniform choice: over many
/// countings of one unit's 5 records (each in its own cell), each is kept
/// 2 times in 5 (K = 2), whatever its place in the input.
#[test]
fn the_records_kept_are_a_uniform_choice() {
    let layout = TableLayout::new(vec![5], vec![vec![0]], 1, 1 << 10).unwrap();
    let counting = || {
        Counting::new(
            layout.clone(),
            Contributions {
                max_records_per_unit: Some(2),
                max_weight: None,
                steps: None,
            },
            1 << 20,
            std::env::temp_dir(),
            1,
        )
        .unwrap()
    };
    let runs = 4000;
    let mut kept = [0u64; 5];
    for _ in 0..runs {
        let c = counting();
        let mut tally = c.tally().unwrap();
        let codes = vec![vec![0u32, 1, 2, 3, 4]];
        tally
            .add(&Records {
                codes: &codes,
                multiplicity: &[1; 5],
                units: Some(&[7; 5]),
                weights: None,
                steps: &[],
            })
            .unwrap();
        let counted = c.finish(vec![tally]).unwrap();
        for (k, &n) in kept.iter_mut().zip(&counted.tables_for_tests()[0].1) {
            *k += n;
        }
    }
    assert_eq!(kept.iter().sum::<u64>(), 2 * runs);
    // Each ~ Binomial(4000, 0.4): mean 1600, sd 31; 5 sd is a false alarm
    // below 1e-5 over the five.
    for &k in &kept {
        assert!((k as f64 - 1600.0).abs() < 5.0 * 31.0, "{kept:?}");
    }
}

#[test]
fn one_added_unit_moves_each_table_by_at_most_k() {
    let records = random(3000, 200, 1, 5);
    let layout = &layouts(1)[1];
    let k = 4;
    let contributions = Contributions {
        max_records_per_unit: Some(k),
        max_weight: None,
        steps: None,
    };
    let base = count(
        layout,
        contributions,
        &records,
        &[0..1000, 1000..3000],
        1 << 24,
    );
    let mut more = random(3000, 200, 1, 5);
    for r in 0..50 {
        for (a, c) in more.codes.iter_mut().enumerate() {
            c.push((r + a) as u32 % [3, 4, 2][a]);
        }
        more.multiplicity.push(1);
        more.units.push(spread(1_000_000));
        more.weights.push(1.0);
        more.steps.push(0);
    }
    let added = count(
        layout,
        contributions,
        &more,
        &[0..1500, 1500..3050],
        1 << 24,
    );
    // Each record of the other units is kept or not at random, so the
    // tables differ by the other units' draws too; their totals do not.
    for (a, b) in tables_of(&base).iter().zip(tables_of(&added)) {
        let (ta, tb): (u64, u64) = (a.iter().sum(), b.iter().sum());
        assert_eq!(tb - ta, u64::from(k));
    }
}

#[test]
fn weights_are_clipped_and_rounded_onto_their_grid_without_bias() {
    let layout = TableLayout::new(vec![2], vec![vec![0]], 1, 16).unwrap();
    let max = 1000.0;
    let contributions = Contributions {
        max_records_per_unit: None,
        max_weight: Some(max),
        steps: None,
    };
    let unit = contributions.count_unit();
    assert_eq!(
        unit,
        1024.0 / 65536.0,
        "the smallest power of two above W over 2^16"
    );
    assert_eq!(contributions.record_counts(), 64_000);
    assert_eq!(contributions.scale(), 64_000);
    let n = 20_000usize;
    let codes = vec![(0..n).map(|r| (r % 2) as u32).collect::<Vec<_>>()];
    // Cell 0: weights 0.1 (off the grid); cell 1: 5000, clipped to 1000.
    let weights: Vec<f64> = (0..n)
        .map(|r| if r % 2 == 0 { 0.1 } else { 5000.0 })
        .collect();
    let counting = Counting::new(layout, contributions, 1 << 20, std::env::temp_dir(), 1).unwrap();
    let mut tally = counting.tally().unwrap();
    tally
        .add(&Records {
            codes: &codes,
            multiplicity: &vec![1; n],
            units: None,
            weights: Some(&weights),
            steps: &[],
        })
        .unwrap();
    let counted = counting.finish(vec![tally]).unwrap();
    assert_eq!(counted.unit(), unit);
    let t = &counted.tables_for_tests()[0].1;
    assert_eq!(
        t[1] as f64 * unit,
        1000.0 * (n / 2) as f64,
        "clipped at W, on the grid"
    );
    // 0.1 / u = 6.4: each record counts 6 or 7, 7 with probability 0.4.
    let mean = t[0] as f64 / (n / 2) as f64;
    let sd = (0.4f64 * 0.6 / (n / 2) as f64).sqrt();
    assert!((mean - 6.4).abs() < 5.0 * sd, "{mean}");
    assert!(t[0] >= 6 * (n / 2) as u64 && t[0] <= 7 * (n / 2) as u64);
}

#[test]
fn contributions_out_of_range_are_refused() {
    for bad in [
        Contributions {
            max_records_per_unit: Some(0),
            max_weight: None,
            steps: None,
        },
        Contributions {
            max_records_per_unit: Some(MAX_RECORDS_PER_UNIT + 1),
            max_weight: None,
            steps: None,
        },
        Contributions {
            max_records_per_unit: None,
            max_weight: Some(f64::NAN),
            steps: None,
        },
        Contributions {
            max_records_per_unit: None,
            max_weight: Some(0.0),
            steps: None,
        },
        Contributions {
            max_records_per_unit: None,
            max_weight: Some(1e13),
            steps: None,
        },
    ] {
        assert!(bad.check().is_err(), "{bad:?}");
    }
    // A batch that does not match the counting is refused.
    let layout = TableLayout::new(vec![2], vec![vec![0]], 1, 16).unwrap();
    let counting = Counting::new(
        layout,
        Contributions::default(),
        1 << 20,
        std::env::temp_dir(),
        1,
    )
    .unwrap();
    let mut tally = counting.tally().unwrap();
    let codes = vec![vec![0u32, 1]];
    assert!(
        tally
            .add(&Records {
                codes: &codes,
                multiplicity: &[1],
                units: None,
                weights: None,
                steps: &[],
            })
            .is_err()
    );
    assert!(
        tally
            .add(&Records {
                codes: &codes,
                multiplicity: &[1, 1],
                units: Some(&[1, 2]),
                weights: None,
                steps: &[],
            })
            .is_err()
    );
}

/// The measurement's sensitivity is the strategy's times the scale, in
/// the records' units.
#[test]
fn the_measurement_scales_its_sensitivity_by_the_contributions() {
    use crate::kernel::{KronTerm, MarginalStrategy, Session};
    use dp_linalg::Mat;
    let layout = TableLayout::new(vec![2, 3], vec![vec![0, 1]], 1, 16).unwrap();
    let strategy = MarginalStrategy::new(
        vec![2, 3],
        &[KronTerm::new(
            1.0,
            vec![(0, Mat::identity(2, 2)), (1, Mat::identity(3, 3))],
        )],
    )
    .unwrap();
    let measure = |contributions: Contributions| {
        let counting = Counting::new(
            layout.clone(),
            contributions,
            1 << 20,
            std::env::temp_dir(),
            1,
        )
        .unwrap();
        let mut tally = counting.tally().unwrap();
        let codes = vec![vec![0u32, 1], vec![2u32, 0]];
        tally
            .add(&Records {
                codes: &codes,
                multiplicity: &[1, 1],
                units: contributions.max_records_per_unit.map(|_| &[1u128, 2][..]),
                weights: contributions.max_weight.map(|_| &[2.0f64, 0.5][..]),
                steps: &[],
            })
            .unwrap();
        let marginals = counting
            .finish(vec![tally])
            .unwrap()
            .into_marginals()
            .unwrap();
        let mut session = Session::pure(10.0).unwrap();
        session
            .measure_marginals(&strategy, &marginals, crate::Cost::Epsilon(1.0))
            .unwrap()
    };
    let plain = measure(Contributions::default());
    let k5 = measure(Contributions {
        max_records_per_unit: Some(5),
        max_weight: None,
        steps: None,
    });
    let weighted = measure(Contributions {
        max_records_per_unit: Some(5),
        max_weight: Some(4.0),
        steps: None,
    });
    assert_eq!(k5.sensitivity, 5.0 * plain.sensitivity);
    assert_eq!(
        weighted.sensitivity,
        4.0 * 5.0 * plain.sensitivity,
        "W = 4 is on its grid"
    );
    let scale = |m: &crate::Measurement| match m.noise {
        crate::MeasurementNoise::DiscreteLaplace { scale } => scale,
        crate::MeasurementNoise::DiscreteGaussian { sigma } => sigma,
    };
    assert!((scale(&k5) / scale(&plain) - 5.0).abs() < 1e-12);
    assert!((scale(&weighted) / scale(&plain) - 20.0).abs() < 1e-12);
    // Values are multiples of the granularity, in the records' units.
    for v in &weighted.values {
        assert_eq!((v / weighted.granularity).fract(), 0.0);
    }
}

/// A stream's counts come from the kernel with the bound it derives: one
/// record moves a step by one in each product's table (squared L2 norm =
/// the products), weighted or bounded tables are refused, and a stream
/// specified for one set of counts refuses another.
#[test]
fn step_counts_carry_the_kernel_bound_and_streams_take_only_their_own() {
    use crate::experiments::SeededSession;
    use crate::kernel::{Contribution, Cost, StreamSpec};
    let steps = 4;
    let layout =
        TableLayout::new(vec![3, 4, 2], vec![vec![0], vec![1, 2]], steps, 1 << 20).unwrap();
    let records = random(500, 40, steps as u32, 11);
    let plain = Contributions::default();
    let products = [vec![0], vec![1, 2], vec![0]];
    let counts = count(&layout, plain, &records, &[0..250, 250..500], 1 << 20)
        .into_step_counts(&products)
        .unwrap();
    assert_eq!((counts.per_step(), counts.steps()), (3 + 8 + 3, steps));
    let Contribution::Counts(bound) = counts.contribution() else {
        panic!("not counts");
    };
    assert_eq!(bound.squared_norm(), 3);
    // Exactly the records' counts, step by step (brute force).
    let truth = brute_force(&layout, &records);
    let cells = counts.cells();
    for t in 0..steps {
        let row = &cells[t * 14..(t + 1) * 14];
        let want: Vec<i64> = [(0, 3), (1, 8), (0, 3)]
            .iter()
            .flat_map(|&(table, n)| truth[table][t * n..(t + 1) * n].iter().map(|&c| c as i64))
            .collect();
        assert_eq!(row, &want[..], "step {t}");
    }
    for bounded in [
        Contributions {
            max_records_per_unit: Some(2),
            max_weight: None,
            steps: None,
        },
        Contributions {
            max_records_per_unit: None,
            max_weight: Some(2.0),
            steps: None,
        },
    ] {
        let counted = count(&layout, bounded, &records, &[0..250, 250..500], 1 << 20);
        assert!(counted.into_step_counts(&products).is_err(), "{bounded:?}");
    }
    let spec = StreamSpec {
        coefficients: vec![1.0, 0.5],
        horizon: steps,
        dimension: counts.per_step(),
        participations: 1,
        separation: 1,
        contribution: counts.contribution(),
    };
    let mut session = SeededSession::zcdp(1.0, 3).unwrap();
    let mut stream = session.stream(&spec, Cost::Rho(1.0)).unwrap();
    let other = count(&layout, plain, &records, &[0..250, 250..500], 1 << 20)
        .into_step_counts(&[vec![0], vec![1, 2]])
        .unwrap();
    assert!(stream.next_counts(&other).is_err(), "other products");
    assert_eq!(stream.next_counts(&counts).unwrap().len(), 14);
    // Another counting of the same records, of the same shape and bound:
    // a stream measures the steps of the counts it began with only (else
    // one record could sit in a step of each).
    let again = count(&layout, plain, &records, &[0..250, 250..500], 1 << 20)
        .into_step_counts(&products)
        .unwrap();
    assert!(stream.next_counts(&again).is_err(), "another counting");
    for _ in 1..steps {
        assert_eq!(stream.next_counts(&counts).unwrap().len(), 14);
    }
    assert!(stream.next_counts(&counts).is_err(), "past the horizon");
}

/// A stream's unit bounded to `K` records in each of at most `k` steps
/// pairwise `b` apart: over fresh keys, and with or without spilling,
/// every unit's kept steps obey the bound, each kept step keeps
/// `min(K, its records)`, no step is left out that the greedy rule would
/// have kept, and the first step kept is uniform over the unit's steps.
#[test]
fn a_units_steps_are_bounded_separated_and_chosen_at_random() {
    let (units, steps) = (6u32, 20usize);
    let layout = TableLayout::new(vec![6, 3], vec![vec![0], vec![1]], steps, 1 << 20).unwrap();
    let bound = StepBound {
        max_steps: 3,
        min_separation: 4,
    };
    let contributions = Contributions {
        max_records_per_unit: Some(2),
        max_weight: None,
        steps: Some(bound),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut records = Random {
        codes: vec![Vec::new(), Vec::new()],
        multiplicity: Vec::new(),
        units: Vec::new(),
        weights: Vec::new(),
        steps: Vec::new(),
    };
    // Records of unit u at step t: 0 to 11 (about 30 KB of entries: the
    // smaller memory spills), the layout's `who` its cell.
    let mut n = vec![vec![0u64; steps]; units as usize];
    for (u, row) in (0..units).zip(n.iter_mut()) {
        for (t, slot) in row.iter_mut().enumerate() {
            let c = rng.random_range(0..12u64);
            *slot = c;
            for _ in 0..c {
                records.codes[0].push(u);
                records.codes[1].push(rng.random_range(0..3));
                records.multiplicity.push(1);
                records.units.push(spread(u64::from(u)));
                records.weights.push(1.0);
                records.steps.push(t as u32);
            }
        }
    }
    let rows = records.multiplicity.len();
    // Its own spill directory: another test counts this process's spill
    // directories in the system's.
    let dir = std::env::temp_dir().join(format!("dpmm-step-bound-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for memory in [1 << 26, 16 * 1024] {
        for _ in 0..10 {
            let counted = count_in(
                &layout,
                contributions,
                &records,
                &[0..rows / 2, rows / 2..rows],
                memory,
                dir.clone(),
            );
            let who = &counted.tables_for_tests()[0].1;
            for u in 0..units as usize {
                let kept: Vec<usize> = (0..steps).filter(|&t| who[t * 6 + u] > 0).collect();
                assert!(kept.len() <= 3, "unit {u}: {kept:?}");
                for (i, &a) in kept.iter().enumerate() {
                    assert_eq!(who[a * 6 + u], n[u][a].min(2));
                    assert!(kept[i + 1..].iter().all(|&b| b - a >= 4), "{kept:?}");
                }
                // Greedy: a step with records left out is near a kept one,
                // or three were kept.
                for t in (0..steps).filter(|&t| n[u][t] > 0 && !kept.contains(&t)) {
                    assert!(kept.len() == 3 || kept.iter().any(|&s| s.abs_diff(t) < 4));
                }
            }
        }
    }
    // Nothing is left in the spill directory.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::remove_dir(&dir).unwrap();
    let counts = count(
        &layout,
        contributions,
        &records,
        &[0..rows / 2, rows / 2..rows],
        1 << 20,
    )
    .into_step_counts(&[vec![1]])
    .unwrap();
    let crate::kernel::Contribution::Counts(b) = counts.contribution() else {
        panic!("not counts");
    };
    assert_eq!(
        (b.squared_norm(), b.l1(), b.participations(), b.separation()),
        (4, 2, 3, 4)
    );
    // One unit with one record at each of 8 steps, one step kept: over
    // 1600 countings each step is kept 200 times (sd 13.2).
    let one = Random {
        codes: vec![vec![0; 8], vec![0; 8]],
        multiplicity: vec![1; 8],
        units: vec![spread(3); 8],
        weights: vec![1.0; 8],
        steps: (0..8).collect(),
    };
    let layout8 = TableLayout::new(vec![6, 3], vec![vec![0]], 8, 1 << 10).unwrap();
    let single = Contributions {
        steps: Some(StepBound {
            max_steps: 1,
            min_separation: 1,
        }),
        ..contributions
    };
    let mut first = [0u64; 8];
    for _ in 0..1600 {
        let counted = count(&layout8, single, &one, &[0..4, 4..8], 1 << 20);
        let t = &counted.tables_for_tests()[0].1;
        for (s, f) in first.iter_mut().enumerate() {
            *f += t[s * 6];
        }
    }
    assert_eq!(first.iter().sum::<u64>(), 1600);
    assert!(
        first.iter().all(|&f| (f as f64 - 200.0).abs() < 5.0 * 13.2),
        "{first:?}"
    );
}

/// One added unit, with records in every step, moves the stream's tables
/// only in its own cells (the others, within the bound, are kept whole),
/// by at most `K` a step in at most `k` steps `b` apart: per step an L1
/// change of at most `K` in every table.
#[test]
fn one_added_unit_moves_a_stream_by_its_bound() {
    let steps = 16usize;
    let layout = TableLayout::new(vec![6, 3], vec![vec![0], vec![1]], steps, 1 << 20).unwrap();
    let contributions = Contributions {
        max_records_per_unit: Some(3),
        max_weight: None,
        steps: Some(StepBound {
            max_steps: 2,
            min_separation: 5,
        }),
    };
    let mut base = Random {
        codes: vec![Vec::new(), Vec::new()],
        multiplicity: Vec::new(),
        units: Vec::new(),
        weights: Vec::new(),
        steps: Vec::new(),
    };
    let push = |r: &mut Random, u: u32, x: u32, t: u32| {
        r.codes[0].push(u);
        r.codes[1].push(x);
        r.multiplicity.push(1);
        r.units.push(spread(u64::from(u)));
        r.weights.push(1.0);
        r.steps.push(t);
    };
    // Units 0..5 within the bound: 3 records at steps u and u + 6.
    for u in 0..5u32 {
        for t in [u, u + 6] {
            for x in 0..3 {
                push(&mut base, u, x, t);
            }
        }
    }
    let mut added = base.clone();
    for t in 0..steps as u32 {
        for _ in 0..7 {
            push(&mut added, 5, 1, t);
        }
    }
    for _ in 0..20 {
        let a = count(
            &layout,
            contributions,
            &base,
            &[0..10, 10..base.multiplicity.len()],
            1 << 20,
        );
        let b = count(
            &layout,
            contributions,
            &added,
            &[0..10, 10..added.multiplicity.len()],
            1 << 20,
        );
        let (a, b) = (a.tables_for_tests(), b.tables_for_tests());
        let mut moved = Vec::new();
        for t in 0..steps {
            for (table, cells) in [(0, 6), (1, 3)] {
                let l1: u64 = (0..cells)
                    .map(|c| b[table].1[t * cells + c].abs_diff(a[table].1[t * cells + c]))
                    .sum();
                assert!(l1 <= 3, "step {t} table {table}: {l1}");
                if l1 > 0 && table == 0 {
                    moved.push(t);
                    // Only the added unit's own cell moves.
                    assert_eq!(l1, b[0].1[t * 6 + 5]);
                }
            }
        }
        assert!(
            moved.len() <= 2 && moved.windows(2).all(|w| w[1] - w[0] >= 5),
            "{moved:?}"
        );
    }
}

/// Records split into partitions by unit, each counted alone and sealed,
/// then merged: the tables of one counting of them all, for records and
/// for units (whose records share a partition); and one added unit moves
/// the merged tables by at most its bound, as in one counting.
#[test]
fn partitions_counted_apart_and_merged_are_one_counting() {
    let records = random(6000, 300, 1, 41);
    let key = DistributedKey::fresh().unwrap();
    let partitions = 3u32;
    let merged = |layout: &TableLayout, c: Contributions, records: &Random| -> Counted {
        let mut merge = Merge::new(layout.clone(), c, key.clone()).unwrap();
        // Partition p holds the records whose unit hash is p modulo 2:
        // partition 2 is empty, and still sealed.
        for p in 0..partitions {
            let rows: Vec<usize> = (0..records.units.len())
                .filter(|&r| (records.units[r] % 2) as u32 == p)
                .collect();
            let part = Random {
                codes: records
                    .codes
                    .iter()
                    .map(|c| rows.iter().map(|&r| c[r]).collect())
                    .collect(),
                multiplicity: rows.iter().map(|&r| records.multiplicity[r]).collect(),
                units: rows.iter().map(|&r| records.units[r]).collect(),
                weights: rows.iter().map(|&r| records.weights[r]).collect(),
                steps: Vec::new(),
            };
            let half = rows.len() / 2;
            let counted = count(layout, c, &part, &[0..half, half..rows.len()], 1 << 30);
            merge.add(&counted.into_partial(&key, p)).unwrap();
        }
        merge.finish(Some(partitions)).unwrap()
    };
    for layout in layouts(1) {
        let none = Contributions::default();
        let whole = merged(&layout, none, &records);
        assert_eq!(tables_of(&whole), brute_force(&layout, &records));
        assert_eq!((whole.scale(), whole.unit()), (1, 1.0));
        // Bounded units: each merged table keeps exactly min(K, records)
        // of every unit, as one counting does (checked on the total).
        let k = Contributions {
            max_records_per_unit: Some(2),
            ..Contributions::default()
        };
        let bounded = merged(&layout, k, &records);
        assert_eq!(bounded.scale(), 2);
        let mut per_unit: HashMap<u128, u64> = HashMap::new();
        for (u, &m) in records.units.iter().zip(&records.multiplicity) {
            if m > 0 {
                *per_unit.entry(*u).or_default() += m;
            }
        }
        let expected: u64 = per_unit.values().map(|&n| n.min(2)).sum();
        for table in tables_of(&bounded) {
            assert_eq!(table.iter().sum::<u64>(), expected);
        }
        // One added unit of 50 records adds exactly K = 2 to each merged
        // table's total (the other units' choices are drawn afresh, so
        // their cells differ; their totals do not).
        let mut more = records.clone();
        for _ in 0..50 {
            for (a, c) in more.codes.iter_mut().enumerate() {
                c.push(a as u32 % 2);
            }
            more.multiplicity.push(1);
            more.units.push(spread(10_000));
            more.weights.push(1.0);
        }
        let after = merged(&layout, k, &more);
        for (a, b) in tables_of(&bounded).iter().zip(tables_of(&after)) {
            let (ta, tb): (u64, u64) = (a.iter().sum(), b.iter().sum());
            assert_eq!(tb - ta, 2);
        }
    }
}

/// A partition counted twice, one missing, one altered or sealed by
/// another counting's key is refused by the merge.
#[test]
fn the_merge_refuses_partitions_twice_missing_altered_or_foreign() {
    let layout = layouts(1).remove(1);
    let records = random(500, 50, 1, 43);
    let key = DistributedKey::fresh().unwrap();
    let none = Contributions::default();
    let partial = |p: u32, key: &DistributedKey| {
        count(&layout, none, &records, &[0..250, 250..500], 1 << 30).into_partial(key, p)
    };
    let merge = || Merge::new(layout.clone(), none, key.clone()).unwrap();
    let fine = {
        let mut m = merge();
        m.add(&partial(0, &key)).unwrap();
        m.add(&partial(1, &key)).unwrap();
        m.finish(Some(2))
    };
    assert!(fine.is_ok());
    let mut twice = merge();
    twice.add(&partial(0, &key)).unwrap();
    assert!(twice.add(&partial(0, &key)).is_err());
    let mut missing = merge();
    missing.add(&partial(0, &key)).unwrap();
    assert!(missing.finish(Some(2)).is_err());
    // Without the engine's count, the indices must run from 0 unbroken.
    let mut gap = merge();
    gap.add(&partial(1, &key)).unwrap();
    assert!(gap.finish(None).is_err());
    let mut altered = merge();
    let mut p = partial(0, &key);
    p.cells[0].2 += 1;
    altered.add(&p).unwrap();
    assert!(altered.finish(None).is_err());
    let mut dropped = merge();
    let mut p = partial(0, &key);
    p.cells.pop();
    dropped.add(&p).unwrap();
    assert!(dropped.finish(None).is_err());
    let mut foreign = merge();
    foreign
        .add(&partial(0, &DistributedKey::fresh().unwrap()))
        .unwrap();
    assert!(foreign.finish(None).is_err());
    // A cell outside the layout is refused at once.
    assert!(merge().cell(0, 3, 0, 1).is_err());
    assert!(merge().cell(0, 1, 4, 1).is_err());
    // The key's text form reads back; anything else is refused.
    assert_eq!(DistributedKey::from_hex(&key.to_hex()).unwrap(), key);
    assert!(DistributedKey::from_hex("12").is_err());
    assert!(DistributedKey::from_hex(&"g".repeat(64)).is_err());
}
