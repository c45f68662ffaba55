//! `dpmm schema draft` as a user runs it.

mod common;

use std::io::Write;
use std::path::PathBuf;

use common::dpmm;

fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dpmm-draft-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write input");
    path
}

#[test]
fn draft_prints_the_header_columns_and_the_public_knowledge_note() {
    // The second line is malformed and carries a "private" value: the
    // draft never reads it.
    let path = scratch("records.csv", b"age,sex,zip\n\"unterminated,secret-42\n");
    let out = dpmm(&["schema", "draft", path.to_str().expect("utf-8 path")]);
    assert!(out.code == 0, "{}", out.stderr);
    let stdout = out.stdout;
    let stderr = out.stderr;
    for column in ["\"age\"", "\"sex\"", "\"zip\""] {
        assert!(stdout.contains(column), "{stdout}");
    }
    assert!(stderr.contains("PUBLIC"));
    assert!(!stdout.contains("secret-42") && !stderr.contains("secret-42"));
}

#[test]
fn draft_reads_gzip_and_writes_to_a_file() {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(b"wage,region\n1,2\n").expect("gzip");
    let input = scratch("records.bin", &enc.finish().expect("gzip"));
    let target = input.with_file_name("draft.json");
    let out = dpmm(&[
        "schema",
        "draft",
        input.to_str().expect("utf-8 path"),
        "--out",
        target.to_str().expect("utf-8 path"),
    ]);
    assert!(out.code == 0, "{}", out.stderr);
    let written = std::fs::read_to_string(&target).expect("draft written");
    assert!(written.contains("\"wage\"") && written.contains("\"region\""));
}

#[test]
fn bad_input_is_one_line_and_exit_status_2() {
    let missing = scratch("x", b"").with_file_name("does-not-exist.csv");
    let duplicate = scratch("dup.csv", b"a,b,a\n");
    let empty = scratch("empty.csv", b"");
    for path in [missing, duplicate, empty] {
        let out = dpmm(&["schema", "draft", path.to_str().expect("utf-8 path")]);
        assert_eq!(out.code, 2, "{}", path.display());
        let stderr = out.stderr;
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(out.stdout.is_empty());
    }
    // A usage error (clap) exits with 2 as well.
    assert_eq!(dpmm(&["schema", "draft"]).code, 2);
}
