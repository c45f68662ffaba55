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
            Some(mut all) => fourth_powers(&ws, &rowsum, shape, terms, &sets, &free)?.map(|f| {
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

/// Most attributes of one term on which the residual sets an answer reads
/// differ (the fourth powers expand `5^k` patterns; past it they are not
/// computed).
const MAX_PATTERN_ATTRIBUTES: usize = 8;

/// `Σⱼ cⱼ⁴` of each query row of one product (`ws`, row sums `rowsum`),
/// whose answer reads the residual sets `sets` (with their `λ_T`); `free`
/// are the attributes where some query row is not constant (elsewhere
/// `p = 0`).
///
/// A query `w = ⊗ wᵢ` has noise coefficients `Ã (ÃᵀÃ)⁻¹ w`; on term `t`
/// (support `S_t`) they are
/// `Πᵢ∉S_t (1ᵀwᵢ) · Σ_{T⊆S_t} λ_T⁻¹ ⊗ᵢ∈S_t h_{T,i}`, with
/// `h_{T,i} = F (wᵢ − mᵢ1)` for `i ∈ T` and `F 1 mᵢ` otherwise
/// (`mᵢ = 1ᵀwᵢ/nᵢ`): `1ᵀ P⊥ = 0` drops the sets leaving the support. The
/// fourth power of that sum, expanded over ordered quadruples of sets,
/// factors over attributes: attribute `i` contributes
/// `μᵢ(k) = Σⱼ pⱼᵏ qⱼ⁴⁻ᵏ` (`p = F(wᵢ − mᵢ1)`, `q = F1 mᵢ`) where `k`
/// counts the quadruple's sets holding `i`. The quadruples' weights
/// `Π λ⁻¹` are gathered per pattern `k` by convolving the sets' indicator
/// vectors four times, and the patterns are contracted with the `μᵢ` by
/// one Kronecker product per group of terms (the same free attributes in
/// the support, the same factors there up to scale). `None` when the sets
/// of a term differ on more than [`MAX_PATTERN_ATTRIBUTES`] attributes.
fn fourth_powers(
    ws: &[Mat<f64>],
    rowsum: &[Mat<f64>],
    shape: &[usize],
    terms: &[Term],
    sets: &[(Vec<usize>, f64)],
    free: &[usize],
) -> Result<Option<Vec<f64>>> {
    // Each attribute's row sums to the fourth.
    let fixed: Vec<Mat<f64>> = (0..ws.len())
        .map(|i| Mat::from_fn(ws[i].nrows(), 1, |r, _| rowsum[i][(r, 0)].powi(4)))
        .collect();
    let cells: usize = free.iter().map(|&i| ws[i].nrows()).product();
    let mut inner = super::resources::try_zeros(Some(cells), "the fourth power sums")?;
    // Terms grouped by the free attributes their support holds and their
    // factors there up to scale (`F = s G`, μ scales by s⁴): an OPT_M
    // strategy's terms are scaled identities, so a product of marginals
    // meets a few groups, however many terms there are.
    type Key = (Vec<usize>, Vec<u64>);
    let mut groups: HashMap<Key, (f64, Vec<Mat<f64>>)> = HashMap::new();
    for t in terms {
        let mut scalar = if t.support.is_empty() {
            t.factors[0][(0, 0)].powi(4)
        } else {
            1.0
        };
        let (mut shared, mut bits, mut shapes) = (Vec::new(), Vec::new(), Vec::new());
        for (a, &i) in t.support.iter().enumerate() {
            let f = &t.factors[a];
            if !free.contains(&i) {
                // k = 0 and p = 0 here: ‖F1 m‖₄⁴ = ‖F1‖₄⁴ (1ᵀw)⁴/n⁴, the
                // row sums' part applied to every term below.
                let ones = (0..f.nrows())
                    .map(|j| (0..f.ncols()).map(|k| f[(j, k)]).sum::<f64>().powi(4))
                    .sum::<f64>();
                scalar *= ones / (shape[i] as f64).powi(4);
                continue;
            }
            let s = (0..f.ncols())
                .flat_map(|k| (0..f.nrows()).map(move |j| f[(j, k)].abs()))
                .fold(0.0, f64::max);
            scalar *= s.powi(4);
            let g = Mat::from_fn(f.nrows(), f.ncols(), |j, k| {
                if s > 0.0 { f[(j, k)] / s } else { 0.0 }
            });
            for k in 0..g.ncols() {
                bits.extend((0..g.nrows()).map(|j| g[(j, k)].to_bits()));
            }
            bits.extend([g.nrows() as u64, g.ncols() as u64]);
            shared.push(i);
            shapes.push(g);
        }
        if scalar == 0.0 {
            continue;
        }
        groups.entry((shared, bits)).or_insert((0.0, shapes)).0 += scalar;
    }
    let mut patterns: HashMap<Vec<usize>, Option<Patterns>> = HashMap::new();
    let identity: Vec<bool> = ws.iter().map(crate::reconstruction::is_identity).collect();
    for ((shared, _), (weight, shapes)) in groups {
        let entry = patterns
            .entry(shared.clone())
            .or_insert_with(|| pattern_weights(&shared, sets));
        let Some((varying, coef)) = entry.as_ref() else {
            continue;
        };
        if varying.len() > MAX_PATTERN_ATTRIBUTES {
            return Ok(None);
        }
        // Per free attribute of the support, the m × 5 table μ(r, k) (one
        // column where the sets agree, k = 0).
        let mut factors: Vec<Mat<f64>> = Vec::with_capacity(free.len());
        for (&i, f) in shared.iter().zip(&shapes) {
            let ones: Vec<f64> = (0..f.nrows())
                .map(|j| (0..f.ncols()).map(|k| f[(j, k)]).sum())
                .collect();
            let (w, n) = (&ws[i], shape[i] as f64);
            // W Fᵀ: an identity W (a marginal's attribute) reads Fᵀ itself.
            let wf = if identity[i] {
                f.transpose().to_owned()
            } else {
                dp_linalg::gemm(w.as_ref(), f.transpose(), dp_linalg::Par::Seq)
            };
            let k_max = if varying.contains(&i) { 5 } else { 1 };
            factors.push(Mat::from_fn(w.nrows(), k_max, |r, k| {
                let m = rowsum[i][(r, 0)] / n;
                ones.iter()
                    .enumerate()
                    .map(|(j, &one)| {
                        let (p, q) = (wf[(r, j)] - m * one, m * one);
                        p.powi(k as i32) * q.powi(4 - k as i32)
                    })
                    .sum()
            }));
        }
        // Free attributes off the support carry their row sums (k = 0).
        let mut ordered: Vec<&Mat<f64>> = Vec::with_capacity(free.len());
        let mut next = factors.iter();
        for &i in free {
            if shared.contains(&i) {
                ordered.extend(next.next());
            } else {
                ordered.push(&fixed[i]);
            }
        }
        let part = kron_matvec(&ordered, coef)?;
        for (o, p) in inner.iter_mut().zip(&part) {
            *o += weight * p;
        }
    }
    // The attributes where the query rows are constant: their row sums'
    // fourth powers, as a Kronecker product with the free attributes'
    // table (identities there).
    let spread: Vec<Mat<f64>> = (0..shape.len())
        .map(|i| {
            if free.contains(&i) {
                Mat::identity(ws[i].nrows(), ws[i].nrows())
            } else {
                fixed[i].clone()
            }
        })
        .collect();
    let refs: Vec<&Mat<f64>> = spread.iter().collect();
    let out = kron_matvec(&refs, &inner)?;
    Ok(Some(out))
}

/// The attributes where a term's residual sets differ, and the weight of
/// each pattern over them ([`pattern_weights`]).
type Patterns = (Vec<usize>, Vec<f64>);

/// For a term whose support meets the free attributes in `shared`: the
/// attributes where the residual sets it reads (those inside `shared`)
/// differ, and the weight `Σ Π λ⁻¹` of the ordered quadruples of those
/// sets per pattern `k` (how many of the four hold each such attribute;
/// base 5, first attribute most significant), by convolving the sets'
/// indicator patterns four times. `None` when it reads no set.
fn pattern_weights(shared: &[usize], sets: &[(Vec<usize>, f64)]) -> Option<(Vec<usize>, Vec<f64>)> {
    let reads: Vec<&(Vec<usize>, f64)> = sets
        .iter()
        .filter(|(set, _)| set.iter().all(|i| shared.contains(i)))
        .collect();
    if reads.is_empty() {
        return None;
    }
    let mut varying: Vec<usize> = reads.iter().flat_map(|(set, _)| set.clone()).collect();
    varying.sort_unstable();
    varying.dedup();
    if varying.len() > MAX_PATTERN_ATTRIBUTES {
        return Some((varying, Vec::new()));
    }
    let digit = |i: usize| -> usize {
        let p = varying.iter().position(|&v| v == i).unwrap_or(0);
        5usize.pow((varying.len() - 1 - p) as u32)
    };
    let size = 5usize.pow(varying.len() as u32);
    let mut one = vec![0.0; size];
    for (set, lambda) in &reads {
        one[set.iter().map(|&i| digit(i)).sum::<usize>()] += 1.0 / lambda;
    }
    let mut coef = one.clone();
    for _ in 1..4 {
        let mut next = vec![0.0; size];
        for (a, &x) in coef.iter().enumerate().filter(|(_, x)| **x != 0.0) {
            for (b, &y) in one.iter().enumerate().filter(|(_, y)| **y != 0.0) {
                // Digits never carry: at most four sets hold an attribute.
                next[a + b] += x * y;
            }
        }
        coef = next;
    }
    Some((varying, coef))
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
