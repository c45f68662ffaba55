//! The random source and the exact samplers of Canonne, Kamath and
//! Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS
//! 2020; CKS20 below).
//!
//! Every draw is an exact computation on integers: the samplers consume
//! uniformly random bits and compare big integers, so the distribution
//! drawn is exactly the stated one (no floating point, hence none of the
//! low-order-bit leaks of Mironov, CCS 2012).
//!
//! # Timing
//!
//! A draw never sees the data, so its running time is a function of the
//! scale and of the random bits only: its *distribution* is the same
//! whatever the data. The running time is not independent of the *value
//! drawn*, though. In the discrete Laplace sampler the geometric loop
//! (`V`, Bernoulli(e⁻¹) until the first failure) runs about
//! `|noise|/scale` times, and the Bernoulli(exp(−γ)) steps run about
//! `⌊γ⌋` times, `γ` growing with the proposal's magnitude in the
//! discrete Gaussian's acceptance test; rejected proposals add more.
//! The noise is what hides the data: someone who can time the draws of
//! one release learns roughly `|noise|/scale` per value, and with the
//! published `answer = Ã x + noise` learns something about `Ã x` that
//! the privacy guarantee does not cover. A release's total time sums
//! these over its values, so it too varies (less sharply) with the noise
//! drawn. The guarantee therefore assumes that whoever receives the
//! answers cannot time the kernel's draws. The loops are not truncated:
//! a bounded loop would no longer draw the exact distribution.
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
///
/// (The type is nameable, so the test above fails for want of `Clone`
/// alone; nor is there any public method that draws from it:)
///
/// ```
/// fn needs_debug<T: std::fmt::Debug>() {}
/// needs_debug::<dp_core::NoiseSource>();
/// ```
pub struct NoiseSource {
    rng: ChaCha20Rng,
    seeded: bool,
    /// Unused random bits of the last word drawn for single bits.
    bits: u64,
    bits_left: u32,
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
        Ok(Self::from_rng(rng, false))
    }

    /// A reproducible source; reachable only through [`crate::experiments`].
    pub(crate) fn seeded(seed: u64) -> Self {
        Self::from_rng(ChaCha20Rng::seed_from_u64(seed), true)
    }

    /// An independent stream keyed by 32 bytes of this one (a fresh
    /// ChaCha20 key from the CSPRNG), seeded exactly when this source is:
    /// lets a measurement draw its noise on several threads, each chunk
    /// from its own stream, in an order that does not depend on them.
    pub(crate) fn split(&mut self) -> Self {
        let mut key = [0u8; 32];
        self.rng.fill_bytes(&mut key);
        Self::from_rng(ChaCha20Rng::from_seed(key), self.seeded)
    }

    fn from_rng(rng: ChaCha20Rng, seeded: bool) -> Self {
        Self {
            rng,
            seeded,
            bits: 0,
            bits_left: 0,
        }
    }

    /// 64 uniform random bits: the priorities of contribution bounding
    /// and the coin of a weight's stochastic rounding.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
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
    /// Algorithm 2; its integers `s, t` are our `den, num`). When both
    /// fit in 126 bits the same algorithm runs on machine integers
    /// ([`Self::discrete_laplace_u128`]). The loop over `V` runs about
    /// `|Y|/t` times: see the module's section on timing.
    pub(crate) fn discrete_laplace(&mut self, num: &BigUint, den: &BigUint) -> (bool, BigUint) {
        if let (Some(n), Some(d)) = (small(num), small(den)) {
            return self.discrete_laplace_u128(n, d);
        }
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

    /// A uniform integer in `[0, n)`, `n > 0`: the rejection of
    /// [`Self::uniform_below`] on machine words, taking exactly `bits(n)`
    /// random bits per round from [`Self::take_bits`] (none for `n = 1`).
    #[inline]
    fn uniform_below_u128(&mut self, n: u128) -> u128 {
        if let Ok(n) = u64::try_from(n) {
            return u128::from(self.uniform_below_u64(n));
        }
        let bits = 128 - (n - 1).leading_zeros();
        if bits == 0 {
            return 0;
        }
        loop {
            let v = if bits <= 64 {
                u128::from(self.take_bits(bits))
            } else {
                (u128::from(self.take_bits(bits - 64)) << 64) | u128::from(self.take_bits(64))
            };
            if v < n {
                return v;
            }
        }
    }

    /// [`Self::uniform_below_u128`] for `n < 2^64`.
    #[inline]
    fn uniform_below_u64(&mut self, n: u64) -> u64 {
        let bits = 64 - (n - 1).leading_zeros();
        if bits == 0 {
            return 0;
        }
        loop {
            let v = self.take_bits(bits);
            if v < n {
                return v;
            }
        }
    }

    /// Bernoulli(`num/n`) for `num ≤ n`, `n > 0`: whether a uniform
    /// integer of `[0, n)` falls below `num`. For `n ≥ 2^64` the integer is
    /// drawn lazily, its top 64 bits first: they decide unless they equal
    /// the top bits of `num` or of `n` (probability 2⁻⁶³ at most), and only
    /// then are the low bits drawn; the integer, hence the probability, is
    /// the same.
    #[inline]
    fn bernoulli_u128(&mut self, num: u128, n: u128) -> bool {
        let Ok(small) = u64::try_from(n) else {
            return self.bernoulli_wide(num, n);
        };
        // num ≤ n < 2^64.
        self.uniform_below_u64(small) < num as u64
    }

    fn bernoulli_wide(&mut self, num: u128, n: u128) -> bool {
        let low_bits = 64 - (n - 1).leading_zeros();
        if low_bits == 0 {
            // n = 2^64: a 64-bit word is the uniform integer itself.
            return u128::from(self.rng.next_u64()) < num;
        }
        // The top bits of n reach 2^64 when n is a power of two: u128.
        let (n_hi, num_hi) = (n >> low_bits, num >> low_bits);
        let mask = (1u128 << low_bits) - 1;
        loop {
            let hi = u128::from(self.rng.next_u64());
            if hi > n_hi {
                continue;
            }
            if hi != num_hi && hi != n_hi {
                // hi < n_hi: below n whatever the low bits.
                return hi < num_hi;
            }
            let v = (hi << low_bits) | (self.uniform_low_bits(low_bits) & mask);
            if v < n {
                return v < num;
            }
        }
    }

    /// `k ≤ 64` uniformly random bits as a `u128` (`k ≥ 1`).
    fn uniform_low_bits(&mut self, k: u32) -> u128 {
        u128::from(self.take_bits(k))
    }

    /// `k ≤ 64` uniformly random bits (as the low bits of the result),
    /// from the generator's words, each bit used once.
    #[inline]
    fn take_bits(&mut self, k: u32) -> u64 {
        debug_assert!((1..=64).contains(&k));
        if k <= self.bits_left {
            let v = if k == 64 {
                self.bits
            } else {
                self.bits & ((1u64 << k) - 1)
            };
            self.bits = self.bits.checked_shr(k).unwrap_or(0);
            self.bits_left -= k;
            return v;
        }
        // The remaining bits, then the rest from a fresh word.
        let have = self.bits_left;
        let low = self.bits;
        let need = k - have;
        let word = self.rng.next_u64();
        let high = if need == 64 {
            word
        } else {
            word & ((1u64 << need) - 1)
        };
        self.bits = word.checked_shr(need).unwrap_or(0);
        self.bits_left = 64 - need;
        low | high.checked_shl(have).unwrap_or(0)
    }

    /// Bernoulli(exp(−num/den)) by CKS20 Algorithm 1 on machine words,
    /// for `num, den < 2^126`; a step whose `k·den` overflows is drawn
    /// exactly by [`Self::bernoulli`] (the same Bernoulli(γ/k), so the
    /// distribution is unchanged).
    fn bernoulli_exp_neg_u128(&mut self, num: u128, den: u128) -> bool {
        if num <= den {
            let mut k: u64 = 1;
            loop {
                let hit = match mul_wide(den, u128::from(k)) {
                    Some(kden) => self.bernoulli_u128(num, kden),
                    None => self.bernoulli(&BigUint::from(num), &(BigUint::from(k) * den)),
                };
                if !hit {
                    return k & 1 == 1;
                }
                k += 1;
            }
        }
        let (whole, rest) = div_rem(num, den);
        for _ in 0..whole {
            if !self.bernoulli_exp_minus_one() {
                return false;
            }
        }
        self.bernoulli_exp_neg_u128(rest, den)
    }

    /// Bernoulli(e⁻¹): CKS20 Algorithm 1 with γ = 1, whose steps are
    /// Bernoulli(1/k) = [a uniform integer of `[0, k)` is 0] (k = 1 always
    /// succeeds); the sampler's most frequent draw.
    #[inline]
    fn bernoulli_exp_minus_one(&mut self) -> bool {
        let mut k: u64 = 2;
        loop {
            if self.uniform_below_u64(k) != 0 {
                // The first failure at K = k.
                return k & 1 == 1;
            }
            k += 1;
        }
    }

    /// [`Self::discrete_laplace`] for `num, den < 2^126`: the same steps
    /// and comparisons on machine words (`U + t·V` overflowing, a
    /// probability below 2⁻⁹⁰ at any accepted scale, is finished in
    /// big integers).
    fn discrete_laplace_u128(&mut self, num: u128, den: u128) -> (bool, BigUint) {
        loop {
            let u = self.uniform_below_u128(num);
            if !self.bernoulli_exp_neg_u128(u, num) {
                continue;
            }
            let mut v: u128 = 0;
            while self.bernoulli_exp_minus_one() {
                v += 1;
            }
            let y = match num.checked_mul(v).and_then(|x| x.checked_add(u)) {
                Some(x) => BigUint::from(x / den),
                None => (BigUint::from(u) + BigUint::from(num) * v) / den,
            };
            let negative = self.uniform_below_u128(2) < 1;
            if negative && y == BigUint::ZERO {
                continue;
            }
            return (negative, y);
        }
    }

    /// One draw of the discrete Gaussian `N_ℤ(0, σ²)` of `gaussian`,
    /// `P[Y = y] ∝ exp(−y²/(2σ²))` (CKS20 Algorithm 3): a discrete Laplace
    /// proposal of scale `t = ⌊σ⌋ + 1` accepted with probability
    /// `exp(−(|Y| − σ²/t)²/(2σ²))`. With `σ² = num/den`,
    /// `γ = (|Y| t den − num)² / (2 num t² den)` exactly. When the
    /// integers fit machine words ([`DiscreteGaussian::is_word_sized`]) the
    /// same comparisons run on `u128`, a step that would overflow falling
    /// back to big integers (the same exact test, so the same pmf).
    pub(crate) fn discrete_gaussian(&mut self, gaussian: &DiscreteGaussian) -> (bool, BigUint) {
        if let Some(words) = &gaussian.words {
            let (negative, y) = self.discrete_gaussian_words(words);
            return (negative, y.map_or_else(|big| big, BigUint::from));
        }
        self.discrete_gaussian_big(gaussian)
    }

    /// [`Self::discrete_gaussian`] as an `i64` (a magnitude beyond it, far
    /// beyond any accepted scale, is a typed error): the form a stream of
    /// noise vectors uses, without a big-integer allocation per value.
    pub(crate) fn discrete_gaussian_i64(&mut self, gaussian: &DiscreteGaussian) -> Result<i64> {
        let (negative, y) = match &gaussian.words {
            Some(words) => {
                let (negative, y) = self.discrete_gaussian_words(words);
                (negative, y.unwrap_or(u128::MAX))
            }
            None => {
                let (negative, y) = self.discrete_gaussian_big(gaussian);
                (negative, small(&y).unwrap_or(u128::MAX))
            }
        };
        let v = i64::try_from(y).map_err(|_| DpError::InvalidParameter {
            name: "noise draw",
            reason: "magnitude beyond 2^63".into(),
        })?;
        Ok(if negative { -v } else { v })
    }

    fn discrete_gaussian_big(&mut self, gaussian: &DiscreteGaussian) -> (bool, BigUint) {
        let one = BigUint::from(1u8);
        loop {
            let (negative, y) = self.discrete_laplace(&gaussian.t, &one);
            if self.gaussian_accepts_big(gaussian, &y) {
                return (negative, y);
            }
        }
    }

    /// CKS20 Algorithm 3's acceptance test on big integers.
    fn gaussian_accepts_big(&mut self, gaussian: &DiscreteGaussian, y: &BigUint) -> bool {
        let a = y * &gaussian.t_den;
        let diff = if a >= gaussian.num {
            a - &gaussian.num
        } else {
            &gaussian.num - a
        };
        self.bernoulli_exp_neg(&(&diff * &diff), &gaussian.gamma_den)
    }

    /// The machine-word form of [`Self::discrete_gaussian`]: the proposal
    /// is [`Self::discrete_laplace_u128`]'s loop with `den = 1`, the test
    /// `γ = (|Y| t den − num)² / gamma_den` on `u128` whenever it fits.
    /// A magnitude beyond 2¹²⁸ (acceptance probability below
    /// `exp(−2¹²⁷)`, still decided exactly) comes back as `Err`.
    fn discrete_gaussian_words(
        &mut self,
        g: &GaussianWords,
    ) -> (bool, std::result::Result<u128, BigUint>) {
        loop {
            let u = self.uniform_below_u128(g.t);
            if !self.bernoulli_exp_neg_u128(u, g.t) {
                continue;
            }
            let mut v: u128 = 0;
            while self.bernoulli_exp_minus_one() {
                v += 1;
            }
            let negative = self.next_bit();
            let Some(y) = g.t.checked_mul(v).and_then(|x| x.checked_add(u)) else {
                let y = BigUint::from(u) + BigUint::from(g.t) * v;
                if !self.gaussian_accepts_big(&g.big, &y) {
                    continue;
                }
                return (negative, Err(y));
            };
            if negative && y == 0 {
                continue;
            }
            let square = mul_wide(y, g.t_den)
                .map(|a| a.abs_diff(g.num))
                .and_then(|d| mul_wide(d, d))
                .filter(|&sq| sq < 1 << 126);
            let accept = match square {
                Some(sq) => self.bernoulli_exp_neg_u128(sq, g.gamma_den),
                None => self.gaussian_accepts_big(&g.big, &BigUint::from(y)),
            };
            if accept {
                return (negative, Ok(y));
            }
        }
    }

    /// One uniformly random bit.
    fn next_bit(&mut self) -> bool {
        self.take_bits(1) == 1
    }
}

/// The discrete Gaussian `N_ℤ(0, σ²)` with the rational `σ² = num/den`,
/// with the integers of its sampler computed once (CKS20 Algorithm 3).
#[derive(Debug, Clone)]
pub(crate) struct DiscreteGaussian {
    num: BigUint,
    den: BigUint,
    /// The proposal's scale `t = ⌊σ⌋ + 1`.
    t: BigUint,
    /// `t · den`.
    t_den: BigUint,
    /// `2 num t² den`.
    gamma_den: BigUint,
    /// The same integers as machine words, when they fit.
    words: Option<Box<GaussianWords>>,
}

/// [`DiscreteGaussian`]'s integers below 2^126, and the big-integer form
/// for a step that would overflow.
#[derive(Debug, Clone)]
struct GaussianWords {
    num: u128,
    t: u128,
    t_den: u128,
    gamma_den: u128,
    big: DiscreteGaussian,
}

/// The largest `gamma_den` (in bits) of a variance rounded for the
/// machine-word sampler: 6 bits below the words' 126 leave room for
/// proposals up to 8σ before a test falls back to big integers.
const WORD_GAMMA_BITS: u64 = 120;

impl DiscreteGaussian {
    /// For `σ² = num/den` exactly, `num, den > 0`.
    pub(crate) fn new(num: BigUint, den: &BigUint) -> Self {
        // ⌊σ⌋ = ⌊√⌊σ²⌋⌋ since squares of integers are integers.
        let t = (&num / den).sqrt() + 1u8;
        let t_den = &t * den;
        let gamma_den = BigUint::from(2u8) * &num * &t * &t_den;
        let mut gaussian = Self {
            num,
            den: den.clone(),
            t,
            t_den,
            gamma_den,
            words: None,
        };
        if let (Some(num), Some(t), Some(t_den), Some(gamma_den)) = (
            small(&gaussian.num),
            small(&gaussian.t),
            small(&gaussian.t_den),
            small(&gaussian.gamma_den),
        ) {
            gaussian.words = Some(Box::new(GaussianWords {
                num,
                t,
                t_den,
                gamma_den,
                big: gaussian.clone(),
            }));
        }
        gaussian
    }

    /// The discrete Gaussian whose variance is `num/den` rounded *up* to
    /// the finest dyadic rational `⌈σ² 2^m⌉ / 2^m` (`m ≤ 126`) whose
    /// sampler runs on machine words (`2 num t² den` within
    /// [`WORD_GAMMA_BITS`] bits), or `num/den` itself when it already does,
    /// or when no `m ≥ 0` fits (σ beyond about 2^29: the exact big-integer
    /// sampler). More noise than asked, never less (for σ ≥ 1 by a
    /// relative 2⁻⁵⁸ at most); [`Self::variance`] is what is drawn.
    pub(crate) fn rounded_up(num: BigUint, den: &BigUint) -> Self {
        let exact = Self::new(num.clone(), den);
        if exact.gamma_den.bits() <= WORD_GAMMA_BITS {
            return exact;
        }
        // The finest m: from 2^-m below any useful precision down, the
        // first whose sampler fits (a few big-integer products each, once
        // per measurement).
        let mut m = 126u64;
        loop {
            let d = BigUint::from(1u8) << m;
            let candidate = Self::new(ceil_div(&(&num << m), den), &d);
            if candidate.gamma_den.bits() <= WORD_GAMMA_BITS {
                return candidate;
            }
            if m == 0 {
                return exact;
            }
            m -= 1;
        }
    }

    /// Whether draws run on machine words.
    #[cfg(test)]
    pub(crate) fn is_word_sized(&self) -> bool {
        self.words.is_some()
    }

    /// `σ²` as the nearest double (what is drawn).
    pub(crate) fn variance(&self) -> f64 {
        ratio_to_f64(&self.num, &self.den)
    }

    /// Whether `σ² ≥ num/den`.
    #[cfg(test)]
    fn at_least(&self, num: &BigUint, den: &BigUint) -> bool {
        &self.num * den >= num * &self.den
    }
}

/// `a · b` when it fits, with a single widening multiply when both
/// factors fit 64 bits (the common case of the samplers' tests).
#[inline]
fn mul_wide(a: u128, b: u128) -> Option<u128> {
    if (a | b) >> 64 == 0 {
        Some(a * b)
    } else {
        a.checked_mul(b)
    }
}

/// `(⌊n/d⌋, n mod d)` for `d > 0`: the quotient estimated in floating
/// point and corrected exactly (the samplers' quotients are small, and a
/// 128-bit division is far slower than the few multiplications).
#[inline]
fn div_rem(n: u128, d: u128) -> (u128, u128) {
    let estimate = (n as f64 / d as f64) as u128;
    match mul_wide(estimate, d) {
        Some(p) if estimate < 1 << 52 => {
            let (mut q, mut r) = if p <= n {
                (estimate, n - p)
            } else {
                // Over by at most a few units of the estimate's rounding.
                let mut q = estimate;
                let mut p = p;
                while p > n {
                    q -= 1;
                    p -= d;
                }
                (q, n - p)
            };
            while r >= d {
                q += 1;
                r -= d;
            }
            (q, r)
        }
        _ => (n / d, n % d),
    }
}

/// `⌈a/b⌉` for `b > 0`.
fn ceil_div(a: &BigUint, b: &BigUint) -> BigUint {
    (a + b - 1u8) / b
}

/// `num/den` as the nearest double (within one rounding of each integer
/// and the quotient; for reporting only).
fn ratio_to_f64(num: &BigUint, den: &BigUint) -> f64 {
    let shift = num.bits().max(den.bits()).saturating_sub(1000);
    let n: f64 = (num >> shift).to_string().parse().unwrap_or(f64::INFINITY);
    let d: f64 = (den >> shift).to_string().parse().unwrap_or(f64::INFINITY);
    n / d
}

/// `v` as a machine word when below 2^126 (room for the sums above).
fn small(v: &BigUint) -> Option<u128> {
    if v.bits() > 126 {
        return None;
    }
    let mut digits = v.iter_u64_digits();
    let lo = u128::from(digits.next().unwrap_or(0));
    let hi = u128::from(digits.next().unwrap_or(0));
    Some((hi << 64) | lo)
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

    /// Pearson's χ² test of `draws` against the exact pmf `p` (symmetric
    /// on ℤ, normalized by the caller): single bins `−k..=k` and the two
    /// tails `y < −k`, `y > k`, with `k` the largest value whose tail and
    /// whose own bin still expect at least 5 draws, so every bin expects
    /// ≥ 5 (the pmf decreases in |y|). Returns whether the statistic
    /// exceeds the χ² critical value at level 10⁻³ with bins − 1 degrees
    /// of freedom (no fitted parameter).
    fn rejects(draws: &[i128], p: &dyn Fn(i128) -> f64) -> bool {
        let n = draws.len() as f64;
        // P[Y > k] by summing the pmf outward until it is negligible.
        let tail = |k: i128| -> f64 {
            let mut sum = 0.0;
            let mut y = k + 1;
            loop {
                let v = p(y);
                sum += v;
                if v < 1e-18 * sum || y > k + 100_000 {
                    return sum;
                }
                y += 1;
            }
        };
        let mut k = 0;
        while n * tail(k + 1) >= 5.0 && n * p(k + 1) >= 5.0 {
            k += 1;
        }
        assert!(
            n * tail(k) >= 5.0 && n * p(k) >= 5.0,
            "too few draws for a valid test"
        );
        let bins = (2 * k + 3) as usize;
        let mut counts = vec![0f64; bins];
        for &y in draws {
            counts[(y.clamp(-k - 1, k + 1) + k + 1) as usize] += 1.0;
        }
        let t = tail(k);
        let stat: f64 = counts
            .iter()
            .enumerate()
            .map(|(b, &c)| {
                let y = b as i128 - k - 1;
                let e = n * if y.abs() == k + 1 { t } else { p(y) };
                (c - e).powi(2) / e
            })
            .sum();
        let critical = statrs::distribution::ChiSquared::new((bins - 1) as f64)
            .map(|d| statrs::distribution::ContinuousCDF::inverse_cdf(&d, 0.999))
            .unwrap_or(f64::NAN);
        assert!(critical.is_finite());
        stat > critical
    }

    /// 100,000 draws of `draw` from a source seeded by `seed`.
    fn draws(seed: u64, mut draw: impl FnMut(&mut NoiseSource) -> (bool, BigUint)) -> Vec<i128> {
        let mut src = NoiseSource::seeded(seed);
        (0..100_000)
            .map(|_| signed(draw(&mut src)).unwrap())
            .collect()
    }

    fn laplace_draws(t: (u128, u128), seed: u64) -> Vec<i128> {
        let (num, den) = (BigUint::from(t.0), BigUint::from(t.1));
        draws(seed, |src| src.discrete_laplace(&num, &den))
    }

    fn gaussian_draws(s2: (u32, u32), seed: u64) -> Vec<i128> {
        let gaussian = DiscreteGaussian::new(BigUint::from(s2.0), &BigUint::from(s2.1));
        draws(seed, |src| src.discrete_gaussian(&gaussian))
    }

    /// `P[Y = y] = (1−q)/(1+q) q^|y|`, `q = e^{−1/t}`.
    fn laplace_rejects(draws: &[i128], t: f64) -> bool {
        let q = (-1.0 / t).exp();
        rejects(draws, &|y| (1.0 - q) / (1.0 + q) * q.powf(y.abs() as f64))
    }

    /// `P[Y = y] = exp(−y²/(2σ²)) / Σ_z exp(−z²/(2σ²))`, the sum over
    /// `|z| ≤ 40σ + 10` (the rest is below 10⁻³⁰⁰ of it).
    fn gaussian_rejects(draws: &[i128], s2: f64) -> bool {
        let w = |y: i128| (-((y * y) as f64) / (2.0 * s2)).exp();
        let r = (40.0 * s2.sqrt()) as i128 + 10;
        let z: f64 = (-r..=r).map(w).sum();
        rejects(draws, &move |y| w(y) / z)
    }

    #[test]
    fn discrete_laplace_has_the_exact_pmf() {
        assert!(!laplace_rejects(&laplace_draws((3, 2), 2024), 1.5));
        // Power: the same test rejects draws of a 10% wrong scale.
        assert!(laplace_rejects(&laplace_draws((33, 20), 2024), 1.5));
        assert!(!laplace_rejects(&laplace_draws((1, 1), 7), 1.0));
    }

    #[test]
    fn discrete_laplace_big_integer_path_has_the_exact_pmf() {
        // t = 3·2^126 / 2^127 = 1.5 with both integers beyond the machine
        // word path: the big-integer algorithm, same pmf.
        let (num, den) = (BigUint::from(3u8) << 126, BigUint::from(1u8) << 127);
        assert!(small(&num).is_none() && small(&den).is_none());
        let mut src = NoiseSource::seeded(11);
        let draws: Vec<i128> = (0..100_000)
            .map(|_| signed(src.discrete_laplace(&num, &den)).unwrap())
            .collect();
        assert!(!laplace_rejects(&draws, 1.5));
        assert!(laplace_rejects(&draws, 1.65));
    }

    #[test]
    fn discrete_gaussian_has_the_exact_pmf() {
        assert!(!gaussian_rejects(&gaussian_draws((7, 3), 99), 7.0 / 3.0));
        assert!(gaussian_rejects(&gaussian_draws((28, 10), 99), 7.0 / 3.0));
        // σ² = 1/2: bins y ≤ −3, −2…2, y ≥ 3 (the tail expects 6.9 draws).
        let draws = gaussian_draws((1, 2), 5);
        assert!(!gaussian_rejects(&draws, 0.5));
        // Power at the small scale: a 10% larger σ² is rejected, and so are
        // the σ² = 1/2 draws tested against it.
        assert!(gaussian_rejects(&gaussian_draws((11, 20), 5), 0.5));
        assert!(gaussian_rejects(&draws, 0.55));
    }

    #[test]
    fn machine_word_and_big_integer_paths_draw_the_same_pmf() {
        // σ² = 7/3 three ways: small integers (machine words throughout);
        // scaled by 2^59 (words, but the test's square overflows for
        // |Y| ≥ 4 and is finished in big integers); scaled by 2^70 (big
        // integers throughout).
        let s2 = 7.0 / 3.0;
        for (shift, words) in [(0usize, true), (59, true), (70, false)] {
            let num = BigUint::from(7u8) << shift;
            let den = BigUint::from(3u8) << shift;
            let gaussian = DiscreteGaussian::new(num, &den);
            assert_eq!(gaussian.is_word_sized(), words, "shift {shift}");
            let draws = draws(31 + shift as u64, |src| src.discrete_gaussian(&gaussian));
            assert!(!gaussian_rejects(&draws, s2), "shift {shift}");
            assert!(gaussian_rejects(&draws, 1.1 * s2), "shift {shift}");
        }
    }

    #[test]
    fn rounded_up_variance_is_word_sized_and_barely_larger() {
        // Kernel-sized variances: Δ₂² b / (2a) with ρ = 0.1's exact
        // binary fraction (a 2^56 denominator); beyond σ ≈ 19 the exact
        // sampler needs big integers.
        for delta2_sq in [1u64, 3, 1 << 20, 1 << 40] {
            let (a, b) = exact_ratio(0.1).unwrap();
            let num = BigUint::from(delta2_sq) * &b;
            let den = a * 2u8;
            let exact = DiscreteGaussian::new(num.clone(), &den);
            assert_eq!(exact.is_word_sized(), delta2_sq < 1 << 20);
            let rounded = DiscreteGaussian::rounded_up(num.clone(), &den);
            assert!(rounded.is_word_sized(), "Δ₂² = {delta2_sq}");
            assert!(rounded.at_least(&num, &den));
            // The increase: below 2^-58 of σ².
            let excess = &rounded.num * &den - &num * &rounded.den;
            assert!(
                excess << 58usize <= &num * &rounded.den,
                "Δ₂² = {delta2_sq}"
            );
            let want = delta2_sq as f64 / 0.2;
            assert!((rounded.variance() / want - 1.0).abs() < 1e-15);
        }
        // Already word-sized: unchanged.
        let (n, d) = (BigUint::from(7u8), BigUint::from(3u8));
        let same = DiscreteGaussian::rounded_up(n.clone(), &d);
        assert_eq!((same.num, same.den), (n, d));
        // σ = 2^32: no dyadic rounding fits, the exact sampler stays.
        let (n, d) = (BigUint::from(1u8) << 64usize, BigUint::from(1u8));
        assert!(!DiscreteGaussian::rounded_up(n, &d).is_word_sized());
    }

    #[test]
    fn rounded_up_draws_have_the_pmf_of_the_rounded_variance() {
        let (a, b) = exact_ratio(0.37).unwrap();
        let num = BigUint::from(3u8) * b;
        let den = a * 2u8;
        let gaussian = DiscreteGaussian::rounded_up(num, &den);
        assert!(gaussian.is_word_sized());
        let s2 = gaussian.variance();
        let draws = draws(77, |src| src.discrete_gaussian(&gaussian));
        assert!(!gaussian_rejects(&draws, s2));
        assert!(gaussian_rejects(&draws, 1.1 * s2));
        // The i64 form draws the same values from the same bits.
        let mut one = NoiseSource::seeded(5);
        let mut two = NoiseSource::seeded(5);
        for _ in 0..1000 {
            let big = signed(one.discrete_gaussian(&gaussian)).unwrap();
            assert_eq!(
                i128::from(two.discrete_gaussian_i64(&gaussian).unwrap()),
                big
            );
        }
    }

    #[test]
    fn next_bit_is_uniform_and_uses_every_bit() {
        let mut src = NoiseSource::seeded(3);
        let mut reference = ChaCha20Rng::seed_from_u64(3);
        for _ in 0..4 {
            let word = reference.next_u64();
            for i in 0..64 {
                assert_eq!(src.next_bit(), (word >> i) & 1 == 1);
            }
        }
    }

    #[test]
    fn take_bits_reads_the_generator_bit_stream_in_order() {
        // Bits taken k at a time, for k cycling through 1..=64, are the
        // generator's words' bits, least significant first, each once.
        let mut src = NoiseSource::seeded(8);
        let mut reference = ChaCha20Rng::seed_from_u64(8);
        let stream: Vec<bool> = (0..200)
            .flat_map(|_| {
                let w = reference.next_u64();
                (0..64).map(move |i| (w >> i) & 1 == 1)
            })
            .collect();
        let mut at = 0;
        for k in (1..=64u32).chain([64, 1, 63, 2, 64, 64]) {
            let v = src.take_bits(k);
            for i in 0..k {
                assert_eq!((v >> i) & 1 == 1, stream[at], "k = {k}, bit {i}");
                at += 1;
            }
            assert!(k == 64 || v >> k == 0);
        }
    }

    #[test]
    fn word_arithmetic_matches_the_definitions() {
        let values = [
            0u128,
            1,
            2,
            3,
            7,
            (1 << 52) - 1,
            1 << 52,
            (1 << 64) - 1,
            1 << 64,
            (1 << 64) + 1,
            3 << 100,
            (1 << 120) + 12345,
            u128::MAX / 3,
            u128::MAX,
        ];
        for &a in &values {
            for &b in &values {
                assert_eq!(mul_wide(a, b), a.checked_mul(b), "{a} · {b}");
                if b > 0 {
                    assert_eq!(div_rem(a, b), (a / b, a % b), "{a} / {b}");
                }
            }
        }
    }

    #[test]
    fn bernoulli_exp_minus_one_has_probability_one_over_e() {
        let mut src = NoiseSource::seeded(23);
        let trials = 200_000;
        let hits = (0..trials)
            .filter(|_| src.bernoulli_exp_minus_one())
            .count();
        let p = (-1f64).exp();
        let se = (p * (1.0 - p) / f64::from(trials)).sqrt();
        assert!((hits as f64 / f64::from(trials) - p).abs() < 4.5 * se);
    }

    #[test]
    fn lazy_bernoulli_has_the_exact_probability() {
        // Wide denominators (the acceptance test's): the frequency of
        // Bernoulli(num/n) within 4.5 standard errors of num/n, for
        // thresholds on and around the top 64 bits' boundaries.
        let mut src = NoiseSource::seeded(17);
        for n in [
            (1u128 << 120) + (1 << 70) + 12345,
            (1 << 65) + 1,
            1 << 100,
            u128::MAX >> 2,
        ] {
            let low = 64 - (n - 1).leading_zeros();
            for num in [0, 1, n / 3, n / 2 + 1, (n >> low) << low, n - 1, n] {
                let trials = 40_000;
                let hits = (0..trials).filter(|_| src.bernoulli_u128(num, n)).count();
                let p = num as f64 / n as f64;
                let se = (p * (1.0 - p) / f64::from(trials)).sqrt().max(1e-9);
                let freq = hits as f64 / f64::from(trials);
                assert!((freq - p).abs() <= 4.5 * se, "{num}/{n}: {freq} vs {p}");
            }
        }
        // Ties on the top bits: n = 2^64 + 1 has top bits 1 (of 2^63 + 0),
        // so hi = n_hi happens half the time; the exact value decides.
        let n = (1u128 << 64) + 1;
        let mut src = NoiseSource::seeded(3);
        let hits = (0..40_000)
            .filter(|_| src.bernoulli_u128(1 << 64, n))
            .count();
        let p = (1u128 << 64) as f64 / n as f64;
        assert!(hits as f64 / 40_000.0 > p - 4.5 * (p * (1.0 - p) / 40_000.0).sqrt() - 1e-9);
    }

    #[test]
    fn uniform_below_is_uniform() {
        let mut src = NoiseSource::seeded(13);
        for n in [1u128, 2, 3, 5, 7, 64, 100, (1 << 64) + 3] {
            let bins = n.min(100) as usize;
            let mut counts = vec![0f64; bins];
            let draws = 20_000;
            for _ in 0..draws {
                let v = src.uniform_below_u128(n);
                assert!(v < n);
                // Equal-width bins of [0, n) when n > 100.
                counts[(v * bins as u128 / n) as usize] += 1.0;
            }
            if n == 1 {
                continue;
            }
            let e = f64::from(draws) / bins as f64;
            let stat: f64 = counts.iter().map(|c| (c - e).powi(2) / e).sum();
            let critical = statrs::distribution::ChiSquared::new((bins - 1) as f64)
                .map(|d| statrs::distribution::ContinuousCDF::inverse_cdf(&d, 0.999))
                .unwrap();
            assert!(stat < critical, "n = {n}: χ² {stat} ≥ {critical}");
        }
    }

    #[test]
    fn os_source_is_not_seeded() {
        let src = NoiseSource::from_os_entropy().unwrap();
        assert!(!src.is_seeded());
        assert!(NoiseSource::seeded(1).is_seeded());
    }
}
