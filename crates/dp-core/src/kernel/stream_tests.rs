#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use super::*;
use crate::experiments::SeededSession;

fn spec(coefficients: Vec<f64>, horizon: usize, dimension: usize) -> StreamSpec {
    StreamSpec {
        coefficients,
        horizon,
        dimension,
        participations: 1,
        separation: 1,
        contribution: Contribution::Counts(CountsBound::new(1)),
    }
}

/// The largest `‖C̃ Σ_{j∈π} e_j‖²` over every pattern `π` of at most `k`
/// steps pairwise at least `s` apart, by enumeration on the dense
/// lower-triangular Toeplitz matrix of `c` (T × T).
fn brute_force_sensitivity_sq(c: &[f64], t: usize, k: usize, s: usize) -> f64 {
    let col = |j: usize| -> Vec<f64> {
        (0..t)
            .map(|i| {
                if i >= j && i - j < c.len() {
                    c[i - j]
                } else {
                    0.0
                }
            })
            .collect()
    };
    fn walk(
        start: usize,
        left: usize,
        t: usize,
        s: usize,
        acc: &mut Vec<f64>,
        col: &dyn Fn(usize) -> Vec<f64>,
        best: &mut f64,
    ) {
        *best = best.max(acc.iter().map(|v| v * v).sum());
        if left == 0 {
            return;
        }
        for j in start..t {
            let cj = col(j);
            for (a, v) in acc.iter_mut().zip(&cj) {
                *a += v;
            }
            walk(j + s, left - 1, t, s, acc, col, best);
            for (a, v) in acc.iter_mut().zip(&cj) {
                *a -= v;
            }
        }
    }
    let mut best = 0.0;
    walk(0, k, t, s, &mut vec![0.0; t], &col, &mut best);
    best
}

#[test]
fn sensitivity_matches_brute_force_over_participation_patterns() {
    let coefficients = [1.0, 0.5, 0.375, -0.2];
    for t in [1usize, 2, 3, 5, 8, 11] {
        for k in [1usize, 2, 3] {
            for s in [1usize, 2, 3, 4, 6] {
                let mut sp = spec(coefficients.to_vec(), t, 1);
                sp.participations = k;
                sp.separation = s;
                sp.contribution = Contribution::Counts(CountsBound::of_units(1, 1, k, s));
                let rho = 0.5;
                let mut session = SeededSession::zcdp(rho, 1).unwrap();
                let stream = session.stream(&sp, Cost::Rho(rho)).unwrap();
                let fig = stream.figures();
                let truth = brute_force_sensitivity_sq(stream.coefficients(), t, k, s).sqrt();
                if fig.sensitivity_exact {
                    assert!(
                        (fig.sensitivity / truth - 1.0).abs() < 1e-12,
                        "T={t} k={k} s={s}: {} vs {truth}",
                        fig.sensitivity
                    );
                } else {
                    assert!(
                        fig.sensitivity >= truth * (1.0 - 1e-12),
                        "T={t} k={k} s={s}"
                    );
                }
                // Exactness is claimed exactly when the columns are disjoint.
                assert_eq!(fig.sensitivity_exact, s >= 4 || k == 1 || t <= s);
                // σ² ≥ Δ²/(2ρ), by at most a hair.
                let want = fig.sensitivity / (2.0 * rho).sqrt();
                assert!(fig.sigma >= want * (1.0 - 1e-15) && fig.sigma <= want * (1.0 + 1e-12));
            }
        }
    }
}

#[test]
fn quantized_coefficients_are_dyadic_and_close() {
    let c = [2.0, 1.0, 0.75, 0.3];
    let mut session = SeededSession::zcdp(1.0, 2).unwrap();
    let stream = session
        .stream(&spec(c.to_vec(), 100, 10), Cost::Rho(1.0))
        .unwrap();
    let p = stream.figures().coefficient_bits;
    let scale = f64::from(1u32 << p);
    for (q, v) in stream.coefficients().iter().zip(c) {
        assert_eq!((q * scale).fract(), 0.0);
        assert!((q - v / 2.0).abs() <= 0.5 / scale);
    }
}

/// z-scores of released values against the truth: `(mean, std)`.
fn z_stats(z: &[f64]) -> (f64, f64) {
    let n = z.len() as f64;
    let mean = z.iter().sum::<f64>() / n;
    let var = z.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

#[test]
fn released_steps_and_running_sums_are_unbiased_with_the_stated_variance() {
    // Counts in 3 marginal tables (squared norm 3), 12 steps of 3000
    // coordinates, 5 bands, two participations 6 apart.
    let (t, dim) = (12usize, 3000usize);
    let mut sp = spec(vec![1.0, 0.5, 0.375, 0.3125, 0.27], t, dim);
    sp.contribution = Contribution::Counts(CountsBound::of_units(3, 1, 2, 6));
    sp.participations = 2;
    sp.separation = 6;
    let mut session = SeededSession::zcdp(0.25, 9).unwrap();
    let mut stream = session.stream(&sp, Cost::Rho(0.25)).unwrap();
    assert_eq!(session.spent(), 0.25);
    assert!(stream.figures().sensitivity_exact);
    let mut truth = vec![0i64; dim];
    let (mut step_z, mut sum_z) = (Vec::new(), Vec::new());
    let mut running = vec![0.0; dim];
    for step in 0..t {
        let x: Vec<i64> = (0..dim)
            .map(|i| ((i * 7 + step * 13) % 50) as i64)
            .collect();
        let released = stream.next_count_slice(&x).unwrap();
        let (v_step, v_sum) = stream.variances();
        for i in 0..dim {
            truth[i] += x[i];
            running[i] += released[i];
            step_z.push((released[i] - x[i] as f64) / v_step.sqrt());
            sum_z.push((running[i] - truth[i] as f64) / v_sum.sqrt());
        }
    }
    for z in [&step_z, &sum_z] {
        let (mean, std) = z_stats(z);
        // 36,000 z-scores (correlated across steps within a coordinate,
        // independent across coordinates): mean within 0.05, std within 5%.
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert!((std - 1.0).abs() < 0.05, "std {std}");
    }
    // The step variance after the first step is σ² exactly (c̃⁻¹_0 = 1).
    assert!(stream.step() == t);
    let err = session.stream(&sp, Cost::Rho(0.25)).unwrap_err();
    assert!(matches!(err, DpError::BudgetExceeded { .. }), "{err}");
}

#[test]
#[allow(clippy::needless_range_loop)] // i indexes a column across steps
fn the_measurement_is_on_the_lattice() {
    // u = C̃ x̂ (in units of 2^−P) is an integer at every step: the noise is
    // exact lattice noise, not a float added to data.
    let mut session = SeededSession::zcdp(1.0, 4).unwrap();
    let c = vec![1.0, 0.6, 0.2];
    let mut stream = session.stream(&spec(c, 6, 5), Cost::Rho(1.0)).unwrap();
    let p = stream.figures().coefficient_bits;
    let cq = stream.coefficients().to_vec();
    let mut hist: Vec<Vec<f64>> = Vec::new();
    for step in 0..6 {
        let x: Vec<i64> = (0..5).map(|i| i * step as i64).collect();
        hist.push(stream.next_count_slice(&x).unwrap());
        for i in 0..5 {
            let u: f64 = (0..cq.len().min(step + 1))
                .map(|k| cq[k] * hist[step - k][i])
                .sum::<f64>()
                * f64::from(1u32 << p);
            assert!((u - u.round()).abs() < 1e-6 * u.abs().max(1.0), "{u}");
        }
    }
}

#[test]
fn lattice_points_keep_the_norm_bound_exactly() {
    let bound = 1u128 << (2 * CLIP_LATTICE_BITS);
    let sq = |x: &[i64]| -> u128 { x.iter().map(|&v| (v.unsigned_abs() as u128).pow(2)).sum() };
    // Vectors on, beyond and inside the clip, in many dimensions.
    let mut state = 12345u64;
    let mut uniform = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    for dim in [1usize, 2, 3, 10, 100, 10_000] {
        for scale in [1e-3, 0.5, 1.0, 1.0 + 1e-15, 3.0, 1e12] {
            let mut row: Vec<f64> = (0..dim).map(|_| uniform()).collect();
            let n = row.iter().map(|v| v * v).sum::<f64>().sqrt();
            row.iter_mut().for_each(|v| *v *= scale / n);
            let x = lattice_point(&row, 1.0);
            assert!(sq(&x) <= bound, "dim {dim} scale {scale}");
            if scale <= 0.5 {
                // Far inside: plain rounding to nearest.
                for (xi, v) in x.iter().zip(&row) {
                    assert!((*xi as f64 - v * f64::from(1u32 << CLIP_LATTICE_BITS)).abs() <= 0.5);
                }
            }
        }
    }
    // Rows whose squares underflow or overflow, at the extreme clip norms:
    // the bound holds and a huge row is clipped, not zeroed.
    for (row, norm) in [
        (vec![-1e-170; 4], 1e-100),
        (vec![1e-320, -1e-320, 5e-324], 1e-100),
        (vec![1e300, 1e300], 1.0),
        (vec![f64::MAX, -f64::MAX, f64::MAX], 1e100),
        (vec![1e-170, 0.0, 0.0], 1e100),
    ] {
        let x = lattice_point(&row, norm);
        assert!(sq(&x) <= bound, "{row:?} at {norm}");
    }
    let x = lattice_point(&[1e300, 1e300], 1.0);
    assert_eq!(x[0], x[1]);
    assert!((x[0] as f64 - 16384.0 / 2f64.sqrt()).abs() <= 1.0, "{x:?}");
    // The clip norm scales the lattice: 0.3 · 2^14 = 4915.2, 0.4 · 2^14 = 6553.6.
    assert_eq!(lattice_point(&[3.0, 4.0], 10.0), vec![4915, 6554]);
}

#[test]
fn clipped_rows_are_summed_after_clipping() {
    // 2000 coordinates, two rows per step: one far beyond the clip, one
    // inside. The released sum is the clipped sum plus noise of the
    // stated variance.
    let (dim, norm) = (2000usize, 2.0);
    let mut sp = spec(vec![1.0, 0.5], 4, dim);
    sp.contribution = Contribution::Clipped { norm };
    let mut session = SeededSession::zcdp(2.0, 21).unwrap();
    let mut stream = session.stream(&sp, Cost::Rho(2.0)).unwrap();
    let mut z = Vec::new();
    for _ in 0..4 {
        let mut rows = vec![1e6; dim];
        rows.extend((0..dim).map(|i| if i % 2 == 0 { 0.01 } else { -0.01 }));
        let released = stream.next_clipped(&rows).unwrap();
        let (v, _) = stream.variances();
        let big = norm / (dim as f64).sqrt();
        for (i, r) in released.iter().enumerate() {
            let small = if i % 2 == 0 { 0.01 } else { -0.01 };
            z.push((r - big - small) / v.sqrt());
        }
    }
    let (mean, std) = z_stats(&z);
    assert!(
        mean.abs() < 0.06 && (std - 1.0).abs() < 0.06,
        "{mean} {std}"
    );
}

#[test]
fn refusals_spend_nothing() {
    let good = spec(vec![1.0, 0.5], 10, 3);
    let mut bad_specs = Vec::new();
    for f in [
        (|s: &mut StreamSpec| s.coefficients.clear()) as fn(&mut StreamSpec),
        |s| s.coefficients = vec![0.0, 1.0],
        |s| s.coefficients = vec![1.0, f64::NAN],
        |s| s.coefficients = vec![1.0, 1e300],
        |s| s.coefficients = vec![1.0; MAX_BANDS + 1],
        |s| s.horizon = 0,
        |s| s.horizon = MAX_HORIZON + 1,
        |s| s.dimension = 0,
        |s| s.dimension = MAX_STATE,
        |s| s.participations = 0,
        |s| s.separation = 0,
        |s| s.contribution = Contribution::Counts(CountsBound::new(0)),
        |s| s.contribution = Contribution::Clipped { norm: -1.0 },
        |s| {
            s.contribution = Contribution::Clipped {
                norm: f64::INFINITY,
            }
        },
    ] {
        let mut s = good.clone();
        f(&mut s);
        bad_specs.push(s);
    }
    let mut session = SeededSession::zcdp(1.0, 3).unwrap();
    for s in &bad_specs {
        assert!(session.stream(s, Cost::Rho(0.5)).is_err(), "{s:?}");
    }
    assert!(session.stream(&good, Cost::Epsilon(0.5)).is_err());
    assert!(session.stream(&good, Cost::Rho(f64::NAN)).is_err());
    assert!(session.stream(&good, Cost::Rho(2.0)).is_err());
    assert_eq!((session.spent(), session.measurements()), (0.0, 0));

    // Noise beyond 2^50 lattice steps a draw (tiny ρ, many
    // participations): refused before the charge.
    let mut many = good.clone();
    many.participations = 1 << 30;
    many.horizon = 1 << 30;
    assert!(session.stream(&many, Cost::Rho(1e-15)).is_err());
    assert_eq!((session.spent(), session.measurements()), (0.0, 0));

    let mut stream = session.stream(&good, Cost::Rho(0.5)).unwrap();
    assert!(stream.next_count_slice(&[1, 2]).is_err());
    assert!(stream.next_clipped(&[0.0; 3]).is_err());
    assert_eq!(stream.step(), 0);
    for _ in 0..10 {
        stream.next_count_slice(&[1, 2, 3]).unwrap();
    }
    assert!(stream.next_count_slice(&[1, 2, 3]).is_err());

    let mut clipped = good.clone();
    clipped.contribution = Contribution::Clipped { norm: 1.0 };
    let mut stream = session.stream(&clipped, Cost::Rho(0.25)).unwrap();
    assert!(stream.next_count_slice(&[1, 2, 3]).is_err());
    assert!(stream.next_clipped(&[0.0; 4]).is_err());
    assert!(
        stream.next_clipped(&[]).is_ok(),
        "a step without contributions"
    );
}

#[test]
fn no_value_of_the_data_causes_a_refusal() {
    // A refusal after the charge that depends on the data would be a
    // noiseless answer about it. A row that is not finite contributes
    // nothing (the same output, draw for draw, as without it); counts
    // beyond the cap are clamped; both from identically seeded sessions.
    let mut clipped = spec(vec![1.0, 0.5, 0.25], 3, 4);
    clipped.contribution = Contribution::Clipped { norm: 1.0 };
    let run = |rows: &[f64]| {
        let mut session = SeededSession::zcdp(1.0, 77).unwrap();
        let mut stream = session.stream(&clipped, Cost::Rho(1.0)).unwrap();
        stream.next_clipped(rows).unwrap()
    };
    let row = [0.1, -0.2, 0.3, 0.0];
    let mut with_nan = vec![f64::NAN, 0.0, 0.0, 0.0];
    with_nan.extend(row);
    let mut with_inf = vec![0.0, f64::INFINITY, 0.0, 0.0];
    with_inf.extend(row);
    assert_eq!(run(&with_nan), run(&row));
    assert_eq!(run(&with_inf), run(&row));
    assert_ne!(run(&row), run(&[]));

    // Counts at the extremes, with coefficients near the limit: no
    // overflow (a debug build would panic), finite outputs.
    let mut big = spec(vec![1.0, 2f64.powi(36), -2f64.powi(36)], 4, 3);
    big.contribution = Contribution::Counts(CountsBound::new(1));
    let mut session = SeededSession::zcdp(5000.0, 5).unwrap();
    let mut stream = session.stream(&big, Cost::Rho(5000.0)).unwrap();
    for _ in 0..4 {
        let out = stream
            .next_count_slice(&[i64::MAX, i64::MIN, 1 << 62])
            .unwrap();
        assert!(out.iter().all(|v| v.is_finite()));
    }
}

#[test]
fn stated_variances_are_the_closed_forms_of_a_two_band_filter() {
    // C = [1, a]: C⁻¹'s coefficients are (−a)^j, so after step t the
    // step's noise variance is σ² Σ_{j≤t} a^{2j} and the running sum's is
    // σ² Σ_{i≤t} (Σ_{j≤i} (−a)^j)² (a = 0.5 is dyadic: C̃ = C).
    let a: f64 = 0.5;
    let mut session = SeededSession::zcdp(1.0, 8).unwrap();
    let mut stream = session
        .stream(&spec(vec![1.0, a], 12, 2), Cost::Rho(1.0))
        .unwrap();
    assert_eq!(stream.coefficients(), &[1.0, a]);
    let s2 = stream.figures().sigma.powi(2);
    let (mut step_sum, mut running) = (0.0, 0.0);
    for t in 0..12 {
        stream.next_count_slice(&[0, 0]).unwrap();
        step_sum += a.powi(2 * t);
        let prefix: f64 = (0..=t).map(|j| (-a).powi(j)).sum();
        running += prefix * prefix;
        let (v_step, v_sum) = stream.variances();
        assert!((v_step / (s2 * step_sum) - 1.0).abs() < 1e-14, "t = {t}");
        assert!((v_sum / (s2 * running) - 1.0).abs() < 1e-14, "t = {t}");
    }
}
