//! Streaming aggregation: records (or a pre-aggregated contingency table)
//! in, count tables out, one record at a time.
//!
//! Memory is the count tables plus one line buffer (at most
//! [`MAX_LINE_BYTES`]), whatever the number of records. What is kept is
//! chosen by a [`Layout`]: the full histogram when the domain's cell count
//! fits a limit, otherwise one table per attribute subset (the marginals a
//! workload needs).
//!
//! # One record per line
//!
//! The first line that is not empty is the header; every later line that
//! is not empty is one row (the dialect is in `lines`: a quoted field
//! never spans lines). A line that is not one CSV record of the header's
//! width (an unbalanced or misplaced quote, bytes that are not UTF-8,
//! another number of fields, longer than [`MAX_LINE_BYTES`], or in a
//! counts table a count that is not a non-negative integer) is one
//! *malformed row*, decided from that line alone. Empty lines are no rows.
//!
//! # Policies and stability
//!
//! Each attribute's schema says whether a value outside its domain, a
//! numeric field that is not a number, and a missing value `drop` the
//! record or are an `error`, and the schema says the same for a malformed
//! row; `drop` is the default. A record is looked at whole: if any
//! attribute says `error`, reading stops with an error naming the column
//! and the kind of problem (the first such attribute in domain order);
//! otherwise, if any says `drop`, the record is left out of every table.
//! So the outcome does not depend on column order.
//!
//! Dropping is a stable transformation (McSherry, "Privacy Integrated
//! Queries", SIGMOD 2009, §2.2: a per-record filter is 1-stable): whether a
//! record is kept depends on that record alone, so adding or removing one
//! person's record adds or removes at most that one record after the
//! filter. The sensitivity the privacy kernel uses for the kept counts is
//! therefore the same as without the filter.
//!
//! Precisely, for a records file read where every policy is `drop`:
//! **adding or removing any one line, of any bytes, after the header
//! changes each count table by at most 1 in L1** (one count by one, or
//! nothing), plain or gzip'ed alike, since a line is at most one record and
//! never changes how another line is read. Lines *before* the header are
//! not covered: a line inserted there becomes the header (or, if empty,
//! is skipped), and a damaged header changes how every row is read. The
//! header is the file's structure, not a record: a header that is not one
//! CSV line of UTF-8 names, lacks a column the schema reads or names one
//! twice is refused with one line, whatever the rows hold. A counts-table
//! row is a group of records, so there the unit is one count, not one
//! line.
//!
//! Under `error` a refusal depends on the data (whether some row is
//! outside the domain or malformed): it is a check of the curator's own
//! data, not an answer to give to others.
//!
//! # Nothing exact leaks
//!
//! The result is a [`PrivateCounts`]: no public method returns a count, a
//! total, or how many rows were read or dropped. It exists to be handed to
//! the privacy kernel (dp-core), which measures it with noise. Errors name
//! a column and the kind of problem, never a value, a count or a line
//! number (a line number tells how many records come before).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use csv::ByteRecord;

use crate::encode::{Code, Encoder};
use crate::error::RecordsError;
use crate::lines::{Lines, MAX_LINE_BYTES, Malformed, record_of, split_line};
use dp_workloads::domain::Domain;
use dp_workloads::structured::AttrSet;

use crate::schema::{Policy, Schema};
use crate::source;

/// Default limit on the cells kept in memory: 2²⁴ counts (128 MiB of u64).
pub const DEFAULT_CELL_LIMIT: u64 = 1 << 24;

/// The largest cell limit honoured (2³¹ counts, 16 GiB): a larger
/// `cell_limit` is lowered to it, so no layout asks for an allocation that
/// cannot be indexed or is far beyond any machine.
pub const MAX_CELL_LIMIT: u64 = 1 << 31;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The name of the count column of a pre-aggregated table.
pub const COUNT_COLUMN: &str = "count";

/// Which count tables to keep: validated against a domain and a cell
/// limit before anything is allocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    shape: Vec<usize>,
    /// Attribute positions of each table (strictly increasing).
    tables: Vec<Vec<usize>>,
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
        Ok(Self {
            shape: domain.shape(),
            tables: vec![(0..domain.attributes().len()).collect()],
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
}

/// One count table: row-major over its attributes (last fastest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CountTable {
    pub(crate) attributes: Vec<usize>,
    strides: Vec<usize>,
    pub(crate) counts: Vec<u64>,
}

impl CountTable {
    /// A zero table; an allocation the system refuses is an error, not an
    /// abort.
    fn new(attributes: &[usize], shape: &[usize]) -> Result<Self, RecordsError> {
        let mut strides = vec![1usize; attributes.len()];
        for j in (0..attributes.len().saturating_sub(1)).rev() {
            strides[j] = strides[j + 1] * shape[attributes[j + 1]];
        }
        let cells: usize = attributes.iter().map(|&a| shape[a]).product();
        let mut counts = Vec::new();
        counts
            .try_reserve_exact(cells)
            .map_err(|_| RecordsError::OutOfMemory {
                cells: cells as f64,
            })?;
        counts.resize(cells, 0);
        Ok(Self {
            attributes: attributes.to_vec(),
            strides,
            counts,
        })
    }

    #[inline]
    fn cell(&self, codes: &[usize]) -> usize {
        self.attributes
            .iter()
            .zip(&self.strides)
            .map(|(&a, &s)| codes[a] * s)
            .sum()
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
    /// Rows encoded but not yet counted ([`PrivateCounts::flush`]).
    pending: Pending,
}

/// A block of encoded rows waiting to be counted: table by table, so that
/// one table's counts stay in cache while the block streams past (row by
/// row, a release of every 3-way marginal on 30 attributes touched 4,060
/// tables' cache lines per record), and the tables on rayon's pool.
struct Pending {
    /// Row-major codes, `width` per row.
    codes: Vec<usize>,
    /// Each row's count.
    counts: Vec<u64>,
    width: usize,
    /// Rows per block.
    rows: usize,
}

/// Codes held per block (8 MiB of them).
const BLOCK_CODES: usize = 1 << 20;

impl std::fmt::Debug for PrivateCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateCounts")
            .field("layout", &self.layout)
            .field("tables", &"<private>")
            .finish()
    }
}

impl PrivateCounts {
    pub(crate) fn zeros(layout: &Layout) -> Result<Self, RecordsError> {
        let tables = layout
            .tables
            .iter()
            .map(|attrs| CountTable::new(attrs, &layout.shape))
            .collect::<Result<_, _>>()?;
        let width = layout.shape.len().max(1);
        Ok(Self {
            layout: layout.clone(),
            tables,
            pending: Pending {
                codes: Vec::new(),
                counts: Vec::new(),
                width,
                rows: (BLOCK_CODES / width).clamp(256, 1 << 16),
            },
        })
    }

    /// Counts the pending rows into every table (each table on one
    /// thread, so no two threads touch one count).
    pub(crate) fn flush(&mut self) -> Result<(), RecordsError> {
        use rayon::prelude::*;
        let p = &self.pending;
        if p.counts.is_empty() {
            return Ok(());
        }
        let count_into = |table: &mut CountTable| -> Result<(), RecordsError> {
            for (codes, &count) in p.codes.chunks_exact(p.width).zip(&p.counts) {
                let cell = table.cell(codes);
                table.counts[cell] = table.counts[cell]
                    .checked_add(count)
                    .ok_or(RecordsError::CountOverflow)?;
            }
            Ok(())
        };
        if self.tables.len() > 1 {
            self.tables.par_iter_mut().try_for_each(count_into)?;
        } else {
            self.tables.iter_mut().try_for_each(count_into)?;
        }
        self.pending.codes.clear();
        self.pending.counts.clear();
        Ok(())
    }

    /// The layout the counts were kept in (public: it depends only on the
    /// schema and the workload).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Hands the tables to the privacy kernel as one dataset's marginals
    /// (they come from one pass over the records, so one record adds one
    /// to one cell of every table: the contract of
    /// [`dp_core::PrivateMarginals`]). Nothing else reads the counts.
    pub fn into_kernel(mut self) -> Result<dp_core::PrivateMarginals, dp_core::DpError> {
        self.flush()
            .map_err(|e| dp_core::DpError::InvalidParameter {
                name: "counts",
                reason: e.to_string(),
            })?;
        let tables = self
            .tables
            .into_iter()
            .map(|t| (t.attributes, t.counts))
            .collect();
        dp_core::PrivateMarginals::new(self.layout.shape, tables)
    }

    /// The tables, for this crate's tests only.
    #[cfg(test)]
    pub(crate) fn tables(&self) -> &[CountTable] {
        &self.tables
    }

    /// Encodes `row` by `compiled` into `codes` and, unless a policy drops
    /// it, adds it `count` times.
    #[inline]
    pub(crate) fn add_row(
        &mut self,
        compiled: &Reader,
        row: &ByteRecord,
        codes: &mut [usize],
        count: u64,
    ) -> Result<(), RecordsError> {
        match compiled.encode(row, codes)? {
            Verdict::Keep => self.add(codes, count),
            Verdict::Drop => Ok(()),
        }
    }

    /// Queues one encoded row, counting the block when it is full. The
    /// readers flush at their end; [`PrivateCounts::into_kernel`] and the
    /// tests' accessor flush too.
    #[inline]
    fn add(&mut self, codes: &[usize], count: u64) -> Result<(), RecordsError> {
        let p = &mut self.pending;
        if codes.is_empty() {
            // A schema of no attribute: one code row of zeros per record.
            p.codes.resize(p.codes.len() + p.width, 0);
        } else {
            debug_assert_eq!(codes.len(), p.width, "one code per attribute of the layout");
            p.codes.extend_from_slice(codes);
        }
        p.counts.push(count);
        if p.counts.len() >= p.rows {
            self.flush()?;
        }
        Ok(())
    }
}

/// The schema compiled against one input's header.
pub(crate) struct Reader {
    encoders: Vec<Encoder>,
    /// Header index of each attribute's column.
    pub(crate) columns: Vec<usize>,
    /// Column and attribute names for error messages.
    names: Vec<(String, String)>,
    /// The header's number of fields: every row must have as many.
    pub(crate) fields: usize,
    /// The schema's policy for a malformed row.
    pub(crate) malformed: Policy,
}

pub(crate) enum Verdict {
    Keep,
    Drop,
}

impl Reader {
    pub(crate) fn new(schema: &Schema, header: &ByteRecord) -> Result<Self, RecordsError> {
        let header: Vec<&[u8]> = header.iter().map(<[u8]>::trim_ascii).collect();
        if let Some(i) = header.iter().position(|h| h.is_empty()) {
            return Err(RecordsError::EmptyHeaderColumn(i + 1));
        }
        let mut columns = Vec::with_capacity(schema.attributes().len());
        for a in schema.attributes() {
            let mut found = header
                .iter()
                .enumerate()
                .filter(|(_, h)| **h == a.column.as_bytes());
            let Some((index, _)) = found.next() else {
                return Err(RecordsError::MissingColumn {
                    column: a.column.clone(),
                    attribute: a.name.clone(),
                });
            };
            if found.next().is_some() {
                return Err(RecordsError::DuplicateHeaderColumn(a.column.clone()));
            }
            columns.push(index);
        }
        Ok(Self {
            fields: header.len(),
            malformed: schema.malformed(),
            encoders: schema
                .attributes()
                .iter()
                .map(|a| Encoder::new(a, schema.missing_markers()))
                .collect(),
            columns,
            names: schema
                .attributes()
                .iter()
                .map(|a| (a.column.clone(), a.name.clone()))
                .collect(),
        })
    }

    /// Encodes one row into `codes`; the first `error` outcome in domain
    /// order wins over any `drop`.
    #[inline]
    pub(crate) fn encode(
        &self,
        row: &ByteRecord,
        codes: &mut [usize],
    ) -> Result<Verdict, RecordsError> {
        let mut verdict = Verdict::Keep;
        for (i, (encoder, &column)) in self.encoders.iter().zip(&self.columns).enumerate() {
            // Rows with another field count than the header are malformed,
            // so the column exists; treat a gap as missing anyway.
            let field = row.get(column).unwrap_or(b"").trim_ascii();
            let (policy, code) = match encoder.encode(field) {
                Code::Cell(c) => {
                    codes[i] = c;
                    continue;
                }
                code => (encoder.policy(code), code),
            };
            match policy {
                Policy::Drop => verdict = Verdict::Drop,
                Policy::Error => return Err(self.refusal(i, code)),
            }
        }
        Ok(verdict)
    }

    /// The error for attribute `i`: names the column, the attribute and
    /// the kind of problem, never the field or where it is.
    fn refusal(&self, i: usize, code: Code) -> RecordsError {
        let (column, attribute) = self.names[i].clone();
        match code {
            Code::Missing => RecordsError::MissingValue { column, attribute },
            Code::Unparsable => RecordsError::NotANumber { column, attribute },
            _ => RecordsError::OutsideDomain { column, attribute },
        }
    }
}

/// The physical lines of `input`, gunzipped when it starts with the gzip
/// magic bytes.
pub(crate) fn lines_of<'a, R: Read + 'a>(
    input: R,
    source_name: &str,
) -> Result<Lines<BufReader<Box<dyn Read + 'a>>>, RecordsError> {
    let input = source::decompressing(input).map_err(|e| io_error(&e, source_name))?;
    Ok(Lines::new(BufReader::with_capacity(1 << 16, input)))
}

pub(crate) fn io_error(e: &std::io::Error, source_name: &str) -> RecordsError {
    RecordsError::Io {
        path: source_name.to_string(),
        reason: e.to_string(),
    }
}

pub(crate) fn check_layout(schema: &Schema, layout: &Layout) -> Result<(), RecordsError> {
    if layout.shape != schema.domain().shape() {
        return Err(RecordsError::LayoutMismatch);
    }
    Ok(())
}

/// The header: the first line that is not empty, split into names. It is
/// the file's structure, not a record, so any flaw in it is a refusal.
pub(crate) fn header<R: BufRead>(
    lines: &mut Lines<R>,
    source_name: &str,
) -> Result<ByteRecord, RecordsError> {
    let mut raw = ByteRecord::new();
    loop {
        let line = match lines.next_line().map_err(|e| io_error(&e, source_name))? {
            None => return Err(RecordsError::NoHeader(source_name.to_string())),
            Some(Err(_)) => {
                return Err(RecordsError::BadHeader(format!(
                    "the header line is longer than {MAX_LINE_BYTES} bytes"
                )));
            }
            Some(Ok(line)) => line,
        };
        // A UTF-8 byte-order mark (spreadsheet exports) is not part of the
        // first name.
        let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        split_line(line, &mut raw, &mut Vec::new()).map_err(|m| {
            RecordsError::BadHeader(format!("not a CSV line of UTF-8 text ({})", m.reason()))
        })?;
        break;
    }
    if raw.len() == 1 && raw[0].trim_ascii().is_empty() {
        return Err(RecordsError::NoHeader(source_name.to_string()));
    }
    Ok(raw)
}

/// What one row of the input stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Records: each row is one record.
    Records,
    /// A pre-aggregated contingency table (`column₁,…,column_k,count`: the
    /// schema's CSV columns, in any order, plus a [`COUNT_COLUMN`]): each
    /// row is a group of identical records, as many as its count, read
    /// with the same validation and policies as records, so dropping a row
    /// drops each of its records (again a stable transformation).
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

/// Streams CSV rows (plain or gzip'ed, with a header) into the counts of
/// `layout`, applying the schema's policies; `rows` says whether a row is
/// one record or a group of them. `source_name` is used in I/O error
/// messages only.
pub fn aggregate<'a, R: Read + 'a>(
    input: R,
    source_name: &str,
    schema: &Schema,
    layout: &Layout,
    rows: Rows,
) -> Result<PrivateCounts, RecordsError> {
    check_layout(schema, layout)?;
    let mut lines = lines_of(input, source_name)?;
    let header = header(&mut lines, source_name)?;
    let count_column = match rows {
        Rows::Records => None,
        Rows::CountsTable => Some(count_column(schema, &header)?),
    };
    let compiled = Reader::new(schema, &header)?;
    count_rows(lines, source_name, &compiled, layout, count_column)
}

/// [`aggregate`] on a file (gzip detected by its magic bytes).
pub fn aggregate_file(
    path: &Path,
    schema: &Schema,
    layout: &Layout,
    rows: Rows,
) -> Result<PrivateCounts, RecordsError> {
    let name = path.display().to_string();
    aggregate(source::open_path(path)?, &name, schema, layout, rows)
}

/// The position of the one [`COUNT_COLUMN`] of a counts table's header,
/// which no attribute may read.
fn count_column(schema: &Schema, header: &ByteRecord) -> Result<usize, RecordsError> {
    let mut count_columns = header
        .iter()
        .enumerate()
        .filter(|(_, h)| h.trim_ascii() == COUNT_COLUMN.as_bytes());
    let count_column = match (count_columns.next(), count_columns.next()) {
        (Some((i, _)), None) => i,
        (None, _) => {
            return Err(RecordsError::BadHeader(format!(
                "a counts table needs a '{COUNT_COLUMN}' column"
            )));
        }
        (Some(_), Some(_)) => {
            return Err(RecordsError::DuplicateHeaderColumn(
                COUNT_COLUMN.to_string(),
            ));
        }
    };
    if let Some(a) = schema
        .attributes()
        .iter()
        .find(|a| a.column == COUNT_COLUMN)
    {
        return Err(RecordsError::BadHeader(format!(
            "attribute '{}' reads the '{COUNT_COLUMN}' column of a counts table",
            a.name
        )));
    }
    Ok(count_column)
}

/// Streams the lines of `lines` (past the header) into the counts of
/// `layout`: each line that is not empty is one row, encoded by `compiled`
/// (whose policies may drop it) and, when kept, added once, or as many
/// times as its count in `count_column` (a counts table). A malformed line
/// is one malformed row, dropped or refused by the schema's `malformed`
/// policy.
/// Lines read between two checks of the caller's interrupt (a few
/// milliseconds of work).
pub(crate) const INTERRUPT_EVERY: usize = 1 << 16;

fn count_rows<R: BufRead>(
    mut lines: Lines<R>,
    source_name: &str,
    compiled: &Reader,
    layout: &Layout,
    count_column: Option<usize>,
) -> Result<PrivateCounts, RecordsError> {
    let mut counts = PrivateCounts::zeros(layout)?;
    let mut codes = vec![0usize; compiled.columns.len()];
    let mut row = ByteRecord::new();
    let mut scratch = Vec::new();
    let mut read = 0usize;
    while let Some(line) = lines.next_line().map_err(|e| io_error(&e, source_name))? {
        read = read.wrapping_add(1);
        if read.is_multiple_of(INTERRUPT_EVERY) && dp_core::interrupt::interrupted() {
            return Err(RecordsError::Interrupted);
        }
        if line.is_ok_and(<[u8]>::is_empty) {
            continue;
        }
        let parsed = record_of(line, compiled.fields, &mut row, &mut scratch).and_then(|()| {
            count_column.map_or(Ok(1), |c| count_of(&row[c]).ok_or(Malformed::BadCount))
        });
        match (parsed, compiled.malformed) {
            (Ok(count), _) => counts.add_row(compiled, &row, &mut codes, count)?,
            (Err(_), Policy::Drop) => {}
            (Err(Malformed::BadCount), Policy::Error) => return Err(RecordsError::BadCount),
            (Err(m), Policy::Error) => {
                return Err(RecordsError::MalformedRow { reason: m.reason() });
            }
        }
    }
    counts.flush()?;
    Ok(counts)
}

/// A counts table's count: decimal digits only (surrounding blanks
/// allowed), within 64 bits.
fn count_of(field: &[u8]) -> Option<u64> {
    let digits = field.trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
#[path = "aggregate_tests.rs"]
mod tests;
