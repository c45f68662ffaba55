//! Counts and times: the columns a release reads as whole numbers (a
//! counts table's multiplicities, a stream's time values), from any column
//! type, each value by itself: `13`, `13.0`, `1.3e1` and a decimal `13.00`
//! are all 13.

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Decimal32Type, Decimal64Type, Decimal128Type, Decimal256Type, Float16Type, Float32Type,
    Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type,
    UInt64Type,
};
use arrow_schema::DataType;

use crate::encode::{F16, TimeSpec, is_null};
use crate::lines::Malformed;
use crate::value::parse_number;

/// The largest count a row may hold: `u64::MAX` as a double is 2⁶⁴.
const COUNT_LIMIT: f64 = 18_446_744_073_709_551_616.0;

/// A count read from a number: a non-negative whole number below 2⁶⁴.
#[inline]
fn count_of_number(x: f64) -> Option<u64> {
    ((0.0..COUNT_LIMIT).contains(&x) && x.fract() == 0.0).then_some(x as u64)
}

/// A count read from text: decimal digits (exact to 2⁶⁴), or any number
/// that is a whole one (`13.0`, as DuckDB writes a `SUM`).
fn count_of_text(field: &[u8]) -> Option<u64> {
    let field = field.trim_ascii();
    if !field.is_empty() && field.iter().all(u8::is_ascii_digit) {
        return std::str::from_utf8(field).ok()?.parse().ok();
    }
    count_of_number(parse_number(field)?)
}

/// Sets each row's multiplicity to its count; a row whose count is not a
/// non-negative whole number is [`Malformed::BadCount`].
pub(crate) fn counts(array: &dyn Array, status: &mut [Result<u64, Malformed>]) {
    let mut read: Vec<Option<u64>> = Vec::with_capacity(array.len());
    whole_numbers(array, &mut read, &count_of_text, &count_of_number, &|v| {
        u64::try_from(v).ok()
    });
    for (s, count) in status.iter_mut().zip(read) {
        *s = count.ok_or(Malformed::BadCount);
    }
}

/// A time value read from text: an integer, or any number that is a whole
/// one within 64 bits.
pub(crate) fn time_of_text(field: &[u8]) -> Option<i64> {
    let field = field.trim_ascii();
    let digits = field.strip_prefix(b"-").unwrap_or(field);
    if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
        return std::str::from_utf8(field).ok()?.parse().ok();
    }
    time_of_number(parse_number(field)?)
}

/// A time value read from a number: a whole number within 64 bits.
pub(crate) fn time_of_number(x: f64) -> Option<i64> {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    (x.fract() == 0.0 && (-LIMIT..LIMIT).contains(&x)).then_some(x as i64)
}

/// Each row's step from its time value; a value that is not a whole
/// number is [`Malformed::BadTime`], one outside the horizon
/// [`Malformed::OutsideSteps`].
pub(crate) fn times(
    array: &dyn Array,
    spec: TimeSpec,
    step: &mut [u32],
    status: &mut [Result<u64, Malformed>],
) {
    let mut read: Vec<Option<i64>> = Vec::with_capacity(array.len());
    whole_numbers(array, &mut read, &time_of_text, &time_of_number, &|v| {
        i64::try_from(v).ok()
    });
    for ((s, time), step) in status.iter_mut().zip(read).zip(step) {
        let Some(time) = time else {
            *s = Err(Malformed::BadTime);
            continue;
        };
        let at = time
            .checked_sub(spec.start)
            .and_then(|t| u64::try_from(t).ok())
            .filter(|&t| t < spec.steps)
            .and_then(|t| u32::try_from(t).ok());
        match at {
            Some(t) => *step = t,
            None => *s = Err(Malformed::OutsideSteps),
        }
    }
}

/// Reads each row of `array` as a whole number: text by `text`, floats
/// and decimals by `number`, integers by `integer`; null is `None`.
fn whole_numbers<T: Copy>(
    array: &dyn Array,
    out: &mut Vec<Option<T>>,
    text: &dyn Fn(&[u8]) -> Option<T>,
    number: &dyn Fn(f64) -> Option<T>,
    integer: &dyn Fn(i128) -> Option<T>,
) {
    use DataType as D;
    let n = array.len();
    let nulls = array.logical_nulls();
    let nulls = nulls.as_ref();
    macro_rules! each {
        ($values:expr, $read:expr) => {{
            let values = $values;
            for r in 0..n {
                out.push(if is_null(nulls, r) {
                    None
                } else {
                    $read(values.value(r))
                });
            }
        }};
    }
    macro_rules! ints {
        ($t:ty) => {
            each!(array.as_primitive::<$t>(), |v| integer(i128::from(v)))
        };
    }
    macro_rules! decimals {
        ($t:ty) => {{
            let values = array.as_primitive::<$t>();
            for r in 0..n {
                out.push(if is_null(nulls, r) {
                    None
                } else {
                    text(values.value_as_string(r).as_bytes())
                });
            }
        }};
    }
    match array.data_type() {
        D::Utf8 => each!(array.as_string::<i32>(), |v: &str| text(v.as_bytes())),
        D::LargeUtf8 => each!(array.as_string::<i64>(), |v: &str| text(v.as_bytes())),
        D::Utf8View => each!(array.as_string_view(), |v: &str| text(v.as_bytes())),
        D::Binary => each!(array.as_binary::<i32>(), text),
        D::LargeBinary => each!(array.as_binary::<i64>(), text),
        D::BinaryView => each!(array.as_binary_view(), text),
        D::Int8 => ints!(Int8Type),
        D::Int16 => ints!(Int16Type),
        D::Int32 => ints!(Int32Type),
        D::Int64 => ints!(Int64Type),
        D::UInt8 => ints!(UInt8Type),
        D::UInt16 => ints!(UInt16Type),
        D::UInt32 => ints!(UInt32Type),
        D::UInt64 => ints!(UInt64Type),
        D::Float16 => each!(array.as_primitive::<Float16Type>(), |v: F16| number(
            f64::from(v)
        )),
        D::Float32 => each!(array.as_primitive::<Float32Type>(), |v: f32| number(
            f64::from(v)
        )),
        D::Float64 => each!(array.as_primitive::<Float64Type>(), number),
        D::Decimal32(..) => decimals!(Decimal32Type),
        D::Decimal64(..) => decimals!(Decimal64Type),
        D::Decimal128(..) => decimals!(Decimal128Type),
        D::Decimal256(..) => decimals!(Decimal256Type),
        D::Dictionary(..) => {
            let Some(dictionary) = array.as_any_dictionary_opt() else {
                out.extend((0..n).map(|_| None));
                return;
            };
            if dictionary.values().is_empty() {
                out.extend((0..n).map(|_| None));
                return;
            }
            let mut entries: Vec<Option<T>> = Vec::new();
            whole_numbers(
                dictionary.values().as_ref(),
                &mut entries,
                text,
                number,
                integer,
            );
            let keys = dictionary.normalized_keys();
            let key_nulls = dictionary.keys().logical_nulls();
            for (r, &k) in keys.iter().enumerate() {
                out.push(if is_null(key_nulls.as_ref(), r) {
                    None
                } else {
                    entries.get(k).copied().flatten()
                });
            }
        }
        _ => out.extend((0..n).map(|_| None)),
    }
}
