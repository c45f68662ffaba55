//! Continual release inside the kernel: the streaming matrix mechanism
//! with a banded lower-triangular Toeplitz strategy `C` (Choquette-Choo et
//! al., ICML 2023; McKenna, ICLR 2025).
//!
//! At step `t` the data `x_t ∈ ℝ^dim` (the sum of the step's
//! contributions) arrives; the kernel measures `u_t = (C x)_t + z_t` with
//! exact discrete Gaussian `z_t`, and hands back `x̂_t = (C⁻¹ u)_t =
//! x_t + (C⁻¹ z)_t`, whose running sums are the private running sums
//! (DP-FTRL's noisy prefix sums of gradients). Only `u` touches the data;
//! `C⁻¹` is post-processing.
//!
//! # Why the data meets the noise here
//!
//! Exact lattice noise added to real-valued data is not private: `Cx + z`
//! with `z` on a lattice reveals `Cx` modulo the lattice. So the kernel
//! puts the data on the lattice itself and computes `C x` exactly:
//!
//! - `C` is quantized to integers: `c̃_k = m_k / 2^P` with `m_0 = 2^P`
//!   (`c_0` normalized to 1), `m_k = round(c_k/c_0 · 2^P)`. Everything
//!   reported (sensitivity, variances) is for the quantized `C̃`, the
//!   strategy actually measured.
//! - Counts ([`Contribution::Counts`]) are integers already. Real vectors
//!   ([`Contribution::Clipped`]) are clipped one by one to L2 norm `L`,
//!   rounded to the lattice `γℤ^dim` with `γ = L/2^q` (nearest, then
//!   coordinates moved toward zero until `Σ X_i² ≤ 4^q` holds exactly on
//!   integers), and summed exactly.
//! - `(C̃ X)_t = Σ_{k<b} m_k X_{t−k}` is an exact integer: memory is the
//!   last `b` steps' data and the last `b − 1` outputs, `O(b · dim)`,
//!   independent of the horizon.
//!
//! # Sensitivity and the charge
//!
//! One individual changes one step's `X` by a vector of squared norm at
//! most `M²` (`M = 2^q` for clipped vectors, the declared bound for
//! counts), so a column of `C̃ X` moves by at most `M² Σ_{k<min(b,T)} m_k²`
//! — exactly, on integers. Under `k` participations at least `s ≥ b` steps
//! apart the columns' supports are disjoint and the squared sensitivity is
//! the sum of the `k_eff = min(k, ⌊(T−1)/s⌋ + 1)` earliest columns' (steps
//! `0, s, 2s, …`; later columns are truncated by the horizon); with `s < b` the
//! kernel uses the triangle inequality, `k_eff² M² Σ m_k²` (sound, not
//! tight: choose `b ≤ s`). The whole horizon is charged once, at
//! construction, `ρ` for `σ² ≥ Δ²/(2ρ)` (CKS20 Theorem 14, composed over
//! the horizon's steps as one Gaussian mechanism on the stacked vector).

//!
//! # No refusal depends on the data
//!
//! Once charged, a stream refuses only on what is public (a step past the
//! horizon, a vector of the wrong length): a refusal that depended on the
//! values would answer a question about them without noise. A row that is
//! not finite contributes nothing; each coordinate of a step's integer
//! data is clamped to a cap that keeps `C̃X` within `i128` (clamping is a
//! contraction, so the sensitivity holds). Parameters whose noise would
//! exceed 2⁵⁰ lattice steps a draw are refused before the charge.

use num_bigint::BigUint;
use rayon::prelude::*;

use super::{Cost, Session};
use crate::sampling::{DiscreteGaussian, NoiseSource, exact_ratio};
use crate::{DpError, Result};

/// The longest horizon a stream accepts.
pub const MAX_HORIZON: usize = 1 << 30;
/// The largest number of coefficients (bands) of `C`.
pub const MAX_BANDS: usize = 4096;
/// The largest dimension of one step's vector.
pub const MAX_DIMENSION: usize = 1 << 26;
/// The largest `bands × dimension` (the state the mechanism keeps).
pub const MAX_STATE: usize = 1 << 28;
/// `q`: clipped vectors are rounded to the lattice `(L / 2^q) ℤ^dim`.
pub const CLIP_LATTICE_BITS: u32 = 14;

/// The largest variance of a draw on the measurement's lattice (σ = 2^50):
/// beyond it a draw could leave `i64`; refused before the charge.
const MAX_LATTICE_VARIANCE: f64 = 1.2676506002282294e30;

/// The clipping norms accepted (the lattice step `L/2^q` stays a normal
/// double).
const CLIP_NORM_RANGE: (f64, f64) = (1e-100, 1e100);

/// Coordinates per noise stream: each chunk of a step draws from its own
/// stream, so a step's noise is drawn on every core.
const CHUNK: usize = 512;

/// What one individual contributes to one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Contribution {
    /// A real vector clipped by the kernel to L2 norm at most `norm`
    /// (DP-FTRL's per-example gradients): passed to
    /// [`StreamMechanism::next_clipped`].
    Clipped {
        /// The clipping norm `L > 0`.
        norm: f64,
    },
    /// Counts the kernel made from records
    /// ([`super::records::StepCounts::contribution`]), passed to
    /// [`StreamMechanism::next_counts`] as those same counts: the bound is
    /// derived by the kernel from the tables it counted, never stated by a
    /// caller.
    Counts(CountsBound),
}

/// How far one unit moves a stream of kernel-made counts: one record is
/// one cell of each of `tables` marginal tables; a unit contributes at
/// most `scale` records' worth to a step, and to at most `participations`
/// steps pairwise at least `separation` apart (one record, one step,
/// without a privacy unit). Only the kernel makes one
/// ([`super::records::StepCounts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountsBound {
    tables: u64,
    scale: u64,
    participations: usize,
    separation: usize,
}

impl CountsBound {
    /// One record in `tables` tables, one record a unit.
    pub(crate) fn new(tables: u64) -> Self {
        Self::of_units(tables, 1, 1, 1)
    }

    /// A unit of at most `scale` records a step in `participations` steps
    /// at least `separation` apart.
    pub(crate) fn of_units(
        tables: u64,
        scale: u64,
        participations: usize,
        separation: usize,
    ) -> Self {
        Self {
            tables,
            scale,
            participations,
            separation,
        }
    }

    /// The bound on the squared L2 change of one step, `scale² · tables`
    /// (a unit's records may all fall in the same cells).
    pub fn squared_norm(&self) -> u64 {
        self.scale
            .saturating_mul(self.scale)
            .saturating_mul(self.tables)
    }

    /// The bound on the L1 change of one step, `scale · tables`.
    pub fn l1(&self) -> u64 {
        self.scale.saturating_mul(self.tables)
    }

    /// The most steps one unit contributes to: a stream of these counts is
    /// specified with this many participations.
    pub fn participations(&self) -> usize {
        self.participations
    }

    /// The least distance between two of a unit's steps: a stream of
    /// these counts is specified with this separation.
    pub fn separation(&self) -> usize {
        self.separation
    }

    /// Refuses a stream specified with another participation than the
    /// counts were bounded for.
    pub(crate) fn check_participation(
        &self,
        participations: usize,
        separation: usize,
    ) -> Result<()> {
        if (participations, separation) != (self.participations, self.separation) {
            return Err(invalid(
                "participation",
                format!(
                    "the counts were bounded to {} steps at least {} apart a unit: specify the \
                     stream with those",
                    self.participations, self.separation
                ),
            ));
        }
        Ok(())
    }
}

/// A stream's public description: the strategy, horizon and participation.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSpec {
    /// The first column of the banded lower-triangular Toeplitz `C`
    /// (`c_0 > 0`, at most [`MAX_BANDS`] entries).
    pub coefficients: Vec<f64>,
    /// Steps to be released, `T`.
    pub horizon: usize,
    /// Length of each step's vector.
    pub dimension: usize,
    /// How many steps one individual may contribute to (`k ≥ 1`).
    pub participations: usize,
    /// The least distance between two of an individual's steps (`≥ 1`;
    /// ignored for a single participation).
    pub separation: usize,
    /// What one individual contributes to a step.
    pub contribution: Contribution,
}

/// The streaming mechanism: created by [`Session::stream`] (which charges
/// the whole horizon), then fed one step at a time. Not `Clone`: a copy
/// would replay its noise.
#[derive(Debug)]
pub struct StreamMechanism {
    /// The counts it measures, once the first step is released.
    counts_id: Option<u64>,
    dimension: usize,
    horizon: usize,
    step: usize,
    contribution: Contribution,
    /// `m_k`, `m_0 = 2^P`.
    m: Vec<i64>,
    /// Each coordinate of a step's integer data is clamped to `±input_cap`,
    /// so that `Σ |m_k| · input_cap + 2^63 < 2^127`.
    input_cap: i64,
    /// `c̃_k = m_k / 2^P`.
    c: Vec<f64>,
    /// `2^−P · unit`: one lattice step of the measurement in data units.
    out_unit: f64,
    /// The last `b` steps' integer data, `x_hist[(step − k) mod b]`.
    x_hist: Vec<Vec<i64>>,
    /// The last `b − 1` outputs (in lattice units of the measurement).
    y_hist: Vec<Vec<f64>>,
    gaussian: DiscreteGaussian,
    sources: Vec<NoiseSource>,
    figures: StreamFigures,
    /// `c̃⁻¹`'s last `b − 1` coefficients (ring) for the variances.
    inverse_tail: Vec<f64>,
    inverse_sq_sum: f64,
    inverse_prefix: f64,
    prefix_sq_sum: f64,
}

/// What a stream measures with, public.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct StreamFigures {
    /// `ρ` charged for the whole horizon.
    pub rho: f64,
    /// The L2 sensitivity of `C̃ x` over the horizon, in data units.
    pub sensitivity: f64,
    /// `σ` of each coordinate of `z`, in data units (the variance drawn,
    /// rounded up from `Δ²/(2ρ)`).
    pub sigma: f64,
    /// `P`: `C` is quantized to multiples of `2^−P`.
    pub coefficient_bits: u32,
    /// Whether the squared sensitivity is exact (else the triangle
    /// inequality's upper bound).
    pub sensitivity_exact: bool,
}

impl Session {
    /// Charges `cost` (`Cost::Rho`) for the whole horizon of `spec` and
    /// returns the mechanism that releases it step by step. Everything is
    /// validated, and the noise calibrated, before the charge; a refusal
    /// spends nothing.
    pub fn stream(&mut self, spec: &StreamSpec, cost: Cost) -> Result<StreamMechanism> {
        let rho = match cost {
            Cost::Rho(rho) => rho,
            Cost::Epsilon(_) => {
                return Err(DpError::InvalidParameter {
                    name: "cost",
                    reason: "a stream is measured with Gaussian noise: give ρ (or ε and δ)".into(),
                });
            }
        };
        let plan = StreamPlan::new(spec, rho)?;
        self.charge(cost)?;
        let sources = (0..spec.dimension.div_ceil(CHUNK))
            .map(|_| self.noise.split())
            .collect();
        Ok(plan.into_mechanism(spec, sources))
    }
}

impl StreamSpec {
    /// The figures a stream of this spec would be measured with at `ρ`,
    /// validated exactly as [`Session::stream`] does, charging nothing: for
    /// a caller that must refuse before it charges a ledger.
    pub fn figures(&self, rho: f64) -> Result<StreamFigures> {
        Ok(StreamPlan::new(self, rho)?.figures)
    }
}

/// A stream's horizon and width, in the ranges the kernel takes (both
/// streams, before the charge).
pub(crate) fn check_shape(horizon: usize, dimension: usize) -> Result<()> {
    if horizon == 0 || horizon > MAX_HORIZON {
        return Err(invalid(
            "horizon",
            format!("must be in 1..={MAX_HORIZON}, got {horizon}"),
        ));
    }
    if dimension == 0 || dimension > MAX_DIMENSION {
        return Err(invalid(
            "dimension",
            format!("must be in 1..={MAX_DIMENSION}, got {dimension}"),
        ));
    }
    Ok(())
}

/// A stream's participations and separation, each at least 1.
pub(crate) fn check_participation(participations: usize, separation: usize) -> Result<()> {
    if participations == 0 || separation == 0 {
        return Err(invalid(
            "participation",
            "participations and separation must be at least 1",
        ));
    }
    Ok(())
}

pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> DpError {
    DpError::InvalidParameter {
        name,
        reason: reason.into(),
    }
}

/// Everything computed before the charge.
struct StreamPlan {
    m: Vec<i64>,
    input_cap: i64,
    bits: u32,
    data_unit: f64,
    gaussian: DiscreteGaussian,
    figures: StreamFigures,
}

impl StreamPlan {
    fn new(spec: &StreamSpec, rho: f64) -> Result<Self> {
        let rho = super::check_rho(rho)?;
        let StreamSpec {
            coefficients: c,
            horizon,
            dimension,
            participations,
            separation,
            contribution,
        } = spec;
        let (horizon, dimension) = (*horizon, *dimension);
        check_shape(horizon, dimension)?;
        if c.is_empty() || c.len() > MAX_BANDS {
            return Err(invalid(
                "coefficients",
                format!("need 1..={MAX_BANDS} bands, got {}", c.len()),
            ));
        }
        if c.len().saturating_mul(dimension) > MAX_STATE {
            return Err(invalid(
                "coefficients",
                format!("bands × dimension must be at most {MAX_STATE}"),
            ));
        }
        if !c.iter().all(|v| v.is_finite()) || c[0] <= 0.0 {
            return Err(invalid(
                "coefficients",
                "must be finite with a positive first coefficient",
            ));
        }
        check_participation(*participations, *separation)?;
        let m_sq = match *contribution {
            Contribution::Clipped { norm } => {
                if !(CLIP_NORM_RANGE.0..=CLIP_NORM_RANGE.1).contains(&norm) {
                    return Err(invalid(
                        "clip norm",
                        format!("must be in [1e-100, 1e100], got {norm}"),
                    ));
                }
                BigUint::from(1u8) << (2 * CLIP_LATTICE_BITS)
            }
            Contribution::Counts(bound) => {
                bound.check_participation(*participations, *separation)?;
                let squared_norm = bound.squared_norm();
                if squared_norm == 0 {
                    return Err(invalid("squared norm", "must be at least 1"));
                }
                BigUint::from(squared_norm)
            }
        };
        let data_unit = match *contribution {
            Contribution::Clipped { norm } => norm / f64::from(1u32 << CLIP_LATTICE_BITS),
            Contribution::Counts(_) => 1.0,
        };
        // k_eff participations fit in the horizon.
        let k_eff = (*participations).min((horizon - 1) / separation + 1) as u64;
        let disjoint = k_eff == 1 || *separation >= c.len();
        let k_factor = if disjoint { k_eff } else { k_eff * k_eff };
        // σ in data units (before quantization), to put σ on the lattice
        // near 2^26: fine enough that the quantization of C is far below
        // the noise, small enough for the machine-word sampler.
        let used = c.len().min(horizon);
        let norm: f64 = c[..used]
            .iter()
            .map(|v| (v / c[0]).powi(2))
            .sum::<f64>()
            .sqrt();
        let m_f = m_sq.to_string().parse::<f64>().unwrap_or(f64::MAX);
        let sigma_unit = (m_f * k_factor as f64).sqrt() * norm / (2.0 * rho).sqrt();
        let bits = (26.0 - sigma_unit.log2()).floor().clamp(8.0, 30.0) as u32;
        let scale = f64::from(1u32 << bits);
        let mut m = Vec::with_capacity(used);
        for v in &c[..used] {
            let q = (v / c[0] * scale).round();
            if q.abs() >= 2f64.powi(62) {
                return Err(invalid(
                    "coefficients",
                    "a coefficient is beyond 2^(62−P) times the first",
                ));
            }
            m.push(q as i64);
        }
        m[0] = 1 << bits;
        // Column j of C̃ has Σ_{k<min(b, T−j)} m_k²: prefix sums of m_k².
        let mut column = Vec::with_capacity(used + 1);
        column.push(BigUint::ZERO);
        for &v in &m {
            let next = column[column.len() - 1].clone() + BigUint::from(v.unsigned_abs()).pow(2);
            column.push(next);
        }
        let full = &column[used];
        let sum_m2 = if disjoint {
            // Columns are nonincreasing in j, so the best pattern is the
            // earliest: steps 0, s, 2s, …, their supports disjoint.
            (0..k_eff as usize).fold(BigUint::ZERO, |acc, i| {
                acc + &column[c.len().min(horizon - i * separation)]
            })
        } else {
            full * k_factor
        };
        let delta_sq = sum_m2 * m_sq;
        let abs_sum: u128 = m.iter().map(|&v| u128::from(v.unsigned_abs())).sum();
        let input_cap =
            i64::try_from(((1u128 << 126) / abs_sum.max(1)).min(1 << 62)).unwrap_or(1 << 62);
        // σ² = Δ² / (2ρ) rounded up: ρ = a/b ⇒ Δ² b / (2a).
        let (a, b) = exact_ratio(rho)?;
        let gaussian = DiscreteGaussian::rounded_up(&delta_sq * b, &(a * 2u8));
        let out_unit = data_unit / scale;
        let delta = super::to_f64(&delta_sq).sqrt();
        let figures = StreamFigures {
            rho,
            sensitivity: delta * out_unit,
            sigma: gaussian.variance().sqrt() * out_unit,
            coefficient_bits: bits,
            sensitivity_exact: disjoint,
        };
        if gaussian.variance() > MAX_LATTICE_VARIANCE {
            return Err(invalid(
                "privacy",
                "the noise would exceed 2^50 lattice steps per draw: ρ too small for this \
                 sensitivity (more participations, larger coefficients)",
            ));
        }
        Ok(Self {
            m,
            input_cap,
            bits,
            data_unit,
            gaussian,
            figures,
        })
    }

    fn into_mechanism(self, spec: &StreamSpec, sources: Vec<NoiseSource>) -> StreamMechanism {
        let b = self.m.len();
        let scale = f64::from(1u32 << self.bits);
        StreamMechanism {
            counts_id: None,
            dimension: spec.dimension,
            horizon: spec.horizon,
            step: 0,
            contribution: spec.contribution,
            c: self.m.iter().map(|&v| v as f64 / scale).collect(),
            input_cap: self.input_cap,
            m: self.m,
            out_unit: self.data_unit / scale,
            x_hist: vec![vec![0; spec.dimension]; b],
            y_hist: vec![vec![0.0; spec.dimension]; b - 1],
            gaussian: self.gaussian,
            sources,
            figures: self.figures,
            inverse_tail: vec![0.0; b - 1],
            inverse_sq_sum: 0.0,
            inverse_prefix: 0.0,
            prefix_sq_sum: 0.0,
        }
    }
}

impl StreamMechanism {
    /// The figures the stream is measured with.
    pub fn figures(&self) -> StreamFigures {
        self.figures
    }

    /// The quantized strategy actually measured, `c̃_k = m_k / 2^P`.
    pub fn coefficients(&self) -> &[f64] {
        &self.c
    }

    /// Steps released so far (the index of the next step).
    pub fn step(&self) -> usize {
        self.step
    }

    /// The declared horizon.
    pub fn horizon(&self) -> usize {
        self.horizon
    }

    /// The dimension of each step's vector.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// The variance of each coordinate of the last step's `x̂_t` around
    /// `x_t`, and of its running sum `Σ_{s≤t} x̂_s` around `Σ_{s≤t} x_s`,
    /// in squared data units: `σ² Σ_{j≤t} (c̃⁻¹)_j²` and `σ² Σ_{i≤t}
    /// (Σ_{j≤i} (c̃⁻¹)_j)²` (the noise is `C̃⁻¹ z`). `(0, 0)` before the
    /// first step.
    pub fn variances(&self) -> (f64, f64) {
        let s2 = self.figures.sigma * self.figures.sigma;
        (s2 * self.inverse_sq_sum, s2 * self.prefix_sq_sum)
    }

    /// Releases the next step of the kernel-made `counts` the stream was
    /// specified for ([`super::records::StepCounts::contribution`]):
    /// returns `x̂_t = x_t + (C̃⁻¹ z)_t`. Counts of another bound, width or
    /// horizon are refused.
    pub fn next_counts(&mut self, counts: &super::records::StepCounts) -> Result<Vec<f64>> {
        let Contribution::Counts(bound) = self.contribution else {
            return Err(invalid(
                "contribution",
                "this stream takes clipped vectors (next_clipped)",
            ));
        };
        let row = counts.row_for(
            bound,
            self.dimension,
            self.horizon,
            self.step,
            &mut self.counts_id,
        )?;
        self.next_count_slice(row)
    }

    /// Releases the next step of integer counts, trusted to move by at
    /// most the stream's bound (the kernel's own tests).
    pub(crate) fn next_count_slice(&mut self, counts: &[i64]) -> Result<Vec<f64>> {
        if !matches!(self.contribution, Contribution::Counts(_)) {
            return Err(invalid(
                "contribution",
                "this stream takes clipped vectors (next_clipped)",
            ));
        }
        self.check_step(counts.len())?;
        self.release(counts.to_vec())
    }

    /// Releases the next step from its contributions, `rows` of
    /// `dimension` values each (row-major): each row is clipped to the
    /// stream's norm and put on the lattice, the rows are summed exactly,
    /// and `x̂_t` (the private sum of the clipped rows) is returned.
    pub fn next_clipped(&mut self, rows: &[f64]) -> Result<Vec<f64>> {
        let Contribution::Clipped { norm } = self.contribution else {
            return Err(invalid(
                "contribution",
                "this stream takes counts (next_counts)",
            ));
        };
        self.check_step(self.dimension)?;
        if !rows.len().is_multiple_of(self.dimension) {
            return Err(invalid(
                "rows",
                format!(
                    "length {} is not a multiple of the dimension {}",
                    rows.len(),
                    self.dimension
                ),
            ));
        }
        // Nothing here refuses on the rows' values or their number (that
        // would be a noiseless answer about the data): a row that is not
        // finite contributes nothing, and the sum saturates (then
        // `release` clamps it, a contraction).
        let mut sum = vec![0i64; self.dimension];
        for row in rows.chunks_exact(self.dimension) {
            for (s, v) in sum.iter_mut().zip(lattice_point(row, norm)) {
                *s = s.saturating_add(v);
            }
        }
        self.release(sum)
    }

    fn check_step(&self, len: usize) -> Result<()> {
        if self.step >= self.horizon {
            return Err(invalid(
                "step",
                format!(
                    "the horizon of {} steps is spent: a new stream (and charge) is needed",
                    self.horizon
                ),
            ));
        }
        if len != self.dimension {
            return Err(invalid(
                "step",
                format!("{len} values for a stream of dimension {}", self.dimension),
            ));
        }
        Ok(())
    }

    /// Measures `(C̃X)_t + z_t` on integers and returns `(C̃⁻¹ u)_t` in data
    /// units.
    fn release(&mut self, mut x: Vec<i64>) -> Result<Vec<f64>> {
        let b = self.m.len();
        let t = self.step;
        // Clamping each coordinate to ±cap is a contraction (it never
        // increases |x − x'|), so the sensitivity holds, and Σ m_k X_{t−k}
        // then fits i128 whatever the data: no refusal depends on it.
        let cap = self.input_cap;
        for v in &mut x {
            *v = (*v).clamp(-cap, cap);
        }
        self.x_hist[t % b] = x;
        let mut y = vec![0.0; self.dimension];
        let (x_hist, y_hist, m, c) = (&self.x_hist, &self.y_hist, &self.m, &self.c);
        let gaussian = &self.gaussian;
        let drawn = y
            .par_chunks_mut(CHUNK)
            .zip(self.sources.par_iter_mut())
            .enumerate()
            .try_for_each(|(chunk, (out, source))| -> Result<()> {
                let lo = chunk * CHUNK;
                let mut acc = vec![0i128; out.len()];
                for (k, &mk) in m.iter().enumerate().take(t + 1) {
                    let row = &x_hist[(t - k) % b][lo..lo + out.len()];
                    for (a, &v) in acc.iter_mut().zip(row) {
                        *a += i128::from(mk) * i128::from(v);
                    }
                }
                for (o, a) in out.iter_mut().zip(&acc) {
                    let z = source.discrete_gaussian_i64(gaussian)?;
                    // u_t, then the inverse filter's new term.
                    let u = a + i128::from(z);
                    *o = i64::try_from(u).map_or(u as f64, |u| u as f64);
                }
                for (k, &ck) in c.iter().enumerate().skip(1).take(t) {
                    let row = &y_hist[(t - k) % (b - 1)][lo..lo + out.len()];
                    for (o, &v) in out.iter_mut().zip(row) {
                        *o -= ck * v;
                    }
                }
                Ok(())
            });
        if let Err(e) = drawn {
            // A draw beyond i64 (σ ≤ 2^50 on the lattice: probability below
            // exp(−2^25)) ends the stream: retrying the step would measure
            // it twice with fresh noise.
            self.step = self.horizon;
            return Err(e);
        }
        // c̃_0 = 1: y_t is the inverse filter's output (measurement units).
        let unit = self.out_unit;
        let released: Vec<f64> = y.iter().map(|v| v * unit).collect();
        if b > 1 {
            self.y_hist[t % (b - 1)] = y;
        }
        self.advance_variances();
        self.step += 1;
        Ok(released)
    }

    /// The next coefficient of `c̃⁻¹` and the running variance sums.
    fn advance_variances(&mut self) {
        let b = self.c.len();
        let t = self.step;
        let mut inv = if t == 0 { 1.0 } else { 0.0 };
        for k in 1..b.min(t + 1) {
            inv -= self.c[k] * self.inverse_tail[(t - k) % (b - 1)];
        }
        if b > 1 {
            self.inverse_tail[t % (b - 1)] = inv;
        }
        self.inverse_sq_sum += inv * inv;
        self.inverse_prefix += inv;
        self.prefix_sq_sum += self.inverse_prefix * self.inverse_prefix;
    }
}

/// `row` clipped to L2 norm `norm` and put on the lattice `γℤ^dim`,
/// `γ = norm / 2^q`, as integers `X` with `Σ X_i² ≤ 4^q` exactly: rounded
/// to nearest, then (only near the clipping boundary) coordinates moved one
/// step toward zero, largest first, until the bound holds. A row with a
/// value that is not finite contributes nothing (a function of the row
/// alone, so the sensitivity is unchanged). The length is computed on the
/// row scaled by its largest magnitude (no overflow or underflow), and
/// every coordinate is within `2^q` before it is squared.
fn lattice_point(row: &[f64], norm: f64) -> Vec<i64> {
    let top = f64::from(1u32 << CLIP_LATTICE_BITS);
    let largest = row.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if !largest.is_finite() || largest == 0.0 {
        return vec![0; row.len()];
    }
    let relative = row
        .iter()
        .map(|v| (v / largest).powi(2))
        .sum::<f64>()
        .sqrt();
    // unit = 2^q / max(norm, ‖row‖), with ‖row‖ = largest · relative.
    let unit = (top / norm).min(top / largest / relative);
    let limit = 1i64 << CLIP_LATTICE_BITS;
    let mut x: Vec<i64> = row
        .iter()
        .map(|v| ((v * unit).round() as i64).clamp(-limit, limit))
        .collect();
    let bound = 1u128 << (2 * CLIP_LATTICE_BITS);
    let mut sq: u128 = x.iter().map(|&v| u128::from(v.unsigned_abs()).pow(2)).sum();
    if sq > bound {
        let mut order: Vec<usize> = (0..x.len()).filter(|&i| x[i] != 0).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(x[i].unsigned_abs()));
        'shrink: while !order.is_empty() {
            for &i in &order {
                if sq <= bound {
                    break 'shrink;
                }
                if x[i] != 0 {
                    let a = u128::from(x[i].unsigned_abs());
                    sq = sq - a * a + (a - 1) * (a - 1);
                    x[i] -= x[i].signum();
                }
            }
        }
    }
    x
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
