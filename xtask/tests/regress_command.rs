//! The regression gate catches a deliberately worsened optimizer and
//! passes the committed baseline's objectives as they are.

#![allow(clippy::unwrap_used)]

use std::process::Command;

fn regress(extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("regress")
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_weakened_coa_fails_the_gate() {
    let o = regress(&["--no-time", "--worsen", "coa"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("coa/approx/AllRange(128): objective"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let regressions = report["regressions"].as_array().unwrap();
    assert!(!regressions.is_empty());
    assert!(
        regressions
            .iter()
            .all(|r| r.as_str().unwrap().starts_with("coa/")),
        "{regressions:?}"
    );
}

#[test]
fn the_committed_objectives_hold_and_unknown_variants_are_refused() {
    let o = regress(&["--no-time"]);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let o = regress(&["--no-time", "--worsen", "wavelet"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("worsen"));
}

/// Every optimizer with a weakened variant is caught, and only its own
/// cases fail (LRM in both its ε-DP and its (ε,δ) form).
#[test]
fn every_weakened_optimizer_fails_the_gate() {
    for name in ["pidentity", "esm", "am", "lrm"] {
        let o = regress(&["--no-time", "--worsen", name]);
        assert_eq!(o.status.code(), Some(2), "{name}");
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let regressions: Vec<&str> = report["regressions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert!(!regressions.is_empty(), "{name}");
        assert!(
            regressions
                .iter()
                .all(|r| r.starts_with(&format!("{name}/"))),
            "{name}: {regressions:?}"
        );
        if name == "lrm" {
            for form in ["lrm/pure/", "lrm/approx/"] {
                assert!(regressions.iter().any(|r| r.starts_with(form)), "{form}");
            }
        }
    }
}
