//! Every registered experiment runs end to end on its reduced grid and
//! writes a CSV with its points, one SVG per plot and a SUMMARY.md with a
//! table; pending experiments say why and refuse to run.

#![allow(clippy::unwrap_used)]

use dp_bench::{RunConfig, Scale, registry, run_experiment};

#[test]
fn every_experiment_writes_csv_svg_and_summary() {
    let root = std::env::temp_dir().join(format!("dpmm-experiments-{}", std::process::id()));
    let mut ran = 0;
    for exp in registry() {
        let mut cfg = RunConfig::new(root.clone());
        cfg.scale = Scale::Smoke;
        cfg.repetitions = Some(3);
        if let Some(why) = exp.pending() {
            assert!(!why.is_empty());
            assert!(run_experiment(exp.as_ref(), &cfg, &mut ()).is_err());
            continue;
        }
        let written = run_experiment(exp.as_ref(), &cfg, &mut ()).unwrap();
        let csv = std::fs::read_to_string(written.dir.join("points.csv")).unwrap();
        let rows = csv.lines().count();
        assert!(rows >= 3, "{}: {rows} CSV lines", exp.name());
        assert!(csv.lines().next().unwrap().contains("mean_squared_error"));
        let svgs: Vec<_> = written
            .files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "svg"))
            .collect();
        assert!(!svgs.is_empty(), "{}: no SVG", exp.name());
        for svg in svgs {
            let text = std::fs::read_to_string(svg).unwrap();
            assert!(
                text.contains("<svg") && text.len() > 1000,
                "{}",
                svg.display()
            );
        }
        let summary = std::fs::read_to_string(written.dir.join("SUMMARY.md")).unwrap();
        assert!(summary.contains("|---"), "{}: no table", exp.name());
        // The vary-n/m/s figures measure every point on each of the
        // paper's datasets (3 in the LRM paper, 4 in the COA paper), one
        // panel each, and say which histogram stands in for Social Network.
        if let Some(panels) = sweep_panels(exp.name()) {
            let mut reader = csv::Reader::from_reader(csv.as_bytes());
            let header = reader.headers().unwrap().clone();
            let col = |name: &str| header.iter().position(|h| h == name).unwrap();
            let (mech, value) = (col("mechanism"), col("value"));
            let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
            let same_point = rows
                .iter()
                .filter(|r| r[mech] == rows[0][mech] && r[value] == rows[0][value])
                .count();
            assert_eq!(same_point, panels, "{}: rows per point", exp.name());
            assert!(summary.contains("HEPTH") && summary.contains("stands in"));
            let svg = std::fs::read_to_string(written.dir.join("error.svg")).unwrap();
            for label in ["(a) Search Log", "(b) Net Trace", "(c) Social Network"] {
                assert!(svg.contains(label), "{}: no panel {label}", exp.name());
            }
            assert_eq!(svg.contains("(d) UCI Adult"), panels == 4, "{}", exp.name());
        }
        ran += 1;
    }
    assert!(ran >= 2);
    let _ = std::fs::remove_dir_all(&root);
}

/// The number of dataset panels of a vary-n/m/s figure, `None` for the
/// other experiments.
fn sweep_panels(name: &str) -> Option<usize> {
    let fig: usize = name.rsplit("fig").next()?.parse().ok()?;
    match (name.starts_with("lrm-"), name.starts_with("coa-")) {
        (true, _) if (4..=9).contains(&fig) => Some(3),
        (_, true) if (2..=10).contains(&fig) => Some(4),
        _ => None,
    }
}

#[test]
fn zero_repetitions_are_refused_before_anything_runs() {
    let root = std::env::temp_dir().join(format!("dpmm-experiments-zero-{}", std::process::id()));
    for exp in registry() {
        let mut cfg = RunConfig::new(root.clone());
        cfg.scale = Scale::Smoke;
        cfg.repetitions = Some(0);
        let err = run_experiment(exp.as_ref(), &cfg, &mut ()).unwrap_err();
        if exp.pending().is_none() {
            assert!(
                err.to_string().contains("repetitions"),
                "{}: {err}",
                exp.name()
            );
        }
    }
    // Nothing was written.
    assert!(!root.exists());
}
