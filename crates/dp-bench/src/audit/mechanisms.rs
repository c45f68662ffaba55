//! The mechanisms the audit draws from, each through the kernel path of a
//! release, and their deliberately broken variants: the same kernel run
//! with mis-stated parameters, audited against the claim.

use dp_core::calibration::GaussianCalibration;
use dp_core::experiments::SeededSession;
use dp_core::kernel::zcdp_rho_for;
use dp_core::mechanism::cost_for;
use dp_core::{
    Cost, DpError, LinearStrategy, Measurement, PrivacyBudget, PrivateHistogram, Result, Session,
};
use dp_linalg::{Mat, MatRef};
use dp_opt::mechanisms::projection::{GeneralizedGaussian, KyFanOptions, optimal_covariance};
use dp_opt::{PrivacyModel, Problem, StrategyOptimizer, optimizers::coa::Coa};
use dp_workloads::Workload;
use dp_workloads::strategies::{hierarchical, identity};
use dp_workloads::workload::{AllRange, Prefix};

use super::events::Event;
use super::kernel_path::KernelPath;
use super::likelihood::{Likelihood, dense_measured};
use super::release_path::MarginalPath;
use super::{AuditConfig, Side, mix};

/// A deliberately broken variant: the real kernel with a mis-stated
/// parameter, audited against the real claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Broken {
    /// Noise calibrated to half the sensitivity: the kernel runs at 2ε
    /// (Laplace) or 4ρ (Gaussian).
    HalvedSensitivity,
    /// Noise scale × 0.7: the kernel runs at ε/0.7 or ρ/0.49.
    UnderScaled,
    /// Two releases on disjoint parts of the data from two sessions with
    /// the same seed, so they draw the same noise.
    ReusedSeed,
}

impl Broken {
    /// The cost the kernel is run at for the claimed cost.
    pub fn misstate(self, claimed: Cost) -> Cost {
        match (self, claimed) {
            (Self::HalvedSensitivity, Cost::Epsilon(e)) => Cost::Epsilon(2.0 * e),
            (Self::HalvedSensitivity, Cost::Rho(r)) => Cost::Rho(4.0 * r),
            (Self::UnderScaled, Cost::Epsilon(e)) => Cost::Epsilon(e / 0.7),
            (Self::UnderScaled, Cost::Rho(r)) => Cost::Rho(r / 0.49),
            (Self::ReusedSeed, c) => c,
        }
    }

    fn suffix(broken: Option<Self>) -> &'static str {
        match broken {
            None => "",
            Some(Self::HalvedSensitivity) => ", halved sensitivity",
            Some(Self::UnderScaled) => ", noise scale x 0.7",
            Some(Self::ReusedSeed) => ", reused seed",
        }
    }
}

/// Where a mechanism hands each draw's statistics.
pub type Sink<'a> = &'a mut dyn FnMut(&[f64]);

/// A mechanism under audit.
pub trait Audited: Sync {
    /// What it is, e.g. `Laplace MM, identity (n = 4)`.
    fn name(&self) -> String;
    /// The (ε, δ) it claims.
    fn claim(&self) -> (f64, f64);
    /// The names of the statistics each output is reduced to.
    fn statistics(&self) -> Vec<&'static str>;
    /// Events fixed in advance, beside the pilot's thresholds.
    fn fixed_events(&self) -> Vec<Event> {
        Vec::new()
    }
    /// Draws `count` outputs on `side` from sessions seeded from `seed`
    /// and hands each one's statistics to `sink`.
    fn project(&self, side: Side, seed: u64, count: u64, sink: Sink<'_>) -> Result<()>;
}

/// Domain size of the audited 1-D strategies: small, so that each output
/// costs few exact draws.
const N: usize = 4;
/// The dataset without the record (the record's cell is chosen per
/// mechanism).
const BASE: [u64; N] = [3, 1, 4, 1];

/// The mechanisms of an audit: the Laplace and Gaussian matrix mechanisms
/// on identity, hierarchical and COA-optimized (all ranges) strategies
/// (`measure_linear`), the marginal measurement of `dpmm release` under
/// both noise models (`measure_marginals`), the generalized Gaussian
/// release of the projection mechanism with its Ky Fan-optimal covariance
/// (prefix sums), and two releases on disjoint parts of the data
/// (parallel composition). `--broken halved-sensitivity` and
/// `under-scaled` mis-state the cost of all but the last; `reused-seed`
/// audits only the two-release mechanisms. `reduced` keeps the first of
/// each kind.
pub fn mechanisms(cfg: &AuditConfig) -> Result<Vec<Box<dyn Audited>>> {
    let eps = 1.0;
    let budgets = [
        PrivacyBudget::pure(eps)?,
        PrivacyBudget::approx(eps, cfg.delta)?,
    ];
    let mut out: Vec<Box<dyn Audited>> = Vec::new();
    if cfg.broken != Some(Broken::ReusedSeed) {
        let strategies = [
            ("identity", identity(N)?),
            ("hierarchical", hierarchical(N, 2)?),
            ("COA on all ranges", coa_strategy()?),
        ];
        let keep = if cfg.reduced { 1 } else { strategies.len() };
        for budget in budgets {
            for (label, a) in strategies.iter().take(keep) {
                out.push(Box::new(KernelAudit::matrix(
                    label,
                    a.as_ref(),
                    budget,
                    cfg.broken,
                )?));
            }
        }
        for budget in budgets {
            out.push(Box::new(KernelAudit::release_path(budget, cfg.broken)?));
        }
        out.push(Box::new(projection_audit(eps, cfg.delta, cfg.broken)?));
    }
    if matches!(cfg.broken, None | Some(Broken::ReusedSeed)) {
        let keep = if cfg.reduced { 1 } else { 2 };
        for budget in budgets.into_iter().take(keep) {
            out.push(Box::new(KernelAudit::two_releases(budget, cfg.broken)?));
        }
    }
    Ok(out)
}

/// A COA strategy for all ranges on [`N`] cells.
fn coa_strategy() -> Result<Mat<f64>> {
    let w = AllRange::new(N)?;
    let problem = Problem::from_gram(w.gram(), PrivacyModel::Approx)?;
    Ok(Coa::default().optimize(&problem, &mut ())?.strategy)
}

fn claim_of(budget: PrivacyBudget) -> (f64, f64) {
    (
        budget.epsilon().get(),
        budget.delta().map_or(0.0, |d| d.get()),
    )
}

/// The noise model's name.
fn noise_name(budget: PrivacyBudget) -> &'static str {
    if budget.delta().is_none() {
        "Laplace"
    } else {
        "Gaussian"
    }
}

/// The kernel cost of a claim: what `MatrixMechanism::new` and `dpmm
/// release` charge (the zCDP ρ of an (ε,δ) session, or ε).
fn claimed_cost(budget: PrivacyBudget) -> Result<Cost> {
    cost_for(budget, GaussianCalibration::Zcdp)
}

/// `Session::measure_linear` on a dense strategy: the matrix mechanism's
/// measurement (`MatrixMechanism::measure`).
struct LinearPath(LinearStrategy);

impl KernelPath for LinearPath {
    type Data = PrivateHistogram;
    fn measure(&self, data: &PrivateHistogram, s: &mut Session, cost: Cost) -> Result<Measurement> {
        s.measure_linear(&self.0, data, cost)
    }
}

/// One kernel measurement, or two on disjoint parts of the data, audited
/// by its exact privacy loss.
pub(super) struct KernelAudit<P: KernelPath> {
    pub(super) name: String,
    pub(super) path: P,
    /// With and without the record.
    pub(super) data: [P::Data; 2],
    /// The other part of the data, for two releases.
    pub(super) second: Option<P::Data>,
    /// Whether the two releases draw the same noise.
    pub(super) reused: bool,
    /// The cost the kernel runs at (mis-stated for a broken variant).
    pub(super) cost: Cost,
    pub(super) claim: (f64, f64),
    pub(super) loss: Likelihood,
}

impl KernelAudit<LinearPath> {
    /// The matrix mechanism's measurement `y = Ã x + z` (its release
    /// `W A⁺ y` is post-processing of it).
    fn matrix(
        label: &str,
        a: MatRef<'_, f64>,
        budget: PrivacyBudget,
        broken: Option<Broken>,
    ) -> Result<Self> {
        let strategy = LinearStrategy::dense(a)?;
        let claimed = claimed_cost(budget)?;
        let dense = dense_measured(&strategy.measured_strategy()?, &[a.ncols()])?;
        let loss = Likelihood::new(dense.as_ref(), &BASE, claimed)?;
        Ok(Self {
            name: format!(
                "{} MM, {label} (n = {N}){}",
                noise_name(budget),
                Broken::suffix(broken)
            ),
            path: LinearPath(strategy),
            data: neighbours(loss.cell())?,
            second: None,
            reused: false,
            cost: broken.map_or(claimed, |b| b.misstate(claimed)),
            claim: claim_of(budget),
            loss,
        })
    }

    /// Two releases of the identity strategy on the two disjoint parts of
    /// the data (`BASE` and its reverse), ε-DP together by parallel
    /// composition when their noise is independent. The neighbour adds a
    /// record to the first part.
    fn two_releases(budget: PrivacyBudget, broken: Option<Broken>) -> Result<Self> {
        let mut audit = Self::matrix("identity", identity(N)?.as_ref(), budget, None)?;
        let mut second = BASE.to_vec();
        second.reverse();
        audit.second = Some(PrivateHistogram::from_counts(second)?);
        audit.reused = broken == Some(Broken::ReusedSeed);
        audit.name = format!(
            "two {} releases on disjoint parts (identity, n = {N}){}",
            noise_name(budget),
            Broken::suffix(broken)
        );
        Ok(audit)
    }
}

/// The neighbouring histograms `BASE + e_j` and `BASE`.
fn neighbours(j: usize) -> Result<[PrivateHistogram; 2]> {
    let mut with = BASE.to_vec();
    with[j] += 1;
    Ok([
        PrivateHistogram::from_counts(with)?,
        PrivateHistogram::from_counts(BASE.to_vec())?,
    ])
}

fn side_index(side: Side) -> usize {
    match side {
        Side::With => 0,
        Side::Without => 1,
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl<P: KernelPath> Audited for KernelAudit<P> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn claim(&self) -> (f64, f64) {
        self.claim
    }

    /// The privacy loss of the (first) release; for two releases also the
    /// projection of their difference on the record's shift, which reused
    /// noise makes exact.
    fn statistics(&self) -> Vec<&'static str> {
        if self.second.is_some() {
            vec!["privacy loss", "difference"]
        } else {
            vec!["privacy loss"]
        }
    }

    /// The largest Laplace loss and its opposite, `{all noise beyond the
    /// shift}`, which attain the ratio e^ε.
    fn fixed_events(&self) -> Vec<Event> {
        self.loss.largest_loss().map_or_else(Vec::new, |l| {
            let t = l * (1.0 - 1e-9);
            vec![Event::at_least(0, t), Event::at_most(0, -t)]
        })
    }

    fn project(&self, side: Side, seed: u64, count: u64, sink: Sink<'_>) -> Result<()> {
        let data = &self.data[side_index(side)];
        let mut session = SeededSession::unlimited(seed);
        for i in 0..count {
            // Reused noise: each release from a fresh session of one seed.
            let mut reused = self.reused.then(|| SeededSession::unlimited(mix(seed, i)));
            let s = reused.as_mut().unwrap_or(&mut session);
            let y = self.path.measure(data, s, self.cost)?.values;
            let loss = self.loss.loss(&y);
            let Some(second) = &self.second else {
                sink(&[loss]);
                continue;
            };
            let mut reused = self.reused.then(|| SeededSession::unlimited(mix(seed, i)));
            let s = reused.as_mut().unwrap_or(&mut session);
            let z = self.path.measure(second, s, self.cost)?.values;
            sink(&[loss, diff_on(&self.loss, &y, &z)]);
        }
        Ok(())
    }
}

/// The projection of `y − z` on the record's shift.
fn diff_on(loss: &Likelihood, y: &[f64], z: &[f64]) -> f64 {
    let d: Vec<f64> = y.iter().zip(z).map(|(a, b)| a - b).collect();
    dot(loss.shift(), &d)
}

/// The (ε', δ) budget whose zCDP ρ is at least `rho` (doubling ε' from
/// `epsilon`, then bisection), for the projection mechanism, whose
/// constructor takes a budget.
fn budget_with_rho(rho: f64, epsilon: f64, delta: f64) -> Result<PrivacyBudget> {
    let (mut lo, mut hi) = (epsilon, epsilon);
    while zcdp_rho_for(hi, delta)? < rho {
        (lo, hi) = (hi, 2.0 * hi);
        if hi > 64.0 * epsilon {
            return Err(DpError::InvalidParameter {
                name: "audit",
                reason: format!("no ε up to {hi} gives ρ {rho} at δ {delta}"),
            });
        }
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if zcdp_rho_for(mid, delta)? >= rho {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    PrivacyBudget::approx(hi, delta)
}

/// The projection mechanism's data access: the generalized Gaussian
/// release `W x + N(0, c²Σ)` with the Ky Fan-optimal Σ (the projection
/// that follows is post-processing), run at the claimed budget or, broken,
/// at one whose ρ is mis-stated. The noise is correlated, so the statistic
/// is the whitened projection `(Σ⁻¹ w_j)ᵀ y`, affine in the privacy loss.
fn projection_audit(epsilon: f64, delta: f64, broken: Option<Broken>) -> Result<ProjectionAudit> {
    let budget = PrivacyBudget::approx(epsilon, delta)?;
    let claimed = claimed_cost(budget)?;
    let run_at = match broken.map(|b| b.misstate(claimed)) {
        Some(Cost::Rho(rho)) if Cost::Rho(rho) != claimed => budget_with_rho(rho, epsilon, delta)?,
        _ => budget,
    };
    let w = Prefix::new(N)?
        .explicit()
        .ok_or_else(|| DpError::InvalidParameter {
            name: "audit",
            reason: format!("Prefix({N}) has no explicit matrix"),
        })?;
    let cov = optimal_covariance(w.as_ref(), N / 2, &KyFanOptions::default())?.covariance;
    let gaussian =
        GeneralizedGaussian::new(w.as_ref(), cov.as_ref(), run_at, GaussianCalibration::Zcdp)?;
    // Σ⁻¹ W: the column with the largest w_eᵀ Σ⁻¹ w_e is the neighbour.
    let inv = dp_linalg::Cholesky::factor(cov.as_ref())
        .map_err(|_| DpError::InvalidParameter {
            name: "covariance",
            reason: "not positive definite".into(),
        })?
        .inverse();
    let whitened = inv.as_ref() * w.as_ref();
    let col = |m: MatRef<'_, f64>, j: usize| -> Vec<f64> { m.col(j).iter().copied().collect() };
    let quad = |e: usize| dot(&col(w.as_ref(), e), &col(whitened.as_ref(), e));
    let j = (0..N)
        .max_by(|&a, &b| quad(a).total_cmp(&quad(b)))
        .unwrap_or(0);
    Ok(ProjectionAudit {
        name: format!(
            "projection mechanism, Gaussian release (prefix sums, n = {N}){}",
            Broken::suffix(broken)
        ),
        gaussian,
        data: neighbours(j)?,
        direction: col(whitened.as_ref(), j),
        claim: claim_of(budget),
    })
}

struct ProjectionAudit {
    name: String,
    gaussian: GeneralizedGaussian,
    data: [PrivateHistogram; 2],
    direction: Vec<f64>,
    claim: (f64, f64),
}

impl Audited for ProjectionAudit {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn claim(&self) -> (f64, f64) {
        self.claim
    }

    fn statistics(&self) -> Vec<&'static str> {
        vec!["whitened projection"]
    }

    fn project(&self, side: Side, seed: u64, count: u64, sink: Sink<'_>) -> Result<()> {
        let mut s = SeededSession::unlimited(seed);
        for _ in 0..count {
            let y = self
                .gaussian
                .release(&self.data[side_index(side)], &mut s)?;
            sink(&[dot(&self.direction, &y)]);
        }
        Ok(())
    }
}

impl KernelAudit<MarginalPath> {
    /// The marginal measurement of `dpmm release` (see
    /// [`super::release_path`]).
    fn release_path(budget: PrivacyBudget, broken: Option<Broken>) -> Result<Self> {
        let claimed = claimed_cost(budget)?;
        let (path, loss, data) = MarginalPath::new(budget, claimed)?;
        Ok(Self {
            name: format!(
                "dpmm release marginal measurement, {} ({}){}",
                noise_name(budget),
                path.describe(),
                Broken::suffix(broken)
            ),
            path,
            data,
            second: None,
            reused: false,
            cost: broken.map_or(claimed, |b| b.misstate(claimed)),
            claim: claim_of(budget),
            loss,
        })
    }
}
