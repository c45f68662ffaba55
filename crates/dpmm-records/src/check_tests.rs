use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatchIterator, StringArray};

use rand::Rng;

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
        calendar: None,
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

/// With a privacy unit and weights the check shows, exactly, what the
/// bound and the clipping do to the kept records: against brute force on
/// random records (units written several ways, some records dropped).
#[test]
fn the_check_shows_the_units_over_the_bound_and_the_clipped_weights() {
    let schema = Schema::from_json(SCHEMA).expect("schema");
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(49);
    let mut text = String::from("a,b,who,w\n");
    let mut per_unit: HashMap<u64, u64> = HashMap::new();
    let (k, max_w) = (3u64, 2.5);
    let (mut clipped, mut largest, mut total, mut total_clipped) = (0u64, 0.0f64, 0.0, 0.0);
    for _ in 0..2000 {
        let unit = rng.random_range(0..300u64);
        let written = match rng.random_range(0..3) {
            0 => format!("{unit}"),
            1 => format!("{unit}.0"),
            _ => format!(" {unit} "),
        };
        let w = f64::from(rng.random_range(0..16u32)) / 4.0;
        let a = ["x", "y", "z"][rng.random_range(0..3)];
        text.push_str(&format!("{a},5,{written},{w}\n"));
        if a != "z" {
            *per_unit.entry(unit).or_default() += 1;
            clipped += u64::from(w > max_w);
            largest = largest.max(w);
            total += w;
            total_clipped += w.min(max_w);
        }
    }
    // Rows without a unit or with a bad weight are malformed, not counted.
    text.push_str("x,5,,1\nx,5,7,-1\nx,5,7,NaN\n");
    let people = People {
        unit: Some(("who".into(), k as u32)),
        weight: Some(("w".into(), max_w)),
        ..People::records()
    };
    let report = check_people(csv(&text), &schema, Rows::Records, None, &people).expect("checked");
    let units = report.units.expect("units");
    assert_eq!(units.units, per_unit.len() as u64);
    assert_eq!(
        units.most_records,
        per_unit.values().copied().max().unwrap_or(0)
    );
    let over: Vec<u64> = per_unit.values().copied().filter(|&n| n > k).collect();
    assert_eq!(units.units_over_bound, over.len() as u64);
    assert_eq!(
        units.records_over_bound,
        over.iter().map(|n| n - k).sum::<u64>()
    );
    let weights = report.weights.expect("weights");
    assert_eq!(weights.clipped_records, clipped);
    assert_eq!(weights.largest, largest);
    // Quarters sum exactly in f64.
    assert_eq!(
        (weights.total, weights.total_clipped),
        (total, total_clipped)
    );
    let malformed: u64 = report.malformed.iter().map(|m| m.rows).sum();
    assert_eq!(malformed, 3);
    assert_eq!(report.kept_records, per_unit.values().sum::<u64>());
}

/// For a stream with a privacy unit the check's figures are per step:
/// the most records of one unit in one step, the units with a step over
/// the bound and the records past it, the most steps of one unit, and
/// the units a stream leaves steps out of (more than `k` steps or two
/// closer than `b`) — against brute force on random records.
#[test]
fn the_check_counts_a_streams_units_per_step() {
    let schema = Schema::from_json(SCHEMA).expect("schema");
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(14);
    let mut text = String::from("a,b,who,t\n");
    let mut per: HashMap<(u64, u64), u64> = HashMap::new();
    let (k, most, apart) = (2u64, 3usize, 4u64);
    for _ in 0..3000 {
        let unit = rng.random_range(0..200u64);
        let t = rng.random_range(0..40u64);
        let a = ["x", "y", "z"][rng.random_range(0..3)];
        text.push_str(&format!("{a},5,{unit},{t}\n"));
        if a != "z" {
            *per.entry((unit, t)).or_default() += 1;
        }
    }
    // Outside the steps: malformed, not counted.
    text.push_str("x,5,1,40\n");
    let people = People {
        unit: Some(("who".into(), k as u32)),
        steps: Some(dp_core::kernel::records::StepBound {
            max_steps: most as u32,
            min_separation: apart as u32,
        }),
        ..People::records()
    };
    let timing = Timing {
        column: "t",
        start: 0,
        steps: 40,
        calendar: None,
    };
    let report =
        check_people(csv(&text), &schema, Rows::Records, Some(timing), &people).expect("checked");
    let units = report.units.expect("units");
    let mut steps: HashMap<u64, Vec<u64>> = HashMap::new();
    for &(u, t) in per.keys() {
        steps.entry(u).or_default().push(t);
    }
    assert!(units.per_step);
    assert_eq!(units.units, steps.len() as u64);
    assert_eq!(units.most_records, per.values().copied().max().unwrap_or(0));
    let over_units: std::collections::HashSet<u64> = per
        .iter()
        .filter(|(_, n)| **n > k)
        .map(|(&(u, _), _)| u)
        .collect();
    assert_eq!(units.units_over_bound, over_units.len() as u64);
    assert_eq!(
        units.records_over_bound,
        per.values().filter(|&&n| n > k).map(|n| n - k).sum::<u64>()
    );
    assert_eq!(
        units.most_steps,
        Some(steps.values().map(|s| s.len() as u64).max().unwrap_or(0))
    );
    steps.values_mut().for_each(|s| s.sort_unstable());
    let left_out = steps
        .values()
        .filter(|s| s.len() > most || s.windows(2).any(|w| w[1] - w[0] < apart))
        .count();
    assert_eq!(units.units_over_steps, Some(left_out as u64));
    assert_eq!(units.steps_bound, Some((most as u32, apart as u32)));
}
