//! Error formulas of the matrix mechanism (matrix mechanism paper,
//! Proposition 4 and Definition 7; docs/privacy.md).
//!
//! With `x̂ = A⁺ y` and i.i.d. noise of variance `v` on each strategy row,
//! the estimate of `W x` is unbiased when W's rows lie in A's row space and
//!
//! * per query: `E (wᵢ x̂ − wᵢ x)² = v · (W (AᵀA)⁺ Wᵀ)ᵢᵢ`,
//! * total: `v · tr(WᵀW (AᵀA)⁺)`.
//!
//! Scale-free objectives: `l1_obj = Δ₁(A)² tr(WᵀW (AᵀA)⁺)` (ε-DP; the
//! total error is `2 l1_obj / ε²`) and `l2_obj = Δ₂(A)² tr(WᵀW (AᵀA)⁺)`
//! ((ε,δ)-DP; the total error is `c(ε,δ)² l2_obj`).

use dp_linalg::{
    Mat, MatRef, Par, SymmetricEigen, ThinSvd, gram_root, solve_upper_transpose, triangular_factor,
    whitened_squared_norm,
};

use crate::calibration::NoiseCalibration;
use crate::least_squares::StrategyFactors;
use crate::mechanism::{DEFAULT_SUPPORT_TOLERANCE, SupportCheck, support_from_factors};
use crate::sensitivity::{sensitivity_l1, sensitivity_l2};
use crate::validate::{
    check_gram, check_matrix, check_nonzero_matrix, check_same_columns, check_same_domain,
    check_vector,
};
use crate::{DpError, Result};

/// Everything the error formulas need about one (workload, strategy) pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StrategyEvaluation {
    /// `tr(WᵀW (AᵀA)⁺)`, computed as `‖Σ_r⁻¹ V_rᵀ Wᵀ‖²_F`. When the
    /// strategy does not support the workload this is only the variance
    /// part of the error: the estimate is then biased.
    pub trace: f64,
    /// `Δ₁(A)`.
    pub sensitivity_l1: f64,
    /// `Δ₂(A)`.
    pub sensitivity_l2: f64,
    /// The support test.
    pub support: SupportCheck,
}

impl StrategyEvaluation {
    /// The evaluation, or [`DpError::UnsupportedWorkload`] when the
    /// strategy does not support the workload (its answers would be biased
    /// and no objective exists).
    pub fn supported(self) -> Result<Self> {
        if self.support.supported {
            Ok(self)
        } else {
            Err(DpError::UnsupportedWorkload {
                relative_residual: self.support.relative_residual,
                tolerance: self.support.tolerance,
            })
        }
    }

    /// `Δ₁(A)² tr(WᵀW (AᵀA)⁺)`.
    pub fn l1_obj(&self) -> f64 {
        self.sensitivity_l1 * self.sensitivity_l1 * self.trace
    }

    /// `Δ₂(A)² tr(WᵀW (AᵀA)⁺)`.
    pub fn l2_obj(&self) -> f64 {
        self.sensitivity_l2 * self.sensitivity_l2 * self.trace
    }
}

/// Both matrices valid and nonzero, on the same domain.
fn check_pair(workload: MatRef<'_, f64>, strategy: MatRef<'_, f64>) -> Result<()> {
    check_nonzero_matrix("workload", workload)?;
    check_nonzero_matrix("strategy", strategy)?;
    check_same_domain(workload, strategy)
}

/// Evaluates a pair without refusing unsupported workloads (the support
/// test is part of the answer). Validates shapes and entries.
pub fn evaluate_strategy(
    workload: MatRef<'_, f64>,
    strategy: MatRef<'_, f64>,
) -> Result<StrategyEvaluation> {
    check_pair(workload, strategy)?;
    let factors = StrategyFactors::new(strategy)?;
    let support = support_from_factors(&factors, workload, DEFAULT_SUPPORT_TOLERANCE);
    let trace = factors.whitened_squared_norm(workload);
    Ok(StrategyEvaluation {
        trace,
        sensitivity_l1: sensitivity_l1(strategy)?,
        sensitivity_l2: sensitivity_l2(strategy)?,
        support,
    })
}

/// [`evaluate_strategy`] at half the work on a strategy of full column
/// rank: support is then automatic, and the trace is `‖W R⁻¹‖²_F` with R
/// from a QR of the strategy, W's own rows whitened over row blocks
/// ([`dp_linalg::whitened_squared_norm`]; never a copy of W, never
/// `WᵀW`). Its rounding is of the SVD path's order: the strategy's
/// conditioning times the rounding unit.
/// Any other strategy takes [`evaluate_strategy`].
pub fn evaluate_strategy_rows(
    workload: MatRef<'_, f64>,
    strategy: MatRef<'_, f64>,
) -> Result<StrategyEvaluation> {
    check_pair(workload, strategy)?;
    let Some(r) = full_rank_factor(strategy)? else {
        return evaluate_strategy(workload, strategy);
    };
    let n = workload.ncols();
    let trace = whitened_squared_norm(r.as_ref(), workload, Par::rayon(0))?;
    Ok(StrategyEvaluation {
        trace,
        sensitivity_l1: sensitivity_l1(strategy)?,
        sensitivity_l2: sensitivity_l2(strategy)?,
        support: SupportCheck {
            supported: true,
            relative_residual: 0.0,
            tolerance: DEFAULT_SUPPORT_TOLERANCE,
            strategy_rank: n,
        },
    })
}

fn supported_evaluation(
    workload: MatRef<'_, f64>,
    strategy: MatRef<'_, f64>,
) -> Result<StrategyEvaluation> {
    evaluate_strategy(workload, strategy)?.supported()
}

/// `tr(WᵀW (AᵀA)⁺)`; refuses a strategy that does not support W.
pub fn trace_objective(workload: MatRef<'_, f64>, strategy: MatRef<'_, f64>) -> Result<f64> {
    Ok(supported_evaluation(workload, strategy)?.trace)
}

/// `l1_obj(W, A) = Δ₁(A)² tr(WᵀW (AᵀA)⁺)`: the ε-DP objective. The
/// expected total squared error under ε-DP is `2 l1_obj / ε²`.
pub fn l1_obj(workload: MatRef<'_, f64>, strategy: MatRef<'_, f64>) -> Result<f64> {
    Ok(supported_evaluation(workload, strategy)?.l1_obj())
}

/// `l2_obj(W, A) = Δ₂(A)² tr(WᵀW (AᵀA)⁺)`: the (ε,δ)-DP objective. The
/// expected total squared error is `c(ε,δ)² l2_obj`.
pub fn l2_obj(workload: MatRef<'_, f64>, strategy: MatRef<'_, f64>) -> Result<f64> {
    Ok(supported_evaluation(workload, strategy)?.l2_obj())
}

/// Expected total squared error `Σᵢ E(wᵢ x̂ − wᵢ x)² = v · tr(WᵀW (AᵀA)⁺)`
/// for noise of per-row variance `v` (`2b²` Laplace, `σ²` Gaussian). The
/// calibration must be the one for this strategy (see
/// [`NoiseCalibration::for_strategy`]).
pub fn expected_total_squared_error(
    workload: MatRef<'_, f64>,
    strategy: MatRef<'_, f64>,
    noise: &NoiseCalibration,
) -> Result<f64> {
    Ok(noise.variance() * trace_objective(workload, strategy)?)
}

/// Expected squared error of each query, `v · (W (AᵀA)⁺ Wᵀ)ᵢᵢ`.
pub fn expected_per_query_squared_error(
    workload: MatRef<'_, f64>,
    strategy: MatRef<'_, f64>,
    noise: &NoiseCalibration,
) -> Result<Vec<f64>> {
    supported_evaluation(workload, strategy)?;
    let factors = StrategyFactors::new(strategy)?;
    let x = factors.whitened_workload_transpose(workload);
    let v = noise.variance();
    Ok((0..x.ncols())
        .map(|j| v * x.col(j).squared_norm_l2())
        .collect())
}

/// The data-dependent structural error `‖(W − B L) x‖²` of a decomposition
/// that only approximates `W` (LRM's relaxation, Theorem 3 of the LRM
/// paper): the squared bias of answering `B L x` instead of `W x`.
pub fn structural_squared_error(
    workload: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    l: MatRef<'_, f64>,
    x: &[f64],
) -> Result<f64> {
    check_matrix("workload", workload)?;
    check_matrix("B", b)?;
    check_matrix("L", l)?;
    if b.nrows() != workload.nrows() || l.ncols() != workload.ncols() || b.ncols() != l.nrows() {
        return Err(DpError::DimensionMismatch {
            what: format!(
                "W is {}x{}, B is {}x{}, L is {}x{}: need W = B L shapes",
                workload.nrows(),
                workload.ncols(),
                b.nrows(),
                b.ncols(),
                l.nrows(),
                l.ncols()
            ),
        });
    }
    check_vector("data vector x", x, workload.ncols())?;
    let lx: Vec<f64> = (0..l.nrows())
        .map(|i| (0..l.ncols()).map(|j| l[(i, j)] * x[j]).sum())
        .collect();
    Ok((0..workload.nrows())
        .map(|i| {
            let wx: f64 = (0..workload.ncols()).map(|j| workload[(i, j)] * x[j]).sum();
            let blx: f64 = (0..b.ncols()).map(|k| b[(i, k)] * lx[k]).sum();
            (wx - blx).powi(2)
        })
        .sum())
}

/// The singular value bound `(Σᵢ σᵢ(W))² / n` (matrix mechanism paper,
/// Theorem 5.25; the COA paper's lower bound for `l2_obj`): no strategy
/// has `l2_obj` below it.
pub fn svd_lower_bound(workload: MatRef<'_, f64>) -> Result<f64> {
    check_nonzero_matrix("workload", workload)?;
    let s = ThinSvd::values_only(workload)?;
    let sum: f64 = s.iter().sum();
    Ok(sum * sum / workload.ncols() as f64)
}

/// The singular value bound from the Gram matrix `WᵀW`: `σᵢ(W) = √λᵢ(WᵀW)`.
/// Eigenvalues within rounding of zero (`λ ≤ n·ε_mach·λ_max`, the usual
/// numerical-rank threshold) count as zero: a rank-deficient `W` has exact
/// zeros there, and the square root would turn their rounding noise of
/// order `ε_mach·λ_max` into spurious singular values of order
/// `√ε_mach·σ_max`, overstating the bound.
pub fn svd_lower_bound_from_gram(gram: MatRef<'_, f64>) -> Result<f64> {
    // An eigendecomposition of a large Gram takes seconds: not begun
    // once the caller has asked to stop.
    crate::interrupt::check()?;
    check_gram(gram)?;
    let eig = SymmetricEigen::values_only(gram)?;
    let top = eig.iter().fold(0.0_f64, |m, &l| m.max(l));
    let tol = gram.nrows() as f64 * f64::EPSILON * top;
    let sum: f64 = eig.iter().filter(|&&l| l > tol).map(|l| l.sqrt()).sum();
    Ok(sum * sum / gram.nrows() as f64)
}

/// [`evaluate_strategy`] for a workload given by its Gram matrix `WᵀW`
/// (see [`evaluate_strategy_gram_with_root`]).
pub fn evaluate_strategy_gram(
    gram: MatRef<'_, f64>,
    strategy: MatRef<'_, f64>,
) -> Result<StrategyEvaluation> {
    evaluate_strategy_gram_with_root(gram, None, strategy)
}

/// [`evaluate_strategy`] for a workload given by its Gram matrix `G = WᵀW`
/// and, optionally, a root `B` of it (`BᵀB = G`, e.g. R of a QR of W,
/// which keeps directions of W that `G`'s rounding loses).
///
/// Full-column-rank strategies (the common case: I_n, H_n, Y_n, COA's
/// Cholesky factor) take a fast path from `R`, the triangular factor of a
/// QR of the strategy itself (`AᵀA = RᵀR`, never formed): `tr(G (AᵀA)⁻¹)`
/// is `‖B R⁻¹‖²_F` with a root, else `tr(R⁻ᵀ G R⁻¹)`, by triangular
/// solves, with support automatic. Inverting a formed `AᵀA` would lose
/// `κ(A)²·ε` relative (4e-3 at κ(A) = 6.5e6, where COA's strategies on
/// badly scaled ranges sit); the factor loses about `κ(A)·ε`. Otherwise
/// the strategy's SVD: support tested against the Gram's root (same Gram
/// matrix, so the same support), the trace against `B` when given, else
/// that root.
pub fn evaluate_strategy_gram_with_root(
    gram: MatRef<'_, f64>,
    root: Option<MatRef<'_, f64>>,
    strategy: MatRef<'_, f64>,
) -> Result<StrategyEvaluation> {
    crate::interrupt::check()?;
    check_gram(gram)?;
    check_nonzero_matrix("strategy", strategy)?;
    check_same_columns("Gram matrix", gram, strategy)?;
    if let Some(b) = root {
        check_matrix("workload root", b)?;
        check_same_columns("Gram matrix", gram, b)?;
    }
    let n = strategy.ncols();
    let supported = |strategy_rank| SupportCheck {
        supported: true,
        relative_residual: 0.0,
        tolerance: DEFAULT_SUPPORT_TOLERANCE,
        strategy_rank,
    };
    // The identity, exactly (a candidate of every never-worse-than-identity
    // rule): AᵀA = I, Δ₁ = Δ₂ = 1 and tr(G (AᵀA)⁻¹) = tr G, in O(n²)
    // instead of a factorization of O(n³).
    let is_identity = strategy.nrows() == n
        && (0..n).all(|j| (0..n).all(|i| strategy[(i, j)] == if i == j { 1.0 } else { 0.0 }));
    if is_identity {
        return Ok(StrategyEvaluation {
            trace: (0..n).map(|i| gram[(i, i)]).sum(),
            sensitivity_l1: 1.0,
            sensitivity_l2: 1.0,
            support: supported(n),
        });
    }
    if let Some(r) = full_rank_factor(strategy)? {
        let trace = match root {
            Some(b) => solve_upper_transpose(r.as_ref(), b.transpose(), Par::rayon(0))?
                .norm_l2()
                .powi(2),
            None => {
                // R⁻ᵀ G, then R⁻ᵀ (R⁻ᵀ G)ᵀ = R⁻ᵀ G R⁻¹ (G symmetric).
                let half = solve_upper_transpose(r.as_ref(), gram, Par::rayon(0))?;
                let whole = solve_upper_transpose(r.as_ref(), half.transpose(), Par::rayon(0))?;
                (0..n).map(|i| whole[(i, i)]).sum()
            }
        };
        return Ok(StrategyEvaluation {
            trace,
            sensitivity_l1: sensitivity_l1(strategy)?,
            sensitivity_l2: sensitivity_l2(strategy)?,
            support: supported(n),
        });
    }
    // Support as the Gram sees it (what the optimizers are held to); the
    // trace from the root where there is one, whose directions the Gram's
    // root has lost to rounding but the objective still weighs.
    let mut eval = evaluate_strategy(gram_root(gram)?.as_ref(), strategy)?;
    if let Some(b) = root
        && eval.support.supported
    {
        eval.trace = StrategyFactors::new(strategy)?.whitened_squared_norm(b);
    }
    Ok(eval)
}

/// R (n×n) of a QR of the p×n strategy when it has full column rank
/// comfortably: every `|Rᵢᵢ|` above `1e-5·max|Rᵢᵢ|` (R's diagonal bounds
/// its conditioning from below; beyond, the SVD path decides the rank).
fn full_rank_factor(strategy: MatRef<'_, f64>) -> Result<Option<Mat<f64>>> {
    let n = strategy.ncols();
    if strategy.nrows() < n {
        return Ok(None);
    }
    let r = triangular_factor(strategy)?;
    let (dmin, dmax) = (0..n)
        .map(|i| r[(i, i)].abs())
        .fold((f64::INFINITY, 0.0_f64), |(lo, hi), d| {
            (lo.min(d), hi.max(d))
        });
    Ok((dmin > 1e-5 * dmax).then_some(r))
}
