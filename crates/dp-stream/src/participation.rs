//! How often one person's data may enter the stream, and the sensitivity
//! of a factorization `W = BC` under it.
//!
//! A person contributes (a vector of norm at most 1) at the steps of a
//! *participation pattern*: a single step, or up to `k` steps, every two
//! at least `b` apart (multi-epoch training, a person in every epoch).
//! Noise `z` is added to `Cx`, so the sensitivity is the largest
//! `‖Σ_{j∈π} C e_j‖₂ = (Σ_{i,j∈π} X_ij)^{1/2}` over patterns `π`, with
//! `X = CᵀC`.
//!
//! - Single participation: the largest column norm of `C`, exactly.
//! - `k` participations, `C` with at most `b` bands (`C_ij = 0` for
//!   `i − j ≥ b`): columns `b` apart have disjoint supports, so the
//!   quadratic is the sum of the chosen columns' squared norms — exact,
//!   by the same dynamic program as below on a linear objective.
//! - In general: maximizing a quadratic over patterns is a hard problem.
//!   dpmm reports a sound upper bound and a lower bound: with
//!   `uᵢ = max over patterns π ∋ i of Σ_{j∈π} max(X_ij, 0)`,
//!   `Σ_{i,j∈π} X_ij ≤ Σ_{i∈π} uᵢ ≤ max_π Σ_{i∈π} uᵢ` (every `uᵢ` and the
//!   outer maximum by dynamic programming over positions, `O(T²k)`); the
//!   lower bound is the exact value of the best patterns it tried (the
//!   outer maximizer, evenly spaced ones). The factorization's figures use
//!   the upper bound: noise calibrated to it is private.

use dp_core::{DpError, Result};

/// Who may contribute how often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Participation {
    /// At most one step per person.
    Single,
    /// At most `participations` steps per person, every two at least
    /// `separation` steps apart.
    Multi {
        /// The most steps one person contributes to (`k ≥ 1`).
        participations: usize,
        /// The fewest steps between two of them (`b ≥ 1`).
        separation: usize,
    },
}

impl Participation {
    /// Refuses `k = 0` or `b = 0`.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Self::Multi {
                participations: 0, ..
            } => Err(DpError::InvalidParameter {
                name: "participations",
                reason: "at least one participation".into(),
            }),
            Self::Multi { separation: 0, .. } => Err(DpError::InvalidParameter {
                name: "separation",
                reason: "at least one step between participations".into(),
            }),
            _ => Ok(()),
        }
    }

    /// `(k, b)`: single participation is `(1, 1)`.
    pub fn schema(&self) -> (usize, usize) {
        match *self {
            Self::Single => (1, 1),
            Self::Multi {
                participations,
                separation,
            } => (participations, separation),
        }
    }
}

/// Operations (`T²k`) the general sensitivity bound may take.
pub const MAX_PATTERN_WORK: f64 = 2e9;

/// `(k, b)` with `k` capped at the most participations `t` steps can hold
/// `b` apart (`⌊(t − 1)/b⌋ + 1`): a larger `k` allows no other pattern.
fn effective_schema(participation: Participation, t: usize) -> (usize, usize) {
    let (k, b) = participation.schema();
    (k.min(t.saturating_sub(1) / b + 1), b)
}

/// Refuses a non-finite Gram entry: a NaN would drop out of every maximum
/// and understate the sensitivity.
fn finite(values: &[f64]) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(DpError::NonFinite {
            what: "the factor's Gram matrix (diagonal, or row bound)".into(),
            row: i,
            col: i,
            value: values[i],
        }),
    }
}

/// A sensitivity: exact, or bracketed by a sound upper bound (the one
/// used) and the best pattern found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sensitivity {
    /// The sensitivity the figures use: exact or a sound upper bound.
    pub value: f64,
    /// A pattern attains at least this: the sensitivity lies in
    /// `[lower, value]`, and equals `value` when they agree.
    pub lower: f64,
}

impl Sensitivity {
    /// An exact value.
    pub fn exact(value: f64) -> Self {
        Self {
            value,
            lower: value,
        }
    }

    /// Whether the bracket is closed (to rounding).
    pub fn is_exact(&self) -> bool {
        self.value - self.lower <= 1e-12 * self.value
    }
}

/// `max Σ_{j∈π} v_j` over patterns of at most `k` positions of `0..v.len()`
/// every two at least `b` apart (`None` entries are excluded positions),
/// and a maximizing pattern. Negative values are never chosen.
pub fn best_linear_pattern(v: &[Option<f64>], k: usize, b: usize) -> (f64, Vec<usize>) {
    let t = v.len();
    if t == 0 || k == 0 {
        return (0.0, Vec::new());
    }
    // f[c][j]: the best sum of at most c positions among 0..=j.
    let mut f = vec![vec![0.0f64; t]; k + 1];
    for c in 1..=k {
        for j in 0..t {
            let skip = if j > 0 { f[c][j - 1] } else { 0.0 };
            let take = v[j].map_or(f64::NEG_INFINITY, |x| {
                x + if j >= b { f[c - 1][j - b] } else { 0.0 }
            });
            f[c][j] = skip.max(take);
        }
    }
    // Walk back to a maximizer.
    let mut pattern = Vec::new();
    let (mut c, mut j) = (k, t as isize - 1);
    while c > 0 && j >= 0 {
        let ju = j as usize;
        let skip = if ju > 0 { f[c][ju - 1] } else { 0.0 };
        if f[c][ju] > skip && v[ju].is_some() {
            pattern.push(ju);
            c -= 1;
            j = ju as isize - b as isize;
        } else {
            j -= 1;
        }
    }
    pattern.reverse();
    (f[k][t - 1], pattern)
}

/// `Σ_{i,j∈π} X_ij`, `X` given by entry.
pub fn pattern_value(x: &dyn Fn(usize, usize) -> f64, pattern: &[usize]) -> f64 {
    pattern
        .iter()
        .map(|&i| pattern.iter().map(|&j| x(i, j)).sum::<f64>())
        .sum()
}

/// Sensitivity of `C` with `X = CᵀC` given by entry over `t` columns:
/// exact for a single participation, the bracket of the module
/// documentation for several (`O(t²k)` entries of `X` read).
pub fn sensitivity(
    x: &(dyn Fn(usize, usize) -> f64 + Sync),
    t: usize,
    participation: Participation,
) -> Result<Sensitivity> {
    participation.validate()?;
    let (k, b) = effective_schema(participation, t);
    let diagonal: Vec<f64> = (0..t).map(|j| x(j, j)).collect();
    finite(&diagonal)?;
    if k == 1 {
        let max = diagonal.iter().copied().fold(0.0, f64::max);
        return Ok(Sensitivity::exact(max.sqrt()));
    }
    let work = (t as f64) * (t as f64) * k as f64;
    if work > MAX_PATTERN_WORK {
        return Err(DpError::InvalidParameter {
            name: "participations",
            reason: format!(
                "the sensitivity of {k} participations over {t} steps takes {work:.1e} \
                 operations (at most {MAX_PATTERN_WORK:.0e})"
            ),
        });
    }
    use rayon::prelude::*;
    let u: Vec<Option<f64>> = (0..t)
        .into_par_iter()
        .map(|i| {
            let row: Vec<Option<f64>> = (0..t)
                .map(|j| (j.abs_diff(i) >= b).then(|| x(i, j).max(0.0)))
                .collect();
            Some(diagonal[i] + best_linear_pattern(&row, k - 1, b).0)
        })
        .collect();
    let values: Vec<f64> = u.iter().flatten().copied().collect();
    // A non-finite entry off the diagonal would vanish in the maxima.
    finite(&values)?;
    let (upper, best) = best_linear_pattern(&u, k, b);
    let mut lower = pattern_value(x, &best);
    for start in 0..b.min(t) {
        let even: Vec<usize> = (0..k).map(|i| start + i * b).filter(|&j| j < t).collect();
        lower = lower.max(pattern_value(x, &even));
    }
    Ok(Sensitivity {
        value: upper.max(lower).sqrt(),
        lower: lower.sqrt(),
    })
}

/// Sensitivity when every two columns `separation` apart have disjoint
/// supports (a factorization with at most that many bands): the chosen
/// columns' squared norms add, so the largest sum over patterns is exact.
pub fn banded_sensitivity(column_norms2: &[f64], participation: Participation) -> Result<f64> {
    participation.validate()?;
    finite(column_norms2)?;
    let (k, b) = effective_schema(participation, column_norms2.len());
    if k == 1 {
        let max = column_norms2.iter().copied().fold(0.0, f64::max);
        return Ok(max.sqrt());
    }
    let v: Vec<Option<f64>> = column_norms2.iter().map(|&n| Some(n)).collect();
    Ok(best_linear_pattern(&v, k, b).0.sqrt())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#[allow(clippy::needless_range_loop)] // tests index matrices as the math does
pub(crate) mod tests {
    use super::*;

    /// Every pattern of at most `k` positions of `0..t`, pairwise at least
    /// `b` apart.
    pub(crate) fn all_patterns(t: usize, k: usize, b: usize) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new()];
        let mut frontier = vec![Vec::new()];
        for _ in 0..k {
            let mut next = Vec::new();
            for p in &frontier {
                let from = p.last().map_or(0, |&l: &usize| l + b);
                for j in from..t {
                    let mut q = p.clone();
                    q.push(j);
                    next.push(q);
                }
            }
            out.extend(next.iter().cloned());
            frontier = next;
        }
        out
    }

    /// Brute force: the largest quadratic over every pattern.
    pub(crate) fn brute_force(
        x: &dyn Fn(usize, usize) -> f64,
        t: usize,
        k: usize,
        b: usize,
    ) -> f64 {
        all_patterns(t, k, b)
            .iter()
            .map(|p| pattern_value(x, p))
            .fold(0.0, f64::max)
            .sqrt()
    }

    /// The linear dynamic program equals brute force on random values,
    /// negative ones and excluded positions included, and its pattern is
    /// valid and attains it.
    #[test]
    fn the_linear_program_is_brute_force() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        for case in 0..200 {
            let t = 1 + case % 13;
            let (k, b) = (1 + case % 4, 1 + case % 5);
            let v: Vec<Option<f64>> = (0..t)
                .map(|_| {
                    let r = next();
                    (r > 0.1).then_some(r * 2.0 - 0.6)
                })
                .collect();
            let (best, pattern) = best_linear_pattern(&v, k, b);
            let want = all_patterns(t, k, b)
                .iter()
                .filter(|p| p.iter().all(|&j| v[j].is_some()))
                .map(|p| p.iter().map(|&j| v[j].unwrap_or(0.0)).sum::<f64>())
                .fold(0.0, f64::max);
            assert!((best - want).abs() < 1e-12, "case {case}: {best} vs {want}");
            assert!(pattern.len() <= k);
            assert!(pattern.windows(2).all(|w| w[1] >= w[0] + b));
            let got: f64 = pattern.iter().map(|&j| v[j].unwrap_or(f64::NAN)).sum();
            assert!((got - best).abs() < 1e-12);
        }
    }

    /// The general bracket contains the brute-force sensitivity, for
    /// Gram matrices with negative entries too.
    #[test]
    fn the_bracket_holds_the_brute_force_sensitivity() {
        let mut seed = 11u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.3
        };
        for case in 0..60 {
            let t = 4 + case % 9;
            let (k, b) = (2 + case % 3, 1 + case % 4);
            let c: Vec<Vec<f64>> = (0..t).map(|_| (0..t).map(|_| next()).collect()).collect();
            let x = |i: usize, j: usize| (0..t).map(|r| c[r][i] * c[r][j]).sum::<f64>();
            let s = sensitivity(
                &x,
                t,
                Participation::Multi {
                    participations: k,
                    separation: b,
                },
            )
            .unwrap();
            let truth = brute_force(&x, t, k, b);
            assert!(s.lower <= truth * (1.0 + 1e-12), "case {case}");
            assert!(truth <= s.value * (1.0 + 1e-12), "case {case}");
        }
    }

    #[test]
    fn bad_schemas_are_refused() {
        let x = |_: usize, _: usize| 1.0;
        for (k, b) in [(0, 3), (2, 0)] {
            let p = Participation::Multi {
                participations: k,
                separation: b,
            };
            assert!(sensitivity(&x, 5, p).is_err());
            assert!(banded_sensitivity(&[1.0; 5], p).is_err());
        }
    }
}
