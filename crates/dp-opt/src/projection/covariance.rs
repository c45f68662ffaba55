//! The projection mechanism's covariance: program (4)–(6) of Nikolov,
//! `min ‖Σ‖_(k)` (the Ky Fan k-norm, the sum of the k largest eigenvalues)
//! over `Σ ≻ 0` with `w_eᵀ Σ⁻¹ w_e ≤ 1` for every column `w_e` of W
//! (written there in `X = Σ⁻¹`), solved through its dual with a
//! certificate.
//!
//! **The dual (Theorem 4.2, §4.3).** For multipliers `y ≥ 0`,
//! `D = diag(y)`, the Lagrangian `‖Σ‖_(k) + tr(Σ⁻¹ W D Wᵀ) − Σ yₑ` is
//! minimized over Σ at the value `g(y) = 2 h_k(W D Wᵀ) − Σ yₑ`, with
//! Definition 4.1's
//! `h_k(σ) = Σ_{i<t} √σᵢ + √((k − t) Σ_{i≥t} σᵢ)` (σ the eigenvalues in
//! decreasing order, 0-based, t the unique index of Lemma 4.1.3:
//! the least t with `Σ_{i≥t} σᵢ / (k − t) ≥ σ_t`). `h_k` is positively
//! homogeneous of degree ½ in y, so maximizing over the scale gives the
//! optimum as `max_y h_k(W D Wᵀ)² / Σ yₑ`: the paper's (9)–(10) with
//! `Q = D / tr D`. (Theorem 4.2 as printed writes the left side as μ²;
//! its own proof ends with the maximum of `g` equal to the optimal value
//! itself, `h_k²`, which is what the tests confirm: at k ≥ rank(W) the
//! bound equals COA's certified optimum and at k = 1 the closed form
//! `max_e ‖w_e‖²`.)
//!
//! **Reduction to W's row space.** With `W = B C` (B = U_r orthonormal
//! m×r, C = S_r V_rᵀ from the thin SVD, r = rank W), the nonzero spectrum
//! of `W D Wᵀ` is that of the r×r `M(y) = C D Cᵀ = Q diag(σ) Qᵀ`, so every
//! evaluation is an r×n×r product, an r×r eigendecomposition and an
//! n×r×r product, never m×m. With `Ĉ = CᵀQ`:
//!
//! - the Lagrangian minimizer is `Σ = B Q diag(σ'^{1/2}) Qᵀ Bᵀ` (plus
//!   `√α` on the complement of W's column space), with `σ'ᵢ = σᵢ` for
//!   the head `i < t` and `σ'ᵢ = α = Σ_{j≥t}σⱼ / (k − t)` for the tail; its
//!   constraint values are `xₑ = Σᵢ Ĉₑᵢ² / √σ'ᵢ` and `∂g/∂yₑ = xₑ − 1`;
//! - its Ky Fan norm is exactly `h`, so scaling Σ by `maxₑ xₑ` makes it
//!   feasible with objective `h · maxₑ xₑ`, while the bound is
//!   `h² / Σy = h · x̄` (Euler: `Σ yₑxₑ = h`): the relative gap is
//!   `1 − x̄ / maxₑ xₑ`, zero exactly at the dual optimum;
//! - the Hessian comes from Lewis's formula for spectral functions:
//!   `∂²h/∂yₐ∂y_b = Σᵢⱼ Γᵢⱼ ĈₐᵢĈₐⱼĈ_bᵢĈ_bⱼ + c wₐ w_b` with
//!   `Γᵢⱼ = (φ'ᵢ − φ'ⱼ)/(σᵢ − σⱼ)` (φ' = ½σ'^{-1/2}; head diagonal
//!   `−¼σᵢ^{-3/2}`, zero on the tail block), the tail's rank-one curvature
//!   `c = −1 / (4 (k − t) α^{3/2})` and `wₐ = Σ_{j≥t} Ĉₐⱼ²`; a product
//!   costs two n×r×r multiplications.
//!
//! The dual is maximized by the projected Newton method of
//! [`crate::projected_newton`] (the one COA's dual uses). At k ≥ r the
//! program is COA's (ε,δ) program in covariance form; there the optimum is
//! not attained when m > r (Σ can shrink without bound on the complement
//! of W's column space), and the returned Σ puts a small multiple of the
//! smallest eigenvalue there, accounted for in the reported objective.
//!
//! The returned Σ is checked like a release would check it: `w_eᵀΣ⁻¹w_e`
//! through a Cholesky factorization of Σ itself, and scaled up by the
//! largest value if rounding put it above 1.

use std::time::Instant;

use dp_core::{DpError, Result};
use dp_linalg::{Cholesky, Mat, MatRef, Par, SymmetricEigen, ThinSvd};

use crate::dense::{
    gemm, row_dots, spectral_hessian_diagonal, spectral_hessian_rows, weighted_gram,
};
use crate::projected_newton::{self, ConcaveDual};

/// Options of [`optimal_covariance`].
#[derive(Debug, Clone, Copy)]
pub struct KyFanOptions {
    /// Stop when the relative duality gap is at most this (default 1e-6).
    pub tolerance: f64,
    /// Newton iterations at most (default 200).
    pub max_iterations: usize,
    /// Parallelism of the dense products (default: all cores).
    pub parallelism: Par,
}

impl Default for KyFanOptions {
    fn default() -> Self {
        Self {
            tolerance: 1e-6,
            max_iterations: 200,
            parallelism: Par::rayon(0),
        }
    }
}

/// The optimized covariance with its certificate.
#[derive(Debug, Clone)]
pub struct KyFanCovariance {
    /// Σ (m×m, symmetric positive definite, `maxₑ w_eᵀΣ⁻¹w_e ≤ 1`).
    pub covariance: Mat<f64>,
    /// The k of the Ky Fan norm.
    pub k: usize,
    /// `‖Σ‖_(k)`, recomputed from the eigenvalues of the returned Σ.
    pub objective: f64,
    /// The dual bound `h_k(W D Wᵀ)² / Σy ≤` the optimum.
    pub lower_bound: f64,
    /// `(objective − lower_bound) / objective`.
    pub relative_gap: f64,
    /// `maxₑ w_eᵀ Σ⁻¹ w_e` of the returned Σ (through its Cholesky
    /// factor), at most 1.
    pub largest_condition: f64,
    /// rank(W).
    pub rank: usize,
    /// Newton iterations on the dual.
    pub iterations: usize,
    /// Whether the gap met the tolerance.
    pub converged: bool,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// `(t, α, h)` of Definition 4.1 for `sig` in decreasing order (entries
/// ≥ 0) and `1 ≤ k ≤ sig.len()` (a larger k is read as `sig.len()`; k = 0
/// gives `(0, 0, 0)`): t the least index with
/// `Σ_{i≥t} σᵢ / (k − t) ≥ σ_t` (it exists: at t = k − 1 the sum contains
/// σ_t), `α` that average and `h = Σ_{i<t}√σᵢ + √((k − t) Σ_{i≥t}σᵢ)`.
pub fn ky_fan_parts(sig: &[f64], k: usize) -> (usize, f64, f64) {
    // k beyond the spectrum is the whole spectrum (h = Σ √σᵢ).
    let k = k.min(sig.len());
    let mut suffix = vec![0.0; sig.len() + 1];
    for i in (0..sig.len()).rev() {
        suffix[i] = suffix[i + 1] + sig[i].max(0.0);
    }
    let mut head = 0.0;
    for t in 0..k {
        let alpha = suffix[t] / (k - t) as f64;
        if alpha >= sig[t] {
            return (t, alpha, head + ((k - t) as f64 * suffix[t]).sqrt());
        }
        head += sig[t].max(0.0).sqrt();
    }
    // Unreachable for k ≥ 1 (see above); the value is then the head sum.
    (k, 0.0, head)
}

/// One evaluation of the Ky Fan dual.
#[derive(Debug, Clone)]
pub struct KyFanPoint {
    y: Vec<f64>,
    /// `h_k(M(y))`.
    h: f64,
    /// `xₑ = Σᵢ Ĉₑᵢ² / √σ'ᵢ`.
    x: Vec<f64>,
    /// `Ĉ = CᵀQ` (n×r), eigenvalues in decreasing order.
    c_hat: Mat<f64>,
    /// Eigenvectors of M, decreasing order.
    q: Mat<f64>,
    /// Eigenvalues of M, decreasing.
    sig: Vec<f64>,
    t: usize,
    alpha: f64,
    k: usize,
    /// Γ of Lewis's formula (r×r, see the module notes).
    gamma: Mat<f64>,
}

impl KyFanPoint {
    /// The dual bound `h² / Σy`.
    pub fn lower_bound(&self) -> f64 {
        self.h * self.h / self.y.iter().sum::<f64>()
    }

    /// `1 − x̄ / maxₑ xₑ`.
    pub fn relative_gap(&self) -> f64 {
        let xbar = self.h / self.y.iter().sum::<f64>();
        let xmax = self.x.iter().copied().fold(0.0, f64::max);
        (1.0 - xbar / xmax).max(0.0)
    }

    /// `g(y) = 2h − Σy`.
    pub fn value(&self) -> f64 {
        2.0 * self.h - self.y.iter().sum::<f64>()
    }

    /// `∇g = x − 1`.
    pub fn gradient(&self) -> Vec<f64> {
        self.x.iter().map(|x| x - 1.0).collect()
    }

    /// `σ'^{1/2}` (decreasing): the eigenvalues of the Lagrangian
    /// minimizer Σ on W's column space.
    fn sqrt_sigma_prime(&self) -> Vec<f64> {
        (0..self.sig.len())
            .map(|i| {
                if i < self.t {
                    self.sig[i].sqrt()
                } else {
                    self.alpha.sqrt()
                }
            })
            .collect()
    }

    /// The tail's rank-one curvature `c` and `wₐ = Σ_{j≥t} Ĉₐⱼ²`.
    fn tail_curvature(&self) -> (f64, Vec<f64>) {
        let (n, r) = (self.c_hat.nrows(), self.c_hat.ncols());
        let c = -1.0 / (4.0 * (self.k - self.t) as f64 * self.alpha.powf(1.5));
        let w = (0..n)
            .map(|a| (self.t..r).map(|j| self.c_hat[(a, j)].powi(2)).sum())
            .collect();
        (c, w)
    }

    /// `(−∇²g) v = −2 ∇²h v`.
    pub fn neg_hessian_times(&self, v: &[f64], par: Par) -> Vec<f64> {
        let all: Vec<usize> = (0..v.len()).collect();
        self.neg_hessian_times_on(v, &all, par)
    }

    /// [`Self::neg_hessian_times`] on the rows in `rows` (`v` vanishing
    /// outside them).
    fn neg_hessian_times_on(&self, v: &[f64], rows: &[usize], par: Par) -> Vec<f64> {
        let spectral = spectral_hessian_rows(&self.c_hat, |k, l| self.gamma[(k, l)], v, rows, par);
        let (c, w) = self.tail_curvature();
        let wv: f64 = rows.iter().map(|&a| w[a] * v[a]).sum();
        spectral
            .into_iter()
            .zip(&w)
            .map(|(h, wa)| -2.0 * (h + c * wa * wv))
            .collect()
    }

    /// The diagonal of `−∇²g`.
    pub fn neg_hessian_diagonal(&self, par: Par) -> Vec<f64> {
        let (c, w) = self.tail_curvature();
        spectral_hessian_diagonal(&self.c_hat, |k, l| self.gamma[(k, l)], par)
            .into_iter()
            .zip(&w)
            .map(|(h, wa)| -2.0 * (h + c * wa * wa))
            .collect()
    }

    /// The point at `τ y`: M scales by τ, h by √τ, x by 1/√τ, Γ by τ^{-3/2}.
    fn scaled(mut self, tau: f64) -> Self {
        let rt = tau.sqrt();
        self.y.iter_mut().for_each(|v| *v *= tau);
        self.sig.iter_mut().for_each(|v| *v *= tau);
        self.alpha *= tau;
        self.h *= rt;
        self.x.iter_mut().for_each(|v| *v /= rt);
        let g = tau.powf(-1.5);
        for j in 0..self.gamma.ncols() {
            for i in 0..self.gamma.nrows() {
                self.gamma[(i, j)] *= g;
            }
        }
        self
    }
}

/// Γ of Lewis's formula for `φ(σ) = h_k(σ)` (module notes), with the
/// divided differences in cancellation-free form.
fn lewis_gamma(sig: &[f64], t: usize, alpha: f64) -> Mat<f64> {
    let r = sig.len();
    let s: Vec<f64> = sig.iter().map(|v| v.sqrt()).collect();
    let sa = alpha.sqrt();
    Mat::from_fn(r, r, |i, j| {
        let (head_i, head_j) = (i < t, j < t);
        match (head_i, head_j) {
            (false, false) => 0.0,
            (true, true) if i == j => -0.25 / (sig[i] * s[i]),
            (true, true) => -0.5 / (s[i] * s[j] * (s[i] + s[j])),
            _ => {
                let (h, l) = if head_i { (i, j) } else { (j, i) };
                let den = sig[h] - sig[l];
                if den > 0.0 {
                    // ½(σ_h^{-1/2} − α^{-1/2}) / (σ_h − σ_l).
                    -0.5 * (sig[h] - alpha) / (s[h] * sa * (s[h] + sa)) / den
                } else {
                    -0.25 / (sig[h] * s[h])
                }
            }
        }
    })
}

/// The Ky Fan dual as a [`ConcaveDual`] over the Gram root `C` (r×n).
pub struct KyFanDual<'a> {
    root: MatRef<'a, f64>,
    k: usize,
    par: Par,
}

impl<'a> KyFanDual<'a> {
    /// The dual for `V = CᵀC` (`root` = C, r×n, full row rank) and
    /// `1 ≤ k`; `k ≥ r` is the trace (COA) case.
    pub fn new(root: MatRef<'a, f64>, k: usize, par: Par) -> Result<Self> {
        if k == 0 || root.nrows() == 0 {
            return Err(DpError::InvalidParameter {
                name: "k",
                reason: "the Ky Fan dual needs k ≥ 1 and a nonzero workload".into(),
            });
        }
        Ok(Self {
            root,
            k: k.min(root.nrows()),
            par,
        })
    }

    /// Evaluates the dual at `y ≥ 0`.
    pub fn evaluate(&self, y: &[f64]) -> Result<KyFanPoint> {
        let (r, n) = (self.root.nrows(), self.root.ncols());
        if y.len() != n || y.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(DpError::InvalidParameter {
                name: "dual multipliers",
                reason: "need n finite non-negative entries".into(),
            });
        }
        let m = weighted_gram(self.root, y, self.par);
        let eig = SymmetricEigen::new(m.as_ref())?;
        let sig: Vec<f64> = eig.values.iter().rev().map(|v| v.max(0.0)).collect();
        let q = Mat::from_fn(r, r, |i, j| eig.vectors[(i, r - 1 - j)]);
        let (t, alpha, h) = ky_fan_parts(&sig, self.k);
        if !(alpha.is_finite() && alpha > 1e-14 * sig[0] && h > 0.0) {
            return Err(DpError::NotConverged {
                solver: "Ky Fan dual",
                reason: "M(y) = C D Cᵀ is numerically singular at these multipliers".into(),
            });
        }
        let c_hat = gemm(self.root.transpose(), q.as_ref(), self.par);
        let inv_sqrt: Vec<f64> = (0..r)
            .map(|i| 1.0 / if i < t { sig[i] } else { alpha }.sqrt())
            .collect();
        let weighted = Mat::from_fn(n, r, |e, i| c_hat[(e, i)] * inv_sqrt[i]);
        let x = row_dots(&weighted, &c_hat);
        let gamma = lewis_gamma(&sig, t, alpha);
        Ok(KyFanPoint {
            y: y.to_vec(),
            h,
            x,
            c_hat,
            q,
            sig,
            t,
            alpha,
            k: self.k,
            gamma,
        })
    }
}

impl ConcaveDual for KyFanDual<'_> {
    type Point = KyFanPoint;

    // Small k makes the dual nearly flat along most directions (h depends
    // on the tail only through its sum): Newton creeps for tens of
    // iterations before its quadratic phase (measured on ranges over 256
    // cells at k = 5: 44 short steps, then the gap falls 1e-2 → 4e-16 in
    // three), so a stagnation stop would end it early.
    const STOP_ON_STAGNATION: bool = false;
    const ADAPTIVE_DAMPING: bool = true;

    fn point(&self, y: &[f64]) -> Result<KyFanPoint> {
        self.evaluate(y)
    }

    fn multipliers<'b>(&self, point: &'b KyFanPoint) -> &'b [f64] {
        &point.y
    }

    fn half_value(&self, point: &KyFanPoint) -> f64 {
        point.h
    }

    fn gradient(&self, point: &KyFanPoint) -> Vec<f64> {
        point.gradient()
    }

    fn neg_hessian_times(&self, point: &KyFanPoint, v: &[f64], rows: &[usize]) -> Vec<f64> {
        point.neg_hessian_times_on(v, rows, self.par)
    }

    fn neg_hessian_diagonal(&self, point: &KyFanPoint) -> Vec<f64> {
        point.neg_hessian_diagonal(self.par)
    }

    fn scaled(&self, point: KyFanPoint, t: f64) -> KyFanPoint {
        point.scaled(t)
    }

    fn lower_bound(&self, point: &KyFanPoint) -> f64 {
        point.lower_bound()
    }

    fn relative_gap(&self, point: &KyFanPoint) -> f64 {
        point.relative_gap()
    }
}

/// The sum of the k largest eigenvalues of the symmetric `a`.
pub fn ky_fan_norm(a: MatRef<'_, f64>, k: usize) -> Result<f64> {
    let values = SymmetricEigen::values_only(a)?;
    Ok(values.iter().rev().take(k).sum())
}

/// The Gram root of W in its column space: `W = B C` with B (m×r)
/// orthonormal and C (r×n) of full row rank, from the thin SVD with the
/// default rank tolerance; C is divided by `σ_max(W)`, returned third.
fn column_space_root(workload: MatRef<'_, f64>) -> Result<(Mat<f64>, Mat<f64>, f64)> {
    let svd = ThinSvd::new(workload)?;
    let r = svd.rank();
    let smax = svd.singular_values[0];
    let b = Mat::from_fn(workload.nrows(), r, |i, j| svd.u[(i, j)]);
    let c = Mat::from_fn(r, workload.ncols(), |i, j| {
        svd.singular_values[i] / smax * svd.v[(j, i)]
    });
    Ok((b, c, smax))
}

/// Solves program (4)–(6) for the workload W (m×n, one query per row) and
/// `1 ≤ k ≤ m` (see the module notes); returns Σ with its certificate.
pub fn optimal_covariance(
    workload: MatRef<'_, f64>,
    k: usize,
    options: &KyFanOptions,
) -> Result<KyFanCovariance> {
    let start = Instant::now();
    dp_core::validate::check_nonzero_matrix("workload", workload)?;
    let m = workload.nrows();
    if k == 0 || k > m {
        return Err(DpError::InvalidParameter {
            name: "k",
            reason: format!("the Ky Fan norm needs 1 ≤ k ≤ m = {m}, got k = {k}"),
        });
    }
    if options.tolerance.is_nan() || options.tolerance <= 0.0 || options.max_iterations == 0 {
        return Err(DpError::InvalidParameter {
            name: "Ky Fan options",
            reason: "tolerance must be positive and max_iterations at least 1".into(),
        });
    }
    let par = options.parallelism;
    let (b, c, smax) = column_space_root(workload)?;
    let r = c.nrows();
    let dual = KyFanDual::new(c.as_ref(), k, par)?;
    let solve = projected_newton::maximize(
        &dual,
        &vec![1.0; c.ncols()],
        options.tolerance,
        options.max_iterations,
    )?;
    let p = &solve.point;
    let xmax = p.x.iter().copied().fold(0.0, f64::max);
    let root_eig = p.sqrt_sigma_prime();
    // The complement of W's column space: √α (the Lagrangian minimizer)
    // when k < r; at k ≥ r (no tail) a small multiple of the smallest
    // eigenvalue, costing at most 1e-3 of the tolerance in the objective.
    let smallest = root_eig.iter().copied().fold(f64::INFINITY, f64::min);
    let rho = if k < r {
        xmax * p.alpha.sqrt()
    } else {
        xmax * smallest.min(1e-3 * options.tolerance * p.h / (k + 1 - r) as f64)
    };
    let bq = gemm(b.as_ref(), p.q.as_ref(), par);
    let scaled = Mat::from_fn(m, r, |i, j| bq[(i, j)] * (xmax * root_eig[j] - rho));
    let mut sigma = gemm(scaled.as_ref(), bq.transpose(), par);
    for i in 0..m {
        sigma[(i, i)] += rho;
    }
    dp_linalg::symmetrize(&mut sigma);
    let unscale = smax * smax;
    for j in 0..m {
        for i in 0..m {
            sigma[(i, j)] *= unscale;
        }
    }
    // The privacy condition through Σ's own Cholesky factor.
    let largest = |sigma: &Mat<f64>| -> Result<f64> {
        let chol = Cholesky::factor(sigma.as_ref())?;
        let mut whitened = workload.to_owned();
        chol.solve_lower_in_place(whitened.as_mut(), par)?;
        Ok((0..whitened.ncols())
            .map(|e| whitened.col(e).squared_norm_l2())
            .fold(0.0, f64::max))
    };
    let mut condition = largest(&sigma)?;
    if condition > 1.0 {
        for j in 0..m {
            for i in 0..m {
                sigma[(i, j)] *= condition;
            }
        }
        condition = largest(&sigma)?;
    }
    let objective = ky_fan_norm(sigma.as_ref(), k)?;
    let lower_bound = p.lower_bound() * unscale;
    let relative_gap = ((objective - lower_bound) / objective).max(0.0);
    if !(objective.is_finite() && lower_bound.is_finite()) {
        return Err(DpError::NotConverged {
            solver: "Ky Fan covariance",
            reason: "non-finite objective".into(),
        });
    }
    Ok(KyFanCovariance {
        covariance: sigma,
        k,
        objective,
        lower_bound,
        relative_gap,
        largest_condition: condition,
        rank: r,
        iterations: solve.iterations,
        converged: relative_gap <= options.tolerance,
        seconds: start.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::{Rng, SeedableRng};

    fn random(m: usize, n: usize, seed: u64) -> Mat<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        Mat::from_fn(m, n, |_, _| rng.random::<f64>() * 2.0 - 1.0)
    }

    /// Ranges over n cells (m of them, seeded).
    fn ranges(m: usize, n: usize, seed: u64) -> Mat<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut w = Mat::<f64>::zeros(m, n);
        for i in 0..m {
            let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
            for j in a.min(b)..=a.max(b) {
                w[(i, j)] = 1.0;
            }
        }
        w
    }

    /// `h_k` against its variational form
    /// `max {Σ √(zᵢσᵢ) : 0 ≤ zᵢ ≤ 1, Σ zᵢ = k}`: the maximizer
    /// `zᵢ = min(1, σᵢ/α)` attains h, and random feasible z never exceed it.
    #[test]
    fn h_k_is_the_variational_maximum() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for trial in 0..200usize {
            let len = 1 + trial % 9;
            let mut sig: Vec<f64> = (0..len)
                .map(|_| rng.random::<f64>().powi(1 + (trial % 4) as i32))
                .collect();
            if trial % 5 == 0 {
                sig[len - 1] = 0.0;
            }
            sig.sort_by(|a, b| b.total_cmp(a));
            let k = 1 + trial % len;
            // k past the spectrum reads as the whole spectrum: Σ √σᵢ.
            let nuclear: f64 = sig.iter().map(|v| v.sqrt()).sum();
            let (_, _, h_all) = ky_fan_parts(&sig, len + 3);
            assert!((h_all - nuclear).abs() < 1e-12 * nuclear.max(1.0));
            let (t, alpha, h) = ky_fan_parts(&sig, k);
            assert!(t < k);
            // (α = 0: the tail is all zeros, any k − t of them take z = 1.)
            let z: Vec<f64> = (0..len)
                .map(|i| match (i < t, alpha > 0.0) {
                    (true, _) => 1.0,
                    (false, true) => sig[i] / alpha,
                    (false, false) => f64::from(u8::from(i < k)),
                })
                .collect();
            assert!(z.iter().all(|&v| v <= 1.0 + 1e-12));
            assert!((z.iter().sum::<f64>() - k as f64).abs() < 1e-9);
            let attained: f64 = z.iter().zip(&sig).map(|(a, b)| (a * b).sqrt()).sum();
            assert!(
                (attained - h).abs() < 1e-12 * h.max(1.0),
                "{attained} vs {h}"
            );
            for _ in 0..50 {
                // A random point of the capped simplex: Dirichlet-like
                // weights scaled to k, clipped, rebalanced.
                let mut z: Vec<f64> = (0..len).map(|_| rng.random::<f64>()).collect();
                for _ in 0..50 {
                    let s: f64 = z.iter().sum();
                    z.iter_mut().for_each(|v| *v = (*v * k as f64 / s).min(1.0));
                }
                if (z.iter().sum::<f64>() - k as f64).abs() > 1e-9 {
                    continue;
                }
                let val: f64 = z.iter().zip(&sig).map(|(a, b)| (a * b).sqrt()).sum();
                assert!(val <= h * (1.0 + 1e-12) + 1e-15);
            }
        }
        assert_eq!(ky_fan_parts(&[2.0, 1.0], 0), (0, 0.0, 0.0));
    }

    /// The gradient `x − 1` and the Hessian-vector products match central
    /// differences of `g`, at points whose head/tail split varies with k.
    #[test]
    fn derivatives_match_finite_differences() {
        let par = Par::Seq;
        for (seed, k) in [(1u64, 1usize), (2, 2), (3, 3), (4, 5), (5, 6)] {
            let (r, n) = (6, 9);
            let c = random(r, n, seed);
            let dual = KyFanDual::new(c.as_ref(), k, par).unwrap();
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed + 100);
            let y: Vec<f64> = (0..n).map(|_| 0.5 + rng.random::<f64>()).collect();
            let p = dual.evaluate(&y).unwrap();
            let g = p.gradient();
            let h = 1e-6;
            for e in 0..n {
                let mut yp = y.clone();
                let mut ym = y.clone();
                yp[e] += h;
                ym[e] -= h;
                let fd = (dual.evaluate(&yp).unwrap().value()
                    - dual.evaluate(&ym).unwrap().value())
                    / (2.0 * h);
                assert!((fd - g[e]).abs() < 1e-6, "k {k} grad {e}: {fd} vs {}", g[e]);
            }
            let v: Vec<f64> = (0..n).map(|_| rng.random::<f64>() - 0.5).collect();
            let hv = p.neg_hessian_times(&v, par);
            let step = 1e-5;
            let yp: Vec<f64> = y.iter().zip(&v).map(|(a, b)| a + step * b).collect();
            let ym: Vec<f64> = y.iter().zip(&v).map(|(a, b)| a - step * b).collect();
            let (gp, gm) = (
                dual.evaluate(&yp).unwrap().gradient(),
                dual.evaluate(&ym).unwrap().gradient(),
            );
            let scale = hv.iter().map(|a| a.abs()).fold(0.0, f64::max);
            for e in 0..n {
                let fd = -(gp[e] - gm[e]) / (2.0 * step);
                assert!(
                    (fd - hv[e]).abs() < 1e-5 * scale.max(1.0),
                    "k {k} (t = {}) Hv {e}: {fd} vs {}",
                    p.t,
                    hv[e]
                );
            }
            let diag = p.neg_hessian_diagonal(par);
            for e in 0..n {
                let mut unit = vec![0.0; n];
                unit[e] = 1.0;
                let col = p.neg_hessian_times(&unit, par);
                assert!((col[e] - diag[e]).abs() < 1e-10 * scale.max(1.0));
            }
        }
    }

    /// Weak duality and the certificate: the returned Σ is feasible, its
    /// Ky Fan norm is within the tolerance of the dual bound, and no
    /// random feasible covariance (a random SPD shape scaled onto the
    /// constraint) goes below the bound.
    #[test]
    fn optimum_is_certified_and_never_beaten() {
        let w = ranges(24, 20, 3);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(8);
        for k in [1, 2, 4, 8, 16, 24] {
            let opt = optimal_covariance(w.as_ref(), k, &KyFanOptions::default()).unwrap();
            assert!(opt.converged, "k {k}: gap {}", opt.relative_gap);
            assert!(opt.largest_condition <= 1.0 + 1e-12);
            assert!(opt.objective >= opt.lower_bound * (1.0 - 1e-12));
            for _ in 0..100 {
                let a = Mat::from_fn(24, 24, |_, _| rng.random::<f64>() - 0.5);
                let mut shape = a.as_ref() * a.transpose();
                for i in 0..24 {
                    shape[(i, i)] += 0.05;
                }
                let chol = Cholesky::factor(shape.as_ref()).unwrap();
                let mut wh = w.clone();
                chol.solve_lower_in_place(wh.as_mut(), Par::Seq).unwrap();
                let q = (0..20)
                    .map(|e| wh.col(e).squared_norm_l2())
                    .fold(0.0, f64::max);
                let value = ky_fan_norm(shape.as_ref(), k).unwrap() * q;
                assert!(value >= opt.lower_bound * (1.0 - 1e-12));
            }
        }
    }

    /// Closed forms: at k = 1 the optimum is `maxₑ ‖w_e‖²` (Σ = λI is
    /// optimal: λ_max(Σ) ≤ λ forces `w_eᵀΣ⁻¹w_e ≥ ‖w_e‖²/λ`); at k ≥ rank
    /// the program is COA's and its optimum is COA's certified l2 optimum.
    #[test]
    fn closed_forms_and_coa_agree() {
        let w = ranges(30, 16, 4);
        let opt = optimal_covariance(w.as_ref(), 1, &KyFanOptions::default()).unwrap();
        let max_col = (0..16)
            .map(|e| w.col(e).squared_norm_l2())
            .fold(0.0, f64::max);
        assert!((opt.objective - max_col).abs() < 1e-6 * max_col);
        assert!((opt.lower_bound - max_col).abs() < 1e-6 * max_col);
        // k ≥ rank (16): COA.
        let problem =
            crate::Problem::from_workload(w.as_ref(), crate::PrivacyModel::Approx).unwrap();
        let coa = crate::coa::Coa::default();
        let out = crate::StrategyOptimizer::optimize(&coa, &problem, &mut ()).unwrap();
        let coa_obj = problem.objective(out.strategy.as_ref()).unwrap();
        for k in [16, 20, 30] {
            let opt = optimal_covariance(w.as_ref(), k, &KyFanOptions::default()).unwrap();
            assert!(opt.converged, "k {k}: gap {}", opt.relative_gap);
            assert!(
                (opt.lower_bound - coa_obj).abs() < 2e-6 * coa_obj,
                "k {k}: {} vs COA {coa_obj}",
                opt.lower_bound
            );
            assert!(opt.objective <= coa_obj * (1.0 + 2e-6));
        }
        // Monotone in k.
        let mut last = 0.0;
        for k in 1..=16 {
            let opt = optimal_covariance(w.as_ref(), k, &KyFanOptions::default()).unwrap();
            assert!(opt.objective >= last * (1.0 - 1e-6));
            last = opt.objective;
        }
    }

    /// Rank-deficient W (m > rank) and bad input.
    #[test]
    fn rank_deficient_and_bad_input() {
        let base = random(5, 12, 6);
        let mix = random(40, 5, 7);
        let w = mix.as_ref() * base.as_ref();
        let opt = optimal_covariance(w.as_ref(), 3, &KyFanOptions::default()).unwrap();
        assert_eq!(opt.rank, 5);
        assert!(opt.converged && opt.largest_condition <= 1.0 + 1e-12);
        let opts = KyFanOptions::default();
        assert!(optimal_covariance(w.as_ref(), 0, &opts).is_err());
        assert!(optimal_covariance(w.as_ref(), 41, &opts).is_err());
        assert!(optimal_covariance(Mat::<f64>::zeros(3, 3).as_ref(), 1, &opts).is_err());
        let mut nan = w.clone();
        nan[(0, 0)] = f64::NAN;
        assert!(optimal_covariance(nan.as_ref(), 1, &opts).is_err());
        let bad = KyFanOptions {
            tolerance: 0.0,
            ..opts
        };
        assert!(optimal_covariance(w.as_ref(), 1, &bad).is_err());
    }
}
