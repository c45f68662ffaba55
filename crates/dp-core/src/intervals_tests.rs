use super::*;

const LAPLACE_95: f64 = 2.118_302_605_249_420_3; // ln(20)/√2

/// `P(|Σ cⱼ Lⱼ| ≤ h)` for independent continuous Laplace(1) draws and
/// distinct `|cⱼ|`: the characteristic function `Π 1/(1 + cⱼ²t²)` splits
/// into partial fractions `Σ Aⱼ/(1 + cⱼ²t²)`, so the law is the signed
/// mixture `Σ Aⱼ Laplace(|cⱼ|)`.
fn weighted_laplace_coverage(c: &[f64], h: f64) -> f64 {
    c.iter()
        .enumerate()
        .map(|(j, &cj)| {
            let a: f64 = c
                .iter()
                .enumerate()
                .filter(|&(k, _)| k != j)
                .map(|(_, &ck)| cj * cj / (cj * cj - ck * ck))
                .product();
            a * (1.0 - (-h / cj.abs()).exp())
        })
        .sum()
}

fn laplace(scale: f64, g: f64) -> Interval {
    Interval::new(MeasurementNoise::DiscreteLaplace { scale }, g)
}

#[test]
fn a_single_discrete_laplace_draw_gets_its_exact_quantile() {
    for (scale, g) in [
        (3.0f64, 1.0f64),
        (0.7, 1.0),
        (10.0, 0.5),
        (1.0, 1e-3),
        (2.5, 2.0),
    ] {
        let p: f64 = (-g / scale).exp();
        // Brute force: the pmf (1−p)/(1+p) p^|j| summed outwards.
        let covered = |k: i64| -> f64 {
            (-k..=k)
                .map(|j| (1.0 - p) / (1.0 + p) * p.powi(j.abs() as i32))
                .sum()
        };
        let h = single_laplace(scale, g);
        let k = (h / g).round() as i64;
        assert!((h / g - k as f64).abs() < 1e-9, "on the grid");
        assert!(covered(k) >= 0.95, "scale {scale} G {g}: {}", covered(k));
        assert!(
            k == 0 || covered(k - 1) < 0.95,
            "tight: scale {scale} G {g}"
        );
        // Through the public entry point, with a coefficient of 2.
        let draw_var = 2.0 * p * g * g / (1.0 - p).powi(2);
        let hw = laplace(scale, g).half_width(4.0, Some(16.0), draw_var);
        assert!((hw - 2.0 * h).abs() <= 1e-12 * hw);
    }
    // A fine grid tends to the continuous quantile b·ln 20.
    let fine = single_laplace(1.0, 1e-15);
    assert!((fine - 20f64.ln()).abs() < 1e-9, "{fine}");
}

#[test]
fn the_mixture_integral_matches_laplace_closed_forms() {
    // One draw: P(|L| ≤ z σ) = 1 − e^{−z√2}.
    for z in [0.5, 1.96, 2.5] {
        let (c, dc) = vg_coverage(1.0, z);
        let want = 1.0 - (-z * 2f64.sqrt()).exp();
        assert!((c - want).abs() < 1e-10, "z {z}: {c} vs {want}");
        let dwant = 2f64.sqrt() * (-z * 2f64.sqrt()).exp();
        assert!((dc - dwant).abs() < 1e-9, "z {z}: {dc} vs {dwant}");
    }
    // Two equal draws (σ = 2): P(X > x) = (2 + x) e^{−x} / 4.
    for z in [1.0f64, 1.96, 3.0] {
        let x = 2.0 * z;
        let want = 1.0 - (2.0 + x) * (-x).exp() / 2.0;
        let (c, _) = vg_coverage(0.5, z);
        assert!((c - want).abs() < 1e-10, "z {z}: {c} vs {want}");
    }
    assert!((laplace_factor(1.0) - LAPLACE_95).abs() < 1e-10);
}

#[test]
fn factors_rise_with_the_tails_and_join_the_expansion() {
    let table: Vec<f64> = (0..=TABLE_NODES).map(node).collect();
    assert!(table.windows(2).all(|p| p[1] > p[0]), "monotone");
    assert_eq!(table[0], Z95);
    // Continuity where the expansion takes over (second-order error).
    let w = 1.0 / EXPANSION_DRAWS;
    let exact = solve_factor(w, Z95);
    let below = laplace_factor(w * (1.0 - 1e-9));
    assert!((exact - below).abs() < 2e-5, "{exact} vs {below}");
    assert!(laplace_factor(w * (1.0 + 1e-9)) >= exact);
}

#[test]
fn weighted_laplace_sums_are_covered_at_least_95_percent_and_not_much_more() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let interval = laplace(1.0, 1e-12);
    let (mut low, mut high) = (1.0f64, 0.0f64);
    for trial in 0..300 {
        let k = 2 + trial % 7;
        // Distinct weights, some runs with one dominant draw.
        let mut c: Vec<f64> = (0..k).map(|j| 0.05 + uniform() + 0.01 * j as f64).collect();
        if trial % 3 == 0 {
            c[0] = 4.0;
        }
        let s2: f64 = c.iter().map(|x| x * x).sum();
        let s4: f64 = c.iter().map(|x| x.powi(4)).sum();
        let h = interval.half_width(s2, Some(s4), 2.0);
        let cover = weighted_laplace_coverage(&c, h);
        low = low.min(cover);
        high = high.max(cover);
    }
    assert!(low >= 0.95 - 1e-6, "lowest coverage {low}");
    assert!(high <= 0.9526, "highest coverage {high}");
}

#[test]
fn gaussian_and_degenerate_inputs() {
    let gauss = Interval::new(MeasurementNoise::DiscreteGaussian { sigma: 3.0 }, 1e-16);
    assert_eq!(gauss.half_width(4.0, Some(16.0), 9.0), Z95 * 6.0);
    let l = laplace(1.0, 1e-12);
    assert_eq!(l.half_width(0.0, Some(0.0), 2.0), 0.0);
    assert_eq!(l.half_width(f64::NAN, None, 2.0), 0.0);
    assert_eq!(l.half_width(1.0, Some(f64::NAN), 0.0), 0.0);
    // Without the fourth power sum: a single draw's factor.
    let hw = l.half_width(3.0, None, 2.0);
    assert!((hw - LAPLACE_95 * 6f64.sqrt()).abs() < 1e-6 * hw, "{hw}");
    // Many equal draws: tends to the normal quantile from above.
    let hw = l.half_width(1e6, Some(1e6), 2.0);
    let normal = Z95 * 2e6f64.sqrt();
    assert!(
        hw > normal && hw < normal * (1.0 + 1e-5),
        "{hw} vs {normal}"
    );
}
