//! Least squares in the residual basis for strategies whose factor Grams
//! are permutation-invariant (HDMM's marginals template OPT_M, §6.3:
//! weighted marginals, identity factors on each marginal's attributes).
//!
//! If every factor of every term has `Fᵀ F = a I + b 11ᵀ` (an identity,
//! a ones row, any scaling of them), then with the residual projectors
//! `P_T = ⊗_{i∈T} P⊥ᵢ ⊗_{i∉T} P¹ᵢ` (`P¹ = 11ᵀ/n`, `P⊥ = I − P¹`)
//!
//! `ÃᵀÃ = Σ_T λ_T P_T`, `λ_T = Σ_{t: T⊆S_t} Π_{i∈T} a_{t,i} Π_{i∈S_t∖T} (a_{t,i} + nᵢ b_{t,i}) Π_{i∉S_t} nᵢ`
//!
//! (McKenna et al. 2018, §6.3; the eigen-structure of marginal Grams), so
//! `x̂ = Σ_T λ_T⁻¹ P_T Ãᵀ y`. `Ãᵀ y = Σ_t u_t ⊗ 1` with `u_t` a table on
//! the term's support `S_t`, and `P_T (u_t ⊗ 1) = c_{t,T} ⊗ 1` where
//! `c_{t,T}` averages `u_t` over `S_t ∖ T` and centres it along `T`.
//! A Kronecker query group `⊗ Wᵢ` then has answers
//! `Σ_T λ_T⁻¹ (⊗_{i∈T} Wᵢ ⊗_{i∉T} Wᵢ1) c_T` and variances
//! `v Σ_T λ_T⁻¹ Π_{i∈T} diag(Wᵢ P⊥ Wᵢᵀ) Π_{i∉T} (Wᵢ1)²/nᵢ`, where `T` runs
//! over the sets with `W P_T ≠ 0`: `Z ⊆ T ⊆ N` (`N` the attributes where
//! some row of `Wᵢ` is not constant, `Z` those where every row sums to 0).
//! A needed `T` with `λ_T = 0` leaves the row space: refused.

use std::collections::HashMap;

use dp_core::kernel::marginals::sum_table;
use dp_core::{DpError, Result};
use dp_linalg::Mat;
use dp_workloads::structured::{StructuredWorkload, kron_matvec};

use crate::reconstruction::{
    Problem, Reconstruction, ReconstructionMethod, VarianceMethod, explicit_products, not_estimable,
};

/// Most attributes of one query group whose subsets are enumerated.
const MAX_FREE_ATTRIBUTES: usize = 20;

/// Relative tolerance of the `aI + b11ᵀ` test and of a zero eigenvalue.
const TOL: f64 = 1e-12;

struct Term {
    support: Vec<usize>,
    /// `(a, b)` per support attribute.
    ab: Vec<(f64, f64)>,
    /// `u_t = (⊗ Fᵀ) y_t`, a table on the support.
    u: Vec<f64>,
    /// `c²` for a term `c 1ᵀ` on no attribute, else 1.
    gain: f64,
    /// The factors on the support (`[c]` for a term on no attribute).
    factors: Vec<Mat<f64>>,
}

fn invalid(reason: String) -> DpError {
    DpError::InvalidParameter {
        name: "reconstruction",
        reason,
    }
}

/// `(a, b)` with `FᵀF = aI + b11ᵀ` (relative [`TOL`]), if so.
fn gram_form(f: &Mat<f64>) -> Option<(f64, f64)> {
    let g = dp_linalg::gram(f.as_ref(), dp_linalg::Par::Seq);
    let n = g.nrows();
    let b = if n > 1 { g[(0, 1)] } else { 0.0 };
    let a = g[(0, 0)] - b;
    let scale = (0..n).map(|i| g[(i, i)].abs()).fold(0.0, f64::max);
    let ok = (0..n).all(|i| {
        (0..n).all(|j| {
            let want = if i == j { a + b } else { b };
            (g[(i, j)] - want).abs() <= TOL * scale
        })
    });
    ok.then_some((a, b))
}

/// Subtracts the mean along each axis of a table of `dims`.
fn centre(table: &mut [f64], dims: &[usize]) {
    for k in 0..dims.len() {
        let inner: usize = dims[k + 1..].iter().product();
        let outer: usize = dims[..k].iter().product();
        let n = dims[k];
        for o in 0..outer {
            for r in 0..inner {
                let at = |j: usize| (o * n + j) * inner + r;
                let mean = (0..n).map(|j| table[at(j)]).sum::<f64>() / n as f64;
                for j in 0..n {
                    table[at(j)] -= mean;
                }
            }
        }
    }
}

/// The symmetric-Gram reconstruction, or `None` when some factor's Gram
/// is not of the form `aI + b11ᵀ`.
pub(super) fn symmetric(problem: &Problem) -> Option<Result<Reconstruction>> {
    let (workload, measured) = (problem.workload, problem.measured);
    let (values, v) = (problem.values, problem.noise_variance);
    let shape = workload.domain().shape();
    let mut terms = Vec::with_capacity(measured.terms.len());
    let mut offset = 0;
    for t in &measured.terms {
        let rows: usize = t.factors.iter().map(|f| f.nrows()).product();
        let y = &values[offset..offset + rows];
        offset += rows;
        if t.support.is_empty() {
            let c = t.factors[0][(0, 0)];
            terms.push(Term {
                support: Vec::new(),
                ab: Vec::new(),
                u: vec![c * y[0]],
                gain: c * c,
                factors: t.factors.clone(),
            });
            continue;
        }
        let ab = t
            .factors
            .iter()
            .map(gram_form)
            .collect::<Option<Vec<_>>>()?;
        let ft: Vec<Mat<f64>> = t.factors.iter().map(|f| f.transpose().to_owned()).collect();
        let refs: Vec<&Mat<f64>> = ft.iter().collect();
        let u = match kron_matvec(&refs, y) {
            Ok(u) => u,
            Err(e) => return Some(Err(e.into())),
        };
        terms.push(Term {
            support: t.support.clone(),
            ab,
            u,
            gain: 1.0,
            factors: t.factors.clone(),
        });
    }
    Some(answer_all(workload, &shape, &terms, v))
}

/// `λ_T` and `c_T` (a table on T), cached per T.
struct Residuals<'a> {
    shape: &'a [usize],
    terms: &'a [Term],
    cache: HashMap<Vec<usize>, (f64, Vec<f64>)>,
    max_lambda: f64,
}

impl Residuals<'_> {
    fn get(&mut self, set: &[usize]) -> &(f64, Vec<f64>) {
        if !self.cache.contains_key(set) {
            let value = self.compute(set);
            self.max_lambda = self.max_lambda.max(value.0);
            self.cache.insert(set.to_vec(), value);
        }
        &self.cache[set]
    }

    fn compute(&self, set: &[usize]) -> (f64, Vec<f64>) {
        let cells: usize = set.iter().map(|&i| self.shape[i]).product();
        let (mut lambda, mut c) = (0.0, vec![0.0; cells]);
        for t in self.terms {
            if !set.iter().all(|i| t.support.contains(i)) {
                continue;
            }
            let mut l = t.gain;
            let mut avg = 1.0;
            for (i, &n) in self.shape.iter().enumerate() {
                match t.support.iter().position(|&p| p == i) {
                    Some(k) if set.contains(&i) => l *= t.ab[k].0,
                    Some(k) => {
                        l *= t.ab[k].0 + n as f64 * t.ab[k].1;
                        avg *= n as f64;
                    }
                    None => l *= n as f64,
                }
            }
            lambda += l;
            let part = sum_table(&t.u, &t.support, self.shape, set, |a, b| a + b);
            for (ci, p) in c.iter_mut().zip(part) {
                *ci += p / avg;
            }
        }
        let dims: Vec<usize> = set.iter().map(|&i| self.shape[i]).collect();
        centre(&mut c, &dims);
        (lambda, c)
    }
}

fn answer_all(
    workload: &StructuredWorkload,
    shape: &[usize],
    terms: &[Term],
    v: f64,
) -> Result<Reconstruction> {
    let mut res = Residuals {
        shape,
        terms,
        cache: HashMap::new(),
        max_lambda: 0.0,
    };
    // Seeds the scale of the zero test below (the largest λ met so far)
    // with the supports' own λ before any query is answered.
    for t in terms {
        res.get(&t.support);
    }
    let (mut answers, mut variances) = (Vec::new(), Vec::new());
    let mut fourth = Some(Vec::new());
    for (p, (c, ws)) in explicit_products(workload)?.into_iter().enumerate() {
        let rowsum: Vec<Mat<f64>> = ws
            .iter()
            .map(|w| Mat::from_fn(w.nrows(), 1, |r, _| (0..w.ncols()).map(|j| w[(r, j)]).sum()))
            .collect();
        let free: Vec<usize> = (0..ws.len())
            .filter(|&i| {
                (0..ws[i].nrows())
                    .any(|r| (1..ws[i].ncols()).any(|j| ws[i][(r, j)] != ws[i][(r, 0)]))
            })
            .collect();
        let zero: Vec<usize> = (0..ws.len())
            .filter(|&i| (0..ws[i].nrows()).all(|r| rowsum[i][(r, 0)] == 0.0))
            .collect();
        let m = ws
            .iter()
            .try_fold(1usize, |acc, w| acc.checked_mul(w.nrows()));
        let mut ans = super::resources::try_zeros(m, "the answers")?;
        let mut var = super::resources::try_zeros(m, "the variances")?;
        let mut sets = Vec::new();
        if zero.iter().all(|z| free.contains(z)) {
            let optional: Vec<usize> = free.iter().copied().filter(|i| !zero.contains(i)).collect();
            if optional.len() > MAX_FREE_ATTRIBUTES {
                return Err(invalid(format!(
                    "query product {p} varies over {} attributes: at most {MAX_FREE_ATTRIBUTES} \
                     are supported by the residual-basis reconstruction",
                    optional.len()
                )));
            }
            for mask in 0u64..(1 << optional.len()) {
                let mut set: Vec<usize> = zero.clone();
                set.extend(
                    (0..optional.len())
                        .filter(|b| mask >> b & 1 == 1)
                        .map(|b| optional[b]),
                );
                set.sort_unstable();
                let (lambda, table) = res.get(&set).clone();
                if lambda.is_nan() || lambda <= TOL * res.max_lambda {
                    return Err(not_estimable(p));
                }
                add_part(
                    &ws, &rowsum, &set, shape, &table, lambda, v, &mut ans, &mut var,
                )?;
                sets.push((set, lambda));
            }
        }
        fourth = match fourth {
            Some(mut all) => fourth_powers(&ws, &rowsum, shape, terms, &sets)?.map(|f| {
                all.extend(f.iter().map(|x| c.powi(4) * x));
                all
            }),
            None => None,
        };
        answers.extend(ans.iter().map(|a| c * a));
        variances.extend(var.iter().map(|s| c * c * s));
    }
    Ok(Reconstruction {
        answers,
        variances,
        method: ReconstructionMethod::ResidualBasis,
        variance_method: VarianceMethod::Exact,
        fourth_powers: fourth,
        solver: None,
    })
}

/// Most ordered quadruples of residual sets expanded per term by
/// [`fourth_powers`] (past it the fourth powers are not computed).
const MAX_QUADRUPLES: usize = 1 << 20;

/// `Σⱼ cⱼ⁴` of each query row of one product (`ws`, row sums `rowsum`),
/// whose answer reads the residual sets `sets` (with their `λ_T`).
///
/// A query `w = ⊗ wᵢ` has noise coefficients `Ã (ÃᵀÃ)⁻¹ w`; on term `t`
/// (support `S_t`) they are
/// `Πᵢ∉S_t (1ᵀwᵢ) · Σ_{T⊆S_t} λ_T⁻¹ ⊗ᵢ∈S_t h_{T,i}`, with
/// `h_{T,i} = F (wᵢ − mᵢ1)` for `i ∈ T` and `F 1 mᵢ` otherwise
/// (`mᵢ = 1ᵀwᵢ/nᵢ`): `1ᵀ P⊥ = 0` drops the sets leaving the support. The
/// fourth power of that sum, expanded over ordered quadruples of sets,
/// factors over attributes: attribute `i` contributes
/// `Σⱼ pⱼᵏ qⱼ⁴⁻ᵏ` (`p = F(wᵢ − mᵢ1)`, `q = F1 mᵢ`) where `k` counts the
/// quadruple's sets holding `i`. `None` when a term would expand more than
/// [`MAX_QUADRUPLES`] quadruples.
fn fourth_powers(
    ws: &[Mat<f64>],
    rowsum: &[Mat<f64>],
    shape: &[usize],
    terms: &[Term],
    sets: &[(Vec<usize>, f64)],
) -> Result<Option<Vec<f64>>> {
    let rows: usize = ws.iter().map(|w| w.nrows()).product();
    let mut out = super::resources::try_zeros(Some(rows), "the fourth power sums")?;
    for t in terms {
        let reads: Vec<&(Vec<usize>, f64)> = sets
            .iter()
            .filter(|(set, _)| set.iter().all(|i| t.support.contains(i)))
            .collect();
        if reads.is_empty() {
            continue;
        }
        if reads
            .len()
            .checked_pow(4)
            .is_none_or(|q| q > MAX_QUADRUPLES)
        {
            return Ok(None);
        }
        let scalar = if t.support.is_empty() {
            t.factors[0][(0, 0)]
        } else {
            1.0
        };
        // Per support attribute, μ(r, k) = Σⱼ pⱼᵏ qⱼ⁴⁻ᵏ for k = 0..=4.
        let mu: Vec<Vec<[f64; 5]>> = t
            .support
            .iter()
            .zip(&t.factors)
            .map(|(&i, f)| {
                let (w, n) = (&ws[i], shape[i] as f64);
                let ones: Vec<f64> = (0..f.nrows())
                    .map(|j| (0..f.ncols()).map(|k| f[(j, k)]).sum())
                    .collect();
                let wf = dp_linalg::gemm(w.as_ref(), f.transpose(), dp_linalg::Par::Seq);
                (0..w.nrows())
                    .map(|r| {
                        let m = rowsum[i][(r, 0)] / n;
                        let mut acc = [0.0; 5];
                        for (j, &one) in ones.iter().enumerate() {
                            let (p, q) = (wf[(r, j)] - m * one, m * one);
                            for (k, a) in acc.iter_mut().enumerate() {
                                *a += p.powi(k as i32) * q.powi(4 - k as i32);
                            }
                        }
                        acc
                    })
                    .collect()
            })
            .collect();
        // Coefficient of each pattern k (per support attribute) over the
        // ordered quadruples of sets.
        let mut patterns: HashMap<Vec<u8>, f64> = HashMap::new();
        let n = reads.len();
        for code in 0..n.pow(4) {
            let quad = [code % n, code / n % n, code / n / n % n, code / n / n / n];
            let weight: f64 = quad.iter().map(|&q| 1.0 / reads[q].1).product();
            let k: Vec<u8> = t
                .support
                .iter()
                .map(|i| quad.iter().filter(|&&q| reads[q].0.contains(i)).count() as u8)
                .collect();
            *patterns.entry(k).or_insert(0.0) += weight;
        }
        for (k, weight) in patterns {
            let factors: Vec<Mat<f64>> = (0..shape.len())
                .map(|i| match t.support.iter().position(|&s| s == i) {
                    Some(a) => Mat::from_fn(ws[i].nrows(), 1, |r, _| mu[a][r][k[a] as usize]),
                    None => Mat::from_fn(ws[i].nrows(), 1, |r, _| rowsum[i][(r, 0)].powi(4)),
                })
                .collect();
            let refs: Vec<&Mat<f64>> = factors.iter().collect();
            let part = kron_matvec(&refs, &[1.0])?;
            let w = weight * scalar.powi(4);
            for (o, p) in out.iter_mut().zip(&part) {
                *o += w * p;
            }
        }
    }
    Ok(Some(out))
}

/// Adds `λ⁻¹ (⊗ Mᵢ) c_T` to the answers and its variance share.
#[allow(clippy::too_many_arguments)]
fn add_part(
    ws: &[Mat<f64>],
    rowsum: &[Mat<f64>],
    set: &[usize],
    shape: &[usize],
    table: &[f64],
    lambda: f64,
    v: f64,
    ans: &mut [f64],
    var: &mut [f64],
) -> Result<()> {
    let mut mats = Vec::with_capacity(ws.len());
    let mut diags = Vec::with_capacity(ws.len());
    for (i, w) in ws.iter().enumerate() {
        let n = shape[i] as f64;
        if set.contains(&i) {
            mats.push(w.clone());
            // diag(W P⊥ Wᵀ) = ‖row‖² − (row sum)²/n.
            diags.push(Mat::from_fn(w.nrows(), 1, |r, _| {
                (0..w.ncols()).map(|j| w[(r, j)] * w[(r, j)]).sum::<f64>()
                    - rowsum[i][(r, 0)].powi(2) / n
            }));
        } else {
            mats.push(rowsum[i].clone());
            diags.push(Mat::from_fn(w.nrows(), 1, |r, _| {
                rowsum[i][(r, 0)].powi(2) / n
            }));
        }
    }
    let refs: Vec<&Mat<f64>> = mats.iter().collect();
    let part = kron_matvec(&refs, table)?;
    let drefs: Vec<&Mat<f64>> = diags.iter().collect();
    let vpart = kron_matvec(&drefs, &[1.0])?;
    for r in 0..ans.len() {
        ans[r] += part[r] / lambda;
        var[r] += v * vpart[r] / lambda;
    }
    Ok(())
}
