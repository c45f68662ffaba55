//! The research layer on explicit matrices: a strategy optimized for a
//! workload matrix `W` by any registered optimizer, a `(W, A)` pair
//! evaluated, and the classic one-dimensional workloads written out —
//! what `cargo xtask optimize` and `cargo xtask error` print and the
//! Python package's `optimize`, `error` and `workloads` return, computed
//! here once for both.
//!
//! Errors are the research layer's ([`DpError`]; `dpmm::Error` converts
//! from it). Every figure is recomputed from the matrices, never taken from solver
//! bookkeeping: the objective of an optimized strategy from `W`'s own rows
//! and the strategy's SVD ([`dp_opt::verify`]), a certificate's gap
//! against that objective.

use dp_core::accuracy::evaluate_strategy;
use dp_core::{GaussianCalibration, NoiseCalibration, PrivacyBudget};
use dp_linalg::{Mat, MatRef};

use dp_opt::verify::{VerifiedStrategy, verify_strategy};
use dp_opt::{Observer, OptimizeReport, Params, PrivacyModel, Problem};
use dp_workloads::Workload as _;
use dp_workloads::workload::{AllRange, Identity, Prefix};

use dp_core::{DpError, Result};

/// A strategy optimized for an explicit workload.
#[derive(Debug, Clone)]
pub struct Optimization {
    /// The registered optimizer's name.
    pub optimizer: &'static str,
    /// The privacy model whose objective was minimized.
    pub privacy: PrivacyModel,
    /// The strategy `A` (p×n).
    pub strategy: Mat<f64>,
    /// Its objective, the SVD bound and the certificate's bound and gap,
    /// recomputed from `W` and `A`.
    pub verified: VerifiedStrategy,
    /// What the optimizer reported: iterations, why it stopped, seconds,
    /// its own diagnostics.
    pub report: OptimizeReport,
}

/// Optimizes a strategy for `w` (m×n) with the registered optimizer
/// `optimizer` (see [`dp_opt::optimizer_names`]) under `privacy`, then
/// recomputes its figures; a strategy that does not support `w` is an
/// error, not a result.
pub fn optimize(
    w: MatRef<'_, f64>,
    optimizer: &str,
    privacy: PrivacyModel,
    params: &Params,
    observer: &mut dyn Observer,
) -> Result<Optimization> {
    let optimizer = dp_opt::registry::descriptor(optimizer)?.build(params)?;
    let problem = Problem::from_workload(w, privacy)?;
    dp_core::interrupt::check()?;
    let result = optimizer.optimize(&problem, observer)?;
    // An interrupted run returns its best iterate; the caller asked to
    // stop, so it gets the interrupt, not a strategy it did not wait for.
    dp_core::interrupt::check()?;
    let verified = verify_strategy(
        &problem,
        w,
        result.strategy.as_ref(),
        result.report.certificate,
    )?;
    Ok(Optimization {
        optimizer: optimizer.name(),
        privacy,
        strategy: result.strategy,
        verified,
        report: result.report,
    })
}

/// What a strategy `A` gives a workload `W` under a budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StrategyError {
    /// The privacy model of the budget.
    pub privacy: PrivacyModel,
    /// `l1_obj` (pure) or `l2_obj` (approx): `Δ(A)² tr(WᵀW (AᵀA)⁺)`, the
    /// total variance in units of the noise scale. Where `A` does not
    /// support `W` it is the variance term only.
    pub objective: f64,
    /// `tr(WᵀW (AᵀA)⁺)`.
    pub trace: f64,
    /// `Δ₁(A)` (pure) or `Δ₂(A)` (approx).
    pub sensitivity: f64,
    /// Whether `W` lies in `A`'s row space (to the mechanism's tolerance).
    pub supported: bool,
    /// `‖W − W A⁺A‖_F / ‖W‖_F`.
    pub support_residual: f64,
    /// The rank of `A`.
    pub strategy_rank: usize,
    /// Laplace scale or Gaussian σ per strategy row.
    pub noise_scale: f64,
    /// The expected total squared error of the least-squares answers;
    /// `None` where `A` does not support `W` (the answers are then biased
    /// by an amount that depends on the data: no expected error exists).
    pub expected_total_squared_error: Option<f64>,
}

/// Evaluates `a` (p×n) for `w` (m×n) under `budget`, the Gaussian noise
/// of (ε, δ) calibrated by `calibration` (a release's is
/// [`GaussianCalibration::Zcdp`]).
pub fn error(
    w: MatRef<'_, f64>,
    a: MatRef<'_, f64>,
    budget: PrivacyBudget,
    calibration: GaussianCalibration,
) -> Result<StrategyError> {
    let eval = evaluate_strategy(w, a)?;
    let noise = NoiseCalibration::for_strategy(a, budget, calibration)?;
    let privacy = PrivacyModel::of(budget);
    let supported = eval.support.supported;
    let (objective, sensitivity) = match privacy {
        PrivacyModel::Pure => (eval.l1_obj(), eval.sensitivity_l1),
        PrivacyModel::Approx => (eval.l2_obj(), eval.sensitivity_l2),
    };
    Ok(StrategyError {
        privacy,
        objective,
        trace: eval.trace,
        sensitivity,
        supported,
        support_residual: eval.support.relative_residual,
        strategy_rank: eval.support.strategy_rank,
        noise_scale: noise.scale,
        expected_total_squared_error: supported.then(|| noise.variance() * eval.trace),
    })
}

/// The classic one-dimensional workloads, by the names the Python
/// package gives them: `identity`, `prefix` and `all_range` (every range
/// `[a, b]`, `a ≤ b`, in row-major order of `(a, b)`), on `n` cells.
pub fn workload(name: &str, n: usize) -> Result<Mat<f64>> {
    let explicit = match name {
        "identity" => Identity::new(n)?.explicit(),
        "prefix" => Prefix::new(n)?.explicit(),
        "all_range" => AllRange::new(n)?.explicit(),
        other => {
            return Err(DpError::InvalidParameter {
                name: "workload",
                reason: format!("unknown workload '{other}': identity, prefix or all_range"),
            });
        }
    };
    explicit.ok_or_else(|| DpError::InvalidParameter {
        name: "n",
        reason: format!("{name}({n}) is too large to write out as a matrix"),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Prefix(n): row i has ones on cells 0..=i; AllRange(n) has n(n+1)/2
    /// rows, row (a, b) ones on a..=b; both checked entry by entry.
    #[test]
    fn workloads_are_the_matrices_they_name() {
        let p = workload("prefix", 5).unwrap();
        for i in 0..5 {
            for j in 0..5 {
                assert_eq!(p[(i, j)], f64::from(u8::from(j <= i)));
            }
        }
        let r = workload("all_range", 4).unwrap();
        assert_eq!(r.nrows(), 10);
        let mut row = 0;
        for a in 0..4 {
            for b in a..4 {
                for j in 0..4 {
                    assert_eq!(r[(row, j)], f64::from(u8::from(a <= j && j <= b)));
                }
                row += 1;
            }
        }
        assert_eq!(workload("identity", 3).unwrap(), Mat::<f64>::identity(3, 3));
        assert!(matches!(
            workload("ranges", 3),
            Err(DpError::InvalidParameter { .. })
        ));
        assert!(workload("prefix", 0).is_err());
    }

    /// The identity strategy on Prefix(n): supported, `l1_obj =
    /// tr(WᵀW) = n(n+1)/2` (Δ₁ = 1), and the expected total squared error
    /// under ε is `2/ε²` per unit of trace (Laplace of scale 1/ε).
    #[test]
    fn error_of_the_identity_on_prefix_is_its_closed_form() {
        let n = 6;
        let w = workload("prefix", n).unwrap();
        let a = Mat::<f64>::identity(n, n);
        let budget = PrivacyBudget::pure(0.5).unwrap();
        let e = error(w.as_ref(), a.as_ref(), budget, GaussianCalibration::Zcdp).unwrap();
        let trace = (n * (n + 1) / 2) as f64;
        assert!(e.supported);
        assert!((e.objective - trace).abs() < 1e-9 * trace);
        let expected = 2.0 / 0.25 * trace;
        let total = e.expected_total_squared_error.unwrap();
        assert!((total - expected).abs() < 1e-9 * expected);
        // A strategy missing a cell does not support it: no expected error.
        let missing = Mat::<f64>::from_fn(n - 1, n, |i, j| f64::from(u8::from(i == j)));
        let e = error(
            w.as_ref(),
            missing.as_ref(),
            budget,
            GaussianCalibration::Zcdp,
        )
        .unwrap();
        assert!(!e.supported);
        assert_eq!(e.expected_total_squared_error, None);
    }

    /// COA on AllRange(8) under (ε, δ): the recomputed objective is the
    /// strategy's own `l2_obj`, the certificate's bound below it.
    #[test]
    fn an_optimized_strategy_reports_its_recomputed_objective() {
        let w = workload("all_range", 8).unwrap();
        let o = optimize(
            w.as_ref(),
            "coa",
            PrivacyModel::Approx,
            &Params::default(),
            &mut (),
        )
        .unwrap();
        let eval = evaluate_strategy(w.as_ref(), o.strategy.as_ref()).unwrap();
        let own = eval.l2_obj();
        assert!((o.verified.objective - own).abs() <= 1e-9 * own);
        let bound = o.verified.lower_bound.unwrap();
        assert!(bound <= o.verified.objective * (1.0 + 1e-9));
        assert!(o.verified.duality_gap.unwrap() < 1e-3);
        assert!(
            optimize(
                w.as_ref(),
                "nope",
                PrivacyModel::Approx,
                &Params::default(),
                &mut ()
            )
            .is_err()
        );
    }
}
