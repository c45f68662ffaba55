//! Every reader of untrusted input in this crate on arbitrary and mutated
//! bytes: CSV and gzip'ed records, counts tables, schemas (JSON) and the
//! header-only draft give a result or a typed error (one line for every
//! records error), never a panic or a hang.
//!
//! The suite runs proptest's default number of cases; the long run is
//! `PROPTEST_CASES=100000 cargo test --release -p dpmm-records --test fuzz`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::io::Write;

use dpmm_records::{
    DEFAULT_CELL_LIMIT, Layout, RecordsError, Rows, Schema, aggregate, draft_from_header,
};
use flate2::{Compression, write::GzEncoder};
use proptest::prelude::*;

const SCHEMA: &str = r#"{"note": "fuzz", "missing_markers": ["", "NA"], "domain": [
    {"name": "sex", "column": "sex", "values": ["f", "m"], "outside": "error", "missing": "drop"},
    {"name": "age", "column": "age", "bins": [0, 18, 65, 120], "outside": "drop", "unparsable": "error"},
    {"name": "work", "column": "work", "bins": {"start": 0, "stop": 53, "width": 1}, "size": 53}
]}"#;

const RECORDS: &[u8] = b"sex,age,work\nf,30,12\nm,\"17\",0\n,NA,52\r\nf,64.5,3\n";
const TABLE: &[u8] = b"work,count,age,sex\n12,3,30,f\n0,1,17,m\n";

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// An error is one line (what the command line prints).
fn one_line<E: std::fmt::Display>(e: &E) -> bool {
    !e.to_string().contains('\n')
}

/// Aggregates `input` under every policy setting and layout kind.
fn read_all_ways(input: &[u8], rows: Rows) -> Vec<Result<(), RecordsError>> {
    let lenient = Schema::from_json(SCHEMA).unwrap();
    let strict = lenient.clone().with_malformed(dpmm_records::Policy::Error);
    let mut out = Vec::new();
    for schema in [&lenient, &strict] {
        let full = Layout::full(schema.domain(), DEFAULT_CELL_LIMIT).unwrap();
        let marginals =
            Layout::marginals(schema.domain(), &[vec![0], vec![1, 2], vec![]], 1000).unwrap();
        for layout in [&full, &marginals] {
            out.push(aggregate(input, "fuzz", schema, layout, rows).map(|_| ()));
        }
    }
    out
}

/// Every reading of `bytes` (gzip'ed when `gz`) as `rows` succeeds or
/// fails with a one-line error.
fn every_reading_ok_or_one_line(bytes: Vec<u8>, gz: bool, rows: Rows) -> Result<(), TestCaseError> {
    let input = if gz { gzip(&bytes) } else { bytes };
    for result in read_all_ways(&input, rows) {
        if let Err(e) = result {
            prop_assert!(one_line(&e), "{}", e);
        }
    }
    Ok(())
}

/// `valid` with bytes overwritten, inserted and removed.
fn mutated(valid: &'static [u8]) -> impl Strategy<Value = Vec<u8>> {
    dp_testkit::byte_edits(valid.to_vec(), b"", 1..8)
}

/// Bytes from an alphabet where CSV and JSON structure is likely.
fn structured_bytes() -> impl Strategy<Value = Vec<u8>> {
    let alphabet =
        prop::sample::select(b"sexagwork,count\"\n\r 0123.-NAfm{}[]:\xff\xef\xbb\xbf".to_vec());
    prop::collection::vec(alphabet, 0..64)
}

fn any_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..256)
}

proptest! {
    #[test]
    fn records_from_any_bytes(bytes in prop_oneof![any_bytes(), structured_bytes(), mutated(RECORDS)], gz in any::<bool>()) {
        every_reading_ok_or_one_line(bytes, gz, Rows::Records)?;
    }

    #[test]
    fn counts_tables_from_any_bytes(bytes in prop_oneof![any_bytes(), structured_bytes(), mutated(TABLE)], gz in any::<bool>()) {
        every_reading_ok_or_one_line(bytes, gz, Rows::CountsTable)?;
    }

    /// A valid gzip stream with bytes flipped or cut: a typed error or a
    /// reading of whatever the decoder accepts.
    #[test]
    fn damaged_gzip_streams(bytes in mutated_gzip()) {
        for result in read_all_ways(&bytes, Rows::Records) {
            if let Err(e) = result {
                prop_assert!(one_line(&e), "{}", e);
            }
        }
    }

    #[test]
    fn schemas_from_any_text(bytes in prop_oneof![any_bytes(), structured_bytes(), mutated(SCHEMA.as_bytes())]) {
        let text = String::from_utf8_lossy(&bytes);
        match Schema::from_json(&text) {
            Ok(schema) => prop_assert!(!schema.attributes().is_empty()),
            // A schema is public text and may quote itself (a name with a
            // line break): the command line prints any error as one line.
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn drafts_from_any_bytes(bytes in prop_oneof![any_bytes(), structured_bytes(), mutated(RECORDS)], gz in any::<bool>()) {
        let input = if gz { gzip(&bytes) } else { bytes };
        match draft_from_header(&input[..], "fuzz") {
            Ok(draft) => prop_assert!(!draft.columns().is_empty()),
            Err(e) => prop_assert!(one_line(&e), "{}", e),
        }
    }
}

fn mutated_gzip() -> impl Strategy<Value = Vec<u8>> {
    let valid = gzip(RECORDS);
    (
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(move |(flips, cut, truncate)| {
            let mut bytes = valid.clone();
            for (at, byte) in flips {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
            if truncate {
                bytes.truncate(cut.index(bytes.len()));
            }
            bytes
        })
}
