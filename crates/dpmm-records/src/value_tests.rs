use super::*;
use crate::schema::{AttributeSchema, Encoding, Policy};
use proptest::prelude::*;

fn attribute(encoding: Encoding) -> AttributeSchema {
    AttributeSchema {
        name: "a".into(),
        column: "a".into(),
        encoding,
        outside: Policy::Drop,
        unparsable: Policy::Drop,
        missing: Policy::Drop,
    }
}

fn categorical(values: &[&str], markers: &[&str]) -> Lookup {
    let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    let markers: Vec<String> = markers.iter().map(|v| v.to_string()).collect();
    check_keys(&values, &markers).expect("distinct keys");
    Lookup::new(&attribute(Encoding::Categorical { values }), &markers)
}

fn bins(edges: &[f64], markers: &[&str]) -> Lookup {
    let markers: Vec<String> = markers.iter().map(|v| v.to_string()).collect();
    Lookup::new(
        &attribute(Encoding::Bins {
            edges: edges.to_vec(),
        }),
        &markers,
    )
}

#[test]
fn text_keys_are_numbers_booleans_missing_or_text() {
    let cases: [(&[u8], Key<'_>); 14] = [
        (b" 27 ", Key::Number(27.0)),
        (b"27.0", Key::Number(27.0)),
        (b"2.7e1", Key::Number(27.0)),
        (b"-0", Key::Number(0.0)),
        (b"+5", Key::Number(5.0)),
        (b".5", Key::Number(0.5)),
        (b"inf", Key::Number(f64::INFINITY)),
        (b"-Infinity", Key::Number(f64::NEG_INFINITY)),
        (b"NaN", Key::Null),
        (b"nan", Key::Null),
        (b"TRUE", Key::Bool(true)),
        (b"False", Key::Bool(false)),
        (b"27a", Key::Text(b"27a")),
        (b" yes ", Key::Text(b"yes")),
    ];
    for (text, key) in cases {
        assert_eq!(text_key(text), key, "{}", String::from_utf8_lossy(text));
    }
    assert_eq!(text_key(b""), Key::Text(b""));
    assert_eq!(text_key(b"\xff"), Key::Text(b"\xff"));
}

#[test]
fn a_value_reads_the_same_as_text_number_or_boolean() {
    let l = categorical(&["27", "x", "101"], &["", "NA", "-9"]);
    let cell = |i| Code::Cell(i);
    for (code, text) in [
        (cell(0), "27"),
        (cell(0), " 27.0"),
        (cell(0), "2.7e1"),
        (cell(1), "x"),
        (cell(2), "101.00"),
        (Code::Missing, ""),
        (Code::Missing, "NA"),
        (Code::Missing, "-9"),
        (Code::Missing, "-9.0"),
        (Code::Missing, "NaN"),
        (Code::Outside, "27.5"),
        (Code::Outside, "X"),
        (Code::Outside, "true"),
        (Code::Outside, "inf"),
    ] {
        assert_eq!(l.text(text.as_bytes()), code, "{text:?}");
    }
    assert_eq!(l.integer(27), cell(0));
    assert_eq!(l.number(27.0), cell(0));
    assert_eq!(l.number(-0.0), Code::Outside);
    assert_eq!(l.integer(101), cell(2));
    assert_eq!(l.integer(-9), Code::Missing);
    assert_eq!(l.number(-9.0), Code::Missing);
    assert_eq!(l.number(f64::NAN), Code::Missing);
    assert_eq!(l.number(27.5), Code::Outside);
    assert_eq!(l.number(f64::INFINITY), Code::Outside);
    assert_eq!(l.integer(i64::MAX), Code::Outside);
    assert_eq!(l.boolean(true), Code::Outside);
    assert!(l.reads_numbers());
    assert!(!l.reads_booleans());
}

#[test]
fn booleans_read_as_listed_booleans_or_else_as_zero_and_one() {
    let words = categorical(&["False", "True", "maybe"], &[]);
    assert_eq!(words.boolean(false), Code::Cell(0));
    assert_eq!(words.boolean(true), Code::Cell(1));
    for (text, code) in [("true", 1), ("TRUE", 1), ("false", 0), ("True", 1)] {
        assert_eq!(words.text(text.as_bytes()), Code::Cell(code), "{text}");
    }
    // With a boolean listed, 0 and 1 are numbers, not booleans.
    assert_eq!(words.integer(1), Code::Outside);
    let digits = categorical(&["0", "1"], &[]);
    assert_eq!(digits.boolean(false), Code::Cell(0));
    assert_eq!(digits.boolean(true), Code::Cell(1));
    assert_eq!(digits.text(b"true"), Code::Cell(1));
    assert!(digits.reads_booleans());
    let neither = categorical(&["yes", "no"], &[]);
    assert_eq!(neither.boolean(true), Code::Outside);
    assert!(!neither.reads_booleans());
    assert!(!neither.reads_numbers());
    // A boolean marker is missing in every case.
    let marked = categorical(&["a"], &["False"]);
    assert_eq!(marked.boolean(false), Code::Missing);
    assert_eq!(marked.text(b"FALSE"), Code::Missing);
}

#[test]
fn bins_read_finite_numbers_and_nothing_else() {
    let l = bins(&[-5.0, 0.0, 2.5, 10.0], &["", "NA", "-99"]);
    let cases: [(&str, Code); 14] = [
        ("-5", Code::Cell(0)),
        ("-0.0001", Code::Cell(0)),
        ("0", Code::Cell(1)),
        ("2.4999", Code::Cell(1)),
        ("2.5", Code::Cell(2)),
        ("9.99", Code::Cell(2)),
        ("10", Code::Outside),
        ("-5.01", Code::Outside),
        ("-99", Code::Missing),
        ("-99.0", Code::Missing),
        ("NaN", Code::Missing),
        ("inf", Code::Unparsable),
        ("abc", Code::Unparsable),
        ("true", Code::Unparsable),
    ];
    for (text, code) in cases {
        assert_eq!(l.text(text.as_bytes()), code, "{text}");
    }
    assert_eq!(l.text(b"NA"), Code::Missing);
    assert_eq!(l.text(b"1e0"), Code::Cell(1));
    assert_eq!(l.text(&[0xff, 0xfe]), Code::Unparsable);
    assert_eq!(l.integer(-99), Code::Missing);
    assert_eq!(l.number(f64::NEG_INFINITY), Code::Unparsable);
    assert_eq!(l.number(f64::NAN), Code::Missing);
    assert_eq!(l.boolean(true), Code::Unparsable);
    assert!(l.reads_numbers());
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
        assert_eq!(parse_number(s.as_bytes()), Some(general), "{s}");
    }
    for bad in ["", "-", "--1", "1-", "+-1", " 1", "x1", "1x"] {
        assert_eq!(
            parse_number(bad.as_bytes()),
            bad.parse::<f64>().ok(),
            "{bad}"
        );
    }
}

#[test]
fn schemas_whose_values_read_alike_are_named() {
    let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        check_keys(&v(&["1", "01"]), &[]),
        Err(Clash::Values("1".into(), "01".into()))
    );
    assert_eq!(
        check_keys(&v(&["a", " a "]), &[]),
        Err(Clash::Values("a".into(), " a ".into()))
    );
    assert_eq!(
        check_keys(&v(&["TRUE", "true"]), &[]),
        Err(Clash::Values("TRUE".into(), "true".into()))
    );
    assert_eq!(
        check_keys(&v(&["x", "-NaN"]), &[]),
        Err(Clash::NanValue("-NaN".into()))
    );
    assert_eq!(
        check_keys(&v(&["-9.0", "x"]), &v(&["-9"])),
        Err(Clash::Marker("-9.0".into(), "-9".into()))
    );
    assert_eq!(
        check_keys(&v(&["1", "true", "x"]), &v(&["", "NA", "NaN"])),
        Ok(())
    );
}

/// A categorical attribute listing integers, a marker and text, with the
/// integers in a small range (the dense table) and far from it.
fn mixed() -> Lookup {
    categorical(
        &["-3", "0", "5", "12", "4503599627370497", "x", "1.5"],
        &["", "NA", "99"],
    )
}

proptest! {
    /// An integer reads the same as its text, its text as a float, and
    /// the double it rounds to.
    #[test]
    fn integers_read_as_their_text(v in prop_oneof![-20i64..120, any::<i64>(), Just(4503599627370497i64)]) {
        // `dense` keeps its integers in a table, `mixed` in a hash map.
        let dense = categorical(&["-3", "0", "5", "12", "x"], &["", "NA", "99"]);
        for l in [mixed(), dense] {
            let code = l.integer(v);
            prop_assert_eq!(l.text(v.to_string().as_bytes()), code);
            prop_assert_eq!(l.text(format!("{v}.0").as_bytes()), code);
            prop_assert_eq!(l.number(v as f64), code);
        }
        let b = bins(&[-10.0, 0.0, 3.5, 1e18], &["", "99"]);
        prop_assert_eq!(b.text(v.to_string().as_bytes()), b.integer(v));
    }

    /// A double reads the same as its shortest text (Display and Debug),
    /// under categories and under bins.
    #[test]
    fn doubles_read_as_their_text(x in prop_oneof![
        any::<f64>(),
        (-20i32..20).prop_map(|i| f64::from(i) / 2.0),
        Just(f64::NAN), Just(f64::INFINITY), Just(-0.0),
    ]) {
        let l = mixed();
        let b = bins(&[-10.0, 0.0, 3.5, 1e18], &["", "99"]);
        for text in [format!("{x}"), format!("{x:?}")] {
            prop_assert_eq!(l.text(text.as_bytes()), l.number(x), "{}", text);
            prop_assert_eq!(b.text(text.as_bytes()), b.number(x), "{}", text);
        }
    }

    /// A boolean reads the same as its text in any case.
    #[test]
    fn booleans_read_as_their_text(b in any::<bool>(), upper in any::<bool>()) {
        for l in [categorical(&["0", "1"], &[]), categorical(&["true", "no"], &[]), mixed()] {
            let text = if upper { b.to_string().to_uppercase() } else { b.to_string() };
            prop_assert_eq!(l.text(text.as_bytes()), l.boolean(b));
        }
    }
}
