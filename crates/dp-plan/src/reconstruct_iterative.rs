//! Least squares for a general union of Kronecker products, without
//! densifying: preconditioned conjugate gradients (Hestenes–Stiefel; Saad,
//! *Iterative Methods for Sparse Linear Systems*, Alg. 9.1) on the normal
//! equations `ÃᵀÃ x = Ãᵀ y` (issue 18 item 4).
//!
//! * **Operator.** `ÃᵀÃ = Σ_t s_t² ⊗ᵢ G_{t,i}` with `G = FᵀF` on the term's
//!   support `S_t` and `11ᵀ` elsewhere, so `ÃᵀÃ x` sums `x` down to each
//!   term's support table, applies `⊗_{i∈S_t} G_{t,i}` to the table and
//!   broadcasts it back: `O(terms · cells)` plus table products.
//! * **Preconditioner.** The Kronecker approximation `M = ⊗ᵢ Mᵢ`,
//!   `Mᵢ = Σ_t β_{t,i} G_{t,i} + δᵢ I`, with `β_{t,i} = (s_t² Π_j τ_{t,j})^{1/d} / τ_{t,i}`
//!   and `τ_{t,i} = tr(G_{t,i}) / nᵢ`: exact (`M = ÃᵀÃ` up to `δ`) for a
//!   single term, a per-attribute average otherwise; `δᵢ` keeps it
//!   positive definite. `M⁻¹` is applied mode-wise in place.
//! * **Stop.** The relative residual `‖b − ÃᵀÃ x‖ / ‖b‖` reaching the
//!   tolerance, the iteration cap, or a breakdown (`pᵀÃᵀÃp ≤ 0`), reported
//!   as a [`CgReport`]; [`iterative`] refuses any stop but convergence.
//!   The normal equations are consistent (`b ∈ range ÃᵀÃ`) even when `Ã`
//!   is rank-deficient, and `W x̂` is the same for every solution when the
//!   rows of `W` lie in the row space of `Ã`.
//! * **Variances.** `Var[(W x̂)_q] = v wᵀ(ÃᵀÃ)⁺w`: exact (to the solver's
//!   tolerance) by one solve per query while `queries × cells` is at most
//!   [`EXACT_VARIANCE_BUDGET`]; a solve that does not converge means `w` is
//!   outside the row space (refused). Beyond the budget, a **single-term
//!   upper bound**: when `w = ⊗ᵢ wᵢ` lies in the row space of one term
//!   `Ã_t`, the estimate from that term's rows alone, `wᵀÃ_t⁺ y_t`, is
//!   linear and unbiased, so by Gauss–Markov (i.i.d. noise of variance `v`)
//!   the least-squares variance is at most `v Πᵢ ‖wᵢ F_{t,i}⁺‖² / s_t²`; the
//!   smallest such bound over the terms is reported, and a query that no
//!   single term covers is refused.

use dp_core::kernel::marginals::{sum_table, table_indices};
use dp_core::{DpError, MeasuredStrategy, Result};
use dp_linalg::{Mat, Par, pseudo_inverse, pseudo_inverse_symmetric};
use dp_opt::{Budget, Executor, Solver, Termination};
use dp_workloads::structured::{StructuredWorkload, kron_matvec};

use super::reconstruct_kron::kron_apply_in_place;
use crate::reconstruction::{
    CgOptions, CgReport, EXACT_VARIANCE_BUDGET, ITERATIVE_RECONSTRUCTION_CELLS, Problem,
    Reconstruction, ReconstructionMethod, VarianceMethod, explicit_products, invalid,
};

/// Relative tolerance of the single-term row-space test.
const ROW_SPACE_TOLERANCE: f64 = 1e-9;

/// Relative weight of the identity that keeps each `Mᵢ` invertible.
const PRECONDITIONER_SHIFT: f64 = 1e-8;

/// One term `s ⊗_{i∈S} Fᵢ ⊗_{i∉S} 1ᵀ` of the measured strategy.
struct OpTerm {
    support: Vec<usize>,
    scalar: f64,
    factors: Vec<Mat<f64>>,
    grams: Vec<Mat<f64>>,
    /// The term's rows of the measurement.
    rows: std::ops::Range<usize>,
}

/// `ÃᵀÃ` of a measured strategy, applied through its terms' tables.
pub(super) struct NormalOperator {
    shape: Vec<usize>,
    all: Vec<usize>,
    terms: Vec<OpTerm>,
    /// `Mᵢ⁻¹`, one per attribute.
    preconditioner: Vec<Mat<f64>>,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `out[cell] += scale · table[cell's index on support]`.
fn broadcast_add(
    out: &mut [f64],
    all: &[usize],
    shape: &[usize],
    support: &[usize],
    table: &[f64],
    scale: f64,
) {
    for (o, k) in out.iter_mut().zip(table_indices(all, shape, support)) {
        *o += scale * table[k];
    }
}

fn trace(m: &Mat<f64>) -> f64 {
    (0..m.nrows()).map(|i| m[(i, i)]).sum()
}

impl NormalOperator {
    /// The operator of `measured` (validated by the caller) on `shape`.
    pub(super) fn new(measured: &MeasuredStrategy, shape: &[usize]) -> Result<Self> {
        let mut terms = Vec::with_capacity(measured.terms.len());
        let mut offset = 0;
        for t in &measured.terms {
            let rows: usize = t.factors.iter().map(|f| f.nrows()).product();
            let (scalar, factors) = if t.support.is_empty() {
                (t.factors[0][(0, 0)], Vec::new())
            } else {
                (1.0, t.factors.clone())
            };
            let grams = factors
                .iter()
                .map(|f| dp_linalg::gram(f.as_ref(), Par::Seq))
                .collect();
            terms.push(OpTerm {
                support: t.support.clone(),
                scalar,
                factors,
                grams,
                rows: offset..offset + rows,
            });
            offset += rows;
        }
        let preconditioner = kronecker_preconditioner(&terms, shape)?;
        Ok(Self {
            shape: shape.to_vec(),
            all: (0..shape.len()).collect(),
            terms,
            preconditioner,
        })
    }

    fn cells(&self) -> usize {
        self.shape.iter().product()
    }

    /// `out ← ÃᵀÃ x`.
    fn apply(&self, x: &[f64], out: &mut [f64]) -> Result<()> {
        out.fill(0.0);
        for t in &self.terms {
            let table = sum_table(x, &self.all, &self.shape, &t.support, |a, b| a + b);
            let refs: Vec<&Mat<f64>> = t.grams.iter().collect();
            let table = kron_matvec(&refs, &table)?;
            broadcast_add(
                out,
                &self.all,
                &self.shape,
                &t.support,
                &table,
                t.scalar * t.scalar,
            );
        }
        Ok(())
    }

    /// `Ãᵀ y`.
    pub(super) fn adjoint(&self, y: &[f64]) -> Result<Vec<f64>> {
        let mut out = vec![0.0; self.cells()];
        for t in &self.terms {
            let ft: Vec<Mat<f64>> = t.factors.iter().map(|f| f.transpose().to_owned()).collect();
            let refs: Vec<&Mat<f64>> = ft.iter().collect();
            let table = kron_matvec(&refs, &y[t.rows.clone()])?;
            broadcast_add(
                out.as_mut_slice(),
                &self.all,
                &self.shape,
                &t.support,
                &table,
                t.scalar,
            );
        }
        Ok(out)
    }

    /// Solves `ÃᵀÃ x = b` by preconditioned conjugate gradients from 0,
    /// run by dp-opt's [`Executor`] (its iteration budget and one
    /// [`Termination`]): converged when the relative residual reaches the
    /// tolerance, stalled on a breakdown.
    pub(super) fn solve(&self, b: &[f64], options: &CgOptions) -> Result<(Vec<f64>, CgReport)> {
        let n = self.cells();
        let norm_b = dot(b, b).sqrt();
        if norm_b == 0.0 {
            let report = CgReport {
                termination: Termination::Converged {
                    criterion: "the right-hand side is zero".into(),
                },
                iterations: 0,
                relative_residual: 0.0,
            };
            return Ok((vec![0.0; n], report));
        }
        let refs: Vec<&Mat<f64>> = self.preconditioner.iter().collect();
        let mut z = b.to_vec();
        kron_apply_in_place(&refs, &mut z, Par::rayon(0))?;
        let cg = ConjugateGradients {
            op: self,
            preconditioner: refs,
            x: vec![0.0; n],
            r: b.to_vec(),
            rz: dot(b, &z),
            p: z.clone(),
            z,
            q: vec![0.0; n],
            norm_b,
            tolerance: options.tolerance,
            failure: None,
        };
        let run = Executor::new(Budget::iterations(options.max_iterations), &mut ()).run(cg);
        let (x, relative_residual, failure) = run.output;
        // An operator that failed (not a breakdown) is an error, not a
        // stop: it says nothing about the right-hand side.
        if let Some(e) = failure {
            return Err(e);
        }
        let report = CgReport {
            termination: run.termination,
            iterations: run.iterations,
            relative_residual,
        };
        Ok((x, report))
    }
}

/// The state of one preconditioned conjugate-gradient solve of
/// `ÃᵀÃ x = b`; its objective is the relative residual `‖r‖/‖b‖`.
struct ConjugateGradients<'a> {
    op: &'a NormalOperator,
    preconditioner: Vec<&'a Mat<f64>>,
    x: Vec<f64>,
    r: Vec<f64>,
    z: Vec<f64>,
    p: Vec<f64>,
    q: Vec<f64>,
    rz: f64,
    norm_b: f64,
    tolerance: f64,
    /// The error of an operator application, which ends the run.
    failure: Option<DpError>,
}

impl ConjugateGradients<'_> {
    fn residual(&self) -> f64 {
        dot(&self.r, &self.r).sqrt() / self.norm_b
    }

    fn step(&mut self) -> std::result::Result<f64, String> {
        if let Err(e) = self.op.apply(&self.p, &mut self.q) {
            let reason = e.to_string();
            self.failure = Some(e);
            return Err(reason);
        }
        let pq = dot(&self.p, &self.q);
        if !(pq > 0.0 && pq.is_finite() && self.rz.is_finite()) {
            return Err(
                "breakdown: a search direction has pᵀÃᵀÃp ≤ 0 or a non-finite value (the \
                 right-hand side is numerically outside the operator's range)"
                    .into(),
            );
        }
        let alpha = self.rz / pq;
        for i in 0..self.x.len() {
            self.x[i] += alpha * self.p[i];
            self.r[i] -= alpha * self.q[i];
        }
        self.z.copy_from_slice(&self.r);
        if let Err(e) = kron_apply_in_place(&self.preconditioner, &mut self.z, Par::rayon(0)) {
            let reason = e.to_string();
            self.failure = Some(e);
            return Err(reason);
        }
        let rz_next = dot(&self.r, &self.z);
        let beta = rz_next / self.rz;
        self.rz = rz_next;
        for i in 0..self.p.len() {
            self.p[i] = self.z[i] + beta * self.p[i];
        }
        Ok(self.residual())
    }
}

impl Solver for ConjugateGradients<'_> {
    /// The iterate, its relative residual and an operator's error.
    type Output = (Vec<f64>, f64, Option<DpError>);

    fn init(&mut self) -> f64 {
        self.residual()
    }

    fn terminate(&self) -> Option<Termination> {
        let residual = self.residual();
        (residual <= self.tolerance).then(|| Termination::Converged {
            criterion: format!("relative residual {residual:.1e} <= {:.1e}", self.tolerance),
        })
    }

    fn next_iter(&mut self) -> std::result::Result<f64, Termination> {
        self.step()
            .map_err(|reason| Termination::Stalled { reason })
    }

    fn finish(self, _termination: &Termination) -> Self::Output {
        let residual = self.residual();
        (self.x, residual, self.failure)
    }
}

/// `Mᵢ⁻¹` of the Kronecker preconditioner (module docs).
fn kronecker_preconditioner(terms: &[OpTerm], shape: &[usize]) -> Result<Vec<Mat<f64>>> {
    let d = shape.len();
    // τ_{t,i}: the mean eigenvalue of G_{t,i} (1 for the ones row).
    let taus: Vec<Vec<f64>> = terms
        .iter()
        .map(|t| {
            (0..d)
                .map(|i| match t.support.iter().position(|&p| p == i) {
                    Some(k) => trace(&t.grams[k]) / shape[i] as f64,
                    None => 1.0,
                })
                .collect()
        })
        .collect();
    let mut out = Vec::with_capacity(d);
    for (i, &n) in shape.iter().enumerate() {
        let mut m = Mat::<f64>::zeros(n, n);
        for (t, tau) in terms.iter().zip(&taus) {
            let mass = t.scalar * t.scalar * tau.iter().product::<f64>();
            if !(mass > 0.0 && mass.is_finite()) {
                continue;
            }
            let beta = mass.powf(1.0 / d as f64) / tau[i];
            let gram = t.support.iter().position(|&p| p == i).map(|k| &t.grams[k]);
            for a in 0..n {
                for b in 0..n {
                    m[(a, b)] += beta * gram.map_or(1.0, |g| g[(a, b)]);
                }
            }
        }
        let shift = PRECONDITIONER_SHIFT * (trace(&m) / n as f64).max(f64::MIN_POSITIVE);
        for a in 0..n {
            m[(a, a)] += shift;
        }
        out.push(pseudo_inverse_symmetric(m.as_ref(), None)?);
    }
    Ok(out)
}

/// The iterative least squares (module docs).
pub(super) fn iterative(problem: &Problem, options: &CgOptions) -> Result<Reconstruction> {
    let workload = problem.workload;
    let cells = workload.domain().cells_f64();
    if cells > ITERATIVE_RECONSTRUCTION_CELLS {
        return Err(invalid(format!(
            "{cells:.1e} cells: the strategy's terms are neither mutually orthogonal nor of \
             the marginals template, and the iterative least squares is limited to \
             {ITERATIVE_RECONSTRUCTION_CELLS:.1e} cells"
        )));
    }
    let shape = workload.domain().shape();
    let op = NormalOperator::new(problem.measured, &shape)?;
    let b = op.adjoint(problem.values)?;
    let (x, report) = op.solve(&b, options)?;
    if !report.termination.converged() {
        return Err(not_converged(&report, "the least squares"));
    }
    let answers = workload.answer(&x)?;
    let queries = answers.len() as f64;
    let (variances, variance_method) = if queries * cells <= options.exact_variance_budget {
        let v = exact_variances(&op, workload, problem.noise_variance, options)?;
        (v, VarianceMethod::Exact)
    } else {
        let v = single_term_bounds(&op, workload, problem.noise_variance)?;
        (v, VarianceMethod::SingleTermBound)
    };
    Ok(Reconstruction {
        answers,
        variances,
        method: ReconstructionMethod::ConjugateGradient,
        variance_method,
        fourth_powers: None,
        solver: Some(report),
    })
}

fn not_converged(report: &CgReport, what: &str) -> DpError {
    invalid(format!(
        "{what} did not converge ({} after {} iterations, relative residual {:.1e})",
        report.termination.kind(),
        report.iterations,
        report.relative_residual
    ))
}

/// The mixed-radix rows `(r₀, …, r_{d−1})` of a product with factor row
/// counts `dims`, last fastest.
fn rows_of(dims: &[usize]) -> impl Iterator<Item = Vec<usize>> + '_ {
    let total: usize = dims.iter().product();
    (0..total).map(move |mut q| {
        let mut r = vec![0; dims.len()];
        for k in (0..dims.len()).rev() {
            r[k] = q % dims[k];
            q /= dims[k];
        }
        r
    })
}

/// `v wᵀ(ÃᵀÃ)⁺w` for every query row, one solve each.
fn exact_variances(
    op: &NormalOperator,
    workload: &StructuredWorkload,
    v: f64,
    options: &CgOptions,
) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    for (p, (c, ws)) in explicit_products(workload)?.into_iter().enumerate() {
        let dims: Vec<usize> = ws.iter().map(|w| w.nrows()).collect();
        for r in rows_of(&dims) {
            let cols: Vec<Mat<f64>> = ws
                .iter()
                .zip(&r)
                .map(|(w, &ri)| Mat::from_fn(w.ncols(), 1, |j, _| c * w[(ri, j)]))
                .collect();
            let refs: Vec<&Mat<f64>> = cols.iter().collect();
            let w = kron_matvec(&refs, &[1.0])?;
            let (z, report) = op.solve(&w, options)?;
            if !report.termination.converged() {
                return Err(invalid(format!(
                    "query product {p} of the workload is not in the row space of the \
                     strategy (its estimate would be biased) or its variance solve did not \
                     converge ({}, relative residual {:.1e})",
                    report.termination.kind(),
                    report.relative_residual
                )));
            }
            out.push(v * dot(&w, &z));
        }
    }
    Ok(out)
}

/// Per attribute of one term: for each row of `wᵢ`, whether it lies in
/// the row space of the term's factor, and `‖wᵢ,r F⁺‖²`.
fn term_row_factors(w: &Mat<f64>, factor: Option<&Mat<f64>>) -> Result<(Vec<bool>, Vec<f64>)> {
    let rows = 0..w.nrows();
    match factor {
        None => {
            let n = w.ncols() as f64;
            let cover = rows
                .clone()
                .map(|r| (1..w.ncols()).all(|j| w[(r, j)] == w[(r, 0)]))
                .collect();
            let norms = rows
                .map(|r| ((0..w.ncols()).map(|j| w[(r, j)]).sum::<f64>() / n).powi(2))
                .collect();
            Ok((cover, norms))
        }
        Some(f) => {
            let pinv = pseudo_inverse(f.as_ref(), None)?;
            let wp = dp_linalg::gemm(w.as_ref(), pinv.as_ref(), Par::Seq);
            let proj = dp_linalg::gemm(wp.as_ref(), f.as_ref(), Par::Seq);
            let cover = rows
                .clone()
                .map(|r| {
                    let (mut gap, mut size) = (0.0, 0.0);
                    for j in 0..w.ncols() {
                        gap += (w[(r, j)] - proj[(r, j)]).powi(2);
                        size += w[(r, j)].powi(2);
                    }
                    gap <= ROW_SPACE_TOLERANCE.powi(2) * size
                })
                .collect();
            let norms = rows
                .map(|r| (0..wp.ncols()).map(|j| wp[(r, j)].powi(2)).sum())
                .collect();
            Ok((cover, norms))
        }
    }
}

/// The single-term Gauss–Markov bound of every query (module docs).
pub(super) fn single_term_bounds(
    op: &NormalOperator,
    workload: &StructuredWorkload,
    v: f64,
) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    for (p, (c, ws)) in explicit_products(workload)?.into_iter().enumerate() {
        // Per term, per attribute: (covered rows, row norms²).
        let per_term = op
            .terms
            .iter()
            .map(|t| {
                ws.iter()
                    .enumerate()
                    .map(|(i, w)| {
                        let k = t.support.iter().position(|&s| s == i);
                        term_row_factors(w, k.map(|k| &t.factors[k]))
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        let dims: Vec<usize> = ws.iter().map(|w| w.nrows()).collect();
        for r in rows_of(&dims) {
            let best = op
                .terms
                .iter()
                .zip(&per_term)
                .filter(|(_, f)| f.iter().zip(&r).all(|((cover, _), &ri)| cover[ri]))
                .map(|(t, f)| {
                    let prod: f64 = f
                        .iter()
                        .zip(&r)
                        .map(|((_, norms), &ri)| norms[ri])
                        .product();
                    c * c * v * prod / (t.scalar * t.scalar)
                })
                .fold(f64::INFINITY, f64::min);
            if !best.is_finite() {
                return Err(invalid(format!(
                    "query product {p}: a query lies in the row space of no single strategy \
                     term, and its exact variance is too costly here (queries × cells above \
                     {EXACT_VARIANCE_BUDGET:.1e})"
                )));
            }
            out.push(best);
        }
    }
    Ok(out)
}
