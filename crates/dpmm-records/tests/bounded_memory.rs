//! Memory is bounded by the counts kept, not by the records: streaming
//! millions of generated records (tens of MB of CSV, made on the fly, never
//! held in memory) raises the process's peak resident set by far less
//! than the input's size. Its own test binary, so no other test shares the
//! process's peak.

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

#[test]
fn two_million_records_stream_in_bounded_memory() {
    let schema = Schema::from_path(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/fertility1980/schema.json"),
    )
    .expect("example schema");
    let layout = Layout::full(schema.domain(), DEFAULT_CELL_LIMIT).expect("fits");
    let Some(before) = peak_rss_kib() else {
        return; // not Linux: no /proc to read the peak from
    };
    let mut input = GeneratedRecords::new(2_000_000, 7);
    let counts =
        aggregate(&mut input, "generated", &schema, &layout, Rows::Records).expect("valid");
    assert!(counts.layout().is_full());
    let after = peak_rss_kib().expect("readable again");
    let input_kib = (input.bytes / 1024) as u64;
    assert!(
        input_kib > 40_000,
        "the input is tens of MB ({input_kib} KiB)"
    );
    // The full histogram is 50,880 u64 (400 KiB) plus a 64 KiB row buffer;
    // 8 MiB leaves room for the allocator, not for the records.
    assert!(
        after.saturating_sub(before) < 8 * 1024,
        "peak RSS grew by {} KiB while streaming {input_kib} KiB",
        after - before
    );
}
