//! The hot path: one field's bytes → a cell index of its attribute.

use std::collections::HashMap;

use crate::schema::{AttributeSchema, Encoding, Policy};

/// What one field says about its attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// The value's index in the attribute.
    Cell(usize),
    /// Outside the domain: a category not listed, a number outside the
    /// bins, or text that is not a finite number for a numeric attribute.
    Outside,
    /// One of the missing-value markers.
    Missing,
}

/// Categorical attributes with at most this many values are matched by a
/// linear scan (faster than hashing for yes/no-sized lists).
const LINEAR_SCAN_MAX: usize = 16;

enum Lookup {
    Scan(Vec<Box<[u8]>>),
    Hashed(HashMap<Box<[u8]>, usize>),
    Bins(Vec<f64>),
}

/// The compiled form of one [`AttributeSchema`].
pub(crate) struct Encoder {
    lookup: Lookup,
    missing: Vec<Box<[u8]>>,
    /// Policy for [`Code::Outside`].
    pub(crate) outside: Policy,
    /// Policy for [`Code::Missing`].
    pub(crate) missing_policy: Policy,
}

impl Encoder {
    /// Compiles `attribute` with the schema's missing-value markers.
    pub(crate) fn new(attribute: &AttributeSchema, missing_markers: &[String]) -> Self {
        let lookup = match &attribute.encoding {
            Encoding::Categorical { values } if values.len() <= LINEAR_SCAN_MAX => {
                Lookup::Scan(values.iter().map(|v| v.as_bytes().into()).collect())
            }
            Encoding::Categorical { values } => Lookup::Hashed(
                values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (v.as_bytes().into(), i))
                    .collect(),
            ),
            Encoding::Bins { edges } => Lookup::Bins(edges.clone()),
        };
        Self {
            lookup,
            missing: missing_markers
                .iter()
                .map(|m| m.as_bytes().into())
                .collect(),
            outside: attribute.outside,
            missing_policy: attribute.missing,
        }
    }

    /// The code of one (already trimmed) field.
    #[inline]
    pub(crate) fn encode(&self, field: &[u8]) -> Code {
        if self.missing.iter().any(|m| **m == *field) {
            return Code::Missing;
        }
        match &self.lookup {
            Lookup::Scan(values) => values
                .iter()
                .position(|v| **v == *field)
                .map_or(Code::Outside, Code::Cell),
            Lookup::Hashed(values) => values.get(field).map_or(Code::Outside, |&i| Code::Cell(i)),
            Lookup::Bins(edges) => match parse_finite(field) {
                Some(x) => bin_of(edges, x),
                None => Code::Outside,
            },
        }
    }
}

/// A finite number, or `None` (not UTF-8, not a number, NaN or ±inf).
///
/// Integers of up to 15 digits (the common case: ages, weeks, years) are
/// read directly, exactly as the general parser would (|x| < 2⁵³);
/// everything else goes through `f64::from_str`.
#[inline]
fn parse_finite(field: &[u8]) -> Option<f64> {
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
    let x: f64 = std::str::from_utf8(field).ok()?.parse().ok()?;
    x.is_finite().then_some(x)
}

/// The `[lo, hi)` bin holding `x`: `i` with `edges[i] ≤ x < edges[i+1]`.
fn bin_of(edges: &[f64], x: f64) -> Code {
    let (Some(&first), Some(&last)) = (edges.first(), edges.last()) else {
        return Code::Outside;
    };
    if x < first || x >= last {
        return Code::Outside;
    }
    // edges[0] <= x, so at least one edge is <= x.
    Code::Cell(edges.partition_point(|&e| e <= x) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(encoding: Encoding) -> AttributeSchema {
        AttributeSchema {
            name: "a".into(),
            column: "a".into(),
            encoding,
            outside: Policy::Error,
            missing: Policy::Error,
        }
    }

    #[test]
    fn bins_are_half_open_intervals() {
        let edges = vec![-5.0, 0.0, 2.5, 10.0];
        let e = Encoder::new(&attribute(Encoding::Bins { edges }), &["NA".into()]);
        let cases: [(&[u8], Code); 11] = [
            (b"-5", Code::Cell(0)),
            (b"-0.0001", Code::Cell(0)),
            (b"0", Code::Cell(1)),
            (b"2.4999", Code::Cell(1)),
            (b"2.5", Code::Cell(2)),
            (b"9.99", Code::Cell(2)),
            (b"10", Code::Outside),
            (b"-5.01", Code::Outside),
            (b"NaN", Code::Outside),
            (b"inf", Code::Outside),
            (b"NA", Code::Missing),
        ];
        for (field, code) in cases {
            assert_eq!(e.encode(field), code, "{}", String::from_utf8_lossy(field));
        }
        assert_eq!(e.encode(b"1e0"), Code::Cell(1));
        assert_eq!(e.encode(b"abc"), Code::Outside);
        assert_eq!(e.encode(&[0xff, 0xfe]), Code::Outside);
    }

    #[test]
    fn the_integer_fast_path_agrees_with_the_general_parser() {
        let mut cases: Vec<String> = ["0", "-0", "7", "-12", "000123", "999999999999999"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        cases.extend((-1000..1000).map(|i: i64| (i * 7919).to_string()));
        for s in &cases {
            let general: f64 = s.parse().expect("a number");
            assert_eq!(parse_finite(s.as_bytes()), Some(general), "{s}");
        }
        for bad in ["", "-", "--1", "1-", "+-1", " 1"] {
            assert_eq!(
                parse_finite(bad.as_bytes()),
                bad.parse::<f64>().ok(),
                "{bad}"
            );
        }
    }

    #[test]
    fn categorical_scan_and_hash_agree_with_the_value_order() {
        for n in [3usize, 40] {
            let values: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
            let e = Encoder::new(
                &attribute(Encoding::Categorical { values }),
                &[String::new()],
            );
            for i in 0..n {
                assert_eq!(e.encode(format!("v{i}").as_bytes()), Code::Cell(i));
            }
            assert_eq!(e.encode(b"V0"), Code::Outside);
            assert_eq!(e.encode(b""), Code::Missing);
        }
    }
}
