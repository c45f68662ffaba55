//! A release whose records are counted in partitions (as Spark's
//! executors count them, `dpmatrix.spark`) is the local release of the
//! same records: the same queries, the same sensitivity, answers within
//! the noise; and everything that can be refused is refused before the
//! charge — a missing column and an output over the source before any
//! partition is counted, tables that do not merge before the ledger is
//! touched.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use dpmm::dpmm_records::Source;
use dpmm::dpmm_records::arrow::{DataType, Field, RecordBatchIterator, Schema};
use dpmm::dpmm_records::partition::{PartitionSpec, count_partition, partial_batch};
use dpmm::{Data, Document, PrivacyBudget, Release, Rows, ledger};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fertility1980")
}

/// The census extract as one Arrow batch of text columns.
fn records() -> RecordBatch {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/fertility1980.csv.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut columns: Vec<Vec<&str>> = vec![Vec::new(); header.len()];
    for line in lines {
        for (c, v) in columns.iter_mut().zip(line.split(',')) {
            c.push(v);
        }
    }
    let schema = Schema::new(
        header
            .iter()
            .map(|h| Field::new(*h, DataType::Utf8, false))
            .collect::<Vec<_>>(),
    );
    let arrays: Vec<ArrayRef> = columns
        .into_iter()
        .map(|c| Arc::new(StringArray::from(c)) as ArrayRef)
        .collect();
    RecordBatch::try_new(Arc::new(schema), arrays).unwrap()
}

fn source(batch: RecordBatch) -> Source<'static> {
    let schema = batch.schema();
    Source::Arrow {
        reader: Box::new(RecordBatchIterator::new(vec![Ok(batch)], schema)),
        name: "records".into(),
    }
}

/// The partitions' sealed tables, as the executors return them.
fn partials(spec: &[u8], batch: &RecordBatch, parts: usize) -> Vec<RecordBatch> {
    let spec = PartitionSpec::from_bytes(spec).unwrap();
    let n = batch.num_rows();
    (0..parts)
        .map(|p| {
            let slice = batch.slice(p * n / parts, (p + 1) * n / parts - p * n / parts);
            partial_batch(&count_partition(&spec, source(slice), p as u32, Rows::Records).unwrap())
                .unwrap()
        })
        .collect()
}

/// The partitions' tables as the stream the driver reads.
fn reader(batches: Vec<RecordBatch>) -> impl dpmm::dpmm_records::arrow::RecordBatchReader {
    RecordBatchIterator::new(batches.into_iter().map(Ok), PartitionSpec::partial_schema())
}

#[test]
fn partitions_counted_apart_release_what_one_local_release_does() {
    let dir = common::scratch_dir("distributed-release");
    let book = dir.join("ledger.jsonl");
    ledger::create(&book, PrivacyBudget::pure(30.0).unwrap()).unwrap();
    let one_way = r#"{"domain": [{"name": "morekids", "size": 2}, {"name": "gender1", "size": 2},
        {"name": "gender2", "size": 2}, {"name": "age", "size": 15}, {"name": "afam", "size": 2},
        {"name": "hispanic", "size": 2}, {"name": "other", "size": 2}, {"name": "work", "size": 53}],
        "queries": [{"marginals": {"k": 1}}]}"#;
    let release = Release::new(
        examples().join("schema.json"),
        Document::text(one_way, "one way"),
        PrivacyBudget::pure(10.0).unwrap(),
        &book,
    );
    let batch = records();
    let local = release
        .run(Data::Arrow {
            reader: Box::new(RecordBatchIterator::new(
                vec![Ok(batch.clone())],
                batch.schema(),
            )),
            name: "records".into(),
            rows: Rows::Records,
        })
        .unwrap();
    let spent = |b: &Path| ledger::status(b).unwrap().spent;
    assert_eq!(spent(&book), 10.0);

    // Tables that do not merge (a partition twice, one missing) are
    // refused before the ledger is touched.
    let d = release.distributed(&batch.schema(), &[]).unwrap();
    let mut twice = partials(&d.spec(), &batch, 3);
    twice.push(twice[1].clone());
    assert!(d.finish(Some(3), reader(twice)).is_err());
    let d = release.distributed(&batch.schema(), &[]).unwrap();
    let parts = partials(&d.spec(), &batch, 3);
    assert!(d.finish(Some(4), reader(parts)).is_err());
    assert_eq!(spent(&book), 10.0);
    // Another release's tables (another key) are refused too.
    let other = release.distributed(&batch.schema(), &[]).unwrap();
    let foreign = partials(&other.spec(), &batch, 2);
    drop(other);
    let d = release.distributed(&batch.schema(), &[]).unwrap();
    assert!(d.finish(Some(2), reader(foreign)).is_err());
    assert_eq!(spent(&book), 10.0);

    let d = release.distributed(&batch.schema(), &[]).unwrap();
    let parts = partials(&d.spec(), &batch, 4);
    let spark = d.finish(Some(4), reader(parts)).unwrap();
    assert_eq!(spent(&book), 20.0);
    assert_eq!(
        spark.sidecar()["sensitivity"],
        local.sidecar()["sensitivity"]
    );
    assert_eq!(spark.len(), 80);
    for (a, b) in spark.iter().zip(local.iter()) {
        assert_eq!(a.query, b.query);
        let sd = (a.std_error.powi(2) + b.std_error.powi(2)).sqrt();
        assert!(
            (a.answer - b.answer).abs() < 6.0 * sd,
            "{}: {} {}",
            a.query,
            a.answer,
            b.answer
        );
    }

    // Refused before any partition is counted: a column the schema reads
    // missing, and an output over the source's own file.
    let fewer = Schema::new(batch.schema().fields()[1..].to_vec());
    assert!(release.distributed(&fewer, &[]).is_err());
    let input = dir.join("records.parquet");
    std::fs::write(&input, b"PAR1").unwrap();
    let mut writing = release.clone();
    writing.out = Some(input.clone());
    assert!(writing.distributed(&batch.schema(), &[input]).is_err());
    assert_eq!(spent(&book), 20.0);
}
