//! The exact log-likelihood ratio of a kernel measurement between two
//! neighbouring datasets, under the claimed noise.
//!
//! A measurement is `y = Ã x + z` with `Ã` the quantized strategy the
//! kernel reports ([`MeasuredStrategy`], public) and `z` i.i.d. discrete
//! Laplace (`P[z = kG] ∝ exp(−|kG|/t)`, `t = Δ₁(Ã)/ε`) or discrete
//! Gaussian (`∝ exp(−(kG)²/(2σ²))`, `σ = Δ₂(Ã)/√(2ρ)`) on the grid `G`.
//! The neighbour with one more record in cell `c` shifts the mean by the
//! column `Ã e_c`, which lies on the grid, so the normalizing constants
//! cancel and the privacy loss of an output is, with `u = y − Ã x`,
//!
//! - Laplace: `L(y) = Σᵢ (|uᵢ| − |uᵢ − aᵢ|)/t`, at most `‖a‖₁/t`, which is
//!   `ε` exactly when `c` attains the sensitivity;
//! - Gaussian: `L(y) = Σᵢ aᵢ (uᵢ − aᵢ/2)/σ²`.
//!
//! By Neyman–Pearson the most powerful tests between the two output
//! distributions are thresholds on `L`, so the audit's events are
//! `{L ≥ τ}` and `{L ≤ τ}`.

use dp_core::{Cost, DpError, MeasuredStrategy, Result};
use dp_linalg::{Mat, MatRef};

/// The claimed noise of a measurement, in the answers' units.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Noise {
    Laplace { scale: f64 },
    Gaussian { sigma: f64 },
}

/// The privacy loss of one measurement between `x + e_c` and `x`.
#[derive(Debug, Clone)]
pub struct Likelihood {
    /// `Ã x`, the noiseless answers on the dataset without the record.
    base: Vec<f64>,
    /// `Ã e_c`.
    shift: Vec<f64>,
    noise: Noise,
    cell: usize,
}

impl Likelihood {
    /// For the dense measured strategy `dense` (`p × n`), the counts
    /// `without` of the dataset without the record and the claimed cost:
    /// the record goes in the first cell whose column has the largest L1
    /// (Laplace) or L2 (Gaussian) norm, where the sensitivity is attained.
    pub fn new(dense: MatRef<'_, f64>, without: &[u64], claimed: Cost) -> Result<Self> {
        if dense.ncols() != without.len() || dense.ncols() == 0 {
            return Err(DpError::DimensionMismatch {
                what: format!(
                    "a strategy on {} cells, a histogram of {}",
                    dense.ncols(),
                    without.len()
                ),
            });
        }
        let pure = matches!(claimed, Cost::Epsilon(_));
        let norm = |j: usize| -> f64 {
            let col = dense.col(j);
            if pure {
                col.iter().map(|v| v.abs()).sum()
            } else {
                col.squared_norm_l2().sqrt()
            }
        };
        let mut cell = 0;
        for j in 1..dense.ncols() {
            if norm(j) > norm(cell) {
                cell = j;
            }
        }
        let sensitivity = norm(cell);
        let noise = match claimed {
            Cost::Epsilon(eps) => Noise::Laplace {
                scale: sensitivity / eps,
            },
            Cost::Rho(rho) => Noise::Gaussian {
                sigma: sensitivity / (2.0 * rho).sqrt(),
            },
        };
        let base = (0..dense.nrows())
            .map(|i| {
                (0..dense.ncols())
                    .map(|j| dense[(i, j)] * without[j] as f64)
                    .sum()
            })
            .collect();
        Ok(Self {
            base,
            shift: dense.col(cell).iter().copied().collect(),
            noise,
            cell,
        })
    }

    /// The cell that holds the extra record.
    pub fn cell(&self) -> usize {
        self.cell
    }

    /// `Ã e_c`, the shift of the answers' mean the record causes.
    pub fn shift(&self) -> &[f64] {
        &self.shift
    }

    /// The privacy loss `ln P_with(y) − ln P_without(y)` of the answers `y`.
    pub fn loss(&self, y: &[f64]) -> f64 {
        let terms = y.iter().zip(&self.base).zip(&self.shift);
        match self.noise {
            Noise::Laplace { scale } => {
                terms
                    .map(|((y, b), a)| (y - b).abs() - (y - b - a).abs())
                    .sum::<f64>()
                    / scale
            }
            Noise::Gaussian { sigma } => {
                terms.map(|((y, b), a)| a * (y - b - a / 2.0)).sum::<f64>() / (sigma * sigma)
            }
        }
    }

    /// The largest loss under discrete Laplace noise, `‖a‖₁/t` (the claimed
    /// ε when the cell attains the sensitivity); `None` for the Gaussian,
    /// whose loss is unbounded.
    pub fn largest_loss(&self) -> Option<f64> {
        match self.noise {
            Noise::Laplace { scale } => {
                Some(self.shift.iter().map(|a| a.abs()).sum::<f64>() / scale)
            }
            Noise::Gaussian { .. } => None,
        }
    }
}

/// The measured strategy as one dense `p × n` matrix over a domain of
/// attribute sizes `shape` (row-major, last attribute fastest): each
/// term's rows in Kronecker order over its factors, the attributes off
/// its support summed (factor `[1, …, 1]`). For the small strategies of
/// the audit only.
pub fn dense_measured(measured: &MeasuredStrategy, shape: &[usize]) -> Result<Mat<f64>> {
    let n: usize = shape.iter().product();
    let mut rows = 0;
    for term in &measured.terms {
        let ok = term.factors.len() == term.support.len().max(1)
            && term.support.iter().all(|&a| a < shape.len())
            && term
                .support
                .iter()
                .zip(&term.factors)
                .all(|(&a, f)| f.ncols() == shape[a]);
        if !ok {
            return Err(DpError::DimensionMismatch {
                what: format!("a measured term on {:?} of {shape:?}", term.support),
            });
        }
        rows += term.factors.iter().map(|f| f.nrows()).product::<usize>();
    }
    let mut out = Mat::zeros(rows, n);
    let mut r0 = 0;
    for term in &measured.terms {
        let sizes: Vec<usize> = term.factors.iter().map(|f| f.nrows()).collect();
        let term_rows: usize = sizes.iter().product();
        for r in 0..term_rows {
            let ri = digits(r, &sizes);
            for c in 0..n {
                let ci = digits(c, shape);
                out[(r0 + r, c)] = if term.support.is_empty() {
                    term.factors[0][(0, 0)]
                } else {
                    term.support
                        .iter()
                        .zip(&term.factors)
                        .zip(&ri)
                        .map(|((&a, f), &i)| f[(i, ci[a])])
                        .product()
                };
            }
        }
        r0 += term_rows;
    }
    Ok(out)
}

/// The mixed-radix digits of `index` over `sizes`, last fastest.
fn digits(mut index: usize, sizes: &[usize]) -> Vec<usize> {
    let mut out = vec![0; sizes.len()];
    for (d, &s) in out.iter_mut().zip(sizes).rev() {
        *d = index % s;
        index /= s;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dp_core::LinearStrategy;

    fn ok<T>(r: Result<T>) -> T {
        r.unwrap_or_else(|e| panic!("{e}"))
    }

    /// The log-ratio of the pmfs of independent discrete noise, summed
    /// term by term from the densities (independent of `loss`'s algebra).
    fn log_ratio(y: &[f64], base: &[f64], shift: &[f64], log_pmf: impl Fn(f64) -> f64) -> f64 {
        y.iter()
            .zip(base)
            .zip(shift)
            .map(|((y, b), a)| log_pmf(y - b - a) - log_pmf(y - b))
            .sum()
    }

    #[test]
    fn losses_are_the_log_ratios_of_the_densities() {
        let a = Mat::from_fn(3, 2, |i, j| [[1.0, 0.5], [0.0, 2.0], [1.0, -1.0]][i][j]);
        let x = [4u64, 7];
        let y = [5.25, 13.5, -4.0];
        // Column 1 has the larger L1 (3.5) and L2 (√5.25) norm.
        let l = ok(Likelihood::new(a.as_ref(), &x, Cost::Epsilon(0.7)));
        assert_eq!(l.cell(), 1);
        let base = [4.0 + 3.5, 14.0, -3.0];
        let t = 3.5 / 0.7;
        let want = log_ratio(&y, &base, l.shift(), |z| -z.abs() / t);
        assert!((l.loss(&y) - want).abs() < 1e-12, "{} {want}", l.loss(&y));
        assert_eq!(l.largest_loss(), Some(0.7));
        let g = ok(Likelihood::new(a.as_ref(), &x, Cost::Rho(0.3)));
        let s2 = 5.25 / 0.6;
        let want = log_ratio(&y, &base, g.shift(), |z| -z * z / (2.0 * s2));
        assert!((g.loss(&y) - want).abs() < 1e-12);
        assert_eq!(g.largest_loss(), None);
        // Far in the direction of the shift the Laplace loss is ε exactly.
        let far = [1e6, 1e6, -1e6];
        assert!((l.loss(&far) - 0.7).abs() < 1e-9);
    }

    #[test]
    fn dense_measured_is_the_kroneckered_union() {
        // Two terms on a 2 × 3 domain: a 2-way term and a 1-way term on
        // attribute 1 (attribute 0 summed), densified independently by
        // LinearStrategy::union with explicit ones factors.
        let f0 = Mat::from_fn(2, 2, |i, j| if i == j { 1.0 } else { 0.25 });
        let f1 = Mat::from_fn(2, 3, |i, j| (i * 3 + j) as f64 / 3.0);
        let g1 = Mat::from_fn(3, 3, |i, j| if j <= i { 1.0 } else { 0.0 });
        let ones = Mat::from_fn(1, 2, |_, _| 1.0);
        let terms = [
            dp_core::KronTerm::new(1.0, vec![(0, f0.clone()), (1, f1.clone())]),
            dp_core::KronTerm::new(0.5, vec![(1, g1.clone())]),
        ];
        let marginal = ok(dp_core::MarginalStrategy::new(vec![2, 3], &terms));
        let dense = ok(dense_measured(marginal.measured_strategy(), &[2, 3]));
        let union = ok(LinearStrategy::union(vec![
            (1.0, vec![f0, f1]),
            (0.5, vec![ones, g1]),
        ]))
        .to_dense();
        assert_eq!((dense.nrows(), dense.ncols()), (7, 6));
        for i in 0..7 {
            for j in 0..6 {
                // Factors are quantized to about 2⁻³⁰ of their largest entry.
                let (d, u) = (dense[(i, j)], union[(i, j)]);
                assert!((d - u).abs() < 1e-7, "{i} {j}: {d} {u}");
            }
        }
    }
}
