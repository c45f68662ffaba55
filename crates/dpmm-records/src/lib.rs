//! Records in, counts out: the door every record of a release comes
//! through.
//!
//! * [`schema`]: each attribute's column and its public domain,
//!   categorical `values` or numeric `bins`, with `drop | error` policies
//!   and an optional pinned header; loaded from JSON with one typed error
//!   per mistake.
//! * [`Source`]: CSV (plain or gzip'ed, one record per physical line),
//!   Parquet, or any Arrow [`arrow::RecordBatchReader`]; every source is
//!   read as Arrow record batches, on every core.
//! * Each value is read by the record alone, whatever its column's type
//!   (`27`, `27.0` and `"27"` alike; NaN and null missing); a column's
//!   type never refuses a release, its values are read one by one
//!   (docs/formats.md).
//! * [`aggregate_source`]: the kept records counted into the tables of a
//!   [`Layout`] (the full histogram, or one table per marginal; per step
//!   for a stream, [`aggregate_steps`]), returned as an opaque
//!   [`PrivateCounts`] that only the privacy kernel reads.
//! * [`check()`]: the curator's check — exact, **not private** — of what a
//!   schema keeps and drops.
//! * [`draft`]: a starting schema from a CSV's header line alone.
//!
//! Domains are public knowledge written by a person; nothing here derives
//! one from the data, and no error or method but the curator's check
//! reveals a value, a count or the number of records read or dropped.
//!
//! **Stability.** Each physical line after a CSV file's header, and each
//! row of an Arrow or Parquet source, is at most one record (a quoted
//! field never spans lines; a line that is not one record of the header's
//! width is one malformed row), and every policy defaults to `drop`. So,
//! read with `drop` policies, adding or removing any one line of any bytes
//! after the header, or any one row, changes each count table by at most 1
//! in L1: the neighbouring relation the privacy kernel's sensitivity
//! assumes. The header is the file's structure, not a record: a damaged
//! header is refused, and a line inserted before it becomes the header
//! unless the schema pins the header (`columns`), when the file is
//! refused. `error` policies are an opt-in check of one's own data (a
//! refusal depends on the data). Details in [`aggregate`](mod@aggregate).
//!
//! ```
//! use dpmm_records::{Layout, Rows, Schema, aggregate, DEFAULT_CELL_LIMIT};
//!
//! let schema = Schema::from_json(r#"{"domain": [
//!     {"name": "kids", "column": "morekids", "values": ["no", "yes"]},
//!     {"name": "age", "column": "age", "bins": {"start": 21, "stop": 36, "width": 5},
//!      "outside": "drop"}
//! ]}"#).unwrap();
//! assert_eq!(schema.domain().shape(), vec![2, 3]);
//!
//! let layout = Layout::choose(schema.domain(), &[vec![0], vec![1]], DEFAULT_CELL_LIMIT).unwrap();
//! assert!(layout.is_full()); // 6 cells fit: the full histogram is kept
//! let csv = "morekids,age\nyes,27\nno,40\nno,21\n";
//! let counts = aggregate(csv.as_bytes(), "example", &schema, &layout, Rows::Records).unwrap();
//! // `counts` is opaque: it goes to the privacy kernel, never to a printout.
//! assert!(counts.layout().is_full());
//! ```

pub mod aggregate;
pub mod check;
mod clock;
mod counts;
mod csv_batches;
pub mod draft;
mod encode;
pub mod error;
mod lines;
pub mod partition;
mod pipeline;
pub mod schema;
pub mod source;
pub mod timed;
mod value;
mod whole;

#[cfg(test)]
mod arrow_stability_tests;
#[cfg(test)]
mod example_tests;
#[cfg(test)]
mod stability_tests;

pub use aggregate::{
    COUNT_COLUMN, People, Rows, Source, aggregate, aggregate_file, aggregate_people,
    aggregate_source,
};
pub use check::{CheckReport, NOT_PRIVATE, check, check_people};
pub use clock::{Calendar, Step};
pub use counts::{DEFAULT_CELL_LIMIT, LOCAL_CELLS, Layout, MAX_CELL_LIMIT, PrivateCounts};
pub use draft::{DRAFT_NOTE, SchemaDraft, draft_from_header, draft_from_path};
pub use error::{RecordsError, SchemaError};
pub use lines::MAX_LINE_BYTES;
pub use schema::{AttributeSchema, Encoding, Policy, Schema};
pub use timed::{Timing, aggregate_steps};

/// Arrow, as the records' sources speak it (the `arrow-array` and
/// `arrow-schema` crates this one reads).
pub mod arrow {
    pub use arrow_array::{RecordBatch, RecordBatchIterator, RecordBatchReader};
    pub use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
}
