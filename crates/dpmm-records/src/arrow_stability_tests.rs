//! The stability claim of [`crate::aggregate`] for Arrow sources, and
//! the claim of [`crate::value`] that a record's cell depends on the
//! record alone: random frames with random column types, nulls, NaN and
//! text holding line breaks, quotes and separators.

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BinaryArray, Decimal128Array, DictionaryArray, Float64Array, Int32Array, Int64Array,
    LargeStringArray, RecordBatch, RecordBatchIterator, StringArray, StringViewArray,
};
use proptest::prelude::*;

use crate::{DEFAULT_CELL_LIMIT, Layout, RecordsError, Rows, Schema, Source, aggregate_source};

/// Every policy left to its default (drop).
const SCHEMA: &str = r#"{"domain": [
    {"name": "sex", "values": ["f", "m"]},
    {"name": "age", "bins": [0, 18, 65, 120]},
    {"name": "region", "values": ["n", "s", "e", "w", "north-east-region"]}
]}"#;

/// One record as values: `None` is null.
#[derive(Debug, Clone)]
struct Record {
    sex: Option<String>,
    age: Option<f64>,
    region: Option<String>,
    note: Option<String>,
}

/// Text a hostile or careless writer might put in a field.
fn text() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        4 => prop::sample::select(vec!["f", "m", "n", "s", "e", "w"]).prop_map(|s| Some(s.to_string())),
        1 => Just(None),
        2 => prop::sample::select(vec![
            "", "NA", "x", " f ", "F", "f\nf", "m\r\nm,30,s", "\"s\"", "n,s", "\u{0}", "é", "NaN", "true",
            "north-east-region", " north-east-region\t", "north-east-regioN", "north-east-region, and more",
        ])
        .prop_map(|s| Some(s.to_string())),
        1 => "[a-z,\"\n\r ]{0,12}".prop_map(Some),
    ]
}

fn age() -> impl Strategy<Value = Option<f64>> {
    prop_oneof![
        4 => (0i32..130).prop_map(|a| Some(f64::from(a))),
        1 => Just(None),
        1 => prop::sample::select(vec![f64::NAN, -1.0, 17.5, 64.999, 1e300, f64::INFINITY]).prop_map(Some),
    ]
}

fn record() -> impl Strategy<Value = Record> {
    (text(), age(), text(), text()).prop_map(|(sex, age, region, note)| Record {
        sex,
        age,
        region,
        note,
    })
}

/// How a text column is typed.
#[derive(Debug, Clone, Copy)]
enum TextAs {
    Utf8,
    Large,
    View,
    Dictionary,
    Binary,
}

/// How the age column is typed.
#[derive(Debug, Clone, Copy)]
enum AgeAs {
    Float,
    /// Nulls as NaN, as pandas stores them.
    FloatNan,
    Text,
    /// Whole ages only (others null: see `same_records`).
    Int64,
    Int32,
    Decimal,
}

fn text_column(values: &[Option<String>], how: TextAs) -> ArrayRef {
    let v: Vec<Option<&str>> = values.iter().map(|s| s.as_deref()).collect();
    match how {
        TextAs::Utf8 => Arc::new(StringArray::from(v)),
        TextAs::Large => Arc::new(LargeStringArray::from(v)),
        TextAs::View => Arc::new(StringViewArray::from(v)),
        TextAs::Dictionary => Arc::new(v.into_iter().collect::<DictionaryArray<Int32Type>>()),
        TextAs::Binary => Arc::new(BinaryArray::from(
            v.into_iter()
                .map(|s| s.map(str::as_bytes))
                .collect::<Vec<_>>(),
        )),
    }
}

fn age_column(values: &[Option<f64>], how: AgeAs) -> ArrayRef {
    let whole = |a: &Option<f64>| a.filter(|x| x.fract() == 0.0 && x.abs() < 1e15);
    match how {
        AgeAs::Float => Arc::new(Float64Array::from(values.to_vec())),
        AgeAs::FloatNan => Arc::new(Float64Array::from(
            values
                .iter()
                .map(|a| a.unwrap_or(f64::NAN))
                .collect::<Vec<_>>(),
        )),
        AgeAs::Text => Arc::new(StringArray::from(
            values
                .iter()
                .map(|a| a.map(|x| format!("{x}")))
                .collect::<Vec<_>>(),
        )),
        AgeAs::Int64 => Arc::new(Int64Array::from(
            values
                .iter()
                .map(|a| whole(a).map(|x| x as i64))
                .collect::<Vec<_>>(),
        )),
        AgeAs::Int32 => Arc::new(Int32Array::from(
            values
                .iter()
                .map(|a| whole(a).filter(|x| x.abs() < 1e9).map(|x| x as i32))
                .collect::<Vec<_>>(),
        )),
        AgeAs::Decimal => Arc::new(
            Decimal128Array::from(
                values
                    .iter()
                    .map(|a| {
                        a.filter(|x| x.is_finite() && x.abs() < 1e15)
                            .map(|x| (x * 1000.0).round() as i128)
                    })
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(30, 3)
            .expect("decimal"),
        ),
    }
}

fn batch(records: &[Record], sex: TextAs, age: AgeAs, region: TextAs) -> RecordBatch {
    let column = |f: &dyn Fn(&Record) -> Option<String>| -> Vec<Option<String>> {
        records.iter().map(f).collect()
    };
    let ages: Vec<Option<f64>> = records.iter().map(|r| r.age).collect();
    RecordBatch::try_from_iter([
        (
            "note",
            text_column(&column(&|r| r.note.clone()), TextAs::Utf8),
        ),
        ("sex", text_column(&column(&|r| r.sex.clone()), sex)),
        ("age", age_column(&ages, age)),
        (
            "region",
            text_column(&column(&|r| r.region.clone()), region),
        ),
    ])
    .expect("batch")
}

/// The tables of `batches` in the full layout and in two marginals.
fn tables(schema: &Schema, batches: Vec<RecordBatch>) -> Result<Vec<Vec<u64>>, RecordsError> {
    let full = Layout::full(schema.domain(), DEFAULT_CELL_LIMIT)?;
    let marginals = Layout::marginals(schema.domain(), &[vec![0, 2], vec![1]], 100)?;
    let mut out = Vec::new();
    for layout in [full, marginals] {
        let arrow_schema = batches[0].schema();
        let reader = RecordBatchIterator::new(batches.clone().into_iter().map(Ok), arrow_schema);
        let source = Source::Arrow {
            reader: Box::new(reader),
            name: "frame".into(),
        };
        let counts = aggregate_source(source, schema, &layout, Rows::Records)?;
        out.extend(counts.tables().iter().map(|t| t.counts.clone()));
    }
    Ok(out)
}

/// `records` typed one way, cut into batches at `cuts`.
fn batches(records: &[Record], how: (TextAs, AgeAs, TextAs), cuts: &[usize]) -> Vec<RecordBatch> {
    let whole = batch(records, how.0, how.1, how.2);
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (records.len() + 1)).collect();
    points.push(0);
    points.push(records.len());
    points.sort_unstable();
    points.dedup();
    let mut out: Vec<RecordBatch> = points
        .windows(2)
        .map(|w| whole.slice(w[0], w[1] - w[0]))
        .collect();
    if out.is_empty() {
        out.push(whole);
    }
    out
}

fn text_as() -> impl Strategy<Value = TextAs> {
    prop::sample::select(vec![
        TextAs::Utf8,
        TextAs::Large,
        TextAs::View,
        TextAs::Dictionary,
        TextAs::Binary,
    ])
}

fn age_as() -> impl Strategy<Value = AgeAs> {
    prop::sample::select(vec![
        AgeAs::Float,
        AgeAs::FloatNan,
        AgeAs::Text,
        AgeAs::Decimal,
    ])
}

fn max_l1(a: &[Vec<u64>], b: &[Vec<u64>]) -> u64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.iter().zip(y).map(|(p, q)| p.abs_diff(*q)).sum())
        .max()
        .unwrap_or(0)
}

/// The CSV text of `records` (fields quoted, as any writer would).
fn csv_of(records: &[Record]) -> String {
    let field = |s: &Option<String>| match s {
        None => String::new(),
        Some(s) => format!("\"{}\"", s.replace('"', "\"\"")),
    };
    let mut out = String::from("note,sex,age,region\n");
    for r in records {
        let age = r.age.map(|a| format!("{a}")).unwrap_or_default();
        out.push_str(&format!(
            "{},{},{age},{}\n",
            field(&r.note),
            field(&r.sex),
            field(&r.region)
        ));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// One row added anywhere (in any batch) moves no table by more than 1.
    #[test]
    fn one_added_row_moves_each_table_by_at_most_one(
        records in prop::collection::vec(record(), 1..40),
        added in record(),
        at in any::<prop::sample::Index>(),
        how in (text_as(), age_as(), text_as()),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        let schema = Schema::from_json(SCHEMA).expect("schema");
        let mut more = records.clone();
        more.insert(at.index(records.len() + 1), added);
        let a = tables(&schema, batches(&records, how, &cuts)).expect("drop never refuses");
        let b = tables(&schema, batches(&more, how, &cuts)).expect("drop never refuses");
        prop_assert!(max_l1(&a, &b) <= 1, "{:?} vs {:?}", a, b);
    }

    /// The same records give the same tables under every column type and
    /// batching, and as CSV text, except where a line break in a field
    /// makes the CSV line no record (quoted fields never span lines).
    #[test]
    fn the_same_records_give_the_same_tables_under_every_type(
        records in prop::collection::vec(record(), 1..40),
        how in (text_as(), age_as(), text_as()),
        other in (text_as(), age_as(), text_as()),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        let schema = Schema::from_json(SCHEMA).expect("schema");
        let a = tables(&schema, batches(&records, how, &cuts)).expect("read");
        let b = tables(&schema, batches(&records, other, &[])).expect("read");
        prop_assert_eq!(&a, &b);
        let one_line = records.iter().all(|r| {
            [&r.note, &r.sex, &r.region]
                .iter()
                .all(|f| f.as_ref().is_none_or(|s| !s.contains(['\n', '\r'])))
        });
        if one_line {
            let text = csv_of(&records);
            let full = Layout::full(schema.domain(), DEFAULT_CELL_LIMIT).expect("layout");
            let marginals = Layout::marginals(schema.domain(), &[vec![0, 2], vec![1]], 100).expect("layout");
            let mut c = Vec::new();
            for layout in [full, marginals] {
                let counts = crate::aggregate(text.as_bytes(), "csv", &schema, &layout, Rows::Records).expect("read");
                c.extend(counts.tables().iter().map(|t| t.counts.clone()));
            }
            prop_assert_eq!(&a, &c);
        }
    }

    /// Whole ages give the same tables as integers of either width.
    #[test]
    fn whole_numbers_read_alike_as_integers_and_floats(
        ages in prop::collection::vec(prop_oneof![(0i32..130).prop_map(|a| Some(f64::from(a))), Just(None)], 1..40),
        int in prop::sample::select(vec![AgeAs::Int64, AgeAs::Int32]),
        float in prop::sample::select(vec![AgeAs::Float, AgeAs::FloatNan, AgeAs::Text, AgeAs::Decimal]),
    ) {
        let schema = Schema::from_json(SCHEMA).expect("schema");
        let records: Vec<Record> = ages.iter().map(|&age| Record {
            sex: Some("f".into()), age, region: Some("n".into()), note: None,
        }).collect();
        let a = tables(&schema, vec![batch(&records, TextAs::Utf8, int, TextAs::Utf8)]).expect("read");
        let b = tables(&schema, vec![batch(&records, TextAs::Utf8, float, TextAs::Utf8)]).expect("read");
        prop_assert_eq!(a, b);
    }
}
