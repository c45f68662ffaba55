//! `dpmm plan`: optimize a strategy for a workload spec once (a plan
//! depends on the workload and the privacy model, never on data), write
//! the plan file (DESIGN.md §7) and print the expected error of every
//! query group with the certificate.
//!
//! The planning is [`plan::plan_spec`], as in `cargo xtask plan`; the plan
//! file is [`plan::plan_file`] plus the workload spec itself (matrix
//! factors inline, [`crate::release_plan::embedded_spec`]), so that `dpmm
//! release --plan` needs nothing else to know the queries. Under `--privacy approx` the errors are those of the
//! release path: discrete Gaussian noise at the zCDP budget ρ whose exact
//! conversion (Canonne, Kamath and Steinke 2020, Corollary 13) is (ε,δ)-DP,
//! `σ = Δ₂/√(2ρ)`; under `pure`, Laplace noise of scale `Δ₁/ε` (variance
//! `2(Δ₁/ε)²`). Discrete noise has at most these variances, so the printed
//! errors are upper bounds on the release's (up to the power-of-two
//! granularity of the measurement).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use dp_core::{GaussianCalibration, PrivacyBudget};
use dp_opt::multidim::plan::{self, PlanFile, PlanReport};
use dp_opt::multidim::resources::plan_file_need;
use dp_opt::multidim::{PlanObjective, PlanOptions};
use serde::Serialize;

use crate::failure::Failure;
use crate::release_plan;
use crate::resources::{MemoryArgs, Spinner};

/// The privacy model of `--privacy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PrivacyArg {
    /// ε-DP: Laplace noise, objective l1_obj.
    Pure,
    /// (ε,δ)-DP: discrete Gaussian noise under zCDP, objective l2_obj.
    Approx,
}

/// `dpmm plan`'s flags.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The workload spec v1 (JSON; DESIGN.md §7).
    #[arg(long)]
    pub workload: PathBuf,
    /// pure (ε-DP) or approx ((ε,δ)-DP).
    #[arg(long, value_enum)]
    pub privacy: PrivacyArg,
    /// ε, in [1e-6, 100].
    #[arg(long, allow_hyphen_values = true)]
    pub epsilon: f64,
    /// δ, in [1e-100, 0.5]; required with `--privacy approx`, refused with
    /// `pure`.
    #[arg(long, allow_hyphen_values = true)]
    pub delta: Option<f64>,
    /// Write the plan file (JSON) here.
    #[arg(long)]
    pub out: PathBuf,
    /// Print the report as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The loss to minimize: total (the sum of the queries' variances) or
    /// max (the largest per-query variance; `--privacy approx` and
    /// marginal workloads only).
    #[arg(long, default_value = "total")]
    pub objective: PlanObjective,
    /// The memory limit (`--max-memory`).
    #[command(flatten)]
    pub memory: MemoryArgs,
}

/// What `dpmm plan` writes: the plan file's fields and the workload spec
/// it was planned for (matrix factors inline).
#[derive(Serialize)]
struct PlanFileWithWorkload {
    #[serde(flatten)]
    file: PlanFile,
    workload: serde_json::Value,
}

impl PlanArgs {
    /// The budget the flags state, validated (ranges of
    /// `dp_core::kernel::accounting`).
    pub fn budget(&self) -> Result<PrivacyBudget, Failure> {
        match (self.privacy, self.delta) {
            (PrivacyArg::Pure, None) => Ok(PrivacyBudget::pure(self.epsilon)?),
            (PrivacyArg::Pure, Some(_)) => Err(Failure::BadInput(
                "--delta applies to --privacy approx only (pure ε-DP has no δ)".into(),
            )),
            (PrivacyArg::Approx, Some(delta)) => Ok(PrivacyBudget::approx(self.epsilon, delta)?),
            (PrivacyArg::Approx, None) => Err(Failure::BadInput(
                "--privacy approx needs --delta (no default δ is assumed)".into(),
            )),
        }
    }
}

/// Runs `dpmm plan`.
pub fn run(args: &PlanArgs) -> Result<(), Failure> {
    let budget = args.budget()?;
    let limit = args.memory.limit();
    let spinner = Spinner::start("planning");
    let planned = plan::plan_spec(
        &args.workload,
        budget,
        GaussianCalibration::Zcdp,
        &PlanOptions {
            objective: args.objective,
            max_memory: Some(limit),
            ..PlanOptions::default()
        },
    );
    spinner.finish();
    let (workload, plan, report) = planned?;
    plan_file_need(&plan.strategy).check(limit)?;
    // After planning, which has validated the spec and its matrix files.
    let spec = release_plan::embedded_spec(&args.workload).map_err(Failure::BadInput)?;
    let file = PlanFileWithWorkload {
        file: plan::plan_file(&workload, &plan),
        workload: spec,
    };
    let mut bytes = serde_json::to_vec(&file)
        .map_err(|e| Failure::Internal(format!("cannot format the plan file: {e}")))?;
    bytes.push(b'\n');
    crate::output::write_atomically(&args.out, &bytes)?;
    let text = if args.json {
        json_report(&report, args)?
    } else {
        human_report(&report, args)
    };
    println!("{text}");
    Ok(())
}

/// The report as pretty JSON, with the plan file's path.
fn json_report(report: &PlanReport, args: &PlanArgs) -> Result<String, Failure> {
    let internal = |e: serde_json::Error| Failure::Internal(format!("cannot format output: {e}"));
    let mut value = serde_json::to_value(report).map_err(internal)?;
    if let Some(obj) = value.as_object_mut() {
        obj.insert("out".into(), args.out.display().to_string().into());
    }
    serde_json::to_string_pretty(&value).map_err(internal)
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

/// The report as a table for people.
fn human_report(r: &PlanReport, args: &PlanArgs) -> String {
    let budget = match (r.delta, r.calibration) {
        (Some(d), Some(c)) => format!("(ε, δ) = ({}, {d:e}), {c} calibration", r.epsilon),
        _ => format!("ε = {}", r.epsilon),
    };
    let certificate = match (r.figures.lower_bound, r.duality_gap) {
        (Some(lb), Some(gap)) => format!("lower bound {}, relative gap {gap:.1e}", sig(lb)),
        _ => "no lower bound known for this workload".into(),
    };
    let mut out = format!(
        "workload: {} attributes, {} cells, {} queries\n\
         privacy: {}, {budget}\n\
         strategy: {} ({} Kronecker terms), {} = {}; {certificate}\n\
         noise: scale {} per strategy row (sensitivity {})\n\
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
    out += &format!("plan written to {}", args.out.display());
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
