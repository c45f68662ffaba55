//! Input validation shared by every public entry point (docs/architecture.md).

use dp_linalg::MatRef;

use crate::{DpError, Result};

/// A matrix argument must have at least one row and column and only finite
/// entries.
pub fn check_matrix(what: &str, a: MatRef<'_, f64>) -> Result<()> {
    if a.nrows() == 0 || a.ncols() == 0 {
        return Err(DpError::Empty {
            what: what.to_string(),
            rows: a.nrows(),
            cols: a.ncols(),
        });
    }
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            let v = a[(i, j)];
            if !v.is_finite() {
                return Err(DpError::NonFinite {
                    what: what.to_string(),
                    row: i,
                    col: j,
                    value: v,
                });
            }
        }
    }
    Ok(())
}

/// A matrix that must also not be identically zero (a zero workload asks
/// nothing; a zero strategy measures nothing).
pub fn check_nonzero_matrix(what: &str, a: MatRef<'_, f64>) -> Result<()> {
    check_matrix(what, a)?;
    if a.norm_max() == 0.0 {
        return Err(DpError::ZeroMatrix {
            what: what.to_string(),
        });
    }
    Ok(())
}

/// A symmetric matrix argument (Gram or covariance): non-empty, finite,
/// square, and symmetric to `1e-10 · max|entry|`.
pub fn check_symmetric(what: &str, a: MatRef<'_, f64>) -> Result<()> {
    check_matrix(what, a)?;
    let n = a.nrows();
    if a.ncols() != n {
        return Err(DpError::DimensionMismatch {
            what: format!("{what} must be square, got {n}x{}", a.ncols()),
        });
    }
    let scale = a.norm_max();
    for j in 0..n {
        for i in 0..j {
            if (a[(i, j)] - a[(j, i)]).abs() > 1e-10 * scale {
                return Err(DpError::InvalidParameter {
                    name: "symmetric matrix",
                    reason: format!("{what} is not symmetric at ({i}, {j})"),
                });
            }
        }
    }
    Ok(())
}

/// A workload's Gram matrix `WᵀW`: symmetric (see [`check_symmetric`]) and
/// not identically zero.
pub fn check_gram(a: MatRef<'_, f64>) -> Result<()> {
    check_symmetric("workload Gram matrix", a)?;
    check_nonzero_matrix("workload Gram matrix", a)
}

/// A vector argument: non-empty, finite, and of the expected length.
pub fn check_vector(what: &str, v: &[f64], expected_len: usize) -> Result<()> {
    if v.len() != expected_len {
        return Err(DpError::DimensionMismatch {
            what: format!("{what} has length {}, expected {expected_len}", v.len()),
        });
    }
    if v.is_empty() {
        return Err(DpError::Empty {
            what: what.to_string(),
            rows: 0,
            cols: 1,
        });
    }
    if let Some((i, &value)) = v.iter().enumerate().find(|(_, x)| !x.is_finite()) {
        return Err(DpError::NonFinite {
            what: what.to_string(),
            row: i,
            col: 0,
            value,
        });
    }
    Ok(())
}

/// A histogram of `histogram_cells` cells given to `what` (a strategy or a
/// workload over `cells` cells) must have exactly that many cells.
pub fn check_histogram_cells(what: &str, cells: usize, histogram_cells: usize) -> Result<()> {
    if cells != histogram_cells {
        return Err(DpError::DimensionMismatch {
            what: format!("{what} has {cells} cells, the histogram {histogram_cells}"),
        });
    }
    Ok(())
}

/// Workload and strategy must act on the same domain (same column count).
pub fn check_same_domain(workload: MatRef<'_, f64>, strategy: MatRef<'_, f64>) -> Result<()> {
    check_same_columns("workload", workload, strategy)
}

/// `what` (a workload or its Gram matrix) and the strategy must act on the
/// same domain (same column count).
pub fn check_same_columns(
    what: &str,
    left: MatRef<'_, f64>,
    strategy: MatRef<'_, f64>,
) -> Result<()> {
    if left.ncols() != strategy.ncols() {
        return Err(DpError::DimensionMismatch {
            what: format!(
                "{what} is {}x{} but strategy is {}x{}: both need the same number of columns (domain size n)",
                left.nrows(),
                left.ncols(),
                strategy.nrows(),
                strategy.ncols()
            ),
        });
    }
    Ok(())
}
