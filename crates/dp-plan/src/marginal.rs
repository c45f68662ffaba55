//! The optimal (ε,δ) strategy for weighted marginal workloads, in closed
//! form over the residual basis (ResidualPlanner, Xiao et al. NeurIPS
//! 2023; the spectrum is [`dp_workloads::marginals::residual_spectrum`]).
//!
//! The workload Gram is `G = Σ_T λ_T P_T` with orthogonal residual
//! projectors `P_T` of constant diagonal `mult_T / N`. The strategy with
//! `AᵀA = G^{1/2} = Σ_T √λ_T P_T` therefore has a constant diagonal, so
//! `Δ₂(A)² = tr(G^{1/2})/N` and
//!
//! `l2_obj = Δ₂² tr(G G^{-1/2}) = (Σ_T mult_T √λ_T)² / N`,
//!
//! the singular value bound `(Σσᵢ(W))²/N` (Li & Miklau), a lower bound for
//! every strategy: it is optimal, and the bound is its certificate.
//!
//! As a union of Kronecker products: `P⊥ᵢ = QᵢᵀQᵢ` with `Qᵢ` the
//! (nᵢ−1)×nᵢ Helmert rows (orthonormal, orthogonal to 1) and
//! `P¹ᵢ = (1ᵀ/√nᵢ)ᵀ(1ᵀ/√nᵢ)`, so `A = [λ_T^{1/4} Π_{i∉T} nᵢ^{-1/2} ·
//! ⊗_{i∈T} Qᵢ ⊗_{i∉T} 1ᵀ]_T`.

use std::collections::HashMap;
use std::sync::Arc;

use dp_core::Result;
use dp_linalg::{Mat, helmert};
use dp_workloads::marginals::{residual_spectrum, svd_bound};
use dp_workloads::structured::{AttrSet, StructuredWorkload};

use super::{
    GroupError, KronTerm, PlanObjective, StructuredPlan, StructuredStrategy, certificate, overflow,
};
use dp_opt::{PrivacyModel, Termination};

/// The residual-basis plan for marginal weights `(S, w_S²)` of `w`.
pub fn optimal_marginal_plan(
    w: &StructuredWorkload,
    weights: &[(AttrSet, f64)],
) -> Result<StructuredPlan> {
    let domain = w.domain();
    let shape = domain.shape();
    let spectrum = residual_spectrum(domain, weights)?;
    let ln_n: Vec<f64> = shape.iter().map(|&n| (n as f64).ln()).collect();
    let ln_cells: f64 = ln_n.iter().sum();
    // Helmert rows only for the attributes some term lists (a dense
    // (n−1)×n matrix per attribute: an unused huge attribute costs nothing).
    let used = spectrum
        .iter()
        .fold(AttrSet::EMPTY, |acc, e| acc.union(&e.set));
    let q: HashMap<usize, Arc<Mat<f64>>> = used
        .members()
        .map(|i| (i, Arc::new(helmert(shape[i]))))
        .collect();
    // s = Σ_T mult_T √λ_T = tr(G^{1/2}).
    let s: f64 = spectrum
        .iter()
        .map(|e| e.multiplicity * e.eigenvalue.sqrt())
        .sum();
    let ln_sens2 = s.ln() - ln_cells;
    let objective = (2.0 * s.ln() - ln_cells).exp();
    if !(objective.is_finite() && objective > 0.0) {
        return Err(overflow("the objective"));
    }
    let terms: Vec<KronTerm> = spectrum
        .iter()
        .map(|e| {
            let inside: f64 = e.set.members().map(|i| ln_n[i]).sum();
            KronTerm {
                weight: (0.25 * e.eigenvalue.ln() - 0.5 * (ln_cells - inside)).exp(),
                factors: e.set.members().map(|i| (i, q[&i].clone())).collect(),
            }
        })
        .collect();
    // N mult_T/μ_T with μ_T = √λ_T.
    let scaled_inverse: HashMap<AttrSet, f64> = spectrum
        .iter()
        .map(|e| {
            let ln = ln_cells + e.multiplicity.ln() - 0.5 * e.eigenvalue.ln();
            (e.set.clone(), ln.exp())
        })
        .collect();
    let groups = marginal_group_errors(w, &scaled_inverse, ln_sens2);
    let bound = svd_bound(domain, &spectrum)?;
    Ok(StructuredPlan {
        privacy: PrivacyModel::Approx,
        method: "residual".into(),
        objective_kind: PlanObjective::TotalVariance,
        strategy: StructuredStrategy { shape, terms },
        sensitivity: (0.5 * ln_sens2).exp(),
        objective,
        groups,
        certificate: certificate(objective, bound),
        rounds: 1,
        termination: Termination::ClosedForm,
        seconds: 0.0,
    })
}

/// Per query group of a marginal workload, `Δ² tr(W_gᵀW_g (AᵀA)⁺)` for a
/// strategy whose `AᵀA = Σ_T μ_T P_T` is diagonal in the residual basis
/// (`ln_sens2 = ln Δ²`). A cell of the marginal on S (unit weight) has
/// variance `Δ² N/Π_{i∈S}nᵢ² Σ_{T⊆S} mult_T/μ_T` (`q P_T qᵀ = mult_T
/// N/Π_{i∈S}nᵢ²`, `N` the cells), and the marginal's `Π_{i∈S}nᵢ` cells
/// sum to `Δ² Σ_{T⊆S} κ_T/Π_{i∈S}nᵢ` with `κ_T = N mult_T/μ_T`, which
/// `scaled_inverse` maps T to (absent: 0, a subspace the workload does
/// not touch). This is the one place the formula is written.
pub(crate) fn marginal_group_errors(
    w: &StructuredWorkload,
    scaled_inverse: &HashMap<AttrSet, f64>,
    ln_sens2: f64,
) -> Vec<GroupError> {
    let ln_n: Vec<f64> = w
        .domain()
        .shape()
        .iter()
        .map(|&n| (n as f64).ln())
        .collect();
    let marginal_trace = |s: &AttrSet| -> f64 {
        let inside: f64 = s.members().map(|i| ln_n[i]).sum();
        let acc: f64 = s
            .subsets()
            .map(|t| scaled_inverse.get(&t).copied().unwrap_or(0.0))
            .sum();
        acc * (ln_sens2 - inside).exp()
    };
    w.groups()
        .iter()
        .map(|g| {
            // Only called on marginal workloads: every group has sets.
            let sets = g.marginal_sets().unwrap_or_default();
            let tr: f64 = sets.iter().map(marginal_trace).sum();
            GroupError {
                label: g.label.clone(),
                queries: w.group_queries(g),
                objective: g.weight * g.weight * tr,
            }
        })
        .collect()
}
