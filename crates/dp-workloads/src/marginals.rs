//! Marginal workloads in the residual basis (ResidualPlanner, Xiao, He,
//! Zhang, Kifer, NeurIPS 2023).
//!
//! On attribute i split `R^{nᵢ} = span(1) ⊕ 1^⊥` with projectors
//! `P¹ᵢ = 11ᵀ/nᵢ` and `P⊥ᵢ = I − 11ᵀ/nᵢ`. For every attribute set T the
//! "residual" projector `P_T = ⊗_{i∈T} P⊥ᵢ ⊗_{i∉T} P¹ᵢ` has rank
//! `Π_{i∈T}(nᵢ − 1)`, and the `P_T` are orthogonal and sum to I. A marginal
//! on S has Gram `⊗_{i∈S} I ⊗_{i∉S} 11ᵀ = ⊗_{i∈S}(P¹ᵢ + P⊥ᵢ) ⊗_{i∉S} nᵢP¹ᵢ
//! = Π_{i∉S} nᵢ · Σ_{T⊆S} P_T`, so a weighted marginal workload has Gram
//! `Σ_T λ_T P_T` with
//!
//! `λ_T = Σ_{workload marginals S ⊇ T} w_S² Π_{i∉S} nᵢ`
//!
//! — its eigen-decomposition in closed form, with no cell ever indexed.

use std::collections::HashMap;

use dp_linalg::Mat;

use std::sync::Arc;

use dp_core::{DpError, Result};

use crate::composite::{Kronecker, Union};
use crate::domain::{Domain, SResult, StructuredError};
use crate::spec::k_subsets;
use crate::structured::{AttrSet, kron_all};
use crate::workload::{Identity, Total, Workload};

/// Most (S, T ⊆ S) pairs enumerated when building a spectrum.
pub const MAX_SUBSET_PAIRS: f64 = 1e8;

/// One residual subspace: the attribute set T, the Gram's eigenvalue on it
/// and its dimension.
#[derive(Debug, Clone, PartialEq)]
pub struct ResidualEigen {
    /// The set T.
    pub set: AttrSet,
    /// `λ_T` (> 0).
    pub eigenvalue: f64,
    /// `Π_{i∈T}(nᵢ − 1)` (f64: it may exceed any integer type).
    pub multiplicity: f64,
}

/// The non-zero part of the spectrum of `Σ_S w_S² · Gram(marginal S)`
/// (`weights` = `(S, w_S²)`), one entry per residual subspace with
/// `λ_T > 0` and non-zero dimension, ordered by |T| then mask.
pub fn residual_spectrum(
    domain: &Domain,
    weights: &[(AttrSet, f64)],
) -> SResult<Vec<ResidualEigen>> {
    let d = domain.len();
    let sizes = domain.shape();
    let pairs: f64 = weights.iter().map(|(s, _)| 2f64.powi(s.len() as i32)).sum();
    if pairs > MAX_SUBSET_PAIRS {
        return Err(StructuredError::TooLarge {
            what: "residual subspaces",
            cells: pairs,
            action: "enumerate",
        });
    }
    let mut lambda: HashMap<AttrSet, f64> = HashMap::new();
    for (s, w2) in weights {
        let w2 = *w2;
        if !(w2.is_finite() && w2 > 0.0) {
            return Err(StructuredError::BadWeight(w2.sqrt()));
        }
        if s.max_member() >= Some(d) {
            return Err(StructuredError::Spec(format!(
                "marginal set {s} outside a domain of {d} attributes"
            )));
        }
        let outside: f64 = (0..d)
            .filter(|&i| !s.contains(i))
            .map(|i| sizes[i] as f64)
            .product();
        let c = w2 * outside;
        for t in s.subsets() {
            *lambda.entry(t).or_insert(0.0) += c;
        }
    }
    let mut out: Vec<ResidualEigen> = lambda
        .into_iter()
        .filter_map(|(set, eigenvalue)| {
            let multiplicity: f64 = set.members().map(|i| (sizes[i] - 1) as f64).product();
            (multiplicity > 0.0).then_some(ResidualEigen {
                set,
                eigenvalue,
                multiplicity,
            })
        })
        .collect();
    if let Some(bad) = out.iter().find(|e| !e.eigenvalue.is_finite()) {
        return Err(StructuredError::Overflow(format!(
            "the Gram eigenvalue of residual set {} overflows f64",
            bad.set
        )));
    }
    out.sort_by(|a, b| (a.set.len(), &a.set).cmp(&(b.set.len(), &b.set)));
    Ok(out)
}

/// The singular value bound `(Σᵢ σᵢ(W))² / N = (Σ_T mult_T √λ_T)² / N` on
/// `l2_obj` (Li & Miklau; N = cells), from the residual spectrum.
pub fn svd_bound(domain: &Domain, spectrum: &[ResidualEigen]) -> SResult<f64> {
    let s: f64 = spectrum
        .iter()
        .map(|e| e.multiplicity * e.eigenvalue.sqrt())
        .sum();
    let b = s * s / domain.cells_f64();
    if !b.is_finite() {
        return Err(StructuredError::Overflow(
            "the singular value bound overflows f64".into(),
        ));
    }
    Ok(b)
}

/// The dense residual projector `P_T` (tests and small domains; the
/// caller checks the size).
pub fn dense_projector(domain: &Domain, set: &AttrSet) -> Mat<f64> {
    let mats: Vec<Mat<f64>> = domain
        .attributes()
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let n = a.size;
            let inv = 1.0 / n as f64;
            if set.contains(i) {
                Mat::from_fn(n, n, |r, c| if r == c { 1.0 - inv } else { -inv })
            } else {
                Mat::from_fn(n, n, |_, _| inv)
            }
        })
        .collect();
    kron_all(&mats)
}

/// All k-way marginals of a domain with attribute sizes `shape`: for every
/// set S of k attributes, the counts of every combination of values of S,
/// i.e. `⊗ᵢ (I if i ∈ S else 1ᵀ)`, stacked over the C(d, k) sets in
/// lexicographic order of their sorted positions (the spec's order).
pub fn k_way_marginals(shape: &[usize], k: usize) -> Result<Union> {
    let d = shape.len();
    if d == 0 || k > d || shape.contains(&0) {
        return Err(DpError::InvalidParameter {
            name: "marginals",
            reason: format!(
                "need 0 <= k <= d attributes of size >= 1, got k = {k}, shape {shape:?}"
            ),
        });
    }
    // The C(d, k) sets directly (a walk over all 2^d masks would hang at
    // d = 40 and overflow its shift at d = 64).
    let mut parts: Vec<(f64, Arc<dyn Workload>)> = Vec::new();
    for mask in k_subsets(d, k)? {
        let factors: Vec<Arc<dyn Workload>> = shape
            .iter()
            .enumerate()
            .map(|(i, &ni)| -> Result<Arc<dyn Workload>> {
                if mask.contains(i) {
                    Ok(Arc::new(Identity::new(ni)?))
                } else {
                    Ok(Arc::new(Total::new(ni)?))
                }
            })
            .collect::<Result<_>>()?;
        parts.push((1.0, Arc::new(Kronecker::new(factors)?)));
    }
    Union::new(parts)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::structured::StructuredWorkload;
    use dp_linalg::SymmetricEigen;

    fn workload(domain: &Domain, sets: &[(AttrSet, f64)]) -> StructuredWorkload {
        StructuredWorkload::weighted_marginals(domain.clone(), sets).unwrap()
    }

    #[test]
    fn spectrum_matches_dense_eigenvalues() {
        let domain = Domain::from_pairs(&[("a", 2), ("b", 3), ("c", 4)]).unwrap();
        // Weighted marginals, one repeated (weights add in squares).
        let sets = [
            (0b011, 1.5),
            (0b110, 0.7),
            (0b000, 2.0),
            (0b100, 1.1),
            (0b011, 0.4),
        ]
        .map(|(s, w)| (AttrSet::from_bits(s), w));
        let w = workload(&domain, &sets);
        let weights = w.marginal_weights().unwrap();
        assert_eq!(weights.len(), 4);
        let spec = residual_spectrum(&domain, &weights).unwrap();
        // Dense truth: eigenvalues of W^T W built from explicit rows.
        let wm = w.dense_matrix().unwrap();
        let g = dp_linalg::gram(wm.as_ref(), dp_linalg::Par::Seq);
        let mut dense = SymmetricEigen::values_only(g.as_ref()).unwrap();
        dense.sort_by(|a, b| b.total_cmp(a));
        let mut closed: Vec<f64> = Vec::new();
        for e in &spec {
            closed.extend(std::iter::repeat_n(e.eigenvalue, e.multiplicity as usize));
        }
        closed.resize(24, 0.0);
        closed.sort_by(|a, b| b.total_cmp(a));
        let scale = dense[0];
        for (x, y) in dense.iter().zip(&closed) {
            assert!((x - y).abs() <= 1e-10 * scale, "{x} vs {y}");
        }
        // And the Gram itself is Σ λ_T P_T.
        let mut g2 = Mat::<f64>::zeros(24, 24);
        for e in &spec {
            g2 += dense_projector(&domain, &e.set) * e.eigenvalue;
        }
        let diff = (&g - &g2).norm_l2() / g.norm_l2();
        assert!(diff < 1e-12, "{diff}");
        // The SVD bound matches the dense one, (Σ√λ)²/N over the dense
        // eigenvalues.
        let dense_bound = dp_core::svd_lower_bound_from_gram(g.as_ref()).unwrap();
        let b = svd_bound(&domain, &spec).unwrap();
        assert!(
            (b - dense_bound).abs() <= 1e-10 * dense_bound,
            "{b} vs {dense_bound}"
        );
    }

    #[test]
    fn sizes_one_have_no_residual() {
        let domain = Domain::from_pairs(&[("a", 1), ("b", 3)]).unwrap();
        let spec = residual_spectrum(&domain, &[(AttrSet::from_bits(0b11), 1.0)]).unwrap();
        assert!(spec.iter().all(|e| !e.set.contains(0)));
        assert_eq!(spec.len(), 2);
    }

    /// All k-way marginals on d attributes of size 10: the eigenvalue of
    /// |T| = t is C(d − t, k − t) · 10^(d − k) (each S ⊇ T contributes
    /// Π_{i∉S} nᵢ), with multiplicity 9^t.
    fn check_k_way_closed_form(d: usize, k: usize) {
        let pairs: Vec<(String, usize)> = (0..d).map(|i| (format!("a{i}"), 10)).collect();
        let p: Vec<(&str, usize)> = pairs.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let domain = Domain::from_pairs(&p).unwrap();
        let weights: Vec<(AttrSet, f64)> = crate::spec::k_subsets(d, k)
            .unwrap()
            .into_iter()
            .map(|s| (s, 1.0))
            .collect();
        let spec = residual_spectrum(&domain, &weights).unwrap();
        let binom =
            |n: usize, k: usize| (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64);
        let count: f64 = (0..=k).map(|t| binom(d, t)).sum();
        assert_eq!(spec.len() as f64, count);
        let mut seen = std::collections::HashSet::new();
        for e in &spec {
            let t = e.set.len();
            let want = binom(d - t, k - t) * 10f64.powi((d - k) as i32);
            assert!((e.eigenvalue - want).abs() <= 1e-12 * want, "{}", e.set);
            assert_eq!(e.multiplicity, 9f64.powi(t as i32));
            assert!(e.set.max_member() < Some(d));
            assert!(seen.insert(e.set.clone()), "{} twice", e.set);
        }
        // Ordered by size, then as numbers.
        assert!(
            spec.windows(2)
                .all(|w| (w[0].set.len(), &w[0].set) < (w[1].set.len(), &w[1].set))
        );
    }

    #[test]
    fn hundred_attributes_closed_form() {
        check_k_way_closed_form(100, 3);
    }

    #[test]
    fn two_hundred_attributes_closed_form() {
        // Past 128 attributes the sets are no longer one machine word.
        check_k_way_closed_form(200, 2);
    }
}
