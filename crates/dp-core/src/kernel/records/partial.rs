//! Counting where the records live, measuring where the kernel is: a
//! cluster's workers (Spark executors) count their partitions with this
//! kernel's [`Counting`](super::Counting); the driver's kernel merges the
//! partitions' tables into one [`Counted`] and measures it.
//!
//! * A [`DistributedKey`] is drawn by the driver's kernel for one
//!   release: the key of the privacy units' hash (so that every worker
//!   hashes a unit alike, and the records of one unit can be brought
//!   together by it) and the key that seals each partition's tables. It
//!   goes to the workers with the code that counts, and nowhere else.
//! * A worker's tables leave it as a [`Partial`]: the partition's index,
//!   its non-zero cells, and a seal over all of them.
//! * The driver's [`Merge`] takes the partials of one counting only, each
//!   partition once and whole (its seal checks), and sums them: a
//!   partition counted twice would double what one person moves, so it
//!   is refused, as are tables of another counting.
//!
//! What one unit moves the merged tables by is what it moves one
//! partition's by: each record is in one partition, and the records of
//! one unit are in one partition whenever units are bounded (the caller
//! partitions by [`DistributedKey::unit`]).

use std::collections::HashMap;
use std::hash::Hasher;

use siphasher::sip::SipHasher24;
use siphasher::sip128::{Hasher128, SipHasher24 as SipHasher24x128};

use super::tables::{CountTable, TableLayout};
use super::{Contributions, Counted};
use crate::sampling::NoiseSource;
use crate::{DpError, Result};

/// The secret of one distributed counting (see the [module
/// documentation](self)): never written to a release's outputs.
#[derive(Clone, PartialEq, Eq)]
pub struct DistributedKey {
    unit: (u64, u64),
    seal: (u64, u64),
}

impl std::fmt::Debug for DistributedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DistributedKey(..)")
    }
}

impl DistributedKey {
    /// A fresh key from operating-system entropy.
    pub fn fresh() -> Result<Self> {
        let mut e = NoiseSource::from_os_entropy()?;
        Ok(Self {
            unit: (e.next_u64(), e.next_u64()),
            seal: (e.next_u64(), e.next_u64()),
        })
    }

    /// The key as 64 hex digits, for the workers (secret).
    pub fn to_hex(&self) -> String {
        let [a, b] = [self.unit, self.seal];
        format!("{:016x}{:016x}{:016x}{:016x}", a.0, a.1, b.0, b.1)
    }

    /// The key from [`DistributedKey::to_hex`].
    pub fn from_hex(text: &str) -> Result<Self> {
        let bad = || DpError::InvalidParameter {
            name: "distributed key",
            reason: "is not 64 hex digits".into(),
        };
        if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let word =
            |i: usize| u64::from_str_radix(&text[16 * i..16 * (i + 1)], 16).map_err(|_| bad());
        Ok(Self {
            unit: (word(0)?, word(1)?),
            seal: (word(2)?, word(3)?),
        })
    }

    /// A privacy unit's 128-bit hash, as [`Counting::unit`](super::Counting::unit)
    /// makes it, under this key: the same on every worker.
    pub fn unit(&self, tag: u8, bytes: &[u8]) -> u128 {
        let mut h = SipHasher24x128::new_with_keys(self.unit.0, self.unit.1);
        h.write_u8(tag);
        h.write(bytes);
        u128::from(h.finish128())
    }

    /// One cell's share of a partition's seal.
    fn mark(&self, partition: u32, table: u32, cell: u64, count: u64) -> u64 {
        let mut h = SipHasher24::new_with_keys(self.seal.0, self.seal.1);
        h.write_u32(partition);
        h.write_u32(table);
        h.write_u64(cell);
        h.write_u64(count);
        h.finish()
    }

    /// The seal of a partition of `cells` non-zero cells whose marks sum
    /// (wrapping) to `marks`: independent of the cells' order.
    fn seal(&self, partition: u32, cells: u64, marks: u64) -> u64 {
        marks.wrapping_add(self.mark(partition, u32::MAX, cells, u64::MAX))
    }
}

/// One partition's tables, leaving the worker that counted them: exact
/// counts of private records, for the driver's [`Merge`] only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    /// The partition's index.
    pub partition: u32,
    /// `(table, cell, count)` of each non-zero cell, in order.
    pub cells: Vec<(u32, u64, u64)>,
    /// The seal over the partition and its cells.
    pub seal: u64,
}

impl Counted {
    /// These tables as partition `partition`'s [`Partial`], sealed with
    /// `key`.
    pub fn into_partial(self, key: &DistributedKey, partition: u32) -> Partial {
        let mut cells = Vec::new();
        let mut marks = 0u64;
        for (t, table) in self.tables.iter().enumerate() {
            for (c, &n) in table.counts.iter().enumerate() {
                if n != 0 {
                    cells.push((t as u32, c as u64, n));
                    marks = marks.wrapping_add(key.mark(partition, t as u32, c as u64, n));
                }
            }
        }
        let seal = key.seal(partition, cells.len() as u64, marks);
        Partial {
            partition,
            cells,
            seal,
        }
    }
}

/// The driver's side: the partitions' [`Partial`]s of one counting summed
/// into one [`Counted`] (see the [module documentation](self)).
pub struct Merge {
    layout: TableLayout,
    contributions: Contributions,
    key: DistributedKey,
    tables: Vec<CountTable>,
    /// Per partition: its cells and their marks so far.
    seen: HashMap<u32, (u64, u64)>,
    /// Per partition: its seal's cells and seal.
    seals: HashMap<u32, (u64, u64)>,
}

impl std::fmt::Debug for Merge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Merge")
            .field("layout", &self.layout)
            .field("partitions", &self.seals.len())
            .finish_non_exhaustive()
    }
}

fn refused(reason: impl Into<String>) -> DpError {
    DpError::InvalidParameter {
        name: "partial count tables",
        reason: reason.into(),
    }
}

impl Merge {
    /// An empty merge of tables of `layout` counted under `contributions`
    /// and sealed with `key`.
    pub fn new(
        layout: TableLayout,
        contributions: Contributions,
        key: DistributedKey,
    ) -> Result<Self> {
        let contributions = contributions.check()?;
        if contributions.steps.is_some() || layout.steps() != 1 {
            return Err(refused("a stream's tables are not merged from partitions"));
        }
        Ok(Self {
            tables: layout.zeros()?,
            layout,
            contributions,
            key,
            seen: HashMap::new(),
            seals: HashMap::new(),
        })
    }

    /// Adds one non-zero cell of partition `partition`.
    pub fn cell(&mut self, partition: u32, table: u32, cell: u64, count: u64) -> Result<()> {
        let t = self
            .tables
            .get_mut(table as usize)
            .filter(|t| cell < t.cells as u64 && count > 0)
            .ok_or_else(|| refused("a cell that is not one of the layout's"))?;
        let c = &mut t.counts[cell as usize];
        *c = c.saturating_add(count);
        let seen = self.seen.entry(partition).or_default();
        seen.0 += 1;
        seen.1 = seen
            .1
            .wrapping_add(self.key.mark(partition, table, cell, count));
        Ok(())
    }

    /// Partition `partition`'s seal, over `cells` non-zero cells: each
    /// partition is sealed once.
    pub fn seal(&mut self, partition: u32, cells: u64, seal: u64) -> Result<()> {
        if self.seals.insert(partition, (cells, seal)).is_some() {
            return Err(refused(format!(
                "partition {partition} was counted twice (its records would count twice)"
            )));
        }
        Ok(())
    }

    /// A whole partial.
    pub fn add(&mut self, partial: &Partial) -> Result<()> {
        for &(t, c, n) in &partial.cells {
            self.cell(partial.partition, t, c, n)?;
        }
        self.seal(partial.partition, partial.cells.len() as u64, partial.seal)
    }

    /// The partitions merged: `partitions` of them (when the engine says
    /// how many; else as many as were sealed), indices `0..partitions`,
    /// each whole and sealed by this counting's key.
    pub fn finish(self, partitions: Option<u32>) -> Result<Counted> {
        let partitions = partitions.unwrap_or(self.seals.len() as u32);
        if self.seals.len() != partitions as usize || self.seals.keys().any(|&p| p >= partitions) {
            return Err(refused(format!(
                "{} partitions' tables where {partitions} were counted",
                self.seals.len()
            )));
        }
        if self.seen.keys().any(|p| !self.seals.contains_key(p)) {
            return Err(refused("cells of a partition with no seal"));
        }
        for (&p, &(cells, seal)) in &self.seals {
            let (seen, marks) = self.seen.get(&p).copied().unwrap_or((0, 0));
            if seen != cells || self.key.seal(p, cells, marks) != seal {
                return Err(refused(format!(
                    "partition {p}'s tables are not whole or not of this counting (their seal \
                     does not hold)"
                )));
            }
        }
        Ok(Counted {
            layout: self.layout,
            tables: self.tables,
            scale: self.contributions.scale(),
            unit: self.contributions.count_unit(),
            contributions: self.contributions,
        })
    }
}
