//! The Ky Fan dual of the projection mechanism's covariance program
//! (Nikolov, Theorem 4.2 and Definition 4.1): `h_k`, its evaluation at
//! `M(y) = C D Cᵀ` with the gradient and Lewis-formula Hessian products
//! the projected Newton method needs. The derivation is in the notes of
//! [`super::covariance`].

use dp_core::{DpError, Result};
use dp_linalg::{Mat, MatRef, Par, SymmetricEigen};

use crate::dense::{
    gemm, row_dots, spectral_hessian_diagonal, spectral_hessian_rows, weighted_gram,
};
use crate::solvers::projected_newton::{ConcaveDual, DualBase, DualEvaluation};

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
    /// `y`, `h_k(M(y))` and `xₑ = Σᵢ Ĉₑᵢ² / √σ'ᵢ`.
    pub(super) base: DualBase,
    /// `Ĉ = CᵀQ` (n×r), eigenvalues in decreasing order.
    c_hat: Mat<f64>,
    /// Eigenvectors of M, decreasing order.
    pub(super) q: Mat<f64>,
    /// Eigenvalues of M, decreasing.
    sig: Vec<f64>,
    t: usize,
    pub(super) alpha: f64,
    k: usize,
    /// Γ of Lewis's formula (r×r, see the module notes).
    gamma: Mat<f64>,
}

impl KyFanPoint {
    /// `σ'^{1/2}` (decreasing): the eigenvalues of the Lagrangian
    /// minimizer Σ on W's column space.
    pub(super) fn sqrt_sigma_prime(&self) -> Vec<f64> {
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
            base: DualBase {
                y: y.to_vec(),
                f: h,
                x,
            },
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
    // iterations before its quadratic phase, so a stagnation stop would
    // end it early.
    const STOP_ON_STAGNATION: bool = false;
    const ADAPTIVE_DAMPING: bool = true;

    fn point(&self, y: &[f64]) -> Result<KyFanPoint> {
        self.evaluate(y)
    }

    fn par(&self) -> Par {
        self.par
    }
}

impl DualEvaluation for KyFanPoint {
    fn base(&self) -> &DualBase {
        &self.base
    }

    /// `(−∇²g) v = −2 ∇²h v` on the rows in `rows`.
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
    fn neg_hessian_diagonal(&self, par: Par) -> Vec<f64> {
        let (c, w) = self.tail_curvature();
        spectral_hessian_diagonal(&self.c_hat, |k, l| self.gamma[(k, l)], par)
            .into_iter()
            .zip(&w)
            .map(|(h, wa)| -2.0 * (h + c * wa * wa))
            .collect()
    }

    /// The point at `τ y`: M scales by τ, h by √τ, x by 1/√τ, Γ by τ^{-3/2}.
    fn scaled(mut self, tau: f64) -> Self {
        self.base.scale(tau);
        self.sig.iter_mut().for_each(|v| *v *= tau);
        self.alpha *= tau;
        let g = tau.powf(-1.5);
        for j in 0..self.gamma.ncols() {
            for i in 0..self.gamma.nrows() {
                self.gamma[(i, j)] *= g;
            }
        }
        self
    }
}

/// The sum of the k largest eigenvalues of the symmetric `a`.
pub fn ky_fan_norm(a: MatRef<'_, f64>, k: usize) -> Result<f64> {
    let values = SymmetricEigen::values_only(a)?;
    Ok(values.iter().rev().take(k).sum())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::dense::random_uniform as random;
    use rand::{Rng, SeedableRng};

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
}
