//! Count tables: which ones are kept ([`Layout`]), how encoded batches are
//! counted into them on each worker ([`Tally`]), and the merged result,
//! opaque ([`PrivateCounts`]).
//!
//! Each worker counts into tables of its own when the layout is small
//! (no locking, no false sharing); a layout larger than
//! [`LOCAL_CELLS`] is counted into one shared set of tables, each
//! worker's encoded block under a lock, so memory is never the tables
//! times the threads.

use std::sync::Mutex;

use dp_workloads::domain::Domain;
use dp_workloads::structured::AttrSet;

use dp_core::kernel::MAX_COUNT;

use crate::encode::Encoded;
use crate::error::RecordsError;

/// Default limit on the cells kept in memory: 2²⁴ counts (128 MiB of u64).
pub const DEFAULT_CELL_LIMIT: u64 = 1 << 24;

/// The largest cell limit honoured (2³¹ counts, 16 GiB): a larger
/// `cell_limit` is lowered to it, so no layout asks for an allocation that
/// cannot be indexed or is far beyond any machine.
pub const MAX_CELL_LIMIT: u64 = 1 << 31;

/// Layouts of at most this many cells (16 MiB of counts) are counted into
/// tables of each worker's own; larger ones into one shared set.
pub const LOCAL_CELLS: u64 = 1 << 21;

/// Which count tables to keep: validated against a domain and a cell
/// limit before anything is allocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub(crate) shape: Vec<usize>,
    /// Attribute positions of each table (strictly increasing).
    tables: Vec<Vec<usize>>,
    full: bool,
    /// Steps of a stream (1 for a release): each table holds one copy of
    /// its cells per step.
    steps: usize,
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
        Ok(Self {
            shape: domain.shape(),
            tables: vec![(0..domain.attributes().len()).collect()],
            full: true,
            steps: 1,
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
            shape,
            tables: subsets.to_vec(),
            full: false,
            steps: steps.max(1),
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
        &self.tables
    }

    /// The steps each table is kept for (1 outside a stream).
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The cells of every table, over every step.
    pub fn cells(&self) -> u64 {
        let per_step: u64 = self
            .tables
            .iter()
            .map(|t| t.iter().map(|&a| self.shape[a] as u64).product::<u64>())
            .sum();
        per_step * self.steps as u64
    }

    /// The bytes counting takes at most: the tables once, or once per
    /// worker for a layout of at most [`LOCAL_CELLS`] cells.
    pub fn counting_bytes(&self) -> f64 {
        let cells = self.cells() as f64;
        let copies = if self.cells() <= LOCAL_CELLS {
            1 + crate::pipeline::workers()
        } else {
            1
        };
        cells * 8.0 * copies as f64
    }
}

/// One count table: row-major over its attributes (last fastest), one
/// block of cells per step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CountTable {
    pub(crate) attributes: Vec<usize>,
    strides: Vec<usize>,
    /// Cells of one step.
    cells: usize,
    pub(crate) counts: Vec<u64>,
}

impl CountTable {
    /// A zero table; an allocation the system refuses is an error, not an
    /// abort.
    fn new(attributes: &[usize], shape: &[usize], steps: usize) -> Result<Self, RecordsError> {
        let mut strides = vec![1usize; attributes.len()];
        for j in (0..attributes.len().saturating_sub(1)).rev() {
            strides[j] = strides[j + 1] * shape[attributes[j + 1]];
        }
        let cells: usize = attributes.iter().map(|&a| shape[a]).product();
        let total = cells * steps;
        let mut counts = Vec::new();
        counts
            .try_reserve_exact(total)
            .map_err(|_| RecordsError::OutOfMemory {
                cells: total as f64,
            })?;
        counts.resize(total, 0);
        Ok(Self {
            attributes: attributes.to_vec(),
            strides,
            cells,
            counts,
        })
    }

    /// Counts every row of `e` with a weight into this table.
    fn count(&mut self, e: &Encoded) {
        // Records weigh 0 or 1: no count can reach 2^64 (it would take as
        // many rows), so only larger weights (a counts table's) are added
        // saturating. Saturating, not refusing: a refusal would depend on
        // the data, and a saturated sum moves no more than the sum does.
        if e.weight.iter().all(|&w| w <= 1) {
            self.count_with(e, |c, w| *c += w);
        } else {
            self.count_with(e, |c, w| *c = c.saturating_add(w));
        }
    }

    #[inline(always)]
    fn count_with(&mut self, e: &Encoded, add: impl Fn(&mut u64, u64)) {
        let counts = &mut self.counts[..];
        let cells = self.cells;
        let step = |r: usize| e.step.get(r).map_or(0, |&s| s as usize * cells);
        match self.attributes[..] {
            [] => {
                for (r, &w) in e.weight.iter().enumerate() {
                    add(&mut counts[step(r)], w);
                }
            }
            [a] => {
                for ((r, &w), &ca) in e.weight.iter().enumerate().zip(&e.codes[a]) {
                    add(&mut counts[step(r) + ca as usize], w);
                }
            }
            [a, b] => {
                let sa = self.strides[0];
                let rows = e.weight.iter().zip(&e.codes[a]).zip(&e.codes[b]);
                for (r, ((&w, &ca), &cb)) in rows.enumerate() {
                    add(&mut counts[step(r) + ca as usize * sa + cb as usize], w);
                }
            }
            _ => {
                // Cell indices a column at a time (each pass a loop the
                // compiler vectorizes), then one pass of additions.
                let mut cell: Vec<usize> = (0..e.weight.len()).map(step).collect();
                for (&a, &stride) in self.attributes.iter().zip(&self.strides) {
                    for (c, &code) in cell.iter_mut().zip(&e.codes[a]) {
                        *c += code as usize * stride;
                    }
                }
                for (&c, &w) in cell.iter().zip(&e.weight) {
                    add(&mut counts[c], w);
                }
            }
        }
    }

    fn merge(&mut self, other: &CountTable) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a = a.saturating_add(*b);
        }
    }
}

fn zero_tables(layout: &Layout) -> Result<Vec<CountTable>, RecordsError> {
    layout
        .tables
        .iter()
        .map(|attrs| CountTable::new(attrs, &layout.shape, layout.steps))
        .collect()
}

/// Where a worker counts: its own tables, or the shared ones.
pub(crate) enum Tally<'s> {
    Local(Vec<CountTable>),
    Shared(&'s Mutex<Vec<CountTable>>),
}

impl Tally<'_> {
    /// Counts the rows of `e`.
    pub(crate) fn count(&mut self, e: &Encoded) {
        match self {
            Tally::Local(tables) => tables.iter_mut().for_each(|t| t.count(e)),
            Tally::Shared(tables) => tables
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter_mut()
                .for_each(|t| t.count(e)),
        }
    }
}

/// Tables to count into: one set per worker or one shared set.
pub(crate) struct Counting {
    layout: Layout,
    shared: Option<Mutex<Vec<CountTable>>>,
}

impl Counting {
    /// Allocates the shared tables when the layout is large; small
    /// layouts are allocated by each worker ([`Counting::tally`]).
    pub(crate) fn new(layout: &Layout) -> Result<Self, RecordsError> {
        let shared = if layout.cells() > LOCAL_CELLS {
            Some(Mutex::new(zero_tables(layout)?))
        } else {
            // Checked here, so that a worker's allocation cannot fail
            // where it is not reported.
            zero_tables(layout)?;
            None
        };
        Ok(Self {
            layout: layout.clone(),
            shared,
        })
    }

    /// A worker's tally.
    pub(crate) fn tally(&self) -> Result<Tally<'_>, RecordsError> {
        Ok(match &self.shared {
            Some(shared) => Tally::Shared(shared),
            None => Tally::Local(zero_tables(&self.layout)?),
        })
    }

    /// The workers' tallies summed.
    pub(crate) fn finish(&self, tallies: Vec<Tally<'_>>) -> Result<PrivateCounts, RecordsError> {
        let mut locals = tallies.into_iter().filter_map(|t| match t {
            Tally::Local(tables) => Some(tables),
            Tally::Shared(_) => None,
        });
        let mut tables = match &self.shared {
            Some(shared) => std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner())),
            None => match locals.next() {
                Some(first) => first,
                None => zero_tables(&self.layout)?,
            },
        };
        for local in locals {
            for (t, l) in tables.iter_mut().zip(&local) {
                t.merge(l);
            }
        }
        Ok(PrivateCounts {
            layout: self.layout.clone(),
            tables,
        })
    }
}

/// Counts of private records, opaque: no public method reveals a count, a
/// total or the number of records read or dropped.
///
/// It is handed to the privacy kernel by [`PrivateCounts::into_kernel`]
/// (dp-core's opaque [`dp_core::PrivateMarginals`]), which alone reads the
/// counts and adds noise. Its `Debug` shows the layout only.
pub struct PrivateCounts {
    layout: Layout,
    tables: Vec<CountTable>,
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
    /// The layout the counts were kept in (public: it depends only on the
    /// schema and the workload).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Hands the tables to the privacy kernel as one dataset's marginals
    /// (they come from one pass over the records, so one record adds one
    /// to one cell of every table: the contract of
    /// [`dp_core::PrivateMarginals`]). Nothing else reads the counts.
    pub fn into_kernel(self) -> Result<dp_core::PrivateMarginals, dp_core::DpError> {
        if self.layout.steps != 1 {
            return Err(dp_core::DpError::InvalidParameter {
                name: "counts",
                reason: "a stream's tables are measured step by step".into(),
            });
        }
        // The kernel's exact arithmetic takes counts up to MAX_COUNT (2^40);
        // larger ones saturate there (a contraction, as in the kernel's own
        // sums), so no refusal depends on how many records there are.
        let tables = self
            .tables
            .into_iter()
            .map(|t| {
                let counts = t.counts.into_iter().map(|c| c.min(MAX_COUNT)).collect();
                (t.attributes, counts)
            })
            .collect();
        dp_core::PrivateMarginals::new(self.layout.shape, tables)
    }

    /// A stream's counts, for the kernel's streaming mechanism, which
    /// measures them step by step: for each step, the cells of `products`
    /// (attribute sets, each one of the layout's tables) in order, as the
    /// integers [`dp_core::StreamMechanism::next_counts`] takes.
    pub fn into_step_counts(self, products: &[Vec<usize>]) -> Result<Vec<i64>, RecordsError> {
        let index: Vec<usize> = products
            .iter()
            .map(|p| {
                self.tables
                    .iter()
                    .position(|t| &t.attributes == p)
                    .ok_or(RecordsError::LayoutMismatch)
            })
            .collect::<Result<_, _>>()?;
        let per_step: usize = index.iter().map(|&i| self.tables[i].cells).sum();
        let mut out = Vec::with_capacity(per_step * self.layout.steps);
        for step in 0..self.layout.steps {
            for &i in &index {
                let t = &self.tables[i];
                out.extend(
                    t.counts[step * t.cells..(step + 1) * t.cells]
                        .iter()
                        .map(|&c| i64::try_from(c).unwrap_or(i64::MAX)),
                );
            }
        }
        Ok(out)
    }

    /// The tables, for this crate's tests only.
    #[cfg(test)]
    pub(crate) fn tables(&self) -> &[CountTable] {
        &self.tables
    }
}
