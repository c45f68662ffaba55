//! Streaming workloads: at every step `t < T` one linear query of the
//! stream so far. The three of the literature are lower-triangular
//! Toeplitz matrices, `W[t][s] = w[t − s]` for `s ≤ t`, stored as their
//! coefficient sequence `w` (never `T × T` unless [`Stream::to_dense`] is
//! asked): running sums (`w = 1, 1, …`), sliding windows of width `h`
//! (`w_k = 1` for `k < h`) and exponentially decayed sums
//! (`w_k = λᵏ`).

use dp_core::{DpError, Result};
use dp_linalg::Mat;

/// The largest horizon (2²⁴ steps): a factorization holds a few
/// sequences of the horizon's length (about 55 bytes per step at the
/// peak, so about 1 GB here).
pub const MAX_STEPS: usize = 1 << 24;

/// Horizons up to which dense `T × T` matrices are formed (the dense
/// factorization, the general multi-participation sensitivity,
/// [`Stream::to_dense`]).
pub const DENSE_MAX_STEPS: usize = 4096;

/// Which query is answered at every step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StreamQuery {
    /// The running count: the sum of every step so far (the prefix-sum
    /// matrix, DP-FTRL's workload).
    Prefix,
    /// The sum of the last `width` steps (fewer at the start).
    SlidingWindow {
        /// Steps in the window (at least 1).
        width: usize,
    },
    /// `Σ_{s ≤ t} λ^{t−s} x_s`: a sum whose older steps count less.
    Decayed {
        /// The decay `λ`, in `(0, 1]` (1 is the running sum).
        rate: f64,
    },
}

impl std::str::FromStr for StreamQuery {
    type Err = DpError;

    /// `prefix`, `window:H` or `decayed:R` (the command line's and
    /// Python's spelling; values checked by [`Stream::new`]).
    fn from_str(text: &str) -> Result<Self> {
        let bad = || DpError::InvalidParameter {
            name: "workload",
            reason: format!("{text:?}: prefix, window:H or decayed:R"),
        };
        match text.split_once(':') {
            None if text == "prefix" => Ok(Self::Prefix),
            Some(("window", h)) => Ok(Self::SlidingWindow {
                width: h.trim().parse().map_err(|_| bad())?,
            }),
            Some(("decayed", r)) => Ok(Self::Decayed {
                rate: r.trim().parse().map_err(|_| bad())?,
            }),
            _ => Err(bad()),
        }
    }
}

/// A streaming workload: a query kind over a horizon of `T` steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stream {
    query: StreamQuery,
    steps: usize,
}

impl Stream {
    /// The workload of `query` over `steps` steps; refuses (typed error) a
    /// horizon of 0 or above [`MAX_STEPS`], a window of 0 and a decay
    /// outside `(0, 1]`.
    pub fn new(query: StreamQuery, steps: usize) -> Result<Self> {
        if steps == 0 || steps > MAX_STEPS {
            return Err(DpError::InvalidParameter {
                name: "steps",
                reason: format!("{steps}: a horizon of 1 to {MAX_STEPS} steps"),
            });
        }
        match query {
            StreamQuery::SlidingWindow { width: 0 } => Err(DpError::InvalidParameter {
                name: "window",
                reason: "a window of 0 steps".into(),
            }),
            StreamQuery::Decayed { rate } if !(rate > 0.0 && rate <= 1.0) => {
                Err(DpError::InvalidParameter {
                    name: "decay",
                    reason: format!("{rate}: a decay rate in (0, 1]"),
                })
            }
            _ => Ok(Self { query, steps }),
        }
    }

    /// The running-sum workload over `steps` steps.
    pub fn prefix(steps: usize) -> Result<Self> {
        Self::new(StreamQuery::Prefix, steps)
    }

    /// The query kind.
    pub fn query(&self) -> StreamQuery {
        self.query
    }

    /// The horizon `T`.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// `w`, the first column of the Toeplitz matrix (length `T`).
    pub fn coefficients(&self) -> Vec<f64> {
        let t = self.steps;
        match self.query {
            StreamQuery::Prefix => vec![1.0; t],
            StreamQuery::SlidingWindow { width } => {
                (0..t).map(|k| if k < width { 1.0 } else { 0.0 }).collect()
            }
            StreamQuery::Decayed { rate } => {
                let mut w = Vec::with_capacity(t);
                let mut v = 1.0;
                for _ in 0..t {
                    w.push(v);
                    v *= rate;
                }
                w
            }
        }
    }

    /// The workload as a dense `T × T` matrix (small horizons: tests, the
    /// dense factorization); refused above [`DENSE_MAX_STEPS`].
    pub fn to_dense(&self) -> Result<Mat<f64>> {
        if self.steps > DENSE_MAX_STEPS {
            return Err(DpError::InvalidParameter {
                name: "steps",
                reason: format!(
                    "{}: dense T × T matrices are formed for T ≤ {DENSE_MAX_STEPS}",
                    self.steps
                ),
            });
        }
        let w = self.coefficients();
        Ok(Mat::from_fn(self.steps, self.steps, |t, s| {
            if s <= t { w[t - s] } else { 0.0 }
        }))
    }

    /// The singular values where a closed form is known: the prefix
    /// matrix's are `1 / (2 sin((2k − 1)π / (4T + 2)))`, `k = 1…T` (its
    /// inverse is the first-difference matrix, and `(LLᵀ)⁻¹` the
    /// tridiagonal `2, −1` matrix with a last diagonal entry of 1, whose
    /// eigenvalues are `4 sin²((2k − 1)π / (4T + 2))`), largest first.
    pub fn singular_values(&self) -> Option<Vec<f64>> {
        let prefix = match self.query {
            StreamQuery::Prefix => true,
            StreamQuery::Decayed { rate } => rate == 1.0,
            // A window as wide as the horizon is the running sum.
            StreamQuery::SlidingWindow { width } => width >= self.steps,
        };
        match prefix {
            true => {
                let t = self.steps as f64;
                Some(
                    (1..=self.steps)
                        .map(|k| {
                            let angle =
                                (2.0 * k as f64 - 1.0) * std::f64::consts::PI / (4.0 * t + 2.0);
                            0.5 / angle.sin()
                        })
                        .collect(),
                )
            }
            false => None,
        }
    }

    /// The singular value lower bound (Li & Miklau, ICDT 2013) in the
    /// units of [`crate::Factorization`]'s figures: every factorization
    /// `W = BC` has `sensitivity² · ‖B‖²_F ≥ (Σᵢ σᵢ(W))² / T`, for a
    /// single participation and so for any participation schema that
    /// allows one; and the largest of `T` per-step variances is at least
    /// their mean. `(total, max)`, where the singular values are known.
    pub fn lower_bound(&self) -> Option<(f64, f64)> {
        let sigma = self.singular_values()?;
        // Smallest first: the sum of many small terms, then the large.
        let sum: f64 = sigma.iter().rev().sum();
        // Shaved by a few units of rounding: a bound, never above it.
        let total = sum * sum / self.steps as f64 * (1.0 - 1e-14);
        Some((total, total / self.steps as f64))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#[allow(clippy::needless_range_loop)] // tests index matrices as the math does
mod tests {
    use super::*;
    use dp_linalg::ThinSvd;

    /// The closed-form singular values of the prefix matrix equal a dense
    /// SVD's.
    #[test]
    fn prefix_singular_values_match_a_dense_svd() {
        for t in [1, 2, 7, 64, 301] {
            let stream = Stream::prefix(t).unwrap();
            let closed = stream.singular_values().unwrap();
            let mut dense = ThinSvd::values_only(stream.to_dense().unwrap().as_ref()).unwrap();
            dense.sort_by(|a, b| b.total_cmp(a));
            assert_eq!(closed.len(), dense.len());
            for (a, b) in closed.iter().zip(&dense) {
                assert!((a - b).abs() <= 1e-10 * dense[0], "T = {t}: {a} vs {b}");
            }
        }
    }

    /// The coefficient sequences against their definitions, on the dense
    /// matrix: running sums, windows, decayed sums.
    #[test]
    fn workloads_are_the_sums_they_name() {
        let x: Vec<f64> = (0..20).map(|i| ((i * 7) % 5) as f64 - 1.5).collect();
        let cases: [(StreamQuery, Option<usize>, f64); 3] = [
            (StreamQuery::Prefix, None, 1.0),
            (StreamQuery::SlidingWindow { width: 4 }, Some(4), 1.0),
            (StreamQuery::Decayed { rate: 0.5 }, None, 0.5),
        ];
        for (query, width, rate) in cases {
            let w = Stream::new(query, 20).unwrap().to_dense().unwrap();
            for t in 0..20 {
                let from = width.map_or(0, |h| (t + 1usize).saturating_sub(h));
                let want: f64 = (from..=t).map(|s| rate.powi((t - s) as i32) * x[s]).sum();
                let got: f64 = (0..20).map(|s| w[(t, s)] * x[s]).sum();
                assert!((want - got).abs() < 1e-12, "{query:?} step {t}");
            }
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(Stream::prefix(0).is_err());
        assert!(Stream::prefix(MAX_STEPS + 1).is_err());
        assert!(Stream::new(StreamQuery::SlidingWindow { width: 0 }, 4).is_err());
        for rate in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(Stream::new(StreamQuery::Decayed { rate }, 4).is_err());
        }
    }
}
