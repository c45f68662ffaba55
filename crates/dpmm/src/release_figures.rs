//! The figures a release reports about its strategy, recomputed from the
//! strategy it measures: a plan file is data, not truth (docs/formats.md).
//!
//! * The objective: `Δ(Ã)² Σ_q Var₁(q)` (`l1_obj` / `l2_obj`, the sum of
//!   the queries' variances) or `Δ(Ã)² max_q Var₁(q)` (`max_variance`),
//!   with `Ã` the kernel's quantized strategy, `Δ` its sensitivity as the
//!   kernel states it (L1 pure, L2 approx; a sum over terms) and `Var₁`
//!   the dry-run reconstruction's variances at unit noise, so that the
//!   figure is exactly the one the noise added scales. Where the
//!   reconstruction only bounds the variances the objective is omitted.
//! * The lower bound, where it has a closed form: the singular value bound
//!   of a marginal workload (its residual spectrum) under the total-variance
//!   loss. Any other certificate needs the optimizer's dual; it is omitted,
//!   never echoed from the file.
//! * The privacy model is the release's.
//!
//! A plan file whose privacy model is not the release's, or whose recorded
//! objective or lower bound disagrees with the recomputation on the
//! workload it carries (beyond [`FIGURE_TOLERANCE`]), is refused before
//! anything is spent: its figures were what its user chose it by, and a
//! file that misdescribes its strategy is damaged or edited.

use dp_core::{MarginalStrategy, MeasuredStrategy, sensitivity_l1, sensitivity_l2};
use dp_opt::PrivacyModel;
use dp_plan::plan::PlanFigures;
use dp_plan::reconstruct::{Reconstruction, VarianceMethod};
use dp_workloads::marginals::{residual_spectrum, svd_bound};
use dp_workloads::structured::StructuredWorkload;
use serde::Serialize;

use crate::Error;

/// Largest relative difference between a plan file's recorded objective or
/// lower bound and the recomputation. The two are computed differently
/// (the planner's closed forms on the requested strategy; least squares
/// on the kernel's quantization of it, which keeps at least 12 bits, and
/// 30 on two-attribute terms, of each factor's largest entry), so they
/// agree to rounding and quantization only; an edit below this changes
/// nothing reported, which is recomputed whatever the file says.
pub const FIGURE_TOLERANCE: f64 = 1e-3;

/// What the sidecar reports about the strategy measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// The release's privacy model, `pure` or `approx`.
    pub privacy: &'static str,
    /// `l1_obj`, `l2_obj` or `max_variance`.
    pub objective_name: &'static str,
    /// The objective of the measured strategy on the released workload
    /// (`None` where the variances are only bounded).
    pub objective: Option<f64>,
    /// The closed-form lower bound, where there is one.
    pub lower_bound: Option<f64>,
    /// `(objective − lower_bound)/objective`, unclamped.
    pub duality_gap: Option<f64>,
}

/// The figures of `kernel` (the strategy measured) on `workload` under
/// `model`, for the loss the plan names (`max_variance`, else the total),
/// from `dry`, a reconstruction of `workload` at unit noise variance.
pub fn recompute(
    workload: &StructuredWorkload,
    kernel: &MarginalStrategy,
    model: PrivacyModel,
    plan: &PlanFigures,
    dry: &Reconstruction,
) -> Result<Figures, Error> {
    let max_variance = plan.objective_name == "max_variance";
    let delta = sensitivity(kernel.measured_strategy(), model)?;
    let objective = (dry.variance_method == VarianceMethod::Exact).then(|| {
        let v = dry.variances.iter().copied();
        let unit = if max_variance {
            v.fold(0.0, f64::max)
        } else {
            v.sum()
        };
        delta * delta * unit
    });
    let lower_bound = match (max_variance, workload.marginal_weights()) {
        (false, Some(weights)) => residual_spectrum(workload.domain(), &weights)
            .and_then(|s| svd_bound(workload.domain(), &s))
            .ok(),
        _ => None,
    };
    let duality_gap = match (objective, lower_bound) {
        (Some(f), Some(b)) => Some((f - b) / f),
        _ => None,
    };
    Ok(Figures {
        privacy: model.name(),
        objective_name: match (max_variance, model) {
            (true, _) => "max_variance",
            (false, PrivacyModel::Pure) => "l1_obj",
            (false, PrivacyModel::Approx) => "l2_obj",
        },
        objective,
        lower_bound,
        duality_gap,
    })
}

/// `Δ(Ã)` as the kernel states it: per term the product of its factors'
/// largest column norms (1 for an unlisted attribute's ones row), summed
/// over terms (L1) or in quadrature (L2).
pub(crate) fn sensitivity(measured: &MeasuredStrategy, model: PrivacyModel) -> Result<f64, Error> {
    let mut total = 0.0;
    for term in &measured.terms {
        let mut product = 1.0;
        for f in &term.factors {
            product *= match model {
                PrivacyModel::Pure => sensitivity_l1(f.as_ref())?,
                PrivacyModel::Approx => sensitivity_l2(f.as_ref())?.powi(2),
            };
        }
        total += product;
    }
    Ok(match model {
        PrivacyModel::Pure => total,
        PrivacyModel::Approx => total.sqrt(),
    })
}

/// Refuses a plan file at `path` whose recorded figures are not its
/// strategy's: a privacy model or objective name other than the
/// release's, and, when `own` holds the figures recomputed on the workload
/// the file carries, an objective or lower bound beyond
/// [`FIGURE_TOLERANCE`] of them (a lower bound above the objective
/// included).
pub fn check_plan_file(
    name: &str,
    recorded: &PlanFigures,
    release: &Figures,
    own: Option<&Figures>,
) -> Result<(), Error> {
    let refuse = |what: String| {
        Err(Error::BadInput(format!(
            "{name}: {what}; plan again with `dpmm plan`"
        )))
    };
    if recorded.privacy != release.privacy {
        return refuse(format!(
            "planned for privacy '{}', but this release is '{}'",
            recorded.privacy, release.privacy
        ));
    }
    if recorded.objective_name != release.objective_name {
        return refuse(format!(
            "its objective is named '{}', which a {} plan's is not",
            recorded.objective_name, release.privacy
        ));
    }
    let Some(own) = own else {
        return Ok(());
    };
    let off = |recorded: f64, truth: f64| {
        let diff = (recorded - truth).abs();
        diff.is_nan() || diff > FIGURE_TOLERANCE * truth.abs()
    };
    if let Some(truth) = own.objective
        && off(recorded.objective, truth)
    {
        return refuse(format!(
            "its objective {:e} is not its strategy's, {truth:e} (relative tolerance {FIGURE_TOLERANCE:e})",
            recorded.objective
        ));
    }
    let Some(bound) = recorded.lower_bound else {
        return Ok(());
    };
    let ceiling = own.objective.unwrap_or(recorded.objective);
    if bound > ceiling * (1.0 + FIGURE_TOLERANCE) {
        return refuse(format!(
            "its lower bound {bound:e} exceeds its strategy's objective {ceiling:e}"
        ));
    }
    if let Some(truth) = own.lower_bound
        && off(bound, truth)
    {
        return refuse(format!(
            "its lower bound {bound:e} is not the workload's, {truth:e} (relative tolerance {FIGURE_TOLERANCE:e})"
        ));
    }
    Ok(())
}

/// One query group's root mean squared error per query, as the answers
/// CSV states it (unweighted answers: variances over the weight squared).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupRmse {
    /// The group's label.
    pub label: String,
    /// Its number of queries.
    pub queries: usize,
    /// `√(mean of std_error²)` over its rows.
    pub rmse: f64,
}

/// Per query group of `workload`, the RMSE of the released answers from
/// `rec`'s variances (workload order: groups in order, each group's rows
/// contiguous).
pub fn group_rmse(workload: &StructuredWorkload, rec: &Reconstruction) -> Vec<GroupRmse> {
    let mut out = Vec::with_capacity(workload.groups().len());
    let mut start = 0usize;
    for g in workload.groups() {
        let rows = workload.group_queries(g) as usize;
        let end = (start + rows).min(rec.variances.len());
        let w2 = g.weight * g.weight;
        let sum: f64 = rec.variances[start..end]
            .iter()
            .map(|v| v.max(0.0) / w2)
            .sum();
        out.push(GroupRmse {
            label: g.label.clone(),
            queries: rows,
            rmse: (sum / rows.max(1) as f64).sqrt(),
        });
        start = end;
    }
    out
}
