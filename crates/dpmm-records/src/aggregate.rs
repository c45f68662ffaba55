//! The door: records from any source become Arrow record batches, each
//! row is encoded by the schema, and the kept rows are counted into the
//! tables a release measures.
//!
//! # Sources
//!
//! * CSV, plain or gzip'ed (the `csv_batches` module): one record per
//!   physical line after the header, parsed on every core.
//! * Parquet: row groups decoded on every core, only the columns read.
//! * Arrow: any [`RecordBatchReader`] (in Python, anything exporting the
//!   Arrow C stream interface: pyarrow, polars, DuckDB, pandas through
//!   pyarrow), batches sliced and encoded on every core.
//!
//! Memory is the count tables (per worker when small:
//! [`dp_core::kernel::records::Counting::bytes`]) and a few batches in
//! flight, whatever the number of records; with a privacy unit, also the
//! records buffered for bounding, within the memory the caller gives
//! (beyond it they are spilled to disk by the kernel).
//!
//! # One record, one row, one cell
//!
//! A CSV file's rows are its lines after the header (the dialect is the
//! `lines` module's: a quoted field never spans lines); a line that is not
//! one CSV record of the header's width (an unbalanced or misplaced quote,
//! bytes that are not UTF-8, another number of fields, longer than
//! [`crate::MAX_LINE_BYTES`], in a counts table a count that is not a
//! non-negative whole number, in a stream a time that is not a whole
//! number or outside the horizon) is one *malformed row*, decided from
//! that line alone. Empty lines are no rows. An Arrow or Parquet source's
//! rows are its rows. Each value is read by the `value` module's rules,
//! which depend on the value alone, never on its column's type.
//!
//! # Policies and stability
//!
//! Each attribute's schema says whether a value outside its domain, a
//! binned field that is not a number, and a missing value `drop` the
//! record or are an `error`, and the schema says the same for a malformed
//! row; `drop` is the default. A record is looked at whole: if any
//! attribute says `error`, reading stops with an error naming the column
//! and the kind of problem (the first such attribute in domain order, in
//! the first such row); otherwise, if any says `drop`, the record is left
//! out of every table. So the outcome does not depend on column order.
//!
//! Dropping is a stable transformation (McSherry, "Privacy Integrated
//! Queries", SIGMOD 2009, §2.2: a per-record filter is 1-stable): whether
//! a record is kept depends on that record alone, so adding or removing
//! one record adds or removes at most that one record after the filter.
//!
//! Precisely, where every policy is `drop`: **adding or removing any one
//! line of any bytes after the header of a CSV file (plain or gzip'ed), or
//! any one row of an Arrow or Parquet source, changes each count table by
//! at most 1 in L1** (one count by one, or nothing). Lines *before* the
//! header are not covered: a line inserted there becomes the header. The
//! header is the file's structure, not a record: a header that is not one
//! CSV line of UTF-8 names, lacks a column the schema reads, names one
//! twice, or differs from the schema's pinned `columns`, is refused with
//! one line whatever the rows hold; pinning the header
//! ([`crate::Schema::columns`]) makes a line inserted before it a refusal.
//! A counts-table row is a group of records, so there the unit is one
//! count, not one row.
//!
//! Under `error` a refusal depends on the data (whether some row is
//! outside the domain or malformed): it is a check of the curator's own
//! data, not an answer to give to others.
//!
//! # Nothing exact leaks
//!
//! The result is a [`PrivateCounts`]: no public method returns a count, a
//! total, or how many rows were read or dropped. Errors name a column and
//! the kind of problem, never a value, a count or a line number. The one
//! place that shows exact figures is the curator's own check
//! ([`crate::check()`]), labelled as not private.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::DataType;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};

use dp_core::kernel::records::{Contributions, Counting, Records, StepBound, Tally};

use crate::counts::{Layout, PrivateCounts};
use crate::csv_batches::{Block, CsvBlocks, CsvColumns, Parsed, parse_block};
use crate::encode::{Compiled, Encoded, Extra, Needed, TimeSpec, resolve};
use crate::error::RecordsError;
use crate::lines::Malformed;
use crate::schema::Schema;
use crate::source;

/// The name of the count column of a pre-aggregated table.
pub const COUNT_COLUMN: &str = "count";

/// Rows per chunk of an Arrow batch handed to a worker.
const ARROW_CHUNK_ROWS: usize = 1 << 16;

/// What one row of the input stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Records: each row is one record.
    Records,
    /// A pre-aggregated contingency table (`column₁,…,column_k,count`: the
    /// schema's columns, in any order, plus a [`COUNT_COLUMN`]): each
    /// row is a group of identical records, as many as its count (a
    /// non-negative whole number: an integer, or a float such as DuckDB's
    /// `SUM` gives, `13.0`), read with the same validation and policies as
    /// records, so dropping a row drops each of its records (again a stable
    /// transformation). The count is a multiplicity of identical records,
    /// never a weight.
    ///
    /// Such a table comes from one GROUP BY in an engine built for large
    /// data, e.g. DuckDB:
    ///
    /// ```sql
    /// COPY (SELECT morekids, gender1, gender2, age, afam, hispanic, other, work,
    ///              count(*) AS count
    ///       FROM read_csv('records.csv') GROUP BY ALL)
    /// TO 'table.csv' (HEADER);
    /// ```
    ///
    /// (NULLs are written as empty fields, which the default missing-value
    /// markers treat as missing.)
    CountsTable,
}

/// Where records come from.
pub enum Source<'a> {
    /// CSV with a header line, plain or gzip'ed (told by its first bytes),
    /// named `name` in messages.
    Csv {
        /// The bytes.
        reader: Box<dyn Read + Send + 'a>,
        /// What messages call it.
        name: String,
    },
    /// A Parquet file.
    Parquet(PathBuf),
    /// Arrow record batches, named `name` in messages.
    Arrow {
        /// The batches, all of the reader's schema.
        reader: Box<dyn RecordBatchReader + Send + 'a>,
        /// What messages call it.
        name: String,
    },
}

impl std::fmt::Debug for Source<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Csv { name, .. } => write!(f, "Csv({name})"),
            Source::Parquet(p) => write!(f, "Parquet({})", p.display()),
            Source::Arrow { name, .. } => write!(f, "Arrow({name})"),
        }
    }
}

impl Source<'static> {
    /// The file at `path`: Parquet when it starts with the Parquet magic
    /// bytes, else CSV (gzip told by its own magic bytes).
    pub fn file(path: &Path) -> Result<Self, RecordsError> {
        if source::is_parquet(path) {
            return Ok(Source::Parquet(path.to_path_buf()));
        }
        Ok(Source::Csv {
            reader: source::open_path(path)?,
            name: path.display().to_string(),
        })
    }
}

impl Source<'_> {
    /// What messages call it.
    pub fn name(&self) -> String {
        match self {
            Source::Csv { name, .. } | Source::Arrow { name, .. } => name.clone(),
            Source::Parquet(path) => path.display().to_string(),
        }
    }

    /// What kind of source it is, in a word.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Csv { .. } => "CSV",
            Source::Parquet(_) => "Parquet",
            Source::Arrow { .. } => "Arrow",
        }
    }
}

/// What the reading is for, besides the schema's columns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading<'a> {
    pub(crate) rows: Rows,
    /// A stream's time column and steps.
    pub(crate) time: Option<(&'a str, TimeSpec)>,
    /// Who the records are about.
    pub(crate) people: &'a People,
}

/// Who the records are about, and what one of them may contribute: the
/// privacy unit and the weights a release states (public input).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct People {
    /// The privacy unit's column and the most records of one unit kept
    /// (`None`: the unit is one record).
    pub unit: Option<(String, u32)>,
    /// The weight column and the bound each weight is clipped to
    /// (`None`: each record counts one).
    pub weight: Option<(String, f64)>,
    /// A stream's bound on each unit's steps (with `unit`, whose bound is
    /// then on its records in each step).
    pub steps: Option<StepBound>,
    /// The memory for records bounded per unit, in bytes; beyond it they
    /// spill to a private temporary directory under `spill_dir`.
    pub memory: u64,
    /// Where bounded records spill (the system's temporary directory
    /// when empty).
    pub spill_dir: PathBuf,
}

impl People {
    /// One record per unit, unweighted.
    pub fn records() -> Self {
        Self {
            memory: 1 << 30,
            ..Self::default()
        }
    }

    /// Where bounded records spill: `spill_dir`, or the system's
    /// temporary directory when it is empty.
    pub fn spill_to(&self) -> PathBuf {
        if self.spill_dir.as_os_str().is_empty() {
            std::env::temp_dir()
        } else {
            self.spill_dir.clone()
        }
    }

    /// The contributions the kernel bounds.
    pub fn contributions(&self) -> Contributions {
        Contributions {
            max_records_per_unit: self.unit.as_ref().map(|(_, k)| *k),
            max_weight: self.weight.as_ref().map(|(_, w)| *w),
            steps: self.steps,
        }
    }
}

/// A worker's side of a reading: receives each batch.
pub(crate) trait Sink: Send {
    /// One batch, its columns as `compiled` reads them, and the rows the
    /// CSV reader found malformed (empty when none).
    fn batch(
        &mut self,
        compiled: &Compiled,
        batch: &RecordBatch,
        malformed: &[Option<Malformed>],
    ) -> Result<(), RecordsError>;
}

/// What one source's columns are, found before any row is read.
pub(crate) struct Opened {
    pub(crate) compiled: Compiled,
    /// Each read column's name and type, in batch order.
    pub(crate) columns: Vec<(String, DataType)>,
}

/// Reads `source` through `schema` on every core, handing each batch to
/// one of the sinks `make` builds (one per worker); returns the sinks.
/// `opened` sees the compiled schema before any row is read.
pub(crate) fn read<S: Sink>(
    source: Source<'_>,
    schema: &Schema,
    reading: Reading<'_>,
    opened: impl FnOnce(&Opened),
    make: impl Fn() -> Result<S, RecordsError> + Sync,
) -> Result<Vec<S>, RecordsError> {
    let extra = Extra {
        count: (reading.rows == Rows::CountsTable).then_some(COUNT_COLUMN),
        time: reading.time.map(|(c, _)| c),
        unit: reading.people.unit.as_ref().map(|(c, _)| c.as_str()),
        weight: reading.people.weight.as_ref().map(|(c, _)| c.as_str()),
    };
    let time = reading.time.map(|(_, t)| t);
    match source {
        Source::Csv { reader, name } => {
            let input = source::decompressing(reader).map_err(|e| io(&name, &e))?;
            let mut blocks = CsvBlocks::new(input);
            let header = blocks.header(&name)?;
            if let Some(pinned) = schema.columns()
                && reading.rows == Rows::Records
            {
                check_pinned(pinned, &header)?;
            }
            if let Some(i) = header.iter().position(String::is_empty) {
                return Err(RecordsError::EmptyHeaderColumn(i + 1));
            }
            let names: Vec<&str> = header.iter().map(String::as_str).collect();
            let needed = resolve(schema, &names, &extra)?;
            let positions: Vec<usize> = needed.iter().map(|n| n.position).collect();
            let columns = CsvColumns::new(&header, &positions);
            let types = vec![DataType::Utf8; needed.len()];
            let o = open(schema, &needed, &types, time)?;
            opened(&o);
            let compiled = &o.compiled;
            let columns = &columns;
            let results = crate::pipeline::run(
                || blocks.next_block().map_err(|e| io(&name, &e)),
                || Ok((make()?, Parsed::new(positions.len()))),
                |state: &mut Result<(S, Parsed), RecordsError>, block: Block| {
                    let (sink, parsed) = state.as_mut().map_err(|e| e.clone())?;
                    parse_block(&block, columns, parsed);
                    let (batch, malformed) = parsed.take(columns)?;
                    sink.batch(compiled, &batch, &malformed)
                },
            )?;
            results.into_iter().map(|r| r.map(|(s, _)| s)).collect()
        }
        Source::Arrow { mut reader, name } => {
            let (o, positions, types) = open_typed(schema, &reader.schema(), &extra, time)?;
            opened(&o);
            let compiled = &o.compiled;
            let mut pending: Option<(RecordBatch, usize)> = None;
            let mut next = || -> Result<Option<RecordBatch>, RecordsError> {
                loop {
                    if let Some((batch, offset)) = pending.take() {
                        if offset < batch.num_rows() {
                            let len = ARROW_CHUNK_ROWS.min(batch.num_rows() - offset);
                            let chunk = batch.slice(offset, len);
                            pending = Some((batch, offset + len));
                            return Ok(Some(chunk));
                        }
                        continue;
                    }
                    let Some(batch) = reader.next() else {
                        return Ok(None);
                    };
                    let batch = batch.map_err(|e| RecordsError::SourceFailed {
                        path: name.clone(),
                        withheld: e.to_string(),
                    })?;
                    let projected = project(&batch, &positions, &types, &name)?;
                    pending = Some((projected, 0));
                }
            };
            let results = crate::pipeline::run(
                &mut next,
                &make,
                |sink: &mut Result<S, RecordsError>, batch: RecordBatch| {
                    let sink = sink.as_mut().map_err(|e| e.clone())?;
                    sink.batch(compiled, &batch, &[])
                },
            )?;
            results.into_iter().collect()
        }
        Source::Parquet(path) => {
            let name = path.display().to_string();
            let parquet_error = |e: &dyn std::fmt::Display| RecordsError::Io {
                path: name.clone(),
                reason: e.to_string(),
            };
            let file = File::open(&path).map_err(|e| io(&name, &e))?;
            let metadata = ArrowReaderMetadata::load(&file, Default::default())
                .map_err(|e| parquet_error(&e))?;
            let (o, positions, _) = open_typed(schema, metadata.schema(), &extra, time)?;
            opened(&o);
            let compiled = &o.compiled;
            // The reader yields the projected columns in file order.
            let mut sorted = positions.clone();
            sorted.sort_unstable();
            let order: Vec<usize> = positions
                .iter()
                .map(|p| sorted.iter().position(|s| s == p).unwrap_or(0))
                .collect();
            let mask = ProjectionMask::roots(metadata.parquet_schema(), sorted.iter().copied());
            let groups = metadata.metadata().num_row_groups();
            let mut group = 0usize;
            // The share of the row groups handed out (a percentage only).
            let _read = dp_core::progress::share("read", groups as u64);
            let results = crate::pipeline::run(
                || {
                    group += 1;
                    dp_core::progress::advance((group - 1) as u64);
                    Ok((group <= groups).then_some(group - 1))
                },
                &make,
                |sink: &mut Result<S, RecordsError>, group: usize| {
                    let sink = sink.as_mut().map_err(|e| e.clone())?;
                    let file = File::open(&path).map_err(|e| io(&name, &e))?;
                    let reader =
                        ParquetRecordBatchReaderBuilder::new_with_metadata(file, metadata.clone())
                            .with_projection(mask.clone())
                            .with_row_groups(vec![group])
                            .with_batch_size(ARROW_CHUNK_ROWS)
                            .build()
                            .map_err(|e| parquet_error(&e))?;
                    for batch in reader {
                        if dp_core::interrupt::interrupted() {
                            return Err(RecordsError::Interrupted);
                        }
                        let batch = batch.map_err(|e| RecordsError::SourceFailed {
                            path: name.clone(),
                            withheld: e.to_string(),
                        })?;
                        let batch = batch.project(&order).map_err(|e| parquet_error(&e))?;
                        sink.batch(compiled, &batch, &[])?;
                    }
                    Ok(())
                },
            )?;
            results.into_iter().collect()
        }
    }
}

/// The schema compiled against the columns `needed` of `types`.
fn open(
    schema: &Schema,
    needed: &[Needed],
    types: &[DataType],
    time: Option<TimeSpec>,
) -> Result<Opened, RecordsError> {
    Ok(Opened {
        compiled: Compiled::new(schema, needed, types, time)?,
        columns: needed
            .iter()
            .zip(types)
            .map(|(n, t)| (n.name.clone(), t.clone()))
            .collect(),
    })
}

/// The schema compiled against the columns of a typed source: the
/// compiled schema, and the position and type of each column read.
fn open_typed(
    schema: &Schema,
    source: &arrow_schema::Schema,
    extra: &Extra<'_>,
    time: Option<TimeSpec>,
) -> Result<(Opened, Vec<usize>, Vec<DataType>), RecordsError> {
    let names: Vec<&str> = source.fields().iter().map(|f| f.name().as_str()).collect();
    let needed = resolve(schema, &names, extra)?;
    let positions: Vec<usize> = needed.iter().map(|n| n.position).collect();
    let types: Vec<DataType> = positions
        .iter()
        .map(|&p| source.field(p).data_type().clone())
        .collect();
    Ok((open(schema, &needed, &types, time)?, positions, types))
}

/// The columns at `positions` of `batch`, which must have `types`.
fn project(
    batch: &RecordBatch,
    positions: &[usize],
    types: &[DataType],
    name: &str,
) -> Result<RecordBatch, RecordsError> {
    let matches = positions
        .iter()
        .zip(types)
        .all(|(&p, t)| p < batch.num_columns() && batch.column(p).data_type() == t);
    if !matches {
        return Err(RecordsError::Io {
            path: name.to_string(),
            reason: "a record batch whose columns are not its stream's schema".into(),
        });
    }
    batch.project(positions).map_err(|e| RecordsError::Io {
        path: name.to_string(),
        reason: e.to_string(),
    })
}

/// Refuses a header that is not the schema's pinned `columns`.
fn check_pinned(pinned: &[String], header: &[String]) -> Result<(), RecordsError> {
    if pinned == header {
        return Ok(());
    }
    let at = pinned
        .iter()
        .zip(header)
        .position(|(a, b)| a != b)
        .unwrap_or(pinned.len().min(header.len()));
    let what = match (header.get(at), pinned.get(at)) {
        (Some(h), Some(p)) => format!("column #{} is '{h}' where the schema pins '{p}'", at + 1),
        (Some(h), None) => format!("column #{} '{h}' is not among the schema's", at + 1),
        (None, Some(p)) => format!("the header ends before column #{} '{p}'", at + 1),
        (None, None) => "the header differs".into(),
    };
    Err(RecordsError::BadHeader(format!(
        "the header is not the schema's \"columns\": {what} (a line before the real header, \
         or another file? a schema reading other files pins their header, or none)"
    )))
}

fn io(name: &str, e: &std::io::Error) -> RecordsError {
    RecordsError::Io {
        path: name.to_string(),
        reason: e.to_string(),
    }
}

/// A worker counting into the kernel's tally.
struct Counter<'c> {
    counting: &'c Counting,
    tally: Tally<'c>,
    encoded: Encoded,
    #[cfg(test)]
    shadow: Vec<crate::counts::TestTable>,
    #[cfg(test)]
    shadow_rows: Vec<(u128, f64)>,
}

impl Sink for Counter<'_> {
    fn batch(
        &mut self,
        compiled: &Compiled,
        batch: &RecordBatch,
        malformed: &[Option<Malformed>],
    ) -> Result<(), RecordsError> {
        let counting = self.counting;
        let hash = |tag: u8, bytes: &[u8]| counting.unit(tag, bytes);
        self.encoded
            .encode(compiled, batch, malformed, Some(&hash))?;
        let e = &self.encoded;
        #[cfg(test)]
        crate::counts::TestTable::count(
            &mut self.shadow,
            &mut self.shadow_rows,
            counting.layout().shape(),
            e,
        );
        let records = Records {
            codes: &e.codes,
            multiplicity: &e.multiplicity,
            units: compiled.unit.map(|_| &e.units[..]),
            weights: compiled.weight.map(|_| &e.weights[..]),
            steps: &e.step,
        };
        self.tally.add(&records).map_err(kernel)
    }
}

pub(crate) fn kernel(e: dp_core::DpError) -> RecordsError {
    match e {
        dp_core::DpError::Interrupted => RecordsError::Interrupted,
        dp_core::DpError::Io(reason) => RecordsError::Io {
            path: "the privacy unit's spill".into(),
            reason,
        },
        e => RecordsError::Internal(e.to_string()),
    }
}

/// Reads `source` through `schema` into the counts of `layout`, applying
/// the schema's policies; `rows` says whether a row is one record or a
/// group of them. The unit is one record, unweighted
/// ([`aggregate_people`] states others).
pub fn aggregate_source(
    source: Source<'_>,
    schema: &Schema,
    layout: &Layout,
    rows: Rows,
) -> Result<PrivateCounts, RecordsError> {
    aggregate_people(source, schema, layout, rows, &People::records())
}

/// [`aggregate_source`] with the privacy unit and weights of `people`:
/// the kernel keeps at most `K` records per unit, clips each weight, and
/// states the scale its measurement multiplies the sensitivity by. A
/// counts table's rows are groups of records with no unit: `people`
/// must state none for one.
pub fn aggregate_people(
    source: Source<'_>,
    schema: &Schema,
    layout: &Layout,
    rows: Rows,
    people: &People,
) -> Result<PrivateCounts, RecordsError> {
    if rows == Rows::CountsTable && (people.unit.is_some() || people.weight.is_some()) {
        return Err(RecordsError::BadHeader(
            "a counts table's rows are groups of identical records: they have no privacy unit or \
             weight (give the records instead)"
                .into(),
        ));
    }
    count(
        source,
        schema,
        layout,
        Reading {
            rows,
            time: None,
            people,
        },
    )
}

/// Streams CSV rows (plain or gzip'ed, with a header) into the counts of
/// `layout`: [`aggregate_source`] on [`Source::Csv`]. `source_name` is
/// used in messages only.
pub fn aggregate<'a, R: Read + Send + 'a>(
    input: R,
    source_name: &str,
    schema: &Schema,
    layout: &Layout,
    rows: Rows,
) -> Result<PrivateCounts, RecordsError> {
    let source = Source::Csv {
        reader: Box::new(input),
        name: source_name.to_string(),
    };
    aggregate_source(source, schema, layout, rows)
}

/// [`aggregate_source`] on a file: Parquet or CSV (plain or gzip'ed), told
/// by content.
pub fn aggregate_file(
    path: &Path,
    schema: &Schema,
    layout: &Layout,
    rows: Rows,
) -> Result<PrivateCounts, RecordsError> {
    aggregate_source(Source::file(path)?, schema, layout, rows)
}

pub(crate) fn count(
    source: Source<'_>,
    schema: &Schema,
    layout: &Layout,
    reading: Reading<'_>,
) -> Result<PrivateCounts, RecordsError> {
    check_layout(schema, layout)?;
    let people = reading.people;
    let counting = Counting::new(
        layout.kernel().clone(),
        people.contributions(),
        people.memory,
        people.spill_to(),
        crate::pipeline::workers(),
    )
    .map_err(|e| match e {
        dp_core::DpError::InvalidParameter { .. } => RecordsError::BadContributions(e.to_string()),
        e => kernel(e),
    })?;
    let counters = read(
        source,
        schema,
        reading,
        |_| {},
        || {
            Ok(Counter {
                counting: &counting,
                tally: counting.tally().map_err(kernel)?,
                encoded: Encoded::default(),
                #[cfg(test)]
                shadow: crate::counts::TestTable::zeros(layout),
                #[cfg(test)]
                shadow_rows: Vec::new(),
            })
        },
    )?;
    #[cfg(test)]
    let shadow = {
        let mut all = crate::counts::TestTable::zeros(layout);
        for c in &counters {
            for (a, b) in all.iter_mut().zip(&c.shadow) {
                for (x, y) in a.counts.iter_mut().zip(&b.counts) {
                    *x = x.saturating_add(*y);
                }
            }
        }
        all
    };
    #[cfg(test)]
    let shadow_rows = counters
        .iter()
        .flat_map(|c| c.shadow_rows.clone())
        .collect();
    let counted = counting
        .finish(counters.into_iter().map(|c| c.tally).collect())
        .map_err(kernel)?;
    Ok(PrivateCounts {
        layout: layout.clone(),
        counted,
        #[cfg(test)]
        shadow,
        #[cfg(test)]
        shadow_rows,
    })
}

pub(crate) fn check_layout(schema: &Schema, layout: &Layout) -> Result<(), RecordsError> {
    if layout.shape() != schema.domain().shape() {
        return Err(RecordsError::LayoutMismatch);
    }
    Ok(())
}

#[cfg(test)]
#[path = "aggregate_tests.rs"]
mod tests;
