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
//! [`crate::solvers::projected_newton`] (the one COA's dual uses). At k ≥ r the
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
use dp_linalg::{Cholesky, Mat, MatRef, Par, ThinSvd};

use super::ky_fan::{KyFanDual, ky_fan_norm};
use crate::dense::gemm;
use crate::solvers::engine::Budget;
use crate::solvers::projected_newton::{self, DualEvaluation};

/// Options of [`optimal_covariance`].
#[derive(Debug, Clone, Copy)]
pub struct KyFanOptions {
    /// Stop when the relative duality gap is at most this (default 1e-6).
    pub tolerance: f64,
    /// Newton iterations at most (default 200).
    pub max_iterations: usize,
    /// Wall-clock seconds for the dual's Newton iterations, checked before
    /// each (default none). A cut run returns the Σ of its best dual
    /// point with that point's certificate (`converged` says whether the
    /// gap met the tolerance).
    pub max_seconds: Option<f64>,
    /// Parallelism of the dense products (default: all cores).
    pub parallelism: Par,
}

impl Default for KyFanOptions {
    fn default() -> Self {
        Self {
            tolerance: 1e-6,
            max_iterations: 200,
            max_seconds: None,
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
        Budget::iterations(options.max_iterations).with_seconds(options.max_seconds),
    )?;
    let p = &solve.point;
    let xmax = p.base.x.iter().copied().fold(0.0, f64::max);
    let root_eig = p.sqrt_sigma_prime();
    // The complement of W's column space: √α (the Lagrangian minimizer)
    // when k < r; at k ≥ r (no tail) a small multiple of the smallest
    // eigenvalue, costing at most 1e-3 of the tolerance in the objective.
    let smallest = root_eig.iter().copied().fold(f64::INFINITY, f64::min);
    let rho = if k < r {
        xmax * p.alpha.sqrt()
    } else {
        xmax * smallest.min(1e-3 * options.tolerance * p.base.f / (k + 1 - r) as f64)
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
    use crate::dense::random_uniform as random;
    use rand::{Rng, SeedableRng};

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
        let coa = crate::optimizers::coa::Coa::default();
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
        let negative = KyFanOptions {
            max_seconds: Some(-1.0),
            ..opts
        };
        assert!(optimal_covariance(w.as_ref(), 1, &negative).is_err());
    }

    /// A zero time budget takes no Newton step: Σ comes from the starting
    /// multipliers (all ones), still private (`maxₑ w_eᵀΣ⁻¹w_e ≤ 1`) and
    /// certified by their bound, but far from the optimum the full run
    /// reaches.
    #[test]
    fn zero_time_budget_returns_the_start() {
        let w = ranges(30, 16, 4);
        let full = optimal_covariance(w.as_ref(), 3, &KyFanOptions::default()).unwrap();
        let none = KyFanOptions {
            max_seconds: Some(0.0),
            ..KyFanOptions::default()
        };
        let start = optimal_covariance(w.as_ref(), 3, &none).unwrap();
        assert_eq!(start.iterations, 0);
        assert!(full.converged && full.iterations > 0);
        assert!(!start.converged, "gap {}", start.relative_gap);
        assert!(start.largest_condition <= 1.0 + 1e-12);
        assert!(start.lower_bound <= full.lower_bound * (1.0 + 1e-12));
        assert!(start.objective >= full.objective * (1.0 - 1e-12));
    }
}
