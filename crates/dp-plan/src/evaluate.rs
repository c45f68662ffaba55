//! The objective of a given structured strategy on a structured workload,
//! without densifying: for strategies planned elsewhere (HDMM's Kronecker
//! and marginals templates, McKenna et al. VLDB 2018, §6.1 and §6.3), so
//! that they are compared with ours on the normalization of
//! [`dp_opt::PrivacyModel`], recomputed here rather than taken from the
//! other tool's own loss.
//!
//! The workload Gram is `WᵀW = Σ_p c_p² ⊗ᵢ G_{p,i}` over its products
//! ([`StructuredWorkload::products`]).

use dp_core::{DpError, Result, sensitivity_l1, sensitivity_l2};
use dp_linalg::Mat;
use dp_workloads::structured::{AttrSet, StructuredWorkload};

use super::opt_m::FULL_FAMILY_MAX_ATTRIBUTES;
use dp_opt::PrivacyModel;

/// The workload's products as `(c², per-attribute Grams)`.
fn gram_products(w: &StructuredWorkload) -> Result<Vec<(f64, Vec<Mat<f64>>)>> {
    Ok(w.gram_terms(usize::MAX)?)
}

fn check_factor_count(w: &StructuredWorkload, given: usize, what: &str) -> Result<usize> {
    let d = w.domain().len();
    if given != d {
        return Err(DpError::InvalidParameter {
            name: "strategy",
            reason: format!("{given} {what} on a domain of {d} attributes"),
        });
    }
    Ok(d)
}

/// `tr(G X⁺)` when `G`'s range lies in `X`'s (`tr(G(I − XX⁺)) ≤ 1e-9
/// tr G`), `+∞` otherwise (the factor does not support the workload).
fn supported_trace(g: &Mat<f64>, x: &Mat<f64>, x_pinv: &Mat<f64>) -> Result<f64> {
    let proj = x * x_pinv;
    let inside = dp_linalg::trace_of_product(g.as_ref(), proj.as_ref())?;
    let total = dp_linalg::trace(g.as_ref())?;
    if total - inside > 1e-9 * total {
        return Ok(f64::INFINITY);
    }
    Ok(dp_linalg::trace_of_product(g.as_ref(), x_pinv.as_ref())?)
}

/// The objective of the Kronecker strategy `⊗ᵢ Aᵢ` (`factors[i]` has
/// `nᵢ` columns): `Πᵢ Δ(Aᵢ)² · Σ_p c_p² Πᵢ tr(G_{p,i} (AᵢᵀAᵢ)⁺)` (the
/// sensitivity of a Kronecker product is the product of the factors', and
/// `(⊗Xᵢ)⁺ = ⊗Xᵢ⁺`); `+∞` when it does not support the workload.
pub fn kron_objective(
    w: &StructuredWorkload,
    factors: &[Mat<f64>],
    privacy: PrivacyModel,
) -> Result<f64> {
    check_factor_count(w, factors.len(), "factors")?;
    let mut sens2 = 1.0;
    let mut xs = Vec::with_capacity(factors.len());
    for (a, &n) in factors.iter().zip(&w.domain().shape()) {
        if a.ncols() != n || a.nrows() == 0 {
            return Err(DpError::InvalidParameter {
                name: "strategy",
                reason: format!(
                    "a {}×{} factor on an attribute of size {n}",
                    a.nrows(),
                    a.ncols()
                ),
            });
        }
        let s = match privacy {
            PrivacyModel::Approx => sensitivity_l2(a.as_ref())?,
            PrivacyModel::Pure => sensitivity_l1(a.as_ref())?,
        };
        sens2 *= s * s;
        let x = dp_linalg::gram(a.as_ref(), dp_linalg::Par::Seq);
        let x_pinv = dp_linalg::pseudo_inverse_symmetric(x.as_ref(), None)?;
        xs.push((x, x_pinv));
    }
    let mut total = 0.0;
    for (c2, grams) in gram_products(w)? {
        let mut term = c2;
        for (g, (x, x_pinv)) in grams.iter().zip(&xs) {
            term *= supported_trace(g, x, x_pinv)?;
        }
        total += term;
    }
    Ok(sens2 * total)
}

/// The objective of the weighted union of marginals `[θ_S M_S]` (`M_S`:
/// identity on S, `1ᵀ` elsewhere; `theta` lists `(S, θ_S ≥ 0)`), on any
/// structured workload of at most [`FULL_FAMILY_MAX_ATTRIBUTES`]
/// attributes.
///
/// Both Grams are read in the residual basis `P_T = ⊗_{i∈T} P⊥ᵢ ⊗_{i∉T}
/// P¹ᵢ` (`P¹ᵢ = 11ᵀ/nᵢ`): `AᵀA = Σ_T μ_T P_T` with `μ_T = Σ_{S⊇T} θ_S²
/// Π_{i∉S} nᵢ`, so `tr(WᵀW (AᵀA)⁺) = Σ_T a_T/μ_T` with `a_T = tr(WᵀW P_T)
/// = Σ_p c_p² Π_{i∈T}(tr G_{p,i} − 1ᵀG_{p,i}1/nᵢ) Π_{i∉T} 1ᵀG_{p,i}1/nᵢ`
/// (`+∞` when some `μ_T = 0 < a_T`). `Δ₁ = Σθ_S` and `Δ₂² = Σθ_S²`: every
/// column of `M_S` holds one 1.
pub fn marginals_objective(
    w: &StructuredWorkload,
    theta: &[(AttrSet, f64)],
    privacy: PrivacyModel,
) -> Result<f64> {
    let shape = w.domain().shape();
    let d = shape.len();
    if d > FULL_FAMILY_MAX_ATTRIBUTES {
        return Err(DpError::InvalidParameter {
            name: "strategy",
            reason: format!(
                "a marginals strategy is evaluated on at most {FULL_FAMILY_MAX_ATTRIBUTES} attributes, not {d}"
            ),
        });
    }
    let full: u128 = (1 << d) - 1;
    let mut mu = vec![0.0; 1 << d];
    for (set, t) in theta {
        let t = *t;
        // A set past the first 128 positions is outside the domain here.
        let s = set.as_bits().unwrap_or(u128::MAX);
        if s & !full != 0 || !(t.is_finite() && t >= 0.0) {
            return Err(DpError::InvalidParameter {
                name: "strategy",
                reason: format!("weight {t} on attribute set {set}"),
            });
        }
        let outside: f64 = (0..d)
            .filter(|&i| s & (1 << i) == 0)
            .map(|i| shape[i] as f64)
            .product();
        // Every T ⊆ S gets θ_S² Π_{i∉S} nᵢ.
        let mut sub = s;
        loop {
            mu[sub as usize] += t * t * outside;
            if sub == 0 {
                break;
            }
            sub = (sub - 1) & s;
        }
    }
    // Per product and attribute: tr(G P¹) and tr(G P⊥).
    let parts: Vec<(f64, Vec<(f64, f64)>)> = gram_products(w)?
        .into_iter()
        .map(|(c2, grams)| {
            let per = grams
                .iter()
                .map(|g| {
                    let n = g.nrows();
                    let ones = (0..n)
                        .map(|j| (0..n).map(|i| g[(i, j)]).sum::<f64>())
                        .sum::<f64>()
                        / n as f64;
                    let trace: f64 = (0..n).map(|i| g[(i, i)]).sum();
                    (ones, (trace - ones).max(0.0))
                })
                .collect();
            (c2, per)
        })
        .collect();
    let a: Vec<f64> = (0..mu.len())
        .map(|t| {
            parts
                .iter()
                .map(|(c2, per)| {
                    let on = |(i, &(ones, rest)): (usize, &(f64, f64))| {
                        if t & (1 << i) != 0 { rest } else { ones }
                    };
                    c2 * per.iter().enumerate().map(on).product::<f64>()
                })
                .sum()
        })
        .collect();
    // Subspaces with a rounding-level share of the workload count as
    // untouched.
    let floor = 1e-12 * a.iter().copied().fold(0.0, f64::max);
    let mut e = 0.0;
    for (&a, &m) in a.iter().zip(&mu) {
        if a > floor {
            if m <= 0.0 {
                return Ok(f64::INFINITY);
            }
            e += a / m;
        }
    }
    let sens2 = match privacy {
        PrivacyModel::Pure => theta.iter().map(|&(_, t)| t).sum::<f64>().powi(2),
        PrivacyModel::Approx => theta.iter().map(|&(_, t)| t * t).sum(),
    };
    Ok(sens2 * e)
}
