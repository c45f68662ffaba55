//! The optimizer registry as data. Every optimizer file exports one
//! [`Descriptor`] (its name, the papers' label, a one-line description,
//! the privacy models it optimizes for, a builder from typed [`Params`]
//! and the reduced settings the regression gate runs with `--worsen`);
//! [`REGISTRY`] lists them. The command line, its help, the sweeps and the
//! regression gate all read this list, so adding an optimizer is one file
//! plus one line here. An unknown name or label is an error listing the
//! valid ones: nothing falls back silently.

use dp_core::{DpError, Result};

use crate::StrategyOptimizer;

pub use crate::descriptor::{Descriptor, Param, Params};

impl Descriptor {
    /// The reduced variant the regression gate checks it catches.
    pub fn weakened(&self) -> Result<Box<dyn StrategyOptimizer>> {
        self.weakened
            .map(|w| w())
            .ok_or_else(|| DpError::InvalidParameter {
                name: "worsen",
                reason: format!(
                    "'{}' has no weakened variant (those with one: {})",
                    self.name,
                    names_where(|d| d.weakened.is_some()).join(", ")
                ),
            })
    }
}

/// Every optimizer, in the order the command line lists them.
pub const REGISTRY: &[&Descriptor] = &[
    &crate::optimizers::classic::IDENTITY,
    &crate::optimizers::classic::HIERARCHICAL,
    &crate::optimizers::classic::WAVELET,
    &crate::optimizers::classic::SVDB,
    &crate::optimizers::coa::DESCRIPTOR,
    &crate::optimizers::pidentity::DESCRIPTOR,
    &crate::optimizers::am::DESCRIPTOR,
    &crate::optimizers::esm::DESCRIPTOR,
    &crate::optimizers::lrm::DESCRIPTOR,
    &crate::EPSILON_DEFAULT,
];

fn names_where(keep: impl Fn(&Descriptor) -> bool) -> Vec<&'static str> {
    REGISTRY
        .iter()
        .filter(|d| keep(d))
        .map(|d| d.name)
        .collect()
}

/// Every registered name.
pub fn optimizer_names() -> Vec<&'static str> {
    names_where(|_| true)
}

/// The descriptor called `name`; an unknown name is an error listing the
/// registered ones.
pub fn descriptor(name: &str) -> Result<&'static Descriptor> {
    REGISTRY
        .iter()
        .copied()
        .find(|d| d.name == name)
        .ok_or_else(|| DpError::InvalidParameter {
            name: "optimizer",
            reason: format!(
                "unknown optimizer '{name}' (available: {})",
                optimizer_names().join(", ")
            ),
        })
}

/// The descriptor carrying the papers' label `label` (e.g. "HM"); an
/// unknown label is an error listing the registered ones.
pub fn by_label(label: &str) -> Result<&'static Descriptor> {
    REGISTRY
        .iter()
        .copied()
        .find(|d| d.labels.contains(&label))
        .ok_or_else(|| {
            let labels: Vec<&str> = REGISTRY
                .iter()
                .flat_map(|d| d.labels.iter().copied())
                .collect();
            DpError::InvalidParameter {
                name: "label",
                reason: format!("unknown label '{label}' (available: {})", labels.join(", ")),
            }
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::PrivacyModel;

    /// Names and labels are unique; every descriptor builds an optimizer
    /// reporting its own name; lookups of unknown names list the valid ones.
    #[test]
    fn registry_is_consistent() {
        let names = optimizer_names();
        for (i, d) in REGISTRY.iter().enumerate() {
            assert_eq!(names.iter().filter(|n| **n == d.name).count(), 1);
            assert_eq!(d.build(&Params::default()).unwrap().name(), d.name);
            assert_eq!(descriptor(d.name).unwrap().name, d.name);
            assert!(!d.description.is_empty() && !d.privacy.is_empty());
            for l in d.labels {
                assert_eq!(by_label(l).unwrap().name, d.name);
                for other in &REGISTRY[i + 1..] {
                    assert!(!other.labels.contains(l), "{l}");
                }
            }
            if let Some(w) = d.weakened {
                assert_eq!(w().name(), d.name);
            }
        }
        let e = descriptor("nope").unwrap_err().to_string();
        assert!(names.iter().all(|n| e.contains(n)), "{e}");
        let e = by_label("XX").unwrap_err().to_string();
        assert!(e.contains("HM") && e.contains("COA"), "{e}");
        assert!(descriptor("identity").unwrap().weakened().is_err());
    }

    /// Parameters reach the optimizer they belong to and nothing else.
    #[test]
    fn params_are_checked() {
        let h = descriptor("hierarchical").unwrap();
        let w = dp_workloads::workload::AllRange::new(16).unwrap();
        let p = crate::Problem::from_gram(
            dp_workloads::workload::Workload::gram(&w),
            PrivacyModel::Pure,
        )
        .unwrap();
        let four = Params {
            branching: Some(4),
            ..Params::default()
        };
        let s = h.build(&four).unwrap().optimize(&p, &mut ()).unwrap();
        // A complete 4-ary tree over 16 leaves: 16 + 4 + 1 nodes (binary: 31).
        assert_eq!(s.strategy.nrows(), 21);
        let two = h.build(&Params::default()).unwrap();
        assert_eq!(two.optimize(&p, &mut ()).unwrap().strategy.nrows(), 31);
        assert!(descriptor("coa").unwrap().build(&four).is_err());
        assert!(
            h.build(&Params {
                branching: Some(1),
                ..Params::default()
            })
            .is_err()
        );
        let nan = Params {
            max_seconds: Some(f64::NAN),
            ..Params::default()
        };
        assert!(descriptor("lrm").unwrap().build(&nan).is_err());
        let t = Params {
            max_seconds: Some(1.0),
            ..Params::default()
        };
        assert!(descriptor("lrm").unwrap().build(&t).is_ok());
        assert!(h.build(&t).is_err());
        let effort = |e| Params {
            effort: Some(e),
            ..Params::default()
        };
        let default = descriptor("epsilon-default").unwrap();
        assert!(default.build(&effort(1.0)).is_ok());
        assert!(default.build(&effort(3.0)).is_ok());
        for bad in [0.5, f64::NAN, f64::INFINITY] {
            assert!(default.build(&effort(bad)).is_err(), "{bad}");
        }
        assert!(h.build(&effort(2.0)).is_err());
    }

    /// COA repairs the support of its strategy unless told not to: on W =
    /// [[1,1,0],[0,1,1]] (rank 2, touching all 3 cells) the repaired
    /// strategy has one row more (the direction W lacks, appended) and a
    /// slightly larger objective; an optimizer without the option refuses it.
    #[test]
    fn support_repair_is_a_parameter_of_coa_only() {
        let w = dp_linalg::Mat::from_fn(2, 3, |i, j| f64::from(u8::from(j == i || j == i + 1)));
        let gram = dp_linalg::gram(w.as_ref(), dp_linalg::Par::Seq);
        let p = crate::Problem::from_gram(gram, PrivacyModel::Approx).unwrap();
        let coa = descriptor("coa").unwrap();
        let off = Params {
            support_repair: Some(false),
            ..Params::default()
        };
        let plain = coa.build(&off).unwrap().optimize(&p, &mut ()).unwrap();
        let repaired = coa
            .build(&Params::default())
            .unwrap()
            .optimize(&p, &mut ())
            .unwrap();
        assert_eq!(repaired.strategy.nrows(), plain.strategy.nrows() + 1);
        assert!(repaired.report.objective >= plain.report.objective);
        assert!(descriptor("hierarchical").unwrap().build(&off).is_err());
    }
}
