//! Formulation (7) of the LRM paper with B eliminated: for L with full
//! column rank the smallest B with `BL = W` is `W L⁺`, so the program is
//! `min tr(WᵀW (LᵀL)⁻¹)` over L with columns in the unit ball, the form
//! [`LrmSolver::Penalty`] minimizes directly when `r ≥ n`.

use std::time::Instant;

use dp_core::{DpError, Result};
use dp_linalg::{Cholesky, Mat, MatMut, MatRef};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[allow(unused_imports)] // doc links
use super::LrmSolver;
#[allow(unused_imports)] // doc links
use super::PenaltyOptions;
use super::eliminated_objective::eliminated_b_objective_into;
use super::l1_ball::spg_over_columns;
use super::quasi_newton::lbfgs_over_split;
use super::{
    ColumnNorm, Decomposition, EliminatedMethod, EliminatedStart, Lrm, LrmOptions, Scaled,
    frob_residual,
};
use crate::dense::{gemm, inner};
use crate::optimizers::pidentity::{self, PIdentityOptions};
use crate::report::{Event, Stage};
use crate::solvers::engine::Termination;
use crate::solvers::lbfgs::LbfgsOptions;
use crate::solvers::spg::SpgOptions;
use crate::{Observer, PrivacyModel, Problem, StrategyOptimizer};

/// What the eliminated-B form works on: W's Gram scaled to unit largest
/// column norm, its root C (`CᵀC = gram`), the scale `colmax` that undoes
/// it, and the norm of L's unit balls.
pub(super) struct ScaledRoot<'a> {
    pub(super) gram: &'a Mat<f64>,
    pub(super) c: &'a Mat<f64>,
    pub(super) colmax: f64,
    pub(super) norm: ColumnNorm,
}

impl Lrm {
    /// [`Lrm::eliminated_b_form`] on the scaled Gram `root.gram` from
    /// `start` when one is handed in (its row count is r); else from the
    /// start [`PenaltyOptions::start`] names, with `r` rows, and on at
    /// most [`PenaltyOptions::random_start_up_to`] cells from the random
    /// start as well, keeping the lower `tr(BᵀB)`. Every stage spends from
    /// the same `max_seconds`, and the p-Identity start's objective is
    /// reported in [`Decomposition::start_objective`].
    pub(super) fn eliminated_b_from_start(
        &self,
        root: &ScaledRoot<'_>,
        r: usize,
        start: Option<&Mat<f64>>,
        observer: &mut dyn Observer,
    ) -> Result<Decomposition> {
        let n = root.c.ncols();
        let o = self.options;
        let random = || Self::random_start(r, n, o.penalty.seed);
        if let Some(l0) = start {
            return self.eliminated_b_form(root, l0.clone(), observer);
        }
        if o.penalty.start == EliminatedStart::Random || r == n {
            return self.eliminated_b_form(root, random(), observer);
        }
        let began = Instant::now();
        let rest = || Lrm {
            options: LrmOptions {
                max_seconds: o
                    .max_seconds
                    .map(|t| (t - began.elapsed().as_secs_f64()).max(0.0)),
                ..o
            },
        };
        let (l0, start_objective) = self.pidentity_start(root.gram, r - n, root.norm)?;
        let mut dec = rest().eliminated_b_form(root, l0, observer)?;
        dec.start_objective = Some(start_objective * root.colmax * root.colmax);
        if n <= o.penalty.random_start_up_to {
            observer.observe(&Event::Stage {
                iteration: 0,
                stage: Stage::Restart(1),
            });
            // A failed random-start run leaves the p-Identity one.
            if let Ok(other) = rest().eliminated_b_form(root, random(), observer)
                && other.trace_btb() < dec.trace_btb()
            {
                return Ok(Decomposition {
                    start_objective: dec.start_objective,
                    ..other
                });
            }
        }
        Ok(dec)
    }

    /// [`EliminatedStart::PIdentity`]: p-Identity's own search (without
    /// its identity candidate, so the strategy has exactly `n + extra`
    /// rows) on the scaled Gram `g`, under the privacy model whose
    /// sensitivity `norm` measures. Returns the strategy, every column of
    /// unit norm, and its objective on `g`.
    fn pidentity_start(
        &self,
        g: &Mat<f64>,
        extra: usize,
        norm: ColumnNorm,
    ) -> Result<(Mat<f64>, f64)> {
        let privacy = match norm {
            ColumnNorm::L1 => PrivacyModel::Pure,
            ColumnNorm::L2 => PrivacyModel::Approx,
        };
        let problem = Problem::from_gram(g.clone(), privacy)?;
        let defaults = PIdentityOptions::default();
        let options = PIdentityOptions {
            p: Some(extra),
            seed: self.options.penalty.seed,
            lbfgs: LbfgsOptions {
                budget: defaults.lbfgs.budget.with_seconds(self.options.max_seconds),
                ..defaults.lbfgs
            },
            parallelism: self.options.parallelism,
            ..defaults
        };
        let found = pidentity::Search(options).optimize(&problem, &mut ())?;
        Ok((found.strategy, found.report.objective))
    }

    /// [`LrmSolver::Penalty`] for `r ≥ n`: [`eliminated_b_objective`]
    /// over the unit balls of `root.norm` by SPG or, with L1 columns and
    /// [`EliminatedMethod::QuasiNewton`], by projected L-BFGS on the split
    /// of [`super::quasi_newton`] after a few SPG steps, from `l` (r × n)
    /// with its columns scaled to unit norm; the exact `B = W L⁺`
    /// (residual 0) at the end. SPG keeps its best iterate and L-BFGS's
    /// line search is monotone, so the result is never worse than the
    /// start. Converged when the solver's own test held (not its iteration
    /// limit or a failed line search), C is fitted to `10⁻⁶‖C‖_F` and
    /// `‖B‖²_F ≤ ‖W‖²_F`.
    fn eliminated_b_form(
        &self,
        root: &ScaledRoot<'_>,
        mut l: Mat<f64>,
        observer: &mut dyn Observer,
    ) -> Result<Decomposition> {
        let ScaledRoot {
            c, colmax, norm, ..
        } = *root;
        let o = self.options;
        let par = o.parallelism;
        let n = c.ncols();
        for j in 0..n {
            let length = norm.norm(l.col(j).iter().copied());
            if length > 0.0 {
                l.col_mut(j).iter_mut().for_each(|v| *v /= length);
            }
        }
        // The objective here is tr(BᵀB) on the scaled root.
        let scale = colmax * colmax;
        let spg = |l: &Mat<f64>, spg_options: &SpgOptions, observer: &mut dyn Observer| {
            let eval = |lx: MatRef<'_, f64>, grad: MatMut<'_, f64>| {
                eliminated_b_objective_into(c, lx, grad, None, par).unwrap_or(f64::INFINITY)
            };
            let spg_options = SpgOptions {
                budget: spg_options.budget.with_seconds(o.max_seconds),
                ..*spg_options
            };
            spg_over_columns(l, norm, eval, &spg_options, observer, scale)
        };
        let (l, termination, iterations) = match (o.penalty.method, norm) {
            (EliminatedMethod::QuasiNewton { spg_iterations }, ColumnNorm::L1) => {
                // SPG's first steps find the sparsity pattern cheaply (the
                // exact projection zeroes entries at once).
                let l = if spg_iterations > 0 {
                    let mut spg_options = o.penalty.spg;
                    spg_options.budget.max_iterations = spg_iterations;
                    spg(&l, &spg_options, &mut *observer).0
                } else {
                    l
                };
                let lbfgs = LbfgsOptions {
                    budget: o.penalty.lbfgs.budget.with_seconds(o.max_seconds),
                    ..o.penalty.lbfgs
                };
                let (l, solved) = lbfgs_over_split(c, &l, &lbfgs, par, observer, scale);
                (l, solved.termination, solved.iterations)
            }
            _ => {
                let (l, solved) = spg(&l, &o.penalty.spg, observer);
                (l, solved.termination, solved.iterations)
            }
        };
        // B = W L⁺ = C (LᵀL)⁻¹ Lᵀ.
        let b = Cholesky::factor(gemm(l.transpose(), l.as_ref(), par).as_ref())
            .and_then(|chol| {
                let mut yt = c.transpose().to_owned();
                chol.solve_in_place(yt.as_mut())?;
                Ok(gemm(yt.transpose(), l.transpose(), par))
            })
            .map_err(|_| DpError::NotConverged {
                solver: "LRM",
                reason: "L lost full column rank".into(),
            })?;
        let residual = frob_residual(c, &b, &l, par);
        let trace_btb = inner(&b, &b);
        let w_fro2 = inner(c, c);
        let fits = residual <= 1e-6 * w_fro2.sqrt() && trace_btb <= w_fro2 * (1.0 + 1e-12);
        let termination = match termination {
            Termination::Converged { criterion } if fits => Termination::Converged {
                criterion: format!("eliminated-B form: {criterion} after {iterations} iterations"),
            },
            Termination::Converged { criterion } => Termination::Stalled {
                reason: format!(
                    "eliminated-B form: {criterion}, but the residual or ‖B‖² test failed"
                ),
            },
            other => other,
        };
        let scaled = Scaled {
            b,
            l,
            residual,
            termination,
        };
        Ok(Decomposition::from_scaled(scaled, colmax, iterations))
    }

    /// The identity plus a uniform start on the `r − n` extra rows, each
    /// extra column summing to about 2 before the columns are normalized;
    /// with no extra row, a small uniform perturbation of the identity
    /// (the identity itself is a KKT point).
    pub(super) fn random_start(r: usize, n: usize, seed: u64) -> Mat<f64> {
        let extra = r - n;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let scale = if extra > 0 {
            4.0 / extra as f64
        } else {
            1.0 / n as f64
        };
        Mat::from_fn(r, n, |i, j| {
            let noise = if extra == 0 || i >= n {
                scale * rng.random::<f64>()
            } else {
                0.0
            };
            f64::from(u8::from(i == j)) + noise
        })
    }
}
