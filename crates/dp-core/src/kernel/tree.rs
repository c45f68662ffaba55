//! Pure ε continual counting inside the kernel: the `k`-ary tree
//! mechanism with exact discrete Laplace noise.
//!
//! Steps `0..T` are the leaves of a complete `k`-ary tree; a node of level
//! `l` covers the `kˡ` steps `[j kˡ, (j+1) kˡ)`. A node is measured once,
//! when its last step arrives, unless its parent ends at the same step
//! (a last child is never part of a running count) or it ends after the
//! horizon: its exact sum of the steps' counts plus independent discrete
//! Laplace noise of scale `Δ₁/ε` per coordinate. The running count after
//! `n` steps is the sum of the nodes of `n`'s base-`k` digits (`d_l` nodes
//! of level `l`), so it is exactly unbiased and its noise is a sum of
//! `D(n) = Σ d_l` independent draws: variance `D(n) · Var(Z)`, exact.
//! The binary tree (Dwork et al. 2010; Chan, Shi and Song 2011) is `k =
//! 2`; a larger arity trades more draws per running count for fewer levels,
//! hence less noise per draw (Andersson, Pagh, Steiner and Torkamani,
//! FORC 2025, whose negative-digit variant is not built here).
//!
//! # Sensitivity and the charge
//!
//! A step lies in one node of each of the `h = ⌊log_k T⌋ + 1` levels
//! (`kˡ ≤ T`), so a unit that moves one step's counts by at most `L` in L1
//! moves the vector of measured nodes by at most `h L`: exactly `h L` at
//! step 0, whose `h` nodes are all measured. Under `p` participations the
//! kernel takes `p_eff h L` (`p_eff = min(p, ⌊(T−1)/s⌋ + 1)`), the triangle
//! inequality: exact for one participation, an upper bound otherwise. The
//! whole horizon is charged once, at construction, as ε (discrete Laplace
//! of scale `Δ₁/ε` is ε-DP for an integer query of L1 sensitivity `Δ₁`:
//! CKS20), or its `ε²/2` under a zCDP budget.
//!
//! # No refusal depends on the data
//!
//! Once charged, a stream refuses only on what is public (a step past the
//! horizon, counts of another shape). Each step's count is clamped to
//! `[0, 2⁶² / T]` (a contraction: the sensitivity holds) so that every
//! node's exact sum fits 64 bits; a draw too large for 128 bits ends the
//! stream, as a Gaussian stream's does.

use rayon::prelude::*;

use num_bigint::BigUint;

use super::records::StepCounts;
use super::stream::{Contribution, CountsBound, check_participation, check_shape, invalid};
use super::{Cost, Session, discrete_laplace_variance};
use crate::Result;
use crate::sampling::{NoiseSource, exact_ratio, signed};

/// The largest arity.
pub const MAX_ARITY: usize = 64;

/// The largest `levels × dimension` (the state a tree keeps, 24 bytes a
/// value).
pub const MAX_TREE_STATE: usize = 1 << 26;

/// The largest Laplace scale on ℤ (draws beyond `i128` are then
/// impossible in practice): refused before the charge.
const MAX_SCALE: f64 = 1.125_899_906_842_624e15; // 2^50

/// Coordinates per noise stream (each chunk draws on its own core).
const CHUNK: usize = 512;

/// A pure ε stream's public description.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeSpec {
    /// The tree's arity `k` (`2..=`[`MAX_ARITY`]; [`best_arity`] chooses
    /// one).
    pub arity: usize,
    /// Steps to be released, `T`.
    pub horizon: usize,
    /// Length of each step's vector.
    pub dimension: usize,
    /// How many steps one unit may contribute to (`p ≥ 1`).
    pub participations: usize,
    /// The least distance between two of a unit's steps (`≥ 1`).
    pub separation: usize,
    /// What one unit contributes to a step: kernel-made counts
    /// ([`StepCounts::contribution`]).
    pub contribution: Contribution,
}

/// What a tree stream measures with, public.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TreeFigures {
    /// ε charged for the whole horizon.
    pub epsilon: f64,
    /// The L1 sensitivity of the measured nodes over the horizon, in
    /// counts.
    pub sensitivity: f64,
    /// The discrete Laplace scale `Δ₁/ε` of every draw, in counts.
    pub scale: f64,
    /// The exact variance of one draw, in squared counts.
    pub draw_variance: f64,
    /// The arity `k`.
    pub arity: usize,
    /// The levels `h = ⌊log_k T⌋ + 1`.
    pub levels: usize,
    /// Whether the sensitivity is exact (else the triangle inequality's
    /// upper bound).
    pub sensitivity_exact: bool,
}

/// `h = ⌊log_k T⌋ + 1`: the levels whose nodes fit the horizon.
pub fn levels(arity: usize, horizon: usize) -> usize {
    let mut h = 1;
    let mut width = arity;
    while width <= horizon {
        h += 1;
        match width.checked_mul(arity) {
            Some(w) => width = w,
            None => break,
        }
    }
    h
}

/// The base-`k` digit sum of `n`: the draws in the running count after `n`
/// steps.
pub fn draws(arity: usize, mut n: usize) -> usize {
    let mut sum = 0;
    while n > 0 {
        sum += n % arity;
        n /= arity;
    }
    sum
}

/// The most draws in any running count of the horizon, `max_{1≤n≤T} D(n)`:
/// `T`'s digit sum, or, for a nonzero digit of `T`, that digit less one
/// with every lower digit `k − 1`.
pub fn max_draws(arity: usize, horizon: usize) -> usize {
    let mut digits = Vec::new();
    let mut n = horizon;
    while n > 0 {
        digits.push(n % arity);
        n /= arity;
    }
    let mut best: usize = digits.iter().sum();
    for (i, &d) in digits.iter().enumerate() {
        if d > 0 {
            let above: usize = digits[i + 1..].iter().sum();
            best = best.max(above + d - 1 + i * (arity - 1));
        }
    }
    best
}

/// The arity with the smallest largest variance of a running count over
/// `horizon` steps for a Laplace variance proportional to the squared
/// scale (`h² · max D`), the smallest such arity on a tie. At scales near
/// the grid (large ε) the discrete Laplace variance grows more slowly than
/// the scale squared, and the choice is then only close to the best.
pub fn best_arity(horizon: usize) -> usize {
    (2..=MAX_ARITY)
        .min_by_key(|&k| {
            let h = levels(k, horizon);
            (h * h).saturating_mul(max_draws(k, horizon))
        })
        .unwrap_or(2)
}

/// The half-width of a 95% interval for a running count whose noise is
/// the sum of `draws` independent discrete Laplace draws of `scale` on
/// the integers: the release's interval for that law
/// ([`crate::intervals::Interval`]: one draw, its exact quantile; several,
/// the variance-gamma law with the sum's variance and fourth cumulant),
/// rounded up to a whole number. The noise is an integer, so an interval
/// that stops short of the next integer covers only up to the one before:
/// near the grid's scale the continuous law's 95% point can fall just
/// short and cover less (92.7% at scale 1, two draws, unrounded).
pub fn half_width(scale: f64, draws: usize) -> f64 {
    if draws == 0 {
        return 0.0;
    }
    let d = draws as f64;
    let interval = crate::intervals::Interval::new(
        crate::kernel::MeasurementNoise::DiscreteLaplace { scale },
        1.0,
    );
    interval
        .half_width(d, Some(d), discrete_laplace_variance(scale))
        .ceil()
}

/// Everything computed before the charge.
struct TreePlan {
    bound: CountsBound,
    levels: usize,
    /// The discrete Laplace scale on ℤ, `num/den`.
    num: BigUint,
    den: BigUint,
    figures: TreeFigures,
}

impl TreePlan {
    fn new(spec: &TreeSpec, epsilon: f64) -> Result<Self> {
        let epsilon = super::check_epsilon(epsilon)?;
        let TreeSpec {
            arity,
            horizon,
            dimension,
            participations,
            separation,
            contribution,
        } = spec;
        let (arity, horizon, dimension) = (*arity, *horizon, *dimension);
        if !(2..=MAX_ARITY).contains(&arity) {
            return Err(invalid(
                "arity",
                format!("must be in 2..={MAX_ARITY}, got {arity}"),
            ));
        }
        check_shape(horizon, dimension)?;
        let levels = levels(arity, horizon);
        if levels.saturating_mul(dimension) > MAX_TREE_STATE {
            return Err(invalid(
                "dimension",
                format!("levels × dimension must be at most {MAX_TREE_STATE}"),
            ));
        }
        check_participation(*participations, *separation)?;
        let Contribution::Counts(bound) = *contribution else {
            return Err(invalid(
                "contribution",
                "a tree stream measures kernel-made counts",
            ));
        };
        bound.check_participation(*participations, *separation)?;
        if bound.l1() == 0 {
            return Err(invalid("contribution", "must move a step by at least 1"));
        }
        let p_eff = (*participations).min((horizon - 1) / separation + 1) as u64;
        let d1 = BigUint::from(bound.l1()) * p_eff * levels as u64;
        let sensitivity = super::to_f64(&d1);
        // t = Δ₁/ε exactly: ε = a/b ⇒ t = Δ₁ b / a.
        let (a, b) = exact_ratio(epsilon)?;
        let scale = sensitivity / epsilon;
        if !scale.is_finite() || scale > MAX_SCALE {
            return Err(invalid(
                "privacy",
                "the noise would exceed a scale of 2^50 counts: ε too small for this \
                 sensitivity",
            ));
        }
        Ok(Self {
            bound,
            levels,
            num: d1 * b,
            den: a,
            figures: TreeFigures {
                epsilon,
                sensitivity,
                scale,
                draw_variance: discrete_laplace_variance(scale),
                arity,
                levels,
                sensitivity_exact: p_eff == 1,
            },
        })
    }
}

impl TreeSpec {
    /// The figures a tree stream of this spec would be measured with at
    /// `epsilon`, validated as [`Session::stream_tree`] does, charging
    /// nothing.
    pub fn figures(&self, epsilon: f64) -> Result<TreeFigures> {
        Ok(TreePlan::new(self, epsilon)?.figures)
    }
}

impl Session {
    /// Charges `cost` (`Cost::Epsilon`) for the whole horizon of `spec`
    /// and returns the tree stream that releases its running counts step
    /// by step. Everything is validated before the charge; a refusal
    /// spends nothing.
    pub fn stream_tree(&mut self, spec: &TreeSpec, cost: Cost) -> Result<TreeStream> {
        let Cost::Epsilon(epsilon) = cost else {
            return Err(invalid(
                "cost",
                "a tree stream is measured with Laplace noise: give ε",
            ));
        };
        let plan = TreePlan::new(spec, epsilon)?;
        self.charge(cost)?;
        let levels = plan.levels;
        let chunks = (0..spec.dimension.div_ceil(CHUNK))
            .map(|c| {
                let len = CHUNK.min(spec.dimension - c * CHUNK);
                Chunk {
                    exact: vec![0; levels * len],
                    noisy: vec![0; levels * len],
                    source: self.noise.split(),
                }
            })
            .collect();
        Ok(TreeStream {
            counts_id: None,
            arity: spec.arity,
            levels,
            horizon: spec.horizon,
            dimension: spec.dimension,
            cap: (1i64 << 62) / spec.horizon as i64,
            step: 0,
            bound: plan.bound,
            num: plan.num,
            den: plan.den,
            figures: plan.figures,
            chunks,
        })
    }
}

/// One chunk of coordinates: per level, the exact sum of the node under
/// way and the noisy sums of the measured nodes the running count uses.
struct Chunk {
    exact: Vec<i64>,
    noisy: Vec<i128>,
    source: NoiseSource,
}

/// The pure ε stream: created by [`Session::stream_tree`] (which charges
/// the whole horizon), then fed one step at a time. Not `Clone`: a copy
/// would replay its noise.
pub struct TreeStream {
    /// The counts it measures, once the first step is released.
    counts_id: Option<u64>,
    arity: usize,
    levels: usize,
    horizon: usize,
    dimension: usize,
    cap: i64,
    step: usize,
    bound: CountsBound,
    num: BigUint,
    den: BigUint,
    figures: TreeFigures,
    chunks: Vec<Chunk>,
}

impl std::fmt::Debug for TreeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeStream")
            .field("figures", &self.figures)
            .field("horizon", &self.horizon)
            .field("dimension", &self.dimension)
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

impl TreeStream {
    /// The figures the stream is measured with.
    pub fn figures(&self) -> TreeFigures {
        self.figures
    }

    /// Steps released so far (the index of the next step).
    pub fn step(&self) -> usize {
        self.step
    }

    /// The declared horizon.
    pub fn horizon(&self) -> usize {
        self.horizon
    }

    /// The draws in the last running count released (`D(n)` after `n`
    /// steps) and its exact variance, `D(n) · Var(Z)`, in squared counts.
    pub fn variance(&self) -> (usize, f64) {
        let d = draws(self.arity, self.step);
        (d, d as f64 * self.figures.draw_variance)
    }

    /// The half-width of the 95% interval of the last running count
    /// released ([`half_width`]).
    pub fn half_width(&self) -> f64 {
        half_width(self.figures.scale, draws(self.arity, self.step))
    }

    /// Releases the running counts after the next step of the kernel-made
    /// `counts` the stream was specified for: every coordinate's count
    /// over steps `0..=t` plus the noise of the nodes that make it up.
    /// Counts of another bound, width or horizon are refused.
    pub fn next_counts(&mut self, counts: &StepCounts) -> Result<Vec<f64>> {
        let row = counts.row_for(
            self.bound,
            self.dimension,
            self.horizon,
            self.step,
            &mut self.counts_id,
        )?;
        self.next_count_slice(row)
    }

    /// Releases the next step of counts, trusted to move by at most the
    /// stream's bound (the kernel's own tests).
    pub(crate) fn next_count_slice(&mut self, counts: &[i64]) -> Result<Vec<f64>> {
        if self.step >= self.horizon {
            return Err(invalid(
                "step",
                format!(
                    "the horizon of {} steps is spent: a new stream (and charge) is needed",
                    self.horizon
                ),
            ));
        }
        if counts.len() != self.dimension {
            return Err(invalid(
                "step",
                format!(
                    "{} values for a stream of dimension {}",
                    counts.len(),
                    self.dimension
                ),
            ));
        }
        let n = self.step + 1;
        // The levels whose node ends at this step: l < `closing` (kˡ | n).
        let mut closing = 1;
        let mut width = self.arity;
        while closing < self.levels && n.is_multiple_of(width) {
            closing += 1;
            width = width.saturating_mul(self.arity);
        }
        let (levels, cap) = (self.levels, self.cap);
        let (num, den) = (&self.num, &self.den);
        let mut out = vec![0.0; self.dimension];
        let drawn = out
            .par_chunks_mut(CHUNK)
            .zip(self.chunks.par_iter_mut())
            .enumerate()
            .try_for_each(|(c, (out, chunk))| -> Result<()> {
                let len = out.len();
                let row = &counts[c * CHUNK..c * CHUNK + len];
                for (i, o) in out.iter_mut().enumerate() {
                    // Clamping is a contraction: the sensitivity holds,
                    // and a node's sum of at most T steps fits i64.
                    let x = row[i].clamp(0, cap);
                    let mut running: i128 = 0;
                    for l in 0..levels {
                        let at = l * len + i;
                        chunk.exact[at] += x;
                        if l + 1 < closing {
                            // The node's parent closes too: the node is
                            // never part of a running count (the parent
                            // covers it from now on), so it is not
                            // measured, and its siblings leave the count.
                            chunk.exact[at] = 0;
                            chunk.noisy[at] = 0;
                        } else if l < closing {
                            let z = signed(chunk.source.discrete_laplace(num, den))?;
                            let node = i128::from(chunk.exact[at])
                                .checked_add(z)
                                .ok_or_else(|| invalid("measurement", "a draw beyond 2^127"))?;
                            chunk.exact[at] = 0;
                            chunk.noisy[at] = chunk.noisy[at].saturating_add(node);
                        }
                        running = running.saturating_add(chunk.noisy[at]);
                    }
                    *o = running as f64;
                }
                Ok(())
            });
        if let Err(e) = drawn {
            // Retrying the step would measure it twice with fresh noise.
            self.step = self.horizon;
            return Err(e);
        }
        self.step += 1;
        Ok(out)
    }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
