//! Records into count tables, inside the kernel: what one person may
//! contribute is stated here, bounded here and turned into the sensitivity
//! here, so that no caller passes a norm, a sensitivity or a promise that
//! the tables belong to one dataset.
//!
//! The caller hands over encoded records ([`Records`]: each record's cell
//! of every attribute, its multiplicity — 0 for a record its schema
//! dropped, a counts table's count otherwise 1 —, and, when the release
//! states them, its privacy unit, weight and step). A [`Counting`] counts
//! them into the tables of a [`TableLayout`]:
//!
//! * **Privacy unit** ([`Contributions::max_records_per_unit`] `= K`): at
//!   most `K` records of each unit are kept, chosen at random (uniform
//!   64-bit priorities from the kernel's own random source, the `K`
//!   smallest kept: a uniform `K`-subset whatever the input's order), in
//!   bounded memory (see the `bound` module). Without it the unit is one
//!   record.
//! * **Weights** ([`Contributions::max_weight`] `= W`): each record counts
//!   its weight clipped to `[0, W]`, put on the grid of `u = 2^⌈log₂ W⌉ /
//!   2¹⁶` by stochastic rounding with the kernel's random source
//!   (unbiased; a weight that is not a finite number is the caller's
//!   malformed record, never passed here). Counts are in units of `u`.
//!
//! The [`Counted`] tables carry their **scale**: the most one unit moves
//! a table in L1, in counts — `K` (or 1) times `⌈W/u⌉` (or 1). A change
//! of L1 norm `s` moves `Ã x` by at most `s` times the largest column
//! norm of `Ã`, in L1 and in L2 alike (the triangle inequality), so the
//! kernel multiplies the strategy's sensitivity by the scale; and every
//! value it returns is in the records' units (counts times `u`).
//!
//! Counts saturate at 2⁶⁴ while counting and at [`super::MAX_COUNT`] when
//! handed to the measurement: never an error, which would depend on the
//! data; saturating is a contraction, so the sensitivity holds.

mod bound;
pub mod partial;
mod tables;

use std::hash::Hasher;

use siphasher::sip128::{Hasher128, SipHasher24};
use std::path::PathBuf;
use std::sync::Mutex;

pub use bound::remove_spills;
pub use partial::{DistributedKey, Merge, Partial};
pub use tables::{MAX_CELL_LIMIT, TableLayout};

use crate::sampling::NoiseSource;
use crate::{DpError, Result};

use super::MAX_COUNT;
use super::marginals::PrivateMarginals;
use super::stream::CountsBound;
use tables::CountTable;

/// Layouts of at most this many cells (16 MiB of counts) are counted into
/// tables of each worker's own; larger ones into one shared set, so that
/// memory is never the tables times the workers.
pub const LOCAL_CELLS: u64 = 1 << 21;

/// The largest number of records kept per unit.
pub const MAX_RECORDS_PER_UNIT: u32 = 1 << 16;

/// `log₂` of the steps of a weight's grid within its bound: a weight of
/// `W` is at most `2¹⁶` counts.
pub const WEIGHT_BITS: u32 = 16;

/// What one privacy unit may contribute (public: the curator states it).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Contributions {
    /// Records kept per unit, at most [`MAX_RECORDS_PER_UNIT`] (`None`:
    /// the unit is one record).
    pub max_records_per_unit: Option<u32>,
    /// The bound `W` each record's weight is clipped to, positive and
    /// finite (`None`: each record counts one).
    pub max_weight: Option<f64>,
    /// A stream's bound on the steps of one unit (with
    /// `max_records_per_unit`, which then bounds its records in each
    /// step).
    pub steps: Option<StepBound>,
}

/// The steps one unit of a stream may contribute to: at most
/// `max_steps`, pairwise at least `min_separation` apart (both at least
/// 1). A unit's steps are kept in the order of uniform random priorities
/// (a keyed hash of the unit and the step), each kept when it is far
/// enough from those kept before, until `max_steps` are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepBound {
    /// Steps kept per unit.
    pub max_steps: u32,
    /// The least distance between two kept steps.
    pub min_separation: u32,
}

impl Contributions {
    /// Validated: `K` in `1..=`[`MAX_RECORDS_PER_UNIT`], `W` in
    /// `[2⁻³⁰, 2⁴⁰]`.
    pub fn check(self) -> Result<Self> {
        if let Some(k) = self.max_records_per_unit
            && !(1..=MAX_RECORDS_PER_UNIT).contains(&k)
        {
            return Err(DpError::InvalidParameter {
                name: "max records per unit",
                reason: format!("must be in 1..={MAX_RECORDS_PER_UNIT}, got {k}"),
            });
        }
        if let Some(b) = self.steps
            && (b.max_steps == 0 || b.min_separation == 0 || self.max_records_per_unit.is_none())
        {
            return Err(DpError::InvalidParameter {
                name: "steps per unit",
                reason: "a unit's steps and their separation must be at least 1, with a bound on \
                         its records"
                    .into(),
            });
        }
        if let Some(w) = self.max_weight
            && !(w.is_finite() && (2f64.powi(-30)..=2f64.powi(40)).contains(&w))
        {
            return Err(DpError::InvalidParameter {
                name: "max weight",
                reason: format!("must be a number in [2^-30, 2^40], got {w}"),
            });
        }
        Ok(self)
    }

    /// What one count is worth (`u`): 1, or a weight's grid step.
    pub fn count_unit(&self) -> f64 {
        self.max_weight.map_or(1.0, |w| {
            let e = w.log2().ceil() as i32;
            // The smallest power of two at least W, over 2^WEIGHT_BITS.
            let top = if 2f64.powi(e) < w {
                2f64.powi(e + 1)
            } else {
                2f64.powi(e)
            };
            top / 2f64.powi(WEIGHT_BITS as i32)
        })
    }

    /// The most one record counts: `⌈W/u⌉` (at most 2¹⁶), or 1.
    pub fn record_counts(&self) -> u64 {
        self.max_weight
            .map_or(1, |w| (w / self.count_unit()).ceil() as u64)
    }

    /// The most one unit moves a table in L1, in counts.
    pub fn scale(&self) -> u64 {
        u64::from(self.max_records_per_unit.unwrap_or(1)) * self.record_counts()
    }
}

/// One batch of encoded records, all of one length.
#[derive(Debug, Clone, Copy)]
pub struct Records<'a> {
    /// `codes[a][r]`: record `r`'s cell of attribute `a` (any cell where
    /// the record is left out), one vector per attribute of the domain.
    pub codes: &'a [Vec<u32>],
    /// Each record's multiplicity: 1 for a record, a counts table's
    /// count, 0 for a record the schema left out.
    pub multiplicity: &'a [u64],
    /// Each record's privacy unit, hashed by [`Counting::unit`] (when the
    /// contributions bound records per unit).
    pub units: Option<&'a [u128]>,
    /// Each record's weight, finite and non-negative (when the
    /// contributions bound weights).
    pub weights: Option<&'a [f64]>,
    /// Each record's step (a stream); empty otherwise.
    pub steps: &'a [u32],
}

enum Mode {
    /// Each worker counts into tables of its own.
    Local,
    /// One shared set of tables.
    Shared(Mutex<Vec<CountTable>>),
    /// Records per unit bounded: entries spread over partitions, counted
    /// at the end.
    Bounded {
        k: usize,
        steps: Option<StepBound>,
        spill: bound::Spill,
    },
}

/// Counts encoded records into the tables of a layout, bounding each
/// unit's contribution: see the [module documentation](self).
pub struct Counting {
    layout: TableLayout,
    contributions: Contributions,
    mode: Mode,
    /// The key of the units' 128-bit hash (from operating-system
    /// entropy, fresh for each counting).
    key: (u64, u64),
    /// Each worker's share of the memory for buffered records.
    buffer_limit: usize,
    /// Names the spill directory.
    tag: u64,
}

impl std::fmt::Debug for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counting")
            .field("layout", &self.layout)
            .field("contributions", &self.contributions)
            .finish_non_exhaustive()
    }
}

impl Counting {
    /// Counting into `layout` under `contributions`; bounded records are
    /// buffered within `memory` bytes (beyond it, in files of a private
    /// directory created under `spill_dir` and removed when done), shared
    /// by `workers` workers.
    pub fn new(
        layout: TableLayout,
        contributions: Contributions,
        memory: u64,
        spill_dir: PathBuf,
        workers: usize,
    ) -> Result<Self> {
        let contributions = contributions.check()?;
        let mode = match contributions.max_records_per_unit {
            Some(k) => Mode::Bounded {
                k: k as usize,
                steps: contributions.steps,
                spill: bound::Spill::new(spill_dir),
            },
            None if layout.cells() > LOCAL_CELLS => Mode::Shared(Mutex::new(layout.zeros()?)),
            None => {
                // Allocated here once, so that a worker's allocation cannot
                // fail where it is not reported.
                layout.zeros()?;
                Mode::Local
            }
        };
        let mut entropy = NoiseSource::from_os_entropy()?;
        let tag = entropy.next_u64();
        let key = (entropy.next_u64(), entropy.next_u64());
        Ok(Self {
            buffer_limit: (memory / (2 * workers.max(1) as u64)).min(usize::MAX as u64) as usize,
            layout,
            contributions,
            mode,
            key,
            tag,
        })
    }

    /// The layout counted into.
    pub fn layout(&self) -> &TableLayout {
        &self.layout
    }

    /// The 128-bit hash of a privacy unit's canonical bytes, a `tag` (its
    /// kind) and `bytes`: SipHash-2-4-128 under a random 128-bit key drawn
    /// for each counting. Units are told apart by it alone: two units
    /// whose hashes collided would be bounded as one, so that adding one
    /// could change the other's kept records; among `n` units that has
    /// probability about `n²/2¹²⁹` (the hash is a PRF under a key never
    /// seen outside this process).
    pub fn unit(&self, tag: u8, bytes: &[u8]) -> u128 {
        let mut h = SipHasher24::new_with_keys(self.key.0, self.key.1);
        h.write_u8(tag);
        h.write(bytes);
        u128::from(h.finish128())
    }

    /// The bytes counting holds at most: the tables (once per worker when
    /// small), and the bounded records' buffers.
    pub fn bytes(layout: &TableLayout, contributions: Contributions, workers: usize) -> f64 {
        let cells = layout.cells() as f64;
        let copies =
            if contributions.max_records_per_unit.is_none() && layout.cells() <= LOCAL_CELLS {
                1 + workers
            } else {
                1
            };
        cells * 8.0 * copies as f64
    }

    /// A worker's tally.
    pub fn tally(&self) -> Result<Tally<'_>> {
        Ok(Tally {
            counting: self,
            local: match self.mode {
                Mode::Local => Some(self.layout.zeros()?),
                _ => None,
            },
            buffer: match self.mode {
                Mode::Bounded { .. } => Some(bound::Buffer::new(
                    self.layout.shape().len(),
                    self.buffer_limit,
                )),
                _ => None,
            },
            noise: NoiseSource::from_os_entropy()?,
            values: Vec::new(),
        })
    }

    /// The workers' tallies counted together.
    pub fn finish(&self, tallies: Vec<Tally<'_>>) -> Result<Counted> {
        let mut tables = match &self.mode {
            Mode::Shared(shared) => {
                std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()))
            }
            _ => self.layout.zeros()?,
        };
        let mut buffers = Vec::new();
        for tally in tallies {
            if let Some(local) = tally.local {
                for (t, l) in tables.iter_mut().zip(&local) {
                    t.merge(l);
                }
            }
            buffers.extend(tally.buffer);
        }
        if let Mode::Bounded { k, steps, spill } = &self.mode {
            let width = self.layout.shape().len();
            // A step's priority within its unit: the keyed hash of both.
            let priority = |unit: u128, step: u32| -> u64 {
                let mut h = SipHasher24::new_with_keys(self.key.0, self.key.1);
                h.write_u8(0xff);
                h.write_u128(unit);
                h.write_u32(step);
                h.finish()
            };
            let steps = steps.map(|b| (b, &priority as &bound::StepPriority<'_>));
            for p in 0..bound::PARTITIONS {
                crate::interrupt::check()?;
                bound::count_partition(p, *k, steps, width, spill, &buffers, &mut tables)?;
            }
        }
        Ok(Counted {
            layout: self.layout.clone(),
            tables,
            scale: self.contributions.scale(),
            unit: self.contributions.count_unit(),
            contributions: self.contributions,
        })
    }
}

/// A worker's side of a [`Counting`].
pub struct Tally<'c> {
    counting: &'c Counting,
    local: Option<Vec<CountTable>>,
    buffer: Option<bound::Buffer>,
    noise: NoiseSource,
    /// Scratch: each record's counts.
    values: Vec<u64>,
}

impl std::fmt::Debug for Tally<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tally").finish_non_exhaustive()
    }
}

impl Tally<'_> {
    /// Counts a batch of records.
    pub fn add(&mut self, records: &Records<'_>) -> Result<()> {
        let rows = records.multiplicity.len();
        let width = self.counting.layout.shape().len();
        let consistent = records.codes.len() == width
            && records.codes.iter().all(|c| c.len() == rows)
            && records.units.is_none_or(|u| u.len() == rows)
            && records.weights.is_none_or(|w| w.len() == rows)
            && (records.steps.is_empty() || records.steps.len() == rows)
            && records.units.is_some() == matches!(self.counting.mode, Mode::Bounded { .. })
            && records.weights.is_some() == self.counting.contributions.max_weight.is_some();
        if !consistent {
            return Err(DpError::DimensionMismatch {
                what:
                    "encoded records of other lengths, or other contributions, than the counting's"
                        .into(),
            });
        }
        // Each record's counts: its multiplicity times its weight on the
        // grid (stochastically rounded), or its multiplicity.
        self.values.clear();
        match (records.weights, self.counting.contributions.max_weight) {
            (Some(weights), Some(max)) => {
                let unit = self.counting.contributions.count_unit();
                for (&m, &w) in records.multiplicity.iter().zip(weights) {
                    let x = w.clamp(0.0, max) / unit;
                    let whole = x.floor();
                    let up = (x - whole) * 2f64.powi(64) > self.noise.next_u64() as f64;
                    let counts = whole as u64 + u64::from(up);
                    self.values.push(m.saturating_mul(counts));
                }
            }
            _ => self.values.extend_from_slice(records.multiplicity),
        }
        let steps = |r: usize| records.steps.get(r).copied().unwrap_or(0);
        match (&self.counting.mode, &mut self.local, &mut self.buffer) {
            (Mode::Local, Some(tables), _) => {
                for t in tables {
                    t.count(records, &self.values);
                }
            }
            (Mode::Shared(shared), ..) => {
                for t in shared.lock().unwrap_or_else(|p| p.into_inner()).iter_mut() {
                    t.count(records, &self.values);
                }
            }
            (Mode::Bounded { k, spill, .. }, _, Some(buffer)) => {
                let units = records.units.unwrap_or(&[]);
                for (r, &value) in self.values.iter().enumerate() {
                    if value == 0 {
                        continue;
                    }
                    // A counts table's row of m records is m records of its
                    // unit: at most k of them can be kept.
                    let copies = records.multiplicity[r].clamp(1, *k as u64);
                    let each = value / records.multiplicity[r].max(1);
                    for _ in 0..copies {
                        let entry = bound::Entry {
                            unit: units[r],
                            priority: self.noise.next_u64(),
                            value: each,
                            step: steps(r),
                        };
                        buffer.push(
                            entry,
                            records.codes.iter().map(|c| c[r]),
                            spill,
                            self.counting.tag,
                        )?;
                    }
                }
            }
            _ => {
                return Err(DpError::InvalidParameter {
                    name: "records",
                    reason: "a tally of another counting".into(),
                });
            }
        }
        Ok(())
    }
}

/// Count tables of private records, counted by the kernel, opaque: no
/// public method reveals a count. Its scale and count unit are public
/// (they follow from the stated contributions).
pub struct Counted {
    layout: TableLayout,
    tables: Vec<CountTable>,
    scale: u64,
    unit: f64,
    contributions: Contributions,
}

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counted")
            .field("layout", &self.layout)
            .field("scale", &self.scale)
            .field("unit", &self.unit)
            .finish_non_exhaustive()
    }
}

impl Counted {
    /// The layout.
    pub fn layout(&self) -> &TableLayout {
        &self.layout
    }

    /// The most one unit moves a table in L1, in counts.
    pub fn scale(&self) -> u64 {
        self.scale
    }

    /// What one count is worth in the records' units.
    pub fn unit(&self) -> f64 {
        self.unit
    }

    /// The tables as one dataset's marginals for
    /// [`super::Session::measure_marginals`], counts saturated at
    /// [`MAX_COUNT`].
    pub fn into_marginals(self) -> Result<PrivateMarginals> {
        if self.layout.steps() != 1 {
            return Err(DpError::InvalidParameter {
                name: "counts",
                reason: "a stream's tables are measured step by step".into(),
            });
        }
        let tables = self
            .tables
            .into_iter()
            .map(|t| {
                let counts = t.counts.into_iter().map(|c| c.min(MAX_COUNT)).collect();
                (t.attributes, counts)
            })
            .collect();
        PrivateMarginals::counted(self.layout.shape().to_vec(), tables, self.scale, self.unit)
    }

    /// A stream's counts, step by step: for each step, the cells of
    /// `products` (attribute sets, each one of the layout's tables; a
    /// table may be named twice) in order, with the bound the kernel
    /// derives for them: one record is one cell of each product, so a
    /// step moves by squared L2 norm `products.len()` and L1
    /// `products.len()` per record; without a privacy unit one record is
    /// in one step, with one a unit is at most `K` records in each of at
    /// most its [`StepBound`]'s steps. A privacy unit without a bound on
    /// its steps, and weights, are refused.
    pub fn into_step_counts(self, products: &[Vec<usize>]) -> Result<StepCounts> {
        let c = self.contributions;
        if c.max_weight.is_some() {
            return Err(DpError::InvalidParameter {
                name: "contributions",
                reason: "a stream's records carry no weights".into(),
            });
        }
        let bound = match (c.max_records_per_unit, c.steps) {
            (None, _) => CountsBound::new(products.len() as u64),
            (Some(k), Some(b)) => CountsBound::of_units(
                products.len() as u64,
                u64::from(k),
                b.max_steps as usize,
                b.min_separation as usize,
            ),
            (Some(_), None) => {
                return Err(DpError::InvalidParameter {
                    name: "contributions",
                    reason: "a stream's privacy unit needs a bound on its steps".into(),
                });
            }
        };
        if products.is_empty() {
            return Err(DpError::InvalidParameter {
                name: "products",
                reason: "no table to release".into(),
            });
        }
        let index: Vec<usize> = products
            .iter()
            .map(|p| {
                self.tables
                    .iter()
                    .position(|t| &t.attributes == p)
                    .ok_or_else(|| DpError::InvalidParameter {
                        name: "products",
                        reason: format!("no table on {p:?}"),
                    })
            })
            .collect::<Result<_>>()?;
        let steps = self.layout.steps();
        let per_step: usize = index.iter().map(|&i| self.tables[i].cells).sum();
        let mut out = Vec::with_capacity(per_step * steps);
        for step in 0..steps {
            for &i in &index {
                let t = &self.tables[i];
                out.extend(
                    t.counts[step * t.cells..(step + 1) * t.cells]
                        .iter()
                        .map(|&c| i64::try_from(c.min(MAX_COUNT)).unwrap_or(i64::MAX)),
                );
            }
        }
        Ok(StepCounts {
            counts: out,
            per_step,
            steps,
            bound,
            id: NEXT_COUNTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// The tables, for the kernel's own tests.
    #[cfg(test)]
    pub(crate) fn tables_for_tests(&self) -> Vec<(Vec<usize>, Vec<u64>)> {
        self.tables
            .iter()
            .map(|t| (t.attributes.clone(), t.counts.clone()))
            .collect()
    }
}

/// A stream's counts, made by the kernel from records
/// ([`Counted::into_step_counts`]): each step's cells, and how far one
/// record moves a step. Measured by [`super::StreamMechanism::next_counts`]
/// under the [`Contribution`](super::Contribution) it gives. Only the
/// kernel makes one, so the stream measures counts whose bound it derived
/// itself.
#[derive(Debug)]
pub struct StepCounts {
    counts: Vec<i64>,
    per_step: usize,
    steps: usize,
    bound: CountsBound,
    /// Tells these counts from any other of the process: a stream
    /// measures the steps of one counting only.
    id: u64,
}

/// The next [`StepCounts`]'s identity.
static NEXT_COUNTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl StepCounts {
    /// The contribution to specify the stream with.
    pub fn contribution(&self) -> super::Contribution {
        super::Contribution::Counts(self.bound)
    }

    /// Cells per step.
    pub fn per_step(&self) -> usize {
        self.per_step
    }

    /// Steps.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Every step's cells, in order: exact counts of private records
    /// (for tests and the curator's own checks, never for a release).
    pub fn cells(&self) -> &[i64] {
        &self.counts
    }

    /// Step `t`'s cells for a stream of `bound`, `dimension` and
    /// `horizon` that measured the counts `measured` (none yet, or these):
    /// counts of another bound, width, horizon or counting are refused,
    /// and the stream is bound to these from its first step on.
    pub(crate) fn row_for(
        &self,
        bound: CountsBound,
        dimension: usize,
        horizon: usize,
        t: usize,
        measured: &mut Option<u64>,
    ) -> Result<&[i64]> {
        if self.bound != bound
            || self.per_step != dimension
            || self.steps != horizon
            || measured.is_some_and(|id| id != self.id)
        {
            return Err(DpError::InvalidParameter {
                name: "counts",
                reason: "are not the counts this stream was specified for".into(),
            });
        }
        let row = self.step(t).ok_or_else(|| DpError::InvalidParameter {
            name: "step",
            reason: format!("all {horizon} steps were released"),
        })?;
        *measured = Some(self.id);
        Ok(row)
    }

    /// Step `t`'s cells.
    pub(crate) fn step(&self, t: usize) -> Option<&[i64]> {
        self.counts
            .get(t * self.per_step..(t + 1).checked_mul(self.per_step)?)
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
