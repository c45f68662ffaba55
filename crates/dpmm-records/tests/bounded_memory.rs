//! Memory is bounded by the counts kept and the reading's buffers, not by
//! the records: streaming millions of generated records (over 120 MiB of
//! CSV, made on the fly, never held in memory) raises the process's peak
//! resident set by a few blocks of lines per worker, and four times as
//! many records raise it by no more than those buffers. Its own test binary, so no other
//! test shares the process's peak.

#[path = "support/generated_records.rs"]
mod generated_records;

use dpmm_records::{DEFAULT_CELL_LIMIT, Layout, Rows, Schema, aggregate};
use generated_records::GeneratedRecords;

/// Peak resident set size in KiB (`VmHWM` of /proc/self/status).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Aggregates `rows` generated records, returning how many bytes of CSV
/// they were.
fn stream(rows: usize, schema: &Schema, layout: &Layout) -> usize {
    let mut input = GeneratedRecords::new(rows, 7);
    let counts = aggregate(&mut input, "generated", schema, layout, Rows::Records).expect("valid");
    assert!(counts.layout().is_full());
    input.bytes
}

#[test]
fn millions_of_records_stream_in_memory_flat_in_their_number() {
    let schema = Schema::from_path(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/fertility1980/schema.json"),
    )
    .expect("example schema");
    let layout = Layout::full(schema.domain(), DEFAULT_CELL_LIMIT).expect("fits");
    let Some(before) = peak_rss_kib() else {
        return; // not Linux: no /proc to read the peak from
    };
    // The reading's own buffers: blocks of lines in flight (256 KiB
    // each, a few per worker), each worker's columns and tables.
    let small = stream(1_000_000, &schema, &layout);
    let warm = peak_rss_kib().expect("readable again");
    let large = stream(4_000_000, &schema, &layout);
    let after = peak_rss_kib().expect("readable again");
    assert!(
        large > 120 << 20,
        "the input is over 120 MiB ({large} bytes)"
    );
    assert!(large > 3 * small);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    assert!(
        warm.saturating_sub(before) < 8 * 1024 * (1 + workers),
        "the reading's buffers took {} KiB",
        warm - before
    );
    // Four times the records: the peak moves by less than the few blocks
    // a busier moment may hold in flight, not with the input.
    assert!(
        after.saturating_sub(warm) < 8 * 1024,
        "peak RSS grew by {} KiB from {small} to {large} bytes of records",
        after - warm
    );
}
