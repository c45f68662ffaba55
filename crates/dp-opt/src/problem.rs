//! What an optimizer is asked to solve.

use dp_core::validate::{check_gram, check_nonzero_matrix};
use dp_core::{
    DpError, Result, StrategyEvaluation, evaluate_strategy_gram_with_root,
    svd_lower_bound_from_gram,
};
use std::sync::{Arc, Mutex};

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
    /// The model (and so the objective) a budget is optimized for: pure
    /// ε-DP, or (ε, δ)-DP. The one step from a budget to a model.
    pub fn of(budget: dp_core::PrivacyBudget) -> Self {
        match budget {
            dp_core::PrivacyBudget::Pure { .. } => Self::Pure,
            dp_core::PrivacyBudget::Approx { .. } => Self::Approx,
        }
    }

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
    /// When built from W's rows: R from a QR of W, and W's row count.
    root: Option<(Mat<f64>, usize)>,
    /// Strategies already evaluated by [`Problem::objective`] with their
    /// results, compared entry by entry: a solver's report, its
    /// combinator and the combinator above it each recompute the same
    /// strategy's objective, an O(n³) evaluation.
    evaluated: Arc<Mutex<Vec<Evaluated>>>,
}

/// A strategy and its [`Problem::objective`].
type Evaluated = (Mat<f64>, Result<f64>);

/// Strategies kept by [`Problem::objective`]'s memo.
const MEMO_STRATEGIES: usize = 4;

/// Largest strategy (entries) the memo copies.
const MEMO_MAX_ENTRIES: usize = 1 << 22;

impl Problem {
    /// Validates `G`: square, finite, not zero, symmetric to rounding.
    pub fn from_gram(gram: Mat<f64>, privacy: PrivacyModel) -> Result<Self> {
        check_gram(gram.as_ref())?;
        let mut gram = gram;
        dp_linalg::symmetrize(&mut gram);
        Ok(Self {
            gram,
            privacy,
            root: None,
            evaluated: Arc::default(),
        })
    }

    /// From explicit workload rows (validated). Where the Gram's root
    /// drops a direction (W rank deficient, or carrying directions too
    /// weak for `WᵀW`'s rounding), W's triangular factor is kept beside
    /// it (see [`Problem::workload_root`]); a QR of W costs twice the Gram
    /// product, so a W the Gram resolves does not pay for it.
    pub fn from_workload(workload: MatRef<'_, f64>, privacy: PrivacyModel) -> Result<Self> {
        check_nonzero_matrix("workload", workload)?;
        let gram = dp_linalg::gram(workload, dp_linalg::Par::rayon(0));
        if !dp_linalg::all_finite(gram.as_ref()) {
            return Err(DpError::InvalidParameter {
                name: "workload",
                reason: "entries too large: WᵀW overflows".into(),
            });
        }
        let mut problem = Self::from_gram(gram, privacy)?;
        // The factor only sharpens svdb: where it cannot be had, the
        // problem is the Gram's alone, as before.
        if let Ok(true) = dp_linalg::gram_root_drops_directions(problem.gram()) {
            problem.root = dp_linalg::triangular_factor(workload)
                .ok()
                .map(|r| (r, workload.nrows()));
        }
        Ok(problem)
    }

    /// `(R, m)` when the problem was built from W's m rows and its Gram's
    /// root drops a direction: the triangular factor of a QR of W,
    /// `RᵀR = WᵀW`, whose singular values are W's to W's own rounding. The
    /// Gram's eigenvalues are accurate only to `ε·‖W‖²`, so a direction
    /// carrying less than about `√ε` of W's norm cannot be told there from
    /// one W lacks; here it can.
    pub fn workload_root(&self) -> Option<(MatRef<'_, f64>, usize)> {
        self.root.as_ref().map(|(r, m)| (r.as_ref(), *m))
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
    /// from a solver's bookkeeping), from a QR of the strategy itself and,
    /// where it was kept, W's triangular factor rather than `WᵀW`
    /// ([`dp_core::evaluate_strategy_gram_with_root`]): no ill-conditioned
    /// `AᵀA` is formed or inverted. A strategy equal entry by entry to
    /// one this problem (or a clone of it) evaluated before gets that
    /// evaluation's result back.
    pub fn objective(&self, strategy: MatRef<'_, f64>) -> Result<f64> {
        let seen = |memo: &[Evaluated]| {
            memo.iter()
                .find(|(a, _)| a.as_ref() == strategy)
                .map(|(_, r)| r.clone())
        };
        if let Some(r) = self.evaluated.lock().ok().and_then(|m| seen(&m)) {
            return r;
        }
        let result = self.evaluate(strategy);
        // An interrupt is the caller's, not the strategy's: never kept.
        if strategy.nrows() * strategy.ncols() <= MEMO_MAX_ENTRIES
            && result != Err(DpError::Interrupted)
            && let Ok(mut memo) = self.evaluated.lock()
        {
            if memo.len() == MEMO_STRATEGIES {
                memo.drain(..1);
            }
            memo.push((strategy.to_owned(), result.clone()));
        }
        result
    }

    fn evaluate(&self, strategy: MatRef<'_, f64>) -> Result<f64> {
        let root = self.root.as_ref().map(|(r, _)| r.as_ref());
        let eval =
            evaluate_strategy_gram_with_root(self.gram.as_ref(), root, strategy)?.supported()?;
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// An evaluation stopped by the caller's interrupt is not kept: the
    /// same strategy evaluated afterwards, without a token, gets its
    /// objective.
    #[test]
    fn an_interrupted_evaluation_is_not_remembered() {
        let w = Mat::from_fn(6, 4, |i, j| ((i * 3 + j * 5) % 7) as f64 - 2.0);
        let problem = Problem::from_workload(w.as_ref(), PrivacyModel::Approx).unwrap();
        let a = Mat::from_fn(4, 4, |i, j| f64::from(u8::from(i == j)));
        let token = dp_core::interrupt::Interrupt::new();
        token.trigger();
        assert_eq!(
            token.run(|| problem.objective(a.as_ref())),
            Err(DpError::Interrupted)
        );
        assert!(problem.objective(a.as_ref()).is_ok());
    }

    /// The memo returns a strategy's own evaluation only: strategies that
    /// differ in one entry, or in shape, are evaluated afresh (and agree
    /// with a problem that never saw them); more than
    /// [`MEMO_STRATEGIES`] strategies evict the oldest; unsupported
    /// strategies keep their error.
    #[test]
    fn memo_answers_only_for_the_same_strategy() {
        let w = Mat::from_fn(6, 4, |i, j| ((i * 3 + j * 5) % 7) as f64 - 2.0);
        let g = dp_linalg::gram(w.as_ref(), dp_linalg::Par::Seq);
        let p = Problem::from_gram(g.clone(), PrivacyModel::Approx).unwrap();
        let fresh = || Problem::from_gram(g.clone(), PrivacyModel::Approx).unwrap();
        let a = Mat::from_fn(5, 4, |i, j| if i == j { 1.0 } else { 0.3 * (i + j) as f64 });
        let mut b = a.clone();
        b[(4, 2)] += 1e-3;
        let first = p.objective(a.as_ref()).unwrap();
        assert_eq!(p.objective(a.as_ref()).unwrap(), first);
        let other = p.objective(b.as_ref()).unwrap();
        assert_ne!(other, first);
        assert_eq!(other, fresh().objective(b.as_ref()).unwrap());
        for k in 0..MEMO_STRATEGIES + 1 {
            let c = Mat::from_fn(4, 4, |i, j| if i == j { 1.0 + k as f64 } else { 0.0 });
            assert_eq!(
                p.objective(c.as_ref()).unwrap(),
                fresh().objective(c.as_ref()).unwrap()
            );
        }
        assert_eq!(p.evaluated.lock().unwrap().len(), MEMO_STRATEGIES);
        assert_eq!(p.objective(a.as_ref()).unwrap(), first);
        let rank_one = Mat::from_fn(1, 4, |_, _| 1.0);
        assert!(p.objective(rank_one.as_ref()).is_err());
        assert!(p.clone().objective(rank_one.as_ref()).is_err());
    }

    /// W's triangular factor is kept when the Gram's root drops a
    /// direction, and then `RᵀR = WᵀW`: not for a well-conditioned W, but
    /// for a rank-deficient one and for one with a cell of weight 1e-9.
    #[test]
    fn keeps_w_factor_where_the_gram_cannot_resolve_w() {
        let prefix = Mat::from_fn(8, 8, |i, j| f64::from(u8::from(j <= i)));
        let rank_two = Mat::from_fn(5, 8, |i, j| ((i % 2) * j + 1) as f64);
        // Cell 0 counted at weight 1e-9: Gram eigenvalue 1e-18 < 8ε.
        let scaled = Mat::from_fn(8, 8, |i, j| match (i, j) {
            (0, 0) => 1e-9,
            _ => f64::from(u8::from(i == j)),
        });
        for (w, kept) in [(prefix, false), (rank_two, true), (scaled, true)] {
            let p = Problem::from_workload(w.as_ref(), PrivacyModel::Approx).unwrap();
            let Some((r, rows)) = p.workload_root() else {
                assert!(!kept);
                continue;
            };
            assert!(kept);
            assert_eq!(rows, w.nrows());
            let rtr = dp_linalg::gram(r, dp_linalg::Par::Seq);
            let g = p.gram();
            let scale = (0..8).map(|i| g[(i, i)]).fold(0.0, f64::max);
            for i in 0..8 {
                for j in 0..8 {
                    assert!((rtr[(i, j)] - g[(i, j)]).abs() <= 1e-13 * scale);
                }
            }
        }
    }
}
