//! Privacy accounting: pure ε-DP and ρ-zCDP (Bun and Steinke, TCC 2016),
//! and the exact conversion from ρ-zCDP to (ε,δ)-DP of Canonne, Kamath and
//! Steinke (NeurIPS 2020, Corollary 13).
//!
//! Composition is sequential: k measurements of costs ε₁…ε_k (pure) are
//! (Σεᵢ)-DP, of costs ρ₁…ρ_k are (Σρᵢ)-zCDP (Bun–Steinke Lemma 2.3), and
//! an ε-DP measurement is (ε²/2)-zCDP (Bun–Steinke Proposition 1.4).

use crate::{DpError, Result};

/// Smallest ε accepted anywhere (below it the noise is astronomically
/// large and the calibrations lose their floating-point meaning).
pub const MIN_EPSILON: f64 = 1e-6;
/// Largest ε accepted (beyond it the guarantee is void in practice).
pub const MAX_EPSILON: f64 = 100.0;
/// Smallest δ accepted.
pub const MIN_DELTA: f64 = 1e-100;
/// Largest δ accepted (a δ near 1 is no guarantee).
pub const MAX_DELTA: f64 = 0.5;
/// Smallest ρ accepted (below ρ = ε²/2 at [`MIN_EPSILON`], room for
/// the (ε,δ) conversion at that ε).
pub const MIN_RHO: f64 = 1e-16;
/// Largest ρ accepted.
pub const MAX_RHO: f64 = 5000.0;

/// `a + b` rounded upward: the floating-point sum, moved one ulp up when
/// it fell below the exact sum (detected exactly by Knuth's TwoSum), so a
/// running total of charges never under-counts.
pub fn add_up(a: f64, b: f64) -> f64 {
    let s = a + b;
    let bb = s - a;
    let err = (a - (s - bb)) + (b - bb);
    if err > 0.0 { s.next_up() } else { s }
}

/// Checks `rho` against [`MIN_RHO`]..=[`MAX_RHO`].
pub fn check_rho(rho: f64) -> Result<f64> {
    if rho.is_finite() && (MIN_RHO..=MAX_RHO).contains(&rho) {
        Ok(rho)
    } else {
        Err(DpError::InvalidParameter {
            name: "rho",
            reason: format!("must be in [{MIN_RHO:e}, {MAX_RHO}], got {rho}"),
        })
    }
}

/// The δ of CKS20 Corollary 13: a ρ-zCDP mechanism is (ε,δ)-DP for
///
/// `δ = inf_{α>1} exp((α−1)(αρ−ε)) / (α−1) · (1 − 1/α)^α`.
///
/// Every α gives a valid δ; the exponent is convex in α with derivative
/// `(2α−1)ρ − ε + ln(1 − 1/α)`, whose root is found by bisection. The
/// result is inflated by a relative margin covering the floating-point
/// error of the exponent, so it is never below the value at the α used.
pub fn zcdp_delta(rho: f64, epsilon: f64) -> f64 {
    let exponent = |a: f64| {
        let t1 = (a - 1.0) * (a * rho - epsilon);
        let t2 = a * (-1.0 / a).ln_1p();
        let t3 = -(a - 1.0).ln();
        let margin = 1e-12 * (t1.abs() + t2.abs() + t3.abs() + 1.0);
        t1 + t2 + t3 + margin
    };
    let derivative = |a: f64| (2.0 * a - 1.0) * rho - epsilon + (-1.0 / a).ln_1p();
    let (mut lo, mut hi) = (1.0 + 1e-9, (epsilon + 1.0) / (2.0 * rho) + 2.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if derivative(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    exponent(hi).exp().min(1.0)
}

/// What an ε-DP measurement costs a zCDP budget: ε-DP implies
/// (ε²/2)-zCDP (Bun and Steinke 2016, Proposition 1.4), rounded up so
/// that the charge is never below it. Every zCDP charge of a pure
/// measurement (the session's, and a ledger's check before it) is this.
pub fn zcdp_cost_of_pure(epsilon: f64) -> Result<f64> {
    Ok((check_epsilon(epsilon)?.powi(2) / 2.0).next_up())
}

/// The largest ρ (to a relative 1e-13, rounded down) whose CKS20
/// conversion gives (ε,δ)-DP: `zcdp_delta(ρ, ε) ≤ δ`. A session stated as
/// (ε,δ) holds this ρ as its zCDP budget.
///
/// `zcdp_delta` increases with ρ, so the boundary is found by bisection
/// (in log space) between an admissible ρ and an inadmissible one. The
/// admissible start is the standard conversion's ρ, the root of
/// `ρ + 2√(ρ ln(1/δ)) = ε` (Bun–Steinke Proposition 1.3, which CKS20's
/// infimum never exceeds), moved down while the floating-point margin of
/// [`zcdp_delta`] puts it above δ; the inadmissible end doubles from it.
/// Every (ε, δ) in the documented ranges has a ρ in
/// [`MIN_RHO`]`..=`[`MAX_RHO`]; a result outside is refused as an invalid
/// parameter, a bracket that cannot be found as a solver failure.
pub fn zcdp_rho_for(epsilon: f64, delta: f64) -> Result<f64> {
    check_epsilon(epsilon)?;
    check_delta(delta)?;
    let admissible = |rho: f64| zcdp_delta(rho, epsilon) <= delta;
    let no_bracket = |what: &str| DpError::NotConverged {
        solver: "zCDP conversion",
        reason: format!("no {what} rho found for epsilon {epsilon}, delta {delta}"),
    };
    let l = -delta.ln();
    // (√(l+ε) − √l)², written without the cancellation of the difference.
    let standard = (epsilon / ((l + epsilon).sqrt() + l.sqrt())).powi(2);
    let mut lo = standard;
    let mut steps = 0;
    while !admissible(lo) {
        lo *= 0.5;
        steps += 1;
        if steps > 64 || lo == 0.0 {
            return Err(no_bracket("admissible"));
        }
    }
    let mut hi = lo * 2.0;
    steps = 0;
    while admissible(hi) {
        lo = hi;
        hi *= 2.0;
        steps += 1;
        if steps > 64 || !hi.is_finite() {
            return Err(no_bracket("inadmissible"));
        }
    }
    for _ in 0..200 {
        let mid = (lo * hi).sqrt();
        if mid <= lo || mid >= hi || hi - lo <= lo * 1e-13 {
            break;
        }
        if admissible(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    check_rho(lo)
}

/// Checks ε against the documented range [`MIN_EPSILON`]..=[`MAX_EPSILON`].
pub fn check_epsilon(epsilon: f64) -> Result<f64> {
    if epsilon.is_finite() && (MIN_EPSILON..=MAX_EPSILON).contains(&epsilon) {
        Ok(epsilon)
    } else {
        Err(DpError::InvalidEpsilon(epsilon))
    }
}

/// Checks δ against the documented range [`MIN_DELTA`]..=[`MAX_DELTA`].
pub fn check_delta(delta: f64) -> Result<f64> {
    if delta.is_finite() && (MIN_DELTA..=MAX_DELTA).contains(&delta) {
        Ok(delta)
    } else {
        Err(DpError::InvalidDelta(delta))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    /// Brute force: the minimum over a fine grid of α of the closed form,
    /// computed independently of the bisection.
    fn grid_delta(rho: f64, eps: f64) -> f64 {
        let mut best = f64::INFINITY;
        let mut a = 1.0001;
        while a < 1e4 {
            let v = ((a - 1.0) * (a * rho - eps)).exp() / (a - 1.0) * (1.0 - 1.0 / a).powf(a);
            best = best.min(v);
            a *= 1.0005;
        }
        best.min(1.0)
    }

    #[test]
    fn delta_matches_brute_force_and_is_never_below_it() {
        for &(rho, eps) in &[
            (0.5, 3.0),
            (0.01, 1.0),
            (0.1, 0.5),
            (2.0, 10.0),
            (1e-4, 0.1),
        ] {
            let d = zcdp_delta(rho, eps);
            let g = grid_delta(rho, eps);
            // The infimum is at most the grid minimum; the bisection finds it.
            assert!(
                d >= g * (1.0 - 1e-3),
                "rho {rho} eps {eps}: {d} far below grid {g}"
            );
            assert!(
                d <= g * (1.0 + 1e-3),
                "rho {rho} eps {eps}: {d} far above grid {g}"
            );
        }
    }

    /// `Φ(x)` from the complementary error function (accurate in both
    /// tails).
    fn phi(x: f64) -> f64 {
        0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
    }

    #[test]
    fn delta_lies_between_the_gaussian_profile_and_the_standard_bound() {
        // Independent truth: the Gaussian mechanism with sensitivity over
        // σ equal to μ = √(2ρ) is exactly ρ-zCDP and its exact privacy
        // profile is δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) (Balle and
        // Wang 2018, Theorem 8), so any valid conversion gives at least
        // that; and CKS20's infimum is at most its value at
        // α = (ε+ρ)/(2ρ), where (α−1)^(α−1)/α^α ≤ 1, i.e. at most the
        // standard bound exp(−(ε−ρ)²/(4ρ)) (Bun–Steinke Proposition 1.3).
        for &rho in &[1e-3f64, 0.01, 0.1, 0.5, 2.0] {
            let mu = (2.0 * rho).sqrt();
            for &ratio in &[1.2f64, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0] {
                let eps = rho * ratio + 0.05 * ratio.ln();
                let exact = phi(mu / 2.0 - eps / mu) - eps.exp() * phi(-mu / 2.0 - eps / mu);
                let cks = zcdp_delta(rho, eps);
                let standard = (-(eps - rho).powi(2) / (4.0 * rho)).exp();
                assert!(exact > 0.0, "rho {rho} eps {eps}");
                assert!(
                    exact <= cks * (1.0 + 1e-9),
                    "rho {rho} eps {eps}: exact {exact:e} above CKS20 {cks:e}"
                );
                assert!(
                    cks <= standard * (1.0 + 1e-9),
                    "rho {rho} eps {eps}: CKS20 {cks:e} above the standard {standard:e}"
                );
            }
        }
    }

    #[test]
    fn rho_for_is_tighter_than_the_loose_bound_and_admissible() {
        for &(eps, delta) in &[(1.0, 1e-6), (0.1, 1e-9), (5.0, 1e-5), (1e-6, 1e-10)] {
            let rho = zcdp_rho_for(eps, delta).unwrap();
            assert!(zcdp_delta(rho, eps) <= delta);
            // Slightly more ρ breaks δ (the bisection found the boundary).
            assert!(zcdp_delta(rho * 1.001, eps) > delta);
            // The loose conversion ε = ρ + 2√(ρ ln 1/δ) gives less ρ.
            let l = (1.0 / delta).ln();
            let loose = ((l + eps).sqrt() - l.sqrt()).powi(2);
            assert!(
                rho > loose,
                "eps {eps} delta {delta}: {rho} <= loose {loose}"
            );
        }
    }

    /// `ln δ(ε; ρ)` of CKS20 Corollary 13 by an independent route: the
    /// exponent `(α−1)(αρ−ε) + α ln(1−1/α) − ln(α−1)` written in
    /// `u = ln(α − 1)`, `a = e^u`, as `a((1+a)ρ − ε) − a ln(1 + e^{−u}) −
    /// ln(1 + a)` (no two large terms cancel), minimized by golden-section
    /// search over `u ∈ [−40, 40]` (the exponent is convex in α, so
    /// unimodal in u), capped at 0 (δ ≤ 1).
    fn reference_ln_delta(rho: f64, eps: f64) -> f64 {
        let g = |u: f64| {
            let a = u.exp();
            a * ((1.0 + a) * rho - eps) - a * (-u).exp().ln_1p() - a.ln_1p()
        };
        let r = (5f64.sqrt() - 1.0) / 2.0;
        let (mut a, mut b) = (-40.0f64, 40.0f64);
        for _ in 0..300 {
            let (c, d) = (b - r * (b - a), a + r * (b - a));
            if g(c) <= g(d) {
                b = d;
            } else {
                a = c;
            }
        }
        g(0.5 * (a + b)).min(g(a)).min(g(b)).min(0.0)
    }

    /// The largest ρ with the reference δ at most `delta`, by a plain
    /// bisection in log space over [1e-30, 1e4].
    fn reference_rho(eps: f64, delta: f64) -> f64 {
        let (mut lo, mut hi) = (1e-30f64, 1e4f64);
        for _ in 0..400 {
            let mid = (lo * hi).sqrt();
            if mid <= lo || mid >= hi {
                break;
            }
            if reference_ln_delta(mid, eps) <= delta.ln() {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The documented ranges' grid, corners and the reported failures
    /// ((80, 1e-4), (100, 1e-4), (50, 0.5)) included.
    fn grid() -> Vec<(f64, f64)> {
        let epsilons = [
            MIN_EPSILON,
            1e-5,
            1e-3,
            0.1,
            0.5,
            1.0,
            3.0,
            10.0,
            30.0,
            50.0,
            80.0,
            MAX_EPSILON,
        ];
        let deltas = [
            MIN_DELTA, 1e-60, 1e-30, 1e-12, 1e-6, 1e-4, 1e-2, 0.1, 0.3, MAX_DELTA,
        ];
        let mut out = Vec::new();
        for &e in &epsilons {
            for &d in &deltas {
                out.push((e, d));
            }
        }
        out
    }

    #[test]
    fn rho_for_is_the_largest_admissible_rho_over_the_whole_range() {
        for (eps, delta) in grid() {
            let rho =
                zcdp_rho_for(eps, delta).unwrap_or_else(|e| panic!("eps {eps} delta {delta}: {e}"));
            let reference = reference_rho(eps, delta);
            // Admissible by the independent evaluation: the returned ρ's
            // exact δ is at most δ (up to the reference's own rounding,
            // ~1e-15 of |ln δ| ≤ 231).
            let ln_d = reference_ln_delta(rho, eps);
            assert!(
                ln_d <= delta.ln() + 1e-12,
                "eps {eps} delta {delta}: rho {rho:e} has ln delta {ln_d} > {}",
                delta.ln()
            );
            // The largest: the reference boundary is within 1e-9 relative
            // (zcdp_delta's safety margin of 1e-12 relative in the
            // exponent costs far less than that in ρ).
            assert!(
                (rho - reference).abs() <= 1e-9 * reference,
                "eps {eps} delta {delta}: rho {rho:e}, reference {reference:e}"
            );
        }
    }

    #[test]
    fn ranges_are_enforced() {
        for bad in [0.0, -1.0, 1e-310, f64::NAN, f64::INFINITY, 1e3] {
            assert!(check_epsilon(bad).is_err(), "{bad}");
            assert!(zcdp_rho_for(bad, 1e-6).is_err());
        }
        for bad in [0.0, 1.0, 0.9, 1e-310, f64::NAN] {
            assert!(check_delta(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn add_up_never_undercounts() {
        assert_eq!(add_up(0.5, 0.5), 1.0);
        let s = add_up(0.1, 0.2);
        // 0.1 + 0.2 in exact rationals of the two doubles is below 0.30000000000000004.
        assert!(s >= 0.1 + 0.2);
        let s = add_up(1.0, 1e-20);
        assert!(s > 1.0);
    }
}
