//! Structured workloads on a multi-dimensional [`Domain`]: weighted unions
//! of Kronecker products of per-attribute factors, and marginals
//! (HDMM, McKenna et al. VLDB 2018, §5: implicit workloads), never
//! densified unless the domain is small.
//!
//! Gram algebra stays structured: the Gram of `⊗ Wᵢ` is `⊗ WᵢᵀWᵢ`, a
//! union's Gram is the weighted sum `Σ c² ⊗ Gᵢ` kept as terms, and a
//! marginal workload's Gram is diagonal in the residual basis
//! ([`crate::marginals`]). Whatever would densify checks the size first.

mod attrset;
mod factor;
pub mod sf1;
#[cfg(test)]
mod tests;
pub mod write;

pub use attrset::{AttrSet, Members, Subsets};
pub use factor::{Factor, kron_all, kron_matvec};

use dp_linalg::Mat;

use crate::domain::{Domain, SResult, StructuredError};
use crate::workload::EXPLICIT_ENTRY_LIMIT;

/// Largest domain whose Gram is densified on request (4096 cells: a
/// 128 MiB matrix).
pub const DENSE_GRAM_CELL_LIMIT: f64 = 4096.0;

/// The queries of one spec entry.
#[derive(Debug, Clone)]
pub enum Queries {
    /// One Kronecker product, one factor per domain attribute (in domain
    /// order); rows in row-major order, last attribute fastest.
    Kron(Vec<Factor>),
    /// Marginals on the given attribute sets, in this order; each is
    /// identity on the set and total elsewhere.
    Marginals(Vec<AttrSet>),
}

/// One weighted entry of a workload (a "query group": per-group errors are
/// reported for it).
#[derive(Debug, Clone)]
pub struct QueryGroup {
    /// A label for reports (e.g. `kron[sex=identity, age=prefix]`).
    pub label: String,
    /// Multiplies every row (> 0, finite).
    pub weight: f64,
    /// The queries.
    pub queries: Queries,
}

impl QueryGroup {
    /// The attribute sets of the marginals this group asks (a Kronecker
    /// group of identity and total factors is the marginal on its identity
    /// attributes), or `None` when it is not made of marginals.
    pub fn marginal_sets(&self) -> Option<Vec<AttrSet>> {
        match &self.queries {
            Queries::Marginals(sets) => Some(sets.clone()),
            Queries::Kron(factors) => {
                if factors.iter().any(|f| !f.is_identity() && !f.is_total()) {
                    return None;
                }
                let set = factors
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.is_identity())
                    .map(|(i, _)| i)
                    .collect();
                Some(vec![set])
            }
        }
    }
}

/// A weighted union of Kronecker products and marginals on one domain.
#[derive(Debug, Clone)]
pub struct StructuredWorkload {
    domain: Domain,
    groups: Vec<QueryGroup>,
}

/// `marginal[a,b]`: the label of the marginal on `set` (names in domain
/// order; bits outside the domain are not named).
pub fn marginal_label(domain: &Domain, set: &AttrSet) -> String {
    let names: Vec<&str> = set
        .members()
        .filter_map(|i| domain.attributes().get(i).map(|a| a.name.as_str()))
        .collect();
    format!("marginal[{}]", names.join(","))
}

impl StructuredWorkload {
    /// Validates every group against `domain`: weights finite and > 0,
    /// one factor per attribute with matching sizes, marginal sets inside
    /// the domain.
    pub fn new(domain: Domain, groups: Vec<QueryGroup>) -> SResult<Self> {
        if groups.is_empty() {
            return Err(StructuredError::Spec("the workload has no queries".into()));
        }
        let d = domain.len();
        for g in &groups {
            if !(g.weight.is_finite() && g.weight > 0.0) {
                return Err(StructuredError::BadWeight(g.weight));
            }
            match &g.queries {
                Queries::Kron(factors) => {
                    if factors.len() != d {
                        return Err(StructuredError::Spec(format!(
                            "{}: {} factors for {d} attributes",
                            g.label,
                            factors.len()
                        )));
                    }
                    for (f, a) in factors.iter().zip(domain.attributes()) {
                        if f.size() != a.size {
                            return Err(StructuredError::SizeMismatch {
                                attribute: a.name.clone(),
                                expected: a.size,
                                found: f.size(),
                            });
                        }
                    }
                }
                Queries::Marginals(sets) => {
                    if sets.is_empty() || sets.iter().any(|s| s.max_member() >= Some(d)) {
                        return Err(StructuredError::Spec(format!(
                            "{}: marginal sets outside the domain or none",
                            g.label
                        )));
                    }
                }
            }
        }
        Ok(Self { domain, groups })
    }

    /// One group per marginal `(S, weight)`, labelled as the spec's
    /// `marginal` entries ([`marginal_label`]).
    pub fn weighted_marginals(domain: Domain, marginals: &[(AttrSet, f64)]) -> SResult<Self> {
        let groups = marginals
            .iter()
            .map(|(s, weight)| QueryGroup {
                label: marginal_label(&domain, s),
                weight: *weight,
                queries: Queries::Marginals(vec![s.clone()]),
            })
            .collect();
        Self::new(domain, groups)
    }

    /// The domain.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// The groups, in query order.
    pub fn groups(&self) -> &[QueryGroup] {
        &self.groups
    }

    /// The factors of marginal `set`: identity on it, total elsewhere.
    pub fn marginal_factors(&self, set: &AttrSet) -> Vec<Factor> {
        self.domain
            .attributes()
            .iter()
            .enumerate()
            .map(|(i, a)| {
                if set.contains(i) {
                    Factor::Identity(a.size)
                } else {
                    Factor::Total(a.size)
                }
            })
            .collect()
    }

    /// Every Kronecker product of the workload with its weight, in query
    /// order (marginals expanded; callers on huge marginal workloads use
    /// [`Self::marginal_weights`] instead).
    pub fn products(&self) -> Vec<(f64, Vec<Factor>)> {
        let mut out = Vec::new();
        for g in &self.groups {
            match &g.queries {
                Queries::Kron(f) => out.push((g.weight, f.clone())),
                Queries::Marginals(sets) => {
                    out.extend(sets.iter().map(|s| (g.weight, self.marginal_factors(s))));
                }
            }
        }
        out
    }

    /// Number of rows of a group (f64: it may exceed any integer type).
    pub fn group_queries(&self, g: &QueryGroup) -> f64 {
        match &g.queries {
            Queries::Kron(f) => f.iter().map(|f| f.num_queries() as f64).product(),
            Queries::Marginals(sets) => sets
                .iter()
                .map(|s| {
                    s.members()
                        .map(|i| self.domain.attributes()[i].size as f64)
                        .product::<f64>()
                })
                .sum(),
        }
    }

    /// Total number of rows m.
    pub fn num_queries(&self) -> f64 {
        self.groups.iter().map(|g| self.group_queries(g)).sum()
    }

    /// If every product is a marginal (each factor identity or total), the
    /// marginal weights `(S, Σ c_S²)` with repeated sets merged, in order
    /// of first appearance; otherwise `None`.
    pub fn marginal_weights(&self) -> Option<Vec<(AttrSet, f64)>> {
        self.merged_marginal_weights(|a, b| a + b)
    }

    /// As [`Self::marginal_weights`] but a repeated set keeps its largest
    /// squared weight, `(S, max c_S²)`: the weight of its heaviest row
    /// (what a per-query loss such as the largest variance sees).
    pub fn marginal_max_weights(&self) -> Option<Vec<(AttrSet, f64)>> {
        self.merged_marginal_weights(f64::max)
    }

    fn merged_marginal_weights(&self, merge: fn(f64, f64) -> f64) -> Option<Vec<(AttrSet, f64)>> {
        let mut out: Vec<(AttrSet, f64)> = Vec::new();
        let mut index: std::collections::HashMap<AttrSet, usize> = std::collections::HashMap::new();
        for g in &self.groups {
            let w2 = g.weight * g.weight;
            for s in g.marginal_sets()? {
                match index.get(&s) {
                    Some(&k) => out[k].1 = merge(out[k].1, w2),
                    None => {
                        index.insert(s.clone(), out.len());
                        out.push((s, w2));
                    }
                }
            }
        }
        Some(out)
    }

    /// The structured Gram: `[(c², [G₁, …, G_d])]`, one term per Kronecker
    /// product, `WᵀW = Σ c² ⊗ Gᵢ`. Refused for marginal groups with more
    /// than `max_terms` sets (use the residual basis instead).
    pub fn gram_terms(&self, max_terms: usize) -> SResult<Vec<(f64, Vec<Mat<f64>>)>> {
        let count: usize = self
            .groups
            .iter()
            .map(|g| match &g.queries {
                Queries::Kron(_) => 1,
                Queries::Marginals(s) => s.len(),
            })
            .sum();
        if count > max_terms {
            return Err(StructuredError::TooLarge {
                what: "Kronecker terms",
                cells: count as f64,
                action: "expand as separate Gram terms",
            });
        }
        self.products()
            .into_iter()
            .map(|(w, fs)| {
                let grams = fs.iter().map(Factor::gram).collect::<SResult<Vec<_>>>()?;
                Ok((w * w, grams))
            })
            .collect()
    }

    /// `WᵀW x` through the structure (cells ≤ 2²⁷).
    pub fn gram_apply(&self, x: &[f64]) -> SResult<Vec<f64>> {
        let n = self.check_cell_vector(x)?;
        let mut out = vec![0.0; n];
        for (c2, grams) in self.gram_terms(usize::MAX)? {
            let refs: Vec<&Mat<f64>> = grams.iter().collect();
            for (o, v) in out.iter_mut().zip(kron_matvec(&refs, x)?) {
                *o += c2 * v;
            }
        }
        Ok(out)
    }

    /// The answers `W x`, stacked in query order (cells ≤ 2²⁷).
    pub fn answer(&self, x: &[f64]) -> SResult<Vec<f64>> {
        self.check_cell_vector(x)?;
        let mut out = Vec::new();
        for (w, factors) in self.products() {
            let mats = factors
                .iter()
                .map(|f| f.explicit())
                .collect::<SResult<Vec<_>>>()?;
            let refs: Vec<&Mat<f64>> = mats.iter().collect();
            out.extend(kron_matvec(&refs, x)?.into_iter().map(|v| w * v));
        }
        Ok(out)
    }

    /// The dense Gram `WᵀW`, refused past [`DENSE_GRAM_CELL_LIMIT`] cells
    /// with an error naming the count.
    pub fn dense_gram(&self) -> SResult<Mat<f64>> {
        let n = self.check_dense()?;
        let mut g = Mat::zeros(n, n);
        for (c2, grams) in self.gram_terms(usize::MAX)? {
            g += kron_all(&grams) * c2;
        }
        Ok(g)
    }

    /// The dense rows `W` (m×n), built from the factors' rows (not their
    /// Grams), refused past the explicit-entry limit.
    pub fn dense_matrix(&self) -> SResult<Mat<f64>> {
        let n = self.check_dense()?;
        let entries = self.num_queries() * n as f64;
        if entries > EXPLICIT_ENTRY_LIMIT as f64 {
            return Err(StructuredError::TooLarge {
                what: "matrix entries",
                cells: entries,
                action: "densify",
            });
        }
        let blocks = self
            .products()
            .into_iter()
            .map(|(w, fs)| {
                let mats = fs
                    .iter()
                    .map(Factor::explicit)
                    .collect::<SResult<Vec<_>>>()?;
                Ok(kron_all(&mats) * w)
            })
            .collect::<SResult<Vec<_>>>()?;
        Ok(dp_linalg::stack_rows(&blocks, n)?)
    }

    /// The squared Frobenius norm `‖W‖_F² = Σ c² Π tr(WᵢᵀWᵢ)` over the
    /// products: the `l1_obj` and `l2_obj` of the identity strategy
    /// (Δ₁ = Δ₂ = 1, `tr(WᵀW)`), the baseline HDMM reports errors against.
    pub fn frobenius_squared(&self) -> SResult<f64> {
        let mut total = 0.0;
        for (c2, grams) in self.gram_terms(usize::MAX)? {
            let traces = grams.iter().map(|g| dp_linalg::trace(g.as_ref()));
            total += c2 * traces.product::<Result<f64, _>>()?;
        }
        Ok(total)
    }

    /// The number of cells, when `x` has one entry per cell (cells ≤ 2²⁷).
    fn check_cell_vector(&self, x: &[f64]) -> SResult<usize> {
        let n = self.domain.cells("index cells")?;
        if x.len() != n {
            return Err(StructuredError::Spec(format!(
                "vector of length {} on {n} cells",
                x.len()
            )));
        }
        Ok(n)
    }

    fn check_dense(&self) -> SResult<usize> {
        let cells = self.domain.cells_f64();
        if cells > DENSE_GRAM_CELL_LIMIT {
            return Err(StructuredError::TooLarge {
                what: "cells",
                cells,
                action: "densify",
            });
        }
        self.domain.cells("densify")
    }
}
