//! The stability claim of [`crate::aggregate`]: under `drop` policies,
//! adding or removing any one line of any bytes after the header changes
//! each count table by at most 1 in L1, plain or gzip'ed.

use std::io::Write;

use flate2::{Compression, write::GzEncoder};
use proptest::prelude::*;

use crate::{DEFAULT_CELL_LIMIT, Layout, Policy, RecordsError, Rows, Schema, aggregate};

/// Every policy left to its default (drop).
const SCHEMA: &str = r#"{"domain": [
    {"name": "sex", "values": ["f", "m"]},
    {"name": "age", "bins": [0, 18, 65, 120]},
    {"name": "region", "values": ["n", "s", "e", "w"]}
]}"#;

const HEADER: &[u8] = b"sex,age,region";

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(bytes).expect("in-memory write");
    enc.finish().expect("in-memory gzip")
}

/// The count tables of `input` in the full layout and in two marginal
/// tables, all concatenated per table.
fn tables(schema: &Schema, input: &[u8]) -> Result<Vec<Vec<u64>>, RecordsError> {
    let full = Layout::full(schema.domain(), DEFAULT_CELL_LIMIT)?;
    let marginals = Layout::marginals(schema.domain(), &[vec![0, 2], vec![1]], 100)?;
    let mut out = Vec::new();
    for layout in [full, marginals] {
        let counts = aggregate(input, "test", schema, &layout, Rows::Records)?;
        out.extend(counts.tables().iter().map(|t| t.counts.clone()));
    }
    Ok(out)
}

/// The largest L1 distance between corresponding tables.
fn max_l1(a: &[Vec<u64>], b: &[Vec<u64>]) -> u64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.iter().zip(y).map(|(p, q)| p.abs_diff(*q)).sum())
        .max()
        .unwrap_or(0)
}

/// A file: the header and `lines`, each followed by its terminator.
fn file(lines: &[(Vec<u8>, &[u8])]) -> Vec<u8> {
    let mut out = HEADER.to_vec();
    out.push(b'\n');
    for (line, end) in lines {
        out.extend_from_slice(line);
        out.extend_from_slice(end);
    }
    out
}

/// Lines a hostile or careless writer might add: valid and invalid
/// records, quotes left open, separators, stray CRs, bytes that are not
/// UTF-8, and anything at all (but a line feed).
fn line() -> impl Strategy<Value = Vec<u8>> {
    let record = (
        prop::sample::select(vec!["f", "m", "", "x", "\"f\"", " m "]),
        prop::sample::select(vec!["30", "17", "64.5", "200", "NA", "abc", "\"5\""]),
        prop::sample::select(vec!["n", "s", "w", "q", "\"e\"", "\"n,s\""]),
    )
        .prop_map(|(s, a, r)| format!("{s},{a},{r}").into_bytes());
    let alphabet = prop::sample::select(b"fmns01,\"\r \xff\xc3x".to_vec());
    prop_oneof![
        4 => record,
        1 => Just(b"x,\"p".to_vec()),
        1 => Just(b"f,30,\"n".to_vec()),
        2 => prop::collection::vec(alphabet, 0..14),
        2 => prop::collection::vec(any::<u8>().prop_filter("one line", |&b| b != b'\n'), 0..24),
    ]
}

fn terminator() -> impl Strategy<Value = &'static [u8]> {
    prop::sample::select(vec![&b"\n"[..], b"\r\n"])
}

proptest! {
    /// One line inserted anywhere after the header (the same as one line
    /// removed from the longer file) moves no table by more than 1.
    #[test]
    fn one_added_line_moves_each_table_by_at_most_one(
        lines in prop::collection::vec((line(), terminator()), 0..30),
        unterminated_end in any::<bool>(),
        added in line(),
        added_end in terminator(),
        at in any::<prop::sample::Index>(),
        gzipped in any::<bool>(),
    ) {
        let schema = Schema::from_json(SCHEMA).expect("schema");
        let mut before = lines.clone();
        let at = at.index(before.len() + 1);
        let mut after = before.clone();
        after.insert(at, (added, added_end));
        // A file may end without a line break; appending to it then adds
        // one before the new line, and the new line is the unterminated one.
        if unterminated_end {
            if let Some(last) = before.last_mut() {
                last.1 = b"";
            }
            if let Some(last) = after.last_mut() {
                last.1 = b"";
            }
            if at == before.len() && at > 0 {
                after[at - 1].1 = b"\n";
            }
        }
        let (mut a, mut b) = (file(&before), file(&after));
        if gzipped {
            (a, b) = (gzip(&a), gzip(&b));
        }
        let (ta, tb) = (tables(&schema, &a), tables(&schema, &b));
        let (ta, tb) = (ta.expect("drop never refuses"), tb.expect("drop never refuses"));
        prop_assert!(max_l1(&ta, &tb) <= 1, "{:?} vs {:?}", ta, tb);
    }
}

#[test]
fn the_open_quote_attack_moves_one_count_at_most() {
    // 999 records, then one line opening a quote, then a line holding a
    // quote: a reader letting quotes span lines swallows all between.
    let schema = Schema::from_json(SCHEMA).expect("schema");
    let records = "f,30,n\n".repeat(999);
    let clean = format!("sex,age,region\n{records}m,30,\"s\"\n");
    let attacked = format!("sex,age,region\nx,\"p\n{records}m,30,\"s\"\n");
    let (a, b) = (
        tables(&schema, clean.as_bytes()),
        tables(&schema, attacked.as_bytes()),
    );
    let (a, b) = (a.expect("read"), b.expect("read"));
    assert_eq!(max_l1(&a, &b), 0, "the attack line itself is dropped");
    assert_eq!(a[0].iter().sum::<u64>(), 1000);
    // An unterminated quote at the end of the input is one malformed row:
    // dropped by default, refused under malformed = error.
    let open_end = format!("sex,age,region\n{records}m,30,\"s");
    let dropped = tables(&schema, open_end.as_bytes()).expect("dropped");
    assert_eq!(dropped[0].iter().sum::<u64>(), 999);
    let strict = schema.with_malformed(Policy::Error);
    for text in [&attacked, &open_end] {
        assert_eq!(
            tables(&strict, text.as_bytes()),
            Err(RecordsError::MalformedRow {
                reason: "an unbalanced or misplaced quote"
            })
        );
    }
}

#[test]
fn empty_lines_are_no_records_before_or_after_the_header() {
    let schema = Schema::from_json(SCHEMA).expect("schema");
    let plain = tables(&schema, b"sex,age,region\nf,30,n\nm,5,s\n").expect("read");
    let blank = tables(
        &schema,
        b"\n\r\nsex,age,region\r\n\nf,30,n\n\r\n\nm,5,s\n\n",
    )
    .expect("read");
    assert_eq!(plain, blank);
    // A line of blanks is not empty: it is one (malformed) row.
    let strict = schema.with_malformed(Policy::Error);
    assert!(matches!(
        tables(&strict, b"sex,age,region\n \nf,30,n\n"),
        Err(RecordsError::MalformedRow { .. })
    ));
}

#[test]
fn a_damaged_header_is_refused_whatever_the_rows() {
    let schema = Schema::from_json(SCHEMA).expect("schema");
    for header in [
        &b"sex,age,\"region"[..],
        b"sex,\xff,region",
        b"sex,age",
        b"sex,age,region,sex",
    ] {
        let mut text = header.to_vec();
        text.extend_from_slice(b"\nf,30,n\n");
        assert!(tables(&schema, &text).is_err(), "{text:?}");
    }
    let long = vec![b'a'; crate::MAX_LINE_BYTES + 1];
    assert!(matches!(
        tables(&schema, &long),
        Err(RecordsError::BadHeader(_))
    ));
}
