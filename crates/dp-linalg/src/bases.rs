//! Explicit orthonormal bases.

use faer::Mat;

/// The (n−1)×n Helmert rows: row k (1 ≤ k < n) is
/// `(1, …, 1, −k, 0, …, 0)/√(k(k+1))` with k ones — an orthonormal basis
/// of the complement of the ones vector (the residual basis of a
/// marginal workload's attribute: ResidualPlanner, Xiao et al. NeurIPS
/// 2023). Empty (0×n) for n ≤ 1.
pub fn helmert(n: usize) -> Mat<f64> {
    Mat::from_fn(n.saturating_sub(1), n, |r, c| {
        let k = r + 1;
        let s = 1.0 / ((k * (k + 1)) as f64).sqrt();
        if c < k {
            s
        } else if c == k {
            -(k as f64) * s
        } else {
            0.0
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helmert_rows_are_orthonormal_and_sum_to_zero() {
        for n in 1..7 {
            let q = helmert(n);
            assert_eq!((q.nrows(), q.ncols()), (n - 1, n));
            let qqt = &q * q.transpose();
            for i in 0..n - 1 {
                assert!((0..n).map(|j| q[(i, j)]).sum::<f64>().abs() < 1e-14);
                for j in 0..n - 1 {
                    let want = if i == j { 1.0 } else { 0.0 };
                    assert!((qqt[(i, j)] - want).abs() < 1e-14);
                }
            }
        }
        assert_eq!(helmert(0).nrows(), 0);
    }
}
