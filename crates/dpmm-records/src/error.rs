//! Typed errors. Every variant renders as one line.
//!
//! A schema is public (written by a person from a codebook), so schema
//! errors may quote what the schema says. Record errors are about private
//! data: they name the column, the attribute and the kind of problem, and
//! NEVER the offending value, a count, the number of records read or
//! dropped, or the line number (which tells how many records precede the
//! offending one). `tests` in `aggregate` check this on every record error.

/// Everything that can be wrong with a records schema (docs/formats.md).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    /// The schema file cannot be read.
    #[error("{path}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// Not JSON, or JSON of the wrong shape (serde's message names the
    /// line and column of the schema file).
    #[error("schema: {0}")]
    Json(String),
    /// A schema without attributes.
    #[error("schema: the domain has no attributes")]
    EmptyDomain,
    /// An attribute whose name (or column) is the empty string.
    #[error("schema: attribute #{position} has an empty {field}")]
    EmptyName {
        /// Position of the attribute in the domain (0-based).
        position: usize,
        /// `"name"` or `"column"`.
        field: &'static str,
    },
    /// Two attributes with the same name.
    #[error("schema: duplicate attribute name '{0}'")]
    DuplicateName(String),
    /// An attribute with neither `values` nor `bins`.
    #[error("schema: attribute '{0}' needs either \"values\" or \"bins\"")]
    NoValuesOrBins(String),
    /// An attribute with both `values` and `bins`.
    #[error("schema: attribute '{0}' has both \"values\" and \"bins\"; give one")]
    BothValuesAndBins(String),
    /// A field still holding the placeholder written by `schema draft`.
    #[error(
        "schema: attribute '{0}' still has the draft placeholder; write its values or bins \
         from public knowledge (a codebook), never from the data"
    )]
    Placeholder(String),
    /// `values: []`.
    #[error("schema: attribute '{0}' has an empty \"values\" list")]
    EmptyValues(String),
    /// A categorical value listed twice.
    #[error("schema: attribute '{attribute}' lists the value '{value}' twice")]
    DuplicateValue {
        /// The attribute.
        attribute: String,
        /// The repeated value.
        value: String,
    },
    /// A categorical value that is not a JSON string.
    #[error("schema: attribute '{attribute}': value #{index} is not a string (write \"1\", not 1)")]
    NonStringValue {
        /// The attribute.
        attribute: String,
        /// Position in `values` (0-based).
        index: usize,
    },
    /// A categorical value that reads as a missing-value marker.
    #[error(
        "schema: attribute '{attribute}' lists '{value}', which is also the missing-value marker \
         '{marker}' (the schema's \"missing_markers\", by default [\"\", \"NA\"]: to count an empty \
         or NA category, list it and set \"missing_markers\" without it)"
    )]
    ValueIsMissingMarker {
        /// The attribute.
        attribute: String,
        /// The ambiguous value.
        value: String,
        /// The marker it reads as.
        marker: String,
    },
    /// Two categorical values that read as one: the same number (`27` and
    /// `27.0`) or the same boolean (`true` and `True`).
    #[error(
        "schema: attribute '{attribute}' lists '{first}' and '{second}', which read as one value \
         (the same number or boolean: a record's value is read the same whatever its column's type)"
    )]
    SameValue {
        /// The attribute.
        attribute: String,
        /// The first of them.
        first: String,
        /// The second.
        second: String,
    },
    /// A categorical value that is NaN, which is missing under every type.
    #[error(
        "schema: attribute '{attribute}' lists '{value}': NaN is a missing value under every type"
    )]
    NanValue {
        /// The attribute.
        attribute: String,
        /// The value.
        value: String,
    },
    /// A pinned header (`columns`) that cannot be a CSV header, or that
    /// lacks a column an attribute reads.
    #[error("schema: \"columns\" {0}")]
    BadColumns(String),
    /// A policy that is not `drop` or `error`.
    #[error(
        "schema: attribute '{attribute}': unknown {field} policy '{found}' (use \"drop\" or \"error\")"
    )]
    UnknownPolicy {
        /// The attribute.
        attribute: String,
        /// `"outside"`, `"unparsable"` or `"missing"`.
        field: &'static str,
        /// What the schema says.
        found: String,
    },
    /// A schema-wide `malformed` policy that is not `drop` or `error`.
    #[error("schema: unknown malformed policy '{0}' (use \"drop\" or \"error\")")]
    UnknownMalformedPolicy(String),
    /// `bins` that is neither an edge list nor `{start, stop, width}`.
    #[error("schema: attribute '{attribute}': bins {reason}")]
    MalformedBins {
        /// The attribute.
        attribute: String,
        /// What is wrong.
        reason: String,
    },
    /// Fewer than two edges (no interval).
    #[error("schema: attribute '{0}': bins need at least two edges")]
    TooFewEdges(String),
    /// An edge that is NaN or infinite.
    #[error("schema: attribute '{attribute}': bin edge #{index} is not a finite number")]
    NonFiniteEdge {
        /// The attribute.
        attribute: String,
        /// Position of the edge (0-based).
        index: usize,
    },
    /// Edges not strictly increasing.
    #[error(
        "schema: attribute '{attribute}': bin edges must increase strictly \
         (edge #{index} is not above the one before)"
    )]
    UnsortedEdges {
        /// The attribute.
        attribute: String,
        /// Position of the first offending edge (0-based).
        index: usize,
    },
    /// `width` ≤ 0 or not finite.
    #[error("schema: attribute '{0}': bin width must be finite and > 0")]
    BadWidth(String),
    /// `stop` ≤ `start`, or either not finite.
    #[error("schema: attribute '{0}': bins need finite start < stop")]
    EmptyRange(String),
    /// `(stop − start) / width` is not a whole number.
    #[error("schema: attribute '{0}': (stop - start) / width must be a whole number of bins")]
    FractionalBinCount(String),
    /// More bins than [`crate::schema::MAX_ATTRIBUTE_SIZE`].
    #[error("schema: attribute '{attribute}': {size} values or bins exceed the limit of {max}")]
    TooManyBins {
        /// The attribute.
        attribute: String,
        /// Its size.
        size: f64,
        /// The limit.
        max: usize,
    },
    /// An optional `size` that disagrees with the values or bins.
    #[error(
        "schema: attribute '{attribute}' declares size {declared} but has {actual} values or bins"
    )]
    SizeMismatch {
        /// The attribute.
        attribute: String,
        /// The `size` field.
        declared: usize,
        /// The number of values or bins.
        actual: usize,
    },
    /// `unparsable` given for a categorical attribute (where any text not
    /// listed is outside the domain).
    #[error("schema: attribute '{0}' is categorical: \"unparsable\" applies to bins only")]
    UnparsableOnCategorical(String),
    /// The names and sizes do not make a domain (already excluded by the
    /// checks above; kept so the conversion has no panic path).
    #[error("schema: {0}")]
    Domain(String),
    /// A name that is not an attribute of the schema.
    #[error("schema: unknown attribute '{0}'")]
    UnknownAttribute(String),
}

/// Everything that can go wrong while reading records or a counts table.
///
/// No variant carries a value read from the data or a count of it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordsError {
    /// The input cannot be opened or read (an I/O or gzip failure).
    #[error("{path}: {reason}")]
    Io {
        /// The file (or `"input"` for a reader).
        path: String,
        /// The reason (from the operating system or the gzip decoder).
        reason: String,
    },
    /// The caller interrupted the reading ([`dp_core::interrupt`]).
    #[error("interrupted")]
    Interrupted,
    /// The input has no header line.
    #[error("{0}: no header line")]
    NoHeader(String),
    /// The header names a column twice that the schema reads.
    #[error("header: column '{0}' appears more than once")]
    DuplicateHeaderColumn(String),
    /// A column the schema needs is absent from the header.
    #[error("header: no column '{column}' (read by attribute '{attribute}')")]
    MissingColumn {
        /// The column.
        column: String,
        /// The attribute that reads it.
        attribute: String,
    },
    /// A header column that is empty.
    #[error("header: column #{0} has an empty name")]
    EmptyHeaderColumn(usize),
    /// A malformed row under the schema's `malformed: error` policy: a
    /// line that is not one CSV record of the header's width (an unbalanced
    /// quote, another number of fields, bytes that are not UTF-8; a
    /// stream's time that is not a whole number or outside its steps).
    #[error(
        "a malformed row ({reason}; policy malformed = error; `dpmm check` shows them, to the \
         curator only)"
    )]
    MalformedRow {
        /// What is wrong, without any field's content or count.
        reason: &'static str,
    },
    /// A value outside the attribute's domain under the `outside: error`
    /// policy.
    #[error(
        "column '{column}': a value outside the domain of attribute '{attribute}' \
         (policy outside = error; `dpmm check` shows the values, to the curator only)"
    )]
    OutsideDomain {
        /// The CSV column.
        column: String,
        /// The attribute.
        attribute: String,
    },
    /// A numeric field that is not a finite number under the
    /// `unparsable: error` policy.
    #[error(
        "column '{column}': a value that is not a number, for attribute '{attribute}' \
         (policy unparsable = error; `dpmm check` shows the values, to the curator only)"
    )]
    NotANumber {
        /// The CSV column.
        column: String,
        /// The attribute.
        attribute: String,
    },
    /// A missing value under the `missing: error` policy.
    #[error(
        "column '{column}': a missing value for attribute '{attribute}' \
         (policy missing = error; `dpmm check` shows the values, to the curator only)"
    )]
    MissingValue {
        /// The CSV column.
        column: String,
        /// The attribute.
        attribute: String,
    },
    /// A counts-table row whose count is not a non-negative whole number,
    /// under the schema's `malformed: error` policy.
    #[error(
        "column '{}': a count that is not a non-negative whole number (policy malformed = error; \
         `dpmm check` shows them, to the curator only)",
        crate::COUNT_COLUMN
    )]
    BadCount,
    /// Tables that need more cells than the configured limit.
    #[error("{cells:.3e} cells needed: more than the limit of {limit} ({what})")]
    TooManyCells {
        /// What was being laid out.
        what: &'static str,
        /// Cells needed.
        cells: f64,
        /// The limit.
        limit: u64,
    },
    /// The system refused the memory for the count tables.
    #[error("cannot allocate {cells:.3e} counts")]
    OutOfMemory {
        /// Cells that were to be allocated.
        cells: f64,
    },
    /// A marginal that names an attribute position twice, out of order or
    /// past the domain, or is listed twice.
    #[error("marginal #{index}: {reason}")]
    BadMarginal {
        /// Position in the requested list.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// A [`crate::Layout`] built for a domain of other sizes than the
    /// schema's.
    #[error("the count layout was built for another domain than the schema's")]
    LayoutMismatch,
    /// A header-only read that found a header the draft cannot use.
    #[error("header: {0}")]
    BadHeader(String),
    /// A bound on the privacy unit's contributions that is out of range
    /// (the kernel's own check).
    #[error("{0}")]
    BadContributions(String),
    /// A stream's calendar that cannot be (`--step`, `--start`,
    /// `--timezone`).
    #[error("{0}")]
    BadTiming(String),
    /// The source failed while its rows were read: an Arrow stream's
    /// producer raised, a Parquet page did not decode (a string column
    /// that is not UTF-8). The source's own message may quote a value, so
    /// it is kept out of the message ([`crate::check()`] shows it to the
    /// curator).
    #[error(
        "{path}: the records could not be read to their end (the source's own message is \
         withheld, as it may quote a value; `dpmm check` shows it to the curator)"
    )]
    SourceFailed {
        /// The source.
        path: String,
        /// The source's own message.
        withheld: String,
    },
    /// A failure of dpmm itself, on valid input.
    #[error("internal error: {0}")]
    Internal(String),
}
