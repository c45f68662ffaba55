//! Which count tables a release keeps ([`Layout`], over a schema's
//! domain), and the counts, opaque ([`PrivateCounts`]). The counting
//! itself is the privacy kernel's ([`dp_core::kernel::records`]): it
//! bounds each privacy unit's contribution and states the scale the
//! measurement's sensitivity is multiplied by.

use dp_core::kernel::records::{Counted, TableLayout};
use dp_workloads::domain::Domain;
use dp_workloads::structured::AttrSet;

use crate::error::RecordsError;

/// Default limit on the cells kept in memory: 2²⁴ counts (128 MiB of u64).
pub const DEFAULT_CELL_LIMIT: u64 = 1 << 24;

pub use dp_core::kernel::records::{LOCAL_CELLS, MAX_CELL_LIMIT};

/// Which count tables to keep: validated against a domain and a cell
/// limit before anything is allocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    kernel: TableLayout,
    full: bool,
}

impl Layout {
    /// The full histogram (one table over every attribute), if its cell
    /// count is at most `cell_limit`.
    pub fn full(domain: &Domain, cell_limit: u64) -> Result<Self, RecordsError> {
        let cell_limit = cell_limit.min(MAX_CELL_LIMIT);
        let cells = domain.cells_f64();
        if cells > cell_limit as f64 {
            return Err(RecordsError::TooManyCells {
                what: "full histogram",
                cells,
                limit: cell_limit,
            });
        }
        let all = (0..domain.attributes().len()).collect();
        Ok(Self {
            kernel: TableLayout::new(domain.shape(), vec![all], 1, MAX_CELL_LIMIT)
                .map_err(|e| RecordsError::Internal(e.to_string()))?,
            full: true,
        })
    }

    /// One table per attribute subset (positions in the domain, strictly
    /// increasing; `[]` is the grand total), if their cells together are
    /// at most `cell_limit`.
    pub fn marginals(
        domain: &Domain,
        subsets: &[Vec<usize>],
        cell_limit: u64,
    ) -> Result<Self, RecordsError> {
        Self::marginals_over_steps(domain, subsets, 1, cell_limit)
    }

    /// [`Layout::marginals`] for each of `steps` steps of a stream: the
    /// cells of every step count against `cell_limit`.
    pub fn marginals_over_steps(
        domain: &Domain,
        subsets: &[Vec<usize>],
        steps: usize,
        cell_limit: u64,
    ) -> Result<Self, RecordsError> {
        let cell_limit = cell_limit.min(MAX_CELL_LIMIT);
        let shape = domain.shape();
        let mut total = 0.0;
        for (index, subset) in subsets.iter().enumerate() {
            let bad = |reason: &str| RecordsError::BadMarginal {
                index,
                reason: reason.to_string(),
            };
            if subset.windows(2).any(|w| w[1] <= w[0]) {
                return Err(bad("attribute positions must increase strictly"));
            }
            if subset.iter().any(|&p| p >= shape.len()) {
                return Err(bad("an attribute position is past the domain"));
            }
            if subsets[..index].contains(subset) {
                return Err(bad("the same marginal is listed twice"));
            }
            total += subset.iter().map(|&p| shape[p] as f64).product::<f64>();
        }
        total *= steps.max(1) as f64;
        if total > cell_limit as f64 {
            return Err(RecordsError::TooManyCells {
                what: "marginal tables",
                cells: total,
                limit: cell_limit,
            });
        }
        Ok(Self {
            kernel: TableLayout::new(shape, subsets.to_vec(), steps, MAX_CELL_LIMIT)
                .map_err(|e| RecordsError::Internal(e.to_string()))?,
            full: false,
        })
    }

    /// [`Layout::marginals`] for attribute sets as `dp_workloads` marginal
    /// workloads and `spec::k_subsets` hold them.
    pub fn marginal_masks(
        domain: &Domain,
        masks: &[AttrSet],
        cell_limit: u64,
    ) -> Result<Self, RecordsError> {
        let subsets: Vec<Vec<usize>> = masks.iter().map(|m| m.members().collect()).collect();
        Self::marginals(domain, &subsets, cell_limit)
    }

    /// The full histogram if it fits `cell_limit`, else the marginals
    /// `subsets` (the full histogram answers every marginal, so it is
    /// preferred whenever it fits).
    pub fn choose(
        domain: &Domain,
        subsets: &[Vec<usize>],
        cell_limit: u64,
    ) -> Result<Self, RecordsError> {
        if domain.cells_f64() <= cell_limit.min(MAX_CELL_LIMIT) as f64 {
            Self::full(domain, cell_limit)
        } else {
            Self::marginals(domain, subsets, cell_limit)
        }
    }

    /// Whether this is the full histogram.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// The attribute positions of each table, in order.
    pub fn tables(&self) -> &[Vec<usize>] {
        self.kernel.tables()
    }

    /// The steps each table is kept for (1 outside a stream).
    pub fn steps(&self) -> usize {
        self.kernel.steps()
    }

    /// The cells of every table, over every step.
    pub fn cells(&self) -> u64 {
        self.kernel.cells()
    }

    /// The attribute sizes of the domain.
    pub(crate) fn shape(&self) -> &[usize] {
        self.kernel.shape()
    }

    /// The kernel's layout.
    pub fn kernel(&self) -> &TableLayout {
        &self.kernel
    }
}

/// Counts of private records, counted by the privacy kernel, opaque: no
/// public method reveals a count, a total or the number of records read
/// or dropped. It goes back to the kernel to be measured
/// ([`PrivateCounts::into_kernel`]). Its `Debug` shows the layout only.
pub struct PrivateCounts {
    pub(crate) layout: Layout,
    pub(crate) counted: Counted,
    /// For this crate's tests: the kept rows' multiplicities summed by
    /// hand beside the kernel (no unit bounding, no weights), since the
    /// kernel's counts are not readable outside it.
    #[cfg(test)]
    pub(crate) shadow: Vec<TestTable>,
    /// For this crate's tests: each kept row's hashed unit and weight, as
    /// encoded (before the kernel bounds or clips them).
    #[cfg(test)]
    pub(crate) shadow_rows: Vec<(u128, f64)>,
}

impl std::fmt::Debug for PrivateCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateCounts")
            .field("layout", &self.layout)
            .field("tables", &"<private>")
            .finish()
    }
}

impl PrivateCounts {
    /// Tables the kernel counted elsewhere and merged
    /// ([`crate::partition`]); the test shadows are empty.
    pub(crate) fn of(layout: Layout, counted: Counted) -> Self {
        Self {
            layout,
            counted,
            #[cfg(test)]
            shadow: Vec::new(),
            #[cfg(test)]
            shadow_rows: Vec::new(),
        }
    }

    /// The layout the counts were kept in (public: it depends only on the
    /// schema and the workload).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The most one privacy unit moves a table, in counts (public: it
    /// follows from the stated contributions).
    pub fn scale(&self) -> u64 {
        self.counted.scale()
    }

    /// The tables as the kernel measures them: one dataset's marginals,
    /// with the scale the kernel stated when it counted them.
    pub fn into_kernel(self) -> Result<dp_core::PrivateMarginals, dp_core::DpError> {
        self.counted.into_marginals()
    }

    /// The tables of the kept rows, for this crate's tests (summed beside
    /// the kernel: see `shadow`).
    #[cfg(test)]
    pub(crate) fn tables(&self) -> &[TestTable] {
        &self.shadow
    }

    /// Each kept row's hashed unit and weight (0 where not stated), for
    /// this crate's tests.
    #[cfg(test)]
    pub(crate) fn kept_rows(&self) -> &[(u128, f64)] {
        &self.shadow_rows
    }

    /// A stream's counts, for the kernel's streaming mechanism, which
    /// measures them step by step: for each step, the cells of `products`
    /// (attribute sets, each one of the layout's tables) in order.
    pub fn into_step_counts(
        self,
        products: &[Vec<usize>],
    ) -> Result<dp_core::kernel::records::StepCounts, RecordsError> {
        self.counted
            .into_step_counts(products)
            .map_err(|e| match e {
                dp_core::DpError::InvalidParameter {
                    name: "contributions",
                    reason,
                } => RecordsError::BadContributions(reason),
                _ => RecordsError::LayoutMismatch,
            })
    }
}

/// One table's counts, for this crate's tests.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TestTable {
    pub(crate) attributes: Vec<usize>,
    pub(crate) counts: Vec<u64>,
}

#[cfg(test)]
impl TestTable {
    /// Zero tables of `layout`.
    pub(crate) fn zeros(layout: &Layout) -> Vec<Self> {
        layout
            .tables()
            .iter()
            .map(|t| {
                let cells: usize = t.iter().map(|&a| layout.shape()[a]).product();
                Self {
                    attributes: t.clone(),
                    counts: vec![0; cells * layout.steps()],
                }
            })
            .collect()
    }

    /// Adds each encoded row's multiplicity at its cell, and each kept
    /// row's unit and weight to `rows`.
    pub(crate) fn count(
        tables: &mut [Self],
        rows: &mut Vec<(u128, f64)>,
        shape: &[usize],
        e: &crate::encode::Encoded,
    ) {
        for (r, &m) in e.multiplicity.iter().enumerate() {
            if m > 0 {
                let unit = e.units.get(r).copied().unwrap_or(0);
                let weight = e.weights.get(r).copied().unwrap_or(0.0);
                rows.push((unit, weight));
            }
        }
        for t in tables {
            let cells: usize = t.attributes.iter().map(|&a| shape[a]).product();
            for (r, &m) in e.multiplicity.iter().enumerate() {
                let mut cell = 0usize;
                for &a in &t.attributes {
                    cell = cell * shape[a] + e.codes[a][r] as usize;
                }
                let step = e.step.get(r).map_or(0, |&s| s as usize);
                let c = &mut t.counts[step * cells + cell];
                *c = c.saturating_add(m);
            }
        }
    }
}
