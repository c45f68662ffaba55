//! Clopper–Pearson bounds and the ε lower bound of one event.
//!
//! For an event E, (ε,δ)-DP says `P(E) ≤ e^ε Q(E) + δ` for the output
//! distributions P, Q on any pair of neighbours. With one-sided bounds
//! `P(E) ≥ p_lo` and `Q(E) ≤ q_hi`, each holding with probability at least
//! `1 − β`, `ε ≥ ln((p_lo − δ)/q_hi)` holds with probability at least
//! `1 − 2β` (the δ-adjusted hockey-stick divergence; `δ = 0` for pure DP).

use statrs::distribution::{Beta, ContinuousCDF};

use dp_core::{DpError, Result};

/// The exact (Clopper–Pearson) one-sided lower bound on a binomial
/// proportion from `k` successes in `n` trials at level `beta`: the
/// `beta` quantile of `Beta(k, n − k + 1)` (0 when `k = 0`).
pub fn clopper_pearson_lower(k: u64, n: u64, beta: f64) -> Result<f64> {
    check(k, n, beta)?;
    if k == 0 {
        return Ok(0.0);
    }
    quantile(k as f64, (n - k + 1) as f64, beta)
}

/// The exact one-sided upper bound: the `1 − beta` quantile of
/// `Beta(k + 1, n − k)` (1 when `k = n`).
pub fn clopper_pearson_upper(k: u64, n: u64, beta: f64) -> Result<f64> {
    check(k, n, beta)?;
    if k == n {
        return Ok(1.0);
    }
    quantile((k + 1) as f64, (n - k) as f64, 1.0 - beta)
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

fn quantile(a: f64, b: f64, p: f64) -> Result<f64> {
    let dist = Beta::new(a, b).map_err(|e| DpError::InvalidParameter {
        name: "clopper-pearson",
        reason: e.to_string(),
    })?;
    let q = dist.inverse_cdf(p);
    if q.is_finite() && (0.0..=1.0).contains(&q) {
        Ok(q)
    } else {
        Err(DpError::NotConverged {
            solver: "beta quantile",
            reason: format!("Beta({a}, {b}) quantile at {p} is {q}"),
        })
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

    #[test]
    fn bounds_solve_the_defining_binomial_equations() {
        // The lower bound p_lo solves P[Bin(n, p_lo) ≥ k] = β; the upper
        // bound p_hi solves P[Bin(n, p_hi) ≤ k] = β.
        for &(k, n, beta) in &[(3u64, 50u64, 0.025), (17, 200, 0.001), (120, 400, 1e-4)] {
            let lo = ok(clopper_pearson_lower(k, n, beta));
            assert!(
                (binomial_upper_tail(n, k, lo) - beta).abs() <= 1e-6 * beta,
                "{k} {n}"
            );
            let hi = ok(clopper_pearson_upper(k, n, beta));
            let below = 1.0 - binomial_upper_tail(n, k + 1, hi);
            assert!((below - beta).abs() <= 1e-6 * beta, "{k} {n}");
            let p = k as f64 / n as f64;
            assert!(lo < p && p < hi);
        }
    }

    #[test]
    fn bounds_at_the_ends_are_closed_forms() {
        // k = 0: upper bound 1 − β^{1/n}; k = n: lower bound β^{1/n}.
        for &(n, beta) in &[(10u64, 0.05), (1000, 1e-3)] {
            let hi = ok(clopper_pearson_upper(0, n, beta));
            let exact = -(beta.ln() / n as f64).exp_m1();
            assert!((hi - exact).abs() <= 1e-9 * exact, "{n}: {hi} vs {exact}");
            let lo = ok(clopper_pearson_lower(n, n, beta));
            assert!((lo - beta.powf(1.0 / n as f64)).abs() <= 1e-12);
        }
        assert_eq!(ok(clopper_pearson_lower(0, 5, 0.01)), 0.0);
        assert_eq!(ok(clopper_pearson_upper(5, 5, 0.01)), 1.0);
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
        // All of P in E, none of Q: ln(β^{1/n} / (1 − β^{1/n})).
        let all = epsilon_lower_bound(1000, 0, 1000, 0.0, 0.01)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or(f64::NAN);
        let r = 0.01f64.powf(1e-3);
        assert!((all - (r / (1.0 - r)).ln()).abs() < 1e-9);
    }
}
