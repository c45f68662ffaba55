//! Clopper–Pearson bounds and the ε lower bound of one event.
//!
//! For an event E, (ε,δ)-DP says `P(E) ≤ e^ε Q(E) + δ` for the output
//! distributions P, Q on any pair of neighbours. With one-sided bounds
//! `P(E) ≥ p_lo` and `Q(E) ≤ q_hi`, each holding with probability at least
//! `1 − β`, `ε ≥ ln((p_lo − δ)/q_hi)` holds with probability at least
//! `1 − 2β` (the δ-adjusted hockey-stick divergence; `δ = 0` for pure DP).

use statrs::function::factorial::ln_binomial;

use dp_core::{DpError, Result};

/// The relative error the bounds allow the computed binomial tail: its
/// `ln C(n, j)` anchor is a difference of `ln Γ` values near 1.5·10⁸ at
/// n = 10⁷, exact to a few units in the last place (~10⁻⁷ absolute, so
/// ~10⁻⁷ relative on the tail). Each bound solves for the level
/// `β(1 − TAIL_SLACK)` instead of β, so that the true tail at the bound is
/// at most β and the bound stays on the conservative side.
const TAIL_SLACK: f64 = 1e-5;

/// The exact (Clopper–Pearson) one-sided lower bound on a binomial
/// proportion from `k` successes in `n` trials at level `beta`: the `p`
/// with `P[Bin(n, p) ≥ k] = beta` (0 when `k = 0`), on the conservative
/// side (see `TAIL_SLACK`).
///
/// Solved by bisection on the binomial tail itself rather than through an
/// inverse incomplete beta function: at the audit's 10⁷ samples the
/// library inverse does not return for `k` near 0 or `n`.
pub fn clopper_pearson_lower(k: u64, n: u64, beta: f64) -> Result<f64> {
    check(k, n, beta)?;
    if k == 0 {
        return Ok(0.0);
    }
    // P[X ≥ k] rises with p, from 0 at p = 0 to at least one half at
    // p = k/n (k is then a median), above beta < 1/2.
    let level = beta.ln() + (-TAIL_SLACK).ln_1p();
    let (lo, _) = bisect(0.0, k as f64 / n as f64, |p| {
        ln_tail_at_least(n, k, p.ln(), (-p).ln_1p()) - level
    })?;
    Ok(lo)
}

/// The exact one-sided upper bound: the `p` with `P[Bin(n, p) ≤ k] =
/// beta` (1 when `k = n`), on the conservative side.
pub fn clopper_pearson_upper(k: u64, n: u64, beta: f64) -> Result<f64> {
    check(k, n, beta)?;
    if k == n {
        return Ok(1.0);
    }
    // P[X ≤ k] = P[n − X ≥ n − k] falls with p; the root is bracketed by
    // k/n (at least one half) and 1 (0, as k < n).
    let level = beta.ln() + (-TAIL_SLACK).ln_1p();
    let (_, hi) = bisect(k as f64 / n as f64, 1.0, |p| {
        ln_tail_at_least(n, n - k, (-p).ln_1p(), p.ln()) - level
    })?;
    Ok(hi)
}

fn check(k: u64, n: u64, beta: f64) -> Result<()> {
    if n == 0 || k > n || !(beta > 0.0 && beta < 0.5) {
        return Err(DpError::InvalidParameter {
            name: "clopper-pearson",
            reason: format!(
                "needs 0 <= k <= n, n > 0, 0 < beta < 0.5; got k {k}, n {n}, beta {beta}"
            ),
        });
    }
    Ok(())
}
/// A bracket `(a, b)`, `b − a ≤ 10⁻¹⁴ b`, of the root of `f` in
/// `[lo, hi]`, where `f(lo)` and `f(hi)` differ in sign.
fn bisect(mut lo: f64, mut hi: f64, f: impl Fn(f64) -> f64) -> Result<(f64, f64)> {
    let below_at_lo = f(lo) < 0.0;
    if below_at_lo == (f(hi) < 0.0) {
        return Err(DpError::NotConverged {
            solver: "clopper-pearson",
            reason: format!("the binomial tail does not cross the level in [{lo}, {hi}]"),
        });
    }
    while hi - lo > 1e-14 * hi {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if (f(mid) < 0.0) == below_at_lo {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok((lo, hi))
}

/// `ln P[Bin(n, p) ≥ k]` for `p` given as `ln p` and `ln(1 − p)`.
///
/// The pmf is summed from `k` outward by the ratio of consecutive terms,
/// which fall off geometrically beyond the mode, until a term is below
/// 10⁻¹⁸ of the sum: on the upper tail when `k` is above the mean,
/// otherwise as one minus the lower tail `P[X ≤ k − 1]` (then at least
/// about one half, so nothing cancels).
fn ln_tail_at_least(n: u64, k: u64, ln_p: f64, ln_q: f64) -> f64 {
    if k == 0 || ln_q == f64::NEG_INFINITY {
        return 0.0;
    }
    if ln_p == f64::NEG_INFINITY {
        return f64::NEG_INFINITY;
    }
    let ln_pmf = |j: u64| ln_binomial(n, j) + j as f64 * ln_p + (n - j) as f64 * ln_q;
    let odds = (ln_p - ln_q).exp();
    let upper = k as f64 > n as f64 * ln_p.exp();
    let start = if upper { k } else { k - 1 };
    let (mut j, mut term, mut sum) = (start, 1.0f64, 1.0f64);
    while term >= 1e-18 * sum {
        let ratio = if upper {
            if j == n {
                break;
            }
            j += 1;
            (n - j + 1) as f64 / (j as f64) * odds
        } else {
            if j == 0 {
                break;
            }
            j -= 1;
            (j + 1) as f64 / ((n - j) as f64 * odds)
        };
        term *= ratio;
        sum += term;
    }
    let ln_side = ln_pmf(start) + sum.ln();
    if upper {
        ln_side
    } else if ln_side > -std::f64::consts::LN_2 {
        (-ln_side.exp_m1()).ln()
    } else {
        (-ln_side.exp()).ln_1p()
    }
}

/// `ln((p_lo − δ)/q_hi)` for the counts `k_p` of E among `n` outputs on
/// one neighbour and `k_q` on the other, each bound at level `beta`;
/// `None` when `p_lo ≤ δ` (the event says nothing).
pub fn epsilon_lower_bound(
    k_p: u64,
    k_q: u64,
    n: u64,
    delta: f64,
    beta: f64,
) -> Result<Option<f64>> {
    let p_lo = clopper_pearson_lower(k_p, n, beta)?;
    let q_hi = clopper_pearson_upper(k_q, n, beta)?;
    Ok((p_lo > delta).then(|| ((p_lo - delta) / q_hi).ln()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `P[Bin(n, p) ≥ k]` by summing the pmf in log space (independent of
    /// the incomplete beta function).
    fn binomial_upper_tail(n: u64, k: u64, p: f64) -> f64 {
        let ln_choose =
            |i: u64| -> f64 { (1..=i).map(|j| ((n - i + j) as f64 / j as f64).ln()).sum() };
        (k..=n)
            .map(|i| (ln_choose(i) + i as f64 * p.ln() + (n - i) as f64 * (-p).ln_1p()).exp())
            .sum()
    }

    fn ok(v: Result<f64>) -> f64 {
        v.unwrap_or_else(|e| panic!("{e}"))
    }

    /// A tail at a bound: at most β (conservative) and within twice the
    /// slack below it.
    fn at_level(tail: f64, beta: f64) -> bool {
        tail <= beta && tail >= beta * (1.0 - 2.0 * TAIL_SLACK)
    }

    #[test]
    fn bounds_solve_the_defining_binomial_equations() {
        // The lower bound p_lo solves P[Bin(n, p_lo) ≥ k] = β; the upper
        // bound p_hi solves P[Bin(n, p_hi) ≤ k] = β (each on the
        // conservative side of the level).
        for &(k, n, beta) in &[(3u64, 50u64, 0.025), (17, 200, 0.001), (120, 400, 1e-4)] {
            let lo = ok(clopper_pearson_lower(k, n, beta));
            let at = binomial_upper_tail(n, k, lo);
            assert!(at_level(at, beta), "{k} {n}: {at}");
            let hi = ok(clopper_pearson_upper(k, n, beta));
            let below = 1.0 - binomial_upper_tail(n, k + 1, hi);
            assert!(at_level(below, beta), "{k} {n}: {below}");
            let p = k as f64 / n as f64;
            assert!(lo < p && p < hi);
        }
    }

    #[test]
    fn bounds_at_the_ends_are_closed_forms() {
        // k = 0: upper bound 1 − β^{1/n}; k = n: lower bound β^{1/n};
        // solved at the level β(1 − slack), so beyond them (conservative).
        // n = 10⁷ is the full audit's sample size (where an inverse
        // incomplete beta function once never returned).
        for &(n, beta) in &[(10u64, 0.05), (1000, 1e-3), (10_000_000, 1.25e-5)] {
            let level = beta * (1.0 - TAIL_SLACK);
            let hi = ok(clopper_pearson_upper(0, n, beta));
            let exact = -(level.ln() / n as f64).exp_m1();
            assert!((hi - exact).abs() <= 1e-9 * exact, "{n}: {hi} vs {exact}");
            assert!(hi > -(beta.ln() / n as f64).exp_m1(), "{n}: conservative");
            let lo = ok(clopper_pearson_lower(n, n, beta));
            let exact = level.powf(1.0 / n as f64);
            assert!((lo - exact).abs() <= 1e-12, "{n}");
            assert!(lo < beta.powf(1.0 / n as f64), "{n}: conservative");
        }
        assert_eq!(ok(clopper_pearson_lower(0, 5, 0.01)), 0.0);
        assert_eq!(ok(clopper_pearson_upper(5, 5, 0.01)), 1.0);
    }

    /// `P[Bin(n, p) < k]` for small `k`, term by term in log space.
    fn binomial_lower_tail(n: u64, k: u64, p: f64) -> f64 {
        let ln_choose =
            |i: u64| -> f64 { (1..=i).map(|j| ((n - i + j) as f64 / j as f64).ln()).sum() };
        (0..k)
            .map(|i| (ln_choose(i) + i as f64 * p.ln() + (n - i) as f64 * (-p).ln_1p()).exp())
            .sum()
    }

    #[test]
    fn the_audits_sample_size_near_the_ends_solves_the_equations() {
        // n = 10⁷ with a handful of outputs in an event on one side: the
        // upper bound solves P[Bin(n, p) ≤ k] = β, the lower bound on the
        // complementary count solves P[Bin(n, p) ≥ n − k] = β.
        let (n, beta) = (10_000_000u64, 1.25e-5);
        for k in [1u64, 2, 5, 10, 40] {
            let hi = ok(clopper_pearson_upper(k, n, beta));
            let at = binomial_lower_tail(n, k + 1, hi);
            assert!(at_level(at, beta), "{k}: {at}");
            let lo = ok(clopper_pearson_lower(n - k, n, beta));
            let at = binomial_lower_tail(n, k + 1, 1.0 - lo);
            assert!(at_level(at, beta), "{k}: {at}");
        }
    }

    #[test]
    fn large_samples_are_near_the_normal_approximation() {
        // n = 10⁷, k = 10⁵: the Wilson-type interval p ± z √(p(1−p)/n)
        // agrees to well under 1% of its half-width.
        let (k, n, beta) = (100_000u64, 10_000_000u64, 0.001);
        let p = k as f64 / n as f64;
        let half = 3.090_232 * (p * (1.0 - p) / n as f64).sqrt();
        let lo = ok(clopper_pearson_lower(k, n, beta));
        let hi = ok(clopper_pearson_upper(k, n, beta));
        assert!(((p - lo) / half - 1.0).abs() < 0.01, "{lo}");
        assert!(((hi - p) / half - 1.0).abs() < 0.01, "{hi}");
    }

    #[test]
    fn invalid_arguments_are_refused_and_useless_events_give_nothing() {
        assert!(clopper_pearson_lower(6, 5, 0.01).is_err());
        assert!(clopper_pearson_upper(0, 0, 0.01).is_err());
        assert!(clopper_pearson_lower(1, 5, 0.0).is_err());
        assert!(clopper_pearson_lower(1, 5, f64::NAN).is_err());
        let none = epsilon_lower_bound(0, 0, 100, 0.0, 0.01).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(none, None);
        // All of P in E, none of Q: ln(β^{1/n} / (1 − β^{1/n})) at the
        // level β(1 − slack).
        let all = epsilon_lower_bound(1000, 0, 1000, 0.0, 0.01)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or(f64::NAN);
        let r = (0.01 * (1.0 - TAIL_SLACK)).powf(1e-3);
        assert!((all - (r / (1.0 - r)).ln()).abs() < 1e-9);
    }
}
