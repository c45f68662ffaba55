//! What a reconstruction is, apart from how it is computed: the
//! least-squares problem, its result and how each part was made, the
//! conjugate-gradient options and report, and the domain sizes each path
//! takes. A leaf module: the paths ([`crate::reconstruct`],
//! `reconstruct_iterative`, `reconstruct_symmetric`) and the memory
//! sizing ([`crate::resources`]) all read it and it reads none of them.

use dp_core::{DpError, MeasuredStrategy, Result};
use dp_linalg::Mat;
use dp_opt::Termination;
use dp_workloads::structured::{Factor, StructuredWorkload};

/// Largest domain the dense least squares handles (4096 cells: a 128 MiB
/// normal matrix).
pub const DENSE_RECONSTRUCTION_CELLS: f64 = 4096.0;

/// Largest domain the iterative least squares handles (five vectors of
/// 64 MiB each).
pub const ITERATIVE_RECONSTRUCTION_CELLS: f64 = (1u64 << 23) as f64;

/// Most `queries × cells` for which every variance is solved exactly.
pub const EXACT_VARIANCE_BUDGET: f64 = (1u64 << 26) as f64;

/// How the least squares was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ReconstructionMethod {
    /// Term by term, through factor pseudo-inverses.
    OrthogonalTerms,
    /// In the residual basis (factor Grams `aI + b11ᵀ`, e.g. OPT_M).
    ResidualBasis,
    /// Dense normal equations (small domains).
    Dense,
    /// Preconditioned conjugate gradients on the structured normal
    /// equations (`reconstruct_iterative`).
    ConjugateGradient,
}

/// How the per-query variances were computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum VarianceMethod {
    /// `v wᵀ(ÃᵀÃ)⁺w` exactly (in closed form, densely, or by one converged
    /// conjugate-gradient solve per query).
    Exact,
    /// An upper bound: the smallest variance of the unbiased estimate
    /// from a single strategy term whose row space holds the query
    /// (Gauss–Markov; `reconstruct_iterative`).
    SingleTermBound,
}

/// Every workload query's estimate and variance, in workload order
/// (docs/formats.md): exact, or an upper bound where `variance_method` says
/// [`VarianceMethod::SingleTermBound`].
#[derive(Debug, Clone)]
pub struct Reconstruction {
    /// `W x̂`, one per query.
    pub answers: Vec<f64>,
    /// `Var[(W x̂)_q]`, one per query (or an upper bound on it, see
    /// `variance_method`).
    pub variances: Vec<f64>,
    /// How it was computed.
    pub method: ReconstructionMethod,
    /// How the variances were computed.
    pub variance_method: VarianceMethod,
    /// `Σⱼ cⱼ⁴` per query, where the query's noise is `Σⱼ cⱼ zⱼ` over the
    /// strategy rows' independent draws `zⱼ` (so its variance is
    /// `noise_variance · Σⱼ cⱼ²`): how the noise is spread over the draws,
    /// which fixes its fourth cumulant and so the shape of its law
    /// (`dp_core::intervals`). `None` where the path does not compute it
    /// (conjugate gradients).
    pub fourth_powers: Option<Vec<f64>>,
    /// How the iterative solve of the least squares stopped (the
    /// conjugate-gradient path only).
    pub solver: Option<CgReport>,
}

/// Options of the conjugate-gradient solves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CgOptions {
    /// Stop when `‖b − ÃᵀÃ x‖ ≤ tolerance · ‖b‖`.
    pub tolerance: f64,
    /// Stop (unconverged) after this many iterations.
    pub max_iterations: usize,
    /// `queries × cells` up to which variances are solved exactly.
    pub exact_variance_budget: f64,
}

impl Default for CgOptions {
    fn default() -> Self {
        Self {
            tolerance: 1e-13,
            max_iterations: 2000,
            exact_variance_budget: EXACT_VARIANCE_BUDGET,
        }
    }
}

/// How a conjugate-gradient solve ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CgReport {
    /// Why it stopped: converged (the relative residual reached the
    /// tolerance), the iteration cap, or stalled (a search direction had
    /// `pᵀÃᵀÃp ≤ 0` or a non-finite value: the right-hand side is
    /// numerically outside the operator's range).
    pub termination: Termination,
    /// Iterations run.
    pub iterations: usize,
    /// `‖b − ÃᵀÃ x‖ / ‖b‖` (recursive residual) at the stop.
    pub relative_residual: f64,
}

/// One least-squares problem: the workload asked, the measured strategy,
/// its measured values and the noise variance per row.
pub(crate) struct Problem<'a> {
    pub(crate) workload: &'a StructuredWorkload,
    pub(crate) measured: &'a MeasuredStrategy,
    pub(crate) values: &'a [f64],
    pub(crate) noise_variance: f64,
}

/// The error of a reconstruction given what it cannot use.
pub(crate) fn invalid(reason: String) -> DpError {
    DpError::InvalidParameter {
        name: "reconstruction",
        reason,
    }
}

/// The workload's Kronecker products, each factor written out.
pub(crate) fn explicit_products(
    workload: &StructuredWorkload,
) -> Result<Vec<(f64, Vec<Mat<f64>>)>> {
    let mut out = Vec::new();
    for (c, factors) in workload.products() {
        let ws: Vec<Mat<f64>> = factors
            .iter()
            .map(Factor::explicit)
            .collect::<std::result::Result<_, _>>()?;
        out.push((c, ws));
    }
    Ok(out)
}

/// Whether `w` is exactly a square identity.
pub(crate) fn is_identity(w: &Mat<f64>) -> bool {
    w.nrows() == w.ncols()
        && (0..w.ncols()).all(|j| (0..w.nrows()).all(|i| w[(i, j)] == f64::from(u8::from(i == j))))
}

pub(crate) fn not_estimable(p: usize) -> DpError {
    DpError::NotEstimable(format!(
        "query product {p} of the workload is not in the row space of the strategy (its \
         estimate would be biased): the plan does not fit this workload"
    ))
}
