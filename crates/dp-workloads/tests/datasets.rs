//! Real datasets: every file of the manifest loads with the totals its
//! provenance states, merging keeps totals, and missing, truncated and
//! corrupt files each give their own error.
//!
//! When the datasets are not beside the project these tests say so and
//! pass, unless DPMM_REQUIRE_DATASETS=1 (set by .ci/run, where they are
//! always present).

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

use std::path::PathBuf;

use dp_workloads::datasets::{self, DatasetInfo};

fn shared_dir() -> Option<PathBuf> {
    let info = datasets::info("SEARCHLOGS").unwrap();
    match datasets::locate(&info, None) {
        Ok(p) => p.parent().map(|d| d.to_path_buf()),
        Err(e) => {
            if std::env::var("DPMM_REQUIRE_DATASETS").as_deref() == Ok("1") {
                panic!("datasets required but missing: {e}");
            }
            eprintln!("SKIPPED: {e}");
            None
        }
    }
}

/// Totals and shapes as the datasets' publishers state them, written out
/// here independently of the manifest.
const README_TOTALS: [(&str, u64, &[usize]); 8] = [
    ("SEARCHLOGS", 335_889, &[4096]),
    ("NETTRACE", 25_714, &[4096]),
    ("ADULTFRANK", 17_665, &[4096]),
    ("HEPTH", 347_414, &[4096]),
    ("INCOME", 20_787_122, &[4096]),
    ("MEDCOST", 9_415, &[4096]),
    ("PATENT", 27_948_226, &[4096]),
    ("ADULT2D", 32_561, &[256, 256]),
];

#[test]
fn every_dataset_loads_with_its_total_and_merges_exactly() {
    let Some(dir) = shared_dir() else { return };
    assert_eq!(datasets::catalog().unwrap().len(), README_TOTALS.len());
    for (name, total, shape) in README_TOTALS {
        let h = datasets::load(name, Some(&dir)).unwrap();
        assert_eq!(h.shape, shape, "{name}");
        assert_eq!(h.total(), total as f64, "{name}");
        let info = datasets::info(name).unwrap();
        let nonzero = h.counts.iter().filter(|&&c| c != 0.0).count();
        assert_eq!(nonzero, info.nonzero, "{name}");
        for k in 0..=12 {
            let n = h.domain_size() >> k;
            if n == 0 {
                continue;
            }
            let merged = h.merged(n).unwrap();
            assert_eq!(merged.domain_size(), n);
            assert_eq!(merged.total(), total as f64, "{name} at n = {n}");
        }
        let refined = h.at_domain_size(h.domain_size() * 2).unwrap();
        assert!((refined.total() - total as f64).abs() < 1e-6 * total as f64);
        assert!(h.merged(3).is_err());
    }
    assert!(datasets::info("NOPE").is_err());
}

fn copy_to_tmp(info: &DatasetInfo, dir: &std::path::Path, tag: &str) -> PathBuf {
    let tmp = std::env::temp_dir().join(format!("dpmm-ds-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::copy(dir.join(&info.file), tmp.join(&info.file)).unwrap();
    tmp
}

#[test]
fn missing_truncated_and_corrupt_files_have_distinct_errors() {
    // Missing: a directory without the file (and an env override that
    // points nowhere useful does not matter: the error lists every place).
    let empty = std::env::temp_dir().join(format!("dpmm-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let info = datasets::info("NETTRACE").unwrap();
    let err = datasets::load_verified(&info, &empty.join(&info.file))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot read"), "{err}");
    let Some(dir) = shared_dir() else { return };

    let tmp = copy_to_tmp(&info, &dir, "trunc");
    let path = tmp.join(&info.file);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
    let err = datasets::load_verified(&info, &path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("truncated"), "{err}");

    let tmp = copy_to_tmp(&info, &dir, "corrupt");
    let path = tmp.join(&info.file);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let err = datasets::load_verified(&info, &path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("checksum mismatch"), "{err}");

    // A found-nowhere dataset names the file and every directory tried.
    let fake = DatasetInfo {
        file: "NOT_THERE.npy".into(),
        ..info.clone()
    };
    let err = datasets::locate(&fake, Some(&empty))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("NOT_THERE.npy") && err.contains(&empty.display().to_string()),
        "{err}"
    );
}
