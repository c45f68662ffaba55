//! The gate's records: the committed baseline (objectives, which hold on
//! every machine, and time ratios per processor kind) and the per-machine
//! store of ratios recorded on a processor the baseline does not know.
//!
//! Time ratios are kept per processor because they are not portable: the
//! reference is a dense product, whose speed follows the vector units
//! (AVX-512 against AVX2), while the optimizers' small solves and
//! bookkeeping do not. A processor is named by its model and the vector
//! extensions the kernels dispatch on ([`processor_key`]).

use std::path::{Path, PathBuf};

use dp_core::{DpError, Result};
use serde::{Deserialize, Serialize};

/// One case's objective, as committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectiveRecord {
    /// Case name.
    pub name: String,
    /// Objective of the returned strategy.
    pub objective: f64,
}

/// One case's time ratio on one processor kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatioRecord {
    /// Case name.
    pub name: String,
    /// Seconds per run over the reference product's seconds.
    pub time_ratio: f64,
}

/// The time ratios of every case on one processor kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineRatios {
    /// [`processor_key`] of the machine that measured them.
    pub processor: String,
    /// The load averages when they were measured, and anything a reader
    /// of the baseline should know about them.
    pub note: String,
    /// One ratio per timed case.
    pub cases: Vec<RatioRecord>,
}

impl MachineRatios {
    /// The ratio recorded for case `name`.
    pub fn ratio(&self, name: &str) -> Option<f64> {
        self.cases
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.time_ratio)
    }
}

/// The committed baseline (`xtask/regress-baseline.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// What the time ratios are relative to.
    pub reference: String,
    /// Every case's objective: gated on every machine.
    pub objectives: Vec<ObjectiveRecord>,
    /// Time ratios, one entry per processor kind measured.
    pub machines: Vec<MachineRatios>,
}

impl Baseline {
    /// Reads a baseline file.
    pub fn read(path: &Path) -> Result<Self> {
        read_json(path, "baseline")
    }

    /// Writes the baseline as pretty-printed JSON with a final newline.
    pub fn write(&self, path: &Path) -> Result<()> {
        write_json(self, path)
    }

    /// The ratios recorded for `processor`.
    pub fn machine(&self, processor: &str) -> Option<&MachineRatios> {
        self.machines.iter().find(|m| m.processor == processor)
    }

    /// Records `ratios`, replacing those of the same processor.
    pub fn set_machine(&mut self, ratios: MachineRatios) {
        self.machines.retain(|m| m.processor != ratios.processor);
        self.machines.push(ratios);
        self.machines.sort_by(|a, b| a.processor.cmp(&b.processor));
    }
}

/// Ratios recorded on this machine for processors the committed baseline
/// does not know: the gate's "blessed on first run" store, outside the
/// repository so that a fresh clone on the same machine finds it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LocalTimes {
    /// One entry per processor kind measured here.
    pub machines: Vec<MachineRatios>,
}

impl LocalTimes {
    /// Reads the store; an absent file is an empty store.
    pub fn read(path: &Path) -> Result<Self> {
        if !path.exists() {
            return Ok(Self::default());
        }
        read_json(path, "local time ratios")
    }

    /// Writes the store, creating its directory.
    pub fn write(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| DpError::Io(format!("cannot create {}: {e}", dir.display())))?;
        }
        write_json(self, path)
    }

    /// The ratios recorded for `processor`.
    pub fn machine(&self, processor: &str) -> Option<&MachineRatios> {
        self.machines.iter().find(|m| m.processor == processor)
    }
}

/// Where [`LocalTimes`] lives: `DPMM_REGRESS_TIMES` if set, else
/// `$XDG_CACHE_HOME/dpmm/regress-times.json`, else
/// `$HOME/.cache/dpmm/regress-times.json`; `None` when none is set.
pub fn local_times_path() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(path) = var("DPMM_REGRESS_TIMES") {
        return Some(PathBuf::from(path));
    }
    let cache = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("dpmm").join("regress-times.json"))
}

/// The processor kind time ratios are keyed by: the CPU model
/// (`/proc/cpuinfo`'s first `model name`, or the architecture where that
/// is unreadable) and the widest vector extension the dense kernels
/// dispatch on.
pub fn processor_key() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| model_name(&text))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    format!("{model} [{}]", vector_extensions())
}

/// The value of the first `model name` line of a cpuinfo text.
fn model_name(cpuinfo: &str) -> Option<String> {
    let line = cpuinfo.lines().find(|l| l.starts_with("model name"))?;
    let name = line.split_once(':')?.1.split_whitespace();
    Some(name.collect::<Vec<_>>().join(" ")).filter(|n| !n.is_empty())
}

#[cfg(target_arch = "x86_64")]
fn vector_extensions() -> &'static str {
    if std::arch::is_x86_feature_detected!("avx512f") {
        "avx512f"
    } else if std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
    {
        "avx2+fma"
    } else {
        "sse2"
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn vector_extensions() -> &'static str {
    std::env::consts::ARCH
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path, what: &str) -> Result<T> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| DpError::Io(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| DpError::Io(format!("bad {what} file {}: {e}", path.display())))
}

fn write_json<T: Serialize>(value: &T, path: &Path) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| DpError::Io(format!("cannot format {}: {e}", path.display())))?;
    std::fs::write(path, text + "\n")
        .map_err(|e| DpError::Io(format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_name_is_the_first_one_with_spaces_collapsed() {
        let text = "processor\t: 0\nmodel name\t: Intel(R)  Xeon(R) Gold\n\nmodel name\t: other\n";
        assert_eq!(model_name(text).as_deref(), Some("Intel(R) Xeon(R) Gold"));
        assert_eq!(model_name("model name\t:   \n"), None);
        assert_eq!(model_name("flags : avx2\n"), None);
        let key = processor_key();
        assert!(key.ends_with(']') && key.contains(" ["), "{key}");
    }

    #[test]
    fn a_machine_entry_is_replaced_not_duplicated() {
        let entry = |processor: &str, ratio| MachineRatios {
            processor: processor.into(),
            note: String::new(),
            cases: vec![RatioRecord {
                name: "a".into(),
                time_ratio: ratio,
            }],
        };
        let mut baseline = Baseline {
            reference: String::new(),
            objectives: Vec::new(),
            machines: vec![entry("y", 1.0), entry("x", 2.0)],
        };
        baseline.set_machine(entry("y", 3.0));
        let names: Vec<&str> = baseline
            .machines
            .iter()
            .map(|m| m.processor.as_str())
            .collect();
        assert_eq!(names, ["x", "y"]);
        assert_eq!(baseline.machine("y").and_then(|m| m.ratio("a")), Some(3.0));
        assert_eq!(baseline.machine("x").and_then(|m| m.ratio("b")), None);
        assert!(baseline.machine("z").is_none());
    }

    #[test]
    fn files_round_trip_and_bad_files_are_errors() {
        let dir = std::env::temp_dir().join(format!("dp-bench-baseline-{}", std::process::id()));
        let path = dir.join("nested").join("times.json");
        assert_eq!(LocalTimes::read(&path).ok(), Some(LocalTimes::default()));
        let store = LocalTimes {
            machines: vec![MachineRatios {
                processor: "p".into(),
                note: "load 0.1".into(),
                cases: Vec::new(),
            }],
        };
        store.write(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(LocalTimes::read(&path).ok(), Some(store));
        std::fs::write(&path, "{").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(LocalTimes::read(&path), Err(DpError::Io(_))));
        assert!(matches!(
            Baseline::read(&dir.join("absent.json")),
            Err(DpError::Io(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
