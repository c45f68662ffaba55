use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatchIterator, StringArray};

use super::*;

const SCHEMA: &str = r#"{"domain": [
    {"name": "a", "column": "a", "values": ["x", "y"]},
    {"name": "b", "column": "b", "bins": [0, 10, 20], "missing": "error"}
]}"#;

fn csv(text: &str) -> Source<'static> {
    Source::Csv {
        reader: Box::new(std::io::Cursor::new(text.as_bytes().to_vec())),
        name: "records.csv".into(),
    }
}

#[test]
fn the_check_counts_and_names_what_the_schema_drops() {
    let schema = Schema::from_json(SCHEMA).expect("schema");
    let text = "a,b\nx,1\nz,2\nz,3\ny,NaN\ny,\n\"open,4\ny,25\nq,abc\nx,1,2\n\ny,15\n";
    let report = check(csv(text), &schema, Rows::Records, None).expect("checked");
    assert_eq!(report.notice, NOT_PRIVATE);
    assert_eq!(report.format, "CSV");
    assert_eq!(report.rows, 10, "the empty line is no row");
    assert_eq!((report.kept_records, report.dropped_records), (2, 8));
    assert!((report.dropped_share - 0.8).abs() < 1e-12);
    let a = &report.attributes[0];
    assert_eq!((a.attribute.as_str(), a.holds.as_str()), ("a", "text"));
    assert_eq!(a.outside.rows, 3);
    assert_eq!(
        a.outside.values,
        vec![
            ValueCount {
                value: "\"z\"".into(),
                rows: 2
            },
            ValueCount {
                value: "\"q\"".into(),
                rows: 1
            }
        ]
    );
    assert_eq!(a.outside.policy, "drop");
    assert!(a.not_a_number.is_none());
    let b = &report.attributes[1];
    assert_eq!(b.missing.rows, 2, "NaN and the empty field");
    assert_eq!(b.missing.policy, "error");
    assert_eq!(b.outside.rows, 1);
    assert_eq!(b.not_a_number.as_ref().map(|p| p.rows), Some(1));
    assert_eq!(
        report.malformed,
        vec![
            MalformedRows {
                reason: Malformed::Quote.reason(),
                rows: 1
            },
            MalformedRows {
                reason: Malformed::FieldCount.reason(),
                rows: 1
            },
        ]
    );
    // `missing: error` on b: a release would be refused.
    assert!(
        report
            .refused
            .as_deref()
            .is_some_and(|r| r.contains("missing value") && r.contains("'b'")),
        "{:?}",
        report.refused
    );
}

#[test]
fn the_check_reads_arrow_columns_and_stream_times() {
    let schema = Schema::from_json(SCHEMA).expect("schema");
    let a: ArrayRef = Arc::new(StringArray::from(vec![
        Some("x"),
        Some("z"),
        None,
        Some("y"),
    ]));
    let b: ArrayRef = Arc::new(Float64Array::from(vec![1.0, f64::NAN, 3.0, 4.0]));
    let t: ArrayRef = Arc::new(StringArray::from(vec!["0", "1", "7", "day 2"]));
    let batch = RecordBatch::try_from_iter([("a", a), ("b", b), ("t", t)]).expect("batch");
    let arrow_schema = batch.schema();
    let source = Source::Arrow {
        reader: Box::new(RecordBatchIterator::new([Ok(batch)], arrow_schema)),
        name: "frame".into(),
    };
    let timing = Timing {
        column: "t",
        start: 0,
        steps: 5,
    };
    let report = check(source, &schema, Rows::Records, Some(timing)).expect("checked");
    assert_eq!(report.rows, 4);
    assert_eq!(report.kept_records, 1);
    let a = &report.attributes[0];
    assert_eq!(a.outside.values[0].value, "\"z\"");
    assert_eq!(
        a.missing.rows, 0,
        "the null is in a row whose time is outside"
    );
    assert_eq!(report.attributes[1].holds, "numbers");
    assert_eq!(report.attributes[1].missing.rows, 1);
    assert_eq!(report.attributes[1].missing.values[0].value, "NaN");
    let times = report.times.expect("a stream's times");
    assert_eq!(times.outside_steps.values[0].value, "\"7\"");
    assert_eq!(times.not_whole.values[0].value, "\"day 2\"");
}

#[test]
fn offending_values_past_the_limit_are_counted_not_listed() {
    let schema = Schema::from_json(SCHEMA).expect("schema");
    let mut text = String::from("a,b\n");
    for i in 0..MAX_DISTINCT + 50 {
        text.push_str(&format!("v{i},1\n"));
    }
    for _ in 0..7 {
        text.push_str("w,1\n");
    }
    let report = check(csv(&text), &schema, Rows::Records, None).expect("checked");
    let outside = &report.attributes[0].outside;
    assert_eq!(outside.rows, (MAX_DISTINCT + 57) as u64);
    assert_eq!(outside.values.len(), TOP_VALUES);
    let listed: u64 = outside.unlisted_rows;
    assert!(listed >= 50, "{listed}");
}

#[test]
fn a_failing_source_is_refused_without_its_message_and_the_check_shows_it() {
    let schema = Schema::from_json(SCHEMA).expect("schema");
    let source = || {
        let a: ArrayRef = Arc::new(StringArray::from(vec!["x"]));
        let b: ArrayRef = Arc::new(Float64Array::from(vec![1.0]));
        let batch = RecordBatch::try_from_iter([("a", a), ("b", b)]).expect("batch");
        let arrow_schema = batch.schema();
        let failure = arrow_schema::ArrowError::ComputeError("value 'secret-42' broke".into());
        Source::Arrow {
            reader: Box::new(RecordBatchIterator::new(
                [Ok(batch), Err(failure)],
                arrow_schema,
            )),
            name: "frame".into(),
        }
    };
    let layout = crate::Layout::full(schema.domain(), 100).expect("layout");
    let refused = crate::aggregate_source(source(), &schema, &layout, Rows::Records)
        .expect_err("the source failed");
    assert!(matches!(refused, RecordsError::SourceFailed { .. }));
    assert!(!refused.to_string().contains("secret"), "{refused}");
    let shown = check(source(), &schema, Rows::Records, None).expect_err("the source failed");
    assert!(shown.to_string().contains("secret-42"), "{shown}");
}
