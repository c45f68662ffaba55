//! Factorizations `W = BC` of a streaming workload with both factors
//! lower-triangular (step `t`'s answer uses only what was measured by
//! step `t`): noise `z` is added to `Cx`, the answers are `B(Cx + z)`.
//!
//! - [`Factorization::dense`]: the optimum for the total squared error
//!   (Denisov et al., NeurIPS 2022): COA's certified optimal Gram
//!   `X = CᵀC`, factored as `C = J·chol(JXJ)ᵀ·J` (`J` reverses the steps),
//!   which is lower-triangular; then `B = WC⁻¹` is too. The triangular
//!   constraint costs nothing, so COA's duality gap certifies it.
//! - [`Factorization::sqrt`]: `B = C = W^{1/2}` as power series
//!   (Henzinger, Upadhyay & Upadhyay, SODA 2023; Fichtenberger et al.,
//!   ICML 2023), Toeplitz.
//! - [`Factorization::tree`]: the binary tree mechanism (Dwork et al.;
//!   Chan, Shi & Song): `C` measures every complete dyadic block, `B` sums
//!   the canonical decomposition of each step's range.
//! - [`Factorization::banded`]: `C` Toeplitz with `b` bands, optimized for
//!   the total or the largest per-step variance (Choquette-Choo et al.,
//!   ICML 2023; McKenna, ICLR 2025), for which `k` participations `≥ b`
//!   apart have an exact sensitivity.
//!
//! Figures ([`Figures`]) are in units of the noise multiplier: with
//! sensitivity `s`, `total_squared_error = s²‖B‖²_F` and
//! `max_variance = s² maxᵢ ‖Bᵢ‖²`.

use std::time::Instant;

use dp_core::{DpError, Result};
use dp_linalg::{Cholesky, Mat, Par};
use dp_opt::optimizers::coa::{Coa, CoaOptions};
use dp_opt::solvers::lbfgs::{LbfgsOptions, minimize};
use dp_opt::{Budget, PrivacyModel, Problem, StrategyOptimizer, Termination};

use crate::blt::Blt;
use crate::participation::{self, Participation, Sensitivity};
use crate::toeplitz;
use crate::workload::{Stream, StreamQuery};

pub use crate::workload::DENSE_MAX_STEPS;

/// The factorization families.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// The certified optimum for the total squared error.
    Dense,
    /// The square-root factorization.
    Sqrt,
    /// The binary tree.
    Tree,
    /// Banded Toeplitz, optimized.
    Banded,
    /// Buffered linear Toeplitz, optimized.
    Blt,
}

impl Family {
    /// Every family, in the order the command line lists them.
    pub const ALL: [Family; 5] = [
        Family::Dense,
        Family::Sqrt,
        Family::Tree,
        Family::Banded,
        Family::Blt,
    ];

    /// The family called `name` ([`Family::name`]).
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| DpError::InvalidParameter {
                name: "family",
                reason: format!("{name:?}: one of dense, sqrt, tree, banded, blt"),
            })
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Dense => "dense",
            Self::Sqrt => "sqrt",
            Self::Tree => "tree",
            Self::Banded => "banded",
            Self::Blt => "blt",
        }
    }
}

/// What a factorization is optimized for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Objective {
    /// The sum of every step's variance.
    #[default]
    Total,
    /// The largest step's variance.
    Max,
}

impl Objective {
    /// `total` or `max`.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "total" => Ok(Self::Total),
            "max" => Ok(Self::Max),
            _ => Err(DpError::InvalidParameter {
                name: "objective",
                reason: format!("{name:?}: total or max"),
            }),
        }
    }

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Total => "total",
            Self::Max => "max",
        }
    }
}

/// The factors.
#[derive(Debug, Clone)]
enum Factors {
    /// Toeplitz `C` (its first `c.len()` coefficients; bands) and `B`
    /// (length `T`).
    Toeplitz { c: Vec<f64>, b: Vec<f64> },
    /// The binary tree over the horizon.
    Tree,
    /// Dense lower-triangular `B` and `C`.
    Dense { b: Mat<f64>, c: Mat<f64> },
}

/// A factorization `W = BC` of a streaming workload.
#[derive(Debug, Clone)]
pub struct Factorization {
    stream: Stream,
    family: Family,
    factors: Factors,
    /// The dense factorization's certificate: a proven lower bound on the
    /// optimal total squared error (single participation) and the relative
    /// gap to it.
    pub certificate: Option<dp_opt::Certificate>,
    /// Why the optimizer stopped (dense, banded, BLT): converged, or a
    /// budget.
    pub termination: Option<Termination>,
    /// The BLT's parameters, when the family is BLT (its noise is
    /// generated from them in `O(d)` memory per coordinate).
    pub blt: Option<Blt>,
}

/// A factorization's figures under a participation schema.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// `s² ‖B‖²_F`: the sum of every step's variance.
    pub total_squared_error: f64,
    /// `s² maxᵢ ‖Bᵢ‖²`: the largest step's variance.
    pub max_variance: f64,
    /// `s` (exact, or a sound upper bound with the lower end of its
    /// bracket).
    pub sensitivity: Sensitivity,
    /// The singular value lower bounds `(total, max)` of the workload,
    /// where known ([`Stream::lower_bound`]).
    pub lower_bound: Option<(f64, f64)>,
}

impl Factorization {
    /// The square-root factorization `B = C = W^{1/2}`.
    pub fn sqrt(stream: &Stream) -> Result<Self> {
        let c = toeplitz::workload_sqrt(stream)?;
        Ok(Self {
            stream: *stream,
            family: Family::Sqrt,
            factors: Factors::Toeplitz { b: c.clone(), c },
            certificate: None,
            termination: None,
            blt: None,
        })
    }

    /// The binary tree: running sums and windows (sums over ranges).
    pub fn tree(stream: &Stream) -> Result<Self> {
        if let StreamQuery::Decayed { rate } = stream.query()
            && rate != 1.0
        {
            return Err(DpError::InvalidParameter {
                name: "family",
                reason: "the tree answers sums over ranges: running sums and windows".into(),
            });
        }
        Ok(Self {
            stream: *stream,
            family: Family::Tree,
            factors: Factors::Tree,
            certificate: None,
            termination: None,
            blt: None,
        })
    }

    /// The dense factorization optimal for the total squared error under
    /// single participation, certified by COA's duality gap (at most
    /// 10⁻⁶); horizons up to [`DENSE_MAX_STEPS`].
    pub fn dense(stream: &Stream) -> Result<Self> {
        let t = stream.steps();
        if t > DENSE_MAX_STEPS {
            return Err(DpError::InvalidParameter {
                name: "steps",
                reason: format!(
                    "the dense factorization forms T × T matrices: T ≤ {DENSE_MAX_STEPS}"
                ),
            });
        }
        let w = stream.to_dense()?;
        let problem = Problem::from_gram(
            dp_linalg::gram(w.as_ref(), Par::rayon(0)),
            PrivacyModel::Approx,
        )?;
        // COA's default stops two orders of magnitude inside its gap
        // tolerance (for plans reused many times); here the gap itself,
        // 10⁻⁶, is the promise, and the last Newton step at T = 2048
        // costs a third of the run.
        let coa = Coa {
            options: CoaOptions {
                certificate_target: 0.5,
                ..CoaOptions::default()
            },
        };
        let optimized = coa.optimize(&problem, &mut ())?;
        let a = &optimized.strategy;
        let x = dp_linalg::matmul_tn(a.as_ref(), a.as_ref(), Par::rayon(0))?;
        // C = J chol(JXJ)ᵀ J: lower-triangular with CᵀC = X.
        let reversed = Mat::from_fn(t, t, |i, j| x[(t - 1 - i, t - 1 - j)]);
        let chol = Cholesky::factor(reversed.as_ref())?;
        let l = chol.lower();
        let c = Mat::from_fn(t, t, |i, j| {
            if i >= j {
                l[(t - 1 - j, t - 1 - i)]
            } else {
                0.0
            }
        });
        // B = W C⁻¹ = W J L⁻ᵀ J, so Bᵀ = J L⁻¹ (J Wᵀ): one triangular
        // solve with the Cholesky factor, rows reversed on either side.
        let mut m = Mat::from_fn(t, t, |i, j| w[(j, t - 1 - i)]);
        chol.solve_lower_in_place(m.as_mut(), Par::rayon(0))?;
        let bt = Mat::from_fn(t, t, |i, j| m[(t - 1 - i, j)]);
        let b = bt.transpose().to_owned();
        Ok(Self {
            stream: *stream,
            family: Family::Dense,
            factors: Factors::Dense { b, c },
            certificate: optimized.report.certificate,
            termination: Some(optimized.report.termination),
            blt: None,
        })
    }

    /// Banded Toeplitz `C` with `bands` coefficients, optimized by L-BFGS
    /// from the truncated square root for `objective` under
    /// `participation` (with several participations, `bands` may not
    /// exceed their separation: the sensitivity is then exact).
    pub fn banded(
        stream: &Stream,
        bands: usize,
        participation: Participation,
        objective: Objective,
    ) -> Result<Self> {
        participation.validate()?;
        let t = stream.steps();
        let (k, sep) = participation.schema();
        if bands == 0 || bands > t {
            return Err(DpError::InvalidParameter {
                name: "bands",
                reason: format!("{bands}: between 1 and the horizon ({t})"),
            });
        }
        if k > 1 && bands > sep {
            return Err(DpError::InvalidParameter {
                name: "bands",
                reason: format!(
                    "{bands} bands with participations {sep} apart: at most {sep} bands keep \
                     the sensitivity exact"
                ),
            });
        }
        let work = t as f64 * bands as f64;
        if work > toeplitz::MAX_WORK / 1000.0 {
            return Err(DpError::InvalidParameter {
                name: "bands",
                reason: format!(
                    "{bands} bands over {t} steps: {work:.1e} per evaluation is too many"
                ),
            });
        }
        let start = toeplitz::workload_sqrt(&Stream::new(stream.query(), bands)?)?;
        let problem = Banded {
            stream: *stream,
            participations: k,
            separation: sep,
            objective,
        };
        let scale = problem.value(&start, None)?;
        let eval = |c: &[f64], g: &mut [f64]| -> f64 {
            match problem.value(c, Some(g)) {
                Ok(v) if v.is_finite() => {
                    g.iter_mut().for_each(|x| *x /= scale);
                    v / scale
                }
                _ => {
                    g.iter_mut().for_each(|x| *x = 0.0);
                    f64::INFINITY
                }
            }
        };
        let options = LbfgsOptions {
            budget: Budget::iterations(5000),
            gradient_tolerance: 1e-9,
            function_tolerance: 1e-13,
            ..LbfgsOptions::default()
        };
        let run = minimize(eval, start.clone(), &options, &mut ())?;
        let termination = run.termination.clone();
        let best = if run.output.value <= 1.0 {
            run.output.x
        } else {
            start
        };
        let r = toeplitz::inverse(&best, t)?;
        let b = toeplitz::apply_workload(stream, &r);
        Ok(Self {
            stream: *stream,
            family: Family::Banded,
            factors: Factors::Toeplitz { c: best, b },
            certificate: None,
            termination: Some(termination),
            blt: None,
        })
    }

    /// A BLT with at most `buffers` buffers optimized for `objective`
    /// under single participation ([`Blt::optimize`]; running and decayed
    /// sums). Its figures under several participations use the general
    /// sensitivity bound.
    pub fn blt(stream: &Stream, buffers: usize, objective: Objective) -> Result<Self> {
        let (blt, termination) = Blt::optimize(stream, buffers, objective)?;
        let t = stream.steps();
        let c = blt.c_coefficients(t);
        let b = toeplitz::apply_workload(stream, &blt.inverse_coefficients(t));
        Ok(Self {
            stream: *stream,
            family: Family::Blt,
            factors: Factors::Toeplitz { c, b },
            certificate: None,
            termination: Some(termination),
            blt: Some(blt),
        })
    }

    /// The workload factored.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The family.
    pub fn family(&self) -> Family {
        self.family
    }

    /// `C`'s coefficients, when it is Toeplitz.
    pub fn toeplitz_c(&self) -> Option<&[f64]> {
        match &self.factors {
            Factors::Toeplitz { c, .. } => Some(c),
            _ => None,
        }
    }

    /// `‖Bᵢ‖²` for every step `i`.
    pub fn b_row_norms2(&self) -> Vec<f64> {
        let t = self.stream.steps();
        match &self.factors {
            Factors::Toeplitz { b, .. } => {
                let mut acc = 0.0;
                b.iter()
                    .map(|v| {
                        acc += v * v;
                        acc
                    })
                    .collect()
            }
            Factors::Tree => {
                let width = match self.stream.query() {
                    StreamQuery::SlidingWindow { width } => width,
                    _ => t,
                };
                (0..t)
                    .map(|i| tree_range_nodes((i + 1).saturating_sub(width), i + 1) as f64)
                    .collect()
            }
            Factors::Dense { b, .. } => (0..t)
                .map(|i| (0..=i).map(|j| b[(i, j)] * b[(i, j)]).sum())
                .collect(),
        }
    }

    /// The sensitivity under `participation`.
    pub fn sensitivity(&self, participation: Participation) -> Result<Sensitivity> {
        participation.validate()?;
        let t = self.stream.steps();
        let (k, sep) = participation.schema();
        // One participation fits when k = 1 or no two steps are `sep` apart.
        let single = k == 1 || sep >= t;
        match &self.factors {
            Factors::Toeplitz { c, .. } if single || c.len() <= sep => Ok(Sensitivity::exact(
                participation::banded_sensitivity(&toeplitz::column_norms2(c, t), participation)?,
            )),
            Factors::Tree if single => Ok(Sensitivity::exact((tree_levels(t) as f64).sqrt())),
            _ if single => {
                participation::sensitivity(&|i, j| self.gram_entry(i, j), t, Participation::Single)
            }
            _ if t > DENSE_MAX_STEPS => Err(DpError::InvalidParameter {
                name: "participations",
                reason: format!(
                    "the sensitivity of {k} participations of a factorization with more than \
                     {sep} bands is computed for horizons up to {DENSE_MAX_STEPS}"
                ),
            }),
            Factors::Toeplitz { c, .. } => {
                let x = toeplitz::gram(c, t);
                participation::sensitivity(&|i, j| x[i * t + j], t, participation)
            }
            _ => participation::sensitivity(&|i, j| self.gram_entry(i, j), t, participation),
        }
    }

    /// `(CᵀC)_ij`.
    fn gram_entry(&self, i: usize, j: usize) -> f64 {
        let t = self.stream.steps();
        match &self.factors {
            Factors::Toeplitz { c, .. } => {
                let (lo, hi) = (i.min(j), i.max(j));
                (hi..t)
                    .map(|r| {
                        let a = c.get(r - lo).copied().unwrap_or(0.0);
                        let b = c.get(r - hi).copied().unwrap_or(0.0);
                        a * b
                    })
                    .sum()
            }
            Factors::Tree => tree_common_nodes(i, j, t) as f64,
            Factors::Dense { c, .. } => (i.max(j)..t).map(|r| c[(r, i)] * c[(r, j)]).sum(),
        }
    }

    /// The figures under `participation`.
    pub fn figures(&self, participation: Participation) -> Result<Figures> {
        let sensitivity = self.sensitivity(participation)?;
        let rows = self.b_row_norms2();
        let s2 = sensitivity.value * sensitivity.value;
        // Smallest rows first for the sum.
        let total: f64 = rows.iter().sum();
        let max = rows.iter().copied().fold(0.0, f64::max);
        Ok(Figures {
            total_squared_error: s2 * total,
            max_variance: s2 * max,
            sensitivity,
            lower_bound: self.stream.lower_bound(),
        })
    }

    /// `B` and `C` as dense matrices (small horizons: tests, checks);
    /// refused above [`DENSE_MAX_STEPS`].
    pub fn to_dense(&self) -> Result<(Mat<f64>, Mat<f64>)> {
        let t = self.stream.steps();
        self.stream.to_dense()?;
        match &self.factors {
            Factors::Toeplitz { c, b } => {
                let toe = |v: &[f64]| {
                    Mat::from_fn(t, t, |i, j| {
                        if j <= i {
                            v.get(i - j).copied().unwrap_or(0.0)
                        } else {
                            0.0
                        }
                    })
                };
                Ok((toe(b), toe(c)))
            }
            Factors::Dense { b, c } => Ok((b.clone(), c.clone())),
            Factors::Tree => {
                let nodes = tree_nodes(t);
                let c = Mat::from_fn(nodes.len(), t, |n, j| {
                    let (level, index) = nodes[n];
                    if j >> level == index { 1.0 } else { 0.0 }
                });
                let width = match self.stream.query() {
                    StreamQuery::SlidingWindow { width } => width,
                    _ => t,
                };
                let mut b = Mat::zeros(t, nodes.len());
                for i in 0..t {
                    for (level, index) in tree_decomposition((i + 1).saturating_sub(width), i + 1) {
                        if let Some(n) = nodes.iter().position(|&x| x == (level, index)) {
                            b[(i, n)] = 1.0;
                        }
                    }
                }
                Ok((b, c))
            }
        }
    }
}

/// The banded program: `F(c) = S(c) · E(c)`, `S` the exact squared
/// sensitivity of the schema, `E` the objective's `Σ ω_k b_k²` with
/// `b = W C⁻¹` (`ω_k = T − k` for the total, 1 for the last step's
/// variance, which is the largest: `B`'s rows grow with the step).
struct Banded {
    stream: Stream,
    participations: usize,
    separation: usize,
    objective: Objective,
}

impl Banded {
    /// `F(c)`, and its gradient into `grad` when given.
    fn value(&self, c: &[f64], grad: Option<&mut [f64]>) -> Result<f64> {
        let t = self.stream.steps();
        // The participations {0, b, 2b, …} that fit: column norms fall
        // with the column, so these attain the maximum.
        let starts: Vec<usize> = (0..self.participations)
            .map(|i| i * self.separation)
            .take_while(|&j| j < t)
            .collect();
        let norms = toeplitz::column_norms2(c, t);
        let s: f64 = starts.iter().map(|&j| norms[j]).sum();
        let r = toeplitz::inverse(c, t)?;
        let b = toeplitz::apply_workload(&self.stream, &r);
        let weight = |k: usize| match self.objective {
            Objective::Total => (t - k) as f64,
            Objective::Max => 1.0,
        };
        let e: f64 = b.iter().enumerate().map(|(k, v)| weight(k) * v * v).sum();
        if let Some(grad) = grad {
            let g: Vec<f64> = b
                .iter()
                .enumerate()
                .map(|(k, v)| 2.0 * weight(k) * v)
                .collect();
            let rho = toeplitz::apply_workload_adjoint(&self.stream, &g);
            let lambda = toeplitz::solve_transpose(c, &rho)?;
            for (j, out) in grad.iter_mut().enumerate() {
                let de: f64 = -(j..t).map(|n| lambda[n] * r[n - j]).sum::<f64>();
                let uses = starts.iter().filter(|&&st| j < t - st).count() as f64;
                let ds = 2.0 * c[j] * uses;
                *out = ds * e + s * de;
            }
        }
        Ok(s * e)
    }
}

/// Levels of the tree over `t` steps with a complete node containing
/// step 0: `⌊log₂ t⌋ + 1` (the sensitivity under single participation).
fn tree_levels(t: usize) -> usize {
    (usize::BITS - t.leading_zeros()) as usize
}

/// The complete dyadic nodes `(level, index)` of `t` steps: the node
/// covers `[index·2^level, (index + 1)·2^level)`, complete when that ends
/// by `t`.
fn tree_nodes(t: usize) -> Vec<(u32, usize)> {
    let mut out = Vec::new();
    for level in 0..tree_levels(t) as u32 {
        for index in 0..(t >> level) {
            out.push((level, index));
        }
    }
    out
}

/// The canonical decomposition of `[lo, hi)` into aligned dyadic blocks,
/// each complete by step `hi − 1`.
fn tree_decomposition(mut lo: usize, hi: usize) -> Vec<(u32, usize)> {
    let mut out = Vec::new();
    while lo < hi {
        let mut level = if lo == 0 {
            usize::BITS - 1 - hi.leading_zeros()
        } else {
            lo.trailing_zeros()
        };
        while lo + (1usize << level) > hi {
            level -= 1;
        }
        out.push((level, lo >> level));
        lo += 1 << level;
    }
    out
}

/// The number of blocks of [`tree_decomposition`], without listing them
/// (for a running sum, `[0, hi)`, the number of ones in `hi`).
fn tree_range_nodes(mut lo: usize, hi: usize) -> usize {
    if lo == 0 {
        return hi.count_ones() as usize;
    }
    let mut count = 0;
    while lo < hi {
        let mut level = lo.trailing_zeros();
        while lo + (1usize << level) > hi {
            level -= 1;
        }
        lo += 1 << level;
        count += 1;
    }
    count
}

/// Complete nodes containing both steps `i` and `j`.
fn tree_common_nodes(i: usize, j: usize, t: usize) -> usize {
    (0..tree_levels(t) as u32)
        .filter(|&l| i >> l == j >> l && ((i >> l) + 1) << l <= t)
        .count()
}

/// A factorization of `stream` by family (`bands` for banded, default
/// the separation or 64; `buffers` for BLT, default 4), timed.
pub fn factorize(
    stream: &Stream,
    family: Family,
    bands: Option<usize>,
    buffers: Option<usize>,
    participation: Participation,
    objective: Objective,
) -> Result<(Factorization, f64)> {
    let started = Instant::now();
    let f = match family {
        Family::Dense => Factorization::dense(stream)?,
        Family::Sqrt => Factorization::sqrt(stream)?,
        Family::Tree => Factorization::tree(stream)?,
        Family::Banded => {
            let (_, sep) = participation.schema();
            let bands = bands.unwrap_or(match participation {
                Participation::Single => stream.steps().min(64),
                Participation::Multi { .. } => sep.min(stream.steps()),
            });
            Factorization::banded(stream, bands, participation, objective)?
        }
        Family::Blt => Factorization::blt(stream, buffers.unwrap_or(4), objective)?,
    };
    Ok((f, started.elapsed().as_secs_f64()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#[allow(clippy::needless_range_loop)] // tests index matrices as the math does
mod tests {
    use super::*;
    use crate::participation::tests::brute_force;

    fn queries() -> [StreamQuery; 3] {
        [
            StreamQuery::Prefix,
            StreamQuery::SlidingWindow { width: 5 },
            StreamQuery::Decayed { rate: 0.9 },
        ]
    }

    /// `BC = W`, both lower-triangular, and the figures equal the densified
    /// factors' (column norms of C, row norms of B).
    fn check_against_dense(f: &Factorization) {
        let t = f.stream().steps();
        let (b, c) = f.to_dense().unwrap();
        let w = f.stream().to_dense().unwrap();
        let bc = dp_linalg::matmul(b.as_ref(), c.as_ref(), Par::Seq).unwrap();
        for i in 0..t {
            for j in 0..t {
                assert!(
                    (bc[(i, j)] - w[(i, j)]).abs() < 1e-9,
                    "{:?} BC ≠ W",
                    f.family()
                );
            }
        }
        // Lower-triangular: row i of B uses only measurements complete by i.
        for r in 0..c.nrows() {
            // Measurement r is complete at its last step.
            if let Some(last) = (0..t).rev().find(|&j| c[(r, j)] != 0.0) {
                for i in 0..last {
                    assert_eq!(b[(i, r)], 0.0, "{:?}: step {i} uses row {r}", f.family());
                }
            }
        }
        let figures = f.figures(Participation::Single).unwrap();
        let col = (0..t)
            .map(|j| (0..c.nrows()).map(|r| c[(r, j)] * c[(r, j)]).sum::<f64>())
            .fold(0.0, f64::max);
        let rows: Vec<f64> = (0..t)
            .map(|i| (0..b.ncols()).map(|r| b[(i, r)] * b[(i, r)]).sum())
            .collect();
        let total = col * rows.iter().sum::<f64>();
        let max = col * rows.iter().copied().fold(0.0, f64::max);
        assert!((figures.sensitivity.value - col.sqrt()).abs() < 1e-9 * col.sqrt());
        assert!((figures.total_squared_error - total).abs() < 1e-9 * total);
        assert!((figures.max_variance - max).abs() < 1e-9 * max);
    }

    #[test]
    fn every_family_factors_its_workload() {
        for query in queries() {
            for t in [1, 2, 13, 32] {
                let stream = Stream::new(query, t).unwrap();
                check_against_dense(&Factorization::sqrt(&stream).unwrap());
                let banded = Factorization::banded(
                    &stream,
                    t.min(4),
                    Participation::Single,
                    Objective::Total,
                )
                .unwrap();
                check_against_dense(&banded);
                if !matches!(query, StreamQuery::Decayed { .. }) {
                    check_against_dense(&Factorization::tree(&stream).unwrap());
                }
            }
        }
        let stream = Stream::new(StreamQuery::Decayed { rate: 0.5 }, 8).unwrap();
        assert!(Factorization::tree(&stream).is_err());
    }

    /// The square root's figures in closed form: `B = C` with coefficients
    /// `a_k = C(2k, k)/4ᵏ`, so the largest variance is `(Σ_{k<T} a_k²)²`;
    /// the tree's at `T = 2²⁰` is 21 levels × 20 blocks = 420.
    #[test]
    fn baselines_at_a_million_steps() {
        let t = 1 << 20;
        let stream = Stream::prefix(t).unwrap();
        let sqrt = Factorization::sqrt(&stream).unwrap();
        let f = sqrt.figures(Participation::Single).unwrap();
        // Σ a_k² by the exact ratio recurrence, summed from the smallest.
        let mut a = vec![1.0f64; t];
        for k in 1..t {
            a[k] = a[k - 1] * (2 * k - 1) as f64 / (2 * k) as f64;
        }
        let energy: f64 = a.iter().rev().map(|v| v * v).sum();
        assert!((f.max_variance - energy * energy).abs() < 1e-9 * f.max_variance);
        // Σ_{k≤n} a_k² = (ln n + γ + 4 ln 2)/π + O(1/n): about 5.479, so the
        // largest variance is about 30.0.
        let gamma = 0.577_215_664_901_532_9;
        let n = (t - 1) as f64;
        let asymptotic = (n.ln() + gamma + 4.0 * std::f64::consts::LN_2) / std::f64::consts::PI;
        assert!(
            (energy - asymptotic).abs() < 1e-5,
            "{energy} vs {asymptotic}"
        );
        let tree = Factorization::tree(&stream).unwrap();
        let f = tree.figures(Participation::Single).unwrap();
        assert_eq!(f.sensitivity.value * f.sensitivity.value, 21.0);
        assert_eq!(f.max_variance, 420.0);
    }

    /// The dense factorization attains COA's certified optimum: its total
    /// squared error is within 10⁻⁶ of the proven lower bound, at or above
    /// the singular value bound, and below the square root's.
    #[test]
    fn the_dense_factorization_is_certified() {
        for t in [16, 100] {
            let stream = Stream::prefix(t).unwrap();
            let dense = Factorization::dense(&stream).unwrap();
            check_against_dense(&dense);
            let f = dense.figures(Participation::Single).unwrap();
            let cert = dense.certificate.unwrap();
            assert!(cert.lower_bound <= f.total_squared_error * (1.0 + 1e-12));
            assert!(f.total_squared_error - cert.lower_bound <= 1e-6 * f.total_squared_error);
            let (svd, _) = f.lower_bound.unwrap();
            assert!(svd <= cert.lower_bound * (1.0 + 1e-12));
            let sqrt = Factorization::sqrt(&stream)
                .unwrap()
                .figures(Participation::Single)
                .unwrap();
            assert!(f.total_squared_error < sqrt.total_squared_error);
        }
    }

    /// The banded program's gradient against central differences.
    #[test]
    fn the_banded_gradient_matches_finite_differences() {
        for query in queries() {
            for objective in [Objective::Total, Objective::Max] {
                let problem = Banded {
                    stream: Stream::new(query, 40).unwrap(),
                    participations: 3,
                    separation: 6,
                    objective,
                };
                let c = [1.1, 0.45, 0.3, -0.1, 0.2, 0.05];
                let mut g = [0.0; 6];
                let f = problem.value(&c, Some(&mut g)).unwrap();
                for j in 0..6 {
                    let h = 1e-6;
                    let (mut up, mut down) = (c, c);
                    up[j] += h;
                    down[j] -= h;
                    let fd = (problem.value(&up, None).unwrap()
                        - problem.value(&down, None).unwrap())
                        / (2.0 * h);
                    assert!(
                        (fd - g[j]).abs() <= 1e-6 * f,
                        "{query:?} {objective:?} c{j}: {fd} vs {}",
                        g[j]
                    );
                }
            }
        }
    }

    /// `CᵀC` from the densified factor: the truth the sensitivities are
    /// checked against, independent of `gram_entry` and `toeplitz::gram`.
    fn dense_gram(f: &Factorization) -> Mat<f64> {
        let (_, c) = f.to_dense().unwrap();
        dp_linalg::matmul_tn(c.as_ref(), c.as_ref(), Par::Seq).unwrap()
    }

    /// Multi-participation against brute force over every pattern of the
    /// densified factor's Gram: banded is exact; for the square root,
    /// the tree, BLT and the dense optimum, on running, windowed and
    /// decayed sums, the bracket holds the truth.
    #[test]
    fn multi_participation_sensitivity_against_brute_force() {
        for (t, k, sep) in [(12, 3, 3), (13, 2, 5), (10, 4, 2), (9, 3, 4)] {
            let participation = Participation::Multi {
                participations: k,
                separation: sep,
            };
            for query in queries() {
                let stream = Stream::new(query, t).unwrap();
                let banded =
                    Factorization::banded(&stream, sep, participation, Objective::Total).unwrap();
                let x = dense_gram(&banded);
                let s = banded.sensitivity(participation).unwrap();
                let truth = brute_force(&|i, j| x[(i, j)], t, k, sep);
                assert!(s.is_exact());
                assert!(
                    (s.value - truth).abs() < 1e-12 * truth,
                    "{query:?} {t} {k} {sep}"
                );
                let mut others = vec![
                    Factorization::sqrt(&stream).unwrap(),
                    Factorization::dense(&stream).unwrap(),
                ];
                if !matches!(query, StreamQuery::SlidingWindow { .. }) {
                    others.push(Factorization::blt(&stream, 3, Objective::Max).unwrap());
                }
                if !matches!(query, StreamQuery::Decayed { .. }) {
                    others.push(Factorization::tree(&stream).unwrap());
                }
                for f in others {
                    let x = dense_gram(&f);
                    let s = f.sensitivity(participation).unwrap();
                    let truth = brute_force(&|i, j| x[(i, j)], t, k, sep);
                    assert!(
                        s.lower <= truth * (1.0 + 1e-9) && truth <= s.value * (1.0 + 1e-9),
                        "{:?} {query:?}: {} ≤ {truth} ≤ {}",
                        f.family(),
                        s.lower,
                        s.value
                    );
                }
            }
        }
        // Too many bands for the separation: refused, not mis-computed.
        let stream = Stream::prefix(20).unwrap();
        let p = Participation::Multi {
            participations: 2,
            separation: 4,
        };
        assert!(Factorization::banded(&stream, 5, p, Objective::Total).is_err());
    }

    /// Out-of-range schemas and sizes are typed errors, quickly: a huge
    /// participation count is capped at what the horizon holds, a huge
    /// window does not overflow, dense matrices are refused past their
    /// limit, and a horizon of one step works in every family.
    #[test]
    fn extreme_inputs_are_handled() {
        let stream = Stream::prefix(8).unwrap();
        let huge = Participation::Multi {
            participations: usize::MAX,
            separation: 2,
        };
        let capped = Participation::Multi {
            participations: 4,
            separation: 2,
        };
        for f in [
            Factorization::sqrt(&stream).unwrap(),
            Factorization::tree(&stream).unwrap(),
        ] {
            assert_eq!(f.sensitivity(huge).unwrap(), f.sensitivity(capped).unwrap());
        }
        let wide = Stream::new(StreamQuery::SlidingWindow { width: usize::MAX }, 40).unwrap();
        let prefix = Stream::prefix(40).unwrap();
        for objective in [Objective::Total, Objective::Max] {
            let a = Factorization::banded(&wide, 8, Participation::Single, objective).unwrap();
            let b = Factorization::banded(&prefix, 8, Participation::Single, objective).unwrap();
            let (fa, fb) = (
                a.figures(Participation::Single).unwrap(),
                b.figures(Participation::Single).unwrap(),
            );
            assert!((fa.max_variance - fb.max_variance).abs() < 1e-12 * fb.max_variance);
        }
        assert_eq!(wide.lower_bound(), prefix.lower_bound());
        let long = Stream::prefix(DENSE_MAX_STEPS + 1).unwrap();
        assert!(long.to_dense().is_err());
        assert!(Factorization::dense(&long).is_err());
        let sqrt = Factorization::sqrt(&long).unwrap();
        assert!(sqrt.sensitivity(capped).is_err());
        assert!(sqrt.to_dense().is_err());
        let one = Stream::prefix(1).unwrap();
        for f in [
            Factorization::sqrt(&one).unwrap(),
            Factorization::tree(&one).unwrap(),
            Factorization::dense(&one).unwrap(),
            Factorization::blt(&one, 2, Objective::Max).unwrap(),
            Factorization::banded(&one, 1, Participation::Single, Objective::Max).unwrap(),
        ] {
            let figures = f.figures(huge).unwrap();
            assert!(
                (figures.max_variance - 1.0).abs() < 1e-9,
                "{:?}",
                f.family()
            );
            assert!(figures.lower_bound.unwrap().0 <= figures.total_squared_error);
        }
    }

    /// Optimizing the bands never ends above the truncated square root it
    /// starts from.
    #[test]
    fn banded_optimization_improves_on_its_start() {
        let stream = Stream::prefix(256).unwrap();
        for objective in [Objective::Total, Objective::Max] {
            let p = Participation::Multi {
                participations: 2,
                separation: 64,
            };
            let banded = Factorization::banded(&stream, 64, p, objective).unwrap();
            let start = Factorization {
                stream,
                family: Family::Banded,
                factors: {
                    let c = toeplitz::workload_sqrt(&Stream::prefix(64).unwrap()).unwrap();
                    let r = toeplitz::inverse(&c, 256).unwrap();
                    Factors::Toeplitz {
                        b: toeplitz::apply_workload(&stream, &r),
                        c,
                    }
                },
                certificate: None,
                termination: None,
                blt: None,
            };
            let (a, b) = (banded.figures(p).unwrap(), start.figures(p).unwrap());
            let pick = |f: &Figures| match objective {
                Objective::Total => f.total_squared_error,
                Objective::Max => f.max_variance,
            };
            assert!(
                pick(&a) < pick(&b),
                "{objective:?}: {} vs {}",
                pick(&a),
                pick(&b)
            );
        }
    }

    /// No Toeplitz factorization has a smaller largest variance than the
    /// square root (single participation, running sums): minimizing it
    /// over all T coefficients from perturbed starts ends at the square
    /// root's value, never below. (In the infinite-horizon limit this is
    /// Cauchy–Schwarz: `∫|c|² ∫|w/c|² ≥ (∫|w|)²`, equal for `|c|² ∝ |w|`.)
    #[test]
    fn the_square_root_is_the_best_toeplitz_factorization_for_the_max() {
        let t = 48;
        let stream = Stream::prefix(t).unwrap();
        let sqrt = Factorization::sqrt(&stream)
            .unwrap()
            .figures(Participation::Single)
            .unwrap();
        let problem = Banded {
            stream,
            participations: 1,
            separation: 1,
            objective: Objective::Max,
        };
        let a = toeplitz::inverse_sqrt_series(t);
        let mut seed = 3u64;
        for _ in 0..4 {
            let start: Vec<f64> = a
                .iter()
                .map(|v| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    v * (1.0 + 0.6 * ((seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5))
                })
                .collect();
            let eval =
                |c: &[f64], g: &mut [f64]| problem.value(c, Some(g)).unwrap_or(f64::INFINITY);
            let options = LbfgsOptions {
                budget: Budget::iterations(20_000),
                gradient_tolerance: 1e-12,
                function_tolerance: 1e-15,
                ..LbfgsOptions::default()
            };
            let start_value = problem.value(&start, None).unwrap();
            let run = minimize(eval, start, &options, &mut ()).unwrap();
            let found = run.output.value;
            assert!(found < start_value);
            assert!(
                found >= sqrt.max_variance * (1.0 - 1e-9),
                "{found} < {}",
                sqrt.max_variance
            );
            assert!(
                found <= sqrt.max_variance * (1.0 + 1e-6),
                "{found} vs {}",
                sqrt.max_variance
            );
        }
    }
}
