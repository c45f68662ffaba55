//! Partitions counted apart, as a cluster's workers count them, give the
//! tables of one local reading of the same records; records bounded per
//! unit keep at most `K` of each unit wherever its rows were; and the
//! driver takes only whole partitions of its own counting.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, RecordBatchIterator, StringArray,
};

use super::*;
use crate::{DEFAULT_CELL_LIMIT, aggregate_people};

const SCHEMA: &str = r#"{"domain": [
    {"name": "sex", "values": ["f", "m"]},
    {"name": "age", "bins": [0, 18, 65, 120]},
    {"name": "region", "values": ["n", "s", "e", "w"]}
]}"#;

/// `rows` records (person, sex, age, region, weight) with a few that the
/// schema drops (nulls, NaN, values outside the domain), persons among
/// `people`.
fn records(rows: usize, people: i64, seed: u64) -> RecordBatch {
    let mut s = seed;
    let mut next = |n: u64| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 33) % n
    };
    let mut person = Vec::new();
    let mut sex = Vec::new();
    let mut age = Vec::new();
    let mut region = Vec::new();
    let mut weight = Vec::new();
    for _ in 0..rows {
        person.push(next(people as u64) as i64);
        sex.push(["f", "m", "f", "m", "x"][next(5) as usize].to_string());
        age.push([3.0, 40.0, 70.0, 17.99, f64::NAN, 200.0, 64.0][next(7) as usize]);
        region.push(match next(6) {
            5 => None,
            r => Some(["n", "s", "e", "w", "N"][r as usize].to_string()),
        });
        weight.push(next(30) as f64 / 10.0);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(person)),
        Arc::new(StringArray::from(sex)),
        Arc::new(Float64Array::from(age)),
        Arc::new(StringArray::from(region)),
        Arc::new(Float64Array::from(weight)),
    ];
    let schema = arrow_schema::Schema::new(vec![
        Field::new("person", DataType::Int64, false),
        Field::new("sex", DataType::Utf8, false),
        Field::new("age", DataType::Float64, false),
        Field::new("region", DataType::Utf8, true),
        Field::new("weight", DataType::Float64, false),
    ]);
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

fn source(batch: RecordBatch) -> Source<'static> {
    let schema = batch.schema();
    Source::Arrow {
        reader: Box::new(RecordBatchIterator::new(vec![Ok(batch)], schema)),
        name: "test".into(),
    }
}

fn layout() -> Layout {
    let schema = Schema::from_json(SCHEMA).unwrap();
    Layout::marginals(
        schema.domain(),
        &[vec![0, 1], vec![1, 2], vec![]],
        DEFAULT_CELL_LIMIT,
    )
    .unwrap()
}

/// `batch`'s rows split into `n` partitions of about equal length.
fn split(batch: &RecordBatch, n: usize) -> Vec<RecordBatch> {
    let len = batch.num_rows();
    (0..n)
        .map(|i| batch.slice(i * len / n, (i + 1) * len / n - i * len / n))
        .collect()
}

/// The partials' cells summed by hand, per table.
fn summed(batches: &[RecordBatch], layout: &Layout) -> Vec<Vec<u64>> {
    let mut tables: Vec<Vec<u64>> = layout
        .tables()
        .iter()
        .map(|t| vec![0; t.iter().map(|&a| layout.shape()[a]).product()])
        .collect();
    for b in batches {
        let t = b.column(1).as_primitive::<arrow_array::types::Int32Type>();
        let c = b.column(2).as_primitive::<Int64Type>();
        let n = b.column(3).as_primitive::<Int64Type>();
        for r in 0..b.num_rows() {
            if t.value(r) >= 0 {
                tables[t.value(r) as usize][c.value(r) as usize] += n.value(r) as u64;
            }
        }
    }
    tables
}

#[test]
fn partitions_counted_apart_are_the_local_tables() {
    let all = records(3000, 400, 7);
    let layout = layout();
    let people = People::records();
    let local = aggregate_people(
        source(all.clone()),
        &Schema::from_json(SCHEMA).unwrap(),
        &layout,
        Rows::Records,
        &people,
    )
    .unwrap();
    let spec = PartitionSpec::new(SCHEMA, &layout, &people, &all.schema()).unwrap();
    assert_eq!(spec.columns(), ["sex", "age", "region"]);
    // The spec travels as bytes, as to a worker.
    let worker = PartitionSpec::from_bytes(&spec.to_bytes()).unwrap();
    let parts: Vec<RecordBatch> = split(&all, 3)
        .into_iter()
        .enumerate()
        .map(|(p, b)| {
            partial_batch(&count_partition(&worker, source(b), p as u32, Rows::Records).unwrap())
                .unwrap()
        })
        .collect();
    let local_tables: Vec<Vec<u64>> = local.tables().iter().map(|t| t.counts.clone()).collect();
    assert_eq!(summed(&parts, &layout), local_tables);
    assert!(local_tables[2][0] > 1000, "most records are kept");
    // The driver merges them; twice a partition, or one missing, is refused.
    assert!(spec.merge(Some(3), parts.iter().cloned().map(Ok)).is_ok());
    let twice = parts.iter().chain(&parts[..1]).cloned().map(Ok);
    assert!(spec.merge(Some(3), twice).is_err());
    assert!(
        spec.merge(Some(3), parts[..2].iter().cloned().map(Ok))
            .is_err()
    );
    // Another counting's partials (another key) are refused.
    let other = PartitionSpec::new(SCHEMA, &layout, &people, &all.schema()).unwrap();
    assert!(other.merge(Some(3), parts.iter().cloned().map(Ok)).is_err());
}

/// Encoded, shuffled by unit hash into `n` partitions, bounded: the
/// partials.
fn bounded(spec: &PartitionSpec, inputs: &[RecordBatch], n: u64) -> Vec<RecordBatch> {
    let encoded: Vec<RecordBatch> = inputs
        .iter()
        .map(|b| encode_partition(spec, source(b.clone())).unwrap())
        .collect();
    (0..n)
        .map(|p| {
            let parts: Vec<Result<RecordBatch, RecordsError>> = encoded
                .iter()
                .map(|e| {
                    let lo = e.column(1).as_primitive::<Int64Type>();
                    let rows: Vec<usize> = (0..e.num_rows())
                        .filter(|&r| lo.value(r) as u64 % n == p)
                        .collect();
                    Ok(select_rows(e, &rows))
                })
                .collect();
            partial_batch(&bound_partition(spec, parts, p as u32).unwrap()).unwrap()
        })
        .collect()
}

/// The rows `rows` of a batch of encoded records (integer columns).
fn select_rows(e: &RecordBatch, rows: &[usize]) -> RecordBatch {
    let columns: Vec<ArrayRef> = e
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            DataType::Int64 => {
                let v = c.as_primitive::<Int64Type>();
                Arc::new(Int64Array::from_iter_values(
                    rows.iter().map(|&r| v.value(r)),
                )) as ArrayRef
            }
            _ => {
                let v = c.as_primitive::<arrow_array::types::Int32Type>();
                Arc::new(arrow_array::Int32Array::from_iter_values(
                    rows.iter().map(|&r| v.value(r)),
                ))
            }
        })
        .collect();
    RecordBatch::try_new(e.schema(), columns).unwrap()
}

#[test]
fn units_bounded_apart_keep_at_most_k_of_each_unit() {
    let all = records(4000, 300, 11);
    let layout = layout();
    let people = People {
        unit: Some(("person".into(), 3)),
        ..People::records()
    };
    let spec = PartitionSpec::new(SCHEMA, &layout, &people, &all.schema()).unwrap();
    assert_eq!(spec.columns(), ["sex", "age", "region", "person"]);
    let inputs = split(&all, 3);
    // Each unit's kept records, from the encoded rows (the schema's drops
    // applied), whichever input partition they were in.
    let mut per_unit: HashMap<(i64, i64), u64> = HashMap::new();
    for b in &inputs {
        let e = encode_partition(&spec, source(b.clone())).unwrap();
        let (hi, lo) = (
            e.column(0).as_primitive::<Int64Type>(),
            e.column(1).as_primitive::<Int64Type>(),
        );
        for r in 0..e.num_rows() {
            *per_unit.entry((hi.value(r), lo.value(r))).or_default() += 1;
        }
    }
    assert!(per_unit.len() > 250 && per_unit.values().any(|&n| n > 3));
    let expected: u64 = per_unit.values().map(|&n| n.min(3)).sum();
    let parts = bounded(&spec, &inputs, 2);
    for table in summed(&parts, &layout) {
        assert_eq!(table.iter().sum::<u64>(), expected);
    }
    let merged = spec.merge(None, parts.into_iter().map(Ok)).unwrap();
    assert_eq!(merged.scale(), 3);
    // One added person of 50 records, spread over the inputs, adds
    // exactly K = 3 to each table's total.
    let extra = records(50, 1, 3);
    let person: ArrayRef = Arc::new(Int64Array::from(vec![1_000_000i64; 50]));
    let mut columns = extra.columns().to_vec();
    columns[0] = person;
    let extra = RecordBatch::try_new(extra.schema(), columns).unwrap();
    let kept_extra = encode_partition(&spec, source(extra.clone()))
        .unwrap()
        .num_rows() as u64;
    assert!(kept_extra >= 3);
    let mut more = inputs.clone();
    more.extend([extra.slice(0, 25), extra.slice(25, 25)]);
    for table in summed(&bounded(&spec, &more, 2), &layout) {
        assert_eq!(table.iter().sum::<u64>(), expected + 3);
    }
}

#[test]
fn specs_refuse_missing_columns_streams_and_foreign_bytes() {
    let all = records(10, 5, 1);
    let layout = layout();
    let people = People {
        unit: Some(("nobody".into(), 3)),
        ..People::records()
    };
    assert!(PartitionSpec::new(SCHEMA, &layout, &people, &all.schema()).is_err());
    let steps = People {
        unit: Some(("person".into(), 3)),
        steps: Some(dp_core::kernel::records::StepBound {
            max_steps: 1,
            min_separation: 1,
        }),
        ..People::records()
    };
    assert!(PartitionSpec::new(SCHEMA, &layout, &steps, &all.schema()).is_err());
    assert!(PartitionSpec::from_bytes(b"{}").is_err());
    // Encoded records that are not dpmm's are refused by the bounding.
    let people = People {
        unit: Some(("person".into(), 3)),
        ..People::records()
    };
    let spec = PartitionSpec::new(SCHEMA, &layout, &people, &all.schema()).unwrap();
    assert!(bound_partition(&spec, [Ok(all.clone())], 0).is_err());
    let e = encode_partition(&spec, source(all)).unwrap();
    let mut columns = e.columns().to_vec();
    columns[2] = Arc::new(arrow_array::Int32Array::from(vec![7; e.num_rows()]));
    let bad = RecordBatch::try_new(e.schema(), columns).unwrap();
    assert!(e.num_rows() == 0 || bound_partition(&spec, [Ok(bad)], 0).is_err());
    // Without a unit, the one pass; with one, the two.
    assert!(count_partition(&spec, source(records(5, 2, 2)), 0, Rows::Records).is_err());
}

/// Records grouped first (as Spark's GROUP BY of the columns read groups
/// them: identical values together) and read as counts tables, in
/// partitions: the local tables of the records one by one.
#[test]
fn groups_of_identical_records_counted_apart_are_the_local_tables() {
    let all = records(3000, 400, 13);
    let layout = layout();
    let people = People::records();
    let local = aggregate_people(
        source(all.clone()),
        &Schema::from_json(SCHEMA).unwrap(),
        &layout,
        Rows::Records,
        &people,
    )
    .unwrap();
    let sex = all.column(1).as_string::<i32>();
    let age = all
        .column(2)
        .as_primitive::<arrow_array::types::Float64Type>();
    let region = all.column(3).as_string::<i32>();
    let mut groups: HashMap<(String, u64, Option<String>), i64> = HashMap::new();
    for r in 0..all.num_rows() {
        let key = (
            sex.value(r).to_string(),
            age.value(r).to_bits(),
            region.is_valid(r).then(|| region.value(r).to_string()),
        );
        *groups.entry(key).or_default() += 1;
    }
    assert!(groups.len() < all.num_rows() / 5, "records repeat");
    let groups: Vec<_> = groups.into_iter().collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            groups.iter().map(|g| g.0.0.as_str()),
        )),
        Arc::new(Float64Array::from_iter_values(
            groups.iter().map(|g| f64::from_bits(g.0.1)),
        )),
        Arc::new(StringArray::from_iter(
            groups.iter().map(|g| g.0.2.as_deref()),
        )),
        Arc::new(Int64Array::from_iter_values(groups.iter().map(|g| g.1))),
    ];
    let schema = arrow_schema::Schema::new(vec![
        Field::new("sex", DataType::Utf8, false),
        Field::new("age", DataType::Float64, false),
        Field::new("region", DataType::Utf8, true),
        Field::new("count", DataType::Int64, false),
    ]);
    let table = RecordBatch::try_new(Arc::new(schema), columns).unwrap();
    let spec = PartitionSpec::new(SCHEMA, &layout, &people, &all.schema()).unwrap();
    let parts: Vec<RecordBatch> = split(&table, 2)
        .into_iter()
        .enumerate()
        .map(|(p, b)| {
            partial_batch(&count_partition(&spec, source(b), p as u32, Rows::CountsTable).unwrap())
                .unwrap()
        })
        .collect();
    let local_tables: Vec<Vec<u64>> = local.tables().iter().map(|t| t.counts.clone()).collect();
    assert_eq!(summed(&parts, &layout), local_tables);
    // Weighted records are not grouped.
    let weighted = People {
        weight: Some(("weight".into(), 2.0)),
        ..People::records()
    };
    let spec = PartitionSpec::new(SCHEMA, &layout, &weighted, &all.schema()).unwrap();
    assert!(count_partition(&spec, source(table), 0, Rows::CountsTable).is_err());
}
