//! Formulation (7) of the LRM paper with B eliminated: for L with full
//! column rank the smallest B with `BL = W` is `W L⁺`, so the program is
//! `min tr(WᵀW (LᵀL)⁻¹)` over L with columns in the unit ball, the form
//! [`LrmSolver::Penalty`] minimizes directly when `r ≥ n`.

use dp_core::{DpError, Result};
use dp_linalg::{Cholesky, Mat, MatMut, MatRef, Par};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[allow(unused_imports)] // doc links
use super::LrmSolver;
use super::l1_ball::spg_over_columns;
use super::quasi_newton::lbfgs_over_split;
use super::{ColumnNorm, Decomposition, EliminatedMethod, Lrm, Scaled, frob_residual};
use crate::Observer;
use crate::dense::{gemm, inner};
use crate::engine::Termination;
use crate::lbfgs::LbfgsOptions;
use crate::spg::SpgOptions;

impl Lrm {
    /// [`LrmSolver::Penalty`] for `r ≥ n`: [`eliminated_b_objective`]
    /// over the unit balls of `norm` by SPG or, with L1 columns and
    /// [`EliminatedMethod::QuasiNewton`], by projected L-BFGS on the split
    /// of [`super::quasi_newton`] after a few SPG steps; from the identity
    /// plus random rows; the exact `B = W L⁺` (residual 0) at the end.
    /// Converged when the solver's own test held (not its iteration limit
    /// or a failed line search), C is fitted to `10⁻⁶‖C‖_F` and
    /// `‖B‖²_F ≤ ‖W‖²_F`.
    ///
    /// With `start` (r × n, e.g. p-Identity's strategy), the run starts
    /// there instead, its columns scaled to unit norm; SPG keeps its best
    /// iterate and L-BFGS's line search is monotone, so the result is
    /// never worse than the start.
    pub(super) fn eliminated_b_form(
        &self,
        c: &Mat<f64>,
        r: usize,
        colmax: f64,
        norm: ColumnNorm,
        start: Option<&Mat<f64>>,
        observer: &mut dyn Observer,
    ) -> Result<Decomposition> {
        let o = self.options;
        let par = o.parallelism;
        let n = c.ncols();
        let mut l = match start {
            Some(l0) => l0.clone(),
            None => Self::random_start(r, n, o.penalty.seed),
        };
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
            trace_btb,
            termination,
        };
        Ok(Decomposition::from_scaled(scaled, colmax, iterations))
    }

    /// The identity plus a uniform start on the `r − n` extra rows, each
    /// extra column summing to about 2 before the columns are normalized;
    /// with no extra row, a small uniform perturbation of the identity
    /// (the identity itself is a KKT point).
    fn random_start(r: usize, n: usize, seed: u64) -> Mat<f64> {
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

/// The objective of formulation (7) with B eliminated, for L (r × n) with
/// full column rank: `f(L) = tr(C (LᵀL)⁻¹ Cᵀ) = min{‖B‖²_F : BL = C}`
/// (the minimizer is `B = C L⁺`), with gradient
/// `∇f = −2 L (LᵀL)⁻¹ CᵀC (LᵀL)⁻¹`. `None` when LᵀL is not numerically
/// positive definite (f = +∞ there).
///
/// The L1-ball projection leaves L sparse, so `LᵀL` and `L Z` are formed
/// row by row for rows with at most n/8 nonzeros and by dense products for
/// the rest. The dense work is the Cholesky factor (n³/3), the solve
/// `(LᵀL)⁻¹Cᵀ` (2n²s) and `Z = (LᵀL)⁻¹CᵀC(LᵀL)⁻¹` (2n²s), s = rank(W).
pub fn eliminated_b_objective(c: &Mat<f64>, l: &Mat<f64>, par: Par) -> Option<(f64, Mat<f64>)> {
    let mut grad = Mat::<f64>::zeros(l.nrows(), l.ncols());
    let f = eliminated_b_objective_into(c, l.as_ref(), grad.as_mut(), None, par)?;
    Some((f, grad))
}

/// [`eliminated_b_objective`] writing the gradient into `grad` (r × n)
/// and, when `column_scales` is given, the derivative of f along each
/// column's scale of C, `∂f(C diag(t))/∂tⱼ = 2 Σₖ Cₖⱼ (C (LᵀL)⁻¹)ₖⱼ` at
/// t = 1 (their sum is 2f: f is quadratic in C).
pub(super) fn eliminated_b_objective_into(
    c: &Mat<f64>,
    l: MatRef<'_, f64>,
    mut grad: MatMut<'_, f64>,
    column_scales: Option<&mut [f64]>,
    par: Par,
) -> Option<f64> {
    let n = l.ncols();
    let rows = SplitRows::new(l);
    // The dense rows of L, gathered once for LᵀL and for L Z.
    let ld = (!rows.dense.is_empty())
        .then(|| Mat::from_fn(rows.dense.len(), n, |k, j| l[(rows.dense[k], j)]));
    let mut m = match &ld {
        Some(ld) => gemm(ld.transpose(), ld.as_ref(), par),
        None => Mat::zeros(n, n),
    };
    for (_, entries) in &rows.sparse {
        for &(a, va) in entries {
            for &(b, vb) in entries {
                m[(a, b)] += va * vb;
            }
        }
    }
    let chol = Cholesky::factor(m.as_ref()).ok()?;
    // Yᵀ = (LᵀL)⁻¹ Cᵀ (n × s).
    let mut yt = c.transpose().to_owned();
    chol.solve_in_place(yt.as_mut()).ok()?;
    let f: f64 = (0..yt.ncols())
        .map(|k| {
            c.row(k)
                .iter()
                .zip(yt.col(k).iter())
                .map(|(a, b)| a * b)
                .sum::<f64>()
        })
        .sum();
    if !(f.is_finite() && f >= 0.0) {
        return None;
    }
    if let Some(e) = column_scales {
        for (j, ej) in e.iter_mut().enumerate() {
            *ej = 2.0 * (0..yt.ncols()).map(|k| c[(k, j)] * yt[(j, k)]).sum::<f64>();
        }
    }
    // Z = YᵀY (symmetric), ∇f = −2 L Z.
    let z = gemm(yt.as_ref(), yt.transpose(), par);
    grad.fill(0.0);
    if let Some(ld) = &ld {
        let gd = gemm(ld.as_ref(), z.as_ref(), par);
        for (k, &i) in rows.dense.iter().enumerate() {
            for j in 0..n {
                grad[(i, j)] = -2.0 * gd[(k, j)];
            }
        }
    }
    let mut row = vec![0.0; n];
    for (i, entries) in &rows.sparse {
        row.fill(0.0);
        for &(k, v) in entries {
            row.iter_mut()
                .zip(z.col(k).iter())
                .for_each(|(acc, zk)| *acc += v * zk);
        }
        for (j, value) in row.iter().enumerate() {
            grad[(*i, j)] = -2.0 * value;
        }
    }
    Some(f)
}

/// The rows of L split into dense ones (more than n/8 nonzeros) and the
/// nonzero entries of the others.
pub(super) struct SplitRows {
    pub(super) dense: Vec<usize>,
    pub(super) sparse: Vec<(usize, Vec<(usize, f64)>)>,
}

impl SplitRows {
    pub(super) fn new(l: MatRef<'_, f64>) -> Self {
        let (r, n) = (l.nrows(), l.ncols());
        let mut entries: Vec<Vec<(usize, f64)>> = vec![Vec::new(); r];
        for j in 0..n {
            for (i, &v) in l.col(j).iter().enumerate() {
                if v != 0.0 {
                    entries[i].push((j, v));
                }
            }
        }
        let mut dense = Vec::new();
        let mut sparse = Vec::new();
        for (i, e) in entries.into_iter().enumerate() {
            if 8 * e.len() > n {
                dense.push(i);
            } else if !e.is_empty() {
                sparse.push((i, e));
            }
        }
        Self { dense, sparse }
    }
}
