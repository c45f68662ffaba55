//! One Newton step of the interior-point method in the eigenbasis of Y
//! (the "one Newton step" notes of [`super`]): the iterate, its slacks,
//! the Woodbury-reduced Newton system and the log-barrier function.

use dp_linalg::{Cholesky, Mat, MatRef, Par, SymmetricEigen};

use crate::dense::{gemm, inner};

/// The iterate in its eigenbasis, with everything one step needs.
pub(super) struct Point {
    /// Eigenvalues of Y (ascending, positive).
    pub(super) lambda: Vec<f64>,
    /// Eigenvectors U.
    pub(super) basis: Mat<f64>,
    /// `A = CᵀU` (n×r).
    pub(super) a: Mat<f64>,
    /// Slacks `σᵢ = 1 − cᵢᵀYcᵢ`.
    pub(super) slack: Vec<f64>,
}

impl Point {
    pub(super) fn new(root: MatRef<'_, f64>, y: &Mat<f64>, par: Par) -> Option<Self> {
        let eig = SymmetricEigen::new(y.as_ref()).ok()?;
        if eig.values.iter().any(|l| !(l.is_finite() && *l > 0.0)) {
            return None;
        }
        let a = gemm(root.transpose(), eig.vectors.as_ref(), par);
        let slack = slacks(&a, &eig.values);
        if slack.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return None;
        }
        Some(Self {
            lambda: eig.values,
            basis: eig.vectors,
            a,
            slack,
        })
    }

    pub(super) fn trace_inverse(&self) -> f64 {
        self.lambda.iter().map(|l| 1.0 / l).sum()
    }

    /// `tr(Y⁻¹) · maxᵢ cᵢᵀYcᵢ`: the objective of `Y^{1/2}C` rescaled to unit
    /// sensitivity.
    pub(super) fn objective(&self) -> f64 {
        let smallest = self.slack.iter().copied().fold(f64::INFINITY, f64::min);
        self.trace_inverse() * (1.0 - smallest)
    }

    /// `Y^{1/2} C / √(maxᵢ cᵢᵀYcᵢ)`.
    pub(super) fn strategy(&self, par: Par) -> Mat<f64> {
        let smallest = self.slack.iter().copied().fold(f64::INFINITY, f64::min);
        let scale = 1.0 / (1.0 - smallest).sqrt();
        let r = self.lambda.len();
        // Y^{1/2} C = U diag(√λ) Uᵀ C = U diag(√λ) Aᵀ.
        let scaled_at = Mat::from_fn(r, self.a.nrows(), |k, i| {
            self.a[(i, k)] * self.lambda[k].sqrt() * scale
        });
        gemm(self.basis.as_ref(), scaled_at.as_ref(), par)
    }
}

/// `σᵢ = 1 − Σ_k λ_k A_ik²`.
pub(super) fn slacks(a: &Mat<f64>, lambda: &[f64]) -> Vec<f64> {
    let mut out = vec![1.0; a.nrows()];
    for (k, &l) in lambda.iter().enumerate() {
        for (o, v) in out.iter_mut().zip(a.col_as_slice(k)) {
            *o -= l * v * v;
        }
    }
    out
}

/// `dᵢ = aᵢᵀ T aᵢ` for the rows `aᵢ` of `a` (n×r) and symmetric `t` (r×r).
pub(super) fn quadratic_forms(a: &Mat<f64>, t: &Mat<f64>, par: Par) -> Vec<f64> {
    let at = gemm(a.as_ref(), t.as_ref(), par);
    let mut out = vec![0.0; a.nrows()];
    for k in 0..a.ncols() {
        for ((o, x), y) in out
            .iter_mut()
            .zip(at.col_as_slice(k))
            .zip(a.col_as_slice(k))
        {
            *o += x * y;
        }
    }
    out
}

/// Pivoted Cholesky of `K̃_kl = 2√(λ_kλ_l)/(λ_k+λ_l)` (unit diagonal,
/// positive definite), stopped when the largest remaining diagonal entry
/// is at most `tolerance`; returns the factor's columns scaled to
/// `w_q = λ^{3/2}/√2 ∘ L_q`, so that `Ω ≈ Σ_q w_q w_qᵀ`.
fn kernel_factors(lambda: &[f64], tolerance: f64) -> Vec<Vec<f64>> {
    let r = lambda.len();
    let kernel =
        |k: usize, l: usize| 2.0 * (lambda[k] * lambda[l]).sqrt() / (lambda[k] + lambda[l]);
    let mut residual = vec![1.0; r];
    let mut columns: Vec<Vec<f64>> = Vec::new();
    while columns.len() < r {
        let (pivot, largest) = residual
            .iter()
            .copied()
            .enumerate()
            .fold((0, f64::NEG_INFINITY), |b, c| if c.1 > b.1 { c } else { b });
        if largest.is_nan() || largest <= tolerance {
            break;
        }
        let root = largest.sqrt();
        let mut column: Vec<f64> = (0..r).map(|k| kernel(k, pivot)).collect();
        for previous in &columns {
            let p = previous[pivot];
            for (c, v) in column.iter_mut().zip(previous) {
                *c -= v * p;
            }
        }
        for c in column.iter_mut() {
            *c /= root;
        }
        for (res, c) in residual.iter_mut().zip(&column) {
            *res -= c * c;
        }
        residual[pivot] = 0.0;
        columns.push(column);
    }
    columns
        .into_iter()
        .map(|col| {
            col.iter()
                .zip(lambda)
                .map(|(c, l)| c * l * l.sqrt() / std::f64::consts::SQRT_2)
                .collect()
        })
        .collect()
}

/// `H = Σ_q (A diag(w_q) Aᵀ) ∘ (A diag(w_q) Aᵀ)`, lower triangle (the upper
/// is left as zero).
fn schur_matrix(a: &Mat<f64>, factors: &[Vec<f64>], par: Par) -> Mat<f64> {
    let n = a.nrows();
    let mut h = Mat::<f64>::zeros(n, n);
    let mut g = Mat::<f64>::zeros(n, n);
    for w in factors {
        let scaled = Mat::from_fn(a.ncols(), n, |k, i| a[(i, k)] * w[k]);
        dp_linalg::lower_triangle_of_product_into(&mut g, a.as_ref(), scaled.as_ref(), par);
        for j in 0..n {
            let (hc, gc) = (h.col_as_slice_mut(j), g.col_as_slice(j));
            for i in j..n {
                hc[i] += gc[i] * gc[i];
            }
        }
    }
    h
}

/// A Newton step of `φ_μ` in the eigenbasis of Y.
pub(super) struct NewtonStep {
    /// `Uᵀ ∇φ_μ U = −diag(λ⁻²) + Aᵀ diag(μ/σ) A` (read by the tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) gradient: Mat<f64>,
    /// `UᵀΔU`, the Newton direction.
    pub(super) step: Mat<f64>,
    /// `−⟨∇φ_μ, Δ⟩`.
    pub(super) decrement: f64,
}

/// Solves `∇²φ_μ[Δ] = −∇φ_μ` by the Woodbury reduction of the module
/// notes: `v = S⁻¹ b` with `S = H + diag(σ²/μ)`, `bᵢ = aᵢᵀ(Ω ∘ −G̃)aᵢ`,
/// then `Δ̃ = Ω ∘ (−G̃ − Aᵀ diag(v) A)`. `None` when S is not numerically
/// positive definite.
pub(super) fn newton_step(
    point: &Point,
    mu: f64,
    kernel_tolerance: f64,
    par: Par,
) -> Option<NewtonStep> {
    let (n, r) = (point.a.nrows(), point.lambda.len());
    let lambda = &point.lambda;
    let weighted = Mat::from_fn(n, r, |i, k| point.a[(i, k)] * mu / point.slack[i]);
    let mut gradient = gemm(point.a.transpose(), weighted.as_ref(), par);
    for (k, l) in lambda.iter().enumerate() {
        gradient[(k, k)] -= 1.0 / (l * l);
    }
    dp_linalg::symmetrize(&mut gradient);
    let omega = |k: usize, l: usize| {
        let (a, b) = (lambda[k], lambda[l]);
        a * a * b * b / (a + b)
    };
    let neg_grad_scaled = Mat::from_fn(r, r, |k, l| -gradient[(k, l)] * omega(k, l));
    let rhs = quadratic_forms(&point.a, &neg_grad_scaled, par);
    let factors = kernel_factors(lambda, kernel_tolerance);
    let mut schur = schur_matrix(&point.a, &factors, par);
    for (i, s) in point.slack.iter().enumerate() {
        schur[(i, i)] += s * s / mu;
    }
    let chol = Cholesky::factor(schur.as_ref()).ok()?;
    let rhs_mat = Mat::from_fn(n, 1, |i, _| rhs[i]);
    let v = chol.solve(rhs_mat.as_ref()).ok()?;
    let weighted = Mat::from_fn(n, r, |i, k| point.a[(i, k)] * v[(i, 0)]);
    let correction = gemm(point.a.transpose(), weighted.as_ref(), par);
    let mut step = Mat::from_fn(r, r, |k, l| {
        (-gradient[(k, l)] - correction[(k, l)]) * omega(k, l)
    });
    dp_linalg::symmetrize(&mut step);
    let decrement = -inner(&gradient, &step);
    Some(NewtonStep {
        gradient,
        step,
        decrement,
    })
}

/// `φ_μ` along the step: `tr((Λ + αΔ)⁻¹) − μ Σ log(σᵢ − α δσᵢ)`, or `None`
/// outside the domain.
pub(super) fn log_barrier_value(
    lambda: &[f64],
    step: &Mat<f64>,
    alpha: f64,
    slack: &[f64],
    slack_change: &[f64],
    mu: f64,
) -> Option<f64> {
    let r = lambda.len();
    let mut log_sum = 0.0;
    for (s, ds) in slack.iter().zip(slack_change) {
        let t = s - alpha * ds;
        if t.is_nan() || t <= 0.0 {
            return None;
        }
        log_sum += t.ln();
    }
    let m = Mat::from_fn(r, r, |k, l| {
        alpha * step[(k, l)] + if k == l { lambda[k] } else { 0.0 }
    });
    let chol = Cholesky::factor(m.as_ref()).ok()?;
    let inv = chol.inverse();
    let trace: f64 = (0..r).map(|k| inv[(k, k)]).sum();
    (trace.is_finite() && trace > 0.0).then_some(trace - mu * log_sum)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The Schur matrix from the kernel factorization equals the direct
    /// four-index sum, and the factorization reproduces Ω.
    #[test]
    fn schur_matrix_matches_the_direct_sum() {
        let (n, r) = (7, 5);
        let a = Mat::from_fn(n, r, |i, k| (((i * 7 + k * 3) % 11) as f64 - 5.0) / 4.0);
        let lambda = [1e-4, 3e-2, 0.5, 7.0, 1e3];
        let omega = |k: usize, l: usize| {
            let (x, y) = (lambda[k], lambda[l]);
            x * x * y * y / (x + y)
        };
        let factors = kernel_factors(&lambda, 1e-15);
        for k in 0..r {
            for l in 0..r {
                let approx: f64 = factors.iter().map(|w| w[k] * w[l]).sum();
                assert!(
                    (approx - omega(k, l)).abs() <= 1e-12 * omega(k, l),
                    "({k},{l})"
                );
            }
        }
        let h = schur_matrix(&a, &factors, Par::Seq);
        for i in 0..n {
            for j in 0..=i {
                let mut direct = 0.0;
                for k in 0..r {
                    for l in 0..r {
                        direct += omega(k, l) * a[(i, k)] * a[(i, l)] * a[(j, k)] * a[(j, l)];
                    }
                }
                assert!(
                    (h[(i, j)] - direct).abs() <= 1e-10 * direct.abs().max(1e-3),
                    "({i},{j}): {} vs {direct}",
                    h[(i, j)]
                );
            }
        }
    }
    /// `φ_μ(Y)` and `∇φ_μ(Y) = −Y⁻² + Σ (μ/σᵢ) cᵢcᵢᵀ` computed directly in
    /// the original coordinates (independent of the eigenbasis code).
    fn direct(c: &Mat<f64>, y: &Mat<f64>, mu: f64) -> (f64, Mat<f64>) {
        let (r, n) = (c.nrows(), c.ncols());
        let inv = Cholesky::factor(y.as_ref()).unwrap().inverse();
        let yc = y * c;
        let slack: Vec<f64> = (0..n)
            .map(|i| 1.0 - (0..r).map(|k| c[(k, i)] * yc[(k, i)]).sum::<f64>())
            .collect();
        let value = (0..r).map(|k| inv[(k, k)]).sum::<f64>()
            - mu * slack.iter().map(|s| s.ln()).sum::<f64>();
        let mut grad = -(&inv * &inv);
        for (i, s) in slack.iter().enumerate() {
            for k in 0..r {
                for l in 0..r {
                    grad[(k, l)] += mu / s * c[(k, i)] * c[(l, i)];
                }
            }
        }
        (value, grad)
    }

    fn small_problem() -> (Mat<f64>, Mat<f64>) {
        let (r, n) = (3, 6);
        let c = Mat::from_fn(r, n, |k, i| {
            (((k * 5 + i * 3) % 7) as f64 - 3.0) / 3.0 + if k == i { 1.0 } else { 0.0 }
        });
        // A feasible Y: 0.2 (C Cᵀ)^{-1/2}-like, checked by Point::new.
        let g = &c * c.transpose();
        let eig = SymmetricEigen::new(g.as_ref()).unwrap();
        let y = eig.map(|l| 0.3 / l.sqrt());
        (c, y)
    }

    /// The gradient against central differences of φ_μ, and the Newton
    /// step against finite differences of the (directly computed)
    /// gradient: `∇²φ_μ[Δ] = −∇φ_μ`.
    #[test]
    fn newton_step_matches_finite_differences() {
        let (c, y) = small_problem();
        let mu = 0.37;
        let point = Point::new(c.as_ref(), &y, Par::Seq).unwrap();
        let step = newton_step(&point, mu, 1e-15, Par::Seq).unwrap();
        let u = &point.basis;
        let grad = u * &step.gradient * u.transpose();
        let delta = u * &step.step * u.transpose();
        let (_, direct_grad) = direct(&c, &y, mu);
        assert!((&grad - &direct_grad).norm_max() < 1e-10 * direct_grad.norm_max());
        let r = y.nrows();
        let e = Mat::from_fn(r, r, |k, l| {
            ((k + 2 * l) % 3) as f64 - 1.0 + ((l + 2 * k) % 3) as f64 - 1.0
        });
        let h = 1e-6;
        let fd = (direct(&c, &(&y + &e * h), mu).0 - direct(&c, &(&y - &e * h), mu).0) / (2.0 * h);
        let analytic = inner(&grad, &e);
        assert!(
            (fd - analytic).abs() < 1e-6 * analytic.abs().max(1.0),
            "{fd} vs {analytic}"
        );
        let hd = (direct(&c, &(&y + &delta * h), mu).1 - direct(&c, &(&y - &delta * h), mu).1)
            * (1.0 / (2.0 * h));
        let residual = &hd + &grad;
        assert!(
            residual.norm_max() < 1e-6 * grad.norm_max(),
            "Hessian·Δ + ∇φ = {:e}",
            residual.norm_max()
        );
        assert!((step.decrement - (-inner(&grad, &delta))).abs() < 1e-10 * step.decrement.abs());
    }
}
