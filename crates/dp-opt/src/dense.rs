//! Small dense helpers for the optimizers built on dp-linalg's kernels:
//! Frobenius inner products, symmetric clean-up, spectral Hessians.

use dp_linalg::{Mat, MatRef, Par};
pub use dp_linalg::{gemm, gemm_into};

/// `⟨A, B⟩ = Σᵢⱼ Aᵢⱼ Bᵢⱼ`.
pub fn inner(a: &Mat<f64>, b: &Mat<f64>) -> f64 {
    let mut s = 0.0;
    for j in 0..a.ncols() {
        let (ca, cb) = (a.col_as_slice(j), b.col_as_slice(j));
        s += ca.iter().zip(cb).map(|(x, y)| x * y).sum::<f64>();
    }
    s
}

/// Zeroes the diagonal.
pub fn zero_diagonal(m: &mut Mat<f64>) {
    for i in 0..m.nrows().min(m.ncols()) {
        m[(i, i)] = 0.0;
    }
}

/// An orthonormal basis (n×c) of the complement of the row space of `a`:
/// the eigenvectors of `AᵀA` with eigenvalue at most `level · λ_max`.
pub fn row_space_complement(a: &Mat<f64>, level: f64) -> dp_core::Result<Mat<f64>> {
    let n = a.ncols();
    let gram = dp_linalg::gram(a.as_ref(), Par::rayon(0));
    let eig = dp_linalg::SymmetricEigen::new(gram.as_ref())?;
    let amax = eig.values.iter().copied().fold(0.0, f64::max);
    let keep: Vec<usize> = (0..n).filter(|&k| eig.values[k] <= level * amax).collect();
    Ok(Mat::from_fn(n, keep.len(), |i, c| {
        eig.vectors[(i, keep[c])]
    }))
}

/// `[A; η Pᵀ]`: the strategy with the directions `P` (n×c) appended at
/// weight η (the caller rescales to its sensitivity).
pub fn append_rows(a: &Mat<f64>, p: &Mat<f64>, eta: f64) -> Mat<f64> {
    let k = a.nrows();
    Mat::from_fn(k + p.ncols(), a.ncols(), |i, j| {
        if i < k {
            a[(i, j)]
        } else {
            eta * p[(j, i - k)]
        }
    })
}

/// `outᵢ = ĉᵢᵀ [Γ ∘ (Ĉᵀ diag(v) Ĉ)] ĉᵢ` for the rows i in `rows` (zero
/// elsewhere), `ĉᵢ` the rows of `c_hat` (n×r): the Daleckii–Krein form of
/// a spectral function's Hessian-vector product. `v` must vanish outside
/// `rows`; the cost is two |rows|×r×r products, so a projected Newton
/// step on a small free set is cheap.
pub fn spectral_hessian_rows(
    c_hat: &Mat<f64>,
    gamma: impl Fn(usize, usize) -> f64,
    v: &[f64],
    rows: &[usize],
    par: Par,
) -> Vec<f64> {
    let r = c_hat.ncols();
    let f = rows.len();
    let cf = Mat::from_fn(f, r, |a, k| c_hat[(rows[a], k)]);
    let cv = Mat::from_fn(f, r, |a, k| cf[(a, k)] * v[rows[a]]);
    let mut t = gemm(cf.transpose(), cv.as_ref(), par);
    for l in 0..r {
        for k in 0..r {
            t[(k, l)] *= gamma(k, l);
        }
    }
    let p = gemm(cf.as_ref(), t.as_ref(), par);
    let mut out = vec![0.0; c_hat.nrows()];
    for k in 0..r {
        let (cp, cc) = (p.col_as_slice(k), cf.col_as_slice(k));
        for a in 0..f {
            out[rows[a]] += cp[a] * cc[a];
        }
    }
    out
}

/// `outᵢ = Σₖ Aᵢₖ Bᵢₖ` (row-wise dot products of two n×r matrices).
pub fn row_dots(a: &Mat<f64>, b: &Mat<f64>) -> Vec<f64> {
    let mut out = vec![0.0; a.nrows()];
    for k in 0..a.ncols() {
        let (ca, cb) = (a.col_as_slice(k), b.col_as_slice(k));
        for ((o, x), y) in out.iter_mut().zip(ca).zip(cb) {
            *o += x * y;
        }
    }
    out
}

/// `M(y) = C diag(y) Cᵀ` (r×r, symmetrized) for the Gram root `C` (r×n)
/// and `y ≥ 0`: the matrix whose spectrum both concave duals (COA's trace
/// dual and the Ky Fan dual) are functions of.
pub fn weighted_gram(root: MatRef<'_, f64>, y: &[f64], par: Par) -> Mat<f64> {
    let cs = Mat::from_fn(root.nrows(), root.ncols(), |k, j| {
        root[(k, j)] * y[j].sqrt()
    });
    let mut m = gemm(cs.as_ref(), cs.transpose(), par);
    dp_linalg::symmetrize(&mut m);
    m
}

/// `outᵢ = Σₖₗ Γₖₗ Ĉᵢₖ² Ĉᵢₗ²`: the diagonal of the Daleckii–Krein
/// Hessian of [`spectral_hessian_rows`].
pub fn spectral_hessian_diagonal(
    c_hat: &Mat<f64>,
    gamma: impl Fn(usize, usize) -> f64,
    par: Par,
) -> Vec<f64> {
    let (n, r) = (c_hat.nrows(), c_hat.ncols());
    let sq = Mat::from_fn(n, r, |i, k| c_hat[(i, k)] * c_hat[(i, k)]);
    let g = Mat::from_fn(r, r, gamma);
    let t = gemm(sq.as_ref(), g.as_ref(), par);
    row_dots(&t, &sq)
}

/// Test support: an m×n matrix of independent uniform entries in
/// `[−1, 1)` (ChaCha8 seeded with `seed`).
#[cfg(test)]
pub fn random_uniform(m: usize, n: usize, seed: u64) -> Mat<f64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    Mat::from_fn(m, n, |_, _| rng.random::<f64>() * 2.0 - 1.0)
}

/// Test support: asserts that `grad` is the gradient of `f` at `x` by
/// central differences (step `h`, every entry), within
/// `tolerance · max(|∂ᵢⱼ|, 1)`; `what` names the case in the message.
#[cfg(test)]
pub fn assert_gradient_by_central_differences(
    what: &str,
    f: impl Fn(&Mat<f64>) -> f64,
    x: &Mat<f64>,
    grad: &Mat<f64>,
    h: f64,
    tolerance: f64,
) {
    for i in 0..x.nrows() {
        for j in 0..x.ncols() {
            let mut plus = x.clone();
            plus[(i, j)] += h;
            let mut minus = x.clone();
            minus[(i, j)] -= h;
            let fd = (f(&plus) - f(&minus)) / (2.0 * h);
            let exact = grad[(i, j)];
            assert!(
                (fd - exact).abs() < tolerance * exact.abs().max(1.0),
                "{what} ({i},{j}): finite difference {fd} vs gradient {exact}"
            );
        }
    }
}
