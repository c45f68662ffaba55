use super::*;
use crate::{DEFAULT_CELL_LIMIT, MAX_CELL_LIMIT, Policy};
use flate2::{Compression, write::GzEncoder};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::io::Write;

/// sex: f/m (outside → error, missing → drop); age: [0,18), [18,65),
/// [65,120) (outside → drop, not a number and missing → error); region:
/// n/s/e/w (both → error); a malformed row → error.
const SCHEMA: &str = r#"{"malformed": "error", "domain": [
    {"name": "sex", "column": "sex", "values": ["f", "m"], "outside": "error", "missing": "drop"},
    {"name": "age", "column": "age", "bins": [0, 18, 65, 120], "outside": "drop",
     "unparsable": "error", "missing": "error"},
    {"name": "region", "column": "region", "values": ["n", "s", "e", "w"],
     "outside": "error", "missing": "error"}
]}"#;
const SHAPE: [usize; 3] = [2, 3, 4];

fn schema() -> Schema {
    Schema::from_json(SCHEMA).expect("test schema")
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(bytes).expect("in-memory write");
    enc.finish().expect("in-memory gzip")
}

fn full(schema: &Schema) -> Layout {
    Layout::full(schema.domain(), DEFAULT_CELL_LIMIT).expect("small domain")
}

fn all_two_way() -> Vec<Vec<usize>> {
    vec![vec![0, 1], vec![0, 2], vec![1, 2]]
}

fn run(csv: &[u8], layout: &Layout) -> Result<Vec<Vec<u64>>, RecordsError> {
    let counts = aggregate(csv, "test", &schema(), layout, Rows::Records)?;
    Ok(counts.tables().iter().map(|t| t.counts.clone()).collect())
}

/// Brute-force truth: the cell of (sex, age, region) in row-major order,
/// written with explicit comparisons instead of the encoder's search.
fn age_bin(age: f64) -> Option<usize> {
    if (0.0..18.0).contains(&age) {
        Some(0)
    } else if (18.0..65.0).contains(&age) {
        Some(1)
    } else if (65.0..120.0).contains(&age) {
        Some(2)
    } else {
        None
    }
}

/// Sums the full histogram `x` (shape [`SHAPE`]) onto `keep`.
fn marginal_of(x: &[u64], keep: &[usize]) -> Vec<u64> {
    let size: usize = keep.iter().map(|&a| SHAPE[a]).product();
    let mut out = vec![0; size];
    for s in 0..SHAPE[0] {
        for a in 0..SHAPE[1] {
            for r in 0..SHAPE[2] {
                let idx = [s, a, r];
                let cell = keep.iter().fold(0, |acc, &k| acc * SHAPE[k] + idx[k]);
                out[cell] += x[(s * SHAPE[1] + a) * SHAPE[2] + r];
            }
        }
    }
    out
}

#[test]
fn a_hand_made_file_gives_the_hand_counted_histogram() {
    // Extra column, another column order, surrounding spaces, a quoted field.
    let csv = b"id,region,age,sex\n\
        1,n,30,f\n\
        2,s,17,m\n\
        3,n,64.9,f\n\
        4,w,65,m\n\
        5,e,200,f\n\
        6,s,40,\n\
        7,n, 0 ,m\n\
        8,w,119.99,NA\n\
        9,\"n\",18,f\n";
    // Kept: 1 (f,[18,65),n) 2 (m,[0,18),s) 3 (f,[18,65),n) 4 (m,[65,120),w)
    // 7 (m,[0,18),n) 9 (f,[18,65),n); dropped: 5 (age outside), 6 and 8
    // (sex missing).
    let mut expected = vec![0u64; 24];
    let cell = |s: usize, a: usize, r: usize| (s * 3 + a) * 4 + r;
    expected[cell(0, 1, 0)] = 3;
    expected[cell(1, 0, 1)] = 1;
    expected[cell(1, 2, 3)] = 1;
    expected[cell(1, 0, 0)] = 1;
    let schema = schema();
    assert_eq!(run(csv, &full(&schema)), Ok(vec![expected.clone()]));
    assert_eq!(run(&gzip(csv), &full(&schema)), Ok(vec![expected.clone()]));
    let layout = Layout::marginals(schema.domain(), &all_two_way(), 100).expect("fits");
    let want: Vec<Vec<u64>> = all_two_way()
        .iter()
        .map(|k| marginal_of(&expected, k))
        .collect();
    assert_eq!(run(csv, &layout), Ok(want));
    let total = Layout::marginals(schema.domain(), &[vec![]], 1).expect("one cell");
    assert_eq!(run(csv, &total), Ok(vec![vec![6]]));
}

/// Random records with every kind of field, the CSV text, and the
/// brute-force full histogram.
fn random_records(seed: u64, rows: usize) -> (Vec<u8>, Vec<u64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut csv = b"sex,age,region\n".to_vec();
    let mut x = vec![0u64; 24];
    for _ in 0..rows {
        let sex = rng.random_range(0..3usize); // 2 = missing (drop)
        let age = rng.random_range(-10.0..130.0f64); // some outside (drop)
        let region = rng.random_range(0..4usize);
        let sex_text = ["f", "m", ""][sex];
        let region_text = ["n", "s", "e", "w"][region];
        writeln!(csv, "{sex_text},{age},{region_text}").expect("in-memory write");
        if let (true, Some(a)) = (sex < 2, age_bin(age)) {
            x[(sex * 3 + a) * 4 + region] += 1;
        }
    }
    (csv, x)
}

#[test]
fn random_records_match_brute_force_in_every_layout_and_encoding() {
    let schema = schema();
    for seed in 0..4 {
        let (csv, x) = random_records(seed, 2000);
        assert_eq!(run(&csv, &full(&schema)), Ok(vec![x.clone()]));
        assert_eq!(run(&gzip(&csv), &full(&schema)), Ok(vec![x.clone()]));
        let subsets = vec![vec![2], vec![0, 2], vec![0, 1, 2], vec![]];
        let layout = Layout::marginals(schema.domain(), &subsets, 1000).expect("fits");
        let want: Vec<Vec<u64>> = subsets.iter().map(|k| marginal_of(&x, k)).collect();
        assert_eq!(run(&csv, &layout), Ok(want));
    }
}

/// Rows are counted in blocks, table by table on rayon's pool: several
/// full blocks and a partial one count as the records do one by one.
#[test]
fn blocks_of_rows_count_like_single_rows() {
    let schema = schema();
    let (csv, x) = random_records(9, 300_001);
    let subsets = vec![vec![0, 1], vec![1, 2], vec![0, 2], vec![2], vec![]];
    let layout = Layout::marginals(schema.domain(), &subsets, 1000).expect("fits");
    let want: Vec<Vec<u64>> = subsets.iter().map(|k| marginal_of(&x, k)).collect();
    assert_eq!(run(&csv, &layout), Ok(want));
    assert_eq!(run(&csv, &full(&schema)), Ok(vec![x]));
}

/// The private values planted in bad rows: no error may contain them.
const SECRETS: [&str; 3] = ["Zanzibar-77", "987654.25", "Q9X"];

/// No planted value, and no digit at all: the test schema's names have
/// none, so a digit could only be a value, a count or a line number (which
/// tells how many records precede the bad one).
fn assert_secret_free(e: &RecordsError) {
    let text = e.to_string();
    for s in SECRETS {
        assert!(!text.contains(s), "error leaks '{s}': {text}");
    }
    assert!(
        !text.contains(|c: char| c.is_ascii_digit()),
        "a number: {text}"
    );
    assert!(!text.contains('\n'), "one line: {text}");
}

#[test]
fn error_policies_name_the_column_but_never_the_value_or_the_line() {
    let schema = schema();
    let layout = full(&schema);
    let cases: [(&str, RecordsError); 4] = [
        // Region outside its values (policy error).
        (
            "sex,age,region\nf,30,n\nm,20,Zanzibar-77\n",
            RecordsError::OutsideDomain {
                column: "region".into(),
                attribute: "region".into(),
            },
        ),
        // Age missing (policy error) even though sex is missing (drop).
        (
            "sex,age,region\nf,30,n\n,NA,s\n",
            RecordsError::MissingValue {
                column: "age".into(),
                attribute: "age".into(),
            },
        ),
        // Error wins over an earlier drop: age outside (drop), region bad.
        (
            "sex,age,region\nf,987654.25,Q9X\n",
            RecordsError::OutsideDomain {
                column: "region".into(),
                attribute: "region".into(),
            },
        ),
        // A quote may not span lines: the line with the open quote is one
        // malformed row.
        (
            "sex,age,region,note\nf,30,n,\"two\nlines\"\nm,20,Q9X,x\n",
            RecordsError::MalformedRow {
                reason: "an unbalanced or misplaced quote",
            },
        ),
    ];
    for (csv, want) in cases {
        let got = run(csv.as_bytes(), &layout).expect_err(csv);
        assert_eq!(got, want, "{csv}");
        assert_secret_free(&got);
    }
    // The same bad record after 1 or 500 good ones: the same message.
    let after = |good: usize| {
        let mut csv = String::from("sex,age,region\n");
        csv.push_str(&"f,30,n\n".repeat(good));
        csv.push_str("m,20,Zanzibar-77\n");
        run(csv.as_bytes(), &layout)
            .expect_err("outside")
            .to_string()
    };
    assert_eq!(after(1), after(500));
}

#[test]
fn malformed_rows_and_headers_are_refused_without_content() {
    let schema = schema();
    let layout = full(&schema);
    let e = run(b"sex,age,region\nf,30,n,Zanzibar-77\n", &layout).expect_err("extra field");
    assert_eq!(
        e,
        RecordsError::MalformedRow {
            reason: "another number of fields than the header"
        }
    );
    assert_secret_free(&e);
    assert_eq!(
        run(b"sex,age\nf,30\n", &layout),
        Err(RecordsError::MissingColumn {
            column: "region".into(),
            attribute: "region".into()
        })
    );
    assert_eq!(
        run(b"sex,age,region,age\n", &layout),
        Err(RecordsError::DuplicateHeaderColumn("age".into()))
    );
    assert_eq!(
        run(b"sex,,age,region\n", &layout),
        Err(RecordsError::EmptyHeaderColumn(2))
    );
    assert!(matches!(run(b"", &layout), Err(RecordsError::NoHeader(_))));
    // A UTF-8 byte-order mark (spreadsheet exports) is not part of the
    // first column's name; CRLF line ends are line ends.
    let mut one = vec![0u64; 24];
    one[4] = 1; // (f, [18,65), n)
    assert_eq!(
        run("\u{feff}sex,age,region\r\nf,30,n\r\n".as_bytes(), &layout),
        Ok(vec![one])
    );
    // A header and no rows is a valid, empty input.
    assert_eq!(run(b"sex,age,region\n", &layout), Ok(vec![vec![0; 24]]));
    // A corrupt gzip stream is an I/O error, not silently fewer records.
    let mut broken = gzip(b"sex,age,region\nf,30,n\nm,20,s\n");
    let n = broken.len();
    broken.truncate(n - 10);
    assert!(matches!(
        run(&broken, &layout),
        Err(RecordsError::Io { .. })
    ));
}

#[test]
fn layouts_are_checked_before_anything_is_allocated() {
    let schema = schema();
    let domain = schema.domain();
    assert!(matches!(
        Layout::full(domain, 23),
        Err(RecordsError::TooManyCells { .. })
    ));
    assert!(Layout::full(domain, 24).is_ok());
    // A limit past MAX_CELL_LIMIT is lowered to it: 40 binary attributes
    // (2⁴⁰ cells) are refused before any allocation.
    let huge: Vec<String> = (0..40)
        .map(|i| format!(r#"{{"name": "q{i}", "values": ["no", "yes"]}}"#))
        .collect();
    let wide = Schema::from_json(&format!("{{\"domain\": [{}]}}", huge.join(","))).expect("schema");
    assert!(matches!(
        Layout::full(wide.domain(), u64::MAX),
        Err(RecordsError::TooManyCells {
            limit: MAX_CELL_LIMIT,
            ..
        })
    ));
    // 6 + 8 + 12 = 26 cells.
    assert!(Layout::marginals(domain, &all_two_way(), 26).is_ok());
    assert!(matches!(
        Layout::marginals(domain, &all_two_way(), 25),
        Err(RecordsError::TooManyCells { .. })
    ));
    for (bad, index) in [
        (vec![vec![1, 0]], 0),
        (vec![vec![0], vec![0, 0]], 1),
        (vec![vec![3]], 0),
        (vec![vec![0, 2], vec![1], vec![0, 2]], 2),
    ] {
        assert!(matches!(
            Layout::marginals(domain, &bad, 100),
            Err(RecordsError::BadMarginal { index: i, .. }) if i == index
        ));
    }
    let chosen = Layout::choose(domain, &all_two_way(), 24).expect("full fits");
    assert!(chosen.is_full());
    let one_way = vec![vec![0], vec![1], vec![2]];
    let chosen = Layout::choose(domain, &one_way, 23).expect("marginals fit");
    assert!(!chosen.is_full());
    assert_eq!(chosen.tables(), one_way.as_slice());
    assert!(matches!(
        Layout::choose(domain, &all_two_way(), 23),
        Err(RecordsError::TooManyCells { .. })
    ));
    // A layout for another domain is refused.
    let other = Schema::from_json(r#"{"domain": [{"name": "sex", "values": ["f", "m"]}]}"#)
        .expect("schema");
    let wrong = full(&other);
    assert_eq!(
        aggregate(
            &b"sex,age,region\n"[..],
            "t",
            &schema,
            &wrong,
            Rows::Records
        )
        .map(|_| ()),
        Err(RecordsError::LayoutMismatch)
    );
}

/// Groups `csv` by its raw text (what `GROUP BY` in an SQL engine does)
/// into a `sex,age,region,count` table, shuffled column order.
fn group_by(csv: &[u8]) -> Vec<u8> {
    let text = std::str::from_utf8(csv).expect("utf-8");
    let mut groups: HashMap<&str, u64> = HashMap::new();
    for line in text.lines().skip(1) {
        *groups.entry(line).or_default() += 1;
    }
    let mut out = b"count,sex,age,region\n".to_vec();
    let mut keys: Vec<_> = groups.into_iter().collect();
    keys.sort();
    for (row, n) in keys {
        writeln!(out, "{n},{row}").expect("in-memory write");
    }
    out
}

#[test]
fn a_grouped_counts_table_gives_the_same_counts_as_its_records() {
    let schema = schema();
    let layout = Layout::marginals(schema.domain(), &all_two_way(), 100).expect("fits");
    let (csv, _) = random_records(9, 3000);
    let from_records = aggregate(&csv[..], "r", &schema, &layout, Rows::Records).expect("records");
    let table = group_by(&csv);
    let from_table =
        aggregate(&table[..], "t", &schema, &layout, Rows::CountsTable).expect("table");
    assert_eq!(from_records.tables(), from_table.tables());
    let gz = aggregate(&gzip(&table)[..], "t", &schema, &layout, Rows::CountsTable).expect("gzip");
    assert_eq!(from_records.tables(), gz.tables());
}

#[test]
fn counts_tables_refuse_bad_counts_and_headers() {
    let schema = schema();
    let layout = full(&schema);
    let table = |text: &str| aggregate(text.as_bytes(), "t", &schema, &layout, Rows::CountsTable);
    for bad in [
        "-3",
        "2.5",
        "",
        "1e20",
        "987654.25x",
        "NaN",
        "inf",
        "-0.5",
        "true",
    ] {
        let e = table(&format!("sex,age,region,count\nf,30,n,4\nm,20,s,{bad}\n")).expect_err(bad);
        assert_eq!(e, RecordsError::BadCount);
        assert_secret_free(&e);
    }
    // Counts past 2^64 saturate rather than refuse (a refusal would depend
    // on the data).
    let max = u64::MAX;
    let saturated =
        table(&format!("sex,age,region,count\nf,30,n,{max}\nf,31,n,1\n")).expect("saturates");
    assert_eq!(saturated.tables()[0].counts.iter().max(), Some(&u64::MAX));
    assert!(matches!(
        table("sex,age,region\nf,30,n\n"),
        Err(RecordsError::BadHeader(_))
    ));
    assert!(matches!(
        table("sex,age,region,count,count\n"),
        Err(RecordsError::DuplicateHeaderColumn(_))
    ));
    let e = table("sex,age,region,count\nf,30,Zanzibar-77,2\n").expect_err("outside");
    assert_eq!(
        e,
        RecordsError::OutsideDomain {
            column: "region".into(),
            attribute: "region".into()
        }
    );
    assert_secret_free(&e);
    // Whole numbers written as floats (DuckDB's SUM is a DOUBLE) count as
    // the integers they are.
    let as_floats = table("sex,age,region,count\nf,30,n,13.0\nm,17,w,1.3e1\nm,17,w, 7 \n")
        .expect("whole numbers");
    let as_integers = table("sex,age,region,count\nf,30,n,13\nm,17,w,20\n").expect("integers");
    assert_eq!(as_floats.tables(), as_integers.tables());
    // Zero counts and dropped groups are fine.
    let counts = table("sex,age,region,count\nf,30,n,0\n,30,n,5\nm,17,w,2\n").expect("valid");
    let mut want = vec![0u64; 24];
    want[15] = 2; // (m, [0,18), w): (1·3 + 0)·4 + 3
    assert_eq!(counts.tables()[0].counts, want);
}

#[test]
fn debug_output_of_the_counts_shows_no_count() {
    let schema = schema();
    let counts = aggregate(
        &b"sex,age,region,count\nf,30,n,987654321\n"[..],
        "t",
        &schema,
        &full(&schema),
        Rows::CountsTable,
    )
    .expect("valid");
    assert_eq!(counts.tables()[0].counts.iter().sum::<u64>(), 987_654_321);
    let debug = format!("{counts:?}");
    assert!(!debug.contains("987654321"), "{debug}");
    assert!(debug.contains("<private>"));
}

#[test]
fn a_field_that_is_not_a_number_follows_its_own_policy() {
    // age drops values outside its bins; here text that is not a number
    // is an error all the same.
    let strict = schema();
    let csv = b"sex,age,region\nf,30,n\nm,Zanzibar-77,s\n";
    let e =
        aggregate(&csv[..], "t", &strict, &full(&strict), Rows::Records).expect_err("not a number");
    assert_eq!(
        e,
        RecordsError::NotANumber {
            column: "age".into(),
            attribute: "age".into()
        }
    );
    assert_secret_free(&e);
    // With unparsable = drop the row is left out like any dropped row.
    let lenient =
        Schema::from_json(&SCHEMA.replace(r#""unparsable": "error""#, r#""unparsable": "drop""#))
            .expect("schema");
    assert_eq!(lenient.attributes()[1].unparsable, Policy::Drop);
    let counts =
        aggregate(&csv[..], "t", &lenient, &full(&lenient), Rows::Records).expect("dropped");
    let mut want = vec![0u64; 24];
    want[4] = 1; // (f, [18,65), n)
    assert_eq!(counts.tables()[0].counts, want);
}

/// People with many records: a privacy unit keeps at most K records of
/// each, whatever the unit's value looks like (`42`, ` 42.0`); a record
/// without its unit is malformed and dropped.
#[test]
fn a_privacy_unit_is_read_by_value_and_records_without_one_dropped() {
    // The kernel bounds each unit's records (dp-core's tests show it);
    // here: the unit the kernel is handed is the person's value, however
    // it is written, and a record without one is not counted.
    let schema = Schema::from_json(r#"{"domain": [{"name": "sex", "values": ["f", "m"]}]}"#)
        .expect("schema");
    let layout = Layout::full(schema.domain(), 16).expect("layout");
    let mut text = String::from("person,sex\n");
    for i in 0..50 {
        let who = ["42", " 42.0", "4.2e1"][i % 3];
        text.push_str(&format!("{who},{}\n", ["f", "m"][i % 2]));
    }
    for p in 0..20 {
        for _ in 0..1 + p % 2 {
            text.push_str(&format!("p{p},f\n"));
        }
    }
    text.push_str(",m\nNA,f\n");
    let people = People {
        unit: Some(("person".into(), 3)),
        memory: 1 << 20,
        ..People::default()
    };
    let source = Source::Csv {
        reader: Box::new(std::io::Cursor::new(text.clone().into_bytes())),
        name: "people".into(),
    };
    let counts = aggregate_people(source, &schema, &layout, Rows::Records, &people).expect("read");
    assert_eq!(counts.scale(), 3, "one person moves a table by K = 3");
    let kept = counts.kept_rows();
    assert_eq!(
        kept.len(),
        50 + 30,
        "the records without a person are dropped"
    );
    let units: std::collections::BTreeSet<u128> = kept.iter().map(|&(u, _)| u).collect();
    assert_eq!(units.len(), 1 + 20, "42, ' 42.0' and 4.2e1 are one person");
    assert!(kept[..50].iter().all(|&(u, _)| u == kept[0].0));
    // The same without a unit: every record with a sex counts, scale 1.
    let plain =
        aggregate(text.as_bytes(), "people", &schema, &layout, Rows::Records).expect("read");
    assert_eq!(plain.tables()[0].counts.iter().sum::<u64>(), 50 + 30 + 2);
    assert_eq!(plain.scale(), 1);
    // A counts table has no unit.
    let source = Source::Csv {
        reader: Box::new(std::io::Cursor::new(b"sex,count\nf,3\n".to_vec())),
        name: "table".into(),
    };
    assert!(aggregate_people(source, &schema, &layout, Rows::CountsTable, &people).is_err());
}

#[test]
fn weights_are_read_by_value_and_bad_ones_dropped() {
    // The kernel clips and rounds weights (dp-core's tests show it); here:
    // the weight it is handed is the cell's value, and a record whose
    // weight is negative, not finite or not a number is not counted.
    let schema = Schema::from_json(r#"{"domain": [{"name": "sex", "values": ["f", "m"]}]}"#)
        .expect("schema");
    let layout = Layout::full(schema.domain(), 16).expect("layout");
    let text = "w,sex\n2,f\n0.5,f\n 3.25 ,m\n9,m\n-1,f\nNaN,f\nabc,m\n,m\ninf,f\n0,m\n";
    let people = People {
        weight: Some(("w".into(), 8.0)),
        memory: 1 << 20,
        ..People::default()
    };
    let source = Source::Csv {
        reader: Box::new(std::io::Cursor::new(text.as_bytes().to_vec())),
        name: "weights".into(),
    };
    let counts = aggregate_people(source, &schema, &layout, Rows::Records, &people).expect("read");
    let mut weights: Vec<f64> = counts.kept_rows().iter().map(|&(_, w)| w).collect();
    weights.sort_by(f64::total_cmp);
    assert_eq!(weights, [0.0, 0.5, 2.0, 3.25, 9.0]);
    // W = 8 on the grid u = 8 / 2^16: one record moves a table by 2^16 units.
    assert_eq!(counts.scale(), 65536);
}
