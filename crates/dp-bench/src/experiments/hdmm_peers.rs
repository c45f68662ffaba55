//! dpmm's structured planner beside HDMM (McKenna et al. VLDB 2018;
//! dpcomp-org/hdmm, AGPL-3.0) on multi-dimensional workloads, one run,
//! both privacy models: `hdmm-peers` (every kind below) and `hdmm-census`
//! (the census ones: SF1 Persons, HDMM §8, and weighted marginals on its
//! domain).
//!
//! HDMM is never vendored: when [`Hdmm::from_env`] finds it, a short
//! driver of ours (Python, HDMM's public API) receives the workload as its
//! Kronecker products with explicit factors and optimizes each of HDMM's
//! templates in a child process: Kronecker (per attribute `PIdentity` for
//! ε-DP; its COA port `YuanConvex` and `McKennaConvex` for (ε,δ)), its
//! marginals template (≤ 16 attributes: 2^d parameters) and its union of
//! Kronecker products (one Kronecker template per workload product, ≤ 8
//! products). HDMM's objectives are recomputed here from its strategies
//! ([`dp_plan::evaluate`]); a union's, which has no structured
//! evaluation, is HDMM's own loss (each product answered from its own
//! block: an upper bound on the union's error), marked so. Times are the
//! optimizations alone on both sides.

use std::path::{Path, PathBuf};

use dp_core::{DpError, Result};
use dp_linalg::Mat;
use dp_opt::PrivacyModel;
use dp_plan::PlanOptions;
use dp_plan::evaluate::{kron_objective, marginals_objective};
use dp_workloads::generators::{DiscreteEntries, wdiscrete, wrange};
use dp_workloads::structured::sf1::{census_marginals, sf1_persons};
use dp_workloads::structured::write::write_spec;
use dp_workloads::structured::{AttrSet, Factor, Queries, QueryGroup, StructuredWorkload};
use serde::Deserialize;

use super::hdmm::{BOTH, Planned, by_privacy, domain, objective_name, privacy_label, single_group};
use super::runner::{Grid, GridExperiment};
use crate::peers::Hdmm;
use crate::procfs::load_average;
use crate::{Panel, Plot, Point, Progress, RunConfig};

/// The workloads of the side-by-side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    /// One Kronecker product of random explicit factors (WRange and
    /// WDiscrete rows) on attributes of 8, 16, 32 and 64.
    KronExplicit,
    /// A weighted union of three such products on 12 × 24 × 48.
    KronUnionExplicit,
    /// Every 3-way marginal on 12 attributes of sizes 2–7.
    ThreeWay12,
    /// Every 2-way marginal on 40 binary attributes (2⁴⁰ cells).
    TwoWay40Binary,
    /// Weighted marginals on the SF1 domain.
    CensusMarginals,
    /// HDMM's SF1 Persons (its §8).
    Sf1Persons,
    /// Prefix(115) ⊗ AllRange(64) ⊗ Identity(17): a Kronecker product
    /// of implicit range factors on census-sized attributes.
    PrefixRangeIdentity,
    /// Random weighted marginals on the SF1 domain ([`random_census`]):
    /// the seed, 1 to [`CENSUS_RANDOM_LABELS`]'s length.
    CensusRandom(u64),
}

/// The labels of the random census workloads, by seed − 1.
const CENSUS_RANDOM_LABELS: [&str; 8] = [
    "random weighted census marginals #1",
    "random weighted census marginals #2",
    "random weighted census marginals #3",
    "random weighted census marginals #4",
    "random weighted census marginals #5",
    "random weighted census marginals #6",
    "random weighted census marginals #7",
    "random weighted census marginals #8",
];

/// Weighted marginals on the SF1 domain (2×2×64×17×115 cells) drawn from
/// `seed`: the total, each 1-way marginal with probability 0.6, each
/// 2-way with 0.4 and each 3-way with 0.2, at least one marginal of two
/// or more attributes, weights uniform on [0.25, 4), one group each.
/// Planning must not depend on a workload someone tuned it for: these are
/// workloads nobody chose.
fn random_census(seed: u64) -> Result<StructuredWorkload> {
    use rand::{Rng, SeedableRng};
    let domain = census_marginals()?.domain().clone();
    let d = domain.len();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    loop {
        let mut sets = vec![(AttrSet::EMPTY, rng.random_range(0.25..4.0))];
        for (k, p) in [(1, 0.6), (2, 0.4), (3, 0.2)] {
            for s in dp_workloads::spec::k_subsets(d, k)? {
                if rng.random_bool(p) {
                    sets.push((s, rng.random_range(0.25..4.0)));
                }
            }
        }
        if sets.iter().any(|(s, _)| s.len() >= 2) {
            return Ok(StructuredWorkload::weighted_marginals(domain, &sets)?);
        }
    }
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Self::KronExplicit => "Kronecker, explicit factors 8×16×32×64",
            Self::KronUnionExplicit => "union of 3 Kronecker, explicit factors 12×24×48",
            Self::ThreeWay12 => "3-way marginals, 12 attributes of 2–7",
            Self::TwoWay40Binary => "2-way marginals, 40 binary attributes",
            Self::CensusMarginals => "weighted marginals on the SF1 domain",
            Self::Sf1Persons => "SF1 Persons",
            Self::PrefixRangeIdentity => "Prefix(115) ⊗ AllRange(64) ⊗ Identity(17)",
            Self::CensusRandom(seed) => CENSUS_RANDOM_LABELS
                .get((seed as usize).wrapping_sub(1))
                .copied()
                .unwrap_or("random weighted census marginals"),
        }
    }

    fn workload(self) -> Result<StructuredWorkload> {
        let random = |n: usize, seed: u64| -> Result<Factor> {
            let w = if seed.is_multiple_of(2) {
                wrange(n, n, seed)?
            } else {
                wdiscrete(n, n, DiscreteEntries::LRM, seed)?
            };
            Ok(Factor::Matrix(std::sync::Arc::new(w.matrix().to_owned())))
        };
        match self {
            Self::KronExplicit => {
                let factors = [8, 16, 32, 64]
                    .iter()
                    .enumerate()
                    .map(|(k, &n)| random(n, k as u64))
                    .collect::<Result<_>>()?;
                single_group(named(&[8, 16, 32, 64])?, "kron", Queries::Kron(factors))
            }
            Self::KronUnionExplicit => {
                let groups = [1.0, 0.5, 2.0]
                    .iter()
                    .enumerate()
                    .map(|(p, &weight)| {
                        let factors = [12, 24, 48]
                            .iter()
                            .enumerate()
                            .map(|(i, &n)| random(n, 10 + 3 * p as u64 + i as u64))
                            .collect::<Result<_>>()?;
                        Ok(QueryGroup {
                            label: format!("k{p}"),
                            weight,
                            queries: Queries::Kron(factors),
                        })
                    })
                    .collect::<Result<_>>()?;
                Ok(StructuredWorkload::new(named(&[12, 24, 48])?, groups)?)
            }
            Self::ThreeWay12 => {
                let sizes: Vec<usize> = (0..12).map(|i| 2 + i % 6).collect();
                let sets = dp_workloads::spec::k_subsets(12, 3)?;
                single_group(named(&sizes)?, "3-way", Queries::Marginals(sets))
            }
            Self::TwoWay40Binary => {
                let sets = dp_workloads::spec::k_subsets(40, 2)?;
                single_group(domain(40, 2)?, "2-way", Queries::Marginals(sets))
            }
            Self::CensusMarginals => Ok(census_marginals()?),
            Self::Sf1Persons => Ok(sf1_persons()?),
            Self::PrefixRangeIdentity => single_group(
                named(&[115, 64, 17])?,
                "kron",
                Queries::Kron(vec![
                    Factor::Prefix(115),
                    Factor::AllRange(64),
                    Factor::Identity(17),
                ]),
            ),
            Self::CensusRandom(seed) => random_census(seed),
        }
    }
}

/// Attributes `a0, a1, …` of the given sizes.
fn named(sizes: &[usize]) -> Result<dp_workloads::domain::Domain> {
    let names: Vec<String> = (0..sizes.len()).map(|i| format!("a{i}")).collect();
    let pairs: Vec<(&str, usize)> = names
        .iter()
        .map(|s| s.as_str())
        .zip(sizes.iter().copied())
        .collect();
    Ok(dp_workloads::domain::Domain::from_pairs(&pairs)?)
}

/// The side-by-side over `kinds`.
pub(crate) struct Peers {
    /// The experiment's name (its output directory).
    name: &'static str,
    kinds: &'static [Kind],
    /// The experiment that also runs every one of `kinds`.
    part_of: Option<&'static str>,
}

/// `hdmm-peers`.
pub(crate) const PEERS: Grid<Peers> = Grid::new(
    "hdmm-peers",
    "HDMM paper, §6–8: dpmm's plan beside HDMM's templates on multi-dimensional workloads (Kronecker with explicit factors, 3-way and 2-way marginals, census), both privacy models, one run",
    Peers {
        name: "hdmm-peers",
        kinds: &[
            Kind::KronExplicit,
            Kind::KronUnionExplicit,
            Kind::CensusMarginals,
            Kind::ThreeWay12,
            Kind::TwoWay40Binary,
            Kind::Sf1Persons,
            Kind::PrefixRangeIdentity,
        ],
        part_of: None,
    },
);

/// `hdmm-census`.
pub(crate) const CENSUS: Grid<Peers> = Grid::new(
    "hdmm-census",
    "HDMM paper, §8: the census SF1 Persons workload (and weighted marginals on its domain) beside HDMM's templates, error relative to the identity, both privacy models",
    Peers {
        name: "hdmm-census",
        kinds: &[Kind::Sf1Persons, Kind::CensusMarginals],
        part_of: Some("hdmm-peers"),
    },
);

/// `hdmm-census-random`.
pub(crate) const CENSUS_RANDOM: Grid<Peers> = Grid::new(
    "hdmm-census-random",
    "ε-DP and (ε,δ) plans beside HDMM's templates on weighted marginals of the SF1 domain that nobody chose (8 random draws), both privacy models, one run",
    Peers {
        name: "hdmm-census-random",
        kinds: &[
            Kind::CensusRandom(1),
            Kind::CensusRandom(2),
            Kind::CensusRandom(3),
            Kind::CensusRandom(4),
            Kind::CensusRandom(5),
            Kind::CensusRandom(6),
            Kind::CensusRandom(7),
            Kind::CensusRandom(8),
        ],
        part_of: None,
    },
);

/// One workload under one privacy model.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Case {
    kind: Kind,
    privacy: PrivacyModel,
}

/// What a run shares.
pub(crate) struct Setup {
    options: PlanOptions,
    hdmm: Option<HdmmDriver>,
    dir: PathBuf,
    load: Option<f64>,
}

/// One of HDMM's templates on one workload.
pub(crate) struct PeerRun {
    template: &'static str,
    /// Seconds of its optimization, and the recomputed objective (or its
    /// own loss, `own_loss`); the error text when it failed.
    outcome: std::result::Result<(f64, f64), String>,
    own_loss: bool,
}

/// What one case measured.
pub(crate) struct Row {
    ours: Planned,
    /// `‖W‖_F²`: the identity strategy's objective.
    identity: f64,
    cells: f64,
    peers: Vec<PeerRun>,
}

impl Row {
    /// HDMM's best template by objective.
    fn best(&self) -> Option<(&PeerRun, f64, f64)> {
        self.peers
            .iter()
            .filter_map(|p| p.outcome.as_ref().ok().map(|&(s, o)| (p, s, o)))
            .min_by(|a, b| a.2.total_cmp(&b.2))
    }
}

impl GridExperiment for Peers {
    type Setup = Setup;
    type Value = Case;
    type Row = Row;

    fn part_of(&self) -> Option<&'static str> {
        self.part_of
    }

    fn setup(&self, cfg: &RunConfig, progress: &mut dyn Progress) -> Result<Setup> {
        let hdmm = HdmmDriver::from_env();
        if hdmm.is_none() {
            progress.note("HDMM not found (HDMM_SRC, PEER_PYTHON): dpmm's side only");
        }
        Ok(Setup {
            options: PlanOptions {
                max_rounds: cfg.by_scale(2, 20, 50),
                ..PlanOptions::default()
            },
            hdmm,
            dir: cfg.out.join(self.name),
            load: load_average(),
        })
    }

    fn grid(&self, cfg: &RunConfig, _: &Setup) -> Vec<Case> {
        let kinds = cfg.by_scale(&self.kinds[..2], self.kinds, self.kinds);
        kinds
            .iter()
            .flat_map(|&kind| BOTH.map(|privacy| Case { kind, privacy }))
            .collect()
    }

    fn measure(&self, s: &mut Setup, case: &Case, points: &mut Vec<Point>) -> Result<Row> {
        let Case { kind, privacy } = *case;
        let w = kind.workload()?;
        let value = f64::from(u8::from(privacy == PrivacyModel::Approx));
        let point = (kind.label(), "privacy", value);
        let ours = Planned::run(&w, privacy, &s.options, point, points)?;
        let stem = format!("{kind:?}_{}", privacy.name());
        if kind == Kind::Sf1Persons && privacy == PrivacyModel::Approx {
            write_spec(&w, &s.dir, "sf1_persons")?;
        }
        let peers = match &s.hdmm {
            Some(h) => h.run_all(&w, privacy, &s.dir, &stem)?,
            None => Vec::new(),
        };
        Ok(Row {
            ours,
            identity: w.frobenius_squared()?,
            cells: w.domain().cells_f64(),
            peers,
        })
    }

    fn describe(&self, case: &Case, row: &Row) -> String {
        row.ours.describe(case.kind.label())
    }

    fn report(&self, s: &Setup, grid: &[Case], rows: &[Row]) -> Result<(String, Vec<Plot>)> {
        let series = by_privacy(true, |privacy| {
            grid.iter()
                .zip(rows)
                .enumerate()
                .filter(|(_, (c, _))| c.privacy == privacy)
                .map(|(k, (_, r))| ((k / 2 + 1) as f64, r.identity / r.ours.objective, None))
                .collect()
        });
        let names: Vec<String> = self
            .kinds
            .iter()
            .enumerate()
            .map(|(k, kind)| format!("{} = {}", k + 1, kind.label()))
            .collect();
        let plot = Plot {
            file_stem: "identity_ratio".into(),
            title: "identity's objective over dpmm's".into(),
            x_label: names.join("; "),
            y_label: "identity / dpmm".into(),
            log_x: false,
            log_y: true,
            panels: vec![Panel {
                title: "workloads".into(),
                series,
            }],
        };
        Ok((summary(s, grid, rows), vec![plot]))
    }
}

fn summary(s: &Setup, grid: &[Case], rows: &[Row]) -> String {
    let mut out = format!(
        "dpmm's `plan` beside HDMM's templates, one run on this machine (shared cores; load average at start {}). \
         Objective = l2_obj ((ε,δ)) or l1_obj (ε-DP) of the whole workload; HDMM's recomputed here from its strategies \
         (a union's marked *own loss*: HDMM's value, an upper bound on its strategy's error). \
         Ratios: objective ours / HDMM's best (≤ 1: dpmm at least as accurate), time HDMM's best template / ours (≥ 1: dpmm faster). \
         Gap: dpmm's certified relative gap (objective − lower bound)/objective.\n\n\
         | workload | cells | privacy | dpmm method | dpmm objective | gap | dpmm s | HDMM best | HDMM objective | HDMM s | objective ratio | time ratio | identity / dpmm |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        s.load.map_or("?".into(), |l| format!("{l:.1}"))
    );
    let mut others = String::new();
    for (&Case { kind, privacy }, r) in grid.iter().zip(rows) {
        let o = &r.ours;
        let gap = o.lower_bound.map_or("-".into(), |b| {
            format!("{:.1e}", (o.objective - b) / o.objective)
        });
        let (best, hobj, hsec, ratios) = match r.best() {
            Some((p, sec, obj)) => (
                format!(
                    "{}{}",
                    p.template,
                    if p.own_loss { " (own loss)" } else { "" }
                ),
                format!("{obj:.4e}"),
                format!("{sec:.2}"),
                format!(
                    "{:.4} | {:.1}",
                    o.objective / obj,
                    sec / o.seconds.max(1e-6)
                ),
            ),
            None => ("not run".into(), "-".into(), "-".into(), "- | -".into()),
        };
        out += &format!(
            "| {} | {:.3e} | {} | {} ({} rounds) | {:.4e} | {gap} | {:.2} | {best} | {hobj} | {hsec} | {ratios} | {:.1} |\n",
            kind.label(),
            r.cells,
            privacy_label(privacy),
            o.method,
            o.rounds,
            o.objective,
            o.seconds,
            r.identity / o.objective
        );
        for p in &r.peers {
            let what = match &p.outcome {
                Ok((sec, obj)) => format!("{} {obj:.4e} in {sec:.2} s", objective_name(privacy)),
                Err(e) => format!("failed ({e})"),
            };
            others += &format!(
                "- {} {}: HDMM {} — {what}\n",
                kind.label(),
                privacy_label(privacy),
                p.template
            );
        }
    }
    if !others.is_empty() {
        out += "\nEvery HDMM template run:\n\n";
        out += &others;
    }
    out += "\nHDMM's SF1 encoding puts race code 0 (no race reported) in \"two or more races\"; here (and in the workload both tools receive) \
        it is in no category, the published definition. The SF1 Persons spec is written to `sf1_persons.json`.\n";
    out
}

/// HDMM's answer file.
#[derive(Deserialize)]
struct DriverOut {
    seconds: f64,
    loss: f64,
    #[serde(default)]
    theta: Option<Vec<f64>>,
    #[serde(default)]
    terms: Option<Vec<DriverTerm>>,
}

#[derive(Deserialize)]
struct DriverTerm {
    factors: Vec<Vec<Vec<f64>>>,
}

/// The driver run by HDMM's Python: builds the workload from its products
/// (weight and explicit factors), optimizes one template and writes its
/// strategy (Kronecker factors, or marginal weights by HDMM's key) and
/// seconds.
const DRIVER: &str = r#"
import sys, json, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from hdmm import templates, matrix
spec = json.load(open(sys.argv[2])); template = sys.argv[3]
ns = spec["shape"]; approx = spec["privacy"] == "approx"
W = matrix.VStack([p["weight"] * matrix.Kronecker([matrix.EkteloMatrix(np.array(f, dtype=float)) for f in p["factors"]]) for p in spec["products"]])
def one(n):
    if template == "kron-mckenna": return templates.McKennaConvex(n)
    if approx: return templates.YuanConvex()
    return templates.PIdentity(max(n // 16, 1), n, seed=0)
t = time.perf_counter()
if template == "marginals":
    T = templates.Marginals(ns, approx, seed=0); loss = T.optimize(W)
elif template == "union":
    T = templates.Union([templates.Kronecker([one(n) for n in ns]) for _ in W.matrices], approx, seed=0); loss = T.optimize(W.matrices)
else:
    T = templates.Kronecker([one(n) for n in ns]); loss = T.optimize(W)
res = {"seconds": time.perf_counter() - t, "loss": float(loss)}
if template == "marginals":
    res["theta"] = [float(x) for x in T.strategy().weights]
elif template != "union":
    res["terms"] = [{"factors": [np.asarray(S.strategy().dense_matrix()).tolist() for S in T._templates]}]
json.dump(res, open(sys.argv[4], "w"))
"#;

/// HDMM ([`Hdmm::from_env`]) running [`DRIVER`] on structured workloads.
struct HdmmDriver(Hdmm);

impl HdmmDriver {
    fn from_env() -> Option<Self> {
        Hdmm::from_env().map(Self)
    }

    /// Every applicable template on `w` (the workload file is written to
    /// `dir/stem.json`).
    fn run_all(
        &self,
        w: &StructuredWorkload,
        privacy: PrivacyModel,
        dir: &Path,
        stem: &str,
    ) -> Result<Vec<PeerRun>> {
        let products = w.products();
        let d = w.domain().len();
        let mut json_products = Vec::with_capacity(products.len());
        for (weight, factors) in &products {
            let mats = factors
                .iter()
                .map(|f| f.explicit().map(|m| rows(&m)))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            json_products.push(serde_json::json!({"weight": weight, "factors": mats}));
        }
        let spec = serde_json::json!({
            "shape": w.domain().shape(),
            "privacy": privacy.name(),
            "products": json_products,
        });
        std::fs::create_dir_all(dir).map_err(|e| DpError::Io(e.to_string()))?;
        let path = dir.join(format!("{stem}.json"));
        std::fs::write(&path, spec.to_string()).map_err(|e| DpError::Io(e.to_string()))?;
        let mut templates: Vec<&'static str> = match privacy {
            PrivacyModel::Approx => vec!["kron-yuan", "kron-mckenna"],
            PrivacyModel::Pure => vec!["kron-pidentity"],
        };
        if d <= dp_plan::opt_m::FULL_FAMILY_MAX_ATTRIBUTES {
            templates.push("marginals");
        }
        if (2..=8).contains(&products.len()) {
            templates.push("union");
        }
        Ok(templates
            .into_iter()
            .map(|template| {
                let out = dir.join(format!("{stem}_{template}.out.json"));
                let outcome = self
                    .run(&path, template, &out)
                    .and_then(|o| evaluate(w, privacy, &o))
                    .map_err(|e| e.to_string());
                PeerRun {
                    template,
                    outcome,
                    own_loss: template == "union",
                }
            })
            .collect())
    }

    fn run(&self, spec: &Path, template: &str, out: &Path) -> Result<DriverOut> {
        let o = self.0.script(
            DRIVER,
            &[spec.as_os_str(), template.as_ref(), out.as_os_str()],
        )?;
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            let last = err.lines().last().unwrap_or("").trim().to_string();
            return Err(DpError::Io(last));
        }
        let text = std::fs::read_to_string(out).map_err(|e| DpError::Io(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| DpError::Io(format!("HDMM driver output: {e}")))
    }
}

fn rows(m: &Mat<f64>) -> Vec<Vec<f64>> {
    (0..m.nrows())
        .map(|i| (0..m.ncols()).map(|j| m[(i, j)]).collect())
        .collect()
}

/// HDMM's seconds and its strategy's objective, recomputed.
fn evaluate(w: &StructuredWorkload, privacy: PrivacyModel, o: &DriverOut) -> Result<(f64, f64)> {
    let d = w.domain().len();
    let objective = if let Some(theta) = &o.theta {
        // HDMM's key has attribute 0 as its most significant bit.
        let pairs: Vec<(AttrSet, f64)> = theta
            .iter()
            .enumerate()
            .filter(|(_, t)| **t > 0.0)
            .map(|(key, &t)| {
                let set = (0..d).filter(|&i| key & (1 << (d - 1 - i)) != 0).collect();
                (set, t)
            })
            .collect();
        marginals_objective(w, &pairs, privacy)?
    } else if let Some(term) = o.terms.as_ref().and_then(|t| t.first()) {
        let factors: Vec<Mat<f64>> = term
            .factors
            .iter()
            .map(|f| Mat::from_fn(f.len(), f.first().map_or(0, Vec::len), |i, j| f[i][j]))
            .collect();
        kron_objective(w, &factors, privacy)?
    } else {
        o.loss
    };
    Ok((o.seconds, objective))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn decoded(w: &StructuredWorkload, json: &str) -> (f64, f64) {
        let out: DriverOut = serde_json::from_str(json).unwrap();
        evaluate(w, PrivacyModel::Approx, &out).unwrap()
    }

    /// The driver's JSON as HDMM writes it: marginal weights keyed with
    /// attribute 0 as the most significant bit (HDMM's `Marginals`), a
    /// Kronecker term's factors as lists of rows, else HDMM's own loss;
    /// each decoded objective equals the one computed from the strategy
    /// stated directly, and the other bit order or orientation does not.
    #[test]
    fn driver_output_is_decoded() {
        let b = AttrSet::from_bits;
        let sets = vec![b(0b01), b(0b11)];
        let w = single_group(named(&[2, 3]).unwrap(), "m", Queries::Marginals(sets)).unwrap();
        let approx = PrivacyModel::Approx;
        // Keys 0b10 = {a0} (weight 1) and 0b11 = {a0, a1} (weight 2).
        let (seconds, got) = decoded(&w, r#"{"seconds": 1.5, "loss": 7, "theta": [0, 0, 1, 2]}"#);
        assert_eq!(seconds, 1.5);
        let want = marginals_objective(&w, &[(b(0b01), 1.0), (b(0b11), 2.0)], approx).unwrap();
        let reversed = marginals_objective(&w, &[(b(0b10), 1.0), (b(0b11), 2.0)], approx).unwrap();
        assert!((got - want).abs() <= 1e-12 * want, "{got} vs {want}");
        assert!(
            (reversed - want).abs() > 1e-6 * want,
            "{reversed} vs {want}"
        );

        // A 3×2 factor on the 2-valued attribute: read as columns it would
        // not fit the attribute at all.
        let json = r#"{"seconds": 2, "loss": 7, "terms": [{"factors":
            [[[1, 0], [0, 1], [1, 2]], [[1, 0, 0], [1, 1, 0], [3, 1, 1]]]}]}"#;
        let (_, got) = decoded(&w, json);
        let f0 = Mat::from_fn(3, 2, |i, j| [[1.0, 0.0], [0.0, 1.0], [1.0, 2.0]][i][j]);
        let f1 = Mat::from_fn(3, 3, |i, j| {
            [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [3.0, 1.0, 1.0]][i][j]
        });
        let want = kron_objective(&w, &[f0.clone(), f1.clone()], approx).unwrap();
        assert!((got - want).abs() <= 1e-12 * want, "{got} vs {want}");
        let transposed = [f0.transpose().to_owned(), f1.transpose().to_owned()];
        assert!(kron_objective(&w, &transposed, approx).is_err());

        let (_, got) = decoded(&w, r#"{"seconds": 3, "loss": 7.25}"#);
        assert_eq!(got, 7.25);
    }
}
