//! What an optimizer is asked to solve.

use dp_core::validate::{check_gram, check_nonzero_matrix};
use dp_core::{
    DpError, Result, StrategyEvaluation, evaluate_strategy_gram, svd_lower_bound_from_gram,
};
use dp_linalg::{Mat, MatRef};
use serde::Serialize;

/// Which objective to minimize.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PrivacyModel {
    /// ε-DP: `l1_obj = Δ₁(A)² tr(WᵀW (AᵀA)⁺)`.
    Pure,
    /// (ε,δ)-DP: `l2_obj = Δ₂(A)² tr(WᵀW (AᵀA)⁺)`.
    Approx,
}

impl PrivacyModel {
    /// `"pure"` or `"approx"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pure => "pure",
            Self::Approx => "approx",
        }
    }

    /// The objective of an evaluated strategy under this model.
    pub fn objective(self, eval: &StrategyEvaluation) -> f64 {
        match self {
            Self::Pure => eval.l1_obj(),
            Self::Approx => eval.l2_obj(),
        }
    }
}

/// A workload (through `G = WᵀW`) and a privacy model.
#[derive(Debug, Clone)]
pub struct Problem {
    gram: Mat<f64>,
    privacy: PrivacyModel,
}

impl Problem {
    /// Validates `G`: square, finite, not zero, symmetric to rounding.
    pub fn from_gram(gram: Mat<f64>, privacy: PrivacyModel) -> Result<Self> {
        check_gram(gram.as_ref())?;
        let mut gram = gram;
        dp_linalg::symmetrize(&mut gram);
        Ok(Self { gram, privacy })
    }

    /// From explicit workload rows (validated).
    pub fn from_workload(workload: MatRef<'_, f64>, privacy: PrivacyModel) -> Result<Self> {
        check_nonzero_matrix("workload", workload)?;
        let gram = dp_linalg::gram(workload, dp_linalg::Par::rayon(0));
        if !dp_linalg::all_finite(gram.as_ref()) {
            return Err(DpError::InvalidParameter {
                name: "workload",
                reason: "entries too large: WᵀW overflows".into(),
            });
        }
        Self::from_gram(gram, privacy)
    }

    /// `WᵀW`.
    pub fn gram(&self) -> MatRef<'_, f64> {
        self.gram.as_ref()
    }

    /// Domain size n.
    pub fn domain_size(&self) -> usize {
        self.gram.nrows()
    }

    /// The privacy model.
    pub fn privacy(&self) -> PrivacyModel {
        self.privacy
    }

    /// The objective of `strategy` recomputed from scratch (never taken
    /// from a solver's bookkeeping).
    pub fn objective(&self, strategy: MatRef<'_, f64>) -> Result<f64> {
        let eval = evaluate_strategy_gram(self.gram.as_ref(), strategy)?;
        if !eval.support.supported {
            return Err(DpError::UnsupportedWorkload {
                relative_residual: eval.support.relative_residual,
                tolerance: eval.support.tolerance,
            });
        }
        Ok(self.privacy.objective(&eval))
    }

    /// `WᵀW / s` with `s` its mean diagonal entry, and `s`: the scale-free
    /// Gram the iterative optimizers work on (every objective here scales
    /// linearly in `WᵀW`, the optimal strategy not at all).
    pub fn normalized_gram(&self) -> Result<(Mat<f64>, f64)> {
        let n = self.domain_size();
        let scale = (0..n).map(|i| self.gram[(i, i)]).sum::<f64>() / n as f64;
        if !(scale.is_finite() && scale > 0.0) {
            return Err(DpError::ZeroMatrix {
                what: "workload".into(),
            });
        }
        Ok((Mat::from_fn(n, n, |i, j| self.gram[(i, j)] / scale), scale))
    }

    /// The SVD lower bound `(Σσᵢ(W))²/n` on `l2_obj`.
    pub fn svd_bound(&self) -> Result<f64> {
        svd_lower_bound_from_gram(self.gram.as_ref())
    }
}
