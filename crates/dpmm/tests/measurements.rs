//! The measurement file (`dpmm release --measurements`) and new queries
//! answered from it (`dpmm query`, `dpmm::Measurements`): the release's own
//! workload comes back as released; new queries equal an independent dense
//! least squares on the file's own strategy and values; an interaction not
//! measured is refused by name; the file's header does not depend on the
//! data; a damaged file is refused; a query spends nothing.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{arg, dpmm};
use dpmm::measurements::{AnswerOptions, MEASUREMENTS_KEY};
use dpmm::{Data, Document, Measurements, PrivacyBudget, Release, ledger};
use parquet::file::reader::{FileReader, SerializedFileReader};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fertility1980")
}

fn census() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/fertility1980.csv.gz")
}

/// Three attributes (2 × 3 × 4 = 24 cells): small enough to densify.
const SMALL_SCHEMA: &str = r#"{"domain": [
  {"name": "a", "column": "a", "values": ["x", "y"]},
  {"name": "b", "column": "b", "values": ["p", "q", "r"]},
  {"name": "c", "column": "c", "bins": {"start": 0, "stop": 4, "width": 1}}
]}"#;

const SMALL_DOMAIN: &str =
    r#"[{"name": "a", "size": 2}, {"name": "b", "size": 3}, {"name": "c", "size": 4}]"#;

fn small_spec(queries: &str) -> String {
    format!(r#"{{"domain": {SMALL_DOMAIN}, "queries": {queries}}}"#)
}

/// 300 records over every cell of the small domain, unevenly.
fn small_records(extra: usize) -> String {
    let mut out = String::from("a,b,c\n");
    for i in 0..300 + extra {
        let a = ["x", "y"][(i / 7) % 2];
        let b = ["p", "q", "r"][(i * i) % 3];
        out.push_str(&format!("{a},{b},{}\n", (i * 5 + i / 11) % 4));
    }
    out
}

fn csv(text: String) -> Data {
    Data::Csv {
        reader: Box::new(std::io::Cursor::new(text.into_bytes())),
        name: "records".into(),
        rows: dpmm::Rows::Records,
    }
}

/// A release of `spec` at `budget` from `data`, its measurement file at
/// `dir/name.parquet`, on a fresh ledger.
fn release_with_file(
    dir: &Path,
    name: &str,
    schema: Document,
    spec: Document,
    budget: PrivacyBudget,
    data: Data,
    nonneg: bool,
) -> (dpmm::Answers, PathBuf) {
    let book = dir.join(format!("{name}.ledger.jsonl"));
    common::remove_ledger(&book);
    let total = match budget.delta() {
        None => PrivacyBudget::pure(10.0),
        Some(_) => PrivacyBudget::approx(10.0, 1e-6),
    };
    ledger::create(&book, total.unwrap()).unwrap();
    let file = dir.join(format!("{name}.parquet"));
    let mut release = Release::new(schema, spec, budget, &book);
    release.measurements = Some(file.clone());
    release.nonneg = nonneg;
    (release.run(data).unwrap(), file)
}

fn assert_same(released: &dpmm::Answers, again: &dpmm::Answers) {
    assert_eq!(released.len(), again.len());
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300);
    for (r, q) in released.iter().zip(again.iter()) {
        assert_eq!(r.query, q.query);
        for (x, y) in [
            (r.answer, q.answer),
            (r.std_error, q.std_error),
            (r.ci_low, q.ci_low),
            (r.ci_high, q.ci_high),
        ] {
            assert!(close(x, y), "{}: {x} vs {y}", r.query);
        }
    }
    match (released.nonneg(), again.nonneg()) {
        (Some(a), Some(b)) => assert!(a.iter().zip(b).all(|(x, y)| close(*x, *y))),
        (None, None) => {}
        _ => panic!("one has non-negative tables and the other not"),
    }
}

/// The release's workload answered from its measurement file is the
/// release, to 1e-9 relative: on the census extract's 2-way marginals
/// under (ε, δ) (a residual strategy: orthogonal terms) and pure ε (OPT_M:
/// the residual-basis path), with non-negative tables, and on a mixed spec
/// (an OPT_⊗ union: the dense path).
#[test]
fn the_release_workload_from_its_file_is_the_release() {
    let dir = common::scratch_dir("measurements-same");
    let spec = examples().join("spec.json");
    for (k, budget) in [
        PrivacyBudget::approx(1.0, 1e-9).unwrap(),
        PrivacyBudget::pure(1.0).unwrap(),
    ]
    .into_iter()
    .enumerate()
    {
        let (released, file) = release_with_file(
            &dir,
            &format!("census{k}"),
            examples().join("schema.json").as_path().into(),
            spec.as_path().into(),
            budget,
            Data::Records(census()),
            true,
        );
        let m = Measurements::load(&file).unwrap();
        let options = AnswerOptions {
            nonneg: true,
            max_memory: None,
        };
        let again = m.answer_with(spec.as_path(), &options).unwrap();
        assert_same(&released, &again);
        assert_eq!(again.sidecar()["charged"], 0.0);
        assert_eq!(
            again.sidecar()["intervals"],
            released.sidecar()["intervals"]
        );
    }
    let mixed = small_spec(
        r#"[{"marginals": {"k": 1}}, {"kron": {"b": "identity", "c": "prefix"}}, {"kron": {"c": "allrange"}}]"#,
    );
    let (released, file) = release_with_file(
        &dir,
        "mixed",
        Document::text(SMALL_SCHEMA, "schema"),
        Document::text(mixed.clone(), "spec"),
        PrivacyBudget::pure(2.0).unwrap(),
        csv(small_records(0)),
        false,
    );
    let again = Measurements::load(&file)
        .unwrap()
        .answer(Document::text(mixed, "spec"))
        .unwrap();
    assert_same(&released, &again);
}

/// `⊗` of row-major matrices given as (rows, cols, entries).
fn kron(a: &(usize, usize, Vec<f64>), b: &(usize, usize, Vec<f64>)) -> (usize, usize, Vec<f64>) {
    let (r, c) = (a.0 * b.0, a.1 * b.1);
    let mut out = vec![0.0; r * c];
    for i in 0..a.0 {
        for j in 0..a.1 {
            for k in 0..b.0 {
                for l in 0..b.1 {
                    out[(i * b.0 + k) * c + j * b.1 + l] = a.2[i * a.1 + j] * b.2[k * b.1 + l];
                }
            }
        }
    }
    (r, c, out)
}

/// New queries answered from the file equal an independent dense least
/// squares on the file's own strategy and values: answers `W (AᵀA)⁺ Aᵀ y`
/// and variances `v diag(W (AᵀA)⁺ Wᵀ)`, A and W written out cell by cell.
/// The strategy measured all 2-way marginals (a residual strategy, whose
/// reconstruction works term by term and never forms A).
#[test]
fn new_queries_are_the_dense_least_squares_of_the_file() {
    use dpmm::dp_linalg::{Mat, MatRef, pseudo_inverse};
    let dir = common::scratch_dir("measurements-dense");
    let (_, file) = release_with_file(
        &dir,
        "small",
        Document::text(SMALL_SCHEMA, "schema"),
        Document::text(small_spec(r#"[{"marginals": {"k": 2}}]"#), "spec"),
        PrivacyBudget::approx(1.0, 1e-6).unwrap(),
        csv(small_records(0)),
        false,
    );
    let m = Measurements::load(&file).unwrap();
    let sizes = [2usize, 3, 4];
    let ones = |n: usize| (1, n, vec![1.0; n]);
    // A, one term at a time, ones rows off the support.
    let mut rows: Vec<Vec<f64>> = Vec::new();
    for t in &m.strategy().terms {
        let mut block = (1, 1, vec![1.0]);
        if t.support.is_empty() {
            block.2[0] = t.factors[0][(0, 0)];
        }
        for (attr, &n) in sizes.iter().enumerate() {
            let f = match t.support.iter().position(|&s| s == attr) {
                Some(k) => {
                    let f = &t.factors[k];
                    let entries = (0..f.nrows())
                        .flat_map(|i| (0..f.ncols()).map(move |j| f[(i, j)]))
                        .collect();
                    (f.nrows(), f.ncols(), entries)
                }
                None => ones(n),
            };
            block = kron(&block, &f);
        }
        rows.extend(block.2.chunks(block.1).map(<[f64]>::to_vec));
    }
    let cells = 24;
    let a = Mat::from_fn(rows.len(), cells, |i, j| rows[i][j]);
    let y = m.values();
    assert_eq!(y.len(), rows.len());
    // The new queries: a prefix over c by a, every range over c, b's
    // marginal restricted to {p, q}, the total.
    let spec = small_spec(
        r#"[{"kron": {"a": "identity", "c": "prefix"}}, {"kron": {"c": "allrange"}},
            {"kron": {"b": {"ranges": [[0, 1]]}}}, {"marginal": []}]"#,
    );
    let answers = m.answer(Document::text(spec.clone(), "spec")).unwrap();
    let workload = dpmm::Workload::load(Document::text(spec, "spec")).unwrap();
    let w = workload.structured().dense_matrix().unwrap();
    let ata = Mat::from_fn(cells, cells, |i, j| {
        (0..a.nrows()).map(|r| a[(r, i)] * a[(r, j)]).sum()
    });
    let pinv = pseudo_inverse(MatRef::from(ata.as_ref()), None).unwrap();
    let aty: Vec<f64> = (0..cells)
        .map(|j| (0..a.nrows()).map(|r| a[(r, j)] * y[r]).sum())
        .collect();
    let xhat: Vec<f64> = (0..cells)
        .map(|i| (0..cells).map(|j| pinv[(i, j)] * aty[j]).sum())
        .collect();
    assert_eq!(answers.len(), w.nrows());
    let v = m.noise_variance();
    for (q, got) in answers.iter().enumerate() {
        let want: f64 = (0..cells).map(|j| w[(q, j)] * xhat[j]).sum();
        let var: f64 = (0..cells)
            .map(|i| {
                (0..cells)
                    .map(|j| w[(q, i)] * pinv[(i, j)] * w[(q, j)])
                    .sum::<f64>()
            })
            .sum::<f64>()
            * v;
        assert!(
            (got.answer - want).abs() <= 1e-8 * want.abs().max(1.0),
            "{}",
            got.query
        );
        assert!(
            (got.std_error - var.sqrt()).abs() <= 1e-8 * var.sqrt(),
            "{}: {} vs {}",
            got.query,
            got.std_error,
            var.sqrt()
        );
    }
}

/// What a file can answer is the down-set of the marginals its plan
/// measured, and a query reading any other interaction is refused naming
/// the smallest one: a release of the marginals {age, work} and
/// {morekids} answers age ranges by weeks worked, not morekids by age.
#[test]
fn an_interaction_not_measured_is_refused_by_name() {
    let dir = common::scratch_dir("measurements-refused");
    let domain: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(examples().join("spec.json")).unwrap())
            .unwrap();
    let spec = |queries: &str| {
        let mut s = domain.clone();
        s["queries"] = serde_json::from_str(queries).unwrap();
        Document::text(s.to_string(), "new.json")
    };
    let (_, file) = release_with_file(
        &dir,
        "partial",
        examples().join("schema.json").as_path().into(),
        spec(r#"[{"marginal": ["age", "work"]}, {"marginal": ["morekids"]}]"#),
        PrivacyBudget::approx(1.0, 1e-9).unwrap(),
        Data::Records(census()),
        false,
    );
    let m = Measurements::load(&file).unwrap();
    let mut listed = m.estimable().unwrap();
    listed.sort();
    assert_eq!(listed, [vec!["age", "work"], vec!["morekids"]]);
    let ok = m
        .answer(spec(
            r#"[{"kron": {"age": {"ranges": [[0, 4], [5, 14]]}, "work": "prefix"}},
                {"marginal": ["work"]}, {"marginal": ["morekids"]}, {"marginal": []}]"#,
        ))
        .unwrap();
    assert_eq!(ok.len(), 2 * 53 + 53 + 2 + 1);
    for (queries, missing) in [
        (r#"[{"marginal": ["morekids", "age"]}]"#, "morekids × age"),
        (
            r#"[{"marginal": ["work"]}, {"marginal": ["gender1"]}]"#,
            "gender1",
        ),
        (
            r#"[{"kron": {"age": "prefix", "work": "identity", "afam": "identity"}}]"#,
            "afam",
        ),
    ] {
        let e = m.answer(spec(queries)).err().unwrap().to_string();
        assert!(
            e.contains(&format!("the interaction of {missing} was not measured"))
                && e.contains("measured: ")
                && e.contains("age × work")
                && !e.contains('\n'),
            "{e}"
        );
    }
    // Three attributes none of whose pairs was measured together: the
    // smallest missing interaction is a pair.
    let e = m
        .answer(spec(r#"[{"marginal": ["morekids", "age", "work"]}]"#))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("the interaction of morekids × age was not measured"),
        "{e}"
    );
}

/// The header of two releases on neighbouring data sets (one record
/// apart), each on a fresh ledger, is the same byte for byte, and so are
/// the `term` and `row` columns: the file holds nothing derived from the
/// data but the noisy values.
#[test]
fn the_header_does_not_depend_on_the_data() {
    let dir = common::scratch_dir("measurements-header");
    let spec = small_spec(r#"[{"marginals": {"k": 2}}]"#);
    let mut headers = Vec::new();
    let mut values = Vec::new();
    for extra in [0, 1] {
        let (_, file) = release_with_file(
            &dir,
            &format!("neighbour{extra}"),
            Document::text(SMALL_SCHEMA, "schema"),
            Document::text(spec.clone(), "spec"),
            PrivacyBudget::approx(1.0, 1e-6).unwrap(),
            csv(small_records(extra)),
            false,
        );
        let reader = SerializedFileReader::new(std::fs::File::open(&file).unwrap()).unwrap();
        let kv = reader
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .unwrap();
        assert_eq!(kv.len(), 1);
        assert_eq!(kv[0].key, MEASUREMENTS_KEY);
        let header: serde_json::Value =
            serde_json::from_str(kv[0].value.as_ref().unwrap()).unwrap();
        let keys: Vec<&str> = header
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "domain",
                "format",
                "noise",
                "note",
                "privacy",
                "schema",
                "strategy",
                "version",
                "written_by"
            ]
        );
        headers.push(kv[0].value.clone().unwrap());
        values.push(Measurements::load(&file).unwrap().values().to_vec());
    }
    assert_eq!(headers[0], headers[1]);
    assert_eq!(values[0].len(), values[1].len());
    assert_ne!(values[0], values[1]);
}

/// A file rewritten with its rows out of order, one row short, a value
/// not finite, or without the header, is refused when loaded, in one line.
#[test]
fn a_damaged_file_is_refused() {
    use parquet::basic::Compression;
    use parquet::data_type::{DoubleType, Int32Type, Int64Type};
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;

    let dir = common::scratch_dir("measurements-damaged");
    let (_, file) = release_with_file(
        &dir,
        "good",
        Document::text(SMALL_SCHEMA, "schema"),
        Document::text(small_spec(r#"[{"marginals": {"k": 1}}]"#), "spec"),
        PrivacyBudget::pure(1.0).unwrap(),
        csv(small_records(0)),
        false,
    );
    let m = Measurements::load(&file).unwrap();
    let reader = SerializedFileReader::new(std::fs::File::open(&file).unwrap()).unwrap();
    let header = reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .unwrap()[0]
        .value
        .clone()
        .unwrap();
    let mut index = Vec::new();
    for (t, term) in m.strategy().terms.iter().enumerate() {
        let n: usize = term.factors.iter().map(|f| f.nrows()).product();
        index.extend((0..n).map(|r| (t as i32, r as i64)));
    }
    let write = |path: &Path, header: Option<&str>, index: &[(i32, i64)], values: &[f64]| {
        let schema = Arc::new(
            parse_message_type(
                "message m { REQUIRED INT32 term; REQUIRED INT64 row; REQUIRED DOUBLE value; }",
            )
            .unwrap(),
        );
        let props = WriterProperties::builder()
            .set_compression(Compression::UNCOMPRESSED)
            .set_key_value_metadata(
                header.map(|h| vec![KeyValue::new(MEASUREMENTS_KEY.to_string(), h.to_string())]),
            )
            .build();
        let out = std::fs::File::create(path).unwrap();
        let mut w = SerializedFileWriter::new(out, schema, Arc::new(props)).unwrap();
        let mut g = w.next_row_group().unwrap();
        let (terms, rows): (Vec<i32>, Vec<i64>) = index.iter().copied().unzip();
        let mut c = g.next_column().unwrap().unwrap();
        c.typed::<Int32Type>()
            .write_batch(&terms, None, None)
            .unwrap();
        c.close().unwrap();
        let mut c = g.next_column().unwrap().unwrap();
        c.typed::<Int64Type>()
            .write_batch(&rows, None, None)
            .unwrap();
        c.close().unwrap();
        let mut c = g.next_column().unwrap().unwrap();
        c.typed::<DoubleType>()
            .write_batch(values, None, None)
            .unwrap();
        c.close().unwrap();
        g.close().unwrap();
        w.close().unwrap();
    };
    // The file as written, rewritten by the test: it loads (the writer
    // here is a faithful one).
    let copy = dir.join("copy.parquet");
    write(&copy, Some(&header), &index, m.values());
    assert_eq!(Measurements::load(&copy).unwrap().values(), m.values());
    let mut swapped = index.clone();
    swapped.swap(0, 1);
    let mut nan = m.values().to_vec();
    nan[2] = f64::NAN;
    let n = index.len();
    type Case<'a> = (Option<&'a str>, &'a [(i32, i64)], &'a [f64], &'a str);
    let cases: [Case<'_>; 4] = [
        (Some(&header), &swapped, m.values(), "in order"),
        (
            Some(&header),
            &index[..n - 1],
            &m.values()[..n - 1],
            "values for a strategy of",
        ),
        (Some(&header), &index, &nan, "not finite"),
        (None, &index, m.values(), "not a dpmm measurement file"),
    ];
    for (k, (h, idx, vals, why)) in cases.into_iter().enumerate() {
        let path = dir.join(format!("bad{k}.parquet"));
        write(&path, h, idx, vals);
        let e = Measurements::load(&path).err().unwrap().to_string();
        assert!(e.contains(why) && !e.contains('\n'), "{k}: {e}");
    }
    std::fs::write(dir.join("text.parquet"), "query,answer\n").unwrap();
    let e = Measurements::load(&dir.join("text.parquet"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not a Parquet file"), "{e}");
}

/// `dpmm query`: the release's workload gives the release's CSV, an
/// interaction not measured is refused in one line with status 2 and
/// nothing written, `--list` prints what can be asked, and the ledger is
/// the same byte for byte throughout. `dpmm release --measurements` on
/// the answers' path is refused before the charge.
#[test]
fn the_query_command_spends_nothing() {
    let dir = common::scratch_dir("measurements-cli");
    let book = dir.join("ledger.jsonl");
    let (schema, spec) = (examples().join("schema.json"), examples().join("spec.json"));
    assert_eq!(
        dpmm(&[
            "ledger",
            "init",
            "--ledger",
            arg(&book),
            "--total-epsilon",
            "2",
            "--total-delta",
            "1e-6"
        ])
        .code,
        0
    );
    let (out, file) = (dir.join("answers.csv"), dir.join("m.parquet"));
    let release = |measurements: &Path| {
        dpmm(&[
            "release",
            "--data",
            arg(&census()),
            "--schema",
            arg(&schema),
            "--workload",
            arg(&spec),
            "--epsilon",
            "1",
            "--delta",
            "1e-9",
            "--ledger",
            arg(&book),
            "--out",
            arg(&out),
            "--measurements",
            arg(measurements),
        ])
    };
    let before = std::fs::read(&book).unwrap();
    let refused = release(&out);
    assert!(refused.is_refusal(), "{refused:?}");
    assert_eq!(std::fs::read(&book).unwrap(), before);
    assert_eq!(release(&file).code, 0);
    let charged = std::fs::read(&book).unwrap();
    let again = dir.join("again.csv");
    let page = dir.join("page.html");
    let run = dpmm(&[
        "query",
        "--measurements",
        arg(&file),
        "--workload",
        arg(&spec),
        "--out",
        arg(&again),
        "--report",
        arg(&page),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("nothing was charged"));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h1>dpmm query</h1>") && html.contains("spent nothing"));
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&out).unwrap());
    let three = dir.join("three.json");
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    s["queries"] = serde_json::json!([{"marginal": ["age", "work", "afam"]}]);
    std::fs::write(&three, s.to_string()).unwrap();
    let never = dir.join("never.csv");
    let run = dpmm(&[
        "query",
        "--measurements",
        arg(&file),
        "--workload",
        arg(&three),
        "--out",
        arg(&never),
    ]);
    assert!(run.is_refusal(), "{run:?}");
    assert!(
        run.stderr.contains("age × afam × work was not measured"),
        "{run:?}"
    );
    assert!(!never.exists());
    let list = dpmm(&["query", "--measurements", arg(&file), "--list"]);
    assert_eq!(list.code, 0);
    assert_eq!(list.stdout.lines().count(), 28);
    assert!(list.stdout.lines().any(|l| l == "age × work"));
    assert_eq!(std::fs::read(&book).unwrap(), charged);
}
