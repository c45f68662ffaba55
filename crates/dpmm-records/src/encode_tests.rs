use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Decimal128Array, DictionaryArray, Float32Array,
    Float64Array, Int8Array, Int16Array, Int64Array, LargeStringArray, NullArray, StringArray,
    StringViewArray, TimestampSecondArray, UInt8Array, UInt64Array,
};

use super::*;
use crate::schema::Schema;
use crate::whole::{time_of_number, time_of_text, times};

const SCHEMA: &str = r#"{"domain": [
    {"name": "age", "column": "age", "values": ["27", "30", "45"]},
    {"name": "years", "column": "years", "bins": [0, 28, 40, 100]}
]}"#;

/// The same five records (27, 30, missing, 46, 99) as every column type.
fn columns() -> Vec<(&'static str, ArrayRef)> {
    let text = [Some("27"), Some("30.0"), None, Some("4.6e1"), Some(" 99 ")];
    vec![
        (
            "Int64",
            Arc::new(Int64Array::from(vec![
                Some(27),
                Some(30),
                None,
                Some(46),
                Some(99),
            ])) as ArrayRef,
        ),
        (
            "Float64",
            Arc::new(Float64Array::from(vec![27.0, 30.0, f64::NAN, 46.0, 99.0])),
        ),
        (
            "Float64 null",
            Arc::new(Float64Array::from(vec![
                Some(27.0),
                Some(30.0),
                None,
                Some(46.0),
                Some(99.0),
            ])),
        ),
        (
            "Float32",
            Arc::new(Float32Array::from(vec![27.0, 30.0, f32::NAN, 46.0, 99.0])),
        ),
        ("Utf8", Arc::new(StringArray::from(text.to_vec()))),
        (
            "Utf8 NA",
            Arc::new(StringArray::from(vec!["27", "30", "NA", "46", "99"])),
        ),
        ("LargeUtf8", Arc::new(LargeStringArray::from(text.to_vec()))),
        ("Utf8View", Arc::new(StringViewArray::from(text.to_vec()))),
        (
            "Binary",
            Arc::new(BinaryArray::from(
                text.iter()
                    .map(|t| t.map(str::as_bytes))
                    .collect::<Vec<_>>(),
            )),
        ),
        (
            "Dictionary",
            Arc::new(
                text.iter()
                    .map(|t| t.map(|s| s.trim()))
                    .collect::<DictionaryArray<Int32Type>>(),
            ),
        ),
        (
            "Decimal128",
            Arc::new(
                Decimal128Array::from(vec![Some(2700), Some(3000), None, Some(4600), Some(9900)])
                    .with_precision_and_scale(6, 2)
                    .expect("a decimal type"),
            ),
        ),
    ]
}

fn encode_as(column: ArrayRef, rows: Rows) -> Result<Encoded, RecordsError> {
    let schema = Schema::from_json(SCHEMA).expect("schema");
    let mut names = vec!["age", "years"];
    let mut arrays = vec![column.clone(), column];
    if rows == Rows::CountsTable {
        names.push("count");
        arrays.push(Arc::new(Float64Array::from(vec![2.0, 1.0, 3.0, 1.5, 4.0])));
    }
    let extra = Extra {
        count: (rows == Rows::CountsTable).then_some("count"),
        ..Extra::default()
    };
    let needed = resolve(&schema, &names, &extra)?;
    let types: Vec<DataType> = arrays.iter().map(|a| a.data_type().clone()).collect();
    let compiled = Compiled::new(&schema, &needed, &types, None)?;
    let batch = RecordBatch::try_from_iter(names.iter().copied().zip(arrays)).expect("batch");
    let mut e = Encoded::default();
    e.encode(&compiled, &batch, &[], None)?;
    Ok(e)
}

use crate::aggregate::Rows;

#[test]
fn every_column_type_encodes_the_same_records_alike() {
    for (name, column) in columns() {
        let e = encode_as(column, Rows::Records).expect(name);
        // age: 27, 30 are cells 0, 1; missing, 46 (not listed) and 99 drop.
        // years: [0, 28) [28, 40) [40, 100).
        assert_eq!(e.multiplicity, vec![1, 1, 0, 0, 0], "{name}");
        assert_eq!(e.codes[0][..2], [0, 1], "{name}");
        assert_eq!(e.codes[1][..2], [0, 1], "{name}");
    }
}

#[test]
fn a_counts_tables_count_is_any_whole_number() {
    for (name, column) in columns() {
        let e = encode_as(column, Rows::CountsTable).expect(name);
        // Count 1.5 is malformed; the rest as before.
        assert_eq!(e.multiplicity, vec![2, 1, 0, 0, 0], "{name}");
    }
}

fn compile(types: &[(&str, DataType)], schema: &str) -> Result<Compiled, RecordsError> {
    let schema = Schema::from_json(schema).expect("schema");
    let names: Vec<&str> = types.iter().map(|(n, _)| *n).collect();
    let needed = resolve(&schema, &names, &Extra::default())?;
    let types: Vec<DataType> = needed.iter().map(|n| types[n.position].1.clone()).collect();
    Compiled::new(&schema, &needed, &types, None)
}

/// Encodes one column `a` of type `t`'s values `array` under `schema`:
/// the weights, and the curator's note on the type.
fn encode_one(array: ArrayRef, schema: &str) -> (Vec<u64>, Option<String>) {
    let t = array.data_type().clone();
    let compiled = compile(&[("a", t)], schema).expect("types never refuse");
    let batch = RecordBatch::try_from_iter([("a", array)]).expect("batch");
    let mut e = Encoded::default();
    e.encode(&compiled, &batch, &[], None)
        .expect("drop policies");
    (e.multiplicity, compiled.attributes[0].mismatch.clone())
}

#[test]
fn types_no_value_could_match_are_read_as_outside_never_refused() {
    let words = r#"{"domain": [{"name": "a", "values": ["yes", "no"]}]}"#;
    let numbers = r#"{"domain": [{"name": "a", "values": ["1", "2"]}]}"#;
    let flags = r#"{"domain": [{"name": "a", "values": ["false", "true"]}]}"#;
    let binned = r#"{"domain": [{"name": "a", "bins": [0, 10]}]}"#;
    let timestamps: ArrayRef = Arc::new(TimestampSecondArray::from(vec![Some(0), None, Some(5)]));
    let list: ArrayRef = Arc::new(arrow_array::ListArray::from_iter_primitive::<
        arrow_array::types::Int32Type,
        _,
        _,
    >(vec![Some(vec![Some(1)]), None, Some(vec![])]));
    for schema in [words, numbers, flags, binned] {
        for array in [timestamps.clone(), list.clone()] {
            let (weights, note) = encode_one(array, schema);
            assert_eq!(weights, vec![0, 0, 0], "{schema}");
            assert!(note.is_some_and(|n| n.contains("cannot read")));
        }
        let (weights, note) = encode_one(Arc::new(NullArray::new(2)), schema);
        assert_eq!((weights, note), (vec![0, 0], None), "nulls are missing");
    }
    let ints: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
    assert_eq!(encode_one(ints.clone(), numbers), (vec![1, 1, 0], None));
    let (weights, note) = encode_one(ints, words);
    assert_eq!(weights, vec![0, 0, 0]);
    let note = note.expect("a number column against words");
    assert!(note.contains("'a'") && note.contains("numbers"), "{note}");
    let bools: ArrayRef = Arc::new(BooleanArray::from(vec![true, false]));
    assert_eq!(encode_one(bools.clone(), flags), (vec![1, 1], None));
    assert_eq!(
        encode_one(bools.clone(), numbers).0,
        vec![1, 0],
        "booleans read as 1 and 0"
    );
    assert!(encode_one(bools.clone(), binned).1.is_some());
    assert_eq!(encode_one(bools, words).0, vec![0, 0]);
    let dictionary = |v: Vec<i8>| -> ArrayRef {
        Arc::new(DictionaryArray::<Int32Type>::new(
            arrow_array::Int32Array::from(vec![0, 1]),
            Arc::new(Int8Array::from(v)),
        ))
    };
    assert_eq!(
        encode_one(dictionary(vec![1, 2]), numbers),
        (vec![1, 1], None)
    );
    assert!(encode_one(dictionary(vec![1, 2]), words).1.is_some());
    // What is still refused: a column that is not there, or there twice.
    assert!(matches!(
        compile(&[("b", DataType::Utf8)], words),
        Err(RecordsError::MissingColumn { .. })
    ));
    assert!(matches!(
        compile(&[("a", DataType::Utf8), ("a", DataType::Utf8)], words),
        Err(RecordsError::DuplicateHeaderColumn(_))
    ));
}

#[test]
fn other_types_read_as_their_values() {
    let schema = r#"{"domain": [{"name": "a", "values": ["0", "1", "200"]}]}"#;
    let cases: Vec<(ArrayRef, Vec<u64>)> = vec![
        (Arc::new(Int8Array::from(vec![0, 1, -1])), vec![1, 1, 0]),
        (Arc::new(Int16Array::from(vec![200, 1, 2])), vec![1, 1, 0]),
        (Arc::new(UInt8Array::from(vec![200, 0, 255])), vec![1, 1, 0]),
        (
            Arc::new(UInt64Array::from(vec![u64::MAX, 1, 200])),
            vec![0, 1, 1],
        ),
        (
            Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
            vec![1, 0, 1],
        ),
        (Arc::new(NullArray::new(3)), vec![0, 0, 0]),
    ];
    for (column, want) in cases {
        let t = column.data_type().clone();
        let compiled = compile(&[("a", t.clone())], schema).expect("compiles");
        let batch = RecordBatch::try_from_iter([("a", column)]).expect("batch");
        let mut e = Encoded::default();
        e.encode(&compiled, &batch, &[], None)
            .expect("drop policies");
        assert_eq!(e.multiplicity, want, "{t}");
    }
}

#[test]
fn under_error_the_first_row_and_then_the_first_attribute_is_refused() {
    let schema = r#"{"malformed": "error", "domain": [
        {"name": "a", "values": ["x"], "outside": "error", "missing": "error"},
        {"name": "b", "values": ["y"], "outside": "error"}
    ]}"#;
    let compiled =
        compile(&[("a", DataType::Utf8), ("b", DataType::Utf8)], schema).expect("compiles");
    let batch = |a: Vec<&str>, b: Vec<&str>| {
        RecordBatch::try_from_iter([
            ("a", Arc::new(StringArray::from(a)) as ArrayRef),
            ("b", Arc::new(StringArray::from(b)) as ArrayRef),
        ])
        .expect("batch")
    };
    let mut e = Encoded::default();
    // Row 1 is outside on b, row 2 missing on a: row 1 wins.
    let got = e.encode(
        &compiled,
        &batch(vec!["x", "x", ""], vec!["y", "z", "y"]),
        &[],
        None,
    );
    assert_eq!(
        got,
        Err(RecordsError::OutsideDomain {
            column: "b".into(),
            attribute: "b".into()
        })
    );
    // One row outside on both: the first attribute in domain order.
    let got = e.encode(&compiled, &batch(vec!["x", "q"], vec!["y", "z"]), &[], None);
    assert!(matches!(got, Err(RecordsError::OutsideDomain { ref column, .. }) if column == "a"));
    // A malformed row before both.
    let got = e.encode(
        &compiled,
        &batch(vec!["q", ""], vec!["z", "y"]),
        &[None, Some(Malformed::Quote)],
        None,
    );
    assert!(matches!(got, Err(RecordsError::OutsideDomain { .. })));
    let got = e.encode(
        &compiled,
        &batch(vec!["x", "q"], vec!["y", "z"]),
        &[Some(Malformed::Quote), None],
        None,
    );
    assert!(matches!(got, Err(RecordsError::MalformedRow { .. })));
}

#[test]
fn time_values_are_whole_numbers_in_the_horizon() {
    let spec = TimeSpec {
        start: 10,
        steps: 5,
        calendar: None,
    };
    let text: ArrayRef = Arc::new(StringArray::from(vec![
        "10", " 14 ", "15", "9", "12.0", "1.2e1", "12.5", "x", "", "-3",
    ]));
    let floats: ArrayRef = Arc::new(Float64Array::from(vec![
        10.0,
        14.0,
        15.0,
        9.0,
        12.0,
        12.0,
        12.5,
        f64::NAN,
        f64::NAN,
        -3.0,
    ]));
    for column in [text, floats] {
        let mut status = vec![Ok(1); column.len()];
        let mut step = vec![0; column.len()];
        times(column.as_ref(), spec, &mut step, &mut status);
        let bad = Err(Malformed::BadTime);
        let outside = Err(Malformed::OutsideSteps);
        assert_eq!(
            status,
            vec![
                Ok(1),
                Ok(1),
                outside,
                outside,
                Ok(1),
                Ok(1),
                bad,
                bad,
                bad,
                outside
            ]
        );
        assert_eq!(step[..2], [0, 4]);
        assert_eq!(step[4..6], [2, 2]);
    }
    assert_eq!(time_of_text(b"99999999999999999999"), None);
    assert_eq!(time_of_text(b"-9223372036854775808"), Some(i64::MIN));
    assert_eq!(time_of_number(9.3e18), None);
}

#[test]
fn single_precision_values_read_as_the_decimals_they_were_written_as() {
    let categories = r#"{"domain": [{"name": "a", "values": ["0.1", "0.7", "3"]}]}"#;
    let bins = r#"{"domain": [{"name": "a", "bins": [0, 0.7, 1, 5]}]}"#;
    let values = [0.1f32, 0.7, 3.0, 0.3];
    let cells = |array: ArrayRef, schema: &str| {
        let t = array.data_type().clone();
        let compiled = compile(&[("a", t)], schema).expect("compiles");
        let batch = RecordBatch::try_from_iter([("a", array)]).expect("batch");
        let mut e = Encoded::default();
        e.encode(&compiled, &batch, &[], None)
            .expect("drop policies");
        (e.multiplicity, e.codes[0].clone())
    };
    for schema in [categories, bins] {
        let single = cells(Arc::new(Float32Array::from(values.to_vec())), schema);
        let double = cells(
            Arc::new(Float64Array::from(vec![0.1, 0.7, 3.0, 0.3])),
            schema,
        );
        let text = cells(
            Arc::new(StringArray::from(vec!["0.1", "0.7", "3", "0.3"])),
            schema,
        );
        assert_eq!(single, double, "{schema}");
        assert_eq!(single, text, "{schema}");
    }
    assert_eq!(single(0.1), 0.1);
    assert_eq!(single(16_777_216.0), 16_777_216.0);
    assert!(single(f32::NAN).is_nan());
}

/// A privacy unit is read by value and exactly: identifiers past 2⁵³
/// (where floats skip integers) stay apart, and one identifier written as
/// an integer, text or a decimal is one unit.
#[test]
fn units_are_read_by_value_and_large_identifiers_stay_apart() {
    use std::hash::{BuildHasher, RandomState};
    let (h0, h1) = (RandomState::new(), RandomState::new());
    let hash = |tag: u8, bytes: &[u8]| {
        (u128::from(h0.hash_one((tag, bytes))) << 64) | u128::from(h1.hash_one((tag, bytes)))
    };
    let markers: Vec<Box<[u8]>> = vec![
        b"-9".to_vec().into_boxed_slice(),
        b"NA".to_vec().into_boxed_slice(),
    ];
    let read = |array: ArrayRef| {
        let mut out = vec![0u128; array.len()];
        let mut status = vec![Ok(1); array.len()];
        crate::whole::units(array.as_ref(), &hash, &markers, &mut out, &mut status);
        out.into_iter()
            .zip(status)
            .map(|(u, s)| s.is_ok().then_some(u))
            .collect::<Vec<_>>()
    };
    let big = 9_007_199_254_740_993i64; // 2⁵³ + 1: no float names it
    let ints = read(Arc::new(Int64Array::from(vec![big, big - 1, 27, -9])));
    let text = read(Arc::new(StringArray::from(vec![
        "9007199254740993",
        " 9007199254740992 ",
        "27.0",
        "-9.0",
        "2.7e1",
        "x27",
    ])));
    let floats = read(Arc::new(Float64Array::from(vec![
        (big - 1) as f64,
        27.0,
        -9.0,
        27.5,
        f64::NAN,
    ])));
    let decimals = read(Arc::new(
        Decimal128Array::from(vec![i128::from(big) * 1000, 27_000, 27_500])
            .with_precision_and_scale(30, 3)
            .expect("decimal"),
    ));
    assert_ne!(ints[0], ints[1], "2⁵³ + 1 and 2⁵³ are two people");
    assert!(ints[0].is_some() && ints[1].is_some());
    assert_eq!(text[0], ints[0]);
    assert_eq!(decimals[0], ints[0]);
    assert_eq!(text[1], ints[1]);
    assert_eq!(floats[0], ints[1]);
    for same in [text[2], text[4], floats[1], decimals[1]] {
        assert_eq!(same, ints[2], "27 written another way");
    }
    assert_eq!(floats[3], decimals[2], "27.5 as a float and a decimal");
    assert_ne!(floats[3], ints[2]);
    assert!(text[5].is_some() && text[5] != ints[2]);
    // Missing: the marker, however written, and NaN.
    assert_eq!(
        (ints[3], text[3], floats[2], floats[4]),
        (None, None, None, None)
    );
    // Past any machine integer: 40 digits, exponents, a decimal(38, 0).
    let long = read(Arc::new(StringArray::from(vec![
        "1234567890123456789012345678901234567881",
        "1234567890123456789012345678901234567882",
        "1.234567890123456789012345678901234567881e39",
        "9007199254740993e0",
        "9.007199254740993e15",
        "+09007199254740993.000",
        "-0.0",
        "0",
        "2.70e1",
    ])));
    assert_ne!(long[0], long[1]);
    assert_eq!(long[0], long[2]);
    for same in [long[3], long[4], long[5]] {
        assert_eq!(same, ints[0], "2⁵³ + 1 written another way");
    }
    assert_eq!(long[6], long[7], "−0 is 0");
    assert_eq!(long[8], ints[2]);
    let wide = read(Arc::new(
        Decimal128Array::from(vec![
            99_999_999_999_999_999_999_999_999_999_999_999_998i128,
            99_999_999_999_999_999_999_999_999_999_999_999_999,
        ])
        .with_precision_and_scale(38, 0)
        .expect("decimal"),
    ));
    assert_ne!(wide[0], wide[1], "38-digit decimals stay apart");
    // Exponents of any length, exactly; past 36 digits no unit.
    let exponents = read(Arc::new(StringArray::from(vec![
        "1e1000000000000000",
        "2e1000000000000000",
        "1e0000000000000001",
        "10",
        "inf",
        "1e1000000000000000000000000000000000000000",
        "-9.0000000000000001",
        "-8.99999999999999999",
    ])));
    assert_ne!(exponents[0], exponents[1]);
    assert_ne!(exponents[0], exponents[4]);
    assert_eq!(exponents[2], exponents[3]);
    assert_eq!(exponents[5], None);
    // Near the marker -9 but not it: present.
    assert!(exponents[6].is_some() && exponents[7].is_some());
    // Decimals by their unscaled value and scale: values past the declared
    // precision stay apart; a negative scale multiplies.
    let narrow = read(Arc::new(
        Decimal128Array::from(vec![1234i128, 1235])
            .with_precision_and_scale(3, 0)
            .expect("decimal"),
    ));
    assert_ne!(narrow[0], narrow[1]);
    let hundreds = read(Arc::new(
        Decimal128Array::from(vec![27i128])
            .with_precision_and_scale(5, -2)
            .expect("decimal"),
    ));
    let plain = read(Arc::new(Int64Array::from(vec![2700])));
    assert_eq!(hundreds[0], plain[0]);
    // UUIDs (16 fixed bytes): by their bytes, two apart, none missing.
    let uuids = read(Arc::new(
        arrow_array::FixedSizeBinaryArray::try_from_iter(
            [[7u8; 16], [8u8; 16], [7u8; 16]].into_iter(),
        )
        .expect("uuids"),
    ));
    assert!(uuids.iter().all(Option::is_some));
    assert_eq!(uuids[0], uuids[2]);
    assert_ne!(uuids[0], uuids[1]);
    // Nothing is read into their bytes: blanks, digits and "NA" are bytes.
    let mut spaced = [b'x'; 16];
    spaced[0] = b' ';
    let mut tabbed = spaced;
    tabbed[0] = b'\t';
    let mut na = [b' '; 16];
    na[..2].copy_from_slice(b"NA");
    let bytes = read(Arc::new(
        arrow_array::FixedSizeBinaryArray::try_from_iter(
            [spaced, tabbed, *b"0000000000000027", na].into_iter(),
        )
        .expect("uuids"),
    ));
    assert_ne!(bytes[0], bytes[1]);
    assert_ne!(bytes[2], ints[2], "not the number 27");
    assert!(bytes[3].is_some(), "not the marker NA");
}
