//! Streaming throughput: generated fertility-like records (8 columns: six
//! yes/no or male/female, age 21–35, weeks worked 0–52) through the schema
//! of `examples/fertility1980`, plain and gzip'ed, into the full histogram
//! and into all 28 two-way marginals. Records per second = elements/s.

#[path = "../tests/support/generated_records.rs"]
mod generated_records;

use std::hint::black_box;
use std::io::{Read, Write};
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dpmm_records::{DEFAULT_CELL_LIMIT, Layout, Rows, Schema, aggregate};
use flate2::{Compression, write::GzEncoder};
use generated_records::GeneratedRecords;

const RECORDS: usize = 1_000_000;

fn generated_csv(rows: usize) -> Vec<u8> {
    let mut records = GeneratedRecords::new(rows, 1980);
    let mut out = Vec::new();
    records.read_to_end(&mut out).expect("in-memory read");
    assert_eq!(records.bytes, out.len());
    out
}

fn bench(c: &mut Criterion) {
    let schema_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fertility1980/schema.json");
    let schema = Schema::from_path(&schema_path).expect("example schema");
    let domain = schema.domain();
    let d = domain.attributes().len();
    let pairs: Vec<Vec<usize>> = (0..d)
        .flat_map(|i| (i + 1..d).map(move |j| vec![i, j]))
        .collect();
    let full = Layout::full(domain, DEFAULT_CELL_LIMIT).expect("fits");
    let marginals = Layout::marginals(domain, &pairs, DEFAULT_CELL_LIMIT).expect("fits");
    let csv = generated_csv(RECORDS);
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(&csv).expect("in-memory write");
    let gz = enc.finish().expect("in-memory gzip");

    let mut group = c.benchmark_group("aggregate_1e6_records");
    group.sample_size(10);
    group.throughput(Throughput::Elements(RECORDS as u64));
    for (name, input, layout) in [
        ("csv_full", &csv, &full),
        ("gzip_full", &gz, &full),
        ("csv_28_marginals", &csv, &marginals),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                black_box(
                    aggregate(&input[..], "bench", &schema, layout, Rows::Records)
                        .expect("valid records"),
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
