//! What `dpmm release` needs besides the data: the strategy (planned now
//! or read from a plan file, docs/formats.md), the workload (from its spec,
//! or the one `dpmm plan` embedded in the plan file) and a readable
//! description of every workload query, built from the schema.

use std::sync::Arc;

use dp_core::{KronTerm, PrivacyBudget};
use dp_linalg::Mat;
use dp_plan::StructuredPlan;
use dp_plan::plan::{FactorValue, PlanFigures, PlanFile};
use dp_workloads::domain::Domain;
use dp_workloads::spec::parse_spec;
use dp_workloads::structured::{Factor, StructuredWorkload};
use dpmm_records::{Encoding, Schema};

use crate::Document;
use serde_json::Value;

/// What `dpmm plan` writes into a plan file beside the plan's own fields.
pub struct Embedded {
    /// The workload planned for, and its spec (matrix factors inline).
    pub workload: Option<(StructuredWorkload, Value)>,
    /// The budget the plan reported its expected errors at (a release
    /// chooses its own).
    pub planned_at: Option<PrivacyBudget>,
}

/// The budget a plan reported its errors at, as a plan file holds it.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedAt {
    /// ε.
    pub epsilon: f64,
    /// δ; absent or null under pure ε-DP.
    #[serde(default)]
    pub delta: Option<f64>,
}

impl From<PrivacyBudget> for PlannedAt {
    fn from(b: PrivacyBudget) -> Self {
        Self {
            epsilon: b.epsilon().get(),
            delta: b.delta().map(|d| d.get()),
        }
    }
}

/// The strategy to measure and the figures its plan states (checked
/// against a recomputation, never reported as such: see
/// [`crate::release_figures`]).
pub struct Strategy {
    /// Terms `(weight, [(attribute position, factor)])`.
    pub terms: Vec<KronTerm>,
    /// Where it came from (`"residual"`, `"kron-coa"`, …, or `"plan file"`).
    pub method: String,
    /// The privacy model it was optimized for, what its objective
    /// measures, the objective on the workload it was planned for and the
    /// certified lower bound.
    pub figures: PlanFigures,
}

impl Strategy {
    /// From a plan just computed.
    pub fn from_plan(plan: &StructuredPlan) -> Self {
        Self {
            terms: plan.strategy.terms.clone(),
            method: plan.method.to_string(),
            figures: PlanFigures::of(plan),
        }
    }

    /// Reads a plan file written by `dpmm plan` / `cargo xtask plan`; its
    /// domain must be `domain` (names and sizes, in order), or, without
    /// one, the domain of the workload it embeds. Also returns what `dpmm
    /// plan` writes beside the plan's fields (`cargo xtask plan` does not):
    /// the workload, which must be on the same domain, and the budget the
    /// plan reported its errors at.
    pub fn from_document(
        doc: &Document,
        domain: Option<&Domain>,
    ) -> Result<(Self, Embedded), String> {
        let name = doc.name();
        let at = |what: &str| format!("{name}: {what}");
        let text = doc.read().map_err(|e| e.to_string())?;
        let file: PlanFile =
            serde_json::from_str(&text).map_err(|e| at(&format!("not a plan file: {e}")))?;
        // `dpmm plan` embeds the workload beside the plan file's fields;
        // the rest of the text is skipped, not parsed into values again.
        #[derive(serde::Deserialize)]
        struct Beside {
            workload: Option<Value>,
            planned_at: Option<PlannedAt>,
        }
        let beside: Beside =
            serde_json::from_str(&text).map_err(|e| at(&format!("not a plan file: {e}")))?;
        if !matches!(file.version, 1 | 2) {
            return Err(at(&format!(
                "plan file version {} (this dpmm reads 1 and 2)",
                file.version
            )));
        }
        let f = &file.figures;
        let figures_ok = matches!(f.privacy.as_str(), "pure" | "approx")
            && matches!(
                f.objective_name.as_str(),
                "l1_obj" | "l2_obj" | "max_variance"
            )
            && f.objective.is_finite()
            && f.objective > 0.0
            && f.lower_bound.is_none_or(f64::is_finite);
        if !figures_ok {
            return Err(at(
                "privacy must be pure or approx, objective_name l1_obj, l2_obj or \
                 max_variance, and the objective and lower bound finite (the objective positive)",
            ));
        }
        let workload = match beside.workload {
            None => None,
            Some(spec) => {
                let w = parse_spec(&spec.to_string(), doc.base())
                    .map_err(|e| at(&format!("workload: {e}")))?;
                Some((w, spec))
            }
        };
        let domain = match (domain, &workload) {
            (Some(d), _) => d,
            (None, Some((w, _))) => w.domain(),
            (None, None) => {
                return Err(at(
                    "the plan file carries no workload (plans from `cargo xtask plan` do not)",
                ));
            }
        };
        let planned_at = match beside.planned_at {
            None => None,
            Some(p) => Some(
                crate::privacy::budget(p.epsilon, p.delta)
                    .map_err(|e| at(&format!("planned_at: {e}")))?,
            ),
        };
        let attrs = domain.attributes();
        let same = file.domain.len() == attrs.len()
            && file
                .domain
                .iter()
                .zip(attrs)
                .all(|(d, a)| d.name == a.name && d.size == a.size);
        if !same {
            return Err(at("the plan's domain is not the schema's"));
        }
        if workload.as_ref().is_some_and(|(w, _)| w.domain() != domain) {
            return Err(at("the embedded workload's domain is not the schema's"));
        }
        if file.terms.is_empty() {
            return Err(at("'terms' must be a non-empty array"));
        }
        let mut out = Vec::with_capacity(file.terms.len());
        // A shared matrix is built once and shared by every term naming it.
        let mut shared: Vec<Option<Arc<Mat<f64>>>> = vec![None; file.matrices.len()];
        for (k, t) in file.terms.iter().enumerate() {
            let bad = |why: &str| at(&format!("terms[{k}]: {why}"));
            let mut fs = Vec::with_capacity(t.factors.len());
            for (name, value) in &t.factors {
                let p = domain.position(name).map_err(|e| bad(&e.to_string()))?;
                let size = attrs[p].size;
                let m = match value {
                    FactorValue::Rows(rows) => Arc::new(matrix(rows, size).map_err(|e| bad(&e))?),
                    FactorValue::Shared(i) => {
                        let Some(slot) = shared.get_mut(*i) else {
                            return Err(bad(&format!(
                                "'{name}' names matrix {i}, and the file has {}",
                                file.matrices.len()
                            )));
                        };
                        match slot {
                            Some(m) if m.ncols() == size => m.clone(),
                            Some(_) => {
                                return Err(bad(&format!(
                                    "matrix {i} does not have '{name}''s {size} columns"
                                )));
                            }
                            None => {
                                let m = Arc::new(
                                    matrix(&file.matrices[*i], size)
                                        .map_err(|e| bad(&format!("matrix {i}: {e}")))?,
                                );
                                *slot = Some(m.clone());
                                m
                            }
                        }
                    }
                };
                fs.push((p, m));
            }
            fs.sort_by_key(|(p, _)| *p);
            out.push(KronTerm {
                weight: t.weight,
                factors: fs,
            });
        }
        let strategy = Self {
            terms: out,
            method: "plan file".into(),
            figures: file.figures,
        };
        Ok((
            strategy,
            Embedded {
                workload,
                planned_at,
            },
        ))
    }

    /// The attribute sets the measurement reads: the supports that are not
    /// inside another one (smaller tables are summed from them).
    pub fn tables(&self) -> Vec<Vec<usize>> {
        let supports: Vec<Vec<usize>> = self
            .terms
            .iter()
            .map(|t| t.factors.iter().map(|(p, _)| *p).collect())
            .collect();
        let mut out: Vec<Vec<usize>> = Vec::new();
        for s in &supports {
            let inside = supports
                .iter()
                .any(|o| o.len() > s.len() && s.iter().all(|a| o.contains(a)));
            if !inside && !out.contains(s) {
                out.push(s.clone());
            }
        }
        out
    }
}

fn matrix(rows: &[Vec<f64>], size: usize) -> Result<Mat<f64>, String> {
    if rows.is_empty() {
        return Err("a factor must be a non-empty array of rows".into());
    }
    if rows.iter().any(|r| r.len() != size) {
        return Err(format!(
            "every factor row must have the attribute's {size} entries"
        ));
    }
    Ok(Mat::from_fn(rows.len(), size, |i, j| rows[i][j]))
}

/// How attribute `a` reads cells `lo..=hi`.
fn cells(schema: &Schema, a: usize, lo: usize, hi: usize) -> String {
    let attr = &schema.attributes()[a];
    let name = &attr.name;
    match &attr.encoding {
        Encoding::Categorical { values } => {
            if lo == hi {
                format!("{name} = {}", values[lo])
            } else {
                format!("{name} in {{{}}}", values[lo..=hi].join(", "))
            }
        }
        Encoding::Bins { edges } => {
            let (a, b) = (edges[lo], edges[hi + 1]);
            if lo == hi && b - a == 1.0 && a.fract() == 0.0 {
                format!("{name} = {a}")
            } else {
                format!("{name} in [{a}, {b})")
            }
        }
    }
}

/// The description of row `r` of a factor on attribute `a` (`None` for a
/// total: the attribute is summed out).
pub(crate) fn factor_row(schema: &Schema, a: usize, f: &Factor, r: usize) -> Option<String> {
    match f {
        Factor::Total(_) => None,
        Factor::Identity(_) => Some(cells(schema, a, r, r)),
        Factor::Prefix(_) => Some(cells(schema, a, 0, r)),
        Factor::AllRange(n) => {
            // Ranges [lo, hi] with lo outer, hi inner (the workload's order).
            let (mut lo, mut k) = (0, r);
            while k >= n - lo {
                k -= n - lo;
                lo += 1;
            }
            Some(cells(schema, a, lo, lo + k))
        }
        Factor::Ranges { ranges, .. } => Some(cells(schema, a, ranges[r].0, ranges[r].1)),
        Factor::Matrix(_) => Some(format!(
            "row {r} of the matrix on {}",
            schema.attributes()[a].name
        )),
    }
}

/// Attributes with at most this many query rows have their row labels
/// formatted once rather than once per query.
const LABEL_CACHE: usize = 1 << 20;

/// Every query's description, by its index in workload order (docs/formats.md:
/// products in order, rows row-major over the attributes, last
/// fastest), and its product's weight. Row labels are formatted once per
/// product and attribute, so that writing millions of answers costs one
/// join per query, from any thread.
pub struct QueryLabels<'a> {
    schema: &'a Schema,
    products: Vec<ProductLabels>,
    /// Index of each product's first query; then the total.
    starts: Vec<usize>,
}

struct ProductLabels {
    weight: f64,
    factors: Vec<Factor>,
    sizes: Vec<usize>,
    /// Each attribute's row labels, when it has at most [`LABEL_CACHE`].
    cached: Vec<Option<Vec<Option<String>>>>,
}

impl<'a> QueryLabels<'a> {
    /// The labels of `workload`'s queries, named by `schema`.
    pub fn new(workload: &StructuredWorkload, schema: &'a Schema) -> Self {
        let mut products = Vec::new();
        let mut starts = vec![0];
        for (weight, factors) in workload.products() {
            let sizes: Vec<usize> = factors.iter().map(Factor::num_queries).collect();
            let cached = factors
                .iter()
                .enumerate()
                .map(|(a, f)| {
                    (sizes[a] <= LABEL_CACHE)
                        .then(|| (0..sizes[a]).map(|r| factor_row(schema, a, f, r)).collect())
                })
                .collect();
            let total = sizes.iter().product::<usize>();
            starts.push(starts[starts.len() - 1] + total);
            products.push(ProductLabels {
                weight,
                factors,
                sizes,
                cached,
            });
        }
        Self {
            schema,
            products,
            starts,
        }
    }

    /// The number of queries.
    pub fn len(&self) -> usize {
        self.starts[self.starts.len() - 1]
    }

    /// Appends query `q`'s description to `out` and returns its product's
    /// weight (`q < len()`).
    pub fn write(&self, q: usize, out: &mut String) -> f64 {
        let p = self.starts.partition_point(|&s| s <= q) - 1;
        let product = &self.products[p];
        let mut rest = q - self.starts[p];
        let mut index = vec![0usize; product.sizes.len()];
        for (k, &size) in product.sizes.iter().enumerate().rev() {
            index[k] = rest % size;
            rest /= size;
        }
        let mut empty = true;
        for (a, f) in product.factors.iter().enumerate() {
            let owned;
            let part = match &product.cached[a] {
                Some(cached) => cached[index[a]].as_deref(),
                None => {
                    owned = factor_row(self.schema, a, f, index[a]);
                    owned.as_deref()
                }
            };
            if let Some(part) = part {
                if !empty {
                    out.push_str(" & ");
                }
                out.push_str(part);
                empty = false;
            }
        }
        if empty {
            out.push_str("total");
        }
        product.weight
    }
}
