//! What one record's value *is*, whatever type its column has, and how
//! a schema's attribute reads it.
//!
//! A record's cell must depend on that record and the schema alone — not
//! on the column's type, which a tool may choose from other rows (one NaN
//! makes pandas store a whole integer column as float64, where `27`
//! becomes `27.0`). So every value is first brought to a canonical [`Key`]:
//!
//! * text is trimmed of ASCII blanks; text that Rust reads as a number
//!   (`27`, `27.0`, `2.7e1`, `-0`, `inf`) is that number, `true`/`false` in
//!   any case is a boolean, anything else is text;
//! * a number of any width (integer, float, decimal) is its value as an
//!   IEEE double (integers past 2⁵³ round as `"…"` text does when parsed);
//! * a boolean is a boolean;
//! * null, NaN (of any type, or as text) and the schema's missing-value
//!   markers are *missing*.
//!
//! The schema's listed values and markers are brought to keys the same
//! way, and the schema is refused when two of them share a key (`"27"` and
//! `"27.0"`; `"True"` and `"true"`), so every key names one value. Then a
//! categorical attribute reads a key as the listed value with that key; a
//! boolean whose key no value has falls back to the number 1 or 0 when the
//! schema lists no boolean at all (`"0"`/`"1"` codes). A binned attribute
//! reads a finite number into its bin and everything else (text, a
//! boolean, ±∞) as *not a number*.

use rustc_hash::FxHashMap as HashMap;

use crate::schema::{AttributeSchema, Encoding, Policy};

/// A value brought to what it stands for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Key<'a> {
    /// Null, NaN, or (after the schema's lookup) a missing-value marker.
    Null,
    /// A number (not NaN).
    Number(f64),
    /// A boolean.
    Bool(bool),
    /// Text that is neither a number nor a boolean (trimmed).
    Text(&'a [u8]),
}

/// The key of a text field (trimmed of ASCII blanks first).
pub(crate) fn text_key(field: &[u8]) -> Key<'_> {
    let field = field.trim_ascii();
    if let Some(x) = parse_number(field) {
        return if x.is_nan() {
            Key::Null
        } else {
            Key::Number(x)
        };
    }
    if field.eq_ignore_ascii_case(b"true") {
        Key::Bool(true)
    } else if field.eq_ignore_ascii_case(b"false") {
        Key::Bool(false)
    } else {
        Key::Text(field)
    }
}

/// The key of a number.
#[inline]
pub(crate) fn number_key(x: f64) -> Key<'static> {
    if x.is_nan() {
        Key::Null
    } else {
        Key::Number(x)
    }
}

/// A number in Rust's float syntax (`27`, `-3.5`, `1e3`, `inf`, `NaN`),
/// or `None`. Integers of up to 15 digits are read directly, exactly as
/// the general parser reads them.
#[inline]
pub(crate) fn parse_number(field: &[u8]) -> Option<f64> {
    let (negative, digits) = match field {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, field),
    };
    if !digits.is_empty() && digits.len() <= 15 && digits.iter().all(u8::is_ascii_digit) {
        let value = digits
            .iter()
            .fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0'));
        // value < 10^15 < 2^53: the conversion is exact.
        let x = value as f64;
        return Some(if negative { -x } else { x });
    }
    // Only bytes that can start a number reach the general parser (it
    // accepts no blanks, and text is the common case).
    match field.first() {
        Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'i' | b'I' | b'n' | b'N') => {}
        _ => return None,
    }
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// Decimal digits (at most 15, an optional `-`) as the integer they
/// write, or `None`: what [`parse_number`] reads exactly as that integer.
#[inline]
fn small_integer(field: &[u8]) -> Option<i64> {
    let (negative, digits) = match field {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, field),
    };
    if digits.is_empty() || digits.len() > 15 {
        return None;
    }
    let mut value = 0i64;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value * 10 + i64::from(d - b'0');
    }
    Some(if negative { -value } else { value })
}

/// The hash key of a number: its bits, with `-0` as `0`.
#[inline]
fn number_bits(x: f64) -> u64 {
    if x == 0.0 { 0 } else { x.to_bits() }
}

/// What one value says about its attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// The value's index in the attribute.
    Cell(u32),
    /// Outside the domain: a category not listed, a number outside the
    /// bins.
    Outside,
    /// Not a finite number, for a binned attribute.
    Unparsable,
    /// Null, NaN or a missing-value marker.
    Missing,
}

/// The smallest packed code that is not a cell ([`Code::pack`]): cells are
/// below 2²⁴, the three other codes are the top values of a `u32`.
pub(crate) const FIRST_SPECIAL: u32 = u32::MAX - 2;

impl Code {
    /// The code in one `u32`: a cell's index, or one of the three values
    /// from [`FIRST_SPECIAL`] on.
    #[inline]
    pub(crate) fn pack(self) -> u32 {
        match self {
            Code::Cell(c) => c,
            Code::Missing => FIRST_SPECIAL,
            Code::Unparsable => FIRST_SPECIAL + 1,
            Code::Outside => FIRST_SPECIAL + 2,
        }
    }

    /// The code of [`Code::pack`]'s `u32`.
    #[inline]
    pub(crate) fn unpack(packed: u32) -> Code {
        match packed {
            FIRST_SPECIAL => Code::Missing,
            p if p == FIRST_SPECIAL + 1 => Code::Unparsable,
            p if p == FIRST_SPECIAL + 2 => Code::Outside,
            c => Code::Cell(c),
        }
    }
}

/// Integer keys are looked up in a table when they all lie in a range of
/// at most this many values.
const DENSE_RANGE: i64 = 1 << 16;

/// Texts matched exactly. A few texts sit in a table indexed by a hash of
/// their length and first eight bytes, chosen so that no two share a
/// slot: one comparison of two words a field (and of the rest, for longer
/// texts), without the mispredicted branches of a scan. Lists where no
/// such table is found (or longer ones) are a hash map.
enum Exact {
    Slots {
        /// The multiplier of [`slot`] that separates the texts.
        seed: u64,
        /// `log2` of the table's size.
        bits: u32,
        slots: Vec<Option<Slot>>,
    },
    Hashed(HashMap<Box<[u8]>, Code>),
}

/// One listed text: its length, its first eight bytes as a word, the
/// text, and what it reads as.
#[derive(Clone)]
struct Slot {
    len: usize,
    word: u64,
    text: Box<[u8]>,
    code: Code,
}

/// Lists of at most this many texts are tried in a table of slots.
const SLOTS_MAX: usize = 32;

/// The first eight bytes of a text (zero past its end) as a little-endian
/// word.
#[inline]
pub(crate) fn word_of(text: &[u8]) -> u64 {
    match text.first_chunk::<8>() {
        Some(eight) => u64::from_le_bytes(*eight),
        None => text
            .iter()
            .rev()
            .fold(0u64, |word, &b| (word << 8) | u64::from(b)),
    }
}

/// The mask keeping the first `len` bytes of a word.
#[inline]
pub(crate) fn word_mask(len: usize) -> u64 {
    if len >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * len)) - 1
    }
}

/// The slot of a text of `len` bytes starting with `word`, in a table of
/// `2^bits` slots under `seed`.
#[inline]
fn slot(word: u64, len: usize, seed: u64, bits: u32) -> usize {
    ((word ^ (len as u64).rotate_right(8)).wrapping_mul(seed) >> (64 - bits)) as usize
}

impl Exact {
    fn new(entries: HashMap<Box<[u8]>, Code>) -> Self {
        if entries.len() <= SLOTS_MAX {
            let min_bits = (2 * entries.len())
                .next_power_of_two()
                .trailing_zeros()
                .max(2);
            for bits in min_bits..=min_bits + 3 {
                // Odd multipliers from a fixed sequence: the first that
                // separates every text.
                let mut seed = 0x9E37_79B9_7F4A_7C15u64;
                for _ in 0..64 {
                    let mut slots: Vec<Option<Slot>> = vec![None; 1 << bits];
                    let separated = entries.iter().all(|(t, &code)| {
                        let word = word_of(t);
                        let at = &mut slots[slot(word, t.len(), seed, bits)];
                        let free = at.is_none();
                        *at = Some(Slot {
                            len: t.len(),
                            word,
                            text: t.clone(),
                            code,
                        });
                        free
                    });
                    if separated {
                        return Exact::Slots { seed, bits, slots };
                    }
                    seed = seed
                        .wrapping_mul(0x2545_F491_4F6C_DD1D)
                        .wrapping_add(0x6C8E_9CF5)
                        | 1;
                }
            }
        }
        Exact::Hashed(entries)
    }

    /// The code of `text`, whose first eight bytes are `word`, if listed.
    #[inline(always)]
    fn get(&self, word: u64, text: &[u8]) -> Option<Code> {
        match self {
            Exact::Slots { seed, bits, slots } => {
                match &slots[slot(word, text.len(), *seed, *bits)] {
                    Some(s)
                        if s.len == text.len()
                            && s.word == word
                            && (s.len <= 8 || s.text[8..] == text[8..]) =>
                    {
                        Some(s.code)
                    }
                    _ => None,
                }
            }
            Exact::Hashed(map) => map.get(text).copied(),
        }
    }
}

/// The compiled form of one attribute: how every key is read.
pub(crate) struct Lookup {
    /// The exact (trimmed) text of every listed value and marker: the
    /// common case, decided without parsing.
    exact: Exact,
    /// The keys of the listed values and markers that are numbers.
    numbers: HashMap<u64, Code>,
    /// Integer keys from `dense.0` on, when they fit [`DENSE_RANGE`].
    dense: Option<(i64, Vec<Code>)>,
    /// What `false` and `true` read as (after the fallback to 0 and 1).
    bools: [Code; 2],
    /// The keys of the listed values and markers that are text.
    texts: HashMap<Box<[u8]>, Code>,
    /// A binned attribute's edges.
    edges: Option<Vec<f64>>,
    /// Whether a missing-value marker is a number (then numbers are
    /// checked against the markers before their bin).
    numeric_markers: bool,
    /// Policies, by code.
    pub(crate) outside: Policy,
    pub(crate) unparsable: Policy,
    pub(crate) missing: Policy,
}

/// Why two entries of a schema cannot both be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Clash {
    /// A listed value that is NaN, which is missing under every type.
    NanValue(String),
    /// Two listed values with one key.
    Values(String, String),
    /// A listed value with the key of a missing-value marker.
    Marker(String, String),
}

fn owned_key(key: &Key<'_>) -> KeyBuf {
    match key {
        Key::Null => KeyBuf::Null,
        Key::Number(x) => KeyBuf::Number(number_bits(*x)),
        Key::Bool(b) => KeyBuf::Bool(*b),
        Key::Text(t) => KeyBuf::Text(t.to_vec()),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum KeyBuf {
    Null,
    Number(u64),
    Bool(bool),
    Text(Vec<u8>),
}

/// Checks that the listed `values` and `markers` each have their own key
/// (values among themselves and against markers; markers may share).
pub(crate) fn check_keys(values: &[String], markers: &[String]) -> Result<(), Clash> {
    let mut seen: HashMap<KeyBuf, &String> = HashMap::default();
    for v in values {
        let key = owned_key(&text_key(v.as_bytes()));
        if key == KeyBuf::Null {
            return Err(Clash::NanValue(v.clone()));
        }
        if let Some(other) = seen.insert(key, v) {
            return Err(Clash::Values(other.clone(), v.clone()));
        }
    }
    for m in markers {
        let key = owned_key(&text_key(m.as_bytes()));
        if let Some(v) = seen.get(&key) {
            return Err(Clash::Marker((*v).clone(), m.clone()));
        }
    }
    Ok(())
}

impl Lookup {
    /// Compiles `attribute` with the schema's missing-value markers (whose
    /// keys [`check_keys`] has checked against the values).
    pub(crate) fn new(attribute: &AttributeSchema, markers: &[String]) -> Self {
        let mut exact: HashMap<Box<[u8]>, Code> = HashMap::default();
        let mut numbers = HashMap::default();
        let mut texts = HashMap::default();
        let mut bool_keys: [Option<Code>; 2] = [None, None];
        let mut any_bool = false;
        let mut enter = |text: &str, code: Code| {
            exact.entry(text.as_bytes().into()).or_insert(code);
            match text_key(text.as_bytes()) {
                Key::Null => {}
                Key::Number(x) => {
                    numbers.entry(number_bits(x)).or_insert(code);
                }
                Key::Bool(b) => {
                    any_bool = true;
                    bool_keys[usize::from(b)].get_or_insert(code);
                }
                Key::Text(t) => {
                    texts.entry(t.into()).or_insert(code);
                }
            }
        };
        for m in markers {
            enter(m, Code::Missing);
        }
        let edges = match &attribute.encoding {
            Encoding::Categorical { values } => {
                for (i, v) in values.iter().enumerate() {
                    // Sizes are at most 2^24 (schema::MAX_ATTRIBUTE_SIZE).
                    enter(v, Code::Cell(i as u32));
                }
                None
            }
            Encoding::Bins { edges } => Some(edges.clone()),
        };
        let no_match = if edges.is_some() {
            Code::Unparsable
        } else {
            Code::Outside
        };
        let bools = [false, true].map(|b| {
            let code = if any_bool {
                bool_keys[usize::from(b)]
            } else {
                numbers.get(&number_bits(f64::from(u8::from(b)))).copied()
            };
            code.unwrap_or(no_match)
        });
        let dense = match &edges {
            None => dense_table(&numbers),
            Some(edges) => dense_bins(edges, &numbers),
        };
        let numeric_markers = markers
            .iter()
            .any(|m| matches!(text_key(m.as_bytes()), Key::Number(_)));
        Self {
            exact: Exact::new(exact),
            numbers,
            dense,
            bools,
            texts,
            edges,
            numeric_markers,
            outside: attribute.outside,
            unparsable: attribute.unparsable,
            missing: attribute.missing,
        }
    }

    /// The policy for a code that is not a cell.
    #[inline]
    pub(crate) fn policy(&self, code: Code) -> Policy {
        match code {
            Code::Missing => self.missing,
            Code::Unparsable => self.unparsable,
            Code::Outside | Code::Cell(_) => self.outside,
        }
    }

    /// Whether some number can be a cell (the check of a numeric column
    /// against a categorical attribute: one that lists no number is a
    /// mismatch no data satisfies).
    pub(crate) fn reads_numbers(&self) -> bool {
        self.edges.is_some() || self.numbers.values().any(|c| matches!(c, Code::Cell(_)))
    }

    /// What a value no listed value can be reads as: not a number for a
    /// binned attribute, outside the domain for a categorical one.
    pub(crate) fn unreadable(&self) -> Code {
        if self.edges.is_some() {
            Code::Unparsable
        } else {
            Code::Outside
        }
    }

    /// Whether a boolean can be a cell.
    pub(crate) fn reads_booleans(&self) -> bool {
        self.bools.iter().any(|c| matches!(c, Code::Cell(_)))
    }

    /// The code of a text field.
    #[inline]
    pub(crate) fn text(&self, field: &[u8]) -> Code {
        let field = field.trim_ascii();
        self.trimmed(word_of(field), field)
    }

    /// The code of a text field without blanks around it, whose first
    /// eight bytes (zero past its end) are `word`.
    #[inline(always)]
    pub(crate) fn trimmed(&self, word: u64, field: &[u8]) -> Code {
        match self.exact.get(word, field) {
            Some(code) => code,
            None => self.text_key(field),
        }
    }

    /// The code of a (trimmed) text field that is no listed text.
    #[inline(never)]
    fn text_key(&self, field: &[u8]) -> Code {
        // Small integers, the common case of a binned column, straight to
        // the table.
        if let Some((lo, table)) = &self.dense
            && let Some(v) = small_integer(field)
            && let Some(i) = v.checked_sub(*lo)
            && let Ok(i) = usize::try_from(i)
            && i < table.len()
        {
            return table[i];
        }
        self.key(text_key(field))
    }

    /// The code of a number.
    #[inline]
    pub(crate) fn number(&self, x: f64) -> Code {
        self.key(number_key(x))
    }

    /// The code of an integer (read as the double it rounds to).
    #[inline]
    pub(crate) fn integer(&self, v: i64) -> Code {
        if let Some((lo, table)) = &self.dense
            && let Some(i) = v.checked_sub(*lo)
            && let Ok(i) = usize::try_from(i)
            && i < table.len()
        {
            return table[i];
        }
        self.number(v as f64)
    }

    /// The code of a boolean.
    #[inline]
    pub(crate) fn boolean(&self, b: bool) -> Code {
        self.bools[usize::from(b)]
    }

    /// The code of a key.
    pub(crate) fn key(&self, key: Key<'_>) -> Code {
        match key {
            Key::Null => Code::Missing,
            Key::Bool(b) => self.boolean(b),
            Key::Text(t) => match self.texts.get(t) {
                Some(&code) => code,
                None if self.edges.is_some() => Code::Unparsable,
                None => Code::Outside,
            },
            Key::Number(x) => {
                if let Some((lo, table)) = &self.dense
                    && x.fract() == 0.0
                    && x >= *lo as f64
                    && x < (*lo + table.len() as i64) as f64
                {
                    return table[(x as i64 - lo) as usize];
                }
                let listed = (self.edges.is_none() || self.numeric_markers)
                    .then(|| self.numbers.get(&number_bits(x)).copied())
                    .flatten();
                match (listed, &self.edges) {
                    (Some(code), _) => code,
                    (None, None) => Code::Outside,
                    (None, Some(edges)) if x.is_finite() => bin_of(edges, x),
                    (None, Some(_)) => Code::Unparsable,
                }
            }
        }
    }
}

/// A table of the integer keys when they lie within [`DENSE_RANGE`]: every
/// integer outside it is outside the domain (looked up as a double, for
/// integers past 2⁵³, in case one rounds to a key).
fn dense_table(numbers: &HashMap<u64, Code>) -> Option<(i64, Vec<Code>)> {
    let integers: Vec<(i64, Code)> = numbers
        .iter()
        .filter_map(|(&bits, &code)| {
            let x = f64::from_bits(bits);
            (x.fract() == 0.0 && x.abs() <= 2f64.powi(52)).then_some((x as i64, code))
        })
        .collect();
    if integers.len() != numbers.len() {
        return None;
    }
    let lo = integers.iter().map(|&(v, _)| v).min().unwrap_or(0);
    let hi = integers.iter().map(|&(v, _)| v).max().unwrap_or(0);
    if hi - lo >= DENSE_RANGE {
        return None;
    }
    let mut table = vec![Code::Outside; (hi - lo + 1) as usize];
    for (v, code) in integers {
        table[(v - lo) as usize] = code;
    }
    Some((lo, table))
}

/// For bins spanning at most [`DENSE_RANGE`] integers, each integer's bin
/// (or, for a numeric missing-value marker, missing); integers outside
/// the span are looked up in full.
fn dense_bins(edges: &[f64], markers: &HashMap<u64, Code>) -> Option<(i64, Vec<Code>)> {
    let (&first, &last) = (edges.first()?, edges.last()?);
    let (lo, hi) = (first.ceil(), last.ceil());
    if !(lo.is_finite() && hi.is_finite()) || hi - lo > DENSE_RANGE as f64 || hi <= lo {
        return None;
    }
    let lo = lo as i64;
    let table = (lo..hi as i64)
        .map(|v| {
            let x = v as f64;
            markers
                .get(&number_bits(x))
                .copied()
                .unwrap_or_else(|| bin_of(edges, x))
        })
        .collect();
    Some((lo, table))
}

/// The `[lo, hi)` bin holding `x`: `i` with `edges[i] ≤ x < edges[i+1]`.
#[inline]
fn bin_of(edges: &[f64], x: f64) -> Code {
    let (Some(&first), Some(&last)) = (edges.first(), edges.last()) else {
        return Code::Outside;
    };
    if x < first || x >= last {
        return Code::Outside;
    }
    // edges[0] <= x, so at least one edge is <= x; at most 2^24 bins.
    Code::Cell((edges.partition_point(|&e| e <= x) - 1) as u32)
}

#[cfg(test)]
#[path = "value_tests.rs"]
mod tests;
