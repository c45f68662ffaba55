//! The workload generators of the LRM (Yuan et al., VLDB 2012, §6) and COA
//! (Yuan et al., KDD 2016, §5) experiments, each seeded so that a run is
//! reproducible from its printed seed.

use dp_core::{DpError, Result};
use dp_linalg::{Mat, Par};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::workload::ExplicitWorkload;

fn check_sizes(m: usize, n: usize) -> Result<()> {
    if m == 0 || n == 0 {
        return Err(DpError::InvalidParameter {
            name: "workload size",
            reason: format!("need m >= 1 and n >= 1, got m = {m}, n = {n}"),
        });
    }
    Ok(())
}

/// How WDiscrete draws its entries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DiscreteEntries {
    /// LRM paper, §6: "for each weight W_ij … we randomly select W_ij = 1
    /// with probability 0.02 and set W_ij = −1 otherwise". The COA paper
    /// states that it follows these settings ("each entry is a random
    /// variable \[that\] follows the bernoulli distribution"), so this is the
    /// default for both reproductions.
    PlusMinusOne {
        /// Probability of +1 (the paper: 0.02).
        p_plus: f64,
    },
    /// A 0/1 Bernoulli reading of the COA paper's sentence: 1 with
    /// probability `p`, 0 otherwise (sparse predicate queries).
    ZeroOne {
        /// Probability of 1.
        p: f64,
    },
}

impl DiscreteEntries {
    /// The LRM paper's setting: +1 with probability 0.02, −1 otherwise.
    pub const LRM: Self = Self::PlusMinusOne { p_plus: 0.02 };
}

/// WDiscrete: `m` queries whose weights are drawn independently.
pub fn wdiscrete(
    m: usize,
    n: usize,
    entries: DiscreteEntries,
    seed: u64,
) -> Result<ExplicitWorkload> {
    check_sizes(m, n)?;
    let p = match entries {
        DiscreteEntries::PlusMinusOne { p_plus } => p_plus,
        DiscreteEntries::ZeroOne { p } => p,
    };
    if !(0.0..=1.0).contains(&p) {
        return Err(DpError::InvalidParameter {
            name: "WDiscrete probability",
            reason: format!("must be in [0, 1], got {p}"),
        });
    }
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut w = Mat::zeros(m, n);
    for i in 0..m {
        for j in 0..n {
            let hit = rng.random_bool(p);
            w[(i, j)] = match entries {
                DiscreteEntries::PlusMinusOne { .. } => {
                    if hit {
                        1.0
                    } else {
                        -1.0
                    }
                }
                DiscreteEntries::ZeroOne { .. } => f64::from(u8::from(hit)),
            };
        }
    }
    // A 0/1 draw can be all zero for tiny m·n·p: the empty workload asks nothing.
    ExplicitWorkload::new(format!("WDiscrete({m}x{n}, {entries:?}, seed {seed})"), w)
}

/// WRange: `m` range queries `[a, b]` with a and b drawn uniformly from
/// the domain (swapped when a > b), weight 1 on every cell of the range
/// (LRM paper §6; COA paper §5). The expected width is
/// E|a − b| + 1 = (n² − 1)/(3n) + 1 ≈ n/3.
pub fn wrange(m: usize, n: usize, seed: u64) -> Result<ExplicitWorkload> {
    check_sizes(m, n)?;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut w = Mat::zeros(m, n);
    for i in 0..m {
        let a = rng.random_range(0..n);
        let b = rng.random_range(0..n);
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        for j in lo..=hi {
            w[(i, j)] = 1.0;
        }
    }
    ExplicitWorkload::new(format!("WRange({m}x{n}, seed {seed})"), w)
}

/// WMarginal (COA paper §5: "queries uniformly sampled from the set of
/// all two way marginals"). The paper does not say how the 1-D domain is
/// viewed as attributes; dpmm uses the natural view: `n = 2^d` cells are
/// the joint domain of `d` binary attributes (the bits of the cell index,
/// most significant first). Each query draws a pair of attributes i < j
/// and a value pair (a, b) ∈ {0,1}² uniformly and counts the cells whose
/// bits i and j equal (a, b): a two-way marginal cell. Requires n = 2^d,
/// d ≥ 2. Its rank is at most 1 + d + d(d−1)/2.
pub fn wmarginal(m: usize, n: usize, seed: u64) -> Result<ExplicitWorkload> {
    check_sizes(m, n)?;
    if !n.is_power_of_two() || n < 4 {
        return Err(DpError::InvalidParameter {
            name: "WMarginal domain size",
            reason: format!("needs n = 2^d with d >= 2 binary attributes, got n = {n}"),
        });
    }
    let d = n.trailing_zeros() as usize;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut w = Mat::zeros(m, n);
    for q in 0..m {
        let i = rng.random_range(0..d);
        let mut j = rng.random_range(0..d - 1);
        if j >= i {
            j += 1;
        }
        let a = rng.random_range(0..2usize);
        let b = rng.random_range(0..2usize);
        let (bit_i, bit_j) = (d - 1 - i, d - 1 - j);
        for cell in 0..n {
            if (cell >> bit_i) & 1 == a && (cell >> bit_j) & 1 == b {
                w[(q, cell)] = 1.0;
            }
        }
    }
    ExplicitWorkload::new(format!("WMarginal({m}x{n}, seed {seed})"), w)
}

/// WRelated (LRM paper §6): `W = C A` with base queries `A` (s×n) and
/// correlations `C` (m×s), all entries i.i.d. standard normal, so W has
/// rank s (with probability one, for s ≤ min(m, n)).
pub fn wrelated(m: usize, n: usize, s: usize, seed: u64) -> Result<ExplicitWorkload> {
    check_sizes(m, n)?;
    if s == 0 || s > m.min(n) {
        return Err(DpError::InvalidParameter {
            name: "WRelated rank s",
            reason: format!("must be in 1..=min(m, n) = {}, got {s}", m.min(n)),
        });
    }
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut normal = || -> f64 { StandardNormal.sample(&mut rng) };
    let base = Mat::from_fn(s, n, |_, _| normal());
    let corr = Mat::from_fn(m, s, |_, _| normal());
    let w = dp_linalg::matmul(corr.as_ref(), base.as_ref(), Par::rayon(0))?;
    ExplicitWorkload::new(format!("WRelated({m}x{n}, s = {s}, seed {seed})"), w)
}
