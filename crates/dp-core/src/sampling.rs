//! The random source and the exact samplers of Canonne, Kamath and
//! Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS
//! 2020; CKS20 below).
//!
//! Every draw is an exact computation on integers: the samplers consume
//! uniformly random bits and compare big integers, so the distribution
//! drawn is exactly the stated one (no floating point, hence none of the
//! low-order-bit leaks of Mironov, CCS 2012). The running time of a draw
//! depends only on the scale, never on the data the noise is added to.
//!
//! This module is private to the kernel: only [`crate::kernel`] draws
//! noise, and only after charging the session's accountant.

use num_bigint::BigUint;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::{DpError, Result};

/// The kernel's random source: ChaCha20 seeded from operating-system
/// entropy, or (only through [`crate::experiments`]) from a seed.
///
/// Not `Clone`: a copy of a source would replay its noise, and the
/// difference of two releases drawn with the same noise is exact.
///
/// ```compile_fail
/// fn needs_clone<T: Clone>() {}
/// needs_clone::<dp_core::NoiseSource>();
/// ```
pub struct NoiseSource {
    rng: ChaCha20Rng,
    seeded: bool,
}

impl std::fmt::Debug for NoiseSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoiseSource")
            .field("seeded", &self.seeded)
            .finish_non_exhaustive()
    }
}

impl NoiseSource {
    /// Seeds from operating-system entropy; a typed error (not a panic)
    /// when the operating system cannot provide it.
    pub fn from_os_entropy() -> Result<Self> {
        let rng = ChaCha20Rng::try_from_os_rng().map_err(|e| DpError::Entropy(e.to_string()))?;
        Ok(Self { rng, seeded: false })
    }

    /// A reproducible source; reachable only through [`crate::experiments`].
    pub(crate) fn seeded(seed: u64) -> Self {
        Self {
            rng: ChaCha20Rng::seed_from_u64(seed),
            seeded: true,
        }
    }

    /// Whether the source replays from a seed (an experiment).
    pub fn is_seeded(&self) -> bool {
        self.seeded
    }

    /// A uniform integer in `[0, n)`, `n > 0`, by rejection: draw
    /// `bits(n)` random bits until the value falls below `n` (fewer than
    /// two rounds on average; the work depends on `n` only).
    fn uniform_below(&mut self, n: &BigUint) -> BigUint {
        let bits = n.bits();
        let bytes = bits.div_ceil(8) as usize;
        let top_mask = match bits % 8 {
            0 => 0xff,
            r => (1u8 << r) - 1,
        };
        let mut buf = vec![0u8; bytes];
        loop {
            self.rng.fill_bytes(&mut buf);
            if let Some(last) = buf.last_mut() {
                *last &= top_mask;
            }
            let v = BigUint::from_bytes_le(&buf);
            if &v < n {
                return v;
            }
        }
    }

    /// Bernoulli(`num/den`), `0 ≤ num ≤ den`, `den > 0`.
    fn bernoulli(&mut self, num: &BigUint, den: &BigUint) -> bool {
        &self.uniform_below(den) < num
    }

    /// Bernoulli(exp(−γ)) for the rational `γ = num/den ≥ 0` (CKS20
    /// Algorithm 1): for γ ≤ 1, draw Bernoulli(γ/k) for k = 1, 2, … until
    /// the first failure at k = K and return whether K is odd; for γ > 1,
    /// the product of ⌊γ⌋ draws with γ = 1 and one with γ − ⌊γ⌋.
    fn bernoulli_exp_neg(&mut self, num: &BigUint, den: &BigUint) -> bool {
        if num <= den {
            let mut k = BigUint::from(1u8);
            loop {
                let kden = &k * den;
                if !self.bernoulli(num, &kden) {
                    return k.bit(0);
                }
                k += 1u8;
            }
        }
        let whole = num / den;
        let one = BigUint::from(1u8);
        let mut i = BigUint::ZERO;
        while i < whole {
            if !self.bernoulli_exp_neg(&one, &one) {
                return false;
            }
            i += 1u8;
        }
        self.bernoulli_exp_neg(&(num % den), den)
    }

    /// One draw of the discrete Laplace distribution of scale
    /// `t = num/den > 0` on ℤ, `P[Y = y] ∝ exp(−|y|/t)` (CKS20
    /// Algorithm 2; its integers `s, t` are our `den, num`).
    pub(crate) fn discrete_laplace(&mut self, num: &BigUint, den: &BigUint) -> (bool, BigUint) {
        let one = BigUint::from(1u8);
        let two = BigUint::from(2u8);
        loop {
            let u = self.uniform_below(num);
            if !self.bernoulli_exp_neg(&u, num) {
                continue;
            }
            let mut v = BigUint::ZERO;
            while self.bernoulli_exp_neg(&one, &one) {
                v += 1u8;
            }
            let y = (u + num * v) / den;
            let negative = self.bernoulli(&one, &two);
            if negative && y == BigUint::ZERO {
                continue;
            }
            return (negative, y);
        }
    }

    /// One draw of the discrete Gaussian `N_ℤ(0, σ²)` with the rational
    /// `σ² = num/den > 0`, `P[Y = y] ∝ exp(−y²/(2σ²))` (CKS20
    /// Algorithm 3): a discrete Laplace proposal of scale `t = ⌊σ⌋ + 1`
    /// accepted with probability `exp(−(|Y| − σ²/t)²/(2σ²))`. Here
    /// `γ = (|Y| t den − num)² / (2 num t² den)` exactly.
    pub(crate) fn discrete_gaussian(&mut self, num: &BigUint, den: &BigUint) -> (bool, BigUint) {
        let one = BigUint::from(1u8);
        // ⌊σ⌋ = ⌊√⌊σ²⌋⌋ since squares of integers are integers.
        let t = (num / den).sqrt() + 1u8;
        let gamma_den = BigUint::from(2u8) * num * &t * &t * den;
        loop {
            let (negative, y) = self.discrete_laplace(&t, &one);
            let a = &y * &t * den;
            let diff = if a >= *num { a - num } else { num - a };
            if self.bernoulli_exp_neg(&(&diff * &diff), &gamma_den) {
                return (negative, y);
            }
        }
    }
}

/// A signed draw `(negative, |y|)` as an `i128`; a typed error for a
/// magnitude beyond `i128` (probability far below 2⁻¹⁰⁰ at any scale the
/// kernel accepts).
pub(crate) fn signed(draw: (bool, BigUint)) -> Result<i128> {
    let (negative, magnitude) = draw;
    let digits = magnitude.to_u64_digits();
    let value: u128 = match digits.as_slice() {
        [] => 0,
        [lo] => u128::from(*lo),
        [lo, hi] => (u128::from(*hi) << 64) | u128::from(*lo),
        _ => u128::MAX,
    };
    let v = i128::try_from(value).map_err(|_| DpError::InvalidParameter {
        name: "noise draw",
        reason: "magnitude beyond 2^127".into(),
    })?;
    Ok(if negative { -v } else { v })
}

/// The exact rational value `(num, den)` of a finite positive `f64`
/// (an IEEE double is `m·2^e` with an integer `m`).
pub(crate) fn exact_ratio(x: f64) -> Result<(BigUint, BigUint)> {
    if !(x.is_finite() && x > 0.0) {
        return Err(DpError::InvalidParameter {
            name: "noise parameter",
            reason: format!("must be finite and > 0, got {x}"),
        });
    }
    let bits = x.to_bits();
    let exp_field = ((bits >> 52) & 0x7ff) as i64;
    let frac = bits & ((1u64 << 52) - 1);
    let (mantissa, exp) = if exp_field == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), exp_field - 1075)
    };
    let m = BigUint::from(mantissa);
    let one = BigUint::from(1u8);
    Ok(if exp >= 0 {
        (m << exp as usize, one)
    } else {
        (m, one << (-exp) as usize)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn exact_ratio_is_exact() {
        let one = BigUint::from(1u8);
        let (n, d) = exact_ratio(3.75).unwrap();
        assert_eq!(n * 4u8, d * 15u8);
        assert_eq!(
            exact_ratio(5e-324).unwrap(),
            (one.clone(), one.clone() << 1074)
        );
        let (n, d) = exact_ratio(1e300).unwrap();
        assert_eq!(d, one);
        assert_eq!(n.to_string().parse::<f64>().unwrap(), 1e300);
        // 0.1 is 3602879701896397 / 2^55 exactly.
        let (n, d) = exact_ratio(0.1).unwrap();
        assert_eq!(&n * (one.clone() << 3) / &d, BigUint::ZERO);
        assert_eq!(
            n.clone() * (BigUint::from(1u8) << 55) / d.clone(),
            BigUint::from(3_602_879_701_896_397u64)
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(exact_ratio(bad).is_err());
        }
    }

    #[test]
    fn signed_round_trips() {
        assert_eq!(signed((true, BigUint::from(5u8))).unwrap(), -5);
        assert_eq!(signed((false, BigUint::ZERO)).unwrap(), 0);
        let big = BigUint::from(1u8) << 130;
        assert!(signed((false, big)).is_err());
    }

    /// Pearson's statistic of `draws` against the pmf `p` on the bins
    /// `y < −k`, `−k..=k`, `y > k`.
    fn chi_square(draws: &[i128], k: i128, p: &dyn Fn(i128) -> f64, tail: f64) -> f64 {
        let n = draws.len() as f64;
        let mut counts = vec![0f64; (2 * k + 3) as usize];
        for &y in draws {
            let bin = if y < -k {
                0
            } else if y > k {
                2 * k + 2
            } else {
                y + k + 1
            };
            counts[bin as usize] += 1.0;
        }
        let mut stat = 0.0;
        for (b, &c) in counts.iter().enumerate() {
            let b = b as i128;
            let prob = if b == 0 || b == 2 * k + 2 {
                tail
            } else {
                p(b - k - 1)
            };
            let e = n * prob;
            stat += (c - e).powi(2) / e;
        }
        stat
    }

    /// χ² critical value at level 0.001 with 14 degrees of freedom
    /// (15 bins, no fitted parameter).
    const CRITICAL_14_DF: f64 = 36.12;

    /// 100,000 draws of `sampler` with the rational parameter `num/den`
    /// from a source seeded by `seed`.
    fn draws(
        (num, den): (u32, u32),
        seed: u64,
        sampler: fn(&mut NoiseSource, &BigUint, &BigUint) -> (bool, BigUint),
    ) -> Vec<i128> {
        let mut src = NoiseSource::seeded(seed);
        let (num, den) = (BigUint::from(num), BigUint::from(den));
        (0..100_000)
            .map(|_| signed(sampler(&mut src, &num, &den)).unwrap())
            .collect()
    }

    fn laplace_draws(t: (u32, u32), seed: u64) -> Vec<i128> {
        draws(t, seed, NoiseSource::discrete_laplace)
    }

    fn gaussian_draws(s2: (u32, u32), seed: u64) -> Vec<i128> {
        draws(s2, seed, NoiseSource::discrete_gaussian)
    }

    /// `P[Y = y] = (1−q)/(1+q) q^|y|`, `q = e^{−1/t}`; `P[Y > k] = q^{k+1}/(1+q)`.
    fn laplace_stat(draws: &[i128], t: f64) -> f64 {
        let q = (-1.0 / t).exp();
        let p = move |y: i128| (1.0 - q) / (1.0 + q) * q.powi(y.abs() as i32);
        chi_square(draws, 6, &p, q.powi(7) / (1.0 + q))
    }

    /// `P[Y = y] ∝ exp(−y²/(2σ²))`, normalized by direct summation.
    fn gaussian_stat(draws: &[i128], s2: f64) -> f64 {
        let w = |y: i128| (-((y * y) as f64) / (2.0 * s2)).exp();
        let z: f64 = (-200..=200).map(w).sum();
        let tail: f64 = (7..=200).map(w).sum::<f64>() / z;
        chi_square(draws, 6, &move |y| w(y) / z, tail)
    }

    #[test]
    fn discrete_laplace_has_the_exact_pmf() {
        let draws = laplace_draws((3, 2), 2024);
        assert!(laplace_stat(&draws, 1.5) < CRITICAL_14_DF);
        // Power: the same test rejects draws of a 10% wrong scale.
        let wrong = laplace_draws((33, 20), 2024);
        assert!(laplace_stat(&wrong, 1.5) > CRITICAL_14_DF);
        let draws = laplace_draws((1, 1), 7);
        assert!(laplace_stat(&draws, 1.0) < CRITICAL_14_DF);
    }

    #[test]
    fn discrete_gaussian_has_the_exact_pmf() {
        let draws = gaussian_draws((7, 3), 99);
        assert!(gaussian_stat(&draws, 7.0 / 3.0) < CRITICAL_14_DF);
        let wrong = gaussian_draws((28, 10), 99);
        assert!(gaussian_stat(&wrong, 7.0 / 3.0) > CRITICAL_14_DF);
        let draws = gaussian_draws((1, 2), 5);
        assert!(gaussian_stat(&draws, 0.5) < CRITICAL_14_DF);
    }

    #[test]
    fn os_source_is_not_seeded() {
        let src = NoiseSource::from_os_entropy().unwrap();
        assert!(!src.is_seeded());
        assert!(NoiseSource::seeded(1).is_seeded());
    }
}
