//! The real histograms of the experiments: a manifest (committed, in
//! `datasets/manifest.json`), a search path, checksum verification and
//! domain merging. The data files are never part of the repository.
//!
//! Search order: an explicit directory (`--datasets DIR`), then
//! `$DP_DATASETS`, then `datasets/` in the project, then
//! `../shared/datasets` beside the project.

use std::path::{Path, PathBuf};

use dp_core::{DpError, Result};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::npy::read_array;

/// The committed manifest, embedded so the checksums travel with the code.
const MANIFEST_JSON: &str = include_str!("../../../datasets/manifest.json");

/// Environment variable naming a dataset directory.
pub const DATASETS_ENV: &str = "DP_DATASETS";

/// One dataset of the manifest.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct DatasetInfo {
    /// Short name (e.g. `SEARCHLOGS`).
    pub name: String,
    /// File name inside the dataset directory.
    pub file: String,
    /// Shape of the stored array.
    pub shape: Vec<usize>,
    /// Stored dtype (`int64` or `float64`).
    pub dtype: String,
    /// Sum of all counts (number of records).
    pub total: u64,
    /// Number of non-zero cells.
    pub nonzero: usize,
    /// sha256 of the file.
    pub sha256: String,
    /// Which dataset of the papers it stands for.
    pub stands_for: String,
}

#[derive(Debug, Deserialize)]
struct Manifest {
    source: String,
    datasets: Vec<DatasetInfo>,
}

fn manifest() -> Result<Manifest> {
    serde_json::from_str(MANIFEST_JSON)
        .map_err(|e| DpError::Io(format!("datasets/manifest.json is malformed: {e}")))
}

/// Every dataset in the manifest.
pub fn catalog() -> Result<Vec<DatasetInfo>> {
    Ok(manifest()?.datasets)
}

/// Where the data come from (provenance line of the manifest).
pub fn provenance() -> Result<String> {
    Ok(manifest()?.source)
}

/// The manifest entry for `name` (case-insensitive; the file name also works).
pub fn info(name: &str) -> Result<DatasetInfo> {
    let all = catalog()?;
    all.iter()
        .find(|d| d.name.eq_ignore_ascii_case(name) || d.file == name)
        .cloned()
        .ok_or_else(|| DpError::InvalidParameter {
            name: "dataset",
            reason: format!(
                "unknown dataset '{name}' (known: {})",
                all.iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

/// The project root (the workspace this crate was built in).
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// The directories searched, in order.
pub fn search_path(explicit: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = explicit {
        dirs.push(dir.to_path_buf());
    }
    if let Some(env) = std::env::var_os(DATASETS_ENV) {
        dirs.push(PathBuf::from(env));
    }
    let root = project_root();
    dirs.push(root.join("datasets"));
    dirs.push(root.join("../shared/datasets"));
    dirs
}

/// Finds the file of dataset `info` along the search path.
pub fn locate(info: &DatasetInfo, explicit: Option<&Path>) -> Result<PathBuf> {
    let dirs = search_path(explicit);
    if let Some(found) = dirs
        .iter()
        .map(|d| d.join(&info.file))
        .find(|p| p.is_file())
    {
        return Ok(found);
    }
    Err(DpError::Io(format!(
        "dataset {} not found: expected the file {} in one of [{}]. It is the DPBench histogram \
         (dpcomp_core/datafiles); put it in one of those directories or point --datasets / ${DATASETS_ENV} at it",
        info.name,
        info.file,
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// A histogram: counts per cell, with the shape of its domain.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Name it was loaded under.
    pub name: String,
    /// Domain shape (one entry per attribute).
    pub shape: Vec<usize>,
    /// Counts in C order.
    pub counts: Vec<f64>,
}

impl Histogram {
    /// Number of records `Σ x`.
    pub fn total(&self) -> f64 {
        self.counts.iter().sum()
    }

    /// Domain size `n = Π shape`.
    pub fn domain_size(&self) -> usize {
        self.counts.len()
    }

    /// Merges consecutive cells (in flattened order) into `n` cells of
    /// equal width: the papers' way of varying the domain size
    /// (`n = 4096 / 2^k`). Totals are kept exactly. `n` must divide the
    /// current domain size.
    pub fn merged(&self, n: usize) -> Result<Histogram> {
        let len = self.counts.len();
        if n == 0 || n > len || !len.is_multiple_of(n) {
            return Err(DpError::InvalidParameter {
                name: "domain size",
                reason: format!(
                    "cannot merge {len} cells into {n}: n must divide {len} (use refined() to grow the domain)"
                ),
            });
        }
        let width = len / n;
        Ok(Histogram {
            name: format!("{}@{n}", self.name),
            shape: vec![n],
            counts: self.counts.chunks(width).map(|c| c.iter().sum()).collect(),
        })
    }

    /// Splits every cell evenly into `factor` cells: the stated way to go
    /// beyond the data's resolution (totals kept; counts become fractional).
    pub fn refined(&self, factor: usize) -> Result<Histogram> {
        if factor == 0 {
            return Err(DpError::InvalidParameter {
                name: "refinement factor",
                reason: "must be >= 1".into(),
            });
        }
        Ok(Histogram {
            name: format!("{}x{factor}", self.name),
            shape: vec![self.counts.len() * factor],
            counts: self
                .counts
                .iter()
                .flat_map(|&c| std::iter::repeat_n(c / factor as f64, factor))
                .collect(),
        })
    }

    /// Domain size `n`, merging when `n` divides the resolution and
    /// refining evenly when `n` is a multiple of it.
    pub fn at_domain_size(&self, n: usize) -> Result<Histogram> {
        let len = self.counts.len();
        if n > len && n.is_multiple_of(len) {
            self.refined(n / len)
        } else {
            self.merged(n)
        }
    }
}

/// Loads dataset `name` from the search path and verifies it against the
/// manifest (sha256, shape, total).
pub fn load(name: &str, explicit_dir: Option<&Path>) -> Result<Histogram> {
    let info = info(name)?;
    let path = locate(&info, explicit_dir)?;
    load_verified(&info, &path)
}

/// Loads `path` and verifies it against `info`.
pub fn load_verified(info: &DatasetInfo, path: &Path) -> Result<Histogram> {
    let bytes = std::fs::read(path)
        .map_err(|e| DpError::Io(format!("{}: cannot read: {e}", path.display())))?;
    // Parse first, so a truncated file is reported as truncated rather than
    // as a checksum mismatch; then verify the checksum of what was read.
    let arr = crate::npy::read_array_from(bytes.as_slice(), path)?;
    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    if hex != info.sha256 {
        return Err(DpError::Io(format!(
            "{}: checksum mismatch for dataset {} (sha256 {hex}, manifest says {}): the file is corrupt or a different version; \
             replace it with the DPBench original",
            path.display(),
            info.name,
            info.sha256
        )));
    }
    if arr.shape != info.shape {
        return Err(DpError::Io(format!(
            "{}: shape {:?}, manifest says {:?}",
            path.display(),
            arr.shape,
            info.shape
        )));
    }
    if let Some(bad) = arr.data.iter().find(|v| !v.is_finite() || **v < 0.0) {
        return Err(DpError::Io(format!(
            "{}: invalid count {bad} (counts must be finite and >= 0)",
            path.display()
        )));
    }
    let hist = Histogram {
        name: info.name.clone(),
        shape: arr.shape,
        counts: arr.data,
    };
    let total = hist.total();
    if (total - info.total as f64).abs() > 0.5 {
        return Err(DpError::Io(format!(
            "{}: total {total}, manifest says {}",
            path.display(),
            info.total
        )));
    }
    Ok(hist)
}

/// Loads any `.npy` histogram file without a manifest entry (1-D or n-D,
/// non-negative finite counts).
pub fn load_file(path: &Path) -> Result<Histogram> {
    let arr = read_array(path)?;
    if arr.data.is_empty() {
        return Err(DpError::Empty {
            what: path.display().to_string(),
            rows: 0,
            cols: 0,
        });
    }
    if let Some(bad) = arr.data.iter().find(|v| !v.is_finite() || **v < 0.0) {
        return Err(DpError::Io(format!(
            "{}: invalid count {bad} (counts must be finite and >= 0)",
            path.display()
        )));
    }
    Ok(Histogram {
        name: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        shape: arr.shape,
        counts: arr.data,
    })
}
