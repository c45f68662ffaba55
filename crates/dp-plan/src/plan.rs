//! The `plan` entry point: a workload spec (docs/formats.md) and a privacy
//! budget → an optimized structured strategy, a report of its expected
//! error with the certificate, and the plan file.
//!
//! Expected errors follow from the strategy alone: with noise of variance
//! `v` per strategy row (Laplace `2(Δ₁/ε)²`, Gaussian `(c(ε,δ)Δ₂)²`) and
//! least squares, query group g has total squared error
//! `v/Δ² · obj_g` where `obj_g = Δ² tr(W_gᵀW_g (AᵀA)⁺)` is its share of the
//! objective (so the whole workload's is `v/Δ² · objective`).

use std::path::Path;

use dp_core::{DpError, GaussianCalibration, NoiseCalibration, PrivacyBudget, Result};
use dp_workloads::spec::load_spec;
use dp_workloads::structured::StructuredWorkload;
use serde::{Deserialize, Serialize};

use super::{PlanObjective, PlanOptions, StructuredPlan, plan_strategy};
use dp_opt::{PrivacyModel, Termination};

/// Errors of one query group, per answer as released: a group's weight
/// says how much its errors count in the objective, but its answers are
/// the queries' own values (a weight-3 group's answers are not tripled),
/// so its errors here are the weighted ones over the weight squared.
#[derive(Debug, Clone, Serialize)]
pub struct GroupReport {
    /// The group's label.
    pub label: String,
    /// Number of queries.
    pub queries: f64,
    /// Expected total squared error of the group's answers.
    pub expected_squared_error: f64,
    /// Root mean squared error per answer of the group.
    pub rmse: f64,
}

/// What `plan` prints.
#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    /// The privacy model, the objective (`l1_obj` (pure) or `l2_obj`
    /// (approx): the sum of the queries' variances; `max_variance`: the
    /// largest one, same units) and its proven lower bound, when known.
    #[serde(flatten)]
    pub figures: PlanFigures,
    /// ε.
    pub epsilon: f64,
    /// δ (approx only).
    pub delta: Option<f64>,
    /// The Gaussian calibration behind `noise_scale` (approx only).
    pub calibration: Option<&'static str>,
    /// Which method produced the strategy.
    pub method: String,
    /// Number of attributes.
    pub attributes: usize,
    /// Number of cells (f64: it may exceed every integer type).
    pub cells: f64,
    /// Number of queries.
    pub queries: f64,
    /// Why the optimizer stopped.
    pub termination: Termination,
    /// `(objective − lower_bound)/objective`.
    pub duality_gap: Option<f64>,
    /// `Δ₁` or `Δ₂` of the strategy.
    pub sensitivity: f64,
    /// Laplace scale or Gaussian σ per strategy row.
    pub noise_scale: f64,
    /// Expected total squared error over every answer as released (the
    /// groups' sum; the objective when every weight is 1).
    pub expected_total_squared_error: f64,
    /// Expected squared error of the worst query (max-variance plans), in
    /// the objective's terms: a weighted group's variances times its weight
    /// squared.
    pub expected_max_squared_error: Option<f64>,
    /// Per query group.
    pub groups: Vec<GroupReport>,
    /// Kronecker terms in the strategy.
    pub strategy_terms: usize,
    /// Block-coordinate passes.
    pub rounds: usize,
    /// Wall-clock seconds of planning.
    pub seconds: f64,
}

/// The plan file (docs/formats.md): the strategy as a weighted union of
/// Kronecker products of per-attribute matrices; an attribute not named in
/// a term has the factor `[[1, …, 1]]`. It holds no ε or δ: a plan is
/// reusable at any budget (its errors scale with the noise variance).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(from = "PlanFileFields")]
pub struct PlanFile {
    /// 2 as written (shared factor matrices); 1 is still read.
    pub version: u32,
    /// What the plan says of itself (written as top-level fields).
    #[serde(flatten)]
    pub figures: PlanFigures,
    /// The domain, in order.
    pub domain: Vec<DomainEntry>,
    /// `Δ₁` or `Δ₂` of the stacked strategy.
    pub sensitivity: f64,
    /// The distinct factor matrices (rows), which terms name by index
    /// (version 2; empty in version 1, whose factors are all inline).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matrices: Vec<Vec<Vec<f64>>>,
    /// The stacked terms.
    pub terms: Vec<PlanTerm>,
}

/// The plan file's fields as read: the figures as plain fields rather
/// than `#[serde(flatten)]`, which would buffer the whole document (every
/// factor entry) before reading it; a repeated key is still an error.
#[derive(Deserialize)]
struct PlanFileFields {
    version: u32,
    privacy: String,
    objective_name: String,
    objective: f64,
    lower_bound: Option<f64>,
    domain: Vec<DomainEntry>,
    sensitivity: f64,
    #[serde(default)]
    matrices: Vec<Vec<Vec<f64>>>,
    terms: Vec<PlanTerm>,
}

impl From<PlanFileFields> for PlanFile {
    fn from(f: PlanFileFields) -> Self {
        Self {
            version: f.version,
            figures: PlanFigures {
                privacy: f.privacy,
                objective_name: f.objective_name,
                objective: f.objective,
                lower_bound: f.lower_bound,
            },
            domain: f.domain,
            sensitivity: f.sensitivity,
            matrices: f.matrices,
            terms: f.terms,
        }
    }
}

/// What a plan says of itself besides its strategy: the privacy model it
/// was optimized for, what its objective measures, the objective and its
/// certified lower bound. The plan file carries them and a release
/// reports them (docs/formats.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanFigures {
    /// `pure` or `approx`.
    pub privacy: String,
    /// `l1_obj`, `l2_obj` or `max_variance`.
    pub objective_name: String,
    /// The objective.
    pub objective: f64,
    /// The lower bound, when known.
    pub lower_bound: Option<f64>,
}

impl PlanFigures {
    /// The figures of a plan just computed.
    pub fn of(plan: &StructuredPlan) -> Self {
        Self {
            privacy: plan.privacy.name().into(),
            objective_name: objective_name(plan).into(),
            objective: plan.objective,
            lower_bound: plan.certificate.map(|c| c.lower_bound),
        }
    }
}

/// An attribute of the plan file's domain.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DomainEntry {
    /// Name.
    pub name: String,
    /// Size.
    pub size: usize,
}

/// One `weight · ⊗ factors` term of the plan file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanTerm {
    /// Multiplies every row.
    pub weight: f64,
    /// Attribute name → factor, in domain order (written as a JSON object
    /// whose keys keep that order).
    #[serde(serialize_with = "ordered_map", deserialize_with = "ordered_pairs")]
    pub factors: Vec<NamedFactor>,
}

/// An attribute name with its factor.
pub type NamedFactor = (String, FactorValue);

/// A term's factor: an index into the file's `matrices`, or its rows
/// inline (every factor of a version 1 file).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FactorValue {
    /// `matrices[i]`.
    Shared(usize),
    /// The rows.
    Rows(Vec<Vec<f64>>),
}

impl<'de> Deserialize<'de> for FactorValue {
    /// An integer or an array of rows, read in place (serde's untagged
    /// enums would buffer every entry first).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Value;
        impl<'de> serde::de::Visitor<'de> for Value {
            type Value = FactorValue;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an index into 'matrices' or an array of factor rows")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<FactorValue, E> {
                usize::try_from(v)
                    .map(FactorValue::Shared)
                    .map_err(|_| E::custom(format!("matrix index {v} out of range")))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<FactorValue, A::Error> {
                let mut rows = Vec::new();
                while let Some(row) = seq.next_element::<Vec<f64>>()? {
                    rows.push(row);
                }
                Ok(FactorValue::Rows(rows))
            }
        }
        d.deserialize_any(Value)
    }
}

/// A list of pairs as a JSON object, keys in list order.
fn ordered_map<S: serde::Serializer>(
    pairs: &[NamedFactor],
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(pairs.len()))?;
    for (k, v) in pairs {
        map.serialize_entry(k, v)?;
    }
    map.end()
}

/// The inverse of [`ordered_map`]: a JSON object as its list of pairs, in
/// document order; an attribute named twice is an error.
fn ordered_pairs<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Vec<NamedFactor>, D::Error> {
    struct Pairs;
    impl<'de> serde::de::Visitor<'de> for Pairs {
        type Value = Vec<NamedFactor>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object from attribute names to factor rows")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut out: Self::Value = Vec::new();
            while let Some((name, rows)) = map.next_entry::<String, FactorValue>()? {
                if out.iter().any(|(seen, _)| *seen == name) {
                    return Err(serde::de::Error::custom(format!(
                        "attribute '{name}' named twice in one term"
                    )));
                }
                out.push((name, rows));
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(Pairs)
}

/// Loads the spec at `path` and plans it under `budget`.
pub fn plan_spec(
    path: &Path,
    budget: PrivacyBudget,
    calibration: GaussianCalibration,
    options: &PlanOptions,
) -> Result<(StructuredWorkload, StructuredPlan, PlanReport)> {
    let workload = load_spec(path)?;
    let (plan, report) = plan_workload(&workload, budget, calibration, options)?;
    Ok((workload, plan, report))
}

/// `cargo xtask plan`'s path (`dpmm plan` plans through [`plan_spec`] and
/// writes its own file, which also embeds the workload for `--plan`):
/// loads the spec at `spec`, plans it under `budget`, writes the plan file
/// to `out` (when given) and returns the report. Nothing here reads data:
/// a plan depends on the workload and the privacy model only.
pub fn plan_spec_to_file(
    spec: &Path,
    budget: PrivacyBudget,
    calibration: GaussianCalibration,
    options: &PlanOptions,
    out: Option<&Path>,
) -> Result<PlanReport> {
    let (workload, plan, report) = plan_spec(spec, budget, calibration, options)?;
    if let Some(out) = out {
        let cannot = |e: &dyn std::fmt::Display| {
            DpError::Io(format!(
                "{}: cannot write the plan file: {e}",
                out.display()
            ))
        };
        let mut text =
            serde_json::to_string(&plan_file(&workload, &plan)).map_err(|e| cannot(&e))?;
        text.push('\n');
        std::fs::write(out, text).map_err(|e| cannot(&e))?;
    }
    Ok(report)
}

/// Plans `workload` under `budget` and reports its expected errors.
pub fn plan_workload(
    workload: &StructuredWorkload,
    budget: PrivacyBudget,
    calibration: GaussianCalibration,
    options: &PlanOptions,
) -> Result<(StructuredPlan, PlanReport)> {
    let privacy = PrivacyModel::of(budget);
    let plan = plan_strategy(workload, privacy, options)?;
    let noise = match budget {
        PrivacyBudget::Pure { epsilon } => NoiseCalibration::laplace(plan.sensitivity, epsilon)?,
        PrivacyBudget::Approx { epsilon, delta } => {
            NoiseCalibration::gaussian(plan.sensitivity, epsilon, delta, calibration)?
        }
    };
    // Error per unit of objective: v / Δ².
    let per_unit = noise.variance() / (plan.sensitivity * plan.sensitivity);
    // A max-variance plan's objective is its worst query's; the groups
    // hold the totals.
    let max_variance = plan.objective_kind == PlanObjective::MaxVariance;
    let groups: Vec<GroupReport> = plan
        .groups
        .iter()
        .zip(workload.groups())
        .map(|(g, spec)| {
            let error = per_unit * g.objective / (spec.weight * spec.weight);
            GroupReport {
                label: g.label.clone(),
                queries: g.queries,
                expected_squared_error: error,
                rmse: (error / g.queries).sqrt(),
            }
        })
        .collect();
    let total = groups.iter().map(|g| g.expected_squared_error).sum::<f64>();
    let report = PlanReport {
        figures: PlanFigures::of(&plan),
        epsilon: budget.epsilon().get(),
        delta: budget.delta().map(|d| d.get()),
        calibration: budget.delta().map(|_| calibration.name()),
        method: plan.method.clone(),
        attributes: workload.domain().len(),
        cells: workload.domain().cells_f64(),
        queries: workload.num_queries(),
        termination: plan.termination.clone(),
        duality_gap: plan.certificate.map(|c| c.relative_gap),
        sensitivity: plan.sensitivity,
        noise_scale: noise.scale,
        expected_total_squared_error: total,
        expected_max_squared_error: max_variance.then_some(per_unit * plan.objective),
        groups,
        strategy_terms: plan.strategy.terms.len(),
        rounds: plan.rounds,
        seconds: plan.seconds,
    };
    Ok((plan, report))
}

/// What `plan.objective` measures: `l1_obj` / `l2_obj` (the sum of the
/// queries' variances) or `max_variance` (the largest).
pub fn objective_name(plan: &StructuredPlan) -> &'static str {
    match (plan.objective_kind, plan.privacy) {
        (PlanObjective::MaxVariance, _) => PlanObjective::MaxVariance.name(),
        (PlanObjective::TotalVariance, PrivacyModel::Pure) => "l1_obj",
        (PlanObjective::TotalVariance, PrivacyModel::Approx) => "l2_obj",
    }
}

/// The plan file of `plan` on `workload`'s domain: each distinct factor
/// matrix written once in `matrices` and named by index (a residual plan on
/// 100 attributes has 1.7·10⁵ terms and one contrast matrix per attribute
/// size).
pub fn plan_file(workload: &StructuredWorkload, plan: &StructuredPlan) -> PlanFile {
    use std::collections::HashMap;
    let attrs = workload.domain().attributes();
    let mut matrices: Vec<Vec<Vec<f64>>> = Vec::new();
    let mut by_pointer: HashMap<*const dp_linalg::Mat<f64>, usize> = HashMap::new();
    let mut by_value: HashMap<(usize, Vec<u64>), usize> = HashMap::new();
    let mut terms = Vec::with_capacity(plan.strategy.terms.len());
    for t in &plan.strategy.terms {
        let mut factors = Vec::with_capacity(t.factors.len());
        for (i, m) in &t.factors {
            let index = *by_pointer
                .entry(std::sync::Arc::as_ptr(m))
                .or_insert_with(|| {
                    let bits = (0..m.nrows())
                        .flat_map(|r| (0..m.ncols()).map(move |c| m[(r, c)].to_bits()))
                        .collect();
                    *by_value.entry((m.ncols(), bits)).or_insert_with(|| {
                        matrices.push(
                            (0..m.nrows())
                                .map(|r| (0..m.ncols()).map(|c| m[(r, c)]).collect())
                                .collect(),
                        );
                        matrices.len() - 1
                    })
                });
            factors.push((attrs[*i].name.clone(), FactorValue::Shared(index)));
        }
        terms.push(PlanTerm {
            weight: t.weight,
            factors,
        });
    }
    PlanFile {
        version: 2,
        figures: PlanFigures::of(plan),
        domain: attrs
            .iter()
            .map(|a| DomainEntry {
                name: a.name.clone(),
                size: a.size,
            })
            .collect(),
        sensitivity: plan.sensitivity,
        matrices,
        terms,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A plan file reads back as written: factors keep their order (not
    /// the keys' alphabetical one), writing the read file gives the same
    /// text, and an attribute named twice in a term is refused.
    #[test]
    fn plan_file_round_trips() {
        let file = PlanFile {
            version: 2,
            figures: PlanFigures {
                privacy: "approx".into(),
                objective_name: "l2_obj".into(),
                objective: 3.5,
                lower_bound: Some(3.25),
            },
            domain: vec![
                DomainEntry {
                    name: "b".into(),
                    size: 2,
                },
                DomainEntry {
                    name: "a".into(),
                    size: 1,
                },
            ],
            sensitivity: 1.0,
            terms: vec![PlanTerm {
                weight: 0.5,
                factors: vec![
                    ("b".into(), FactorValue::Shared(0)),
                    ("a".into(), FactorValue::Rows(vec![vec![2.0]])),
                ],
            }],
            matrices: vec![vec![vec![1.0, 0.0], vec![0.0, 1.0]]],
        };
        let text = serde_json::to_string(&file).unwrap();
        let read: PlanFile = serde_json::from_str(&text).unwrap();
        assert_eq!(read.terms[0].factors, file.terms[0].factors);
        assert_eq!(read.matrices, file.matrices);
        assert_eq!(read.figures, file.figures);
        assert_eq!(serde_json::to_string(&read).unwrap(), text);
        let twice = text.replace(r#""a":[[2.0]]"#, r#""b":[[2.0]]"#);
        assert_ne!(twice, text);
        let err = serde_json::from_str::<PlanFile>(&twice).unwrap_err();
        assert!(err.to_string().contains("named twice"), "{err}");
    }
}
