//! SIGINT, SIGTERM and SIGHUP end `dpmm` at once with status 128 + the
//! signal and leave no temporary file: before the charge an interrupted
//! release spends nothing. After the charge, one signal lets the release
//! finish (its answers are kept); a second abandons them, leaving neither
//! the outputs nor their temporaries.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{SEX_AGE_SCHEMA, arg, dpmm, scratch_dir};
use dp_testkit::names_in;

const SPEC: &str = r#"{"domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 4}],
  "queries": [{"marginals": {"k": 1}}, {"marginal": ["sex", "age"]}]}"#;

const SIGNALS: [(&str, i32); 3] = [("INT", 130), ("TERM", 143), ("HUP", 129)];

/// A scratch directory with a schema, a spec, records and a pure ε = 5
/// ledger.
fn setup(test: &str) -> PathBuf {
    let dir = scratch_dir(&format!("interrupt-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("schema.json"), SEX_AGE_SCHEMA).unwrap();
    std::fs::write(dir.join("spec.json"), SPEC).unwrap();
    std::fs::write(dir.join("records.csv"), "sex,age\nf,25\nm,41\n").unwrap();
    let ledger = dir.join("ledger.jsonl");
    let init = [
        "ledger",
        "init",
        "--ledger",
        arg(&ledger),
        "--total-epsilon",
    ];
    assert_eq!(dpmm(&[&init[..], &["5"]].concat()).code, 0);
    dir
}

/// `dpmm release` in `dir` reading records from `data`, not waited for.
fn spawn_release(dir: &Path, data: &str, pause: bool) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dpmm"));
    command
        .args(["release", "--data", data, "--epsilon", "1"])
        .args(["--schema", arg(&dir.join("schema.json"))])
        .args(["--workload", arg(&dir.join("spec.json"))])
        .args(["--ledger", arg(&dir.join("ledger.jsonl"))])
        .args(["--out", arg(&dir.join("answers.csv"))])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if pause {
        command.env("DPMM_TEST_PAUSE_BEFORE_RENAME", "1");
    }
    command.spawn().unwrap()
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args(["-s", name, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits (at most a minute: a hang fails the test) for `child` to end;
/// its exit code.
fn exit_code(child: &mut Child) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "dpmm hung");
        std::thread::sleep(Duration::from_millis(5));
    }
}

const INPUTS: [&str; 5] = [
    "ledger.jsonl",
    "ledger.jsonl.head",
    "records.csv",
    "schema.json",
    "spec.json",
];

/// Whether process `pid` holds a `flock` lock (Linux's `/proc/locks`:
/// `N: FLOCK ADVISORY WRITE PID …`); dpmm holds one on the ledger only.
#[cfg(target_os = "linux")]
fn holds_a_lock(pid: u32) -> bool {
    let locks = std::fs::read_to_string("/proc/locks").unwrap();
    let pid = pid.to_string();
    locks.lines().any(|l| {
        let fields: Vec<&str> = l.split_whitespace().collect();
        fields.get(1) == Some(&"FLOCK") && fields.get(4) == Some(&pid.as_str())
    })
}

/// A release waiting for its records on a pipe holds the ledger's lock
/// (it has planned and opened the ledger, and not charged it): signalled
/// there, it exits with 128 + the signal, the ledger unchanged and
/// unlocked, nothing written.
#[cfg(target_os = "linux")]
#[test]
fn a_release_interrupted_before_its_charge_spends_nothing() {
    let dir = setup("before-charge");
    let ledger = dir.join("ledger.jsonl");
    let before = std::fs::read(&ledger).unwrap();
    for (name, code) in SIGNALS {
        let mut child = spawn_release(&dir, "/dev/stdin", false);
        // Wait until it holds the ledger's lock (without taking it, which
        // would make dpmm's own attempt fail).
        let start = Instant::now();
        while !holds_a_lock(child.id()) {
            assert!(child.try_wait().unwrap().is_none(), "dpmm ended early");
            assert!(start.elapsed() < Duration::from_secs(60), "never locked");
            std::thread::sleep(Duration::from_millis(5));
        }
        signal(&child, name);
        assert_eq!(exit_code(&mut child), Some(code), "SIG{name}");
        assert_eq!(std::fs::read(&ledger).unwrap(), before, "SIG{name}");
        assert_eq!(names_in(&dir), INPUTS, "SIG{name}");
    }
    let data = dir.join("records.csv");
    let mut child = spawn_release(&dir, arg(&data), false);
    assert_eq!(exit_code(&mut child), Some(0), "the ledger stayed locked");
}

/// `dpmm release` paused (a test hook of debug builds) with its answers
/// and sidecar written to temporaries, not yet renamed: after its charge.
fn paused_release(dir: &Path) -> (Child, BufReader<std::process::ChildStderr>) {
    let data = dir.join("records.csv");
    let mut child = spawn_release(dir, arg(&data), true);
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("paused before the rename") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "no pause");
    }
    let temporaries: Vec<String> = names_in(dir)
        .into_iter()
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert_eq!(temporaries.len(), 2, "{temporaries:?}");
    (child, stderr)
}

/// After its charge a release is not abandoned on one signal: it says so
/// and finishes, its answers written and the charge standing once.
#[test]
fn a_release_signalled_once_after_its_charge_finishes() {
    if !cfg!(debug_assertions) {
        return; // the pause hook exists in debug builds only
    }
    let dir = setup("after-charge");
    let ledger = dir.join("ledger.jsonl");
    for (k, (name, _)) in SIGNALS.into_iter().enumerate() {
        let (mut child, mut stderr) = paused_release(&dir);
        signal(&child, name);
        assert_eq!(exit_code(&mut child), Some(0), "SIG{name}");
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
        assert!(rest.contains("finishing the release"), "SIG{name}: {rest}");
        let answers = std::fs::read_to_string(dir.join("answers.csv")).unwrap();
        assert!(answers.starts_with("query,answer"), "SIG{name}");
        assert!(dir.join("answers.csv.json").exists(), "SIG{name}");
        assert!(
            !names_in(&dir).iter().any(|n| n.contains(".tmp-")),
            "SIG{name}"
        );
        let charges = std::fs::read_to_string(&ledger).unwrap().lines().count() - 1;
        assert_eq!(charges, k + 1, "SIG{name}");
        std::fs::remove_file(dir.join("answers.csv")).unwrap();
        std::fs::remove_file(dir.join("answers.csv.json")).unwrap();
    }
}

/// A second signal abandons the answers: both temporaries are removed, no
/// output is left, the status is 128 + the signal; the charge stands.
#[test]
fn a_release_signalled_twice_after_its_charge_leaves_no_temporary() {
    if !cfg!(debug_assertions) {
        return;
    }
    let dir = setup("before-rename");
    let ledger = dir.join("ledger.jsonl");
    for (k, (name, code)) in SIGNALS.into_iter().enumerate() {
        let (mut child, _stderr) = paused_release(&dir);
        signal(&child, name);
        signal(&child, name);
        assert_eq!(exit_code(&mut child), Some(code), "SIG{name}");
        assert_eq!(names_in(&dir), INPUTS, "SIG{name}");
        let charges = std::fs::read_to_string(&ledger).unwrap().lines().count() - 1;
        assert_eq!(charges, k + 1, "SIG{name}");
    }
}

/// `dpmm plan` likewise leaves no temporary plan file.
#[test]
fn an_interrupted_plan_leaves_no_temporary() {
    if !cfg!(debug_assertions) {
        return;
    }
    let dir = setup("plan");
    let mut child = Command::new(env!("CARGO_BIN_EXE_dpmm"))
        .args(["plan", "--workload", arg(&dir.join("spec.json"))])
        .args(["--privacy", "pure", "--epsilon", "1"])
        .args(["--out", arg(&dir.join("plan.json"))])
        .env("DPMM_TEST_PAUSE_BEFORE_RENAME", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("paused before the rename") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "no pause");
    }
    assert!(
        names_in(&dir)
            .iter()
            .any(|n| n.starts_with(".plan.json.tmp-"))
    );
    signal(&child, "INT");
    assert_eq!(exit_code(&mut child), Some(130));
    assert_eq!(names_in(&dir), INPUTS);
}

/// A release bounding each person's records spills them past its memory
/// share to files that are unlinked as soon as they are open: while it
/// reads, nothing of them has a name under TMPDIR, and a signal leaves
/// nothing behind.
#[cfg(target_os = "linux")]
#[test]
fn an_interrupted_release_leaves_no_spilled_records() {
    use std::io::Write;
    let dir = setup("spill");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dpmm"))
        .args(["release", "--data", "/dev/stdin", "--epsilon", "1"])
        .args(["--schema", arg(&dir.join("schema.json"))])
        .args(["--workload", arg(&dir.join("spec.json"))])
        .args(["--ledger", arg(&dir.join("ledger.jsonl"))])
        .args(["--out", arg(&dir.join("answers.csv"))])
        .args(["--privacy-unit", "person", "--max-records-per-unit", "2"])
        .args(["--max-memory", "1M"])
        .env("TMPDIR", &tmp)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut text = String::from("person,sex,age\n");
    for i in 0..200_000 {
        text.push_str(&format!("{},f,25\n", i % 5000));
    }
    // Written without closing the pipe: dpmm counts and spills, then waits
    // for more.
    stdin.write_all(text.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // Spilled records live in unlinked files the process holds open:
    // wait for them, and see that nothing under TMPDIR has a name.
    let fds = format!("/proc/{}/fd", child.id());
    let spilled = || {
        std::fs::read_dir(&fds).map_or(0, |entries| {
            entries
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|target| {
                    target.starts_with(&tmp) && target.to_string_lossy().ends_with(" (deleted)")
                })
                .count()
        })
    };
    let start = Instant::now();
    while spilled() < 256 {
        assert!(child.try_wait().unwrap().is_none(), "dpmm ended early");
        assert!(start.elapsed() < Duration::from_secs(60), "never spilled");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(names_in(&tmp).is_empty(), "{:?}", names_in(&tmp));
    signal(&child, "INT");
    assert_eq!(exit_code(&mut child), Some(130));
    assert!(names_in(&tmp).is_empty(), "{:?}", names_in(&tmp));
    drop(stdin);
}

/// `dpmm stream` is one pipeline with `release`: signalled once after its
/// charge (paused with its running counts and sidecar in temporaries), it
/// finishes and keeps both; signalled twice, it leaves neither.
#[test]
fn a_stream_signalled_after_its_charge_finishes_or_leaves_nothing() {
    if !cfg!(debug_assertions) {
        return;
    }
    let dir = setup("stream");
    let ledger = dir.join("approx.jsonl");
    let init = dpmm(&[
        "ledger",
        "init",
        "--ledger",
        arg(&ledger),
        "--total-epsilon",
        "5",
        "--total-delta",
        "1e-6",
    ]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    std::fs::write(dir.join("days.csv"), "day,sex,age\n0,f,25\n1,m,41\n").unwrap();
    let inputs = |mut more: Vec<&str>| {
        more.extend(["approx.jsonl", "approx.jsonl.head", "days.csv"]);
        more.extend(INPUTS);
        more.sort_unstable();
        more.into_iter().map(String::from).collect::<Vec<_>>()
    };
    for (k, signals) in [1, 2].into_iter().enumerate() {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dpmm"))
            .args(["stream", "--data", arg(&dir.join("days.csv"))])
            .args(["--time-column", "day", "--steps", "2"])
            .args(["--epsilon", "1", "--delta", "1e-7"])
            .args(["--schema", arg(&dir.join("schema.json"))])
            .args(["--workload", arg(&dir.join("spec.json"))])
            .args(["--ledger", arg(&ledger)])
            .args(["--out", arg(&dir.join("running.csv"))])
            .env("DPMM_TEST_PAUSE_BEFORE_RENAME", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.contains("paused before the rename") {
            line.clear();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "no pause");
        }
        for _ in 0..signals {
            signal(&child, "INT");
        }
        let charges = || std::fs::read_to_string(&ledger).unwrap().lines().count() - 1;
        if signals == 1 {
            assert_eq!(exit_code(&mut child), Some(0));
            let names = names_in(&dir);
            assert_eq!(names, inputs(vec!["running.csv", "running.csv.json"]));
            std::fs::remove_file(dir.join("running.csv")).unwrap();
            std::fs::remove_file(dir.join("running.csv.json")).unwrap();
        } else {
            assert_eq!(exit_code(&mut child), Some(130));
            assert_eq!(names_in(&dir), inputs(Vec::new()));
        }
        assert_eq!(charges(), k + 1, "the charge stands");
    }
}

/// Too few open files for a spill (256 at once) is the operating system's
/// refusal: exit 2 with one line saying what to raise, nothing spent and
/// nothing left under TMPDIR.
#[cfg(target_os = "linux")]
#[test]
fn a_spill_without_enough_open_files_is_refused_before_the_charge() {
    let dir = setup("fd-limit");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut text = String::from("person,sex,age\n");
    for i in 0..200_000 {
        text.push_str(&format!("{},f,25\n", i % 5000));
    }
    std::fs::write(dir.join("people.csv"), text).unwrap();
    let ledger = dir.join("ledger.jsonl");
    let before = std::fs::read(&ledger).unwrap();
    let command = format!(
        "ulimit -n 200 && exec '{}' release --data '{}' --epsilon 1 --schema '{}' --workload '{}' \
         --ledger '{}' --out '{}' --privacy-unit person --max-records-per-unit 2 --max-memory 1M",
        env!("CARGO_BIN_EXE_dpmm"),
        arg(&dir.join("people.csv")),
        arg(&dir.join("schema.json")),
        arg(&dir.join("spec.json")),
        arg(&ledger),
        arg(&dir.join("answers.csv")),
    );
    let out = Command::new("sh")
        .args(["-c", &command])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("ulimit -n"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
    assert!(names_in(&tmp).is_empty(), "{:?}", names_in(&tmp));
}
