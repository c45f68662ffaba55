//! The columns a release reads besides the schema's, from any column type,
//! each value by itself: a counts table's multiplicities and a stream's
//! time values as whole numbers (`13`, `13.0`, `1.3e1` and a decimal
//! `13.00` are all 13), weights as finite non-negative numbers, and
//! privacy units as the canonical bytes of their values (`42`, `42.0` and
//! `" 42"` are one unit), hashed by the kernel.

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Decimal32Type, Decimal64Type, Decimal128Type, Decimal256Type, Float16Type, Float32Type,
    Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type,
    UInt64Type,
};
use arrow_schema::DataType;

use crate::encode::UnitHash;
use crate::encode::{F16, TimeSpec, is_null, single};
use crate::lines::Malformed;
use crate::value::{Key, parse_number, text_key};

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
    let start = match &spec.calendar {
        Some(calendar) => {
            calendar.steps_of(array, &mut read);
            0
        }
        None => {
            whole_numbers(array, &mut read, &time_of_text, &time_of_number, &|v| {
                i64::try_from(v).ok()
            });
            spec.start
        }
    };
    for ((s, time), step) in status.iter_mut().zip(read).zip(step) {
        let Some(time) = time else {
            *s = Err(Malformed::BadTime);
            continue;
        };
        let at = time
            .checked_sub(start)
            .and_then(|t| u64::try_from(t).ok())
            .filter(|&t| t < spec.steps)
            .and_then(|t| u32::try_from(t).ok());
        match at {
            Some(t) => *step = t,
            None => *s = Err(Malformed::OutsideSteps),
        }
    }
}

/// Reads each row of `array` as a whole number (booleans are none).
fn whole_numbers<T: Copy>(
    array: &dyn Array,
    out: &mut Vec<Option<T>>,
    text: &dyn Fn(&[u8]) -> Option<T>,
    number: &dyn Fn(f64) -> Option<T>,
    integer: &dyn Fn(i128) -> Option<T>,
) {
    read_values(array, out, text, number, integer, &|_| None);
}

/// Reads each row of `array`: text by `text`, floats (float32 as its
/// shortest decimal) and decimals by `number`, integers by `integer`,
/// booleans by `boolean`, fixed-size binary (UUIDs) as text bytes; null,
/// and any other type, is `None`.
fn read_values<T: Copy>(
    array: &dyn Array,
    out: &mut Vec<Option<T>>,
    text: &dyn Fn(&[u8]) -> Option<T>,
    number: &dyn Fn(f64) -> Option<T>,
    integer: &dyn Fn(i128) -> Option<T>,
    boolean: &dyn Fn(bool) -> Option<T>,
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
        // A UUID column (pyarrow's uuid type is 16 fixed bytes): its bytes.
        D::FixedSizeBinary(_) => each!(array.as_fixed_size_binary(), text),
        D::Int8 => ints!(Int8Type),
        D::Int16 => ints!(Int16Type),
        D::Int32 => ints!(Int32Type),
        D::Int64 => ints!(Int64Type),
        D::UInt8 => ints!(UInt8Type),
        D::UInt16 => ints!(UInt16Type),
        D::UInt32 => ints!(UInt32Type),
        D::UInt64 => ints!(UInt64Type),
        D::Float16 => each!(array.as_primitive::<Float16Type>(), |v: F16| number(
            single(f32::from(v))
        )),
        D::Float32 => each!(array.as_primitive::<Float32Type>(), |v: f32| number(
            single(v)
        )),
        D::Boolean => each!(array.as_boolean(), boolean),
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
            read_values(
                dictionary.values().as_ref(),
                &mut entries,
                text,
                number,
                integer,
                boolean,
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

/// Each row's privacy unit, hashed from its canonical bytes (a tag and
/// the value: a number as its exact decimal value however written — a
/// float as its shortest decimal —, other text as read by [`text_key`]
/// (trimmed of ASCII blanks), booleans);
/// a missing unit (null, NaN, a missing-value marker) is
/// [`Malformed::NoUnit`], a record that can be attributed to no one.
pub(crate) fn units(
    array: &dyn Array,
    hash: &UnitHash<'_>,
    markers: &[Box<[u8]>],
    out: &mut [u128],
    status: &mut [Result<u64, Malformed>],
) {
    // A unit that reads as a marker is missing: a numeric marker by its
    // exact value (`-9`, `-9.0` alike), any other by its text.
    let numeric_markers: Vec<Vec<u8>> = markers
        .iter()
        .filter_map(|m| match exact_decimal(m.trim_ascii()) {
            Decimal::Exact(key) => Some(key),
            _ => None,
        })
        .collect();
    let text_markers: Vec<Key<'_>> = markers
        .iter()
        .map(|m| text_key(m))
        .filter(|k| !matches!(k, Key::Number(_)))
        .collect();
    // Numbers are hashed by their exact decimal value, however written
    // (`9007199254740993`, `9.007199254740993e15`, a decimal
    // `9007199254740993.00`): never rounded onto a neighbour.
    let decimal = |key: Decimal| -> Option<u128> {
        match key {
            Decimal::Exact(key) if numeric_markers.contains(&key) => None,
            Decimal::Exact(key) => Some(hash(b'N', &key)),
            Decimal::Not | Decimal::Unreadable => None,
        }
    };
    let text = |v: &[u8]| -> Option<u128> {
        let v = v.trim_ascii();
        match exact_decimal(v) {
            Decimal::Not => {}
            // An exponent past 36 digits: no exact value to key by.
            Decimal::Unreadable => return None,
            key => return decimal(key),
        }
        let key = text_key(v);
        if text_markers.contains(&key) {
            return None;
        }
        match key {
            Key::Null => None,
            // Numbers that are no decimal (`inf`, `Infinity`).
            Key::Number(x) => Some(hash(b'F', &x.to_bits().to_le_bytes())),
            Key::Bool(b) => Some(hash(b'B', &[u8::from(b)])),
            Key::Text(t) => Some(hash(b'T', t)),
        }
    };
    // A float reads as its shortest decimal, as its text would.
    let number = |x: f64| -> Option<u128> {
        if x.is_nan() {
            return None;
        }
        if !x.is_finite() {
            return Some(hash(b'F', &x.to_bits().to_le_bytes()));
        }
        decimal(exact_decimal(
            ryu::Buffer::new().format_finite(x).as_bytes(),
        ))
    };
    let integer = |v: i128| -> Option<u128> { decimal(exact_decimal(v.to_string().as_bytes())) };
    let mut read: Vec<Option<u128>> = Vec::with_capacity(array.len());
    let nulls = array.logical_nulls();
    let present = |r: usize| !is_null(nulls.as_ref(), r);
    match array.data_type() {
        // A UUID (fixed bytes) is its bytes, nothing read into them.
        DataType::FixedSizeBinary(_) => {
            let values = array.as_fixed_size_binary();
            read.extend((0..array.len()).map(|r| present(r).then(|| hash(b'U', values.value(r)))));
        }
        // A decimal is its unscaled integer and scale, exactly (its text
        // form keeps only the declared precision's digits).
        DataType::Decimal32(_, scale)
        | DataType::Decimal64(_, scale)
        | DataType::Decimal128(_, scale)
        | DataType::Decimal256(_, scale) => {
            let scale = i64::from(*scale);
            let unscaled = |r: usize| -> String {
                match array.data_type() {
                    DataType::Decimal32(..) => {
                        array.as_primitive::<Decimal32Type>().value(r).to_string()
                    }
                    DataType::Decimal64(..) => {
                        array.as_primitive::<Decimal64Type>().value(r).to_string()
                    }
                    DataType::Decimal128(..) => {
                        array.as_primitive::<Decimal128Type>().value(r).to_string()
                    }
                    _ => array.as_primitive::<Decimal256Type>().value(r).to_string(),
                }
            };
            read.extend((0..array.len()).map(|r| {
                let text = format!("{}e{}", unscaled(r), -scale);
                present(r)
                    .then(|| decimal(exact_decimal(text.as_bytes())))
                    .flatten()
            }));
        }
        _ => read_values(array, &mut read, &text, &number, &integer, &|b| {
            Some(hash(b'B', &[u8::from(b)]))
        }),
    }
    for ((o, s), unit) in out.iter_mut().zip(status.iter_mut()).zip(read) {
        match unit {
            Some(u) => *o = u,
            None => *s = Err(Malformed::NoUnit),
        }
    }
}

/// What [`exact_decimal`] makes of some text.
#[derive(Debug, PartialEq)]
enum Decimal {
    /// A decimal number: its canonical bytes.
    Exact(Vec<u8>),
    /// Not a decimal number.
    Not,
    /// A decimal number whose exponent has more than 36 digits.
    Unreadable,
}

/// A decimal number's exact value as canonical bytes:
/// `[+-]digits[.digits][(e|E)[+-]digits]` (digits on at least one side of
/// the point) becomes its sign, its significant digits and the power of
/// ten they are scaled by, so that `27`, `27.0`, `2.70e1`, `+027` and
/// `2.7e0001` give the same bytes and no two values do.
fn exact_decimal(t: &[u8]) -> Decimal {
    let (negative, rest) = match t {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, t),
    };
    let (mantissa, exponent) = match rest.iter().position(|&c| c == b'e' || c == b'E') {
        Some(e) => (&rest[..e], Some(&rest[e + 1..])),
        None => (rest, None),
    };
    let (whole, fraction) = match mantissa.iter().position(|&c| c == b'.') {
        Some(dot) => (&mantissa[..dot], &mantissa[dot + 1..]),
        None => (mantissa, &[][..]),
    };
    if whole.is_empty() && fraction.is_empty()
        || !whole.iter().chain(fraction).all(u8::is_ascii_digit)
    {
        return Decimal::Not;
    }
    let mut power: i128 = match exponent {
        None => 0,
        Some(e) => {
            let (sign, digits) = match e {
                [b'-', d @ ..] => (-1, d),
                [b'+', d @ ..] => (1, d),
                _ => (1, e),
            };
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return Decimal::Not;
            }
            let digits = &digits[digits
                .iter()
                .position(|&d| d != b'0')
                .unwrap_or(digits.len())..];
            if digits.len() > 36 {
                return Decimal::Unreadable;
            }
            let value = digits
                .iter()
                .fold(0i128, |acc, &d| acc * 10 + i128::from(d - b'0'));
            sign * value
        }
    };
    power -= fraction.len() as i128;
    let digits: Vec<u8> = whole.iter().chain(fraction).copied().collect();
    let Some(first) = digits.iter().position(|&d| d != b'0') else {
        return Decimal::Exact(b"0".to_vec());
    };
    let mut significant = &digits[first..];
    while let [rest @ .., b'0'] = significant {
        significant = rest;
        power += 1;
    }
    let mut key = Vec::with_capacity(significant.len() + 42);
    if negative {
        key.push(b'-');
    }
    key.extend_from_slice(significant);
    key.push(b'e');
    key.extend_from_slice(power.to_string().as_bytes());
    Decimal::Exact(key)
}

/// Each row's weight: a finite non-negative number (text read as a
/// number); anything else is [`Malformed::BadWeight`].
pub(crate) fn weights(array: &dyn Array, out: &mut [f64], status: &mut [Result<u64, Malformed>]) {
    let valid = |x: f64| (x.is_finite() && x >= 0.0).then_some(x);
    let mut read: Vec<Option<f64>> = Vec::with_capacity(array.len());
    let text = |v: &[u8]| parse_number(v.trim_ascii()).and_then(valid);
    read_values(
        array,
        &mut read,
        &text,
        &valid,
        &|v: i128| valid(v as f64),
        &|_| None,
    );
    for ((o, s), weight) in out.iter_mut().zip(status.iter_mut()).zip(read) {
        match weight {
            Some(w) => *o = w,
            None => *s = Err(Malformed::BadWeight),
        }
    }
}
