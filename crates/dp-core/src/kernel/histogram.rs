//! The private data, opaque outside the kernel.

use super::strategy::MAX_COUNT;
use crate::{DpError, Result};

/// A dense histogram of counts over a domain of cells: the private data
/// `x`. Callers build it (aggregating their records into counts) and hand
/// it to a [`super::Session`] measurement; nothing outside the kernel can
/// read it back: no getters, no `Clone`, and `Debug` shows only the
/// number of cells.
///
/// ```
/// let h = dp_core::PrivateHistogram::from_counts(vec![3, 1]).unwrap();
/// assert_eq!(h.len(), 2);
/// ```
///
/// The counts cannot be read back:
///
/// ```compile_fail
/// let h = dp_core::PrivateHistogram::from_counts(vec![3, 1]).unwrap();
/// let _ = h.counts();
/// ```
///
/// nor copied:
///
/// ```compile_fail
/// fn needs_clone<T: Clone>() {}
/// needs_clone::<dp_core::PrivateHistogram>();
/// ```
pub struct PrivateHistogram {
    counts: Vec<u64>,
}

impl std::fmt::Debug for PrivateHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateHistogram")
            .field("cells", &self.counts.len())
            .finish_non_exhaustive()
    }
}

impl PrivateHistogram {
    /// From integer counts, each at most [`MAX_COUNT`] (2⁴⁰).
    pub fn from_counts(counts: Vec<u64>) -> Result<Self> {
        if counts.is_empty() {
            return Err(DpError::Empty {
                what: "histogram".into(),
                rows: 0,
                cols: 1,
            });
        }
        if counts.iter().any(|&c| c > MAX_COUNT) {
            // The position and value are not reported: they are private.
            return Err(DpError::InvalidParameter {
                name: "histogram",
                reason: format!("a count exceeds the supported maximum {MAX_COUNT}"),
            });
        }
        Ok(Self { counts })
    }

    /// From counts held as `f64` (each a non-negative integer ≤ 2⁴⁰).
    pub fn from_f64_counts(counts: &[f64]) -> Result<Self> {
        let mut out = Vec::with_capacity(counts.len());
        for &c in counts {
            if !(c.is_finite() && c >= 0.0 && c.fract() == 0.0 && c <= MAX_COUNT as f64) {
                return Err(DpError::InvalidParameter {
                    name: "histogram",
                    reason: format!("counts must be integers in [0, {MAX_COUNT}]"),
                });
            }
            out.push(c as u64);
        }
        Self::from_counts(out)
    }

    /// Number of cells (public: the domain is not private).
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Always false (a histogram has at least one cell).
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    pub(crate) fn counts(&self) -> &[u64] {
        &self.counts
    }
}
