//! A release's answers: one row per workload query, in workload order,
//! with its standard error and 95% interval, and the JSON sidecar that
//! says how they were made (mechanism, noise, what was charged, the
//! strategy's recomputed figures). Nothing in either is exact about the
//! data: not even the number of records.

use std::path::{Path, PathBuf};

use dp_core::ledger::LedgerBudget;
use dp_core::{Cost, Measurement, MeasurementNoise};
use dp_plan::reconstruct::{Reconstruction, VarianceMethod};
use dp_workloads::structured::StructuredWorkload;
use dpmm_records::Schema;
use serde_json::json;

use crate::Result;
use crate::release::{Prepared, Release};
use crate::release_figures::group_rmse;
use crate::release_plan::QueryLabels;

/// The two-sided 95% standard normal quantile.
const Z95: f64 = 1.959_963_984_540_054;

/// Queries per chunk of the answers CSV formatted on one thread.
const CSV_CHUNK: usize = 1 << 16;

/// One answered query.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The query, named by the schema (`sex = F & age in [18, 24]`).
    pub query: String,
    /// The private answer (unbiased; may be negative).
    pub answer: f64,
    /// Its exact standard deviation (or an upper bound, as the sidecar's
    /// `variances` says).
    pub std_error: f64,
    /// Lower end of the 95% interval.
    pub ci_low: f64,
    /// Upper end of the 95% interval.
    pub ci_high: f64,
}

/// The answers of one release, in workload order, and its sidecar.
pub struct Answers {
    workload: StructuredWorkload,
    schema: Schema,
    reconstruction: Reconstruction,
    sidecar: serde_json::Value,
    entry: usize,
}

impl Answers {
    pub(crate) fn new(
        release: &Release,
        p: Prepared,
        m: &Measurement,
        reconstruction: Reconstruction,
        entry: usize,
    ) -> Self {
        let sidecar = sidecar(release, &p, m, &reconstruction, entry);
        Self {
            workload: p.workload,
            schema: p.schema,
            reconstruction,
            sidecar,
            entry,
        }
    }

    /// The number of answers (the workload's queries).
    pub fn len(&self) -> usize {
        self.reconstruction
            .answers
            .len()
            .min(self.reconstruction.variances.len())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The answers in workload order.
    pub fn iter(&self) -> impl Iterator<Item = Answer> + '_ {
        let labels = QueryLabels::new(&self.workload, &self.schema);
        (0..self.len().min(labels.len())).map(move |q| {
            let mut query = String::new();
            let w = labels.write(q, &mut query);
            let (answer, std_error) = self.unweighted(q, w);
            Answer {
                query,
                answer,
                std_error,
                ci_low: answer - Z95 * std_error,
                ci_high: answer + Z95 * std_error,
            }
        })
    }

    /// The ledger entry that charged this release.
    pub fn ledger_entry(&self) -> usize {
        self.entry
    }

    /// The JSON sidecar: how the answers were made.
    pub fn sidecar(&self) -> &serde_json::Value {
        &self.sidecar
    }

    /// Query `q`'s answer and standard error, of the query itself: a spec
    /// weight `w` steers the plan, not the answer.
    fn unweighted(&self, q: usize, w: f64) -> (f64, f64) {
        let r = &self.reconstruction;
        (r.answers[q] / w, r.variances[q].max(0.0).sqrt() / w)
    }

    /// The answers CSV: `query,answer,std_error,ci_low,ci_high`, one row
    /// per query. Numbers are written by `ryu` (shortest round-trip form,
    /// exponent for very small or large values), chunks of rows formatted
    /// on rayon's pool.
    pub fn to_csv(&self) -> String {
        use rayon::prelude::*;
        let labels = QueryLabels::new(&self.workload, &self.schema);
        let n = labels.len().min(self.len());
        let chunks: Vec<String> = (0..n.div_ceil(CSV_CHUNK))
            .into_par_iter()
            .map(|c| {
                let mut out = String::new();
                let mut label = String::new();
                let mut number = ryu::Buffer::new();
                for q in c * CSV_CHUNK..((c + 1) * CSV_CHUNK).min(n) {
                    label.clear();
                    let w = labels.write(q, &mut label);
                    push_csv_field(&mut out, &label);
                    let (a, se) = self.unweighted(q, w);
                    for v in [a, se, a - Z95 * se, a + Z95 * se] {
                        out.push(',');
                        out.push_str(number.format(v));
                    }
                    out.push('\n');
                }
                out
            })
            .collect();
        let mut out = String::from("query,answer,std_error,ci_low,ci_high\n");
        out.reserve(chunks.iter().map(String::len).sum());
        for chunk in chunks {
            out.push_str(&chunk);
        }
        out
    }

    /// Writes the answers CSV to `out` and the sidecar to `<out>.json`,
    /// each whole or absent ([`crate::output`]); the sidecar first, so that
    /// answers never appear without theirs.
    pub fn write(&self, out: &Path) -> Result<()> {
        let mut side = serde_json::to_string_pretty(&self.sidecar).unwrap_or_default();
        side.push('\n');
        crate::output::write_all_atomically(&[
            (&sidecar_path(out), side.as_bytes()),
            (out, self.to_csv().as_bytes()),
        ])
    }
}

/// `<out>.json`, the JSON sidecar beside the answers.
pub fn sidecar_path(out: &Path) -> PathBuf {
    PathBuf::from(format!("{}.json", out.display()))
}

/// `s` as one CSV field: quoted when it holds a separator, quote or line
/// break.
fn push_csv_field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

fn sidecar(
    release: &Release,
    p: &Prepared,
    m: &Measurement,
    rec: &Reconstruction,
    entry: usize,
) -> serde_json::Value {
    let (noise, scale) = match m.noise {
        MeasurementNoise::DiscreteLaplace { scale } => ("discrete Laplace (CKS20, exact)", scale),
        MeasurementNoise::DiscreteGaussian { sigma } => ("discrete Gaussian (CKS20, exact)", sigma),
    };
    let rho = match p.cost {
        Cost::Rho(r) => Some(r),
        Cost::Epsilon(_) => None,
    };
    let unit = match p.ledger.budget() {
        LedgerBudget::PureDp { .. } => "epsilon",
        LedgerBudget::Zcdp { .. } => "rho (zCDP)",
    };
    let figures = &p.figures;
    json!({
        "mechanism": format!("matrix mechanism: {noise} noise on a structured strategy, least-squares reconstruction"),
        "noise": noise,
        "noise_scale": scale,
        "noise_variance_per_row": m.variance,
        "granularity": m.granularity,
        "sensitivity": m.sensitivity,
        "strategy_rows": m.values.len(),
        "epsilon": release.budget.epsilon().get(),
        "delta": release.budget.delta().map(|d| d.get()),
        "rho": rho,
        "charged": p.charge,
        "charged_unit": unit,
        "plan": {
            "method": p.strategy.method,
            "privacy": figures.privacy,
            "objective_name": figures.objective_name,
            "objective": figures.objective,
            "lower_bound": figures.lower_bound,
            "duality_gap": figures.duality_gap,
            "figures": "recomputed from the strategy measured, on the queries answered; \
                        lower_bound only where it has a closed form (marginal workloads)",
        },
        "groups": group_rmse(&p.workload, rec),
        "reconstruction": rec.method,
        "variances": match rec.variance_method {
            VarianceMethod::Exact => "exact",
            VarianceMethod::SingleTermBound => {
                "upper bounds (the best single strategy term's Gauss-Markov variance): \
                 std_error and the intervals are conservative"
            }
        },
        "queries": rec.answers.len(),
        "intervals": intervals_method(&m.noise),
        "ledger": {"path": release.ledger.display().to_string(), "entry": entry},
    })
}

/// How the 95% intervals are made, for the sidecar: a normal
/// approximation around the exact variance. Each answer's noise is a
/// linear combination of the strategy rows' independent draws; under pure
/// ε-DP these are discrete Laplace, whose tails are heavier than normal,
/// so an answer carrying few draws is covered less often (a single Laplace
/// draw: P(|X| ≤ 1.96σ) = 1 − e^(−1.96·√2) ≈ 93.7%).
fn intervals_method(noise: &MeasurementNoise) -> &'static str {
    match noise {
        MeasurementNoise::DiscreteLaplace { .. } => {
            "95% normal approximation: answer ± 1.96 std_error, std_error from the exact variance \
             of each answer; the noise is a sum of discrete Laplace draws, heavier-tailed than \
             normal, so an answer carrying few draws is covered less often (a single draw: about \
             93.7%)"
        }
        MeasurementNoise::DiscreteGaussian { .. } => {
            "95% normal approximation: answer ± 1.96 std_error, std_error from the exact variance \
             of each answer; the noise is a sum of discrete Gaussian draws"
        }
    }
}
