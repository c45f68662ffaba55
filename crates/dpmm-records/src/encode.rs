//! The hot path: one Arrow column of a batch → one code per row, for every
//! column the schema reads; and the schema compiled against a source's
//! column names and types before any row is read.
//!
//! What a value reads as is decided by [`crate::value`] from the value
//! alone; here only the loops over each Arrow type live. A column's type
//! never refuses (see [`Compiled::new`]).

use arrow_array::cast::AsArray;
use arrow_array::types::{ByteArrayType, ByteViewType};
use arrow_array::types::{
    Decimal32Type, Decimal64Type, Decimal128Type, Decimal256Type, Float16Type, Float32Type,
    Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type,
    UInt64Type,
};
use arrow_array::{Array, ArrowPrimitiveType, GenericByteArray, GenericByteViewArray, RecordBatch};
use arrow_buffer::ArrowNativeType;
use arrow_schema::DataType;

use crate::error::RecordsError;
use crate::lines::Malformed;
use crate::schema::{Policy, Schema};
use crate::value::{Code, FIRST_SPECIAL, Lookup, word_mask, word_of};
use crate::whole::{counts, times, units, weights};

/// What kind of values a column holds, as far as reading it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Text or bytes.
    Text,
    /// Integers, floats or decimals.
    Number,
    /// Booleans.
    Boolean,
    /// Nothing but nulls.
    Null,
}

/// The kind of a column of type `t` (a dictionary by its values), or
/// `None` for a type no attribute reads.
pub(crate) fn kind_of(t: &DataType) -> Option<Kind> {
    use DataType as T;
    Some(match t {
        T::Utf8 | T::LargeUtf8 | T::Utf8View | T::Binary | T::LargeBinary | T::BinaryView => {
            Kind::Text
        }
        T::Int8
        | T::Int16
        | T::Int32
        | T::Int64
        | T::UInt8
        | T::UInt16
        | T::UInt32
        | T::UInt64
        | T::Float16
        | T::Float32
        | T::Float64
        | T::Decimal32(..)
        | T::Decimal64(..)
        | T::Decimal128(..)
        | T::Decimal256(..) => Kind::Number,
        T::Boolean => Kind::Boolean,
        T::Null => Kind::Null,
        T::Dictionary(key, value) if key.is_dictionary_key_type() => kind_of(value)?,
        _ => return None,
    })
}

/// The type as people say it, for messages.
pub(crate) fn type_name(t: &DataType) -> String {
    match kind_of(t) {
        Some(Kind::Text) => "text".into(),
        Some(Kind::Number) => "numbers".into(),
        Some(Kind::Boolean) => "booleans".into(),
        Some(Kind::Null) => "only nulls".into(),
        None => format!("values of type {t}"),
    }
}

/// The role a source column plays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Role {
    /// Read by the schema's attribute at this position.
    Attribute(usize),
    /// A counts table's count.
    Count,
    /// A stream's time.
    Time,
    /// The privacy unit.
    Unit,
    /// Each record's weight.
    Weight,
}

/// One column of a source that is read, and what reads it.
#[derive(Debug, Clone)]
pub(crate) struct Needed {
    /// Its position among the source's columns.
    pub(crate) position: usize,
    /// Its name.
    pub(crate) name: String,
    /// Who reads it (an attribute may share its column with another).
    pub(crate) roles: Vec<Role>,
}

/// What a source must hold besides the schema's columns.
#[derive(Debug, Clone, Default)]
pub(crate) struct Extra<'a> {
    /// The counts table's count column.
    pub(crate) count: Option<&'a str>,
    /// The stream's time column.
    pub(crate) time: Option<&'a str>,
    /// The privacy unit's column.
    pub(crate) unit: Option<&'a str>,
    /// The weight column.
    pub(crate) weight: Option<&'a str>,
}

/// Finds each column the schema (and `extra`) reads among `names`, in
/// first-read order: a missing or repeated name is refused.
pub(crate) fn resolve(
    schema: &Schema,
    names: &[&str],
    extra: &Extra<'_>,
) -> Result<Vec<Needed>, RecordsError> {
    let mut wanted: Vec<(&str, Role, String)> = schema
        .attributes()
        .iter()
        .enumerate()
        .map(|(i, a)| (a.column.as_str(), Role::Attribute(i), a.name.clone()))
        .collect();
    if let Some(count) = extra.count {
        if let Some(a) = schema.attributes().iter().find(|a| a.column == count) {
            return Err(RecordsError::BadHeader(format!(
                "attribute '{}' reads the '{count}' column of a counts table",
                a.name
            )));
        }
        wanted.push((count, Role::Count, "count".into()));
    }
    if let Some(time) = extra.time {
        wanted.push((time, Role::Time, "time".into()));
    }
    if let Some(unit) = extra.unit {
        wanted.push((unit, Role::Unit, "the privacy unit".into()));
    }
    if let Some(weight) = extra.weight {
        wanted.push((weight, Role::Weight, "the weight".into()));
    }
    let mut needed: Vec<Needed> = Vec::new();
    for (column, role, reader) in wanted {
        if let Some(n) = needed.iter_mut().find(|n| n.name == column) {
            n.roles.push(role);
            continue;
        }
        let mut found = names.iter().enumerate().filter(|(_, n)| **n == column);
        let Some((position, _)) = found.next() else {
            return Err(match role {
                Role::Count => {
                    RecordsError::BadHeader(format!("a counts table needs a '{column}' column"))
                }
                Role::Unit | Role::Weight => {
                    RecordsError::BadHeader(format!("no column '{column}' (named as {reader})"))
                }
                _ => RecordsError::MissingColumn {
                    column: column.to_string(),
                    attribute: reader,
                },
            });
        };
        if found.next().is_some() {
            return Err(RecordsError::DuplicateHeaderColumn(column.to_string()));
        }
        needed.push(Needed {
            position,
            name: column.to_string(),
            roles: vec![role],
        });
    }
    Ok(needed)
}

/// How the stream's time column is read: steps `0..steps` are the time
/// values `start..start + steps`, or with a calendar its steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TimeSpec {
    pub(crate) start: i64,
    pub(crate) steps: u64,
    pub(crate) calendar: Option<crate::clock::Calendar>,
}

/// The schema compiled against one source's columns: for each attribute
/// the batch column it reads and its lookup; the count and time columns.
pub(crate) struct Compiled {
    pub(crate) attributes: Vec<AttributeColumn>,
    pub(crate) count: Option<usize>,
    pub(crate) time: Option<(usize, TimeSpec)>,
    /// The privacy unit's column.
    pub(crate) unit: Option<usize>,
    /// The weight column.
    pub(crate) weight: Option<usize>,
    /// The schema's missing-value markers (a unit written as one is no
    /// unit).
    pub(crate) markers: Vec<Box<[u8]>>,
    pub(crate) malformed: Policy,
}

/// One attribute, compiled.
pub(crate) struct AttributeColumn {
    /// Its column in the batch.
    pub(crate) column: usize,
    pub(crate) lookup: Lookup,
    /// Whether its column's type holds values an attribute reads (text,
    /// numbers, booleans); the values of any other are outside.
    pub(crate) readable: bool,
    /// When no value of the column's type can be a cell: what the
    /// curator's check says about it.
    pub(crate) mismatch: Option<String>,
    /// The column's name and the attribute's, for messages.
    pub(crate) column_name: String,
    pub(crate) attribute_name: String,
}

impl Compiled {
    /// Compiles `schema` against the batch columns `needed` (the batch's
    /// column `i` is `needed[i]`) of types `types`.
    ///
    /// A column's type never refuses: a DataFrame's types are often
    /// inferred from its values (an all-NaN column is float64, a column of
    /// `True`/`False` text is bool), so a refusal on a type could tell
    /// whether some record is there. Values of a type no listed value can
    /// be read as outside the domain (not a number, for bins; a malformed
    /// count or time); the curator's check says so ([`AttributeColumn::mismatch`]).
    pub(crate) fn new(
        schema: &Schema,
        needed: &[Needed],
        types: &[DataType],
        time: Option<TimeSpec>,
    ) -> Result<Self, RecordsError> {
        let mut attributes: Vec<Option<AttributeColumn>> =
            (0..schema.attributes().len()).map(|_| None).collect();
        let mut count = None;
        let mut time_column = None;
        let mut unit = None;
        let mut weight = None;
        for (column, (n, t)) in needed.iter().zip(types).enumerate() {
            let kind = kind_of(t);
            for role in &n.roles {
                match role {
                    Role::Attribute(i) => {
                        let a = &schema.attributes()[*i];
                        let lookup = Lookup::new(a, schema.missing_markers());
                        let mismatch = match kind {
                            None => Some("an attribute reads text, numbers or booleans"),
                            Some(Kind::Number) if !lookup.reads_numbers() => {
                                Some("its values list no number")
                            }
                            Some(Kind::Boolean) if !lookup.reads_booleans() => {
                                Some("its values list neither true/false nor 0/1")
                            }
                            _ => None,
                        }
                        .map(|why| {
                            format!(
                                "column '{}' holds {}, which attribute '{}' cannot read ({why}): \
                                 every value but the missing ones is dropped",
                                n.name,
                                type_name(t),
                                a.name
                            )
                        });
                        attributes[*i] = Some(AttributeColumn {
                            column,
                            lookup,
                            readable: kind.is_some(),
                            mismatch,
                            column_name: n.name.clone(),
                            attribute_name: a.name.clone(),
                        });
                    }
                    Role::Count => count = Some(column),
                    Role::Unit => unit = Some(column),
                    Role::Weight => weight = Some(column),
                    Role::Time => {
                        let spec = time.ok_or_else(|| {
                            RecordsError::Internal("a time column without its steps".into())
                        })?;
                        time_column = Some((column, spec));
                    }
                }
            }
        }
        let attributes = attributes
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| RecordsError::Internal("an attribute without its column".into()))?;
        Ok(Self {
            attributes,
            count,
            time: time_column,
            unit,
            weight,
            markers: schema
                .missing_markers()
                .iter()
                .map(|m| m.as_bytes().into())
                .collect(),
            malformed: schema.malformed(),
        })
    }
}

/// One batch encoded: per attribute a cell index per row, and per row its
/// multiplicity (0 when it is dropped) and its step.
#[derive(Debug, Default)]
pub(crate) struct Encoded {
    pub(crate) rows: usize,
    /// `codes[a][r]`: row `r`'s cell of attribute `a` (0 where dropped).
    pub(crate) codes: Vec<Vec<u32>>,
    /// Each row's multiplicity: 1 for a record, the count of a counts
    /// table's row, 0 when dropped.
    pub(crate) multiplicity: Vec<u64>,
    /// Each row's privacy unit, hashed (when the release states one).
    pub(crate) units: Vec<u128>,
    /// Each row's weight (when the release states them).
    pub(crate) weights: Vec<f64>,
    /// Each row's step (streams only).
    pub(crate) step: Vec<u32>,
}

/// Why a row is refused, for the first one under an `error` policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    Malformed(Malformed),
    Code(usize, Code),
}

/// Where a batch's privacy units (hashed by `hash`, the kernel's) and
/// weights go.
pub(crate) struct PeopleColumns<'a> {
    pub(crate) hash: Option<&'a UnitHash<'a>>,
    pub(crate) units: &'a mut Vec<u128>,
    pub(crate) weights: &'a mut Vec<f64>,
}

/// Hashes a privacy unit's canonical bytes (a tag and the bytes).
pub(crate) type UnitHash<'a> = dyn Fn(u8, &[u8]) -> u128 + Sync + 'a;

/// Each row's multiplicity (1 for a record, a counts table's count) and,
/// for a stream, its step; or why the row is malformed: the CSV reader's
/// reason, a count that is not a non-negative whole number, a time that
/// is not a whole number or outside the horizon.
pub(crate) fn row_status(
    compiled: &Compiled,
    batch: &RecordBatch,
    malformed: &[Option<Malformed>],
    step: &mut Vec<u32>,
    people: &mut PeopleColumns<'_>,
) -> Vec<Result<u64, Malformed>> {
    let rows = batch.num_rows();
    let mut status: Vec<Result<u64, Malformed>> = vec![Ok(1); rows];
    if let Some(c) = compiled.count {
        counts(batch.column(c).as_ref(), &mut status);
    }
    people.units.clear();
    if let (Some(c), Some(hash)) = (compiled.unit, people.hash) {
        people.units.resize(rows, 0);
        units(
            batch.column(c).as_ref(),
            hash,
            &compiled.markers,
            people.units,
            &mut status,
        );
    }
    people.weights.clear();
    if let Some(c) = compiled.weight {
        people.weights.resize(rows, 0.0);
        weights(batch.column(c).as_ref(), people.weights, &mut status);
    }
    step.clear();
    if let Some((c, spec)) = compiled.time {
        step.resize(rows, 0);
        times(batch.column(c).as_ref(), spec, step, &mut status);
    }
    // The reader's reason first: such a line was never split into fields.
    for (s, m) in status.iter_mut().zip(malformed) {
        if let Some(m) = m {
            *s = Err(*m);
        }
    }
    status
}

impl Encoded {
    /// Encodes `batch` (columns as `compiled` reads them; `malformed[r]`
    /// set where the CSV reader found line `r` malformed), applying the
    /// schema's policies. Under an `error` policy the first offending row
    /// (and in it the first attribute in domain order) is refused.
    pub(crate) fn encode(
        &mut self,
        compiled: &Compiled,
        batch: &RecordBatch,
        malformed: &[Option<Malformed>],
        hash: Option<&UnitHash<'_>>,
    ) -> Result<(), RecordsError> {
        let rows = batch.num_rows();
        self.rows = rows;
        let plain = compiled.count.is_none()
            && compiled.time.is_none()
            && compiled.unit.is_none()
            && compiled.weight.is_none()
            && malformed.is_empty();
        let status = if plain {
            self.step.clear();
            self.units.clear();
            self.weights.clear();
            Vec::new()
        } else {
            let mut people = PeopleColumns {
                hash,
                units: &mut self.units,
                weights: &mut self.weights,
            };
            row_status(compiled, batch, malformed, &mut self.step, &mut people)
        };
        let strict = compiled.malformed == Policy::Error;
        // The first refusal: (row, attribute + 1, why), attribute 0 for a
        // malformed row.
        let mut first: Option<(usize, usize, Refusal)> = None;
        let mut refuse = |key: (usize, usize), why: Refusal| {
            if first.is_none_or(|(r, a, _)| key < (r, a)) {
                first = Some((key.0, key.1, why));
            }
        };
        self.multiplicity.clear();
        if plain {
            self.multiplicity.resize(rows, 1);
        } else {
            self.multiplicity
                .extend(status.iter().enumerate().map(|(r, s)| match s {
                    Ok(w) => *w,
                    Err(m) => {
                        if strict {
                            refuse((r, 0), Refusal::Malformed(*m));
                        }
                        0
                    }
                }));
        }
        self.codes.resize_with(compiled.attributes.len(), Vec::new);
        for (a, attribute) in compiled.attributes.iter().enumerate() {
            let out = &mut self.codes[a];
            out.clear();
            attribute.codes(batch.column(attribute.column).as_ref(), out);
            // The common case, every value a cell, is one pass.
            if out.iter().all(|&c| c < FIRST_SPECIAL) {
                continue;
            }
            for (r, c) in out.iter_mut().enumerate() {
                if *c < FIRST_SPECIAL {
                    continue;
                }
                let code = Code::unpack(*c);
                *c = 0;
                // A malformed row is not read further.
                if status.get(r).is_some_and(Result::is_err) {
                    continue;
                }
                match attribute.lookup.policy(code) {
                    Policy::Drop => self.multiplicity[r] = 0,
                    Policy::Error => refuse((r, a + 1), Refusal::Code(a, code)),
                }
            }
        }
        match first {
            None => Ok(()),
            Some((_, _, Refusal::Malformed(Malformed::BadCount))) => Err(RecordsError::BadCount),
            Some((_, _, Refusal::Malformed(m))) => {
                Err(RecordsError::MalformedRow { reason: m.reason() })
            }
            Some((_, _, Refusal::Code(a, code))) => {
                let attribute = &compiled.attributes[a];
                let column = attribute.column_name.clone();
                let attribute = attribute.attribute_name.clone();
                Err(match code {
                    Code::Missing => RecordsError::MissingValue { column, attribute },
                    Code::Unparsable => RecordsError::NotANumber { column, attribute },
                    _ => RecordsError::OutsideDomain { column, attribute },
                })
            }
        }
    }
}

impl AttributeColumn {
    /// One code per row of `array`, packed, appended to `out`: the
    /// lookup's, or for a column of a type an attribute does not read,
    /// missing for a null and not a cell for any other value.
    pub(crate) fn codes(&self, array: &dyn Array, out: &mut Vec<u32>) {
        if self.readable {
            return codes(&self.lookup, array, out);
        }
        let nulls = array.logical_nulls();
        out.extend((0..array.len()).map(|r| {
            if is_null(nulls.as_ref(), r) {
                Code::Missing.pack()
            } else {
                self.lookup.unreadable().pack()
            }
        }));
    }
}

/// Whether row `r` of an array with these nulls is null.
#[inline]
pub(crate) fn is_null(nulls: Option<&arrow_buffer::NullBuffer>, r: usize) -> bool {
    nulls.is_some_and(|n| n.is_null(r))
}

/// One code per row of `array`, packed ([`Code::pack`]), appended to
/// `out`.
pub(crate) fn codes(lookup: &Lookup, array: &dyn Array, out: &mut Vec<u32>) {
    use DataType as T;
    let n = array.len();
    out.reserve(n);
    let nulls = array.logical_nulls();
    let nulls = nulls.as_ref();
    macro_rules! each {
        ($values:expr, $code:expr) => {{
            let values = $values;
            for r in 0..n {
                out.push(
                    if is_null(nulls, r) {
                        Code::Missing
                    } else {
                        $code(values.value(r))
                    }
                    .pack(),
                );
            }
        }};
    }
    macro_rules! ints {
        ($t:ty) => {
            each!(array.as_primitive::<$t>(), |v| lookup.integer(i64::from(v)))
        };
    }
    macro_rules! decimals {
        ($t:ty) => {{
            let values = array.as_primitive::<$t>();
            for r in 0..n {
                out.push(
                    if is_null(nulls, r) {
                        Code::Missing
                    } else {
                        lookup.text(values.value_as_string(r).as_bytes())
                    }
                    .pack(),
                );
            }
        }};
    }
    match array.data_type() {
        T::Utf8 => offset_texts(lookup, array.as_string::<i32>(), nulls, out),
        T::LargeUtf8 => offset_texts(lookup, array.as_string::<i64>(), nulls, out),
        T::Binary => offset_texts(lookup, array.as_binary::<i32>(), nulls, out),
        T::LargeBinary => offset_texts(lookup, array.as_binary::<i64>(), nulls, out),
        T::Utf8View => view_texts(lookup, array.as_string_view(), nulls, out),
        T::BinaryView => view_texts(lookup, array.as_binary_view(), nulls, out),
        T::Int8 => ints!(Int8Type),
        T::Int16 => ints!(Int16Type),
        T::Int32 => ints!(Int32Type),
        T::Int64 => ints!(Int64Type),
        T::UInt8 => ints!(UInt8Type),
        T::UInt16 => ints!(UInt16Type),
        T::UInt32 => ints!(UInt32Type),
        T::UInt64 => each!(
            array.as_primitive::<UInt64Type>(),
            |v: u64| match i64::try_from(v) {
                Ok(v) => lookup.integer(v),
                Err(_) => lookup.number(v as f64),
            }
        ),
        T::Float16 => each!(array.as_primitive::<Float16Type>(), |v: F16| lookup
            .number(single(f32::from(v)))),
        T::Float32 => each!(array.as_primitive::<Float32Type>(), |v: f32| lookup
            .number(single(v))),
        T::Float64 => each!(array.as_primitive::<Float64Type>(), |v: f64| lookup
            .number(v)),
        T::Decimal32(..) => decimals!(Decimal32Type),
        T::Decimal64(..) => decimals!(Decimal64Type),
        T::Decimal128(..) => decimals!(Decimal128Type),
        T::Decimal256(..) => decimals!(Decimal256Type),
        T::Boolean => each!(array.as_boolean(), |v| lookup.boolean(v)),
        T::Dictionary(..) => {
            let Some(dictionary) = array.as_any_dictionary_opt() else {
                out.extend(std::iter::repeat_n(Code::Outside.pack(), n));
                return;
            };
            // A dictionary of no values has only null keys (and
            // `normalized_keys` would panic on it).
            if dictionary.values().is_empty() {
                out.extend(std::iter::repeat_n(Code::Missing.pack(), n));
                return;
            }
            // Each dictionary entry is read once.
            let mut entries = Vec::with_capacity(dictionary.values().len());
            codes(lookup, dictionary.values().as_ref(), &mut entries);
            let keys = dictionary.normalized_keys();
            let key_nulls = dictionary.keys().logical_nulls();
            for (r, &k) in keys.iter().enumerate() {
                out.push(if is_null(key_nulls.as_ref(), r) {
                    Code::Missing.pack()
                } else {
                    entries.get(k).copied().unwrap_or(Code::Missing.pack())
                });
            }
        }
        // Null, and any type `Compiled::new` refused (never reached).
        _ => out.extend(std::iter::repeat_n(Code::Missing.pack(), n)),
    }
}

/// The codes of texts stored end to end in one buffer. Each value's first
/// eight bytes are read as one word straight from the buffer (the bytes
/// past its end masked off), the common case of a short category.
fn offset_texts<T: ByteArrayType>(
    lookup: &Lookup,
    array: &GenericByteArray<T>,
    nulls: Option<&arrow_buffer::NullBuffer>,
    out: &mut Vec<u32>,
) {
    let data = array.value_data();
    let offsets = array.value_offsets();
    for (r, window) in offsets.windows(2).enumerate() {
        if is_null(nulls, r) {
            out.push(Code::Missing.pack());
            continue;
        }
        let (mut start, mut end) = (window[0].as_usize(), window[1].as_usize());
        while start < end && data[start].is_ascii_whitespace() {
            start += 1;
        }
        while end > start && data[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        let text = &data[start..end];
        let word = match data[start..].first_chunk::<8>() {
            Some(eight) => u64::from_le_bytes(*eight) & word_mask(text.len()),
            None => word_of(text),
        };
        out.push(lookup.trimmed(word, text).pack());
    }
}

/// The codes of texts stored as views: texts of at most 12 bytes are read
/// from the view itself.
fn view_texts<T: ByteViewType>(
    lookup: &Lookup,
    array: &GenericByteViewArray<T>,
    nulls: Option<&arrow_buffer::NullBuffer>,
    out: &mut Vec<u32>,
) {
    for (r, view) in array.views().iter().enumerate() {
        if is_null(nulls, r) {
            out.push(Code::Missing.pack());
            continue;
        }
        let len = *view as u32 as usize;
        let raw = view.to_le_bytes();
        let code = match raw.get(4..4 + len) {
            Some(text)
                if len <= 12
                    && text.first().is_none_or(|b| !b.is_ascii_whitespace())
                    && text.last().is_none_or(|b| !b.is_ascii_whitespace()) =>
            {
                let word = raw[4..12]
                    .first_chunk::<8>()
                    .map_or(0, |w| u64::from_le_bytes(*w))
                    & word_mask(len);
                lookup.trimmed(word, text)
            }
            _ => lookup.text(array.value(r).as_ref()),
        };
        out.push(code.pack());
    }
}

/// A single-precision value as the double its shortest decimal names:
/// `0.1f32` is the 0.1 it was written as, not 0.100000001490116…, so a
/// float32 column reads as a float64 or text column of the same values
/// does (a float16 value is read as the float32 it converts to).
#[inline]
pub(crate) fn single(v: f32) -> f64 {
    if v.fract() == 0.0 || !v.is_finite() {
        return f64::from(v);
    }
    let mut buffer = ryu::Buffer::new();
    buffer.format_finite(v).parse().unwrap_or(f64::from(v))
}

/// Arrow's half-precision float.
pub(crate) type F16 = <Float16Type as ArrowPrimitiveType>::Native;

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
