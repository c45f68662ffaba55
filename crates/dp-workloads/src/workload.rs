//! The workload abstraction: a batch of linear counting queries that knows
//! its Gram matrix `WᵀW` and how to answer `W x` without necessarily
//! building `W` (HDMM's implicit workloads). All ranges over n = 1024
//! cells are 524,800 queries, yet `WᵀW` is 1024×1024 with a closed form.

use std::fmt::Debug;

use dp_core::validate::{check_nonzero_matrix, check_vector};
use dp_core::{DpError, Result};
use dp_linalg::{Mat, MatRef, Par};

/// Largest number of entries (`m·n`) a workload builds explicitly on
/// request (128 Mi entries = 1 GiB of f64).
pub const EXPLICIT_ENTRY_LIMIT: usize = 1 << 27;

/// A batch of `m` linear queries over a domain of `n` cells.
pub trait Workload: Debug + Send + Sync {
    /// A short description, e.g. `AllRange(1024)`.
    fn name(&self) -> String;
    /// Domain size `n` (columns of `W`).
    fn domain_size(&self) -> usize;
    /// Number of queries `m` (rows of `W`).
    fn num_queries(&self) -> usize;
    /// The Gram matrix `WᵀW` (n×n).
    fn gram(&self) -> Mat<f64>;
    /// L1 norm of every column of `W` (its max is `Δ₁(W)`).
    fn column_l1_norms(&self) -> Vec<f64>;
    /// The answers `W x`, in the workload's query order. `x` has length n.
    fn answer(&self, x: &[f64]) -> Result<Vec<f64>>;
    /// The explicit matrix, built row by row. Implementations may refuse
    /// (`None`) when `m·n` exceeds [`EXPLICIT_ENTRY_LIMIT`].
    fn explicit(&self) -> Option<Mat<f64>>;
}

/// `Δ₁(W)`: the largest column L1 norm.
pub fn workload_sensitivity_l1(w: &dyn Workload) -> f64 {
    w.column_l1_norms().into_iter().fold(0.0, f64::max)
}

/// `Δ₂(W)`: the largest column L2 norm, `max √(WᵀW)ⱼⱼ`.
pub fn workload_sensitivity_l2(w: &dyn Workload) -> f64 {
    let g = w.gram();
    (0..g.nrows())
        .map(|j| g[(j, j)].max(0.0).sqrt())
        .fold(0.0, f64::max)
}

pub(crate) fn check_x(w: &dyn Workload, x: &[f64]) -> Result<()> {
    check_vector("data vector x", x, w.domain_size())
}

/// Whether an m×n explicit matrix stays within [`EXPLICIT_ENTRY_LIMIT`].
pub(crate) fn fits(m: usize, n: usize) -> bool {
    m.checked_mul(n).is_some_and(|e| e <= EXPLICIT_ENTRY_LIMIT)
}

/// A workload given by its rows.
#[derive(Debug, Clone)]
pub struct ExplicitWorkload {
    name: String,
    matrix: Mat<f64>,
}

impl ExplicitWorkload {
    /// Wraps a matrix (validated: non-empty, finite, not all zero).
    pub fn new(name: impl Into<String>, matrix: Mat<f64>) -> Result<Self> {
        check_nonzero_matrix("workload", matrix.as_ref())?;
        Ok(Self {
            name: name.into(),
            matrix,
        })
    }

    /// The rows.
    pub fn matrix(&self) -> MatRef<'_, f64> {
        self.matrix.as_ref()
    }
}

impl Workload for ExplicitWorkload {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn domain_size(&self) -> usize {
        self.matrix.ncols()
    }
    fn num_queries(&self) -> usize {
        self.matrix.nrows()
    }
    fn gram(&self) -> Mat<f64> {
        dp_linalg::gram(self.matrix.as_ref(), Par::rayon(0))
    }
    fn column_l1_norms(&self) -> Vec<f64> {
        (0..self.matrix.ncols())
            .map(|j| self.matrix.col(j).iter().map(|v| v.abs()).sum())
            .collect()
    }
    fn answer(&self, x: &[f64]) -> Result<Vec<f64>> {
        check_x(self, x)?;
        // Every cell is visited, zero or not: the time taken must not
        // depend on the data.
        let mut out = vec![0.0; self.matrix.nrows()];
        for (j, &xj) in x.iter().enumerate() {
            let col = self.matrix.col(j);
            for (i, o) in out.iter_mut().enumerate() {
                *o += col[i] * xj;
            }
        }
        Ok(out)
    }
    fn explicit(&self) -> Option<Mat<f64>> {
        Some(self.matrix.clone())
    }
}

/// A domain of at least one cell.
pub(crate) fn require_domain(n: usize) -> Result<()> {
    if n == 0 {
        return Err(DpError::InvalidParameter {
            name: "domain size",
            reason: "must be >= 1".into(),
        });
    }
    Ok(())
}

/// A workload over a one-dimensional domain of `n` cells, named
/// `Type(n)`: the struct, its constructor (refusing n = 0) and the
/// [`Workload`] impl, whose `name` and `domain_size` follow from `n` and
/// whose other methods are given.
macro_rules! one_dimensional {
    (
        $(#[$doc:meta])*
        $name:ident, $(#[$new_doc:meta])*
        impl { $($methods:tt)* }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name {
            n: usize,
        }

        impl $name {
            $(#[$new_doc])*
            pub fn new(n: usize) -> Result<Self> {
                require_domain(n)?;
                Ok(Self { n })
            }
        }

        impl Workload for $name {
            fn name(&self) -> String {
                format!("{}({})", stringify!($name), self.n)
            }
            fn domain_size(&self) -> usize {
                self.n
            }
            $($methods)*
        }
    };
}

one_dimensional! {
    /// `I_n`: every cell count. `WᵀW = I`.
    Identity,
    /// The identity workload on `n` cells.
    impl {
        fn num_queries(&self) -> usize {
            self.n
        }
        fn gram(&self) -> Mat<f64> {
            Mat::identity(self.n, self.n)
        }
        fn column_l1_norms(&self) -> Vec<f64> {
            vec![1.0; self.n]
        }
        fn answer(&self, x: &[f64]) -> Result<Vec<f64>> {
            check_x(self, x)?;
            Ok(x.to_vec())
        }
        fn explicit(&self) -> Option<Mat<f64>> {
            fits(self.n, self.n).then(|| Mat::identity(self.n, self.n))
        }
    }
}

one_dimensional! {
    /// The single total query `Σ x`. `WᵀW = 1 1ᵀ`.
    Total,
    /// The total workload on `n` cells.
    impl {
        fn num_queries(&self) -> usize {
            1
        }
        fn gram(&self) -> Mat<f64> {
            Mat::from_fn(self.n, self.n, |_, _| 1.0)
        }
        fn column_l1_norms(&self) -> Vec<f64> {
            vec![1.0; self.n]
        }
        fn answer(&self, x: &[f64]) -> Result<Vec<f64>> {
            check_x(self, x)?;
            Ok(vec![x.iter().sum()])
        }
        fn explicit(&self) -> Option<Mat<f64>> {
            fits(1, self.n).then(|| Mat::from_fn(1, self.n, |_, _| 1.0))
        }
    }
}

one_dimensional! {
    /// Prefix sums `q_i = x_0 + … + x_i`, i = 0..n. Column j appears in the
    /// n − j queries i ≥ j, so `(WᵀW)_{jk} = n − max(j, k)`.
    Prefix,
    /// All n prefix queries.
    impl {
        fn num_queries(&self) -> usize {
            self.n
        }
        fn gram(&self) -> Mat<f64> {
            let n = self.n;
            let mut g = Mat::zeros(n, n);
            for k in 0..n {
                let col = g.col_as_slice_mut(k);
                let below = (n - k) as f64;
                for v in &mut col[..k] {
                    *v = below;
                }
                for (j, v) in col[k..].iter_mut().enumerate() {
                    *v = (n - k - j) as f64;
                }
            }
            g
        }
        fn column_l1_norms(&self) -> Vec<f64> {
            (0..self.n).map(|j| (self.n - j) as f64).collect()
        }
        fn answer(&self, x: &[f64]) -> Result<Vec<f64>> {
            check_x(self, x)?;
            let mut acc = 0.0;
            Ok(x.iter()
                .map(|v| {
                    acc += v;
                    acc
                })
                .collect())
        }
        fn explicit(&self) -> Option<Mat<f64>> {
            fits(self.n, self.n)
                .then(|| Mat::from_fn(self.n, self.n, |i, j| if j <= i { 1.0 } else { 0.0 }))
        }
    }
}

one_dimensional! {
    /// Every range `[a, b]`, 0 ≤ a ≤ b < n: n(n+1)/2 queries, ordered by `a`
    /// then `b`. Cells j ≤ k are both in `[a, b]` iff a ≤ j and b ≥ k, so
    /// `(WᵀW)_{jk} = (min(j,k) + 1)(n − max(j,k))`.
    AllRange,
    /// All n(n+1)/2 range queries.
    impl {
        fn num_queries(&self) -> usize {
            self.n * (self.n + 1) / 2
        }
        fn gram(&self) -> Mat<f64> {
            let n = self.n;
            let mut g = Mat::zeros(n, n);
            for k in 0..n {
                // Column k: (j + 1)(n − k) above the diagonal, (k + 1)(n − j)
                // from it down — two affine runs the compiler vectorizes.
                let col = g.col_as_slice_mut(k);
                let right = (n - k) as f64;
                for (j, v) in col[..k].iter_mut().enumerate() {
                    *v = (j + 1) as f64 * right;
                }
                let left = (k + 1) as f64;
                for (j, v) in col[k..].iter_mut().enumerate() {
                    *v = left * (n - k - j) as f64;
                }
            }
            g
        }
        fn column_l1_norms(&self) -> Vec<f64> {
            (0..self.n)
                .map(|j| ((j + 1) * (self.n - j)) as f64)
                .collect()
        }
        fn answer(&self, x: &[f64]) -> Result<Vec<f64>> {
            check_x(self, x)?;
            // Range sums from the prefix sums: O(m) for m answers.
            let mut prefix = Vec::with_capacity(self.n + 1);
            prefix.push(0.0);
            let mut acc = 0.0;
            for v in x {
                acc += v;
                prefix.push(acc);
            }
            let mut out = Vec::with_capacity(self.num_queries());
            for a in 0..self.n {
                for b in a..self.n {
                    out.push(prefix[b + 1] - prefix[a]);
                }
            }
            Ok(out)
        }
        fn explicit(&self) -> Option<Mat<f64>> {
            let n = self.n;
            if !fits(self.num_queries(), n) {
                return None;
            }
            let mut w = Mat::zeros(self.num_queries(), n);
            let mut row = 0;
            for a in 0..n {
                for b in a..n {
                    for j in a..=b {
                        w[(row, j)] = 1.0;
                    }
                    row += 1;
                }
            }
            Some(w)
        }
    }
}

impl AllRange {
    /// The query index of range `[a, b]` in this workload's order.
    pub fn index_of(&self, a: usize, b: usize) -> usize {
        // Ranges starting before a: Σ_{s<a} (n − s) = a·n − a(a−1)/2.
        a * self.n - a * (a.saturating_sub(1)) / 2 + (b - a)
    }
}
