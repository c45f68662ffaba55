//! The Newton machinery of COA's Algorithm 1 on Program (10): the iterate
//! (X, X⁻¹, F), the Hessian product of the quadratic model (15), the
//! preconditioners and the modified conjugate gradient of Algorithm 2.
//!
//! Memory is the constraint at n in the thousands: every routine writes
//! into n×n buffers the caller owns ([`Scratch`]) instead of allocating,
//! and a Newton step keeps its CG vectors only until the direction is
//! found, so a step peaks near a dozen n×n matrices (`cargo xtask bench
//! coa` reports the peak).

use dp_linalg::{Cholesky, Mat, Par, symmetrize};

use crate::dense::{gemm_into, inner, zero_diagonal};

/// The iterate: X, X⁻¹ and `F(X) = ⟨X⁻¹, V⟩` for the current V. The
/// Cholesky factor that proved `X ≻ 0` is dropped once X⁻¹ is formed.
pub(super) struct Iterate {
    pub x: Mat<f64>,
    pub z: Mat<f64>,
    pub f: f64,
}

/// The iterate at `x` when it is positive definite (Cholesky as the test,
/// paper Algorithm 1) and F is finite; otherwise `x` back.
pub(super) fn iterate(x: Mat<f64>, v: &Mat<f64>) -> Result<Iterate, Mat<f64>> {
    let Ok(chol) = Cholesky::factor(x.as_ref()) else {
        return Err(x);
    };
    let mut z = chol.inverse();
    drop(chol);
    symmetrize(&mut z);
    let f = inner(&z, v);
    if f.is_finite() {
        Ok(Iterate { x, z, f })
    } else {
        Err(x)
    }
}

/// Two n×n work buffers shared by the Hessian product and the
/// preconditioner (never in use at the same time).
pub(super) struct Scratch {
    a: Mat<f64>,
    b: Mat<f64>,
}

impl Scratch {
    pub fn new(n: usize) -> Self {
        Self {
            a: Mat::zeros(n, n),
            b: Mat::zeros(n, n),
        }
    }
}

/// `Y = Z V Z` into `out` (one n×n temporary).
pub(super) fn sandwich(z: &Mat<f64>, v: &Mat<f64>, out: &mut Mat<f64>, par: Par) {
    let n = z.nrows();
    let mut zv = Mat::zeros(n, n);
    gemm_into(&mut zv, z.as_ref(), v.as_ref(), par);
    gemm_into(out, zv.as_ref(), z.as_ref(), par);
    symmetrize(out);
}

/// Hessian product of Program (15) on the off-diagonal subspace:
/// `H[D] = offdiag(Y D Z + Z D Y)` with `Y = −G = Z V Z`, into `out`.
pub(super) fn hessian_product(
    y: &Mat<f64>,
    z: &Mat<f64>,
    d: &Mat<f64>,
    out: &mut Mat<f64>,
    scratch: &mut Scratch,
    par: Par,
) {
    gemm_into(&mut scratch.a, y.as_ref(), d.as_ref(), par);
    gemm_into(out, scratch.a.as_ref(), z.as_ref(), par);
    // Y D Z + (Y D Z)ᵀ = Y D Z + Z D Y (all three symmetric).
    let n = out.nrows();
    for j in 0..n {
        for i in (j + 1)..n {
            let s = out[(i, j)] + out[(j, i)];
            out[(i, j)] = s;
            out[(j, i)] = s;
        }
        out[(j, j)] = 0.0;
    }
}

/// The preconditioner of the Newton system.
pub(super) enum Preconditioner {
    /// Jacobi: the Hessian's diagonal `Yᵢᵢ Zⱼⱼ + Zᵢᵢ Yⱼⱼ`, applied
    /// entrywise without storing it.
    Jacobi { y_diag: Vec<f64>, z_diag: Vec<f64> },
    /// Near the optimum `Y = X⁻¹VX⁻¹` is nearly diagonal (KKT: the gradient
    /// is diagonal), so with `Dy = diag(Y)` the Hessian is close to
    /// `D ↦ Dy D Z + Z D Dy`, i.e. in `E = Dy^{1/2} D Dy^{1/2}` the Lyapunov
    /// operator of `Z̃ = Dy^{-1/2} Z Dy^{-1/2}`, which the eigenbasis of `Z̃`
    /// inverts exactly: `Ê = (UᵀR̃U) ./ (λₖ + λₗ)`.
    Lyapunov {
        inv_sqrt_dy: Vec<f64>,
        basis: Mat<f64>,
        values: Vec<f64>,
    },
}

impl Preconditioner {
    pub fn jacobi(y: &Mat<f64>, z: &Mat<f64>) -> Self {
        let n = y.nrows();
        Self::Jacobi {
            y_diag: (0..n).map(|i| y[(i, i)]).collect(),
            z_diag: (0..n).map(|i| z[(i, i)]).collect(),
        }
    }

    /// The Lyapunov preconditioner, built in the scratch buffers.
    pub fn lyapunov(y: &Mat<f64>, z: &Mat<f64>, scratch: &mut Scratch) -> Option<Self> {
        let work = &mut scratch.a;
        let n = y.nrows();
        let inv_sqrt_dy: Vec<f64> = (0..n)
            .map(|i| 1.0 / y[(i, i)].max(f64::MIN_POSITIVE).sqrt())
            .collect();
        for j in 0..n {
            for i in 0..n {
                work[(i, j)] = z[(i, j)] * inv_sqrt_dy[i] * inv_sqrt_dy[j];
            }
        }
        let eig = dp_linalg::SymmetricEigen::new(work.as_ref()).ok()?;
        Some(Self::Lyapunov {
            inv_sqrt_dy,
            basis: eig.vectors,
            values: eig.values,
        })
    }

    /// `out ← P⁻¹ r` on the off-diagonal subspace.
    pub fn apply(&self, r: &Mat<f64>, out: &mut Mat<f64>, scratch: &mut Scratch, par: Par) {
        let n = r.nrows();
        match self {
            Self::Jacobi { y_diag, z_diag } => {
                for j in 0..n {
                    for i in 0..n {
                        let h = y_diag[i] * z_diag[j] + z_diag[i] * y_diag[j];
                        out[(i, j)] = r[(i, j)] / h.max(f64::MIN_POSITIVE);
                    }
                }
            }
            Self::Lyapunov {
                inv_sqrt_dy,
                basis,
                values,
            } => {
                let Scratch { a, b } = scratch;
                for j in 0..n {
                    for i in 0..n {
                        a[(i, j)] = r[(i, j)] * inv_sqrt_dy[i] * inv_sqrt_dy[j];
                    }
                }
                gemm_into(b, basis.transpose(), a.as_ref(), par);
                gemm_into(a, b.as_ref(), basis.as_ref(), par);
                for j in 0..n {
                    for i in 0..n {
                        a[(i, j)] /= (values[i] + values[j]).max(f64::MIN_POSITIVE);
                    }
                }
                gemm_into(b, basis.as_ref(), a.as_ref(), par);
                gemm_into(out, b.as_ref(), basis.transpose(), par);
                for j in 0..n {
                    for i in 0..n {
                        out[(i, j)] *= inv_sqrt_dy[i] * inv_sqrt_dy[j];
                    }
                }
            }
        }
        symmetrize(out);
        zero_diagonal(out);
    }
}

/// Algorithm 2, preconditioned: conjugate gradient on the off-diagonal
/// subspace for `H[D] = −offdiag(G)`, stopped by an Eisenstat–Walker
/// forcing term or after `max_iter` iterations. Returns the direction and
/// the iterations taken; its four CG vectors live only inside the call.
pub(super) fn newton_direction(
    y: &Mat<f64>,
    z: &Mat<f64>,
    max_iter: usize,
    precond: &Preconditioner,
    scratch: &mut Scratch,
    par: Par,
) -> (Mat<f64>, usize) {
    let n = y.nrows();
    // −G = Y; its off-diagonal part is the right-hand side.
    let mut r = y.clone();
    zero_diagonal(&mut r);
    let b_norm = inner(&r, &r).sqrt();
    let mut d = Mat::zeros(n, n);
    let mut s = Mat::zeros(n, n);
    precond.apply(&r, &mut s, scratch, par);
    let mut p = s.clone();
    let mut rs = inner(&r, &s);
    // Forcing term relative to the size of Y: loose far from the optimum,
    // tight near it (superlinear inexact Newton, Nocedal & Wright (7.3):
    // η = min(0.5, √‖∇F‖), here with ‖∇F‖ relative to ‖diag Y‖).
    let y_diag_norm = (0..n).map(|i| y[(i, i)] * y[(i, i)]).sum::<f64>().sqrt();
    let forcing = (b_norm / y_diag_norm.max(f64::MIN_POSITIVE))
        .sqrt()
        .min(0.5);
    // `s` doubles as the Hessian product's output (it is recomputed from
    // r before its next use as the preconditioned residual).
    let mut iters = 0;
    for _ in 0..max_iter {
        if rs <= 0.0 || !rs.is_finite() {
            break;
        }
        iters += 1;
        hessian_product(y, z, &p, &mut s, scratch, par);
        let php = inner(&p, &s);
        if php <= 0.0 || !php.is_finite() {
            break;
        }
        let alpha = rs / php;
        d += &p * alpha;
        r -= &s * alpha;
        let r_norm = inner(&r, &r).sqrt();
        if r_norm <= forcing * b_norm {
            break;
        }
        precond.apply(&r, &mut s, scratch, par);
        let rs_new = inner(&r, &s);
        let beta = rs_new / rs;
        for j in 0..n {
            let (pc, sc) = (p.col_as_slice_mut(j), s.col_as_slice(j));
            for (pv, sv) in pc.iter_mut().zip(sc) {
                *pv = sv + beta * *pv;
            }
        }
        rs = rs_new;
    }
    (d, iters)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::dense::gemm;

    fn spd(n: usize, seed: u64) -> Mat<f64> {
        let a = Mat::from_fn(n + 2, n, |i, j| {
            (((i * 31 + j * 17 + seed as usize) % 23) as f64 - 11.0) / 7.0
        });
        let mut g = dp_linalg::gram(a.as_ref(), dp_linalg::Par::Seq);
        for i in 0..n {
            g[(i, i)] += 0.5;
        }
        g
    }

    fn objective(x: &Mat<f64>, v: &Mat<f64>) -> f64 {
        iterate(x.clone(), v).ok().unwrap().f
    }

    /// G = −X⁻¹VX⁻¹ and H[D] = −(G D Z + Z D G) against central differences.
    #[test]
    fn gradient_and_hessian_products_match_finite_differences() {
        let n = 6;
        let v = spd(n, 1);
        let mut x = spd(n, 2);
        // Make X a feasible point: unit diagonal.
        let d: Vec<f64> = (0..n).map(|i| 1.0 / x[(i, i)].sqrt()).collect();
        x = Mat::from_fn(n, n, |i, j| x[(i, j)] * d[i] * d[j]);
        let it = iterate(x.clone(), &v).ok().unwrap();
        let par = Par::Seq;
        let mut y = Mat::zeros(n, n);
        sandwich(&it.z, &v, &mut y, par); // −G
        let dir = Mat::from_fn(n, n, |i, j| {
            if i == j {
                0.0
            } else {
                ((i + 2 * j) % 5) as f64 - 2.0
            }
        });
        let dir = Mat::from_fn(n, n, |i, j| dir[(i, j)] + dir[(j, i)]);
        let h = 1e-5;
        let fd = (objective(&(&x + &dir * h), &v) - objective(&(&x - &dir * h), &v)) / (2.0 * h);
        let analytic = -inner(&y, &dir);
        assert!(
            (fd - analytic).abs() < 1e-6 * analytic.abs().max(1.0),
            "{fd} vs {analytic}"
        );
        // Directional derivative of the gradient −Y along dir equals H[dir].
        let grad = |x: &Mat<f64>| {
            let z = iterate(x.clone(), &v).ok().unwrap().z;
            let y = gemm(gemm(z.as_ref(), v.as_ref(), par).as_ref(), z.as_ref(), par);
            y * -1.0
        };
        let fd_h = (grad(&(&x + &dir * h)) - grad(&(&x - &dir * h))) * (1.0 / (2.0 * h));
        let mut scratch = Scratch::new(n);
        let mut hd = Mat::zeros(n, n);
        hessian_product(&y, &it.z, &dir, &mut hd, &mut scratch, par);
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    assert!(
                        (fd_h[(i, j)] - hd[(i, j)]).abs() < 1e-5 * hd.norm_max(),
                        "({i},{j})"
                    );
                }
            }
        }
    }

    /// Both preconditioners invert their model operator: the Jacobi one
    /// divides by the Hessian's diagonal, the Lyapunov one solves
    /// `Dy E Z + Z E Dy = R` (checked by applying the operator).
    #[test]
    fn preconditioners_invert_their_models() {
        let n = 5;
        let z = spd(n, 3);
        let y = spd(n, 4);
        let r = Mat::from_fn(n, n, |i, j| {
            if i == j {
                0.0
            } else {
                ((i * j + i + j) % 7) as f64 - 3.0
            }
        });
        let r = Mat::from_fn(n, n, |i, j| r[(i, j)] + r[(j, i)]);
        let mut scratch = Scratch::new(n);
        let mut out = Mat::zeros(n, n);
        // With Z diagonal the model `Dy E Z + Z E Dy = R` decouples by
        // entry, so the preconditioner's zeroed diagonal loses nothing and
        // its output must solve the model exactly.
        let dy: Vec<f64> = (0..n).map(|i| y[(i, i)]).collect();
        let z_diag = Mat::from_fn(n, n, |i, j| if i == j { z[(i, i)] } else { 0.0 });
        let lyap = Preconditioner::lyapunov(&y, &z_diag, &mut scratch).unwrap();
        lyap.apply(&r, &mut out, &mut scratch, Par::Seq);
        let dez = Mat::from_fn(n, n, |i, j| dy[i] * out[(i, j)]) * &z_diag;
        let modeled = &dez + dez.transpose();
        assert!((&modeled - &r).norm_max() < 1e-10 * r.norm_max());
        let jac = Preconditioner::jacobi(&y, &z);
        jac.apply(&r, &mut out, &mut scratch, Par::Seq);
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    let h = y[(i, i)] * z[(j, j)] + z[(i, i)] * y[(j, j)];
                    assert!((out[(i, j)] * h - r[(i, j)]).abs() < 1e-12 * r.norm_max());
                }
            }
        }
    }
}
