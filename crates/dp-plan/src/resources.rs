//! Memory sizing before the work: what planning, a plan file and a
//! reconstruction will hold, computed from the workload and the strategy's
//! shape alone (never by allocating), and refused against a memory limit
//! with one typed error ([`DpError::MemoryLimit`]) instead of an abort or
//! a panic inside the allocator.
//!
//! The figures are conservative estimates of the dominant allocations, in
//! bytes as `f64` (they may exceed every integer type): each dense n×n
//! matrix a step keeps per attribute, each vector as long as the strategy's
//! rows, the workload's queries or a count table, with the number of
//! copies the code holds at once. Small bookkeeping is not counted; the
//! allocations that depend on the input also reserve fallibly, so an
//! estimate that falls short ends in a typed error too, not an abort.
//!
//! The default limit is half the machine's physical memory (`MemTotal` in
//! `/proc/meminfo`), or [`FALLBACK_MEMORY_LIMIT`] where that cannot be
//! read: the rest is left to the operating system and other processes.

use dp_core::{DpError, Result};
use dp_workloads::domain::Domain;
use dp_workloads::structured::{AttrSet, Factor, Queries, StructuredWorkload};

use super::{PlanObjective, PlanOptions, StructuredStrategy};
use dp_opt::PrivacyModel;

/// The limit used when the physical memory cannot be read: 4 GiB.
pub const FALLBACK_MEMORY_LIMIT: u64 = 4 << 30;

/// Dense n×n matrices OPT_⊗ holds per attribute besides its distinct
/// factor Grams: the weighted Gram, its cache key, an identity, and the
/// 1-D optimizer's working set (COA's and p-Identity's iterates, Gram
/// products and factorizations).
const KRON_WORKING_MATRICES: f64 = 16.0;

/// Bytes per number of a plan file held in memory while written: the
/// `f64` of the file's rows and its JSON text (up to 24 characters and a
/// separator), with room for the row vectors.
const PLAN_FILE_BYTES_PER_ENTRY: f64 = 40.0;

/// Bytes of a plan file term beside its factor references: its weight as
/// a number and as JSON text, its vectors and their allocations.
const PLAN_FILE_BYTES_PER_TERM: f64 = 128.0;

/// Bytes of one factor reference of a term beside the attribute's name:
/// the name's copy and allocation, the shared matrix's index, and their
/// JSON text.
const PLAN_FILE_BYTES_PER_REFERENCE: f64 = 96.0;

/// The physical memory in bytes (`MemTotal` of `/proc/meminfo`), if it
/// can be read.
pub fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line.split_whitespace().skip(1);
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then(|| kib.saturating_mul(1024))
}

/// The default memory limit: half the physical memory, or
/// [`FALLBACK_MEMORY_LIMIT`] where it cannot be read.
pub fn default_memory_limit() -> u64 {
    physical_memory().map_or(FALLBACK_MEMORY_LIMIT, |m| m / 2)
}

/// `bytes` for people, in decimal units (`80.0 GB`); past what `u64`
/// holds, in scientific notation.
pub fn format_bytes(bytes: f64) -> String {
    if !bytes.is_finite() {
        "an unbounded amount".into()
    } else if bytes < u64::MAX as f64 {
        bytesize::ByteSize(bytes.max(0.0) as u64)
            .display()
            .si()
            .to_string()
    } else {
        format!("{bytes:.2e} B")
    }
}

/// What one step will hold: named parts in bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryNeed {
    step: &'static str,
    parts: Vec<(String, f64)>,
}

impl MemoryNeed {
    /// Nothing yet for `step` ("planning", "the release", …).
    pub fn new(step: &'static str) -> Self {
        Self {
            step,
            parts: Vec::new(),
        }
    }

    /// Adds a part of `bytes` (NaN counts as unbounded).
    pub fn add(&mut self, what: impl Into<String>, bytes: f64) {
        let bytes = if bytes.is_nan() { f64::INFINITY } else { bytes };
        self.parts.push((what.into(), bytes.max(0.0)));
    }

    /// Adds every part of `other`.
    pub fn extend(&mut self, other: MemoryNeed) {
        self.parts.extend(other.parts);
    }

    /// The total in bytes.
    pub fn bytes(&self) -> f64 {
        self.parts.iter().map(|(_, b)| b).sum()
    }

    /// The largest part, for the message.
    fn largest(&self) -> Option<&(String, f64)> {
        self.parts.iter().max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// `Ok` when the total fits `limit` bytes, else the one-line refusal
    /// naming the step, the total, the largest part and the limit.
    pub fn check(&self, limit: u64) -> Result<()> {
        let total = self.bytes();
        if total <= limit as f64 {
            return Ok(());
        }
        let largest = self
            .largest()
            .map(|(w, b)| format!(" (the largest part: {w}, {})", format_bytes(*b)))
            .unwrap_or_default();
        Err(DpError::MemoryLimit(format!(
            "{} would need about {}{largest}, over the memory limit of {}",
            self.step,
            format_bytes(total),
            format_bytes(limit as f64)
        )))
    }
}

/// Bytes of `count` dense n×n `f64` matrices.
fn square(n: usize, count: f64) -> f64 {
    let n = n as f64;
    count * n * n * 8.0
}

/// Distinct factor kinds per attribute of the workload's products (what
/// OPT_⊗ keeps one Gram of): implicit factors by name, explicit ones each.
fn distinct_factors(w: &StructuredWorkload) -> Vec<f64> {
    let d = w.domain().len();
    let mut names: Vec<Vec<String>> = vec![Vec::new(); d];
    let mut explicit = vec![0.0; d];
    let mut note = |i: usize, f: &Factor| match f {
        Factor::Ranges { .. } | Factor::Matrix(_) => explicit[i] += 1.0,
        _ => {
            let name = f.name();
            if !names[i].contains(&name) {
                names[i].push(name);
            }
        }
    };
    for g in w.groups() {
        match &g.queries {
            Queries::Kron(factors) => factors.iter().enumerate().for_each(|(i, f)| note(i, f)),
            Queries::Marginals(sets) => {
                for s in sets {
                    for (i, f) in w.marginal_factors(s).iter().enumerate() {
                        note(i, f);
                    }
                }
            }
        }
    }
    names
        .iter()
        .zip(explicit)
        .map(|(n, e)| n.len() as f64 + e)
        .collect()
}

/// What OPT_⊗ holds: per attribute, its distinct factor Grams and
/// `KRON_WORKING_MATRICES` more, all n×n.
pub fn kron_need(w: &StructuredWorkload) -> MemoryNeed {
    let mut need = MemoryNeed::new("planning (OPT_⊗)");
    for (a, k) in w.domain().attributes().iter().zip(distinct_factors(w)) {
        need.add(
            format!(
                "dense {n}×{n} matrices for attribute '{}'",
                a.name,
                n = a.size
            ),
            square(a.size, k + KRON_WORKING_MATRICES),
        );
    }
    need
}

/// The attributes a marginal workload uses (in one of its marginals).
fn used_attributes(weights: &[(AttrSet, f64)]) -> Vec<usize> {
    weights
        .iter()
        .fold(AttrSet::EMPTY, |acc, (s, _)| acc.union(s))
        .members()
        .collect()
}

/// What the marginal planners hold (the residual closed form, the
/// max-variance solver, OPT_M): one dense factor per used attribute (the
/// Helmert contrasts or the identity) and, per residual subspace or
/// family set, a few numbers.
fn marginal_need(
    w: &StructuredWorkload,
    weights: &[(AttrSet, f64)],
    step: &'static str,
) -> MemoryNeed {
    let mut need = MemoryNeed::new(step);
    let attrs = w.domain().attributes();
    for i in used_attributes(weights) {
        need.add(
            format!(
                "the dense {n}×{n} factor of attribute '{}'",
                attrs[i].name,
                n = attrs[i].size
            ),
            square(attrs[i].size, 2.0),
        );
    }
    // Subsets of the workload's marginals (residual subspaces, OPT_M's
    // family down-set), a hash entry and a few f64 each.
    let subsets: f64 = weights.iter().map(|(s, _)| 2f64.powi(s.len() as i32)).sum();
    need.add("the residual subspaces", subsets * 128.0);
    need
}

/// What [`super::plan_strategy`] will hold for `workload` under `privacy`
/// and `options`, sized before it runs. Under ε-DP a marginal workload is
/// planned by OPT_M and, beside it, OPT_⊗ when
/// [`kron_rival_fits`] (its Kronecker strategy's table fits the limit).
pub fn planning_need(
    workload: &StructuredWorkload,
    privacy: PrivacyModel,
    options: &PlanOptions,
) -> MemoryNeed {
    let weights = match options.objective {
        PlanObjective::MaxVariance => workload.marginal_max_weights(),
        PlanObjective::TotalVariance => workload.marginal_weights(),
    };
    match (privacy, weights) {
        (PrivacyModel::Approx, Some(w)) => marginal_need(workload, &w, "planning"),
        (PrivacyModel::Pure, Some(w)) => {
            let mut need = marginal_need(workload, &w, "planning");
            if kron_rival_fits(workload, &w, options.memory_limit()) {
                need.extend(kron_need(workload));
            }
            need
        }
        _ => {
            let mut need = kron_need(workload);
            need.step = "planning";
            need
        }
    }
}

/// Whether OPT_⊗ is worth running beside OPT_M on a marginal workload:
/// its strategy `⊗ Aᵢ` has full-rank factors on every attribute the
/// workload uses, so measuring it reads one table over all of them
/// (`Π nᵢ` counts of 8 bytes), and the planning's own matrices must fit
/// too. When either is over `limit` the Kronecker plan could not be
/// released here, and OPT_M's is kept without computing it.
pub fn kron_rival_fits(w: &StructuredWorkload, weights: &[(AttrSet, f64)], limit: u64) -> bool {
    let sizes = w.domain().shape();
    let table: f64 = used_attributes(weights)
        .iter()
        .map(|&i| sizes[i] as f64)
        .product();
    table * 8.0 <= limit as f64 && kron_need(w).bytes() <= limit as f64
}

/// Why the OPT_⊗ rival was not computed (its error, when OPT_M fails
/// too, is OPT_M's).
pub(super) fn kron_rival_skipped() -> DpError {
    DpError::MemoryLimit(
        "OPT_⊗ skipped: its Kronecker strategy would not fit the memory limit".into(),
    )
}

/// What writing the plan file of `strategy` on `domain` holds: every
/// entry of each distinct factor matrix (the file writes a matrix once and
/// terms refer to it), as numbers and as JSON text, and each term's
/// weight and references by attribute name.
pub fn plan_file_need(strategy: &StructuredStrategy, domain: &Domain) -> MemoryNeed {
    let names: Vec<f64> = domain
        .attributes()
        .iter()
        .map(|a| 2.0 * a.name.len() as f64 + PLAN_FILE_BYTES_PER_REFERENCE)
        .collect();
    let mut seen = std::collections::HashSet::new();
    let mut entries = 0.0;
    let mut references = 0.0;
    for t in &strategy.terms {
        references += PLAN_FILE_BYTES_PER_TERM;
        for (i, m) in &t.factors {
            if seen.insert(std::sync::Arc::as_ptr(m)) {
                entries += (m.nrows() * m.ncols()) as f64;
            }
            references += names
                .get(*i)
                .copied()
                .unwrap_or(PLAN_FILE_BYTES_PER_REFERENCE);
        }
    }
    let mut need = MemoryNeed::new("writing the plan file");
    need.add(
        format!("{entries:.3e} distinct factor entries written out"),
        entries * PLAN_FILE_BYTES_PER_ENTRY,
    );
    need.add(
        format!("{} terms and their factor references", strategy.terms.len()),
        references,
    );
    need
}

/// `len` zeros, or a typed error when `len` overflowed (`None`) or the
/// allocator refuses: a vector the input sized never aborts the process.
pub fn try_zeros(len: Option<usize>, what: &str) -> Result<Vec<f64>> {
    let refuse = || {
        DpError::MemoryLimit(format!(
            "{what}: {} values cannot be allocated",
            len.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string())
        ))
    };
    let len = len.ok_or_else(refuse)?;
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| refuse())?;
    v.resize(len, 0.0);
    Ok(v)
}

/// The shape of one strategy term: its support (attribute positions) and
/// each support factor's number of rows.
pub type TermShape = (Vec<usize>, Vec<usize>);

/// The queries of each Kronecker product of `w` with, per attribute, the
/// factor's rows and columns (marginals expanded lazily, one product at a
/// time, by `visit`).
fn visit_products(w: &StructuredWorkload, mut visit: impl FnMut(&[(usize, usize)])) {
    let sizes = w.domain().shape();
    for g in w.groups() {
        match &g.queries {
            Queries::Kron(factors) => {
                let dims: Vec<(usize, usize)> = factors
                    .iter()
                    .map(|f| (f.num_queries(), f.size()))
                    .collect();
                visit(&dims);
            }
            Queries::Marginals(sets) => {
                for s in sets {
                    let dims: Vec<(usize, usize)> = sizes
                        .iter()
                        .enumerate()
                        .map(|(i, &n)| (if s.contains(i) { n } else { 1 }, n))
                        .collect();
                    visit(&dims);
                }
            }
        }
    }
}

/// What [`super::reconstruct::reconstruct`] holds for `workload` from a
/// strategy with terms of shapes `terms`, sized before it runs: the
/// measured values, the answers and variances (a working copy of the
/// largest product's), every workload factor written out, each term's
/// factor pseudo-inverses and projectors, the largest term's values in
/// flight, and where the domain is small enough for them, the
/// conjugate-gradient vectors or the dense normal matrix (the paths taken
/// when the terms are not orthogonal).
pub fn reconstruction_need(workload: &StructuredWorkload, terms: &[TermShape]) -> MemoryNeed {
    let mut need = MemoryNeed::new("the reconstruction");
    let sizes = workload.domain().shape();
    let rows: Vec<f64> = terms
        .iter()
        .map(|(_, r)| r.iter().map(|&k| k as f64).product())
        .collect();
    need.add("the measured values", rows.iter().sum::<f64>() * 8.0);
    let largest_term = rows.iter().copied().fold(0.0, f64::max);
    need.add("the largest term's values in flight", largest_term * 16.0);
    let queries = workload.num_queries();
    need.add(
        format!("the answers and variances of {queries:.3e} queries"),
        queries * 16.0,
    );
    let (mut written, mut largest_product) = (0.0, 0.0f64);
    visit_products(workload, |dims| {
        written += dims.iter().map(|&(m, n)| m as f64 * n as f64).sum::<f64>();
        largest_product = largest_product.max(dims.iter().map(|&(m, _)| m as f64).product());
    });
    need.add("the workload's factors written out", written * 8.0);
    need.add(
        "the largest query product in flight",
        largest_product * 32.0,
    );
    let factors: f64 = terms
        .iter()
        .flat_map(|(support, r)| support.iter().zip(r))
        .map(|(&i, &k)| {
            let n = sizes.get(i).map_or(f64::INFINITY, |&n| n as f64);
            (n * k as f64 + n * n) * 8.0
        })
        .sum();
    need.add("the strategy factors' pseudo-inverses", factors);
    let cells = workload.domain().cells_f64();
    if cells <= crate::reconstruction::DENSE_RECONSTRUCTION_CELLS {
        need.add("the dense normal equations", 4.0 * cells * cells * 8.0);
    } else if cells <= crate::reconstruction::ITERATIVE_RECONSTRUCTION_CELLS {
        need.add("the conjugate-gradient vectors", 8.0 * cells * 8.0);
    }
    need
}

#[cfg(test)]
#[path = "resources_tests.rs"]
mod tests;
