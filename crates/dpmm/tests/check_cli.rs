//! `dpmm check` as a curator runs it, and the header a schema pins: the
//! check names what the schema drops and spends nothing; a file whose
//! header is not the pinned one is refused before the charge.

mod common;

use std::path::Path;

use common::{arg, dpmm, scratch_dir};

/// Every policy left to its default (drop), the header pinned.
const PINNED: &str = r#"{"columns": ["id", "sex", "age", "region"], "domain": [
  {"name": "sex", "values": ["f", "m"]},
  {"name": "age", "bins": {"start": 20, "stop": 60, "width": 10}},
  {"name": "region", "values": ["n", "s", "e", "w"]}
]}"#;

const SPEC: &str = r#"{"domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 4},
  {"name": "region", "size": 4}], "queries": [{"marginals": {"k": 2}}]}"#;

fn records(header: &str) -> String {
    let mut s = format!("{header}\n");
    for i in 0..400 {
        let sex = ["f", "m"][i % 2];
        let region = ["n", "s", "e", "w"][i % 4];
        s.push_str(&format!("{i},{sex},{},{region}\n", 20 + (i * 7) % 40));
    }
    s
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{name}: {e}"));
    arg(&path).to_string()
}

#[test]
fn the_check_names_what_the_schema_drops_and_spends_nothing() {
    let dir = scratch_dir("check-names");
    let schema = write(&dir, "schema.json", PINNED);
    let mut text = records("id,sex,age,region");
    text.push_str("401,z,30,n\n402,f,NaN,s\n403,f,25\n404,z,31,w\n");
    let data = write(&dir, "records.csv", &text);
    let before: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.count())
        .into_iter()
        .collect();
    let run = dpmm(&["check", "--data", &data, "--schema", &schema]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("dpmm check — NOT PRIVATE"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("404 rows read"), "{}", run.stdout);
    assert!(
        run.stdout.contains("keeps 400 records and drops 4"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("attribute 'sex'"));
    assert!(run.stdout.contains("\"z\" ×2"), "{}", run.stdout);
    assert!(run.stdout.contains("\"NaN\" ×1"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("another number of fields than the header: 1")
    );
    let after: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.count())
        .into_iter()
        .collect();
    assert_eq!(before, after, "the check writes nothing");
    // As JSON, the same figures.
    let run = dpmm(&["check", "--data", &data, "--schema", &schema, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(report["kept_records"], 400);
    assert_eq!(report["attributes"][0]["outside"]["rows"], 2);
    assert_eq!(
        report["attributes"][0]["outside"]["values"][0]["value"],
        "\"z\""
    );
    assert!(
        report["notice"]
            .as_str()
            .is_some_and(|n| n.contains("NOT PRIVATE"))
    );
    // A workload on another domain, a missing column: one-line refusals.
    let other = write(
        &dir,
        "other.json",
        r#"{"domain": [{"name": "x", "size": 2}], "queries": [{"kron": {}}]}"#,
    );
    let run = dpmm(&[
        "check",
        "--data",
        &data,
        "--schema",
        &schema,
        "--workload",
        &other,
    ]);
    assert!(run.is_refusal(), "{run:?}");
    let missing = write(&dir, "missing.csv", "id,sex,age\n1,f,30\n");
    let run = dpmm(&["check", "--data", &missing, "--schema", &schema]);
    assert!(run.is_refusal(), "{run:?}");
}

#[test]
fn a_stream_check_shows_the_times_outside_the_horizon() {
    let dir = scratch_dir("check-times");
    let schema = write(
        &dir,
        "schema.json",
        r#"{"domain": [{"name": "sex", "values": ["f", "m"]}]}"#,
    );
    let data = write(
        &dir,
        "stream.csv",
        "day,sex\n0,f\n1,m\n2017-01-03,f\n9,f\n9,m\n1.5,f\n",
    );
    let run = dpmm(&[
        "check",
        "--data",
        &data,
        "--schema",
        &schema,
        "--time-column",
        "day",
        "--steps",
        "5",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("not a whole number: 2 rows"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("\"2017-01-03\" ×1"), "{}", run.stdout);
    assert!(
        run.stdout.contains("outside the steps: 2 rows"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("keeps 2 records and drops 4"),
        "{}",
        run.stdout
    );
}

/// With a calendar the same file reads its dates: the numbers are then
/// no times, and a date-time late on the horizon's last local day is in.
#[test]
fn a_stream_check_on_a_calendar_reads_dates_in_the_zone() {
    let dir = scratch_dir("check-calendar");
    let schema = write(
        &dir,
        "schema.json",
        r#"{"domain": [{"name": "sex", "values": ["f", "m"]}]}"#,
    );
    let data = write(
        &dir,
        "stream.csv",
        "day,sex
0,f
2017-01-03,f
2017-01-05T23:30:00-06:00,m
2017-01-06T05:30:00Z,m
         2017-01-06,f
",
    );
    let calendar = [
        "--time-column",
        "day",
        "--steps",
        "5",
        "--step",
        "day",
        "--start",
        "2017-01-01",
        "--timezone",
        "America/Chicago",
    ];
    let run = dpmm(
        &[
            &["check", "--data", &data, "--schema", &schema][..],
            &calendar[..],
        ]
        .concat(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    for line in [
        "days from 2017-01-01 in America/Chicago",
        "not a date or time: 1 row",
        "outside the steps: 1 row",
        "keeps 3 records and drops 2",
    ] {
        assert!(run.stdout.contains(line), "{line}: {}", run.stdout);
    }
    // A calendar that cannot be, and calendar flags without a stream, are
    // refused.
    let bad = [
        &["--timezone", "Mars/Olympus"][..],
        &["--step", "fortnight"][..],
    ];
    for extra in bad {
        let mut args = vec!["check", "--data", &data, "--schema", &schema];
        args.extend([
            "--time-column",
            "day",
            "--steps",
            "5",
            "--start",
            "2017-01-01",
        ]);
        if extra[0] == "--timezone" {
            args.extend(["--step", "day"]);
        }
        args.extend(extra);
        let run = dpmm(&args);
        assert!(run.is_refusal(), "{extra:?}: {run:?}");
    }
    let run = dpmm(&[
        "check",
        "--data",
        &data,
        "--schema",
        &schema,
        "--start",
        "2017-01-01",
    ]);
    assert!(run.is_refusal(), "{run:?}");
}

/// The ledger's bytes, to show a refusal left it alone.
fn bytes(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_default()
}

#[test]
fn a_file_whose_header_is_not_the_pinned_one_is_refused_before_the_charge() {
    let dir = scratch_dir("check-pinned");
    let schema = write(&dir, "schema.json", PINNED);
    let spec = write(&dir, "spec.json", SPEC);
    let ledger = arg(&dir.join("ledger.jsonl")).to_string();
    let init = dpmm(&[
        "ledger",
        "init",
        "--ledger",
        &ledger,
        "--total-epsilon",
        "100",
    ]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    let release = |data: &str, out: &str| {
        dpmm(&[
            "release",
            "--data",
            data,
            "--schema",
            &schema,
            "--workload",
            &spec,
            "--epsilon",
            "50",
            "--ledger",
            &ledger,
            "--out",
            out,
        ])
    };
    let honest = write(&dir, "records.csv", &records("id,sex,age,region"));
    let out = arg(&dir.join("answers.csv")).to_string();
    let run = release(&honest, &out);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The release says, without looking at the data, where to see drops.
    assert!(run.stderr.contains("dpmm check"), "{}", run.stderr);
    let before = bytes(&ledger);
    // A permuted header line inserted before the real one: it would become
    // the header and swap sex and region for every record.
    let attacked = format!("id,region,age,sex\n{}", records("id,sex,age,region"));
    let attacked = write(&dir, "attacked.csv", &attacked);
    let out2 = arg(&dir.join("attacked_answers.csv")).to_string();
    let run = release(&attacked, &out2);
    assert!(run.is_refusal(), "{run:?}");
    assert!(run.stderr.contains("columns"), "{}", run.stderr);
    assert_eq!(bytes(&ledger), before, "nothing spent");
    assert!(!Path::new(&out2).exists());
    // The same for a file with another header altogether, and for the check.
    let other = write(&dir, "other.csv", &records("id,sex,age,region,extra"));
    assert!(release(&other, &out2).is_refusal());
    assert!(dpmm(&["check", "--data", &attacked, "--schema", &schema]).is_refusal());
    assert_eq!(bytes(&ledger), before);
}

#[test]
fn whole_counts_written_as_floats_are_counts() {
    let dir = scratch_dir("check-float-counts");
    let schema = write(&dir, "schema.json", PINNED);
    let ints = write(
        &dir,
        "ints.csv",
        "sex,age,region,count\nf,25,n,13\nm,35,s,7\n",
    );
    let floats = write(
        &dir,
        "floats.csv",
        "sex,age,region,count\nf,25,n,13.0\nm,35,s,7.0\nf,45,e,2.5\n",
    );
    let check = |path: &str| {
        let run = dpmm(&["check", "--counts", path, "--schema", &schema, "--json"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        serde_json::from_str::<serde_json::Value>(&run.stdout).expect("JSON")
    };
    let (a, b) = (check(&ints), check(&floats));
    assert_eq!(a["kept_records"], 20);
    assert_eq!(
        b["kept_records"], 20,
        "13.0 and 7.0 count; 2.5 is malformed"
    );
    assert_eq!(b["malformed"][0]["rows"], 1);
}
