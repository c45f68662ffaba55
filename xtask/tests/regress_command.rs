//! The regression gate catches a deliberately worsened optimizer and
//! passes the committed baseline's objectives as they are.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Run, xtask};

fn regress(extra: &[&str]) -> Run {
    xtask(&[&["regress", "--no-time"], extra].concat())
}

#[test]
fn the_committed_objectives_hold_and_unknown_variants_are_refused() {
    regress(&[]).ok();
    let r = regress(&["--worsen", "wavelet"]);
    r.refused();
    assert!(r.stderr.contains("worsen"), "{}", r.stderr);
}

/// Every optimizer with a weakened variant is caught, and only its own
/// cases fail (LRM in both its ε-DP and its (ε,δ) form).
#[test]
fn every_weakened_optimizer_fails_the_gate() {
    for name in ["coa", "pidentity", "esm", "am", "lrm"] {
        let r = regress(&["--worsen", name]);
        assert_eq!(r.code, 2, "{name}: {}", r.stderr);
        let report = r.json();
        let regressions: Vec<&str> = report["regressions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert!(!regressions.is_empty(), "{name}");
        let own = format!("{name}/");
        assert!(
            regressions.iter().all(|r| r.starts_with(&own)),
            "{name}: {regressions:?}"
        );
        // The error line names the first regression.
        assert!(r.stderr.contains(regressions[0]), "{}", r.stderr);
        if name == "coa" {
            assert!(r.stderr.contains("coa/approx/AllRange(128): objective"));
        }
        if name == "lrm" {
            for form in ["lrm/pure/", "lrm/approx/"] {
                assert!(regressions.iter().any(|r| r.starts_with(form)), "{form}");
            }
        }
    }
}
