//! Least squares from a measurement of a structured strategy, and every
//! workload query's answer with its exact variance, without densifying
//! where the structure allows (HDMM §6.3; ResidualPlanner §4).
//!
//! The measured strategy `Ã` (the kernel's quantized strategy, exposed
//! on the measurement: reconstructing with it makes `W x̂` exactly
//! unbiased) is a stack of terms `Ã_t = ⊗ᵢ F_{t,i}`, `F_{t,i} = 1ᵀ` off the
//! term's support. With i.i.d. noise of variance `v` on every row, least
//! squares is `x̂ = Ã⁺ y`, and a query `w` has variance `v ‖wᵀÃ⁺‖²`.
//!
//! * **Mutually orthogonal terms** (`Ã_t Ã_sᵀ = 0` for `t ≠ s`): a single
//!   Kronecker product, or a residual (marginal) strategy whose support
//!   factors have rows summing exactly to zero — then two terms with
//!   different supports differ on an attribute where one has a contrast
//!   and the other the ones row, and `F 1 = 0`. Then `ÃᵀÃ` is block
//!   diagonal over orthogonal row spaces, `Ã⁺ = [Ã_t⁺]_t` and
//!   `Ã_t⁺ = ⊗ᵢ F_{t,i}⁺` with `(1ᵀ)⁺ = 1/nᵢ`, so for a Kronecker query
//!   group `⊗ Wᵢ` the answers are `Σ_t (⊗ᵢ Wᵢ F_{t,i}⁺) y_t` and the
//!   variance of row `r` is `v Σ_t Πᵢ ‖(Wᵢ F_{t,i}⁺)_{rᵢ}‖²` (the terms'
//!   noises are independent). Only factor-sized matrices are formed: a
//!   marginal workload on 10¹² cells costs what its tables cost.
//! * **Permutation-invariant factor Grams** (`FᵀF = aI + b11ᵀ`, as in
//!   HDMM's marginals template): the residual basis diagonalizes `ÃᵀÃ`
//!   (`reconstruct_symmetric`), again by tables only.
//! * **Otherwise** a dense least squares on at most
//!   [`DENSE_RECONSTRUCTION_CELLS`] cells, and beyond preconditioned
//!   conjugate gradients on the structured normal equations
//!   (`reconstruct_iterative`) up to
//!   [`ITERATIVE_RECONSTRUCTION_CELLS`], refused beyond with an error
//!   naming the size.
//!
//! Either way a query group outside the row space of `Ã` (whose estimate
//! would be biased) is refused: with `P = Ã⁺Ã`, the group's
//! `‖W(I − P)‖²_F = tr(WᵀW) − tr(WᵀW P)` must vanish (relative 1e-9),
//! computed by factors as `Πᵢ tr(Gᵢ) − Σ_t Πᵢ tr(Gᵢ P_{t,i})`.

use std::collections::HashMap;

use rayon::prelude::*;

use dp_core::{DpError, MeasuredStrategy, Result};
use dp_linalg::{Mat, Par, pseudo_inverse, pseudo_inverse_symmetric};
use dp_workloads::structured::{StructuredWorkload, kron_matvec};

pub use crate::reconstruction::{
    CgOptions, CgReport, DENSE_RECONSTRUCTION_CELLS, EXACT_VARIANCE_BUDGET,
    ITERATIVE_RECONSTRUCTION_CELLS, Reconstruction, ReconstructionMethod, VarianceMethod,
};
use crate::reconstruction::{Problem, invalid, is_identity, not_estimable};

/// Relative tolerance of the row-space (unbiasedness) check.
const ROW_SPACE_TOLERANCE: f64 = 1e-9;

/// A term's factor on one attribute.
enum TermFactor {
    /// `1ᵀ` on an attribute of size n.
    Ones(usize),
    /// `F`, its pseudo-inverse `F⁺`, the projector `F⁺F`, and whether
    /// every row of `F` sums exactly to zero (a contrast).
    Matrix {
        pinv: Mat<f64>,
        projector: Mat<f64>,
        contrast: bool,
    },
}

impl TermFactor {
    fn is_contrast(&self) -> bool {
        matches!(self, Self::Matrix { contrast: true, .. })
    }
}

struct Term {
    /// The 1×1 factor of a term on no attribute (else 1).
    scalar: f64,
    /// The attributes with a matrix factor, increasing (the ones row
    /// elsewhere, never stored: a term on 3 of 100 attributes keeps 3).
    support: Vec<usize>,
    /// The matrix factors, one per support attribute.
    factors: Vec<TermFactor>,
    rows: usize,
    offset: usize,
}

impl Term {
    /// The factor on each of `d` attributes in order: `None` for the ones
    /// row.
    fn each_factor(&self, d: usize) -> impl Iterator<Item = Option<&TermFactor>> {
        let mut k = 0;
        (0..d).map(move |i| {
            if self.support.get(k) == Some(&i) {
                k += 1;
                Some(&self.factors[k - 1])
            } else {
                None
            }
        })
    }
}

/// The least-squares answers and variances of `workload` from the
/// measured `values` of `measured` (noise variance `noise_variance` per
/// row), by the orthogonal-terms or residual-basis closed forms when they
/// apply, a dense least squares on small domains, and conjugate gradients
/// on the structured normal equations otherwise.
pub fn reconstruct(
    workload: &StructuredWorkload,
    measured: &MeasuredStrategy,
    values: &[f64],
    noise_variance: f64,
) -> Result<Reconstruction> {
    Reconstructor::new(workload, measured)?.run(workload, measured, values, noise_variance)
}

/// A reconstruction prepared from the workload and the measured strategy
/// alone (checks, and on the orthogonal-terms path every pseudo-inverse
/// and per-query variance), so that a dry run before a charge and the
/// release after it share that work: [`Reconstructor::run`] then does
/// only what depends on the values.
pub struct Reconstructor {
    rows: usize,
    /// The workload's query count (as [`StructuredWorkload::num_queries`]).
    queries: f64,
    /// Of the strategy prepared for: `run` refuses another one.
    fingerprint: u64,
    orthogonal: Option<OrthogonalPlan>,
}

impl Reconstructor {
    /// Prepares the reconstruction of `workload` from `measured`: refuses
    /// a strategy that does not fit the domain and, on the
    /// orthogonal-terms path, a workload outside its row space.
    pub fn new(workload: &StructuredWorkload, measured: &MeasuredStrategy) -> Result<Self> {
        let rows = check_terms(measured, &workload.domain().shape())?;
        let orthogonal = if orthogonal_terms(measured) {
            Some(OrthogonalPlan::new(workload, measured)?)
        } else {
            None
        };
        Ok(Self {
            rows,
            queries: workload.num_queries(),
            fingerprint: fingerprint(measured),
            orthogonal,
        })
    }

    /// The per-query variances at unit noise variance, when known without
    /// the values (the orthogonal-terms path).
    pub fn unit_variances(&self) -> Option<&[f64]> {
        self.orthogonal.as_ref().map(|o| o.variances.as_slice())
    }

    /// The per-query fourth power sums of the noise coefficients
    /// ([`Reconstruction::fourth_powers`]), when known without the values
    /// (the orthogonal-terms path).
    pub fn unit_fourth_powers(&self) -> Option<&[f64]> {
        self.orthogonal.as_ref().map(|o| o.fourth.as_slice())
    }

    /// The answers and variances from the measured `values`, for the
    /// workload and strategy this was prepared with (a different strategy
    /// is refused).
    pub fn run(
        &self,
        workload: &StructuredWorkload,
        measured: &MeasuredStrategy,
        values: &[f64],
        noise_variance: f64,
    ) -> Result<Reconstruction> {
        if !(noise_variance.is_finite() && noise_variance > 0.0) {
            return Err(invalid(format!("noise variance {noise_variance}")));
        }
        if values.iter().any(|v| !v.is_finite()) {
            return Err(invalid("a measured value is not finite".into()));
        }
        if self.rows != values.len() {
            return Err(DpError::DimensionMismatch {
                what: format!(
                    "{} values for a strategy of {} rows",
                    values.len(),
                    self.rows
                ),
            });
        }
        if workload.num_queries().to_bits() != self.queries.to_bits()
            || fingerprint(measured) != self.fingerprint
        {
            return Err(invalid(
                "the workload or strategy is not the one this reconstruction was prepared for"
                    .into(),
            ));
        }
        if let Some(plan) = &self.orthogonal {
            return Ok(Reconstruction {
                answers: plan.answers(workload, values)?,
                variances: plan.variances.iter().map(|v| v * noise_variance).collect(),
                method: ReconstructionMethod::OrthogonalTerms,
                variance_method: VarianceMethod::Exact,
                fourth_powers: Some(plan.fourth.clone()),
                solver: None,
            });
        }
        let problem = Problem {
            workload,
            measured,
            values,
            noise_variance,
        };
        if let Some(r) = super::reconstruct_symmetric::symmetric(&problem) {
            return r;
        }
        if workload.domain().cells_f64() <= DENSE_RECONSTRUCTION_CELLS {
            return dense(&problem);
        }
        super::reconstruct_iterative::iterative(&problem, &CgOptions::default())
    }
}

/// Which marginals a measured strategy can estimate without bias, asked
/// one attribute set at a time (what a measurement file can answer, and
/// what a refused query did not measure). The marginal on `S` is in the
/// row space of `Ã` exactly when every query product whose non-constant
/// attributes are `S` is; the sets that are form a down-set (a marginal
/// on a subset is a sum of the marginal on `S`).
pub struct Estimable<'a> {
    measured: &'a MeasuredStrategy,
    domain: dp_workloads::domain::Domain,
    /// The terms and their index, when the terms are mutually
    /// orthogonal: then the check is by factors, `Πᵢ tr(Gᵢ) − Σ_t Πᵢ
    /// tr(Gᵢ P_{t,i})` on the terms the marginal reads.
    orthogonal: Option<(Vec<Term>, TermIndex)>,
}

impl<'a> Estimable<'a> {
    /// Prepares the checks of `measured` on `domain` (refused when a
    /// term does not fit it).
    pub fn new(
        measured: &'a MeasuredStrategy,
        domain: &dp_workloads::domain::Domain,
    ) -> Result<Self> {
        let shape = domain.shape();
        check_terms(measured, &shape)?;
        let orthogonal = if orthogonal_terms(measured) {
            let terms = build_terms(measured, &shape)?;
            let index = TermIndex::new(&terms);
            Some((terms, index))
        } else {
            None
        };
        Ok(Self {
            measured,
            domain: domain.clone(),
            orthogonal,
        })
    }

    /// Whether the marginal on `set` (attribute positions of the domain)
    /// lies in the row space of the strategy. Orthogonal terms are checked
    /// by factors; otherwise the marginal is reconstructed from
    /// data-independent values, with the release's own check.
    pub fn marginal(&self, set: &dp_workloads::structured::AttrSet) -> Result<bool> {
        let workload =
            StructuredWorkload::weighted_marginals(self.domain.clone(), &[(set.clone(), 1.0)])
                .map_err(|e| invalid(e.to_string()))?;
        if let Some((terms, index)) = &self.orthogonal {
            let factors = workload.marginal_factors(set);
            let product = QueryProduct::new(&factors, true)?;
            let read: Vec<&Term> = index
                .relevant(terms, &product)
                .into_iter()
                .map(|t| &terms[t])
                .collect();
            return Ok(check_row_space(0, &product, &read).is_ok());
        }
        let rows = check_terms(self.measured, &self.domain.shape())?;
        let probe: Vec<f64> = (0..rows).map(probe_value).collect();
        match reconstruct(&workload, self.measured, &probe, 1.0) {
            Ok(_) => Ok(true),
            Err(DpError::NotEstimable(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Value `i` of the data-independent values a reconstruction is dry-run
/// on: a fixed pseudo-random sequence in [-1, 1] (never all zeros, so
/// that an iterative solve has a right-hand side to converge on).
pub fn probe_value(i: usize) -> f64 {
    let h = (i as u64)
        .wrapping_add(1)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        >> 11;
    2.0 * (h as f64 / (1u64 << 53) as f64) - 1.0
}

/// A hash of the strategy's supports and factor entries (their bits).
fn fingerprint(measured: &MeasuredStrategy) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for t in &measured.terms {
        t.support.hash(&mut h);
        for f in &t.factors {
            (f.nrows(), f.ncols()).hash(&mut h);
            for j in 0..f.ncols() {
                for i in 0..f.nrows() {
                    f[(i, j)].to_bits().hash(&mut h);
                }
            }
        }
    }
    h.finish()
}

/// Validates the terms against the domain and returns the row count.
fn check_terms(measured: &MeasuredStrategy, shape: &[usize]) -> Result<usize> {
    let mut rows = 0usize;
    for t in &measured.terms {
        let ok_support =
            t.support.windows(2).all(|w| w[0] < w[1]) && t.support.iter().all(|&p| p < shape.len());
        let ok_factors = if t.support.is_empty() {
            t.factors.len() == 1 && t.factors[0].nrows() == 1 && t.factors[0].ncols() == 1
        } else {
            t.factors.len() == t.support.len()
                && t.support
                    .iter()
                    .zip(&t.factors)
                    .all(|(&p, f)| f.ncols() == shape[p] && f.nrows() > 0)
        };
        if !(ok_support && ok_factors) {
            return Err(DpError::DimensionMismatch {
                what: format!("a strategy term does not fit the domain {shape:?}"),
            });
        }
        let r = t
            .factors
            .iter()
            .try_fold(1usize, |acc, f| acc.checked_mul(f.nrows()));
        rows = r
            .and_then(|r| rows.checked_add(r))
            .ok_or_else(|| invalid("strategy rows overflow".into()))?;
    }
    if rows == 0 {
        return Err(invalid("the strategy has no terms".into()));
    }
    Ok(rows)
}

/// Whether the terms are provably mutually orthogonal: one term, or
/// distinct supports whose factors all have rows summing exactly to zero
/// (checked in exact integer arithmetic).
fn orthogonal_terms(measured: &MeasuredStrategy) -> bool {
    if measured.terms.len() == 1 {
        return true;
    }
    let mut supports: Vec<&Vec<usize>> = measured.terms.iter().map(|t| &t.support).collect();
    supports.sort();
    if supports.windows(2).any(|w| w[0] == w[1]) {
        return false;
    }
    measured
        .terms
        .iter()
        .filter(|t| !t.support.is_empty())
        .all(|t| t.factors.iter().all(rows_sum_to_zero))
}

/// The exponent of the lowest set bit of a finite nonzero `v`.
fn lowest_bit(v: f64) -> i32 {
    let bits = v.abs().to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let mant = if exp == 0 {
        bits & ((1 << 52) - 1)
    } else {
        (bits & ((1 << 52) - 1)) | (1 << 52)
    };
    exp.max(1) - 1075 + mant.trailing_zeros() as i32
}

/// Whether every row of `f` sums exactly to zero: the entries are
/// integers times `2^e` for the smallest lowest-set-bit exponent `e`,
/// summed exactly in i128 (false when that cannot be done exactly).
fn rows_sum_to_zero(f: &Mat<f64>) -> bool {
    let mut e = i32::MAX;
    let mut e_max = i32::MIN;
    for j in 0..f.ncols() {
        for i in 0..f.nrows() {
            let v = f[(i, j)];
            if v != 0.0 {
                e = e.min(lowest_bit(v));
                e_max = e_max.max(v.abs().log2().ceil() as i32);
            }
        }
    }
    if e == i32::MAX {
        return true;
    }
    // Integers of at most 100 bits, at most 2²⁰ of them per row.
    if e_max - e > 100 || f.ncols() > 1 << 20 {
        return false;
    }
    let scale = 2f64.powi(-e);
    (0..f.nrows()).all(|i| {
        (0..f.ncols())
            .map(|j| (f[(i, j)] * scale) as i128)
            .sum::<i128>()
            == 0
    })
}

/// A factor matrix by its shape and the bits of its entries.
type FactorKey = (usize, usize, Vec<u64>);

/// A factor's pseudo-inverse, projector and whether it is a contrast.
type SolvedFactor = (Mat<f64>, Mat<f64>, bool);

fn build_terms(measured: &MeasuredStrategy, shape: &[usize]) -> Result<Vec<Term>> {
    let mut offset = 0;
    let mut out = Vec::with_capacity(measured.terms.len());
    // Terms often share a factor (a residual strategy's contrasts of one
    // attribute): each distinct matrix is pseudo-inverted once.
    let mut solved: HashMap<FactorKey, SolvedFactor> = HashMap::new();
    for t in &measured.terms {
        let (scalar, factors) = if t.support.is_empty() {
            (t.factors[0][(0, 0)], Vec::new())
        } else {
            (1.0, t.factors.iter().collect())
        };
        let mut fs = Vec::with_capacity(t.support.len());
        for (i, _) in shape.iter().enumerate() {
            match t.support.iter().position(|&p| p == i) {
                None => {}
                Some(k) => {
                    let f = factors[k];
                    let key = (
                        f.nrows(),
                        f.ncols(),
                        (0..f.ncols())
                            .flat_map(|j| (0..f.nrows()).map(move |r| f[(r, j)].to_bits()))
                            .collect(),
                    );
                    let (pinv, projector, contrast) = match solved.get(&key) {
                        Some(done) => done.clone(),
                        None => {
                            let pinv = pseudo_inverse(f.as_ref(), None)?;
                            let projector = dp_linalg::gemm(pinv.as_ref(), f.as_ref(), Par::Seq);
                            let done = (pinv, projector, rows_sum_to_zero(f));
                            solved.insert(key, done.clone());
                            done
                        }
                    };
                    fs.push(TermFactor::Matrix {
                        pinv,
                        projector,
                        contrast,
                    });
                }
            }
        }
        let rows: usize = t.factors.iter().map(|f| f.nrows()).product();
        out.push(Term {
            scalar,
            support: t.support.clone(),
            factors: fs,
            rows,
            offset,
        });
        offset += rows;
    }
    Ok(out)
}

/// `tr(WᵀW P) = ‖W P‖²_F` for a workload factor `W` and a term factor's
/// projector `P` (symmetric and idempotent), without forming the n×n
/// Gram `WᵀW`: `P = 11ᵀ/n` for the ones row gives `Σ_r (row sum_r)²/n`.
fn trace_gp(w: &Mat<f64>, f: &TermFactor) -> f64 {
    match f {
        TermFactor::Ones(n) => {
            let s: f64 = (0..w.nrows())
                .map(|r| (0..w.ncols()).map(|j| w[(r, j)]).sum::<f64>().powi(2))
                .sum();
            s / *n as f64
        }
        // W = I: tr(P).
        TermFactor::Matrix { projector, .. } if is_identity(w) => {
            (0..projector.nrows()).map(|i| projector[(i, i)]).sum()
        }
        TermFactor::Matrix { projector, .. } => {
            dp_linalg::frobenius_norm(product(w, projector).as_ref()).powi(2)
        }
    }
}

/// Whether every row of `w` is constant.
fn constant_rows(w: &Mat<f64>) -> bool {
    (0..w.nrows()).all(|r| (1..w.ncols()).all(|j| w[(r, j)] == w[(r, 0)]))
}

/// `Wᵢ F⁺` (mᵢ × rows of F), or `Wᵢ 1/nᵢ` (mᵢ × 1) for the ones row.
/// An identity `Wᵢ` (every marginal's kept attribute) gives `F⁺` itself,
/// without an n³ product per workload product and term.
fn query_factor(w: &Mat<f64>, f: &TermFactor) -> Mat<f64> {
    match f {
        TermFactor::Ones(n) => Mat::from_fn(w.nrows(), 1, |r, _| {
            (0..w.ncols()).map(|j| w[(r, j)]).sum::<f64>() / *n as f64
        }),
        TermFactor::Matrix { pinv, .. } if is_identity(w) => pinv.clone(),
        TermFactor::Matrix { pinv, .. } => product(w, pinv),
    }
}

/// `A B`, on rayon's pool when it is over 2²² multiply-adds.
fn product(a: &Mat<f64>, b: &Mat<f64>) -> Mat<f64> {
    let par = if a.nrows() * a.ncols() * b.ncols() >= 1 << 22 {
        Par::rayon(0)
    } else {
        Par::Seq
    };
    dp_linalg::gemm(a.as_ref(), b.as_ref(), par)
}

/// The orthogonal-terms reconstruction's value-independent part: the
/// terms' pseudo-inverses, which terms each query product reads, and every
/// query's variance at unit noise variance.
struct OrthogonalPlan {
    terms: Vec<Term>,
    /// Per workload product, the indices of the terms it reads.
    relevant: Vec<Vec<usize>>,
    variances: Vec<f64>,
    /// `Σⱼ cⱼ⁴` per query: `Σ_t s⁴ Πᵢ ‖(Wᵢ F_{t,i}⁺)_{rᵢ}‖₄⁴`.
    fourth: Vec<f64>,
}

impl OrthogonalPlan {
    fn new(workload: &StructuredWorkload, measured: &MeasuredStrategy) -> Result<Self> {
        let terms = build_terms(measured, &workload.domain().shape())?;
        let index = TermIndex::new(&terms);
        let products = workload.products();
        let (sizes, total) = product_sizes(&products)?;
        let mut variances = super::resources::try_zeros(Some(total), "the variances")?;
        let mut fourth = super::resources::try_zeros(Some(total), "the fourth power sums")?;
        // Products are independent: each fills its own slice of the outputs.
        let work: Vec<_> = products
            .iter()
            .zip(split_by(&mut variances, &sizes))
            .zip(split_by(&mut fourth, &sizes))
            .enumerate()
            .collect();
        let progress = Products::new("query products' variances", work.len());
        let relevant = work
            .into_par_iter()
            .map(|(p, (((c, factors), var), quartic))| {
                progress.check()?;
                let product = QueryProduct::new(factors, true)?;
                let reads = index.relevant(&terms, &product);
                let read: Vec<&Term> = reads.iter().map(|&t| &terms[t]).collect();
                check_row_space(p, &product, &read)?;
                for t in read {
                    // Row power sums of each Wᵢ F⁺, multiplied out over
                    // attributes: the coefficients of a term's noise are a
                    // Kronecker product of those rows.
                    let (qs, scalar) = product.query_factors(t);
                    let s = c / t.scalar * scalar;
                    for (power, out) in [(2, &mut *var), (4, &mut *quartic)] {
                        let sums: Vec<Vec<f64>> = qs
                            .iter()
                            .map(|q| {
                                (0..q.nrows())
                                    .map(|r| (0..q.ncols()).map(|j| q[(r, j)].powi(power)).sum())
                                    .collect()
                            })
                            .collect();
                        add_outer_product(out, s.powi(power), &sums);
                    }
                }
                progress.done();
                Ok(reads)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            terms,
            relevant,
            variances,
            fourth,
        })
    }

    /// The workload's answers from the measured `values`.
    fn answers(&self, workload: &StructuredWorkload, values: &[f64]) -> Result<Vec<f64>> {
        let products = workload.products();
        let (sizes, total) = product_sizes(&products)?;
        let mut answers = super::resources::try_zeros(Some(total), "the answers")?;
        let work: Vec<_> = products
            .iter()
            .zip(&self.relevant)
            .zip(split_by(&mut answers, &sizes))
            .collect();
        let progress = Products::new("query products answered", work.len());
        work.into_par_iter()
            .try_for_each(|(((c, factors), reads), ans)| -> Result<()> {
                progress.check()?;
                let product = QueryProduct::new(factors, false)?;
                for t in reads.iter().map(|&t| &self.terms[t]) {
                    let (qs, scalar) = product.query_factors(t);
                    let refs: Vec<&Mat<f64>> = qs.iter().collect();
                    let y = &values[t.offset..t.offset + t.rows];
                    // Square factors (e.g. a Kronecker plan's): in place on
                    // one copy of the term's values, no per-mode
                    // intermediates.
                    let part = if qs.iter().all(|q| q.nrows() == q.ncols()) {
                        let mut part = y.to_vec();
                        super::reconstruct_kron::kron_apply_in_place(&refs, &mut part, Par::Seq)?;
                        part
                    } else {
                        kron_matvec(&refs, y)?
                    };
                    let s = c / t.scalar * scalar;
                    for (a, p) in ans.iter_mut().zip(&part) {
                        *a += s * p;
                    }
                }
                progress.done();
                Ok(())
            })?;
        Ok(answers)
    }
}

/// The query products a parallel loop has done, shown as a progress stage
/// ([`dp_core::progress`]), and the caller's interrupt, read on the
/// loop's workers (rayon's threads have no current token). Inside a
/// release's charge no token is current and nothing stops the loop.
struct Products {
    stage: dp_core::progress::StageGuard,
    token: Option<dp_core::interrupt::Interrupt>,
}

impl Products {
    fn new(what: &'static str, n: usize) -> Self {
        Self {
            stage: dp_core::progress::stage(what, n as u64),
            token: dp_core::interrupt::current(),
        }
    }

    /// [`DpError::Interrupted`] when the caller's token was triggered.
    fn check(&self) -> Result<()> {
        match &self.token {
            Some(t) if t.is_triggered() => Err(DpError::Interrupted),
            _ => Ok(()),
        }
    }

    fn done(&self) {
        self.stage.add(1);
    }
}

/// Each query product's number of queries, and their total (refused when
/// it overflows).
fn product_sizes(
    products: &[(f64, Vec<dp_workloads::structured::Factor>)],
) -> Result<(Vec<usize>, usize)> {
    let overflow = || DpError::MemoryLimit("the workload has more than 2^64 queries".into());
    let sizes = products
        .iter()
        .map(|(_, fs)| {
            fs.iter()
                .try_fold(1usize, |acc, f| acc.checked_mul(f.num_queries()))
                .ok_or_else(overflow)
        })
        .collect::<Result<Vec<usize>>>()?;
    let total = sizes
        .iter()
        .try_fold(0usize, |acc, &m| acc.checked_add(m))
        .ok_or_else(overflow)?;
    Ok((sizes, total))
}

/// `out` split into consecutive slices of the given lengths (which sum
/// to its length).
fn split_by<'a>(mut out: &'a mut [f64], sizes: &[usize]) -> Vec<&'a mut [f64]> {
    let mut parts = Vec::with_capacity(sizes.len());
    for &m in sizes {
        let (head, tail) = std::mem::take(&mut out).split_at_mut(m);
        parts.push(head);
        out = tail;
    }
    parts
}

/// `out += scale · (v₁ ⊗ v₂ ⊗ …)`, the first vector's index slowest (the
/// row order of a Kronecker product of column vectors).
fn add_outer_product(out: &mut [f64], scale: f64, vs: &[Vec<f64>]) {
    let Some((last, first)) = vs.split_last() else {
        if let Some(o) = out.first_mut() {
            *o += scale;
        }
        return;
    };
    let mut acc = vec![scale];
    for v in first {
        let mut next = Vec::with_capacity(acc.len() * v.len());
        for &a in &acc {
            next.extend(v.iter().map(|&b| a * b));
        }
        acc = next;
    }
    // The last factor straight into `out`, with no product vector.
    for (chunk, &a) in out.chunks_mut(last.len()).zip(&acc) {
        for (o, &b) in chunk.iter_mut().zip(last) {
            *o += a * b;
        }
    }
}

/// One query product's explicit factors, with what every term shares on
/// them: which attributes keep more than one row, each single-row
/// factor's value against the ones row, and `tr(Gᵢ P)` for the ones row.
struct QueryProduct {
    ws: Vec<Mat<f64>>,
    /// `Wᵢ 1/nᵢ` where `Wᵢ` has one row (a marginal's summed-out
    /// attribute: 1), else NaN (never read).
    ones_value: Vec<f64>,
    /// `tr(Wᵢᵀ Wᵢ 11ᵀ/nᵢ)` (empty when made for the answers only).
    ones_trace: Vec<f64>,
    /// Attributes whose rows are all constant (a contrast term there
    /// contributes exactly nothing; empty when made for the answers only).
    constant: Vec<bool>,
}

impl QueryProduct {
    /// The product of `factors`; with `for_planning`, also what the term
    /// lookup and the row-space check read (the answers pass, given the
    /// terms already found, needs only the factors and ones values).
    fn new(factors: &[dp_workloads::structured::Factor], for_planning: bool) -> Result<Self> {
        let ws: Vec<Mat<f64>> = factors
            .iter()
            .map(dp_workloads::structured::Factor::explicit)
            .collect::<std::result::Result<_, _>>()?;
        let ones_value = ws
            .iter()
            .map(|w| {
                if w.nrows() == 1 {
                    (0..w.ncols()).map(|j| w[(0, j)]).sum::<f64>() / w.ncols() as f64
                } else {
                    f64::NAN
                }
            })
            .collect();
        let (ones_trace, constant) = if for_planning {
            (
                ws.iter()
                    .map(|w| trace_gp(w, &TermFactor::Ones(w.ncols())))
                    .collect(),
                ws.iter().map(constant_rows).collect(),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        Ok(Self {
            ws,
            ones_value,
            ones_trace,
            constant,
        })
    }

    /// Term `t`'s query factors `Wᵢ F_{t,i}⁺` on the attributes where one
    /// is more than a scalar (the query keeps several rows, or the term
    /// has a matrix factor), in attribute order, and the product of the
    /// scalars `Wᵢ 1/nᵢ` elsewhere. Single-row, single-column factors do
    /// not change a Kronecker product's layout, so the answers and power
    /// sums are those of the full product, at a cost in the attributes
    /// that matter.
    fn query_factors(&self, t: &Term) -> (Vec<Mat<f64>>, f64) {
        let mut qs = Vec::new();
        let mut scalar = 1.0;
        for (i, (w, f)) in self.ws.iter().zip(t.each_factor(self.ws.len())).enumerate() {
            match f {
                None if w.nrows() == 1 => scalar *= self.ones_value[i],
                None => qs.push(query_factor(w, &TermFactor::Ones(w.ncols()))),
                Some(f) => qs.push(query_factor(w, f)),
            }
        }
        if qs.is_empty() {
            qs.push(Mat::from_fn(1, 1, |_, _| 1.0));
        }
        (qs, scalar)
    }
}

/// The terms by the attributes where their factor is a contrast, so that
/// a query product finds the terms it reads among the subsets of its
/// non-constant attributes instead of scanning every term.
struct TermIndex {
    by_contrasts: HashMap<Vec<usize>, Vec<usize>>,
}

/// Most non-constant attributes a query product's subsets are enumerated
/// over; beyond, every term is scanned.
const MAX_ENUMERATED_ATTRIBUTES: usize = 16;

impl TermIndex {
    fn new(terms: &[Term]) -> Self {
        let mut by_contrasts: HashMap<Vec<usize>, Vec<usize>> = HashMap::new();
        for (k, t) in terms.iter().enumerate() {
            by_contrasts.entry(contrasts(t)).or_default().push(k);
        }
        Self { by_contrasts }
    }

    /// The terms query product `q` reads, increasing. A term contributes
    /// nothing when, on some attribute, the query factor has constant rows
    /// (a multiple of 1ᵀ per row) and the term's factor is a contrast:
    /// then `Wᵢ F⁺ = c 1ᵀFᵀ(FFᵀ)⁻¹ = 0` exactly. So a term is read iff its
    /// contrast attributes are among the query's non-constant ones.
    fn relevant(&self, terms: &[Term], q: &QueryProduct) -> Vec<usize> {
        let free: Vec<usize> = (0..q.constant.len()).filter(|&i| !q.constant[i]).collect();
        let mut reads = Vec::new();
        if free.len() <= MAX_ENUMERATED_ATTRIBUTES {
            for mask in 0u32..(1 << free.len()) {
                let key: Vec<usize> = (0..free.len())
                    .filter(|&b| mask & (1 << b) != 0)
                    .map(|b| free[b])
                    .collect();
                if let Some(ts) = self.by_contrasts.get(&key) {
                    reads.extend_from_slice(ts);
                }
            }
            reads.sort_unstable();
        } else {
            reads = (0..terms.len())
                .filter(|&t| {
                    !terms[t]
                        .support
                        .iter()
                        .zip(&terms[t].factors)
                        .any(|(&i, f)| q.constant[i] && f.is_contrast())
                })
                .collect();
        }
        reads
    }
}

/// The attributes where term `t`'s factor is a contrast, increasing.
fn contrasts(t: &Term) -> Vec<usize> {
    t.support
        .iter()
        .zip(&t.factors)
        .filter(|(_, f)| f.is_contrast())
        .map(|(&i, _)| i)
        .collect()
}

/// Refuses query product `p` when it leaves the row space of the
/// orthogonal terms: `Πᵢ tr(Gᵢ) − Σ_t Πᵢ tr(Gᵢ P_{t,i})`.
fn check_row_space(p: usize, q: &QueryProduct, terms: &[&Term]) -> Result<()> {
    // tr(Gᵢ) = ‖Wᵢ‖²_F: no n×n Gram is formed (an attribute summed out
    // may have 10⁵ values).
    let total: f64 =
        q.ws.iter()
            .map(|w| dp_linalg::frobenius_norm(w.as_ref()).powi(2))
            .product();
    let covered: f64 = terms
        .iter()
        .map(|t| {
            q.ws.iter()
                .zip(t.each_factor(q.ws.len()))
                .enumerate()
                .map(|(i, (w, f))| match f {
                    None => q.ones_trace[i],
                    Some(f) => trace_gp(w, f),
                })
                .product::<f64>()
        })
        .sum();
    let gap = total - covered;
    if gap.is_finite() && gap.abs() <= ROW_SPACE_TOLERANCE * total {
        Ok(())
    } else {
        Err(not_estimable(p))
    }
}

/// The dense measured strategy, ones rows written out.
fn dense_strategy(measured: &MeasuredStrategy, shape: &[usize]) -> Result<Mat<f64>> {
    let blocks: Vec<Mat<f64>> = measured
        .terms
        .iter()
        .map(|t| {
            let mats: Vec<Mat<f64>> = (0..shape.len())
                .map(|i| match t.support.iter().position(|&p| p == i) {
                    Some(k) => t.factors[k].clone(),
                    None => Mat::from_fn(1, shape[i], |_, _| 1.0),
                })
                .collect();
            let scalar = if t.support.is_empty() {
                t.factors[0][(0, 0)]
            } else {
                1.0
            };
            dp_workloads::structured::kron_all(&mats) * scalar
        })
        .collect();
    Ok(dp_linalg::stack_rows(&blocks, shape.iter().product())?)
}

fn dense(problem: &Problem) -> Result<Reconstruction> {
    let (workload, measured) = (problem.workload, problem.measured);
    let (values, v) = (problem.values, problem.noise_variance);
    let a = dense_strategy(measured, &workload.domain().shape())?;
    let w = workload.dense_matrix()?;
    let ata = dp_linalg::gram(a.as_ref(), Par::Seq);
    let x = pseudo_inverse_symmetric(ata.as_ref(), None)?;
    // Unbiased only if W X AᵀA = W.
    let proj = dp_linalg::gemm(x.as_ref(), ata.as_ref(), Par::Seq);
    let wp = dp_linalg::gemm(w.as_ref(), proj.as_ref(), Par::Seq);
    let scale = dp_linalg::frobenius_norm(w.as_ref());
    for r in 0..w.nrows() {
        let gap: f64 = (0..w.ncols())
            .map(|j| (w[(r, j)] - wp[(r, j)]).powi(2))
            .sum::<f64>()
            .sqrt();
        // NaN fails too.
        if gap.is_nan() || gap > 1e-7 * scale {
            return Err(not_estimable_row(r));
        }
    }
    let y = Mat::from_fn(values.len(), 1, |i, _| values[i]);
    let aty = dp_linalg::gemm(a.transpose(), y.as_ref(), Par::Seq);
    let xhat = dp_linalg::gemm(x.as_ref(), aty.as_ref(), Par::Seq);
    let ans = dp_linalg::gemm(w.as_ref(), xhat.as_ref(), Par::Seq);
    let wx = dp_linalg::gemm(w.as_ref(), x.as_ref(), Par::Seq);
    let variances = (0..w.nrows())
        .map(|r| v * (0..w.ncols()).map(|j| wx[(r, j)] * w[(r, j)]).sum::<f64>())
        .collect();
    // The noise coefficients W (AᵀA)⁺ Aᵀ, row by row.
    let coefficients = dp_linalg::gemm(wx.as_ref(), a.transpose(), Par::Seq);
    let fourth = (0..w.nrows())
        .map(|r| (0..a.nrows()).map(|j| coefficients[(r, j)].powi(4)).sum())
        .collect();
    Ok(Reconstruction {
        answers: (0..w.nrows()).map(|r| ans[(r, 0)]).collect(),
        variances,
        method: ReconstructionMethod::Dense,
        variance_method: VarianceMethod::Exact,
        fourth_powers: Some(fourth),
        solver: None,
    })
}

fn not_estimable_row(r: usize) -> DpError {
    DpError::NotEstimable(format!(
        "query {r} of the workload is not in the row space of the strategy (its estimate \
         would be biased): the plan does not fit this workload"
    ))
}

#[cfg(test)]
#[path = "reconstruct_tests.rs"]
mod tests;
