//! The curator's check (`dpmm check`, `dm.check`): what a schema makes of
//! the records, exactly — for the curator's eyes only.
//!
//! It reads the records the way a release does (the same sources, door
//! and encoding) and tallies, instead of counting cells: the rows read,
//! the malformed ones and why, per attribute how many values fall outside
//! the domain, are missing or are not a number (with the most frequent of
//! them), for a stream how many times are not whole numbers or fall
//! outside the horizon, and the share of records a release would drop —
//! or the first problem an `error` policy would refuse on.
//!
//! **This output is not private.** It states exact figures about the
//! records and shows their values. It spends nothing and writes nothing,
//! and it must not be published or shared: it is the one place dpmm shows
//! such figures, so that the curator can fix a schema before a release
//! spends budget on records it drops.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Decimal32Type, Decimal64Type, Decimal128Type, Decimal256Type, Float16Type, Float32Type,
    Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type,
    UInt64Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use serde::Serialize;

use crate::aggregate::{Opened, People, Reading, Rows, Sink, Source, read};
use crate::encode::{Compiled, Encoded, row_status, single, type_name};
use crate::error::RecordsError;
use crate::lines::Malformed;
use crate::schema::{Policy, Schema};
use crate::timed::Timing;
use crate::value::Code;

/// What the check says at the top of every output.
pub const NOT_PRIVATE: &str = "NOT PRIVATE: exact figures about the records and their values, \
     for the curator's eyes only. Do not publish or share this output. Nothing was spent.";

/// Distinct offending values remembered per attribute and kind; values
/// met after this many distinct ones are counted but not listed.
pub const MAX_DISTINCT: usize = 10_000;

/// Offending values listed per attribute and kind.
pub const TOP_VALUES: usize = 5;

/// One value and how many rows hold it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValueCount {
    /// The value as the record holds it: text in quotes, a number, a
    /// boolean, `null` or `NaN`.
    pub value: String,
    /// Rows holding it.
    pub rows: u64,
}

/// One kind of problem of one attribute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Rows with it (malformed rows are not looked into).
    pub rows: u64,
    /// What the schema's policy does with such a row: `drop` or `error`.
    pub policy: &'static str,
    /// The most frequent values, most frequent first.
    pub values: Vec<ValueCount>,
    /// Rows whose value is not listed (past [`MAX_DISTINCT`] distinct).
    pub unlisted_rows: u64,
}

/// What the schema makes of one attribute's column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttributeCheck {
    /// The attribute.
    pub attribute: String,
    /// The column it reads.
    pub column: String,
    /// What the column holds: text, numbers, booleans.
    pub holds: String,
    /// When no value of the column's type can be a cell of the attribute
    /// (numbers against categories that list no number, say): so.
    pub mismatch: Option<String>,
    /// Values outside the domain.
    pub outside: Problem,
    /// Missing values (null, NaN, a missing-value marker).
    pub missing: Problem,
    /// Values that are not a number, for a binned attribute.
    pub not_a_number: Option<Problem>,
}

/// Rows of one malformed kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MalformedRows {
    /// Why they are malformed.
    pub reason: &'static str,
    /// How many.
    pub rows: u64,
}

/// The records of each privacy unit, against the bound a release states.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnitCheck {
    /// The column naming each record's unit.
    pub column: String,
    /// The bound (`--max-records-per-unit`).
    pub max_records_per_unit: u32,
    /// Distinct units among the kept records.
    pub units: u64,
    /// The most kept records of one unit.
    pub most_records: u64,
    /// Units with more kept records than the bound.
    pub units_over_bound: u64,
    /// Kept records past the bound, which a release leaves out (chosen at
    /// random within each unit).
    pub records_over_bound: u64,
    /// For a stream, the bound and the figures are per step: the most
    /// records of one unit in one step, the units with a step over the
    /// bound, and the records past it in their steps.
    pub per_step: bool,
    /// For a stream, the most steps of one unit.
    pub most_steps: Option<u64>,
    /// For a stream that bounds a unit's steps
    /// (`--max-steps-per-unit`, `--min-separation`): the bound.
    pub steps_bound: Option<(u32, u32)>,
    /// The units a stream leaves steps out of: more steps than the bound,
    /// or two closer than the separation.
    pub units_over_steps: Option<u64>,
}

/// The weights of the kept records, against the bound a release states.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeightCheck {
    /// The weight column.
    pub column: String,
    /// The bound (`--max-weight`).
    pub max_weight: f64,
    /// Kept records whose weight is above the bound (a release clips it).
    pub clipped_records: u64,
    /// The largest weight of a kept record.
    pub largest: f64,
    /// The kept records' weights, summed.
    pub total: f64,
    /// The same, each weight clipped to the bound: what a release counts.
    pub total_clipped: f64,
}

/// The check of one source under one schema: exact, not private.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckReport {
    /// [`NOT_PRIVATE`].
    pub notice: &'static str,
    /// The source, as messages name it.
    pub source: String,
    /// CSV, Parquet or Arrow.
    pub format: &'static str,
    /// Rows read (lines after the header that are not empty).
    pub rows: u64,
    /// Records they stand for (a counts table's well-formed rows count as
    /// many as their count).
    pub records: u64,
    /// Records a release keeps.
    pub kept_records: u64,
    /// Records a release drops (malformed rows count once each).
    pub dropped_records: u64,
    /// `dropped_records / (kept + dropped)`, or 0 for no records.
    pub dropped_share: f64,
    /// The refusal a release would meet first under the schema's `error`
    /// policies, if any.
    pub refused: Option<String>,
    /// Malformed rows, by reason, under the schema's `malformed` policy.
    pub malformed: Vec<MalformedRows>,
    /// The `malformed` policy.
    pub malformed_policy: &'static str,
    /// Each attribute, in domain order.
    pub attributes: Vec<AttributeCheck>,
    /// For a stream: times that are not whole numbers, and times outside
    /// the horizon, with the most frequent of each.
    pub times: Option<TimeCheck>,
    /// With a privacy unit: the records of each unit against the bound.
    pub units: Option<UnitCheck>,
    /// With weights: the weights against the bound.
    pub weights: Option<WeightCheck>,
}

/// A stream's time column, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimeCheck {
    /// The column.
    pub column: String,
    /// Steps `0..steps` are the times `start..start + steps` (whole-number
    /// times).
    pub start: i64,
    /// With a calendar, what it is (`days from 2017-01-01 in
    /// America/Chicago`): times are dates and date-times on its steps.
    pub calendar: Option<String>,
    /// The horizon.
    pub steps: u64,
    /// Times that are not whole numbers (with a calendar: not a date or
    /// date-time, or a wall-clock time the zone skips).
    pub not_whole: Problem,
    /// Whole numbers outside `start..start + steps`.
    pub outside_steps: Problem,
}

fn policy_name(p: Policy) -> &'static str {
    match p {
        Policy::Drop => "drop",
        Policy::Error => "error",
    }
}

/// Values of one kind of problem, tallied.
#[derive(Debug, Default, Clone)]
struct Tally {
    rows: u64,
    values: HashMap<String, u64>,
    unlisted: u64,
}

impl Tally {
    fn add(&mut self, value: impl FnOnce() -> String) {
        self.rows += 1;
        let value = value();
        if let Some(n) = self.values.get_mut(&value) {
            *n += 1;
        } else if self.values.len() < MAX_DISTINCT {
            self.values.insert(value, 1);
        } else {
            self.unlisted += 1;
        }
    }

    fn merge(&mut self, other: Tally) {
        self.rows += other.rows;
        self.unlisted += other.unlisted;
        for (value, n) in other.values {
            if let Some(m) = self.values.get_mut(&value) {
                *m += n;
            } else if self.values.len() < MAX_DISTINCT {
                self.values.insert(value, n);
            } else {
                self.unlisted += n;
            }
        }
    }

    fn problem(self, policy: Policy) -> Problem {
        let mut values: Vec<ValueCount> = self
            .values
            .into_iter()
            .map(|(value, rows)| ValueCount { value, rows })
            .collect();
        values.sort_by(|a, b| b.rows.cmp(&a.rows).then_with(|| a.value.cmp(&b.value)));
        values.truncate(TOP_VALUES);
        Problem {
            rows: self.rows,
            policy: policy_name(policy),
            values,
            unlisted_rows: self.unlisted,
        }
    }
}

/// One worker's tallies.
struct Checker {
    rows: u64,
    records: u64,
    kept: u64,
    dropped: u64,
    malformed: HashMap<&'static str, u64>,
    /// Per attribute: outside, missing, not a number.
    attributes: Vec<[Tally; 3]>,
    /// Not whole, outside the steps.
    times: [Tally; 2],
    /// A refusal an `error` policy makes (the first this worker met).
    refused: Option<String>,
    codes: Vec<u32>,
    steps: Vec<u32>,
    units: Vec<u128>,
    weights: Vec<f64>,
    encoded: Encoded,
    /// Hashes units' canonical bytes (one key for every worker).
    hasher: [RandomState; 2],
    /// Kept records per unit hash and step (0 without a time column).
    per_unit: HashMap<(u128, u32), u64>,
    /// The weight bound, when weights are read.
    max_weight: f64,
    weight: WeightTally,
}

/// Kept records' weights, tallied.
#[derive(Debug, Default, Clone, Copy)]
struct WeightTally {
    clipped: u64,
    largest: f64,
    total: f64,
    total_clipped: f64,
}

impl Sink for Checker {
    fn batch(
        &mut self,
        compiled: &Compiled,
        batch: &RecordBatch,
        malformed: &[Option<Malformed>],
    ) -> Result<(), RecordsError> {
        self.rows += batch.num_rows() as u64;
        // The release's own encoding says what an `error` policy refuses.
        if self.refused.is_none()
            && let Err(e) = self
                .encoded
                .encode(compiled, batch, malformed, Some(&|_, _| 0))
        {
            self.refused = Some(e.to_string());
        }
        let hasher = &self.hasher;
        // 128 bits, as the kernel's: a collision would merge two units.
        let hash = |tag: u8, bytes: &[u8]| {
            (u128::from(hasher[0].hash_one((tag, bytes))) << 64)
                | u128::from(hasher[1].hash_one((tag, bytes)))
        };
        let mut people = crate::encode::PeopleColumns {
            hash: Some(&hash),
            units: &mut self.units,
            weights: &mut self.weights,
        };
        let status = row_status(compiled, batch, malformed, &mut self.steps, &mut people);
        let mut dropped = vec![false; status.len()];
        for (r, s) in status.iter().enumerate() {
            let Err(m) = s else { continue };
            *self.malformed.entry(m.reason()).or_default() += 1;
            dropped[r] = true;
            let time = matches!(m, Malformed::BadTime | Malformed::OutsideSteps)
                && malformed.get(r).is_none_or(Option::is_none);
            if let (true, Some((c, _))) = (time, compiled.time) {
                let which = usize::from(*m == Malformed::OutsideSteps);
                self.times[which].add(|| display(batch.column(c).as_ref(), r));
            }
        }
        for (a, attribute) in compiled.attributes.iter().enumerate() {
            let column = batch.column(attribute.column).as_ref();
            self.codes.clear();
            attribute.codes(column, &mut self.codes);
            for (r, &code) in self.codes.iter().enumerate() {
                let kind = match Code::unpack(code) {
                    Code::Cell(_) => continue,
                    Code::Outside => 0,
                    Code::Missing => 1,
                    Code::Unparsable => 2,
                };
                // A malformed row is not read further.
                if status[r].is_err() {
                    continue;
                }
                dropped[r] = true;
                self.attributes[a][kind].add(|| display(column, r));
            }
        }
        for (r, (s, dropped)) in status.iter().zip(dropped).enumerate() {
            // A malformed row stands for one record.
            let records = *s.as_ref().unwrap_or(&1);
            self.records += records;
            if dropped {
                self.dropped += records;
                continue;
            }
            self.kept += records;
            if let Some(&unit) = self.units.get(r) {
                let step = self.steps.get(r).copied().unwrap_or(0);
                *self.per_unit.entry((unit, step)).or_default() += records;
            }
            if let Some(&w) = self.weights.get(r) {
                let t = &mut self.weight;
                t.clipped += u64::from(w > self.max_weight);
                t.largest = t.largest.max(w);
                t.total += w;
                t.total_clipped += w.min(self.max_weight);
            }
        }
        Ok(())
    }
}

/// Checks `source` under `schema` (and, for a stream, `timing`): the
/// exact figures a curator needs to fix a schema, not private
/// ([`NOT_PRIVATE`]). Refuses only what a release refuses before reading
/// any row (a missing column, a header other than the pinned one).
pub fn check(
    source: Source<'_>,
    schema: &Schema,
    rows: Rows,
    timing: Option<Timing<'_>>,
) -> Result<CheckReport, RecordsError> {
    check_people(source, schema, rows, timing, &People::records())
}

/// [`check()`] of a release that states a privacy unit or weights
/// (`people`): records without their unit, or whose weight is not a
/// finite non-negative number, are malformed rows.
pub fn check_people(
    source: Source<'_>,
    schema: &Schema,
    rows: Rows,
    timing: Option<Timing<'_>>,
    people: &People,
) -> Result<CheckReport, RecordsError> {
    let name = source.name();
    let format = source.kind();
    let mut holds: Vec<(String, Option<String>)> = Vec::new();
    let reading = Reading {
        rows,
        time: timing.map(|t| (t.column, t.spec())),
        people,
    };
    let attributes = schema.attributes().len();
    let hasher = [RandomState::new(), RandomState::new()];
    let max_weight = people.weight.as_ref().map_or(0.0, |(_, w)| *w);
    // The curator sees what a release withholds.
    let shown = |e: RecordsError| match e {
        RecordsError::SourceFailed { path, withheld } => RecordsError::Io {
            path,
            reason: withheld,
        },
        e => e,
    };
    let checkers = read(
        source,
        schema,
        reading,
        |opened: &Opened| {
            holds = opened
                .compiled
                .attributes
                .iter()
                .map(|a| (type_name(&opened.columns[a.column].1), a.mismatch.clone()))
                .collect();
        },
        || {
            Ok(Checker {
                rows: 0,
                records: 0,
                kept: 0,
                dropped: 0,
                malformed: HashMap::new(),
                attributes: (0..attributes).map(|_| Default::default()).collect(),
                times: Default::default(),
                refused: None,
                codes: Vec::new(),
                steps: Vec::new(),
                units: Vec::new(),
                weights: Vec::new(),
                encoded: Encoded::default(),
                hasher: hasher.clone(),
                per_unit: HashMap::new(),
                max_weight,
                weight: WeightTally::default(),
            })
        },
    )
    .map_err(shown)?;
    let mut total = checkers.into_iter();
    let Some(mut all) = total.next() else {
        return Err(RecordsError::Internal("no worker".into()));
    };
    for c in total {
        all.rows += c.rows;
        all.records += c.records;
        all.kept += c.kept;
        all.dropped += c.dropped;
        for (reason, n) in c.malformed {
            *all.malformed.entry(reason).or_default() += n;
        }
        for (mine, theirs) in all.attributes.iter_mut().zip(c.attributes) {
            for (m, t) in mine.iter_mut().zip(theirs) {
                m.merge(t);
            }
        }
        for (m, t) in all.times.iter_mut().zip(c.times) {
            m.merge(t);
        }
        all.refused = all.refused.or(c.refused);
        for (unit, n) in c.per_unit {
            *all.per_unit.entry(unit).or_default() += n;
        }
        let (a, b) = (&mut all.weight, c.weight);
        a.clipped += b.clipped;
        a.largest = a.largest.max(b.largest);
        a.total += b.total;
        a.total_clipped += b.total_clipped;
    }
    let stream = timing.is_some();
    let units = people.unit.as_ref().map(|(column, k)| {
        let k = u64::from(*k);
        // For a stream the bound is per step; otherwise a unit's records
        // are all in step 0.
        let over = all.per_unit.values().filter(|&&n| n > k);
        let mut steps: HashMap<u128, Vec<u32>> = HashMap::new();
        for &(unit, step) in all.per_unit.keys() {
            steps.entry(unit).or_default().push(step);
        }
        steps.values_mut().for_each(|s| s.sort_unstable());
        let steps_bound = people.steps.map(|b| (b.max_steps, b.min_separation));
        let units_over_steps = steps_bound.map(|(most, apart)| {
            steps
                .values()
                .filter(|s| s.len() > most as usize || s.windows(2).any(|w| w[1] - w[0] < apart))
                .count() as u64
        });
        UnitCheck {
            column: column.clone(),
            max_records_per_unit: k as u32,
            units: steps.len() as u64,
            most_records: all.per_unit.values().copied().max().unwrap_or(0),
            units_over_bound: all
                .per_unit
                .iter()
                .filter(|&(_, &n)| n > k)
                .map(|(&(unit, _), _)| unit)
                .collect::<std::collections::HashSet<u128>>()
                .len() as u64,
            records_over_bound: over.map(|&n| n - k).sum(),
            per_step: stream,
            most_steps: stream.then(|| steps.values().map(|s| s.len() as u64).max().unwrap_or(0)),
            steps_bound,
            units_over_steps,
        }
    });
    let weights = people.weight.as_ref().map(|(column, w)| WeightCheck {
        column: column.clone(),
        max_weight: *w,
        clipped_records: all.weight.clipped,
        largest: all.weight.largest,
        total: all.weight.total,
        total_clipped: all.weight.total_clipped,
    });
    let mut malformed: Vec<MalformedRows> = all
        .malformed
        .into_iter()
        .map(|(reason, rows)| MalformedRows { reason, rows })
        .collect();
    malformed.sort_by(|a, b| b.rows.cmp(&a.rows).then(a.reason.cmp(b.reason)));
    let attributes = schema
        .attributes()
        .iter()
        .zip(all.attributes)
        .zip(holds)
        .map(
            |((a, [outside, missing, nan]), (holds, mismatch))| AttributeCheck {
                attribute: a.name.clone(),
                column: a.column.clone(),
                holds,
                mismatch,
                outside: outside.problem(a.outside),
                missing: missing.problem(a.missing),
                not_a_number: matches!(a.encoding, crate::Encoding::Bins { .. })
                    .then(|| nan.problem(a.unparsable)),
            },
        )
        .collect();
    let [not_whole, outside_steps] = all.times;
    let considered = all.kept + all.dropped;
    Ok(CheckReport {
        notice: NOT_PRIVATE,
        source: name,
        format,
        rows: all.rows,
        records: all.records,
        kept_records: all.kept,
        dropped_records: all.dropped,
        dropped_share: if considered == 0 {
            0.0
        } else {
            all.dropped as f64 / considered as f64
        },
        refused: all.refused,
        malformed,
        malformed_policy: policy_name(schema.malformed()),
        attributes,
        times: timing.map(|t| TimeCheck {
            column: t.column.to_string(),
            start: t.start,
            steps: t.steps,
            calendar: t.calendar.map(|c| c.describe()),
            not_whole: not_whole.problem(schema.malformed()),
            outside_steps: outside_steps.problem(schema.malformed()),
        }),
        units,
        weights,
    })
}

/// Row `r` of `array` as the record holds it: text in quotes (escaped,
/// at most 60 characters), a number, a boolean, `null` or `NaN`.
pub(crate) fn display(array: &dyn Array, r: usize) -> String {
    use DataType as T;
    if array.is_null(r) {
        return "null".into();
    }
    let text = |s: &[u8]| {
        let s = String::from_utf8_lossy(s);
        let shown: String = s.chars().take(60).collect();
        let more = if s.chars().count() > 60 { "…" } else { "" };
        format!("{shown:?}{more}")
    };
    let number = |x: f64| {
        if x.is_nan() {
            "NaN".to_string()
        } else {
            format!("{x}")
        }
    };
    macro_rules! int {
        ($t:ty) => {
            array.as_primitive::<$t>().value(r).to_string()
        };
    }
    macro_rules! decimal {
        ($t:ty) => {
            array.as_primitive::<$t>().value_as_string(r)
        };
    }
    match array.data_type() {
        T::Utf8 => text(array.as_string::<i32>().value(r).as_bytes()),
        T::LargeUtf8 => text(array.as_string::<i64>().value(r).as_bytes()),
        T::Utf8View => text(array.as_string_view().value(r).as_bytes()),
        T::Binary => text(array.as_binary::<i32>().value(r)),
        T::LargeBinary => text(array.as_binary::<i64>().value(r)),
        T::BinaryView => text(array.as_binary_view().value(r)),
        T::Int8 => int!(Int8Type),
        T::Int16 => int!(Int16Type),
        T::Int32 => int!(Int32Type),
        T::Int64 => int!(Int64Type),
        T::UInt8 => int!(UInt8Type),
        T::UInt16 => int!(UInt16Type),
        T::UInt32 => int!(UInt32Type),
        T::UInt64 => int!(UInt64Type),
        T::Float16 => number(single(f32::from(
            array.as_primitive::<Float16Type>().value(r),
        ))),
        T::Float32 => number(single(array.as_primitive::<Float32Type>().value(r))),
        T::Float64 => number(array.as_primitive::<Float64Type>().value(r)),
        T::Decimal32(..) => decimal!(Decimal32Type),
        T::Decimal64(..) => decimal!(Decimal64Type),
        T::Decimal128(..) => decimal!(Decimal128Type),
        T::Decimal256(..) => decimal!(Decimal256Type),
        T::Boolean => array.as_boolean().value(r).to_string(),
        T::Dictionary(..) => match array.as_any_dictionary_opt() {
            Some(d) => match dictionary_key(d.keys(), r) {
                Some(k) if k < d.values().len() => display(d.values().as_ref(), k),
                _ => "null".into(),
            },
            None => "?".into(),
        },
        _ => "?".into(),
    }
}

/// Key `r` of a dictionary's keys, as an index.
fn dictionary_key(keys: &dyn Array, r: usize) -> Option<usize> {
    macro_rules! key {
        ($($t:ty),*) => {
            $(if let Some(k) = keys.as_primitive_opt::<$t>() {
                return usize::try_from(k.value(r)).ok();
            })*
        };
    }
    key!(
        Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type
    );
    None
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
