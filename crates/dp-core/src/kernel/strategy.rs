//! The linear operators the kernel measures, their exact integer images
//! and their sensitivities.
//!
//! A [`LinearStrategy`] is a stack of terms `w_t · (A_{t,1} ⊗ … ⊗ A_{t,K})`
//! (a dense matrix is one term with one factor). Before measuring, the
//! kernel quantizes every factor to a power-of-two grid so that the
//! strategy it measures, `Ã`, has entries `G · (integer)` for one common
//! power of two `G` (the granularity). With integer counts `x`, `Ã x / G`
//! is then computed exactly in 128-bit integers, mode by mode for a
//! Kronecker term (never densifying the operator) and over every cell,
//! zero or not, so the time taken does not depend on the data.
//!
//! Sensitivities are computed exactly, in units of `G`, from the integer
//! factors: a neighbour adds or removes one record, moving `Ã x` by one
//! column of `Ã`. A Kronecker product's column `(j₁,…,j_K)` is the
//! Kronecker product of the factors' columns, whose L1 and L2 norms are
//! the products of the factors' column norms, so `Δ(⊗ A_k) = Π Δ(A_k)`.
//! For a stack of terms a column is the stack of the terms' columns, so
//! `‖col‖₁ = Σ_t ‖col_t‖₁ ≤ Σ_t |w_t| Π_k Δ₁(A_{t,k})` and
//! `‖col‖₂² = Σ_t ‖col_t‖₂² ≤ Σ_t w_t² Π_k Δ₂(A_{t,k})²`: the maximum of
//! a sum is at most the sum of the maxima (equality for one term).

use std::borrow::Borrow;

use dp_linalg::{Mat, MatRef};
use num_bigint::BigUint;

use crate::validate::check_matrix;
use crate::{DpError, Result};

/// Largest count a [`super::PrivateHistogram`] cell may hold (2⁴⁰); the
/// exact-arithmetic bounds below rely on it.
pub const MAX_COUNT: u64 = 1 << 40;

/// Bits of relative precision the quantization aims for per term (shared
/// among its K listed factors: each factor's largest entry is kept to
/// about 2^(−60/K) relative accuracy, at most 2⁻⁴⁰; fewer bits only when
/// 128-bit arithmetic would not hold the answers).
const TARGET_BITS: i32 = 60;
/// Fewest bits accepted before refusing a strategy as too large.
const MIN_BITS: i32 = 12;
/// Most bits one factor keeps: its integers stay below 2⁴², so the f64
/// rounding of the inputs (2⁻⁵³ relative) moves a row sum by far less
/// than half a grid step and the row-sum-preserving rounding of
/// [`to_integers`] keeps exact zeros exact.
const MAX_FACTOR_BITS: i32 = 40;

/// A linear strategy for the kernel: a dense matrix, a Kronecker product
/// of dense factors, or a stacked union of weighted Kronecker products.
#[derive(Debug, Clone)]
pub struct LinearStrategy {
    terms: Vec<(f64, Vec<Mat<f64>>)>,
    rows: usize,
    cols: usize,
    /// The quantized form, computed on first measurement.
    quantized: std::sync::OnceLock<QuantizedStrategy>,
}

impl LinearStrategy {
    /// A dense strategy matrix (p × n).
    pub fn dense(matrix: MatRef<'_, f64>) -> Result<Self> {
        Self::union(vec![(1.0, vec![matrix.to_owned()])])
    }

    /// The Kronecker product `A₁ ⊗ … ⊗ A_K` acting on the row-major
    /// (last attribute fastest) flattening of a K-way histogram.
    pub fn kronecker(factors: &[MatRef<'_, f64>]) -> Result<Self> {
        Self::union(vec![(1.0, factors.iter().map(|f| f.to_owned()).collect())])
    }

    /// The rows of every `w_t (A_{t,1} ⊗ … ⊗ A_{t,K})` stacked in order;
    /// all terms must act on the same domain.
    pub fn union(terms: Vec<(f64, Vec<Mat<f64>>)>) -> Result<Self> {
        if terms.is_empty() {
            return Err(invalid("strategy", "has no terms".into()));
        }
        let mut cols = None;
        let mut rows = 0usize;
        for (weight, factors) in &terms {
            if !(weight.is_finite() && *weight != 0.0) {
                return Err(invalid(
                    "strategy weight",
                    format!("must be finite and nonzero, got {weight}"),
                ));
            }
            if factors.is_empty() {
                return Err(invalid("strategy", "a term has no factors".into()));
            }
            let (mut p, mut n) = (1usize, 1usize);
            for f in factors {
                check_matrix("strategy factor", f.as_ref())?;
                if f.norm_max() == 0.0 {
                    return Err(DpError::ZeroMatrix {
                        what: "strategy factor".into(),
                    });
                }
                p = p.checked_mul(f.nrows()).ok_or_else(too_large)?;
                n = n.checked_mul(f.ncols()).ok_or_else(too_large)?;
            }
            if *cols.get_or_insert(n) != n {
                return Err(DpError::DimensionMismatch {
                    what: format!(
                        "strategy terms act on domains of {} and {n} cells",
                        cols.unwrap_or(0)
                    ),
                });
            }
            rows = rows.checked_add(p).ok_or_else(too_large)?;
        }
        Ok(Self {
            terms,
            rows,
            cols: cols.unwrap_or(0),
            quantized: std::sync::OnceLock::new(),
        })
    }

    /// Number of rows (measurements).
    pub fn nrows(&self) -> usize {
        self.rows
    }

    /// Number of cells of the domain.
    pub fn ncols(&self) -> usize {
        self.cols
    }

    /// The strategy as one dense matrix (for tests and small domains).
    pub fn to_dense(&self) -> Mat<f64> {
        let mut out = Mat::zeros(self.rows, self.cols);
        let mut r0 = 0;
        for (w, factors) in &self.terms {
            let mut k = factors[0].clone();
            for f in &factors[1..] {
                k = kron(k.as_ref(), f.as_ref());
            }
            for j in 0..self.cols {
                for i in 0..k.nrows() {
                    out[(r0 + i, j)] = w * k[(i, j)];
                }
            }
            r0 += k.nrows();
        }
        out
    }

    /// The integer form the kernel measures (computed once).
    pub(crate) fn quantized(&self) -> Result<&QuantizedStrategy> {
        if let Some(q) = self.quantized.get() {
            return Ok(q);
        }
        let q = self.quantize()?;
        Ok(self.quantized.get_or_init(|| q))
    }

    /// Quantizes to the integer form the kernel measures.
    fn quantize(&self) -> Result<QuantizedStrategy> {
        quantize_terms(&self.terms)
    }

    /// Quantizes without measuring: the strategy the kernel would measure
    /// (public, data-independent), e.g. to plan a reconstruction.
    pub fn measured_strategy(&self) -> Result<MeasuredStrategy> {
        Ok(self.quantized()?.measured(None))
    }
}

/// Quantizes weighted Kronecker terms (factors of each term in order;
/// the terms need not share a domain) to one common grid, retrying with
/// fewer bits until 128-bit arithmetic provably holds every answer.
pub(crate) fn quantize_terms<M: Borrow<Mat<f64>>>(
    terms: &[(f64, Vec<M>)],
) -> Result<QuantizedStrategy> {
    let mut bits = TARGET_BITS;
    loop {
        if let Some(q) = quantize_with(terms, bits)? {
            return Ok(q);
        }
        bits -= 4;
        if bits < MIN_BITS {
            return Err(invalid(
                "strategy",
                "too large for exact 128-bit measurement (too many factors or cells)".into(),
            ));
        }
    }
}

/// Quantization keeping about `bits` bits per term, or `None` when the
/// answers could overflow 127 bits for some histogram with counts up to
/// [`MAX_COUNT`] (a bound that does not look at the data).
fn quantize_with<M: Borrow<Mat<f64>>>(
    terms: &[(f64, Vec<M>)],
    bits: i32,
) -> Result<Option<QuantizedStrategy>> {
    // Grids of factors 2..K: a power of two 2^-per below the factor's
    // largest entry. The first factor's grid is set per term so that
    // every term lands on one common output grid G = 2^g_exp.
    let mut later_exps = Vec::with_capacity(terms.len());
    let mut g_exp = i32::MAX;
    let mut rows = 0usize;
    for (w, factors) in terms {
        // Each of the term's K factors keeps bits/K bits (K counts the
        // factors actually listed: a marginal term on 2 attributes of an
        // 8-attribute domain has K = 2), capped so that the f64 rounding
        // of the inputs stays far below one grid step.
        let per = (bits / factors.len() as i32).clamp(1, MAX_FACTOR_BITS);
        let exps: Vec<i32> = factors[1..]
            .iter()
            .map(|f| exponent_of(f.borrow().norm_max()) - per)
            .collect();
        let first = exponent_of(w.abs() * factors[0].borrow().norm_max()) - per;
        g_exp = g_exp.min(first + exps.iter().sum::<i32>());
        later_exps.push((first, exps));
        rows += factors
            .iter()
            .map(|f| f.borrow().nrows())
            .product::<usize>();
    }
    let mut out = Vec::with_capacity(terms.len());
    for ((w, factors), (first, exps)) in terms.iter().zip(later_exps) {
        let first_exp = g_exp - exps.iter().sum::<i32>();
        // The first factor is rounded on its own grid (`per` bits, like
        // every factor, so the f64 rounding of the weighted entries stays
        // far below a step and exact zero row sums stay exact), then moved
        // onto the common grid by an exact shift. An entry beyond 52 bits
        // (terms of very different scales on one grid): retry with fewer
        // bits.
        let Some(first_ints) = to_integers(factors[0].borrow().as_ref(), *w, first)
            .and_then(|f| f.shifted_to(first_exp))
        else {
            return Ok(None);
        };
        let mut ints = vec![first_ints];
        for (f, &e) in factors[1..].iter().zip(&exps) {
            let Some(next) = to_integers(f.borrow().as_ref(), 1.0, e) else {
                return Ok(None);
            };
            ints.push(next);
        }
        // Data-independent bound on every intermediate and final
        // |answer| / G: MAX_COUNT · Π_k (largest row L1 of factor k).
        let mut bound = BigUint::from(MAX_COUNT);
        for f in &ints {
            bound *= f.max_row_l1();
        }
        if bound.bits() > 120 {
            return Ok(None);
        }
        out.push(ints);
    }
    let sensitivity_l1 = out
        .iter()
        .map(|t| t.iter().map(IntMatrix::max_col_l1).product::<BigUint>())
        .sum();
    let sensitivity_l2_squared = out
        .iter()
        .map(|t| {
            t.iter()
                .map(IntMatrix::max_col_l2_squared)
                .product::<BigUint>()
        })
        .sum();
    Ok(Some(QuantizedStrategy {
        terms: out,
        granularity_exp: g_exp,
        rows,
        sensitivity_l1,
        sensitivity_l2_squared,
    }))
}

fn too_large() -> DpError {
    invalid("strategy", "dimensions overflow".into())
}

fn invalid(name: &'static str, reason: String) -> DpError {
    DpError::InvalidParameter { name, reason }
}

/// `e` with `2^e ≤ v < 2^(e+1)` for a finite `v > 0`.
fn exponent_of(v: f64) -> i32 {
    let mut e = v.log2().floor() as i32;
    while 2f64.powi(e) > v {
        e -= 1;
    }
    while 2f64.powi(e + 1) <= v {
        e += 1;
    }
    e
}

/// Dense Kronecker product (tests and `to_dense` only).
fn kron(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Mat<f64> {
    Mat::from_fn(a.nrows() * b.nrows(), a.ncols() * b.ncols(), |i, j| {
        a[(i / b.nrows(), j / b.ncols())] * b[(i % b.nrows(), j % b.ncols())]
    })
}

/// `weight · m / 2^exp` rounded to integers row by row, preserving each
/// row's sum: every entry is rounded to nearest, then the entries that
/// rounding moved furthest are moved one step back until the integer row
/// sum equals the rounded exact sum of the row (each entry stays within
/// one grid step). A row that sums to zero (a contrast, as the Helmert
/// rows of a residual strategy) therefore stays exactly orthogonal to the
/// ones vector, which keeps the subspaces of a residual strategy exactly
/// orthogonal after quantization. `None` when an entry needs more than
/// 52 bits (every integer and its value `· 2^exp` are then exact in f64).
fn to_integers(m: MatRef<'_, f64>, weight: f64, exp: i32) -> Option<IntMatrix> {
    let scale = 2f64.powi(-exp);
    let mut data = Vec::with_capacity(m.nrows() * m.ncols());
    let mut vals = Vec::with_capacity(m.ncols());
    for i in 0..m.nrows() {
        vals.clear();
        // Multiplying by a power of two is exact; the weight product
        // rounds once, then the quantization rounds to the grid.
        for j in 0..m.ncols() {
            let v = (weight * m[(i, j)]) * scale;
            if v.is_nan() || v.abs() >= 2f64.powi(52) {
                return None;
            }
            vals.push(v);
        }
        // The exact sum of the row: whole parts in integers, fractional
        // parts (exact in f64) summed in f64.
        let whole: i128 = vals.iter().map(|v| v.floor() as i128).sum();
        let frac: f64 = vals.iter().map(|v| v - v.floor()).sum();
        let target = whole + frac.round() as i128;
        let start = data.len();
        data.extend(vals.iter().map(|v| v.round() as i64));
        let row = &mut data[start..];
        let mut diff = target - row.iter().map(|&r| i128::from(r)).sum::<i128>();
        if diff != 0 {
            // Entries ordered by how far rounding moved them against the
            // needed direction (ties by position: deterministic).
            let mut order: Vec<usize> = (0..row.len()).collect();
            let gap = |j: usize| vals[j] - row[j] as f64;
            order.sort_by(|&a, &b| gap(b).total_cmp(&gap(a)).then(a.cmp(&b)));
            if diff < 0 {
                order.reverse();
            }
            for &j in &order {
                if diff == 0 {
                    break;
                }
                let step = diff.signum() as i64;
                row[j] += step;
                diff -= i128::from(step);
            }
        }
    }
    Some(IntMatrix {
        rows: m.nrows(),
        cols: m.ncols(),
        data,
        exp,
    })
}

/// A row-major integer matrix.
#[derive(Debug, Clone)]
pub(crate) struct IntMatrix {
    rows: usize,
    cols: usize,
    data: Vec<i64>,
    /// The grid of this factor: its value is `data · 2^exp`.
    exp: i32,
}

impl IntMatrix {
    fn get(&self, i: usize, j: usize) -> i64 {
        self.data[i * self.cols + j]
    }

    /// The same values on the finer grid `2^exp` (`exp ≤ self.exp`): the
    /// integers times `2^(self.exp − exp)`, exactly; `None` when an entry
    /// would reach 2⁵² (or `exp` is coarser).
    fn shifted_to(mut self, exp: i32) -> Option<Self> {
        let shift = u32::try_from(self.exp - exp).ok()?;
        for v in &mut self.data {
            if *v == 0 {
                continue;
            }
            // |v| ≥ 1, so a shift of 52 or more reaches 2⁵².
            if shift >= 52 || v.unsigned_abs() >= 1u64 << (52 - shift) {
                return None;
            }
            *v <<= shift;
        }
        self.exp = exp;
        Some(self)
    }

    /// The factor's exact value `data · 2^exp` (exact in f64: every
    /// integer is below 2⁵³).
    fn to_mat(&self) -> Mat<f64> {
        let g = 2f64.powi(self.exp);
        Mat::from_fn(self.rows, self.cols, |i, j| self.get(i, j) as f64 * g)
    }

    /// `max_i Σ_j |F_ij|`, exact.
    fn max_row_l1(&self) -> BigUint {
        max_abs_sum(self.rows, self.cols, |i, j| self.get(i, j))
    }

    /// `max_j Σ_i |F_ij|`, exact.
    fn max_col_l1(&self) -> BigUint {
        max_abs_sum(self.cols, self.rows, |j, i| self.get(i, j))
    }

    fn max_col_l2_squared(&self) -> BigUint {
        (0..self.cols)
            .map(|j| {
                let mut acc = BigUint::ZERO;
                let mut part = 0u128;
                for i in 0..self.rows {
                    let sq = u128::from(self.get(i, j).unsigned_abs()).pow(2);
                    match part.checked_add(sq) {
                        Some(v) => part = v,
                        None => {
                            acc += part;
                            part = sq;
                        }
                    }
                }
                acc + part
            })
            .max()
            .unwrap_or_default()
    }
}

/// `max_a Σ_b |entry(a, b)|` over `a < outer`, `b < inner`, exact (each
/// sum of at most `inner` values below 2⁶³ fits in a u128); 0 when empty.
fn max_abs_sum(outer: usize, inner: usize, entry: impl Fn(usize, usize) -> i64) -> BigUint {
    (0..outer)
        .map(|a| {
            (0..inner)
                .map(|b| u128::from(entry(a, b).unsigned_abs()))
                .sum::<u128>()
        })
        .max()
        .map(BigUint::from)
        .unwrap_or_default()
}

/// The strategy a measurement actually measured, `Ã` (public and
/// data-independent): a stack of Kronecker terms `⊗_k F_{t,k}`, each
/// factor at its exact quantized value (a multiple of a power of two,
/// exactly representable in f64), the term's weight folded into its
/// first factor. Reconstruction should use it rather than the requested
/// strategy: least squares with the matrix that was measured is exactly
/// unbiased, with the requested one it is off by the quantization (about
/// 2⁻⁶⁰ᐟᴷ relative).
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredStrategy {
    /// The terms, in row order.
    pub terms: Vec<MeasuredTerm>,
    /// `G`: every entry of every term's Kronecker product is a multiple.
    pub granularity: f64,
}

/// One term of a [`MeasuredStrategy`].
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredTerm {
    /// The attributes the factors act on, increasing. For a
    /// [`LinearStrategy`] the term's own factor positions `0..K`; for a
    /// [`super::MarginalStrategy`] domain positions, every other attribute
    /// having the factor `[1, …, 1]` (exact, not quantized), and a term on
    /// no attribute having one 1×1 factor (its weight on the grand total).
    pub support: Vec<usize>,
    /// The factors, one per support position (one 1×1 factor when the
    /// support is empty).
    pub factors: Vec<Mat<f64>>,
}

/// The quantized strategy `Ã = G · (integer terms)`.
#[derive(Debug, Clone)]
pub(crate) struct QuantizedStrategy {
    terms: Vec<Vec<IntMatrix>>,
    granularity_exp: i32,
    rows: usize,
    sensitivity_l1: BigUint,
    sensitivity_l2_squared: BigUint,
}

impl QuantizedStrategy {
    /// `G`, the power of two every entry of `Ã` is a multiple of.
    pub(crate) fn granularity(&self) -> f64 {
        2f64.powi(self.granularity_exp)
    }

    /// `Δ₁(Ã)/G` exactly for one term, an upper bound (sum over terms)
    /// for a union.
    pub(crate) fn sensitivity_l1(&self) -> BigUint {
        self.sensitivity_l1.clone()
    }

    /// `(Δ₂(Ã)/G)²` exactly for one term, an upper bound for a union.
    pub(crate) fn sensitivity_l2_squared(&self) -> BigUint {
        self.sensitivity_l2_squared.clone()
    }

    /// The public form of `Ã`: each term's factors at their exact values,
    /// on the attributes `supports[t]` (or `0..K` when `None`).
    pub(crate) fn measured(&self, supports: Option<&[Vec<usize>]>) -> MeasuredStrategy {
        let terms = self
            .terms
            .iter()
            .enumerate()
            .map(|(t, factors)| MeasuredTerm {
                support: match supports {
                    Some(s) => s[t].clone(),
                    None => (0..factors.len()).collect(),
                },
                factors: factors.iter().map(IntMatrix::to_mat).collect(),
            })
            .collect();
        MeasuredStrategy {
            terms,
            granularity: self.granularity(),
        }
    }

    /// `F_t x_t / G` exactly for term `t` alone, `x_t` its input tensor.
    pub(crate) fn apply_term(&self, t: usize, x: &[u64]) -> Vec<i128> {
        apply_kronecker(&self.terms[t], x)
    }

    /// `Ã x / G` exactly, for counts `x` (each ≤ [`MAX_COUNT`], which keeps
    /// every partial sum within the bound checked at quantization).
    pub(crate) fn apply(&self, x: &[u64]) -> Vec<i128> {
        let mut out = Vec::with_capacity(self.rows);
        for factors in &self.terms {
            out.extend(apply_kronecker(factors, x));
        }
        out
    }
}

/// `(F₁ ⊗ … ⊗ F_K) x` by mode products: the tensor of shape
/// `(n₁,…,n_K)` is multiplied along mode k by `F_k` in turn. The
/// factors' zero entries (the strategy is public) are skipped, and a row
/// that repeats one value over a run of columns (a Helmert or prefix row,
/// a total) is applied through prefix sums of the fibre, one difference
/// per run. The work is `Σ_k min(nnz(F_k), n_k + runs(F_k))` times the
/// other modes' sizes (an identity factor costs one pass over the table,
/// a Helmert basis two) and depends on the strategy and the shapes alone,
/// never on the counts.
fn apply_kronecker(factors: &[IntMatrix], x: &[u64]) -> Vec<i128> {
    let mut shape: Vec<usize> = factors.iter().map(|f| f.cols).collect();
    let mut t: Vec<i128> = x.iter().map(|&v| i128::from(v)).collect();
    for (k, f) in factors.iter().enumerate() {
        let outer: usize = shape[..k].iter().product();
        let inner: usize = shape[k + 1..].iter().product();
        let mut next = vec![0i128; outer * f.rows * inner];
        let rows: Vec<Vec<Run>> = (0..f.rows).map(|i| f.runs(i)).collect();
        let runs: usize = rows.iter().map(Vec::len).sum();
        let nnz: usize = rows.iter().flatten().map(|r| r.end - r.start).sum();
        let mode = Mode {
            f,
            rows: &rows,
            outer,
            inner,
        };
        if f.cols + runs < nnz {
            mode.by_runs(&t, &mut next);
        } else {
            mode.by_entries(&t, &mut next);
        }
        shape[k] = f.rows;
        t = next;
    }
    t
}

/// A run of one nonzero value in a factor row: columns `start..end`.
struct Run {
    start: usize,
    end: usize,
    value: i128,
}

impl IntMatrix {
    /// Row `i` as maximal runs of equal nonzero entries.
    fn runs(&self, i: usize) -> Vec<Run> {
        let mut out: Vec<Run> = Vec::new();
        for j in 0..self.cols {
            let v = i128::from(self.get(i, j));
            if v == 0 {
                continue;
            }
            match out.last_mut() {
                Some(r) if r.end == j && r.value == v => r.end += 1,
                _ => out.push(Run {
                    start: j,
                    end: j + 1,
                    value: v,
                }),
            }
        }
        out
    }
}

/// One mode product: `f` (its rows as runs) along the middle axis of a
/// row-major tensor of shape outer × f.cols × inner.
struct Mode<'a> {
    f: &'a IntMatrix,
    rows: &'a [Vec<Run>],
    outer: usize,
    inner: usize,
}

impl Mode<'_> {
    /// Entry by entry over each row's runs.
    fn by_entries(&self, t: &[i128], next: &mut [i128]) {
        let (f, rows, outer, inner) = (self.f, self.rows, self.outer, self.inner);
        for o in 0..outer {
            for (i, row) in rows.iter().enumerate() {
                let dst = &mut next[(o * f.rows + i) * inner..(o * f.rows + i + 1) * inner];
                for run in row {
                    for j in run.start..run.end {
                        let src = &t[(o * f.cols + j) * inner..(o * f.cols + j + 1) * inner];
                        for (d, &s) in dst.iter_mut().zip(src) {
                            // Bounded by the quantization check (< 2^120).
                            *d += run.value * s;
                        }
                    }
                }
            }
        }
    }

    /// Through prefix sums along the mode: a run adds
    /// `value · (P[end] − P[start])`. The prefix sums themselves are not
    /// bounded by the quantization check (it bounds row sums, not whole
    /// fibres), so they wrap: two's-complement differences are exact modulo
    /// 2^128, and each run's sum is bounded by the check (|value| ≥ 1), so
    /// the difference is the exact run sum.
    fn by_runs(&self, t: &[i128], next: &mut [i128]) {
        let (f, rows, outer, inner) = (self.f, self.rows, self.outer, self.inner);
        let mut prefix = vec![0i128; (f.cols + 1) * inner];
        for o in 0..outer {
            let src = &t[o * f.cols * inner..(o + 1) * f.cols * inner];
            for j in 0..f.cols {
                let (done, rest) = prefix.split_at_mut((j + 1) * inner);
                let before = &done[j * inner..];
                for ((p, &b), &s) in rest[..inner]
                    .iter_mut()
                    .zip(before)
                    .zip(&src[j * inner..(j + 1) * inner])
                {
                    *p = b.wrapping_add(s);
                }
            }
            for (i, row) in rows.iter().enumerate() {
                let dst = &mut next[(o * f.rows + i) * inner..(o * f.rows + i + 1) * inner];
                for run in row {
                    let hi = &prefix[run.end * inner..(run.end + 1) * inner];
                    let lo = &prefix[run.start * inner..(run.start + 1) * inner];
                    for ((d, &h), &l) in dst.iter_mut().zip(hi).zip(lo) {
                        *d += run.value * h.wrapping_sub(l);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    /// The quantized strategy's stated `(Δ₁, Δ₂)`, in the factors' units.
    fn stated_sensitivities(q: &QuantizedStrategy) -> (f64, f64) {
        let to_f64 = |v: BigUint| v.to_string().parse::<f64>().unwrap();
        let g = q.granularity();
        (
            to_f64(q.sensitivity_l1()) * g,
            to_f64(q.sensitivity_l2_squared()).sqrt() * g,
        )
    }

    fn sample(p: usize, n: usize, seed: u64) -> Mat<f64> {
        Mat::from_fn(p, n, |i, j| {
            (((i * 7 + j * 13 + seed as usize) % 11) as f64 - 5.0) / 3.0
        })
    }

    /// The derived bound on `|(Ã x)_i − (A x)_i|` for a term
    /// `w · (A_1 ⊗ … ⊗ A_K)`: every factor is rounded to a grid step
    /// `2^(e_k − per)` with `2^(e_k) ≤ M_k` (`M_k` its largest |entry|, the
    /// first one times |w|, whose product rounds once more by 2⁻⁵³) and
    /// `per = min(⌊60/K⌋, MAX_FACTOR_BITS)` bits; rounding to nearest and
    /// the row-sum repair (which moves an entry one step back) leave each
    /// entry within one step, so it moves by at most `η M_k`,
    /// `η = 2^(−per) + 2⁻⁵³`; an entry of the Kronecker product then
    /// moves by at most `((1+η)^K − 1) Π M_k`, and a row's answer by that
    /// times `‖x‖₁`. On a union's common grid each term keeps its own
    /// rounding (its first factor moved there by an exact shift).
    fn quantization_bound(weight: f64, factors: &[&Mat<f64>], x_l1: f64) -> f64 {
        let k = factors.len() as i32;
        let eta = 2f64.powi(-(TARGET_BITS / k).min(MAX_FACTOR_BITS)) + 2f64.powi(-53);
        let scale: f64 = factors.iter().map(|f| f.norm_max()).product::<f64>() * weight.abs();
        ((1.0 + eta).powi(k) - 1.0) * scale * x_l1
    }

    /// Contrasts (rows summing to zero) stay contrasts exactly when terms
    /// of different shapes share one grid: a one-factor term beside a
    /// two-factor one lands on a grid far finer than its own, where the
    /// f64 rounding of `w·f` shows in the integers; rounded on its own grid
    /// and shifted, every row of every factor sums to exactly zero, and
    /// every entry is within a step of the bits its term keeps.
    #[test]
    fn contrasts_stay_exact_on_a_shared_grid() {
        let (h2, h15, h53) = (
            dp_linalg::helmert(2),
            dp_linalg::helmert(15),
            dp_linalg::helmert(53),
        );
        // Weights from residual plans of weighted marginals (a 1-way
        // margin beside 2-way ones), for which rounding on the common grid
        // left a row of the one-factor term summing to ±1.
        for (w1, w2) in [(0.353553, 0.094163), (0.1, 0.5)] {
            check_contrasts(&[(w1, vec![&h53]), (w2, vec![&h2, &h15])]);
        }
    }

    fn check_contrasts(terms: &[(f64, Vec<&Mat<f64>>)]) {
        let q = quantize_terms(terms).unwrap();
        for (t, (w, factors)) in q.terms.iter().zip(terms) {
            for (k, (f, m)) in t.iter().zip(factors).enumerate() {
                for i in 0..f.rows {
                    let sum: i128 = (0..f.cols).map(|j| i128::from(f.get(i, j))).sum();
                    assert_eq!(sum, 0, "weight {w}, factor {k}, row {i}");
                }
                // The terms fit 52-bit integers on one grid only below 60
                // bits (the one-factor term is shifted onto the two-factor
                // term's finer grid): at least 20 bits per factor remain.
                let weight = if k == 0 { *w } else { 1.0 };
                let step = 2f64.powi(-20) * weight.abs() * m.norm_max();
                let exact = f.to_mat();
                for i in 0..f.rows {
                    for j in 0..f.cols {
                        let err = (exact[(i, j)] - weight * m[(i, j)]).abs();
                        assert!(err <= step, "weight {w}, factor {k}: {err:e} > {step:e}");
                    }
                }
            }
        }
        // Both terms on one output grid.
        let grids: Vec<i32> = q
            .terms
            .iter()
            .map(|t| t.iter().map(|f| f.exp).sum())
            .collect();
        assert_eq!(grids[0], grids[1]);
        assert_eq!(grids[0], q.granularity_exp);
    }

    #[test]
    fn kronecker_apply_matches_the_densified_operator() {
        let a = sample(3, 2, 1);
        let b = sample(2, 4, 2);
        let c = sample(2, 3, 3);
        let d = sample(2, 24, 5);
        let s = LinearStrategy::union(vec![
            (1.5, vec![a.clone(), b.clone(), c.clone()]),
            (-0.25, vec![d.clone()]),
        ])
        .unwrap();
        let q = s.quantized().unwrap();
        let g = q.granularity();
        let x: Vec<u64> = (0..24).map(|i| (i * 37 % 17) as u64).collect();
        let x_l1: f64 = x.iter().map(|&v| v as f64).sum();
        let y = q.apply(&x);
        let dense = s.to_dense();
        assert_eq!(y.len(), dense.nrows());
        let bounds = [
            quantization_bound(1.5, &[&a, &b, &c], x_l1),
            quantization_bound(-0.25, &[&d], x_l1),
        ];
        // The three-factor term keeps 20 bits per factor: about 3e-6 of
        // its scale; the single dense factor keeps MAX_FACTOR_BITS = 40.
        assert!(bounds[0] < 1e-5 * x_l1 * 1.5 * 8.0 && bounds[1] < 1e-12 * x_l1);
        for (i, &yi) in y.iter().enumerate() {
            let exact: f64 = (0..24).map(|j| dense[(i, j)] * x[j] as f64).sum();
            // Rounding of the f64 reference: 24 products and sums.
            let reference: f64 = (0..24).map(|j| (dense[(i, j)] * x[j] as f64).abs()).sum();
            let bound = bounds[usize::from(i >= 12)] + 1e-14 * reference;
            let err = (yi as f64 * g - exact).abs();
            assert!(
                err <= bound,
                "row {i}: error {err:e} above the bound {bound:e}"
            );
        }
    }

    /// Mode products by runs (Helmert and prefix rows, a total) and entry
    /// by entry (identity, a random factor with zeros), against the exact
    /// densified sum in i128.
    #[test]
    fn kronecker_apply_by_runs_and_entries_is_exact() {
        let int = |rows: usize, cols: usize, f: &dyn Fn(usize, usize) -> i64| IntMatrix {
            rows,
            cols,
            data: (0..rows * cols).map(|e| f(e / cols, e % cols)).collect(),
            exp: 0,
        };
        let helmert = int(5, 6, &|k, j| match j.cmp(&(k + 1)) {
            std::cmp::Ordering::Less => 3,
            std::cmp::Ordering::Equal => -3 * (k as i64 + 1),
            std::cmp::Ordering::Greater => 0,
        });
        let prefix = int(6, 6, &|i, j| i64::from(j <= i) * 1_000_003);
        let total = int(1, 4, &|_, _| -7);
        let identity = int(4, 4, &|i, j| i64::from(i == j));
        let random = int(3, 5, &|i, j| {
            [0, 5, -2, 0, 9, 1, 0, -4][(i * 5 + j * 3) % 8]
        });
        let cases = [
            vec![&helmert, &prefix, &random],
            vec![&random, &total, &helmert],
            vec![&identity, &prefix, &helmert],
        ];
        for factors in cases {
            let owned: Vec<IntMatrix> = factors.iter().map(|f| (*f).clone()).collect();
            let n: usize = owned.iter().map(|f| f.cols).product();
            let x: Vec<u64> = (0..n as u64)
                .map(|i| (i * 7919 % 101) * (1 << 30))
                .collect();
            let got = apply_kronecker(&owned, &x);
            let digits = |mut i: usize, sizes: &[usize]| {
                let mut d = vec![0; sizes.len()];
                for k in (0..sizes.len()).rev() {
                    d[k] = i % sizes[k];
                    i /= sizes[k];
                }
                d
            };
            let rows: Vec<usize> = owned.iter().map(|f| f.rows).collect();
            let cols: Vec<usize> = owned.iter().map(|f| f.cols).collect();
            assert_eq!(got.len(), rows.iter().product::<usize>());
            for (i, &gi) in got.iter().enumerate() {
                let r = digits(i, &rows);
                let want: i128 = (0..n)
                    .map(|j| {
                        let c = digits(j, &cols);
                        let e: i128 = owned
                            .iter()
                            .enumerate()
                            .map(|(k, f)| i128::from(f.get(r[k], c[k])))
                            .product();
                        e * i128::from(x[j])
                    })
                    .sum();
                assert_eq!(gi, want, "row {i}");
            }
        }
    }

    #[test]
    fn sensitivities_are_the_densified_column_norms() {
        let a = sample(3, 2, 1);
        let b = sample(2, 4, 2);
        let s = LinearStrategy::kronecker(&[a.as_ref(), b.as_ref()]).unwrap();
        let d = s.to_dense();
        let l1 = crate::sensitivity_l1(d.as_ref()).unwrap();
        let l2 = crate::sensitivity_l2(d.as_ref()).unwrap();
        let (q1, q2) = stated_sensitivities(s.quantized().unwrap());
        assert!((q1 - l1).abs() <= 1e-7 * l1);
        assert!((q2 - l2).abs() <= 1e-7 * l2);
        // A union: the stated bound is at least the true column norm.
        let u = LinearStrategy::union(vec![
            (1.0, vec![a.clone(), b.clone()]),
            (2.0, vec![sample(5, 8, 9)]),
        ])
        .unwrap();
        let du = u.to_dense();
        let (b1, b2) = stated_sensitivities(u.quantized().unwrap());
        assert!(b1 >= crate::sensitivity_l1(du.as_ref()).unwrap() * (1.0 - 1e-7));
        assert!(b2 >= crate::sensitivity_l2(du.as_ref()).unwrap() * (1.0 - 1e-7));
    }

    #[test]
    fn invalid_strategies_are_refused() {
        assert!(LinearStrategy::union(vec![]).is_err());
        assert!(LinearStrategy::union(vec![(0.0, vec![sample(2, 2, 0)])]).is_err());
        assert!(
            LinearStrategy::union(vec![
                (1.0, vec![sample(2, 2, 0)]),
                (1.0, vec![sample(2, 3, 0)])
            ])
            .is_err()
        );
        assert!(LinearStrategy::dense(Mat::<f64>::zeros(2, 2).as_ref()).is_err());
        let nan = Mat::from_fn(2, 2, |_, _| f64::NAN);
        assert!(LinearStrategy::dense(nan.as_ref()).is_err());
    }
}
