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
use dp_workloads::structured::{AttrSet, Queries, StructuredWorkload, members};

use super::{GroupError, KronTerm, StructuredPlan, StructuredStrategy, certificate, overflow};
use crate::PrivacyModel;

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
    let q: Vec<Arc<Mat<f64>>> = shape.iter().map(|&n| Arc::new(helmert(n))).collect();
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
            let inside: f64 = members(e.set).map(|i| ln_n[i]).sum();
            KronTerm {
                weight: (0.25 * e.eigenvalue.ln() - 0.5 * (ln_cells - inside)).exp(),
                factors: members(e.set).map(|i| (i, q[i].clone())).collect(),
            }
        })
        .collect();
    let inv_eig: HashMap<AttrSet, f64> = spectrum
        .iter()
        .map(|e| (e.set, e.multiplicity / e.eigenvalue.sqrt()))
        .collect();
    let groups = marginal_group_errors(w, &inv_eig, ln_sens2);
    let bound = svd_bound(domain, &spectrum)?;
    Ok(StructuredPlan {
        privacy: PrivacyModel::Approx,
        method: "residual",
        strategy: StructuredStrategy { shape, terms },
        sensitivity: (0.5 * ln_sens2).exp(),
        objective,
        groups,
        certificate: certificate(objective, bound),
        rounds: 1,
        seconds: 0.0,
    })
}

/// Per query group of a marginal workload, `Δ² tr(W_gᵀW_g (AᵀA)⁺)` for a
/// strategy whose `AᵀA = Σ_T μ_T P_T` is diagonal in the residual basis:
/// a marginal on S has Gram `Π_{i∉S} nᵢ Σ_{T⊆S} P_T`, so its share is
/// `w² Π_{i∉S} nᵢ Σ_{T⊆S} mult_T/μ_T`. `inv_eig` maps T to
/// `mult_T/μ_T` (absent: 0, a subspace the workload does not touch).
pub(crate) fn marginal_group_errors(
    w: &StructuredWorkload,
    inv_eig: &HashMap<AttrSet, f64>,
    ln_sens2: f64,
) -> Vec<GroupError> {
    let ln_n: Vec<f64> = w
        .domain()
        .shape()
        .iter()
        .map(|&n| (n as f64).ln())
        .collect();
    let ln_cells: f64 = ln_n.iter().sum();
    let marginal_trace = |s: AttrSet| -> f64 {
        let inside: f64 = members(s).map(|i| ln_n[i]).sum();
        let mut acc = 0.0;
        let mut t = s;
        loop {
            acc += inv_eig.get(&t).copied().unwrap_or(0.0);
            if t == 0 {
                break;
            }
            t = (t - 1) & s;
        }
        acc * (ln_cells - inside).exp()
    };
    w.groups()
        .iter()
        .map(|g| {
            let sets: Vec<AttrSet> = match &g.queries {
                Queries::Marginals(sets) => sets.clone(),
                Queries::Kron(fs) => vec![
                    fs.iter()
                        .enumerate()
                        .filter(|(_, f)| f.is_identity())
                        .fold(0, |acc, (i, _)| acc | (1u128 << i)),
                ],
            };
            let tr: f64 = sets.iter().map(|&s| marginal_trace(s)).sum();
            GroupError {
                label: g.label.clone(),
                queries: w.group_queries(g),
                objective: g.weight * g.weight * tr * ln_sens2.exp(),
            }
        })
        .collect()
}
