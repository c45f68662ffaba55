//! OPT_⊗ (HDMM, McKenna et al. VLDB 2018, §6.1 and the weighted variant
//! for unions): a Kronecker strategy `A = ⊗ᵢ Aᵢ`.
//!
//! With `Xᵢ = AᵢᵀAᵢ`, `(⊗Xᵢ)⁺ = ⊗Xᵢ⁺` and the sensitivity of a Kronecker
//! product is the product of the factors' (column norms multiply, L1 and
//! L2 alike), so on `WᵀW = Σ_p c_p² ⊗ᵢ G_{p,i}`
//!
//! `obj(A) = Πᵢ Δ(Aᵢ)² · Σ_p c_p² Πᵢ tr(G_{p,i} Xᵢ⁺)`.
//!
//! Fixing every factor but i leaves the 1-D problem
//! `Δ(Aᵢ)² tr(Ĝᵢ Xᵢ⁺)` with `Ĝᵢ = Σ_p c_p² Π_{j≠i} tr(G_{p,j}Xⱼ⁺) G_{p,i}`,
//! solved by COA ((ε,δ)) or p-Identity (ε-DP) through
//! [`dp_opt::StrategyOptimizer`]. With exact factor solves (COA, to its
//! certified gap) a pass never increases the objective beyond those gaps;
//! p-Identity's are local, so one can, and the best pass is kept. For a
//! single product `Ĝᵢ ∝ Gᵢ`, one pass is optimal, and
//! (COA's dual factorizes with `D = ⊗Dᵢ`) the product of the factors'
//! certified lower bounds bounds the optimum over all strategies. Factors
//! whose weighted Grams are identical are solved once.

use std::collections::HashMap;
use std::sync::Arc;

use dp_core::{DpError, Result, sensitivity_l1, sensitivity_l2};
use dp_linalg::Mat;
use dp_workloads::structured::{Factor, Queries, StructuredWorkload};

use super::{
    GroupError, KronTerm, PlanObjective, PlanOptions, StructuredPlan, StructuredStrategy,
    certificate, overflow,
};
use dp_opt::registry::{self, Descriptor, Param, Params};
use dp_opt::{Budget, Certificate, Executor, PrivacyModel, Problem, Solver, Termination};

/// The distinct factor Grams per attribute and, per product, which one it
/// uses.
struct Table {
    d: usize,
    grams: Vec<Vec<Mat<f64>>>,
    names: Vec<Vec<Option<String>>>,
    /// `idx[p·d + i]`: product p's factor on attribute i.
    idx: Vec<u32>,
    log_c2: Vec<f64>,
    group: Vec<usize>,
}

impl Table {
    fn intern(&mut self, i: usize, f: &Factor) -> Result<u32> {
        let implicit = !matches!(f, Factor::Ranges { .. } | Factor::Matrix(_));
        let name = implicit.then(|| f.name());
        if let Some(n) = &name
            && let Some(k) = self.names[i].iter().position(|m| m.as_ref() == Some(n))
        {
            return Ok(k as u32);
        }
        let g = f.gram().map_err(DpError::from)?;
        if name.is_none()
            && let Some(k) = (0..self.grams[i].len())
                .find(|&k| self.names[i][k].is_none() && self.grams[i][k] == g)
        {
            return Ok(k as u32);
        }
        self.grams[i].push(g);
        self.names[i].push(name);
        Ok((self.grams[i].len() - 1) as u32)
    }

    fn build(w: &StructuredWorkload) -> Result<Self> {
        let d = w.domain().len();
        let mut t = Table {
            d,
            grams: vec![Vec::new(); d],
            names: vec![Vec::new(); d],
            idx: Vec::new(),
            log_c2: Vec::new(),
            group: Vec::new(),
        };
        let shape = w.domain().shape();
        let ident: Vec<u32> = (0..d)
            .map(|i| t.intern(i, &Factor::Identity(shape[i])))
            .collect::<Result<_>>()?;
        let total: Vec<u32> = (0..d)
            .map(|i| t.intern(i, &Factor::Total(shape[i])))
            .collect::<Result<_>>()?;
        for (gi, g) in w.groups().iter().enumerate() {
            let lc2 = 2.0 * g.weight.ln();
            match &g.queries {
                Queries::Kron(fs) => {
                    for (i, f) in fs.iter().enumerate() {
                        let k = t.intern(i, f)?;
                        t.idx.push(k);
                    }
                    t.log_c2.push(lc2);
                    t.group.push(gi);
                }
                Queries::Marginals(sets) => {
                    for s in sets {
                        t.idx.extend((0..d).map(
                            |i| {
                                if s.contains(i) { ident[i] } else { total[i] }
                            },
                        ));
                        t.log_c2.push(lc2);
                        t.group.push(gi);
                    }
                }
            }
        }
        Ok(t)
    }

    fn products(&self) -> usize {
        self.log_c2.len()
    }
}

/// One attribute's solved factor.
#[derive(Clone)]
struct FactorSolution {
    strategy: Arc<Mat<f64>>,
    x_pinv: Mat<f64>,
    sensitivity: f64,
    /// A lower bound on `min Δ² tr(Ĝ X⁺)` for the Gram it was solved on.
    lower: Option<f64>,
    /// How its solve ended (closed form, or the optimizer's own report).
    termination: Termination,
    /// How far above its subproblem's optimum the solve is certified to
    /// be at most, relative ([`certified_slack`]; 0 for the closed forms,
    /// which attain their bound).
    slack: f64,
}

/// Whether `m` is exactly the 1×n row of ones (the total query).
fn is_total_row(m: &Mat<f64>) -> bool {
    m.nrows() == 1 && (0..m.ncols()).all(|j| m[(0, j)] == 1.0)
}

fn proportional_to(g: &Mat<f64>, pattern: impl Fn(usize, usize) -> f64) -> bool {
    let c = g[(0, 0)];
    (0..g.ncols()).all(|j| (0..g.nrows()).all(|i| g[(i, j)] == c * pattern(i, j)))
}

/// The registered optimizer ([`dp_opt::registry`]) that solves each
/// factor: [`PlanOptions::factor_optimizer`], or by default COA under
/// (ε,δ) (certified: its gap bounds each pass's rise) and p-Identity under
/// ε (HDMM's choice). One that does not optimize for `privacy` is refused.
pub(crate) fn factor_optimizer(
    options: &PlanOptions,
    privacy: PrivacyModel,
) -> Result<&'static Descriptor> {
    let optimizer = match options.factor_optimizer {
        Some(d) => d,
        None => registry::descriptor(match privacy {
            PrivacyModel::Approx => "coa",
            PrivacyModel::Pure => "pidentity",
        })?,
    };
    if !optimizer.supports(privacy) {
        return Err(DpError::InvalidParameter {
            name: "factor_optimizer",
            reason: format!(
                "'{}' does not optimize for {} privacy",
                optimizer.name,
                privacy.name()
            ),
        });
    }
    Ok(optimizer)
}

/// Solves `min Δ(A)² tr(g (AᵀA)⁺)` for one factor: closed forms for `cI`
/// and `c11ᵀ` (both attain the SVD bound, which is a lower bound for
/// `l1_obj` ≥ `l2_obj` too), `optimizer` otherwise. The factor's lower
/// bound is the optimizer's certificate under (ε,δ) and the SVD bound
/// otherwise (an `l2` bound, so a valid but loose `l1` one).
fn solve_factor(
    g: &Mat<f64>,
    privacy: PrivacyModel,
    optimizer: &Descriptor,
) -> Result<FactorSolution> {
    let n = g.nrows();
    let (a, lower, termination, slack) = if proportional_to(g, |i, j| f64::from(u8::from(i == j))) {
        let lower = Some(g[(0, 0)] * n as f64);
        (Mat::identity(n, n), lower, Termination::ClosedForm, 0.0)
    } else if proportional_to(g, |_, _| 1.0) {
        let lower = Some(g[(0, 0)]);
        (
            Mat::from_fn(1, n, |_, _| 1.0),
            lower,
            Termination::ClosedForm,
            0.0,
        )
    } else {
        let problem = Problem::from_gram(g.clone(), privacy)?;
        // The factor Grams are exact (built from the structured factors),
        // so no support repair: it would only add directions W lacks.
        let params = Params {
            support_repair: optimizer
                .params
                .contains(&Param::SupportRepair)
                .then_some(false),
            ..Params::default()
        };
        let out = optimizer.build(&params)?.optimize(&problem, &mut ())?;
        dp_core::interrupt::check()?;
        let lower = match (privacy, out.report.certificate) {
            (PrivacyModel::Approx, Some(c)) => Some(c.lower_bound),
            _ => Some(problem.svd_bound()?),
        };
        let slack = certified_slack(&out.report.termination, out.report.certificate);
        (out.strategy, lower, out.report.termination, slack)
    };
    let sensitivity = match privacy {
        PrivacyModel::Approx => sensitivity_l2(a.as_ref())?,
        PrivacyModel::Pure => sensitivity_l1(a.as_ref())?,
    };
    let x = dp_linalg::gram(a.as_ref(), dp_linalg::Par::Seq);
    let x_pinv = dp_linalg::pseudo_inverse_symmetric(x.as_ref(), None)?;
    Ok(FactorSolution {
        strategy: Arc::new(a),
        x_pinv,
        sensitivity,
        lower,
        termination,
        slack,
    })
}

/// The rise a factor solve can explain: its certificate's relative gap
/// when the solve converged to it (COA's); 0 for a solve with no
/// certificate (p-Identity's local solves; under ε-DP the bound kept
/// beside them is the loose SVD bound, not a certificate) and for one
/// that stopped short, whose gap (1 when it found no bound) certifies
/// nothing about a pass.
pub(super) fn certified_slack(termination: &Termination, certificate: Option<Certificate>) -> f64 {
    match certificate {
        Some(c) if termination.converged() && c.relative_gap.is_finite() => c.relative_gap.max(0.0),
        _ => 0.0,
    }
}

fn log_add(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    let m = a.max(b);
    m + ((a - m).exp() + (b - m).exp()).ln()
}

fn trace_ln(g: &Mat<f64>, x_pinv: &Mat<f64>) -> Result<f64> {
    let t = dp_linalg::trace_of_product(g.as_ref(), x_pinv.as_ref())?;
    if t.is_finite() && t > 0.0 {
        Ok(t.ln())
    } else {
        Err(DpError::NotConverged {
            solver: "OPT_⊗",
            reason: format!("a factor strategy gives trace {t} on its workload factor"),
        })
    }
}

/// How the passes of [`opt_kron_against`] ended, given the objectives
/// before and after the last pass and the pass's summed factor gaps
/// `slack` (see [`Passes::pass`]): a single product after its one pass; a
/// pass that raised the objective by more than `round_tolerance` and
/// `slack` (relative: p-Identity's factor solves are local, so passes need
/// not descend); one that improved it by at most `round_tolerance`, or
/// raised it within `slack` (COA's factors are optimal only to their
/// certified gaps); an objective past twice the rival's; `None`: make
/// another pass.
pub(super) fn passes_end(
    products: usize,
    (previous, objective, slack): (f64, f64, f64),
    options: &PlanOptions,
    rival: f64,
) -> Option<Termination> {
    let improvement = (previous - objective) / objective;
    let tolerance = options.round_tolerance;
    if products == 1 {
        Some(Termination::Converged {
            criterion: "a single product: one pass optimizes every factor".into(),
        })
    } else if improvement < 0.0 && -improvement <= slack {
        Some(Termination::Converged {
            criterion: format!(
                "a pass raised the objective by {:.2e} (relative), within its factor \
                 solves' certified gaps ({slack:.2e})",
                -improvement
            ),
        })
    } else if improvement < -tolerance {
        Some(Termination::Stalled {
            reason: format!(
                "a pass raised the objective by {:.2e} (relative); the best pass is kept",
                -improvement
            ),
        })
    } else if improvement <= tolerance {
        Some(Termination::Converged {
            criterion: format!(
                "a pass improved the objective by {improvement:.2e} <= {tolerance:e} (relative)"
            ),
        })
    } else if objective > 2.0 * rival {
        Some(Termination::Stalled {
            reason: format!(
                "objective {objective:.6e} is over twice the rival's {rival:.6e}: no further pass"
            ),
        })
    } else {
        None
    }
}

/// The block-coordinate state of OPT_⊗: per attribute and distinct factor
/// Gram `ln tr(G_{i,k} Xᵢ⁺)`, per product `ln c_p² + Σᵢ ln tr(…)`, and the
/// factors solved so far.
struct Passes<'t> {
    t: &'t Table,
    ln_tr: Vec<Vec<f64>>,
    log_p: Vec<f64>,
    sols: Vec<Option<FactorSolution>>,
}

impl<'t> Passes<'t> {
    /// Every `Xᵢ = I`, nothing solved.
    fn new(t: &'t Table) -> Result<Self> {
        let d = t.d;
        let ln_tr: Vec<Vec<f64>> = t
            .grams
            .iter()
            .map(|gs| {
                gs.iter()
                    .map(|g| trace_ln(g, &Mat::identity(g.nrows(), g.nrows())))
                    .collect()
            })
            .collect::<Result<_>>()?;
        let log_p: Vec<f64> = (0..t.products())
            .map(|p| {
                t.log_c2[p]
                    + (0..d)
                        .map(|i| ln_tr[i][t.idx[p * d + i] as usize])
                        .sum::<f64>()
            })
            .collect();
        Ok(Self {
            t,
            ln_tr,
            log_p,
            sols: vec![None; d],
        })
    }

    /// One pass over the attributes, each factor solved on its weighted
    /// Gram `Ĝᵢ` (identical Grams solved once); returns the log objective
    /// and the sum of its factor solves' [`FactorSolution::slack`] (a
    /// factor solved to relative gap gᵢ can raise the objective by that
    /// much, so the pass by at most `1 − Π(1 − gᵢ) ≤ Σgᵢ`).
    fn pass(&mut self, privacy: PrivacyModel, optimizer: &Descriptor) -> Result<(f64, f64)> {
        let t = self.t;
        let d = t.d;
        let mut cache: HashMap<Vec<u64>, FactorSolution> = HashMap::new();
        let mut slack = 0.0;
        for i in 0..d {
            let mut lw = vec![f64::NEG_INFINITY; t.grams[i].len()];
            for (p, &lp) in self.log_p.iter().enumerate() {
                let k = t.idx[p * d + i] as usize;
                lw[k] = log_add(lw[k], lp - self.ln_tr[i][k]);
            }
            let m = lw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let n = t.grams[i][0].nrows();
            let mut g = Mat::<f64>::zeros(n, n);
            for (k, gk) in t.grams[i].iter().enumerate() {
                if lw[k] > f64::NEG_INFINITY {
                    g += gk * (lw[k] - m).exp();
                }
            }
            let key: Vec<u64> = (0..n)
                .flat_map(|j| (0..n).map(move |r| (r, j)))
                .map(|(r, j)| g[(r, j)].to_bits())
                .collect();
            let sol = match cache.get(&key) {
                Some(s) => s.clone(),
                None => {
                    let s = solve_factor(&g, privacy, optimizer)?;
                    cache.insert(key, s.clone());
                    s
                }
            };
            slack += sol.slack;
            for (k, gk) in t.grams[i].iter().enumerate() {
                let new = trace_ln(gk, &sol.x_pinv)?;
                let old = std::mem::replace(&mut self.ln_tr[i][k], new);
                if new != old {
                    for p in (0..t.products()).filter(|&p| t.idx[p * d + i] as usize == k) {
                        self.log_p[p] += new - old;
                    }
                }
            }
            self.sols[i] = Some(sol);
        }
        let ln_sens2: f64 = self
            .sols
            .iter()
            .flatten()
            .map(|s| 2.0 * s.sensitivity.ln())
            .sum();
        let ln_obj = ln_sens2
            + self
                .log_p
                .iter()
                .fold(f64::NEG_INFINITY, |a, &b| log_add(a, b));
        if ln_obj.is_nan() {
            return Err(overflow("the objective"));
        }
        Ok((ln_obj, slack))
    }
}

/// OPT_⊗ on any structured workload (see the module doc).
pub fn opt_kron(
    w: &StructuredWorkload,
    privacy: PrivacyModel,
    options: &PlanOptions,
) -> Result<StructuredPlan> {
    opt_kron_against(w, privacy, options, f64::INFINITY)
}

/// [`opt_kron`] beside a rival strategy of objective `rival`: after a
/// pass whose objective is more than twice the rival's, no further pass
/// is made (the plan keeps the rival then; a pass rarely halves the
/// objective after the first). The passes run under dp-opt's [`Executor`]
/// (`max_rounds` passes, `max_seconds`). The plan is the best pass's (the
/// identity factors the passes start from when the clock ran out before
/// the first); its termination is [`passes_end`]'s or the budget's,
/// unless a factor solve of that pass stopped short of its own tolerance,
/// which then speaks for the plan.
pub(crate) fn opt_kron_against(
    w: &StructuredWorkload,
    privacy: PrivacyModel,
    options: &PlanOptions,
    rival: f64,
) -> Result<StructuredPlan> {
    options.check()?;
    let optimizer = factor_optimizer(options, privacy)?;
    let t = Table::build(w)?;
    let budget = Budget::iterations(options.max_rounds).with_seconds(options.max_seconds);
    let block = BlockCoordinate {
        passes: Passes::new(&t)?,
        privacy,
        optimizer,
        options: *options,
        rival,
        previous: f64::INFINITY,
        best: None,
        end: None,
        failure: None,
    };
    let run = Executor::new(budget, &mut ()).run(block);
    let ((ln_obj, sols, log_p), failure) = run.output;
    if let Some(e) = failure {
        return Err(e);
    }
    let termination = sols
        .iter()
        .map(|s| &s.termination)
        .find(|t| !t.converged())
        .unwrap_or(&run.termination)
        .clone();
    let method = format!("kron-{}", optimizer.name);
    finish(
        w,
        &t,
        (privacy, method),
        sols,
        &log_p,
        ln_obj,
        (run.iterations, termination),
    )
}

/// A plan's pass: its log objective, factors and per-product logs.
type Pass = (f64, Vec<FactorSolution>, Vec<f64>);

/// OPT_⊗'s passes as a [`Solver`]: one iteration is one
/// [`Passes::pass`]; the best pass is kept and [`passes_end`] is the
/// stopping test. The objective the executor sees is the log objective
/// (the objective itself may overflow where its log does not), kept
/// finite so that only [`passes_end`] judges a pass.
struct BlockCoordinate<'t> {
    passes: Passes<'t>,
    privacy: PrivacyModel,
    optimizer: &'static Descriptor,
    options: PlanOptions,
    rival: f64,
    /// The previous pass's objective (∞ when judging the first).
    previous: f64,
    best: Option<Pass>,
    /// [`passes_end`]'s verdict on the last pass.
    end: Option<Termination>,
    /// The error of a pass, which ends the run.
    failure: Option<DpError>,
}

impl BlockCoordinate<'_> {
    /// The log objective of the current factors (Δ = 1 before any pass).
    fn start_ln_obj(&self) -> f64 {
        self.passes
            .log_p
            .iter()
            .fold(f64::NEG_INFINITY, |a, &b| log_add(a, b))
    }

    /// The start, `Xᵢ = I` on every attribute (Δ = 1), as a pass: its log
    /// objective, identity factors and per-product logs (read before any
    /// pass has changed them).
    fn start(&self) -> Pass {
        let t = self.passes.t;
        let sols = t
            .grams
            .iter()
            .map(|gs| {
                let n = gs[0].nrows();
                FactorSolution {
                    strategy: Arc::new(Mat::identity(n, n)),
                    x_pinv: Mat::identity(n, n),
                    sensitivity: 1.0,
                    lower: None,
                    termination: Termination::ClosedForm,
                    slack: 0.0,
                }
            })
            .collect();
        (self.start_ln_obj(), sols, self.passes.log_p.clone())
    }
}

/// `ln_obj` as the executor sees it: never NaN here ([`Passes::pass`]
/// refuses one), and −∞ (a zero objective) mapped to `f64::MIN`.
fn reported(ln_obj: f64) -> f64 {
    ln_obj.clamp(f64::MIN, f64::MAX)
}

impl Solver for BlockCoordinate<'_> {
    /// The best pass (the start when no pass was made) and a pass's error.
    type Output = (Pass, Option<DpError>);

    fn counts(&self) -> &'static str {
        "passes"
    }

    fn init(&mut self) -> f64 {
        reported(self.start_ln_obj())
    }

    fn terminate(&self) -> Option<Termination> {
        self.end.clone()
    }

    fn next_iter(&mut self) -> std::result::Result<f64, Termination> {
        let (ln_obj, slack) = match self.passes.pass(self.privacy, self.optimizer) {
            Ok(pass) => pass,
            Err(e) => {
                let reason = e.to_string();
                self.failure = Some(e);
                return Err(Termination::Stalled { reason });
            }
        };
        if self.best.as_ref().is_none_or(|b| ln_obj < b.0) {
            let sols = self.passes.sols.iter().flatten().cloned().collect();
            self.best = Some((ln_obj, sols, self.passes.log_p.clone()));
        }
        let obj = ln_obj.exp();
        let products = self.passes.t.products();
        let sample = (self.previous, obj, slack);
        self.end = passes_end(products, sample, &self.options, self.rival);
        self.previous = obj;
        Ok(reported(ln_obj))
    }

    fn finish(mut self, _termination: &Termination) -> Self::Output {
        let best = self.best.take().unwrap_or_else(|| self.start());
        (best, self.failure)
    }
}

fn finish(
    w: &StructuredWorkload,
    t: &Table,
    (privacy, method): (PrivacyModel, String),
    sols: Vec<FactorSolution>,
    log_p: &[f64],
    ln_obj: f64,
    (rounds, termination): (usize, Termination),
) -> Result<StructuredPlan> {
    let objective = ln_obj.exp();
    if !objective.is_finite() {
        return Err(overflow("the objective"));
    }
    let ln_sens2: f64 = sols.iter().map(|s| 2.0 * s.sensitivity.ln()).sum();
    let mut groups: Vec<GroupError> = w
        .groups()
        .iter()
        .map(|g| GroupError {
            label: g.label.clone(),
            queries: w.group_queries(g),
            objective: 0.0,
        })
        .collect();
    for (p, &lp) in log_p.iter().enumerate() {
        groups[t.group[p]].objective += (lp + ln_sens2).exp();
    }
    // Single product: the product of the factor bounds (times c²) bounds
    // the optimum over every strategy; a union, the SVD bound when its
    // spectrum is structured.
    let lower = if t.products() == 1 {
        sols.iter()
            .map(|s| s.lower)
            .try_fold(t.log_c2[0].exp(), |acc, l| l.map(|l| acc * l))
    } else {
        commuting_union_bound(t, &w.domain().shape())
    };
    let sensitivity = sols.iter().map(|s| s.sensitivity).product();
    let strategy = StructuredStrategy {
        shape: w.domain().shape(),
        terms: vec![KronTerm {
            weight: 1.0,
            // A factor that is the total row (an attribute the workload
            // sums out) is left out of the support: a term's absent
            // attribute is summed, the same matrix with sensitivity 1, so
            // measuring needs no table over it.
            factors: sols
                .into_iter()
                .enumerate()
                .filter(|(_, s)| !is_total_row(&s.strategy))
                .map(|(i, s)| (i, s.strategy))
                .collect(),
        }],
    };
    Ok(StructuredPlan {
        privacy,
        method,
        objective_kind: PlanObjective::TotalVariance,
        strategy,
        sensitivity,
        objective,
        groups,
        certificate: lower.and_then(|l| certificate(objective, l)),
        rounds,
        termination,
        seconds: 0.0,
    })
}

/// Most eigenvalue classes [`commuting_union_bound`] enumerates.
const UNION_BOUND_MAX_CLASSES: f64 = 1e7;

/// Most multiply-adds [`commuting_union_bound`] spends (classes × products
/// × attributes): the bound is a certificate, not worth more than about a
/// second.
const UNION_BOUND_MAX_WORK: f64 = 1e9;

/// Per attribute, the joint eigenvalues of its distinct factor Grams when
/// they commute: `(λ_k for each Gram k, multiplicity)` per class of equal
/// profiles; `None` when two of them do not commute.
pub(super) fn joint_spectrum(grams: &[Mat<f64>]) -> Option<Vec<(Vec<f64>, f64)>> {
    let n = grams[0].nrows();
    for (a, ga) in grams.iter().enumerate() {
        for gb in &grams[a + 1..] {
            let comm = ga * gb - gb * ga;
            if comm.norm_l2() > 1e-10 * ga.norm_l2() * gb.norm_l2() {
                return None;
            }
        }
    }
    // Commuting symmetric matrices share an eigenbasis: that of a generic
    // combination of them.
    let mut combo = Mat::<f64>::zeros(n, n);
    for (k, g) in grams.iter().enumerate() {
        combo += g * (1.0 / ((k as f64 + 1.37) * g.norm_l2().max(f64::MIN_POSITIVE)));
    }
    let eig = dp_linalg::SymmetricEigen::new(combo.as_ref()).ok()?;
    let scale: Vec<f64> = grams.iter().map(|g| g.norm_l2()).collect();
    // Per Gram, its eigenvalue on each basis vector (`vⱼᵀ G vⱼ`) and
    // whether `vⱼ` is an eigenvector of it: one product `G V` each, not a
    // matrix-vector product per vector.
    let mut profiles = vec![Vec::with_capacity(grams.len()); n];
    for (g, &s) in grams.iter().zip(&scale) {
        let gv = g * &eig.vectors;
        for (j, profile) in profiles.iter_mut().enumerate() {
            let v = eig.vectors.col(j);
            let lambda = (0..n).map(|r| v[r] * gv[(r, j)]).sum::<f64>().max(0.0);
            // A generic combination can still repeat an eigenvalue across
            // two joint classes, and then its eigenvectors mix them: keep
            // only a basis whose every vector is an eigenvector of every
            // Gram.
            let residual = (0..n)
                .map(|r| (gv[(r, j)] - lambda * v[r]).powi(2))
                .sum::<f64>()
                .sqrt();
            if residual > 1e-8 * s {
                return None;
            }
            profile.push(lambda);
        }
    }
    let mut classes: Vec<(Vec<f64>, f64)> = Vec::new();
    for profile in profiles {
        let same = |c: &(Vec<f64>, f64)| {
            c.0.iter()
                .zip(&profile)
                .zip(&scale)
                .all(|((a, b), s)| (a - b).abs() <= 1e-9 * s)
        };
        match classes.iter_mut().find(|c| same(c)) {
            Some(c) => c.1 += 1.0,
            None => classes.push((profile, 1.0)),
        }
    }
    Some(classes)
}

/// The singular value bound `(Σ √λ(WᵀW))²/N` (Li & Miklau; a lower bound on
/// `l2_obj`, hence on `l1_obj ≥ l2_obj`) of a union whose factor Grams
/// commute on every attribute: with a joint eigenbasis `Vᵢ` per attribute,
/// `WᵀW = Σ_p c_p² ⊗ᵢ G_{p,i}` is diagonal in `⊗Vᵢ` with eigenvalues
/// `Σ_p c_p² Πᵢ λ_{p,i,jᵢ}`, enumerated over classes of equal per-attribute
/// profiles (the residual spectrum of a marginal workload is the case of
/// `I` and `11ᵀ`). Eigenvalues below `1e-12·λ_max` are dropped, which only
/// lowers the bound. `None` when some attribute's Grams do not commute or
/// the classes exceed [`UNION_BOUND_MAX_CLASSES`] (or the work
/// [`UNION_BOUND_MAX_WORK`]).
fn commuting_union_bound(t: &Table, shape: &[usize]) -> Option<f64> {
    // Only the Grams some product uses (the table also holds every
    // attribute's identity and total); `pos[i][k]`: Gram k's place among
    // them.
    let mut pos: Vec<Vec<usize>> = t.grams.iter().map(|g| vec![usize::MAX; g.len()]).collect();
    let mut spectra = Vec::with_capacity(t.d);
    for (i, grams) in t.grams.iter().enumerate() {
        let mut used = Vec::new();
        for k in 0..grams.len() {
            if (0..t.products()).any(|p| t.idx[p * t.d + i] as usize == k) {
                pos[i][k] = used.len();
                used.push(grams[k].clone());
            }
        }
        spectra.push(joint_spectrum(&used)?);
    }
    let classes: f64 = spectra.iter().map(|s| s.len() as f64).product();
    if classes > UNION_BOUND_MAX_CLASSES
        || classes * t.products() as f64 * t.d as f64 > UNION_BOUND_MAX_WORK
    {
        return None;
    }
    let c2: Vec<f64> = t.log_c2.iter().map(|l| l.exp()).collect();
    let mut digits = vec![0usize; t.d];
    let mut values = Vec::with_capacity(classes as usize);
    loop {
        let mut lambda = 0.0;
        for (p, &c) in c2.iter().enumerate() {
            let mut term = c;
            for (i, &j) in digits.iter().enumerate() {
                term *= spectra[i][j].0[pos[i][t.idx[p * t.d + i] as usize]];
            }
            lambda += term;
        }
        let mult: f64 = digits
            .iter()
            .enumerate()
            .map(|(i, &j)| spectra[i][j].1)
            .product();
        values.push((lambda, mult));
        // Next mixed-radix index.
        let mut i = t.d;
        loop {
            if i == 0 {
                let top = values.iter().map(|v| v.0).fold(0.0, f64::max);
                let s: f64 = values
                    .iter()
                    .filter(|v| v.0 > 1e-12 * top)
                    .map(|(l, m)| m * l.sqrt())
                    .sum();
                let cells: f64 = shape.iter().map(|&n| n as f64).product();
                return Some(s * s / cells);
            }
            i -= 1;
            digits[i] += 1;
            if digits[i] < spectra[i].len() {
                break;
            }
            digits[i] = 0;
        }
    }
}
