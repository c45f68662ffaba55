//! Plans: a strategy optimized for a workload spec once (a plan depends
//! on the workload and the privacy model, never on data), its plan file
//! (docs/formats.md) and the expected error of every query group with the
//! certificate (`dpmm plan`).
//!
//! The planning is [`plan::plan_workload`], as in `cargo xtask plan`; the
//! plan file is [`plan::plan_file`] plus the workload spec itself (matrix
//! factors inline, [`Workload::load`], which reads the spec and each
//! matrix file once), so that `dpmm release --plan` needs nothing else to
//! know the queries. Under `--privacy approx` the errors are those of the
//! release path: discrete Gaussian noise at the zCDP budget ρ whose exact
//! conversion (Canonne, Kamath and Steinke 2020, Corollary 13) is (ε,δ)-DP,
//! `σ = Δ₂/√(2ρ)`; under `pure`, Laplace noise of scale `Δ₁/ε` (variance
//! `2(Δ₁/ε)²`). Discrete noise has at most these variances, so the printed
//! errors are upper bounds on the release's (up to the power-of-two
//! granularity of the measurement).

use std::path::Path;

use dp_core::{GaussianCalibration, NoiseCalibration, PrivacyBudget};
use dp_opt::PrivacyModel;
use dp_plan::plan::{self, PlanFile, PlanReport};
use dp_plan::resources::{default_memory_limit, plan_file_need};
use dp_plan::{PlanObjective, PlanOptions, StructuredPlan};
use serde::Serialize;

use crate::release::Ready;
use crate::release_figures::{GroupRmse, check_plan_file as check_plan_figures, group_rmse};
use crate::release_plan::{PlannedAt, Strategy};
use crate::resources::check_plan_file;
use crate::{Document, Error, Result, Workload};

/// What a plan file written by [`Plan::save`] holds: the plan file's fields
/// and the workload spec it was planned for (matrix factors inline).
#[derive(Serialize)]
struct PlanFileWithWorkload<'a> {
    #[serde(flatten)]
    file: PlanFile,
    planned_at: PlannedAt,
    workload: &'a serde_json::Value,
}

/// A strategy optimized for a workload spec, with its report.
pub struct Plan {
    workload: Workload,
    plan: StructuredPlan,
    report: PlanReport,
    budget: PrivacyBudget,
    max_memory: Option<u64>,
}

impl Plan {
    /// Optimizes a strategy for `workload` under
    /// `budget`, minimizing `objective`, within `max_memory` bytes (planning
    /// is sized before it runs; `None`: half the physical memory, as for a
    /// [`crate::Release`]). Under (ε, δ) the
    /// figures are the release's: discrete Gaussian noise at the zCDP ρ of
    /// the exact conversion ([`crate::privacy`]).
    pub fn optimize(
        workload: &Workload,
        budget: PrivacyBudget,
        objective: PlanObjective,
        max_memory: Option<u64>,
    ) -> Result<Self> {
        let max_memory = Some(max_memory.unwrap_or_else(default_memory_limit));
        let (plan, report) = plan::plan_workload(
            workload.structured(),
            budget,
            GaussianCalibration::Zcdp,
            &PlanOptions {
                objective,
                max_memory,
                ..PlanOptions::default()
            },
        )?;
        Ok(Self {
            workload: workload.clone(),
            plan,
            report,
            budget,
            max_memory,
        })
    }

    /// The figures: objective, certificate, noise, per-group RMSE.
    pub fn report(&self) -> &PlanReport {
        &self.report
    }

    /// The workload planned for.
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// The optimized strategy and how it was found.
    pub fn strategy(&self) -> &StructuredPlan {
        &self.plan
    }

    /// Writes the plan file (atomically: whole or absent), which carries
    /// the workload too, so that a release needs nothing else. Refused
    /// before anything is written when it would not fit the memory limit.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut bytes = self.to_json()?.into_bytes();
        bytes.push(b'\n');
        crate::output::write_atomically(path, &bytes)
    }

    /// The plan file's text (what [`Plan::save`] writes, without its final
    /// newline), for a program that keeps the plan in memory; refused when
    /// it would not fit the memory limit.
    pub fn to_json(&self) -> Result<String> {
        if let Some(limit) = self.max_memory {
            plan_file_need(&self.plan.strategy, self.workload.structured().domain())
                .check(limit)?;
        }
        let file = PlanFileWithWorkload {
            file: plan::plan_file(self.workload.structured(), &self.plan),
            planned_at: self.budget.into(),
            workload: self.workload.spec(),
        };
        serde_json::to_string(&file)
            .map_err(|e| Error::Internal(format!("cannot format the plan file: {e}")))
    }

    /// The figures a user chooses a plan by, as [`SavedPlan::summary`]
    /// gives them for the plan file read back.
    pub fn summary(&self) -> PlanSummary {
        let r = &self.report;
        PlanSummary {
            privacy: r.figures.privacy.clone(),
            objective_name: r.figures.objective_name.clone(),
            objective: Some(r.figures.objective),
            lower_bound: r.figures.lower_bound,
            duality_gap: r.duality_gap,
            budget: self.budget,
            groups: r
                .groups
                .iter()
                .map(|g| GroupRmse {
                    label: g.label.clone(),
                    queries: g.queries as usize,
                    rmse: g.rmse,
                })
                .collect(),
        }
    }

    /// The report as pretty JSON, with the plan file's path when given.
    pub fn report_json(&self, out: Option<&Path>) -> Result<String> {
        let internal = |e: serde_json::Error| Error::Internal(format!("cannot format output: {e}"));
        let mut value = serde_json::to_value(&self.report).map_err(internal)?;
        if let Some(obj) = value.as_object_mut() {
            if let Some(out) = out {
                obj.insert("out".into(), out.display().to_string().into());
            }
            if let Some(note) = lower_bound_note(&self.report.figures.privacy)
                .filter(|_| self.report.figures.lower_bound.is_some())
            {
                obj.insert("lower_bound_note".into(), note.into());
            }
        }
        serde_json::to_string_pretty(&value).map_err(internal)
    }

    /// The report as a table for people.
    pub fn report_text(&self) -> String {
        human_report(&self.report)
    }
}

/// What a plan states to someone choosing it: the privacy model, the
/// objective with its certified lower bound, and every query group's
/// expected RMSE (in counts, per released answer) at the budget it was
/// planned at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanSummary {
    /// `pure` or `approx`.
    pub privacy: String,
    /// `l1_obj`, `l2_obj` or `max_variance`.
    pub objective_name: String,
    /// The objective (`None` for a plan file whose reconstruction only
    /// bounds the variances).
    pub objective: Option<f64>,
    /// A proven lower bound on the optimum, when one is known.
    pub lower_bound: Option<f64>,
    /// `(objective − lower_bound)/objective`.
    pub duality_gap: Option<f64>,
    /// The budget the errors are stated at (a release chooses its own).
    pub budget: PrivacyBudget,
    /// Per query group, in workload order.
    pub groups: Vec<GroupRmse>,
}

/// A plan file written by [`Plan::save`], read back: its strategy checked
/// against the figures it states, which are recomputed from the strategy
/// the kernel would measure (a plan file is data, not truth; an edited
/// one is refused).
pub struct SavedPlan {
    workload: Workload,
    text: String,
    summary: PlanSummary,
}

impl SavedPlan {
    /// Reads and checks the plan file (sized against `max_memory` bytes
    /// first; `None`: half the physical memory). It must embed its
    /// workload and the budget it was planned at, as `dpmm plan` writes.
    pub fn load(plan: impl Into<Document>, max_memory: Option<u64>) -> Result<Self> {
        let doc = plan.into();
        let limit = max_memory.unwrap_or_else(default_memory_limit);
        check_plan_file(&doc, limit)?;
        let (strategy, embedded) = Strategy::from_document(&doc, None)?;
        let refuse = |what: &str| {
            Error::BadInput(format!(
                "{}: {what}; plan again with `dpmm plan`",
                doc.name()
            ))
        };
        let Some((structured, spec)) = embedded.workload else {
            return Err(refuse("the plan file carries no workload"));
        };
        let Some(budget) = embedded.planned_at else {
            return Err(refuse(
                "the plan file does not say the budget it was planned at",
            ));
        };
        let model = PrivacyModel::of(budget);
        let ready = Ready::new(structured.domain(), &structured, &strategy, model, limit, 0)?;
        check_plan_figures(
            &doc.name(),
            &strategy.figures,
            &ready.figures,
            Some(&ready.figures),
        )?;
        let noise = unit_noise_variance(&ready, budget)?;
        let groups = group_rmse(&structured, &ready.dry)
            .into_iter()
            .map(|g| GroupRmse {
                rmse: g.rmse * noise.sqrt(),
                ..g
            })
            .collect();
        let f = ready.figures;
        let summary = PlanSummary {
            privacy: f.privacy.into(),
            objective_name: f.objective_name.into(),
            objective: f.objective,
            lower_bound: f.lower_bound,
            duality_gap: f.duality_gap,
            budget,
            groups,
        };
        let text = doc.read()?.into_owned();
        Ok(Self {
            workload: Workload::from_parts(structured, spec),
            text,
            summary,
        })
    }

    /// The figures, recomputed.
    pub fn summary(&self) -> &PlanSummary {
        &self.summary
    }

    /// The workload the plan was made for.
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// The plan file's text, as read.
    pub fn to_json(&self) -> &str {
        &self.text
    }

    /// Writes the plan file again (atomically).
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut bytes = self.text.trim_end().as_bytes().to_vec();
        bytes.push(b'\n');
        crate::output::write_atomically(path, &bytes)
    }
}

/// The noise variance per strategy row of the measured strategy under
/// `budget`, as a release calibrates it (Laplace `Δ₁/ε`, or the discrete
/// Gaussian at the zCDP ρ of the exact conversion), before the kernel's
/// rounding to its grid.
fn unit_noise_variance(ready: &Ready, budget: PrivacyBudget) -> Result<f64> {
    let model = PrivacyModel::of(budget);
    let delta =
        crate::release_figures::sensitivity(ready.kernel_strategy.measured_strategy(), model)?;
    let noise = match budget {
        PrivacyBudget::Pure { epsilon } => NoiseCalibration::laplace(delta, epsilon)?,
        PrivacyBudget::Approx { epsilon, delta: d } => {
            NoiseCalibration::gaussian(delta, epsilon, d, GaussianCalibration::Zcdp)?
        }
    };
    Ok(noise.variance())
}

/// Integers (counts of cells and queries) exactly below 1e15; otherwise
/// four significant digits, in scientific notation outside [1e-3, 1e6).
fn sig(x: f64) -> String {
    let a = x.abs();
    if x.fract() == 0.0 && a < 1e15 {
        format!("{x:.0}")
    } else if (1e-3..1e6).contains(&a) {
        let decimals = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
        format!("{x:.decimals$}")
    } else {
        format!("{x:.3e}")
    }
}

/// What a plan's lower bound is, where it is not the optimum of the
/// program solved: under ε-DP it is the singular-value bound of the L2
/// program (Li & Miklau), a lower bound here too because `‖A‖₁ ≥ ‖A‖₂`
/// column by column, but a loose one.
pub fn lower_bound_note(privacy: &str) -> Option<&'static str> {
    (privacy == "pure").then_some(
        "the singular-value bound of the (ε, δ) program, which bounds this ε-DP objective \
         from below, often loosely: the gap never understates how far the plan is from \
         optimal, and may overstate it",
    )
}

/// The report as a table for people.
fn human_report(r: &PlanReport) -> String {
    let budget = match (r.delta, r.calibration) {
        (Some(d), Some(c)) => format!("(ε, δ) = ({}, {d:e}), {c} calibration", r.epsilon),
        _ => format!("ε = {}", r.epsilon),
    };
    let certificate = match (r.figures.lower_bound, r.duality_gap) {
        (Some(lb), Some(gap)) => format!(
            "lower bound {}, relative gap {gap:.1e}{}",
            sig(lb),
            lower_bound_note(&r.figures.privacy)
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        ),
        _ => "no lower bound known for this workload".into(),
    };
    let mut out = format!(
        "workload: {} attributes, {} cells, {} queries\n\
         privacy: {}, {budget}\n\
         strategy: {} ({} Kronecker terms), {} = {}; {certificate}\n\
         noise: scale {} per strategy row (sensitivity {})\n\
         privacy unit: one record (a release that keeps K records per unit, or weights up to W, \
         multiplies the noise and these errors by K·W, W rounded up to a grid finer than W/2¹⁵)\n\
         expected error per query group (RMSE in counts):\n",
        r.attributes,
        sig(r.cells),
        sig(r.queries),
        r.figures.privacy,
        r.method,
        r.strategy_terms,
        r.figures.objective_name,
        sig(r.figures.objective),
        sig(r.noise_scale),
        sig(r.sensitivity),
    );
    let width = r
        .groups
        .iter()
        .map(|g| g.label.chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    out += &format!("  {:width$}  {:>12}  {:>12}\n", "group", "queries", "RMSE");
    for g in &r.groups {
        out += &format!(
            "  {:width$}  {:>12}  {:>12}\n",
            g.label,
            sig(g.queries),
            sig(g.rmse)
        );
    }
    out += &format!(
        "expected total squared error: {}\n",
        sig(r.expected_total_squared_error)
    );
    if let Some(worst) = r.expected_max_squared_error {
        out += &format!(
            "expected squared error of the worst query: {}\n",
            sig(worst)
        );
    }
    if let Some(note) = stop_note(&r.termination, r.duality_gap) {
        out += &note;
    }
    out
}

/// A line for a plan whose optimizer stopped short of its tolerance; the
/// certificate line above then reports that plan's own gap, when there is
/// one.
fn stop_note(termination: &dp_opt::Termination, gap: Option<f64>) -> Option<String> {
    if termination.converged() {
        return None;
    }
    let gap = if gap.is_some() {
        ": the gap above is its own"
    } else {
        ""
    };
    Some(format!(
        "the optimizer stopped before its tolerance ({termination}){gap}\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::{sig, stop_note};
    use dp_opt::Termination;

    #[test]
    fn a_plan_stopped_short_says_so_and_points_at_a_gap_only_when_it_has_one() {
        let converged = Termination::Converged {
            criterion: "x".into(),
        };
        assert_eq!(stop_note(&converged, Some(1e-7)), None);
        assert_eq!(stop_note(&Termination::ClosedForm, None), None);
        let stalled = Termination::Stalled {
            reason: "a pass raised the objective".into(),
        };
        assert_eq!(
            stop_note(&stalled, None).as_deref(),
            Some(
                "the optimizer stopped before its tolerance (stalled: a pass raised the objective)\n"
            )
        );
        let budget = Termination::MaxIterations { iterations: 20 };
        let note = stop_note(&budget, Some(3e-3)).unwrap_or_default();
        assert!(
            note.ends_with("(20) exhausted): the gap above is its own\n"),
            "{note}"
        );
    }

    #[test]
    fn four_significant_digits() {
        let cases = [
            (0.0, "0"),
            (12.3456, "12.35"),
            (1234.56, "1235"),
            (4.0, "4"),
            (0.012346, "0.01235"),
            (2.5e7, "25000000"),
            (2.5e7 + 0.5, "2.500e7"),
            (-3.0, "-3"),
            (1e15, "1.000e15"),
            (1.5e-7, "1.500e-7"),
        ];
        for (x, shown) in cases {
            assert_eq!(sig(x), shown, "{x:e}");
        }
    }
}
