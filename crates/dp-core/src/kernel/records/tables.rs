//! Count tables: which ones are kept ([`TableLayout`]), and one table
//! ([`CountTable`]) counting encoded records.

use crate::{DpError, Result};

use super::Records;

/// The largest cell limit honoured (2³¹ counts, 16 GiB): a larger limit is
/// lowered to it, so no layout asks for an allocation that cannot be
/// indexed or is far beyond any machine.
pub const MAX_CELL_LIMIT: u64 = 1 << 31;

/// Which count tables to keep over a domain of attribute sizes `shape`:
/// validated before anything is allocated (public: it depends on the
/// schema and the workload only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableLayout {
    shape: Vec<usize>,
    /// Attribute positions of each table (strictly increasing).
    tables: Vec<Vec<usize>>,
    /// Steps of a stream (1 for a release): each table holds one copy of
    /// its cells per step.
    steps: usize,
}

fn invalid(reason: String) -> DpError {
    DpError::InvalidParameter {
        name: "table layout",
        reason,
    }
}

impl TableLayout {
    /// One table per attribute subset of `shape` (positions strictly
    /// increasing; `[]` is the grand total), each kept for `steps` steps,
    /// if their cells together are at most `cell_limit` (lowered to
    /// [`MAX_CELL_LIMIT`]).
    pub fn new(
        shape: Vec<usize>,
        tables: Vec<Vec<usize>>,
        steps: usize,
        cell_limit: u64,
    ) -> Result<Self> {
        if shape.contains(&0) {
            return Err(invalid("an attribute of size 0".into()));
        }
        let limit = cell_limit.min(MAX_CELL_LIMIT);
        let mut total = 0.0;
        for (index, t) in tables.iter().enumerate() {
            if t.windows(2).any(|w| w[1] <= w[0]) || t.iter().any(|&p| p >= shape.len()) {
                return Err(invalid(format!(
                    "table #{index}: attribute positions must increase strictly within the domain"
                )));
            }
            if tables[..index].contains(t) {
                return Err(invalid(format!("table #{index} is listed twice")));
            }
            total += t.iter().map(|&p| shape[p] as f64).product::<f64>();
        }
        total *= steps.max(1) as f64;
        if total > limit as f64 {
            return Err(DpError::InvalidParameter {
                name: "count tables",
                reason: format!("{total:.3e} cells needed: more than the limit of {limit}"),
            });
        }
        Ok(Self {
            shape,
            tables,
            steps: steps.max(1),
        })
    }

    /// The attribute sizes.
    pub fn shape(&self) -> &[usize] {
        &self.shape
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

    /// Zero tables of this layout; an allocation the system refuses is an
    /// error, not an abort.
    pub(crate) fn zeros(&self) -> Result<Vec<CountTable>> {
        self.tables
            .iter()
            .map(|attrs| CountTable::new(attrs, &self.shape, self.steps))
            .collect()
    }
}

/// One count table: row-major over its attributes (last fastest), one
/// block of cells per step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CountTable {
    pub(crate) attributes: Vec<usize>,
    strides: Vec<usize>,
    /// Cells of one step.
    pub(crate) cells: usize,
    pub(crate) counts: Vec<u64>,
}

impl CountTable {
    fn new(attributes: &[usize], shape: &[usize], steps: usize) -> Result<Self> {
        let mut strides = vec![1usize; attributes.len()];
        for j in (0..attributes.len().saturating_sub(1)).rev() {
            strides[j] = strides[j + 1] * shape[attributes[j + 1]];
        }
        let cells: usize = attributes.iter().map(|&a| shape[a]).product();
        let total = cells * steps;
        let mut counts = Vec::new();
        counts
            .try_reserve_exact(total)
            .map_err(|_| DpError::InvalidParameter {
                name: "count tables",
                reason: format!("cannot allocate {:.3e} counts", total as f64),
            })?;
        counts.resize(total, 0);
        Ok(Self {
            attributes: attributes.to_vec(),
            strides,
            cells,
            counts,
        })
    }

    /// Adds each record's contribution `values[r]` (0 for a record left
    /// out) at its cell. Saturating, never failing: a refusal here would
    /// depend on the data, and a saturated sum moves no more than the sum.
    pub(crate) fn count(&mut self, records: &Records<'_>, values: &[u64]) {
        // Records of weight 0 or 1 cannot reach 2^64 (it would take as
        // many rows): a plain addition.
        if values.iter().all(|&w| w <= 1) {
            self.count_with(records, values, |c, w| *c += w);
        } else {
            self.count_with(records, values, |c, w| *c = c.saturating_add(w));
        }
    }

    #[inline(always)]
    fn count_with(&mut self, records: &Records<'_>, values: &[u64], add: impl Fn(&mut u64, u64)) {
        let counts = &mut self.counts[..];
        let cells = self.cells;
        let steps = records.steps;
        let step = |r: usize| steps.get(r).map_or(0, |&s| s as usize * cells);
        let codes = records.codes;
        match self.attributes[..] {
            [] => {
                for (r, &w) in values.iter().enumerate() {
                    add(&mut counts[step(r)], w);
                }
            }
            [a] => {
                for ((r, &w), &ca) in values.iter().enumerate().zip(&codes[a]) {
                    add(&mut counts[step(r) + ca as usize], w);
                }
            }
            [a, b] => {
                let sa = self.strides[0];
                let rows = values.iter().zip(&codes[a]).zip(&codes[b]);
                for (r, ((&w, &ca), &cb)) in rows.enumerate() {
                    add(&mut counts[step(r) + ca as usize * sa + cb as usize], w);
                }
            }
            _ => {
                // Cell indices a column at a time (each pass a loop the
                // compiler vectorizes), then one pass of additions.
                let mut cell: Vec<usize> = (0..values.len()).map(step).collect();
                for (&a, &stride) in self.attributes.iter().zip(&self.strides) {
                    for (c, &code) in cell.iter_mut().zip(&codes[a]) {
                        *c += code as usize * stride;
                    }
                }
                for (&c, &w) in cell.iter().zip(values) {
                    add(&mut counts[c], w);
                }
            }
        }
    }

    /// Adds one record's contribution `value` at the cell of `codes` (one
    /// code per attribute of the domain) and step `step`.
    pub(crate) fn count_one(&mut self, codes: &[u32], step: u32, value: u64) {
        let cell: usize = self
            .attributes
            .iter()
            .zip(&self.strides)
            .map(|(&a, &s)| codes[a] as usize * s)
            .sum();
        let c = &mut self.counts[step as usize * self.cells + cell];
        *c = c.saturating_add(value);
    }

    pub(crate) fn merge(&mut self, other: &CountTable) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a = a.saturating_add(*b);
        }
    }
}
