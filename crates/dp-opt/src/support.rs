//! Support repair for strategies built from the Gram matrix alone.
//!
//! An optimizer sees `WᵀW`, in which a direction carrying a fraction f of
//! W's norm carries only f² of the Gram's: rows scaled 1e-6 relative to
//! the others vanish below the eigen-solver's rounding (1e-12 relative),
//! yet leave a relative residual of about 1e-6 against W itself, above the
//! mechanism's support tolerance (1e-8). A strategy must answer every
//! query of W (the matrix mechanism's `W A⁺ A = W`), so strategies built
//! from the Gram's numerically nonzero spectrum get the directions they
//! miss, on the cells W touches, appended at a small weight and are
//! rescaled to sensitivity 1 (the append costs at most a factor
//! `(1 + η‖·‖)²` on the objective; a direction W truly lacks costs no
//! error).

use dp_core::Result;
use dp_linalg::{Mat, MatRef};

use crate::dense::row_space_complement;
use crate::{Observer, Optimized, PrivacyModel, Problem, StrategyOptimizer};

/// Relative level (of `AᵀA`'s largest eigenvalue) below which a direction
/// counts as missing from the strategy's row space: singular values under
/// 1e-7 of the largest.
const MISSING_LEVEL: f64 = 1e-14;

/// Weight of the appended rows relative to the strategy's largest
/// column norm.
const APPEND_WEIGHT: f64 = 1e-4;

/// `strategy` with the directions it misses on the cells `gram` touches
/// (nonzero diagonal) appended at weight `APPEND_WEIGHT`, rescaled to
/// sensitivity 1 under `privacy`; and the number of rows appended (0:
/// `strategy` returned unchanged, it already spans those cells).
pub fn complete_on_touched_cells(
    strategy: Mat<f64>,
    gram: MatRef<'_, f64>,
    privacy: PrivacyModel,
) -> Result<(Mat<f64>, usize)> {
    let n = strategy.ncols();
    let touched: Vec<usize> = (0..n).filter(|&j| gram[(j, j)] > 0.0).collect();
    if touched.is_empty() || strategy.nrows() == 0 {
        return Ok((strategy, 0));
    }
    let restricted = Mat::from_fn(strategy.nrows(), touched.len(), |i, c| {
        strategy[(i, touched[c])]
    });
    let missing = row_space_complement(&restricted, MISSING_LEVEL)?;
    let c = missing.ncols();
    if c == 0 {
        return Ok((strategy, 0));
    }
    let sensitivity = |a: MatRef<'_, f64>| match privacy {
        PrivacyModel::Pure => dp_core::sensitivity_l1(a),
        PrivacyModel::Approx => dp_core::sensitivity_l2(a),
    };
    let eta = APPEND_WEIGHT * sensitivity(strategy.as_ref())?;
    let k = strategy.nrows();
    let mut out = Mat::<f64>::zeros(k + c, n);
    for j in 0..n {
        for i in 0..k {
            out[(i, j)] = strategy[(i, j)];
        }
    }
    for (t, &j) in touched.iter().enumerate() {
        for r in 0..c {
            out[(k + r, j)] = eta * missing[(t, r)];
        }
    }
    let s = sensitivity(out.as_ref())?;
    out *= dp_linalg::Scale(1.0 / s);
    Ok((out, c))
}

/// Runs an optimizer and repairs its strategy's support with
/// [`complete_on_touched_cells`] (for optimizers built on the Gram's
/// numerically nonzero spectrum: the SVD bound's and COA's strategies).
/// When rows are appended the report's objective (and certificate gap,
/// unclamped) is recomputed and `support_rows_appended` records how many.
pub struct Completed(pub Box<dyn StrategyOptimizer>);

impl StrategyOptimizer for Completed {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn optimize(&self, problem: &Problem, observer: &mut dyn Observer) -> Result<Optimized> {
        let out = self.0.optimize(problem, observer)?;
        let (strategy, appended) =
            complete_on_touched_cells(out.strategy, problem.gram(), problem.privacy())?;
        let mut report = out.report;
        if appended > 0 {
            let objective = problem.objective(strategy.as_ref())?;
            report.objective = objective;
            if let Some(c) = report.certificate.as_mut() {
                c.relative_gap = (objective - c.lower_bound) / objective;
            }
            report
                .diagnostics
                .push(("support_rows_appended", appended as f64));
        }
        Ok(Optimized { strategy, report })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A rank-1 strategy on a workload touching cells 1 and 3 of 4 gets
    /// exactly one row, on those cells, orthogonal to the strategy's row;
    /// the result spans both cells and has sensitivity 1; a strategy
    /// spanning them is returned unchanged.
    #[test]
    fn appends_the_missing_direction_on_touched_cells_only() {
        let mut gram = Mat::<f64>::zeros(4, 4);
        gram[(1, 1)] = 2.0;
        gram[(3, 3)] = 1.0;
        let a = Mat::from_fn(1, 4, |_, j| if j == 1 || j == 3 { 0.5 } else { 0.0 });
        for privacy in [PrivacyModel::Pure, PrivacyModel::Approx] {
            let (out, added) =
                complete_on_touched_cells(a.clone(), gram.as_ref(), privacy).unwrap();
            assert_eq!(added, 1);
            assert_eq!(out.nrows(), 2);
            assert_eq!(out[(1, 0)], 0.0);
            assert_eq!(out[(1, 2)], 0.0);
            // Orthogonal to (1, 1) on the touched cells: ±(1, −1)/√2.
            assert!((out[(1, 1)] + out[(1, 3)]).abs() < 1e-15);
            assert!(out[(1, 1)].abs() > 0.0);
            let s = match privacy {
                PrivacyModel::Pure => dp_core::sensitivity_l1(out.as_ref()).unwrap(),
                PrivacyModel::Approx => dp_core::sensitivity_l2(out.as_ref()).unwrap(),
            };
            assert!((s - 1.0).abs() < 1e-15);
            let full = Mat::from_fn(2, 4, |i, j| f64::from(u8::from(j == 1 + 2 * i)));
            let (same, added) =
                complete_on_touched_cells(full.clone(), gram.as_ref(), privacy).unwrap();
            assert_eq!(added, 0);
            assert_eq!(same, full);
        }
    }
}
