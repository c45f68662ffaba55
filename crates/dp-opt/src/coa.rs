//! COA (Yuan et al., "Convex optimization for linear query processing
//! under approximate differential privacy", KDD 2016): the optimal
//! strategy for (ε,δ)-DP.
//!
//! Program (10): `min F(X) = ⟨X⁻¹, V⟩ s.t. diag(X) = 1, X ≻ 0` with
//! `V = WᵀW + θI`. Algorithm 1 takes Newton steps whose direction solves
//! the equality-constrained quadratic model (15) by the modified conjugate
//! gradient of Algorithm 2 (Hessian products `−G D X⁻¹ − X⁻¹ D G`, the
//! diagonal held at zero), with Armijo backtracking (16) that uses a
//! Cholesky factorization as the positive-definiteness test and reuses it
//! for `X⁻¹`. Algorithm 3 is the homotopy over θ (θ₀ = 1, × 0.1) with warm
//! starts. The strategy is `A = chol(X)ᵀ`, so `Δ₂(A)² = max diag(X) = 1`
//! and `l2_obj(A) = ⟨X⁻¹, WᵀW⟩`.
//!
//! Beyond the paper: every run carries a certificate. The multipliers
//! `yᵢ = (X⁻¹VX⁻¹)ᵢᵢ` of the iterate give a lower bound through the dual
//! (see [`crate::dual`]); where that bound is loose (rank-deficient W,
//! whose optimum lies on the boundary) the dual is improved directly and
//! its own strategy `Σ^{1/2}QᵀD^{-1/2}` competes with the primal one. The
//! run stops on the relative duality gap, measured against the original
//! `WᵀW` (θ = 0).

use std::time::Instant;

use dp_core::accuracy::gram_root;
use dp_core::{DpError, Result};
use dp_linalg::{Cholesky, Mat, MatRef, Par};

use crate::dense::{gemm, gemm_into, inner, zero_diagonal};
use crate::dual::{dual_point, refine};
use crate::{
    Certificate, Observer, OptimizeReport, Optimized, PrivacyModel, Problem, StrategyOptimizer,
    TerminationReason,
};
use dp_linalg::symmetrize;

/// Options of COA. Defaults follow the paper where it states a value.
#[derive(Debug, Clone, Copy)]
pub struct CoaOptions {
    /// First regularization θ₀ of the homotopy (paper: 1), relative to
    /// `tr(WᵀW)/n` (dpmm normalizes V to mean eigenvalue 1 first).
    pub theta_initial: f64,
    /// Factor between homotopy stages (paper: 0.1).
    pub theta_decay: f64,
    /// Smallest θ (paper: 1e-10); a final stage at θ = 0 replaces it when
    /// `WᵀW` is comfortably positive definite.
    pub theta_min: f64,
    /// For rank-deficient `WᵀW`, the θ at which the primal homotopy hands
    /// over to the dual refinement: the optimum lies on the boundary
    /// (singular X), where Newton steps on X crawl while the dual is smooth.
    pub theta_handoff: f64,
    /// Armijo backtracking factor β (paper: 0.1).
    pub armijo_beta: f64,
    /// Armijo sufficient-decrease constant σ (paper: 0.25).
    pub armijo_sigma: f64,
    /// Conjugate-gradient iterations per Newton step in the intermediate
    /// homotopy stages (paper: T = 5).
    pub cg_iterations: usize,
    /// Conjugate-gradient iterations allowed in the final stage, where the
    /// Newton direction must be accurate for quadratic convergence.
    pub cg_iterations_final: usize,
    /// Newton steps per homotopy stage.
    pub max_newton_steps: usize,
    /// Relative Newton decrement `−⟨G, D⟩ / F` ending an intermediate stage.
    pub stage_tolerance: f64,
    /// Target relative duality gap (the stopping rule).
    pub gap_tolerance: f64,
    /// Iterations of the dual refinement when the primal bound is loose.
    pub dual_iterations: usize,
    /// Precondition the final stage's conjugate gradient with the
    /// Lyapunov operator of the near-optimal Hessian (one eigendecomposition
    /// per Newton step; see `Preconditioner::Lyapunov`). The intermediate
    /// stages keep the paper's plain T = 5 (Jacobi-scaled) iterations.
    pub lyapunov_preconditioner: bool,
    /// Parallelism of the matrix products.
    pub parallelism: Par,
}

impl Default for CoaOptions {
    fn default() -> Self {
        Self {
            theta_initial: 1.0,
            theta_decay: 0.1,
            theta_min: 1e-10,
            theta_handoff: 1e-6,
            armijo_beta: 0.1,
            armijo_sigma: 0.25,
            cg_iterations: 5,
            cg_iterations_final: 60,
            max_newton_steps: 60,
            stage_tolerance: 1e-3,
            gap_tolerance: 1e-6,
            dual_iterations: 2000,
            lyapunov_preconditioner: true,
            parallelism: Par::rayon(0),
        }
    }
}

/// COA behind the optimizer trait ((ε,δ)-DP only).
#[derive(Debug, Clone, Copy, Default)]
pub struct Coa {
    /// Options.
    pub options: CoaOptions,
}

/// The iterate: X, its Cholesky factor, X⁻¹ and F(X) for the current V.
struct Iterate {
    x: Mat<f64>,
    chol: Cholesky,
    z: Mat<f64>,
    f: f64,
}

fn iterate(x: Mat<f64>, v: &Mat<f64>) -> Option<Iterate> {
    let chol = Cholesky::factor(x.as_ref()).ok()?;
    let mut z = chol.inverse();
    symmetrize(&mut z);
    let f = inner(&z, v);
    f.is_finite().then_some(Iterate { x, chol, z, f })
}

/// Hessian product of Program (15) on the off-diagonal subspace:
/// `H[D] = offdiag(Y D Z + Z D Y)` with `Y = −G = Z V Z`.
fn hessian_product(
    y: &Mat<f64>,
    z: &Mat<f64>,
    d: &Mat<f64>,
    tmp: &mut Mat<f64>,
    par: Par,
) -> Mat<f64> {
    gemm_into(tmp, y.as_ref(), d.as_ref(), par);
    let mut out = gemm(tmp.as_ref(), z.as_ref(), par);
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
    out
}

/// The preconditioner of the Newton system.
enum Preconditioner {
    /// Jacobi: the Hessian's diagonal `Yᵢᵢ Zⱼⱼ + Zᵢᵢ Yⱼⱼ`.
    Jacobi(Mat<f64>),
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
    fn jacobi(y: &Mat<f64>, z: &Mat<f64>) -> Self {
        let n = y.nrows();
        Self::Jacobi(Mat::from_fn(n, n, |i, j| {
            if i == j {
                0.0
            } else {
                1.0 / (y[(i, i)] * z[(j, j)] + z[(i, i)] * y[(j, j)]).max(f64::MIN_POSITIVE)
            }
        }))
    }

    fn lyapunov(y: &Mat<f64>, z: &Mat<f64>) -> Option<Self> {
        let n = y.nrows();
        let inv_sqrt_dy: Vec<f64> = (0..n)
            .map(|i| 1.0 / y[(i, i)].max(f64::MIN_POSITIVE).sqrt())
            .collect();
        let zt = Mat::from_fn(n, n, |i, j| z[(i, j)] * inv_sqrt_dy[i] * inv_sqrt_dy[j]);
        let eig = dp_linalg::SymmetricEigen::new(zt.as_ref()).ok()?;
        Some(Self::Lyapunov {
            inv_sqrt_dy,
            basis: eig.vectors,
            values: eig.values,
        })
    }

    fn apply(&self, r: &Mat<f64>, par: Par) -> Mat<f64> {
        let n = r.nrows();
        let mut out = match self {
            Self::Jacobi(w) => Mat::from_fn(n, n, |i, j| r[(i, j)] * w[(i, j)]),
            Self::Lyapunov {
                inv_sqrt_dy,
                basis,
                values,
            } => {
                let rt = Mat::from_fn(n, n, |i, j| r[(i, j)] * inv_sqrt_dy[i] * inv_sqrt_dy[j]);
                let t = gemm(basis.transpose(), rt.as_ref(), par);
                let mut e_hat = gemm(t.as_ref(), basis.as_ref(), par);
                for j in 0..n {
                    for i in 0..n {
                        e_hat[(i, j)] /= (values[i] + values[j]).max(f64::MIN_POSITIVE);
                    }
                }
                let t = gemm(basis.as_ref(), e_hat.as_ref(), par);
                let e = gemm(t.as_ref(), basis.transpose(), par);
                Mat::from_fn(n, n, |i, j| e[(i, j)] * inv_sqrt_dy[i] * inv_sqrt_dy[j])
            }
        };
        symmetrize(&mut out);
        zero_diagonal(&mut out);
        out
    }
}

/// Algorithm 2, preconditioned: conjugate gradient on the off-diagonal
/// subspace for `H[D] = −offdiag(G)`, stopped by an Eisenstat–Walker
/// forcing term or after `max_iter` iterations.
fn newton_direction(
    y: &Mat<f64>,
    z: &Mat<f64>,
    max_iter: usize,
    precond: &Preconditioner,
    par: Par,
) -> (Mat<f64>, usize) {
    let n = y.nrows();
    let mut b = y.clone(); // −G = Y
    zero_diagonal(&mut b);
    let mut d = Mat::zeros(n, n);
    let mut r = b.clone();
    let mut s = precond.apply(&r, par);
    let mut p = s.clone();
    let mut rs = inner(&r, &s);
    let b_norm = inner(&b, &b).sqrt();
    // Forcing term relative to the size of Y: loose far from the optimum,
    // tight near it (superlinear inexact Newton).
    let y_diag_norm = (0..n).map(|i| y[(i, i)] * y[(i, i)]).sum::<f64>().sqrt();
    let forcing = (b_norm / y_diag_norm.max(f64::MIN_POSITIVE))
        .sqrt()
        .min(0.1);
    let mut tmp = Mat::zeros(n, n);
    let mut iters = 0;
    for _ in 0..max_iter {
        if rs <= 0.0 || !rs.is_finite() {
            break;
        }
        iters += 1;
        let hp = hessian_product(y, z, &p, &mut tmp, par);
        let php = inner(&p, &hp);
        if php <= 0.0 || !php.is_finite() {
            break;
        }
        let alpha = rs / php;
        d += &p * alpha;
        r -= &hp * alpha;
        let r_norm = inner(&r, &r).sqrt();
        if r_norm <= forcing * b_norm {
            break;
        }
        s = precond.apply(&r, par);
        let rs_new = inner(&r, &s);
        p = &s + &p * (rs_new / rs);
        rs = rs_new;
    }
    (d, iters)
}

/// Cells no query touches (zero columns of W) need no measurement: they
/// are removed before optimizing and get zero strategy columns.
fn active_cells(gram: MatRef<'_, f64>) -> Vec<usize> {
    let scale = (0..gram.nrows()).map(|i| gram[(i, i)]).fold(0.0, f64::max);
    (0..gram.nrows())
        .filter(|&i| gram[(i, i)] > 1e-14 * scale)
        .collect()
}

impl StrategyOptimizer for Coa {
    fn name(&self) -> &'static str {
        "coa"
    }

    fn optimize(&self, problem: &Problem, observer: &mut dyn Observer) -> Result<Optimized> {
        let start = Instant::now();
        if problem.privacy() != PrivacyModel::Approx {
            return Err(DpError::InvalidParameter {
                name: "privacy",
                reason: "COA minimizes l2_obj: it is an (ε,δ)-DP optimizer (use --privacy approx)"
                    .into(),
            });
        }
        let o = self.options;
        let par = o.parallelism;
        let full_n = problem.domain_size();
        let active = active_cells(problem.gram());
        let n = active.len();
        // Normalize V to mean eigenvalue 1: F scales linearly, X* is unchanged.
        let scale = active.iter().map(|&i| problem.gram()[(i, i)]).sum::<f64>() / n as f64;
        let v0 = Mat::from_fn(n, n, |i, j| problem.gram()[(active[i], active[j])] / scale);
        let root = gram_root(v0.as_ref())?;
        let full_rank = root.nrows() == n
            && Cholesky::factor(v0.as_ref())
                .map(|c| {
                    let l = c.lower();
                    let (lo, hi) = (0..n).fold((f64::INFINITY, 0.0_f64), |(lo, hi), i| {
                        (lo.min(l[(i, i)]), hi.max(l[(i, i)]))
                    });
                    lo * lo > 1e-8 * hi * hi
                })
                .unwrap_or(false);

        let mut history = Vec::new();
        let mut iterations = 0usize;
        let mut x = Mat::<f64>::identity(n, n);
        let mut theta = o.theta_initial;
        let mut stalled: Option<String> = None;
        loop {
            let last_theta = if full_rank {
                0.0
            } else {
                o.theta_handoff.max(o.theta_min)
            };
            let final_stage = if full_rank {
                theta == 0.0
            } else {
                theta <= last_theta * 1.000001
            };
            let mut v = v0.clone();
            for i in 0..n {
                v[(i, i)] += theta;
            }
            let Some(mut it) = iterate(x.clone(), &v) else {
                return Err(DpError::NotConverged {
                    solver: "COA",
                    reason: "lost positive definiteness between homotopy stages".into(),
                });
            };
            let cg_max = if final_stage {
                o.cg_iterations_final
            } else {
                o.cg_iterations
            };
            let stage_tol = if final_stage && full_rank {
                1e-15
            } else {
                o.stage_tolerance
            };
            for _ in 0..o.max_newton_steps {
                // G = −Z V Z; Y = −G.
                let zv = gemm(it.z.as_ref(), v.as_ref(), par);
                let mut y = gemm(zv.as_ref(), it.z.as_ref(), par);
                symmetrize(&mut y);
                let precond = if o.lyapunov_preconditioner {
                    Preconditioner::lyapunov(&y, &it.z)
                        .unwrap_or_else(|| Preconditioner::jacobi(&y, &it.z))
                } else {
                    Preconditioner::jacobi(&y, &it.z)
                };
                let (d, cg_iters) = newton_direction(&y, &it.z, cg_max, &precond, par);
                // ⟨G, D⟩ = −⟨Y, D⟩ (D has zero diagonal).
                let slope = -inner(&y, &d);
                iterations += 1;
                observer.observe(
                    iterations,
                    &[
                        ("theta", theta),
                        ("objective", it.f * scale),
                        ("newton_decrement", -slope / it.f),
                        ("cg_iterations", cg_iters as f64),
                    ],
                );
                history.push(it.f * scale);
                if -slope <= stage_tol * it.f || slope >= 0.0 {
                    break;
                }
                // Armijo (16) with Cholesky as the positive-definiteness test.
                let mut alpha = 1.0;
                let mut accepted = None;
                for _ in 0..40 {
                    let trial = &it.x + &d * alpha;
                    if let Some(next) = iterate(trial, &v)
                        && next.f <= it.f + o.armijo_sigma * alpha * slope
                    {
                        accepted = Some(next);
                        break;
                    }
                    alpha *= o.armijo_beta;
                }
                match accepted {
                    Some(next) => {
                        // diag(X) = 1 holds exactly in exact arithmetic;
                        // reset rounding drift.
                        it = next;
                        for i in 0..n {
                            it.x[(i, i)] = 1.0;
                        }
                    }
                    None => {
                        stalled = Some(format!("line search failed at theta = {theta:e}"));
                        break;
                    }
                }
            }
            x = it.x.clone();
            let _ = &it.chol;
            if final_stage || stalled.is_some() {
                break;
            }
            theta *= o.theta_decay;
            if full_rank && theta < o.theta_min * 0.999999 {
                theta = 0.0;
            } else if !full_rank && theta < last_theta * 1.000001 {
                theta = last_theta;
            }
        }

        // Certificate against θ = 0: multipliers yᵢ = (X⁻¹ V₀ X⁻¹)ᵢᵢ.
        let final_it = iterate(x.clone(), &v0).ok_or_else(|| DpError::NotConverged {
            solver: "COA",
            reason: "final iterate is not positive definite".into(),
        })?;
        let zv = gemm(final_it.z.as_ref(), v0.as_ref(), par);
        let y_primal: Vec<f64> = (0..n)
            .map(|i| {
                let s: f64 = (0..n).map(|k| zv[(i, k)] * final_it.z[(k, i)]).sum();
                s.max(1e-300)
            })
            .collect();
        let primal_objective = final_it.f; // Δ₂ = 1 since diag X = 1
        let primal_strategy = final_it.chol.lower().transpose().to_owned();
        let mut dual = dual_point(root.as_ref(), &y_primal)?;
        let mut best_strategy = primal_strategy;
        let mut best_objective = primal_objective;
        let gap = |upper: f64, lower: f64| ((upper - lower) / upper).max(0.0);
        let mut dual_iterations = 0;
        observer.observe(
            iterations,
            &[
                ("primal_objective", primal_objective * scale),
                ("primal_multiplier_bound", dual.lower_bound * scale),
            ],
        );
        if gap(best_objective, dual.lower_bound) > o.gap_tolerance {
            let (refined, its) = refine(
                root.as_ref(),
                &dual.y,
                o.gap_tolerance * 0.5,
                o.dual_iterations,
            )?;
            dual_iterations = its;
            dual = refined;
            let dual_objective = objective_of(&root, &dual.strategy, par)?;
            observer.observe(
                iterations + its,
                &[
                    ("refined_bound", dual.lower_bound * scale),
                    ("dual_strategy_objective", dual_objective * scale),
                ],
            );
            if dual_objective < best_objective {
                best_objective = dual_objective;
                best_strategy = dual.strategy.clone();
            }
        }
        iterations += dual_iterations;
        let relative_gap = gap(best_objective, dual.lower_bound);
        let converged = relative_gap <= o.gap_tolerance;
        // Embed back into the full domain (zero columns for idle cells).
        let strategy = Mat::from_fn(best_strategy.nrows(), full_n, |i, j| {
            active
                .iter()
                .position(|&a| a == j)
                .map_or(0.0, |k| best_strategy[(i, k)])
        });
        let objective = problem.objective(strategy.as_ref())?;
        let lower_bound = dual.lower_bound * scale;
        let termination = if converged {
            TerminationReason::Converged {
                criterion: format!(
                    "relative duality gap {relative_gap:.2e} <= {:.0e}",
                    o.gap_tolerance
                ),
            }
        } else if let Some(reason) = stalled {
            TerminationReason::Stalled { reason }
        } else {
            TerminationReason::MaxIterations
        };
        Ok(Optimized {
            strategy,
            report: OptimizeReport {
                objective_history: history,
                iterations,
                termination,
                seconds: start.elapsed().as_secs_f64(),
                converged,
                objective,
                certificate: Some(Certificate {
                    lower_bound,
                    relative_gap: ((objective - lower_bound) / objective).max(0.0),
                }),
            },
        })
    }
}

/// `tr(V (BᵀB)⁺) · max diag(BᵀB)` for `V = CᵀC`, B of full row rank:
/// `‖C B⁺‖²_F` with `B⁺ = Bᵀ(BBᵀ)⁻¹`.
fn objective_of(root: &Mat<f64>, b: &Mat<f64>, par: Par) -> Result<f64> {
    let bbt = gemm(b.as_ref(), b.transpose(), par);
    let chol = Cholesky::factor(bbt.as_ref())?;
    let cbt = gemm(root.as_ref(), b.transpose(), par); // r × k
    // ‖C Bᵀ (BBᵀ)⁻¹‖²_F = tr((BBᵀ)⁻¹ (CBᵀ)ᵀ(CBᵀ) (BBᵀ)⁻¹)
    let mut t = cbt.transpose().to_owned(); // k × r
    chol.solve_in_place(t.as_mut())?;
    let fro2 = inner(&t, &t);
    let delta2 = (0..b.ncols())
        .map(|j| b.col(j).squared_norm_l2())
        .fold(0.0, f64::max);
    Ok(fro2 * delta2)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spd(n: usize, seed: u64) -> Mat<f64> {
        let a = Mat::from_fn(n + 2, n, |i, j| {
            (((i * 31 + j * 17 + seed as usize) % 23) as f64 - 11.0) / 7.0
        });
        let mut g = dp_linalg::gram(a.as_ref());
        for i in 0..n {
            g[(i, i)] += 0.5;
        }
        g
    }

    fn objective(x: &Mat<f64>, v: &Mat<f64>) -> f64 {
        iterate(x.clone(), v).unwrap().f
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
        let it = iterate(x.clone(), &v).unwrap();
        let par = Par::Seq;
        let y = gemm(
            gemm(it.z.as_ref(), v.as_ref(), par).as_ref(),
            it.z.as_ref(),
            par,
        ); // −G
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
            let z = iterate(x.clone(), &v).unwrap().z;
            let y = gemm(gemm(z.as_ref(), v.as_ref(), par).as_ref(), z.as_ref(), par);
            y * -1.0
        };
        let fd_h = (grad(&(&x + &dir * h)) - grad(&(&x - &dir * h))) * (1.0 / (2.0 * h));
        let mut tmp = Mat::zeros(n, n);
        let hd = hessian_product(&y, &it.z, &dir, &mut tmp, par);
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
}
