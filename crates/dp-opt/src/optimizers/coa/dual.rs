//! The Lagrange dual of COA's Program (9)–(10), used as a certificate of
//! optimality and, by Newton's method, as a solver in its own right for
//! rank-deficient workloads (whose primal optimum lies on the boundary).
//!
//! For multipliers `y > 0`, `D = diag(y)`, the Lagrangian
//! `tr(X⁻¹V) + Σ yᵢ(Xᵢᵢ − 1)` is minimized over `X ≻ 0` by
//! `X = D^{-1/2} S D^{-1/2}` with `S = (D^{1/2} V D^{1/2})^{1/2}`, giving the
//! concave dual function `g(y) = 2 tr(S) − Σ yᵢ ≤ F(X)` for every feasible
//! `X`.
//!
//! **Reduction to the row space of W.** With `V = CᵀC` for a full-row-rank
//! `C` (r×n, the Gram root), the nonzero spectrum of `D^{1/2}VD^{1/2}` is
//! that of the r×r matrix `M(y) = C D Cᵀ = Σᵢ yᵢ cᵢcᵢᵀ`, so
//! `f(y) = tr S = tr M^{1/2}` and, with `M = QΛQᵀ`, `sₖ = √λₖ`, `Ĉ = CᵀQ`:
//!
//! - `∂f/∂yᵢ = ½ Σₖ Ĉᵢₖ² / sₖ`, and `Xᵢᵢ = Σₖ Ĉᵢₖ²/sₖ` is the diagonal of
//!   the Lagrangian minimizer `X = CᵀM^{-1/2}C`;
//! - `∂²f/∂yᵢ∂yⱼ = ½ Σₖₗ Γₖₗ ĈᵢₖĈᵢₗĈⱼₖĈⱼₗ` with the divided differences of
//!   `λ^{-1/2}`: `Γₖₗ = −1 / (sₖ sₗ (sₖ + sₗ))` (Daleckii–Krein), so a
//!   Hessian-vector product is `(∇²f v)ᵢ = ½ ĉᵢᵀ [Γ ∘ (Ĉᵀ diag(v) Ĉ)] ĉᵢ`:
//!   two n×r×r products, never an n×n one.
//!
//! Maximizing over a scale `t y` gives the scale-free bound
//! `ℓ(y) = f(y)² / Σ yᵢ ≥ g(y)`. The strategy `A = Λ^{-1/4} Qᵀ C` has
//! `AᵀA = X` and objective `tr(V X⁺) · maxᵢ Xᵢᵢ = f(y) · maxᵢ Xᵢᵢ`, so one
//! dual point yields a strategy and a bound whose ratio is
//! `maxᵢ Xᵢᵢ / X̄` with `X̄ = Σ yᵢXᵢᵢ / Σ yᵢ = f / Σ yᵢ`; at the dual
//! optimum `∇g = 0` says `Xᵢᵢ = 1` for every cell and the gap closes.

use dp_core::{DpError, Result};
use dp_linalg::{Mat, MatRef, Par, SymmetricEigen};

use crate::dense::{
    gemm, row_dots, spectral_hessian_diagonal, spectral_hessian_rows, weighted_gram,
};
use crate::solvers::engine::Budget;
use crate::solvers::projected_newton::{self, ConcaveDual, DualBase, DualEvaluation, NewtonSolve};

/// What one dual point certifies: its [`DualEvaluation::lower_bound`]
/// `ℓ(y) = f(y)² / Σ yᵢ` bounds the optimal `tr(X⁻¹V)` over `diag(X) ≤ 1`
/// from below.
#[derive(Debug, Clone)]
pub struct DualPoint {
    /// `y`, `f(y) = tr M(y)^{1/2}` and `Xᵢᵢ = Σₖ Ĉᵢₖ²/sₖ`, the diagonal
    /// of the Lagrangian minimizer.
    pub base: DualBase,
    /// `Ĉ = CᵀQ` (n×r).
    c_hat: Mat<f64>,
    /// `sₖ = √λₖ(M)`.
    s: Vec<f64>,
    /// Eigenvectors `Q` of `M` (r×r).
    q: Mat<f64>,
}

impl DualPoint {
    /// The strategy `Λ^{-1/4} Qᵀ C / √(maxᵢ Xᵢᵢ)` (r×n, `Δ₂ = 1`), its
    /// objective `f(y) · maxᵢ Xᵢᵢ`.
    pub fn strategy(&self, root: MatRef<'_, f64>, par: Par) -> (Mat<f64>, f64) {
        let xmax = self.base.x.iter().copied().fold(0.0, f64::max);
        let inv = 1.0 / xmax.sqrt();
        let scaled_qt = Mat::from_fn(self.q.ncols(), self.q.nrows(), |k, i| {
            self.q[(i, k)] / self.s[k].sqrt() * inv
        });
        (gemm(scaled_qt.as_ref(), root, par), self.base.f * xmax)
    }
}

impl DualEvaluation for DualPoint {
    fn base(&self) -> &DualBase {
        &self.base
    }

    /// `(−∇²g) v = −2 ∇²f v`, i.e. `−ĉᵢᵀ[Γ ∘ (Ĉᵀ diag(v) Ĉ)]ĉᵢ` (positive
    /// semidefinite), on the rows in `rows`.
    fn neg_hessian_times_on(&self, v: &[f64], rows: &[usize], par: Par) -> Vec<f64> {
        spectral_hessian_rows(
            &self.c_hat,
            |k, l| gamma_neg(self.s[k], self.s[l]),
            v,
            rows,
            par,
        )
    }

    /// Diagonal of `−∇²g`: `Σₖₗ (−Γₖₗ) Ĉᵢₖ² Ĉᵢₗ²`.
    fn neg_hessian_diagonal(&self, par: Par) -> Vec<f64> {
        spectral_hessian_diagonal(&self.c_hat, |k, l| gamma_neg(self.s[k], self.s[l]), par)
    }

    /// `M(ty) = t M(y)` keeps Q and Ĉ, scales `sₖ` by `√t`, `f` by `√t`
    /// and `Xᵢᵢ` by `1/√t`.
    fn scaled(mut self, t: f64) -> Self {
        let rt = self.base.scale(t);
        self.s.iter_mut().for_each(|v| *v *= rt);
        self
    }
}

/// `−Γₖₗ = 1 / (sₖ sₗ (sₖ + sₗ))`.
fn gamma_neg(sk: f64, sl: f64) -> f64 {
    1.0 / (sk * sl * (sk + sl))
}

/// Evaluates the dual at `y` (entries ≥ 0, `M(y)` nonsingular) for `V = CᵀC`, `root` = C (r×n,
/// full row rank).
pub fn dual_point(root: MatRef<'_, f64>, y: &[f64], par: Par) -> Result<DualPoint> {
    let (r, n) = (root.nrows(), root.ncols());
    if y.len() != n || y.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
        return Err(DpError::InvalidParameter {
            name: "dual multipliers",
            reason: "need n finite non-negative entries".into(),
        });
    }
    let m = weighted_gram(root, y, par);
    let eig = SymmetricEigen::new(m.as_ref())?;
    let lmax = eig.values.iter().copied().fold(0.0, f64::max);
    if eig
        .values
        .iter()
        .any(|&l| !(l.is_finite() && l > 1e-15 * lmax.max(f64::MIN_POSITIVE)))
    {
        return Err(DpError::NotConverged {
            solver: "COA dual",
            reason: "M(y) = C D Cᵀ is numerically singular at these multipliers".into(),
        });
    }
    let s: Vec<f64> = eig.values.iter().map(|l| l.sqrt()).collect();
    let nuclear: f64 = s.iter().sum();
    let c_hat = gemm(root.transpose(), eig.vectors.as_ref(), par);
    let inv_s: Vec<f64> = s.iter().map(|v| 1.0 / v).collect();
    let weighted = Mat::from_fn(n, r, |i, k| c_hat[(i, k)] * inv_s[k]);
    let x_diag = row_dots(&weighted, &c_hat);
    Ok(DualPoint {
        base: DualBase {
            y: y.to_vec(),
            f: nuclear,
            x: x_diag,
        },
        c_hat,
        s,
        q: eig.vectors,
    })
}

/// A rigorous lower bound `ℓ(y) = f(y)² / Σ yᵢ` on the optimum of
/// Program (10) for `V = CᵀC`, valid for every `y ≥ 0` (singular `M(y)`
/// included), with `f(y) = tr M(y)^{1/2} = ‖C D^{1/2}‖_*` computed from the
/// singular values of `C D^{1/2}` rather than the eigenvalues of `M`: a
/// backward-stable SVD gets each singular value to `p ε σ_max`, where the
/// square roots of `M`'s eigenvalues carry `√(ε λ_max)`. Each singular
/// value is lowered by the allowance `max(r, n) ε σ_max` before summing,
/// so rounding cannot push the bound above the truth.
pub fn certified_lower_bound(root: MatRef<'_, f64>, y: &[f64]) -> Result<f64> {
    let (r, n) = (root.nrows(), root.ncols());
    if y.len() != n || y.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
        return Err(DpError::InvalidParameter {
            name: "dual multipliers",
            reason: "need n finite non-negative entries".into(),
        });
    }
    let total: f64 = y.iter().sum();
    if total.is_nan() || total <= 0.0 {
        return Ok(0.0);
    }
    let cs = Mat::from_fn(r, n, |k, j| root[(k, j)] * y[j].sqrt());
    let singular = dp_linalg::ThinSvd::values_only(cs.as_ref())?;
    let largest = singular.iter().copied().fold(0.0, f64::max);
    let allowance = r.max(n) as f64 * f64::EPSILON * largest;
    let nuclear: f64 = singular.iter().map(|s| (s - allowance).max(0.0)).sum();
    Ok(nuclear * nuclear / total)
}

/// Outcome of [`maximize_trace_dual`].
pub type DualSolve = NewtonSolve<DualPoint>;

/// COA's dual as a [`ConcaveDual`]: `f(y) = tr(C D Cᵀ)^{1/2}`.
struct TraceDual<'a> {
    root: MatRef<'a, f64>,
    par: Par,
}

impl ConcaveDual for TraceDual<'_> {
    type Point = DualPoint;

    fn point(&self, y: &[f64]) -> Result<DualPoint> {
        dual_point(self.root, y, self.par)
    }

    fn par(&self) -> Par {
        self.par
    }
}

/// Maximizes the concave dual `g(y)` over `y ≥ 0` from `y0` by the
/// projected Newton method of [`crate::solvers::projected_newton`] (exact
/// Hessian-vector products, see the module notes), stopping when the
/// primal-dual ratio [`DualPoint::relative_gap`] is at most `tolerance`.
pub fn maximize_trace_dual(
    root: MatRef<'_, f64>,
    y0: &[f64],
    tolerance: f64,
    max_iterations: usize,
    par: Par,
) -> Result<DualSolve> {
    projected_newton::maximize(
        &TraceDual { root, par },
        y0,
        tolerance,
        Budget::iterations(max_iterations),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::Termination;

    fn root(r: usize, n: usize) -> Mat<f64> {
        Mat::from_fn(r, n, |i, j| {
            (((i * 37 + j * 11 + 5) % 19) as f64 - 9.0) / 5.0 + if i == j { 2.0 } else { 0.0 }
        })
    }

    /// The gradient `Xᵢᵢ − 1` and the Hessian-vector products of g against
    /// central differences of g itself, at a rank-deficient C.
    #[test]
    fn gradient_and_hessian_match_finite_differences() {
        let (r, n) = (4, 7);
        let c = root(r, n);
        let par = Par::Seq;
        let y: Vec<f64> = (0..n).map(|i| 0.5 + 0.1 * i as f64).collect();
        let p = dual_point(c.as_ref(), &y, par).unwrap();
        let g = |y: &[f64]| dual_point(c.as_ref(), y, par).unwrap().value();
        let grad = |y: &[f64]| dual_point(c.as_ref(), y, par).unwrap().gradient();
        let h = 1e-6;
        let v: Vec<f64> = (0..n).map(|i| ((i * 3) % 5) as f64 - 2.0).collect();
        let plus: Vec<f64> = y.iter().zip(&v).map(|(a, b)| a + h * b).collect();
        let minus: Vec<f64> = y.iter().zip(&v).map(|(a, b)| a - h * b).collect();
        let fd = (g(&plus) - g(&minus)) / (2.0 * h);
        let an: f64 = p.base.x.iter().zip(&v).map(|(x, vi)| (x - 1.0) * vi).sum();
        assert!((fd - an).abs() < 1e-7 * an.abs().max(1.0), "{fd} vs {an}");
        let gp = grad(&plus);
        let gm = grad(&minus);
        let hv = p.neg_hessian_times(&v, par);
        let diag = p.neg_hessian_diagonal(par);
        for i in 0..n {
            let fd_i = -(gp[i] - gm[i]) / (2.0 * h);
            assert!((fd_i - hv[i]).abs() < 1e-6 * hv[i].abs().max(1.0), "{i}");
            let mut e = vec![0.0; n];
            e[i] = 1.0;
            assert!((p.neg_hessian_times(&e, par)[i] - diag[i]).abs() < 1e-10 * diag[i]);
        }
    }

    /// The strategy's objective `f · max Xᵢᵢ` is what the error formula
    /// gives, and the bound never exceeds it.
    #[test]
    fn strategy_objective_matches_error_formula() {
        let (r, n) = (3, 6);
        let c = root(r, n);
        let y: Vec<f64> = (0..n).map(|i| 1.0 + (i % 3) as f64).collect();
        let p = dual_point(c.as_ref(), &y, Par::Seq).unwrap();
        let (a, obj) = p.strategy(c.as_ref(), Par::Seq);
        let gram = dp_linalg::gram(c.as_ref(), dp_linalg::Par::Seq);
        let eval = dp_core::accuracy::evaluate_strategy_gram(gram.as_ref(), a.as_ref()).unwrap();
        assert!((eval.l2_obj() - obj).abs() < 1e-9 * obj);
        assert!(p.lower_bound() <= obj);
        let solved = maximize_trace_dual(c.as_ref(), &y, 1e-10, 100, Par::Seq).unwrap();
        assert!(solved.point.relative_gap() <= 1e-10);
        assert!(solved.point.lower_bound() >= p.lower_bound());
        // Optimality, independently of the solver's own gap: the error
        // formula of its strategy meets its bound, and the bound holds
        // against 2,000 random strategies (rescaled to Δ₂ = 1 by l2_obj).
        let (best, _) = solved.point.strategy(c.as_ref(), Par::Seq);
        let best_obj = dp_core::accuracy::evaluate_strategy_gram(gram.as_ref(), best.as_ref())
            .unwrap()
            .l2_obj();
        assert!(best_obj <= solved.point.lower_bound() * (1.0 + 1e-9));
        let mut seed = 12345u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        };
        for _ in 0..2000 {
            let b = Mat::from_fn(n, n, |_, _| next());
            let obj = dp_core::accuracy::evaluate_strategy_gram(gram.as_ref(), b.as_ref())
                .unwrap()
                .l2_obj();
            assert!(obj >= solved.point.lower_bound() * (1.0 - 1e-12));
        }
    }

    /// Projected Newton keeps to its budget. No time: no step, a timeout,
    /// and the start itself (y0 moved to the best point of its ray,
    /// `t = (f/Σy)²`). Two iterations where the method needs more: the
    /// iteration cap after exactly two steps, each accepted step having
    /// raised the bound (the arc search accepts only an increase of g, and
    /// on the best ray g is the bound) without passing the optimum's.
    #[test]
    fn projected_newton_keeps_to_its_budget() {
        let (r, n) = (4, 9);
        let c = root(r, n);
        let dual = TraceDual {
            root: c.as_ref(),
            par: Par::Seq,
        };
        let y0 = vec![1.0; n];
        let run = |budget: Budget| projected_newton::maximize(&dual, &y0, 1e-10, budget).unwrap();
        let start = dual_point(c.as_ref(), &y0, Par::Seq).unwrap();
        let t = (start.base.f / n as f64).powi(2);

        let timed = run(Budget::iterations(100).with_seconds(Some(0.0)));
        assert_eq!(timed.termination, Termination::Timeout { seconds: 0.0 });
        assert_eq!((timed.iterations, timed.cg_iterations), (0, 0));
        let on_ray: Vec<f64> = y0.iter().map(|v| v * t).collect();
        assert_eq!(timed.point.base.y, on_ray);
        let start_bound = start.base.f.powi(2) / n as f64;
        assert!((timed.point.lower_bound() - start_bound).abs() <= 1e-12 * start_bound);

        let full = run(Budget::iterations(100));
        assert!(full.termination.converged(), "{}", full.termination);
        assert!(full.iterations > 2, "{}", full.iterations);
        let cut = run(Budget::iterations(2));
        assert_eq!(
            cut.termination,
            Termination::MaxIterations { iterations: 2 }
        );
        assert_eq!(cut.iterations, 2);
        assert!(cut.point.lower_bound() > timed.point.lower_bound());
        assert!(cut.point.lower_bound() <= full.point.lower_bound() * (1.0 + 1e-12));
        assert!(projected_newton::maximize(&dual, &y0, f64::NAN, Budget::iterations(1)).is_err());
    }
}
