//! Every registered experiment runs end to end on its reduced grid and
//! writes a CSV with its points, one SVG per plot and a SUMMARY.md with a
//! table; pending experiments say why and refuse to run.

#![allow(clippy::unwrap_used)]

use dp_bench::{RunConfig, registry, run_experiment};

#[test]
fn every_experiment_writes_csv_svg_and_summary() {
    let root = std::env::temp_dir().join(format!("dpmm-experiments-{}", std::process::id()));
    let mut ran = 0;
    for exp in registry() {
        let mut cfg = RunConfig::new(root.clone());
        cfg.smoke = true;
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
        ran += 1;
    }
    assert!(ran >= 2);
    let _ = std::fs::remove_dir_all(&root);
}
