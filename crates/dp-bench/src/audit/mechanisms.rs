//! The mechanisms the audit draws from, each through the kernel path of a
//! release, and their deliberately broken variants
//! ([`dp_core::experiments::broken`]).

use dp_core::calibration::GaussianCalibration;
use dp_core::experiments::{SeededSession, broken};
use dp_core::{DpError, MatrixMechanism, PrivacyBudget, PrivateHistogram, Result, Session};
use dp_linalg::{Mat, MatRef};
use dp_opt::projection::{GeneralizedGaussian, KyFanOptions, optimal_covariance};
use dp_opt::{PrivacyModel, Problem, StrategyOptimizer, coa::Coa};
use dp_workloads::Workload;
use dp_workloads::strategies::{hierarchical, identity};
use dp_workloads::workload::{AllRange, Prefix};

use super::{AuditConfig, Side, mix};

/// A deliberately broken variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Broken {
    /// The kernel calibrates the noise to half the sensitivity.
    HalvedSensitivity,
    /// Two releases on disjoint parts of the data draw the same noise.
    ReusedSeed,
}

/// A mechanism under audit.
pub trait Audited: Sync {
    /// What it is, e.g. `Laplace MM, identity (n = 4)`.
    fn name(&self) -> String;
    /// The (ε, δ) it claims.
    fn claim(&self) -> (f64, f64);
    /// Draws `count` outputs on `side` from sessions seeded from `seed`
    /// and hands each one's projection to `sink`.
    fn project(&self, side: Side, seed: u64, count: u64, sink: &mut dyn FnMut(f64)) -> Result<()>;
}

/// Domain size of the audited strategies: small, so that each output
/// costs few exact draws.
const N: usize = 4;
/// The cell whose count differs: chosen per mechanism (largest column).
const BASE: [u64; N] = [3, 1, 4, 1];

/// The mechanisms of an audit: the Laplace and Gaussian matrix mechanisms
/// on identity, hierarchical and COA-optimized (all ranges) strategies,
/// the generalized Gaussian release of the projection mechanism with its
/// Ky Fan-optimal covariance (prefix sums), and two releases on disjoint
/// parts of the data (parallel composition). `--broken
/// halved-sensitivity` builds all but the last on broken sessions;
/// `reused-seed` audits only the two-release mechanisms, with reused
/// noise. `reduced` keeps the first of each kind.
pub fn mechanisms(cfg: &AuditConfig) -> Result<Vec<Box<dyn Audited>>> {
    let eps = 1.0;
    let laplace = PrivacyBudget::pure(eps)?;
    let gaussian = PrivacyBudget::approx(eps, cfg.delta)?;
    let halved = cfg.broken == Some(Broken::HalvedSensitivity);
    let mut out: Vec<Box<dyn Audited>> = Vec::new();
    if cfg.broken != Some(Broken::ReusedSeed) {
        let coa = coa_strategy()?;
        let strategies = [
            ("identity", identity(N)?),
            ("hierarchical", hierarchical(N, 2)?),
            ("COA on all ranges", coa),
        ];
        let keep = if cfg.reduced { 1 } else { strategies.len() };
        for budget in [laplace, gaussian] {
            for (label, a) in strategies.iter().take(keep) {
                out.push(Box::new(matrix_audit(label, a.as_ref(), budget, halved)?));
            }
        }
        out.push(Box::new(projection_audit(eps, cfg.delta, halved)?));
    }
    if cfg.broken != Some(Broken::HalvedSensitivity) {
        let reused = cfg.broken == Some(Broken::ReusedSeed);
        let keep = if cfg.reduced { 1 } else { 2 };
        for budget in [laplace, gaussian].into_iter().take(keep) {
            out.push(Box::new(TwoReleases::new(budget, reused)?));
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

/// The cost calibration of a budget: the zCDP one for (ε,δ), whose ρ the
/// kernel's CKS20 conversion makes exactly (ε,δ)-DP.
const CALIBRATION: GaussianCalibration = GaussianCalibration::Zcdp;

/// The session of a chunk: seeded, unlimited, broken when asked.
fn session(seed: u64, halved: bool) -> Session {
    if halved {
        broken::halved_sensitivity(seed)
    } else {
        SeededSession::unlimited(seed)
    }
}

/// The column of `a` with the largest L1 (pure) or L2 norm, and the
/// neighbouring histograms `BASE + e_j` and `BASE`.
fn neighbours(a: MatRef<'_, f64>, pure: bool) -> Result<(usize, [PrivateHistogram; 2])> {
    let norm = |j: usize| -> f64 {
        let col = a.col(j);
        if pure {
            col.iter().map(|v| v.abs()).sum()
        } else {
            col.squared_norm_l2()
        }
    };
    let j = (0..a.ncols())
        .max_by(|&x, &y| norm(x).total_cmp(&norm(y)))
        .unwrap_or(0);
    Ok((j, neighbours_at(j)?))
}

/// The neighbouring histograms `BASE + e_j` and `BASE`.
fn neighbours_at(j: usize) -> Result<[PrivateHistogram; 2]> {
    let mut with = BASE.to_vec();
    with[j] += 1;
    Ok([
        PrivateHistogram::from_counts(with)?,
        PrivateHistogram::from_counts(BASE.to_vec())?,
    ])
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn side_index(side: Side) -> usize {
    match side {
        Side::With => 0,
        Side::Without => 1,
    }
}

/// A data access under audit: its output on a histogram, drawn from
/// `session`.
trait Release: Sync {
    fn answers(&self, data: &PrivateHistogram, session: &mut Session) -> Result<Vec<f64>>;
}

impl Release for MatrixMechanism {
    fn answers(&self, data: &PrivateHistogram, session: &mut Session) -> Result<Vec<f64>> {
        Ok(self.measure(data, session)?.values)
    }
}

impl Release for GeneralizedGaussian {
    fn answers(&self, data: &PrivateHistogram, session: &mut Session) -> Result<Vec<f64>> {
        self.release(data, session)
    }
}

/// One mechanism on one neighbouring pair (`data[0]` has the extra
/// record), its outputs projected on `direction`.
struct NeighbourAudit<M> {
    name: String,
    mech: M,
    data: [PrivateHistogram; 2],
    direction: Vec<f64>,
    claim: (f64, f64),
    halved: bool,
}

impl<M: Release> Audited for NeighbourAudit<M> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn claim(&self) -> (f64, f64) {
        self.claim
    }

    fn project(&self, side: Side, seed: u64, count: u64, sink: &mut dyn FnMut(f64)) -> Result<()> {
        let mut s = session(seed, self.halved);
        for _ in 0..count {
            let y = self.mech.answers(&self.data[side_index(side)], &mut s)?;
            sink(dot(&self.direction, &y));
        }
        Ok(())
    }
}

fn halved_suffix(halved: bool) -> &'static str {
    if halved { ", halved sensitivity" } else { "" }
}

/// The matrix mechanism's measurement `y = A x + z`; its release `W A⁺ y`
/// is post-processing of it.
fn matrix_audit(
    label: &str,
    a: MatRef<'_, f64>,
    budget: PrivacyBudget,
    halved: bool,
) -> Result<NeighbourAudit<MatrixMechanism>> {
    let pure = budget.delta().is_none();
    let (j, data) = neighbours(a, pure)?;
    Ok(NeighbourAudit {
        name: format!(
            "{} MM, {label} (n = {N}){}",
            if pure { "Laplace" } else { "Gaussian" },
            halved_suffix(halved)
        ),
        mech: MatrixMechanism::with_calibration(a, budget, CALIBRATION)?,
        data,
        direction: col(a, j),
        claim: claim_of(budget),
        halved,
    })
}

/// The projection mechanism's data access: the generalized Gaussian
/// release `W x + N(0, c²Σ)` with the Ky Fan-optimal Σ (the projection
/// that follows is post-processing). The noise is correlated, so the
/// projection direction is the whitened column difference `Σ⁻¹ w_j`.
fn projection_audit(
    epsilon: f64,
    delta: f64,
    halved: bool,
) -> Result<NeighbourAudit<GeneralizedGaussian>> {
    let budget = PrivacyBudget::approx(epsilon, delta)?;
    let w = Prefix::new(N)?
        .explicit()
        .ok_or_else(|| DpError::InvalidParameter {
            name: "audit",
            reason: format!("Prefix({N}) has no explicit matrix"),
        })?;
    let k = N / 2;
    let cov = optimal_covariance(w.as_ref(), k, &KyFanOptions::default())?.covariance;
    let gaussian = GeneralizedGaussian::new(w.as_ref(), cov.as_ref(), budget, CALIBRATION)?;
    // Σ⁻¹ W: the column with the largest w_eᵀ Σ⁻¹ w_e is the neighbour.
    let inv = dp_linalg::Cholesky::factor(cov.as_ref())
        .map_err(|_| dp_core::DpError::InvalidParameter {
            name: "covariance",
            reason: "not positive definite".into(),
        })?
        .inverse();
    let whitened = inv.as_ref() * w.as_ref();
    let quad = |e: usize| dot(&col(w.as_ref(), e), &col(whitened.as_ref(), e));
    let j = (0..N)
        .max_by(|&a, &b| quad(a).total_cmp(&quad(b)))
        .unwrap_or(0);
    Ok(NeighbourAudit {
        name: format!(
            "projection mechanism, Gaussian release (prefix sums, n = {N}){}",
            halved_suffix(halved)
        ),
        mech: gaussian,
        data: neighbours_at(j)?,
        direction: col(whitened.as_ref(), j),
        claim: claim_of(budget),
        halved,
    })
}

fn col(m: MatRef<'_, f64>, j: usize) -> Vec<f64> {
    m.col(j).iter().copied().collect()
}

/// Two releases of the identity strategy on the two disjoint parts of the
/// data (`BASE` and its reverse), ε-DP together by parallel composition
/// when their noise is independent. The neighbour adds a record to the
/// first part; the projection is on the difference of the releases, which
/// reused noise makes exact.
struct TwoReleases {
    mech: MatrixMechanism,
    first: [PrivateHistogram; 2],
    second: PrivateHistogram,
    direction: Vec<f64>,
    claim: (f64, f64),
    reused: bool,
}

impl TwoReleases {
    fn new(budget: PrivacyBudget, reused: bool) -> Result<Self> {
        let a = identity(N)?;
        let (j, first) = neighbours(a.as_ref(), budget.delta().is_none())?;
        let mut second = BASE.to_vec();
        second.reverse();
        Ok(Self {
            mech: MatrixMechanism::with_calibration(a.as_ref(), budget, CALIBRATION)?,
            first,
            second: PrivateHistogram::from_counts(second)?,
            direction: col(a.as_ref(), j),
            claim: claim_of(budget),
            reused,
        })
    }
}

impl Audited for TwoReleases {
    fn name(&self) -> String {
        format!(
            "two {} releases on disjoint parts (identity, n = {N}){}",
            if self.claim.1 == 0.0 {
                "Laplace"
            } else {
                "Gaussian"
            },
            if self.reused { ", reused seed" } else { "" }
        )
    }

    fn claim(&self) -> (f64, f64) {
        self.claim
    }

    fn project(&self, side: Side, seed: u64, count: u64, sink: &mut dyn FnMut(f64)) -> Result<()> {
        let mut fresh = SeededSession::unlimited(seed);
        for i in 0..count {
            let mut reused;
            let s = if self.reused {
                reused = broken::reused_noise(mix(seed, i));
                &mut reused
            } else {
                &mut fresh
            };
            let a = self.mech.measure(&self.first[side_index(side)], s)?;
            let b = self.mech.measure(&self.second, s)?;
            let diff: Vec<f64> = a.values.iter().zip(&b.values).map(|(x, y)| x - y).collect();
            sink(dot(&self.direction, &diff));
        }
        Ok(())
    }
}
