//! HDMM (McKenna et al. VLDB 2018), §8: scalability of the structured
//! optimizers (`hdmm-scalability`) through
//! [`dp_plan::plan_strategy`], and what the side-by-sides of
//! [`super::hdmm_peers`] share with it.
//!
//! Times are wall-clock seconds of one plan (one run, this machine, shared
//! cores), with the objective it reached; peak memory is the process's
//! resident high-water mark (`VmHWM` of `/proc/self/status`) after the
//! point — monotone over a run, so it bounds every point before it.

use dp_core::Result;
use dp_opt::PrivacyModel;
use dp_plan::{PlanOptions, StructuredPlan, plan_strategy};
use dp_workloads::domain::Domain;
use dp_workloads::structured::{Factor, Queries, QueryGroup, StructuredWorkload};

use super::runner::{Grid, GridExperiment};
use crate::{Panel, Plot, Point, Progress, RunConfig, Series, SeriesPoint};

/// Peak resident memory of this process in MiB (`VmHWM`), if readable.
pub fn peak_memory_mib() -> Option<f64> {
    crate::procfs::peak_rss_bytes(crate::procfs::Pid::Current).map(|b| b / (1024.0 * 1024.0))
}

/// What one plan reached, without its strategy.
pub(crate) struct Planned {
    pub privacy: PrivacyModel,
    pub method: String,
    pub objective: f64,
    pub lower_bound: Option<f64>,
    pub seconds: f64,
    pub rounds: usize,
    /// `VmHWM` after the plan, MiB.
    pub peak_mib: f64,
}

impl Planned {
    /// Plans `w` under `privacy` and pushes its CSV point (`mechanism` is
    /// `plan ε-DP` or `plan (ε,δ)-DP`).
    pub(crate) fn run(
        w: &StructuredWorkload,
        privacy: PrivacyModel,
        options: &PlanOptions,
        (workload, parameter, value): (&str, &str, f64),
        points: &mut Vec<Point>,
    ) -> Result<Self> {
        let plan = plan_strategy(w, privacy, options)?;
        let planned = Self::from_plan(&plan);
        points.push(planned.point(workload, parameter, value));
        Ok(planned)
    }

    fn from_plan(plan: &StructuredPlan) -> Self {
        Self {
            privacy: plan.privacy,
            method: plan.method.clone(),
            objective: plan.objective,
            lower_bound: plan.certificate.map(|c| c.lower_bound),
            seconds: plan.seconds,
            rounds: plan.rounds,
            peak_mib: peak_memory_mib().unwrap_or(f64::NAN),
        }
    }

    fn point(&self, workload: &str, parameter: &str, value: f64) -> Point {
        Point {
            mechanism: format!("plan {}", privacy_label(self.privacy)),
            workload: workload.into(),
            dataset: "-".into(),
            parameter: parameter.into(),
            value,
            epsilon: 1.0,
            delta: None,
            seed: 0,
            repetitions: 0,
            mean_squared_error: None,
            ci95_low: None,
            ci95_high: None,
            expected_squared_error: Some(self.objective),
            metric: format!(
                "{} of the planned strategy ({}; column expected_squared_error), seconds of one plan; peak memory {:.0} MiB",
                objective_name(self.privacy),
                self.method,
                self.peak_mib
            ),
            seconds: self.seconds,
        }
    }

    /// The lower bound as a table cell (`-` when none is known).
    pub(crate) fn bound_cell(&self) -> String {
        self.lower_bound.map_or("-".into(), |b| format!("{b:.4e}"))
    }

    /// `label privacy: seconds`, the progress line.
    pub(crate) fn describe(&self, label: &str) -> String {
        format!(
            "{label} {}: {:.2} s",
            privacy_label(self.privacy),
            self.seconds
        )
    }
}

/// `d` attributes named `a0, a1, …`, each of size `n`.
pub(crate) fn domain(d: usize, n: usize) -> Result<Domain> {
    let names: Vec<String> = (0..d).map(|i| format!("a{i}")).collect();
    let pairs: Vec<(&str, usize)> = names.iter().map(|s| (s.as_str(), n)).collect();
    Ok(Domain::from_pairs(&pairs)?)
}

/// One group of weight 1 with `queries`.
pub(crate) fn single_group(
    domain: Domain,
    label: &str,
    queries: Queries,
) -> Result<StructuredWorkload> {
    Ok(StructuredWorkload::new(
        domain,
        vec![QueryGroup {
            label: label.into(),
            weight: 1.0,
            queries,
        }],
    )?)
}

pub(crate) fn privacy_label(p: PrivacyModel) -> &'static str {
    match p {
        PrivacyModel::Pure => "ε-DP",
        PrivacyModel::Approx => "(ε,δ)-DP",
    }
}

pub(crate) fn objective_name(p: PrivacyModel) -> &'static str {
    match p {
        PrivacyModel::Pure => "l1_obj",
        PrivacyModel::Approx => "l2_obj",
    }
}

/// Both privacy models, (ε,δ) first.
pub(crate) const BOTH: [PrivacyModel; 2] = [PrivacyModel::Approx, PrivacyModel::Pure];

/// One series per privacy model, in [`BOTH`]'s order and colours.
pub(crate) fn by_privacy(
    markers_only: bool,
    mut points: impl FnMut(PrivacyModel) -> Vec<SeriesPoint>,
) -> Vec<Series> {
    BOTH.into_iter()
        .enumerate()
        .map(|(color, privacy)| Series {
            name: privacy_label(privacy).into(),
            points: points(privacy),
            markers_only,
            color: color + 3,
        })
        .collect()
}

/// `hdmm-scalability`.
pub(crate) struct Scalability;

/// The experiment.
pub(crate) const SCALABILITY: Grid<Scalability> = Grid::new(
    "hdmm-scalability",
    "HDMM paper, §8 scalability: planning time vs attribute size (AllRange^⊗5) and vs number of attributes (3-way marginals)",
    Scalability,
);

/// One point: panel 0 is AllRange(v)^⊗5, panel 1 all 3-way marginals on
/// v attributes of size 10.
pub(crate) struct ScalePoint {
    panel: usize,
    privacy: PrivacyModel,
    v: usize,
}

impl ScalePoint {
    fn workload(&self) -> Result<(StructuredWorkload, String, &'static str)> {
        let v = self.v;
        Ok(if self.panel == 0 {
            let w = single_group(
                domain(5, v)?,
                "allrange^5",
                Queries::Kron(vec![Factor::AllRange(v); 5]),
            )?;
            (w, format!("AllRange({v})^⊗5"), "n")
        } else {
            let sets = dp_workloads::spec::k_subsets(v, 3.min(v))?;
            let w = single_group(domain(v, 10)?, "3-way", Queries::Marginals(sets))?;
            (w, format!("3-way marginals, {v} attributes of 10"), "d")
        })
    }
}

impl GridExperiment for Scalability {
    type Setup = PlanOptions;
    type Value = ScalePoint;
    type Row = (String, &'static str, Planned);

    fn setup(&self, _: &RunConfig, _: &mut dyn Progress) -> Result<PlanOptions> {
        Ok(PlanOptions::default())
    }

    fn grid(&self, cfg: &RunConfig, _: &PlanOptions) -> Vec<ScalePoint> {
        let sizes: Vec<usize> = cfg.by_scale(
            vec![8, 16],
            vec![16, 32, 64, 128, 256],
            vec![16, 32, 64, 128, 256, 512],
        );
        let attrs: Vec<usize> = cfg.by_scale(
            vec![3, 5],
            vec![2, 5, 10, 15, 20, 50, 100],
            vec![2, 5, 10, 15, 20, 30, 50, 75, 100],
        );
        // ε-DP on marginals runs OPT_M and OPT_⊗ over every marginal: up
        // to this many attributes.
        let pure_attrs = cfg.by_scale(5, 20, 100);
        let mut grid = Vec::new();
        for (panel, values) in [(0, &sizes), (1, &attrs)] {
            for privacy in BOTH {
                for &v in values {
                    if !(panel == 1 && privacy == PrivacyModel::Pure && v > pure_attrs) {
                        grid.push(ScalePoint { panel, privacy, v });
                    }
                }
            }
        }
        grid
    }

    fn measure(
        &self,
        options: &mut PlanOptions,
        p: &ScalePoint,
        points: &mut Vec<Point>,
    ) -> Result<Self::Row> {
        let (w, label, param) = p.workload()?;
        let planned = Planned::run(&w, p.privacy, options, (&label, param, p.v as f64), points)?;
        Ok((label, param, planned))
    }

    fn describe(&self, _: &ScalePoint, (label, _, planned): &Self::Row) -> String {
        planned.describe(label)
    }

    fn report(
        &self,
        _: &PlanOptions,
        grid: &[ScalePoint],
        rows: &[Self::Row],
    ) -> Result<(String, Vec<Plot>)> {
        let mut summary = String::from(
            "Seconds of one plan (one run on this machine, shared cores), the objective reached and the method chosen.\n\n\
             | workload | parameter | privacy | method | seconds | objective | lower bound | peak MiB |\n|---|---|---|---|---|---|---|---|\n",
        );
        for (p, (label, param, r)) in grid.iter().zip(rows) {
            summary += &format!(
                "| {label} | {param} = {} | {} | {} | {:.3} | {:.4e} | {} | {:.0} |\n",
                p.v,
                privacy_label(r.privacy),
                r.method,
                r.seconds,
                r.objective,
                r.bound_cell(),
                r.peak_mib
            );
        }
        summary += "\n**HDMM's published figures (its §8, 100 loss-and-gradient evaluations on its machine):** OPT_⊗ on five AllRange(512) attributes 154 s; \
            OPT_M on 15 attributes of size 10 2,870 s; least squares on 10⁹ cells 14–62 s. \
            Here (ε,δ) plans of marginal workloads are the closed-form optimum (residual basis), ε-DP ones the better of OPT_M and Kronecker p-Identity; \
            Kronecker workloads are planned by OPT_⊗ (COA per distinct factor, solved once). \
            Reconstruction time against cells is the `reconstruction-scaling` experiment.\n";
        let panels = [
            "AllRange(n)^⊗5 against n",
            "3-way marginals (size 10) against d",
        ]
        .into_iter()
        .enumerate()
        .map(|(panel, title)| Panel {
            title: title.into(),
            series: by_privacy(false, |privacy| {
                grid.iter()
                    .zip(rows)
                    .filter(|(p, _)| p.panel == panel && p.privacy == privacy)
                    .map(|(p, (_, _, r))| (p.v as f64, r.seconds.max(1e-4), None))
                    .collect()
            }),
        })
        .collect();
        Ok((
            summary,
            vec![Plot {
                file_stem: "time".into(),
                title: "planning time".into(),
                x_label: "n (AllRange) or d (marginals)".into(),
                y_label: "seconds".into(),
                log_x: true,
                log_y: true,
                panels,
            }],
        ))
    }
}
