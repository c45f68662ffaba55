//! Strategy optimization on multi-dimensional domains without densifying
//! (HDMM, McKenna et al. VLDB 2018, §6; ResidualPlanner, Xiao et al.
//! NeurIPS 2023).
//!
//! * [`kron`]: OPT_⊗ — a Kronecker strategy `⊗ Aᵢ`, each factor found by
//!   the 1-D optimizers behind [`dp_opt::StrategyOptimizer`] (COA for
//!   (ε,δ), p-Identity for ε-DP) on a weighted factor Gram, block
//!   coordinate over attributes for unions. For a single Kronecker product
//!   one pass is optimal and certified by the product of the factors'
//!   lower bounds.
//! * [`marginal`]: the optimal (ε,δ) strategy for weighted marginal
//!   workloads in closed form over the residual basis; it attains the
//!   singular value bound, which is its certificate.
//! * [`max_variance`]: for (ε,δ) marginal workloads, the strategy that
//!   minimizes the largest per-query variance instead of their sum
//!   ([`PlanObjective::MaxVariance`]), certified by its dual bound.
//! * [`opt_m`]: OPT_M, HDMM's marginals template for ε-DP (a weighted
//!   union of marginals, objective and gradient in closed form over the
//!   residual basis).
//!
//! [`plan_strategy`] picks the method from the workload's structure;
//! [`plan`] adds the report and the plan file, [`reconstruct`] the least
//! squares answers of a measured strategy, [`resources`] the memory every
//! step needs before it runs. Objectives use the normalization of
//! [`dp_opt::PrivacyModel`]: `l2_obj = Δ₂(A)² tr(WᵀW (AᵀA)⁺)`, `l1_obj`
//! with `Δ₁`.
//!
//! ```
//! use dp_opt::PrivacyModel;
//! use dp_plan::{PlanOptions, plan_strategy};
//! use dp_workloads::spec::parse_spec;
//!
//! // Every 2-way marginal of three attributes, under (ε, δ)-DP.
//! let spec = r#"{"domain": [{"name": "a", "size": 2}, {"name": "b", "size": 3},
//!                           {"name": "c", "size": 4}],
//!                "queries": [{"marginals": {"k": 2}}]}"#;
//! let workload = parse_spec(spec, std::path::Path::new(".")).unwrap();
//! let plan = plan_strategy(&workload, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
//! // The optimal marginal mechanism attains the singular value bound.
//! let bound = plan.certificate.as_ref().unwrap().lower_bound;
//! assert!((plan.objective - bound).abs() <= 1e-9 * plan.objective);
//! ```

pub mod evaluate;
pub mod kron;
pub mod marginal;
pub mod max_variance;
pub mod opt_m;
pub mod plan;
pub mod reconstruct;
mod reconstruct_iterative;
pub mod reconstruct_kron;
mod reconstruct_symmetric;
mod reconstruction;
pub mod resources;
#[cfg(test)]
mod tests;

use std::time::Instant;

use dp_core::{DpError, Result};
use dp_linalg::Mat;
use dp_workloads::marginals::{residual_spectrum, svd_bound};
use dp_workloads::structured::StructuredWorkload;
use serde::Serialize;

use dp_opt::{Budget, Certificate, PrivacyModel, Termination};

pub use dp_core::KronTerm;

/// A strategy as the stacked union of weighted Kronecker products of
/// per-attribute matrices.
#[derive(Debug, Clone)]
pub struct StructuredStrategy {
    /// The attribute sizes.
    pub shape: Vec<usize>,
    /// The stacked terms.
    pub terms: Vec<KronTerm>,
}

impl StructuredStrategy {
    /// The factor of `term` on attribute `i` as a dense matrix (`1ᵀ` when
    /// not listed).
    pub fn factor(&self, term: &KronTerm, i: usize) -> Mat<f64> {
        match term.factors.iter().find(|(p, _)| *p == i) {
            Some((_, m)) => m.as_ref().clone(),
            None => Mat::from_fn(1, self.shape[i], |_, _| 1.0),
        }
    }

    /// The dense strategy (tests and small domains: the caller checks the
    /// size).
    pub fn dense(&self) -> Result<Mat<f64>> {
        let blocks: Vec<Mat<f64>> = self
            .terms
            .iter()
            .map(|t| {
                let mats: Vec<Mat<f64>> =
                    (0..self.shape.len()).map(|i| self.factor(t, i)).collect();
                dp_workloads::structured::kron_all(&mats) * t.weight
            })
            .collect();
        Ok(dp_linalg::stack_rows(&blocks, self.shape.iter().product())?)
    }
}

/// A planned strategy with its objective, certificate and per-group
/// errors.
#[derive(Debug, Clone)]
pub struct StructuredPlan {
    /// The privacy model whose objective was minimized.
    pub privacy: PrivacyModel,
    /// Which method produced it: `"kron-<optimizer>"` (OPT_⊗ with the
    /// registered optimizer that solved its factors, by default
    /// `"kron-coa"` or `"kron-pidentity"`), `"residual"`,
    /// `"residual-max-variance"` or `"opt-m"`.
    pub method: String,
    /// The loss minimized: the sum of the queries' variances (`objective`
    /// is `l2_obj`/`l1_obj`) or the largest one.
    pub objective_kind: PlanObjective,
    /// The strategy.
    pub strategy: StructuredStrategy,
    /// `Δ(A)`: L2 (approx) or L1 (pure) sensitivity of the strategy.
    pub sensitivity: f64,
    /// `l2_obj` or `l1_obj` of the strategy on the workload; for
    /// [`PlanObjective::MaxVariance`] the largest per-query variance
    /// `max_q Δ₂² q(AᵀA)⁺qᵀ` over the workload's rows (same units).
    pub objective: f64,
    /// Per query group: `Δ² tr(W_gᵀW_g (AᵀA)⁺)` (they sum to `objective`
    /// under the total-variance loss) and the group's number of queries.
    pub groups: Vec<GroupError>,
    /// A proven lower bound on the optimum, when one is known.
    pub certificate: Option<Certificate>,
    /// Block-coordinate passes made (1 for closed forms and single
    /// products; the plan is the best pass's, which after a pass that
    /// raised the objective is an earlier one), or the iterations of OPT_M
    /// or of the max-variance solver.
    pub rounds: usize,
    /// Why the method stopped: closed form; OPT_⊗'s passes (or the first
    /// factor solve that stopped short of its tolerance); OPT_M's SPG run;
    /// the max-variance solver.
    pub termination: Termination,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// The error of one query group in objective units.
#[derive(Debug, Clone, Serialize)]
pub struct GroupError {
    /// The group's label.
    pub label: String,
    /// Number of queries.
    pub queries: f64,
    /// `Δ² tr(W_gᵀW_g (AᵀA)⁺)`.
    pub objective: f64,
}

/// The loss a plan minimizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanObjective {
    /// The sum of the queries' variances, `l2_obj` / `l1_obj` (the
    /// objective everywhere else).
    #[default]
    TotalVariance,
    /// The largest per-query variance (ResidualPlanner's max-variance
    /// loss): (ε,δ) marginal workloads only ([`max_variance`]).
    MaxVariance,
}

impl PlanObjective {
    /// `"total_variance"` or `"max_variance"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::TotalVariance => "total_variance",
            Self::MaxVariance => "max_variance",
        }
    }
}

/// `total` / `total_variance` or `max` / `max_variance` (the command
/// lines' `--objective`).
impl std::str::FromStr for PlanObjective {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "total" | "total_variance" => Ok(Self::TotalVariance),
            "max" | "max_variance" => Ok(Self::MaxVariance),
            _ => Err(format!("unknown objective '{s}': use total or max")),
        }
    }
}

/// Options of [`plan_strategy`].
#[derive(Debug, Clone, Copy)]
pub struct PlanOptions {
    /// The loss to minimize.
    pub objective: PlanObjective,
    /// Most block-coordinate passes for unions of Kronecker products.
    pub max_rounds: usize,
    /// Stop when a pass improves the objective by less than this
    /// (relative).
    pub round_tolerance: f64,
    /// The max-variance solver stops at this relative duality gap (10⁻⁷ by
    /// default: a few more multiplicative steps, and an objective within
    /// 10⁻⁷ of the optimum, so that it agrees with other optimal planners'
    /// to 10⁻⁶ whatever their own solver tolerance).
    pub gap_tolerance: f64,
    /// Most iterations of the max-variance solver.
    pub max_iterations: usize,
    /// Wall-clock seconds each iterative planner may run (OPT_⊗'s passes,
    /// the max-variance solver), checked before each pass or iteration; a
    /// time cut ends it as [`Termination::Timeout`] with its best plan so
    /// far (OPT_⊗ before its first pass: the identity factors it starts
    /// from). `None` for no limit.
    pub max_seconds: Option<f64>,
    /// The memory planning may hold, in bytes: sized before it runs
    /// ([`resources::planning_need`]) and refused past it; `None` is
    /// [`resources::default_memory_limit`] (half the physical memory).
    pub max_memory: Option<u64>,
    /// The registered optimizer ([`dp_opt::registry`]) that solves each
    /// attribute's factor in OPT_⊗; `None` is COA under (ε,δ) and
    /// p-Identity under ε. It must optimize for the plan's privacy model.
    pub factor_optimizer: Option<&'static dp_opt::registry::Descriptor>,
}

impl PlanOptions {
    /// Refuses `max_rounds = 0`, a negative or NaN `round_tolerance` and a
    /// negative or NaN `max_seconds`.
    pub fn check(&self) -> Result<()> {
        if self.max_rounds == 0 || self.round_tolerance.is_nan() || self.round_tolerance < 0.0 {
            return Err(DpError::InvalidParameter {
                name: "plan options",
                reason: "max_rounds must be >= 1 and round_tolerance >= 0".into(),
            });
        }
        Budget::iterations(self.max_rounds)
            .with_seconds(self.max_seconds)
            .validate()
    }

    /// `max_memory`, or the default share of the machine's memory.
    pub fn memory_limit(&self) -> u64 {
        self.max_memory
            .unwrap_or_else(resources::default_memory_limit)
    }
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            objective: PlanObjective::TotalVariance,
            max_rounds: 20,
            round_tolerance: 1e-6,
            gap_tolerance: 1e-7,
            max_iterations: 10_000,
            max_seconds: None,
            max_memory: None,
            factor_optimizer: None,
        }
    }
}

/// The best structured strategy this module finds for `workload` under
/// `privacy`: the residual closed form for (ε,δ) marginal workloads (the
/// optimum); for ε-DP marginal workloads the better of OPT_M and OPT_⊗ by
/// objective (OPT_⊗ makes no further pass once it is more than twice
/// OPT_M's, and is not computed when its Kronecker strategy could not be
/// measured within the memory limit, [`resources::kron_rival_fits`]),
/// certified by the singular value bound (`l1_obj ≥ l2_obj`
/// since `Δ₁ ≥ Δ₂`); OPT_⊗ otherwise. With [`PlanObjective::MaxVariance`]
/// the max-variance plan of [`max_variance`], refused (typed error) under
/// ε-DP and for workloads that are not marginals. What planning will hold
/// is sized first ([`resources::planning_need`]) and refused past
/// [`PlanOptions::memory_limit`] ([`DpError::MemoryLimit`]). When the
/// calling thread's [`dp_core::interrupt`] token is triggered, the
/// iterative searches stop and this returns [`DpError::Interrupted`].
pub fn plan_strategy(
    workload: &StructuredWorkload,
    privacy: PrivacyModel,
    options: &PlanOptions,
) -> Result<StructuredPlan> {
    options.check()?;
    // A factor optimizer the model cannot use is refused here, not only
    // where OPT_⊗ runs (as a rival, its failure would go unseen).
    kron::factor_optimizer(options, privacy)?;
    let limit = options.memory_limit();
    resources::planning_need(workload, privacy, options).check(limit)?;
    let start = Instant::now();
    if options.objective == PlanObjective::MaxVariance {
        if privacy == PrivacyModel::Pure {
            return Err(DpError::InvalidParameter {
                name: "objective",
                reason: "max_variance is supported under (ε,δ)-DP only (--privacy approx)".into(),
            });
        }
        let mut plan = max_variance::max_variance_marginal_plan(workload, options)?;
        dp_core::interrupt::check()?;
        plan.seconds = start.elapsed().as_secs_f64();
        return Ok(plan);
    }
    let mut plan = match (privacy, workload.marginal_weights()) {
        (PrivacyModel::Approx, Some(weights)) => {
            marginal::optimal_marginal_plan(workload, &weights)?
        }
        (PrivacyModel::Pure, Some(weights)) => {
            let m = opt_m::opt_marginals(workload, &weights, &opt_m::OptMOptions::default());
            let rival = m.as_ref().map_or(f64::INFINITY, |m| m.objective);
            let k = if resources::kron_rival_fits(workload, &weights, limit) {
                kron::opt_kron_against(workload, privacy, options, rival)
            } else {
                Err(resources::kron_rival_skipped())
            };
            let mut best = match (m, k) {
                (Ok(m), Ok(k)) => {
                    if m.objective <= k.objective {
                        m
                    } else {
                        k
                    }
                }
                (Ok(p), Err(_)) | (Err(_), Ok(p)) => p,
                (Err(e), Err(_)) => return Err(e),
            };
            let bound = residual_spectrum(workload.domain(), &weights)
                .and_then(|spectrum| svd_bound(workload.domain(), &spectrum));
            if let Ok(b) = bound {
                best.certificate = certificate(best.objective, b);
            }
            best
        }
        _ => kron::opt_kron(workload, privacy, options)?,
    };
    // An interrupted search returns its best plan so far (a rival may
    // have been cut short unseen): the caller asked to stop.
    dp_core::interrupt::check()?;
    plan.seconds = start.elapsed().as_secs_f64();
    Ok(plan)
}

/// A certificate from a lower bound (the gap is reported as computed: a
/// closed form that attains its bound shows a gap at rounding level, of
/// either sign).
pub(crate) fn certificate(objective: f64, lower_bound: f64) -> Option<Certificate> {
    (lower_bound.is_finite() && lower_bound > 0.0).then(|| Certificate {
        lower_bound,
        relative_gap: (objective - lower_bound) / objective,
    })
}

pub(crate) fn overflow(what: &str) -> DpError {
    DpError::InvalidParameter {
        name: "structured workload",
        reason: format!("{what} overflows f64"),
    }
}
