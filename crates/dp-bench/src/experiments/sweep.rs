//! The "vary one parameter" figures of the LRM paper (Figs. 4–9: n, m and
//! the rank s, ε-DP) and the COA paper (Figs. 2–10: n, m and s, (ε,δ)-DP):
//! one definition per figure over a shared runner.
//!
//! For each grid value the workload is generated (seeded), every
//! mechanism's strategy is optimized (or built) for it, and the error is
//! given twice: in closed form from the strategy (`2 l1_obj / ε²` for
//! Laplace noise, `c² l2_obj` for Gaussian noise with the COA paper's
//! `c = √(2 ln(2/δ))/ε`) and measured by releasing the workload's answers
//! over the dataset histogram (merged to n) with fresh noise. **Error** is
//! the papers' "average squared error": the squared L2 distance between
//! the exact and the noisy answer vectors, summed over the m queries and
//! averaged over the releases (not divided by m).
//!
//! Mechanisms: LM / GM is noise on the data (strategy I; the LRM paper's
//! LM and the COA paper's GM both grow with n in their figures, which
//! noise on the answers would not); WM the Haar wavelet, HM the binary
//! hierarchy; ESM (AMM), AM, LRM and COA the optimizers of `dp_opt`. LRM
//! optimizes its ε-DP program in both papers (the COA paper runs the LRM
//! authors' code); under (ε,δ)-DP its strategy L is released with Gaussian
//! noise calibrated to Δ₂(L). ESM and LRM run with a wall-clock budget at
//! the default scale (reported as non-convergence when it binds).

use dp_core::calibration::GaussianCalibration;
use dp_core::{MatrixMechanism, NoiseSource, PrivacyBudget, Result};
use dp_linalg::Mat;
use dp_opt::{PrivacyModel, Problem, StrategyOptimizer};
use dp_workloads::generators::{DiscreteEntries, wdiscrete, wmarginal, wrange, wrelated};
use dp_workloads::workload::ExplicitWorkload;

use super::common::{gaussian_multiplier, histogram, measure_total};
use crate::stats::MeanCi;
use crate::{Experiment, ExperimentResult, Plot, Point, Progress, RunConfig, Series};

/// Which paper's setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paper {
    /// LRM (VLDB 2012): ε-DP, ε = 0.1, Laplace noise.
    Lrm,
    /// COA (KDD 2016): (ε,δ)-DP, ε = 0.1, δ = 1e-4, Gaussian noise.
    Coa,
}

/// The workload family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// WDiscrete (±1 entries, +1 with probability 0.02).
    Discrete,
    /// WMarginal (two-way marginals, n = 2^d).
    Marginal,
    /// WRange (uniform ranges).
    Range,
    /// WRelated (`W = C A`, rank s).
    Related,
}

impl Family {
    /// An m×n instance (s: the rank of WRelated), seeded.
    pub fn generate(self, m: usize, n: usize, s: usize, seed: u64) -> Result<ExplicitWorkload> {
        match self {
            Self::Discrete => wdiscrete(m, n, DiscreteEntries::LRM, seed),
            Self::Marginal => wmarginal(m, n, seed),
            Self::Range => wrange(m, n, seed),
            Self::Related => wrelated(m, n, s, seed),
        }
    }

    /// The paper's name.
    pub fn label(self) -> &'static str {
        match self {
            Self::Discrete => "WDiscrete",
            Self::Marginal => "WMarginal",
            Self::Range => "WRange",
            Self::Related => "WRelated",
        }
    }
}

/// The varied parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vary {
    /// Domain size n.
    N,
    /// Number of queries m.
    M,
    /// Rank s of WRelated.
    S,
}

/// One figure.
pub struct Sweep {
    /// Command-line name.
    pub name: &'static str,
    /// What it reproduces.
    pub reproduces: &'static str,
    /// Paper (privacy setting and mechanisms).
    pub paper: Paper,
    /// Workload family.
    pub family: Family,
    /// Varied parameter.
    pub vary: Vary,
    /// The paper's finding for this figure, quoted or summarized.
    pub claim: &'static str,
}

pub(super) const EPSILON: f64 = 0.1;
pub(super) const DELTA: f64 = 1e-4;
const DATASET: &str = "SEARCHLOGS";

struct Sizes {
    grid: Vec<usize>,
    m: usize,
    n: usize,
}

/// WRelated's default rank, `s = 0.2·min(m, n)` (LRM paper, Table 1).
pub(super) fn related_rank(m: usize, n: usize) -> usize {
    ((0.2 * m.min(n) as f64).round() as usize).max(1)
}

impl Sweep {
    fn sizes(&self, cfg: &RunConfig) -> Sizes {
        // The papers' defaults: LRM m = n = 512 (Table 1), s = 0.2·min(m,n);
        // COA m = 1024 when n varies, n = 512 when m varies.
        let (paper_m, paper_n) = match self.paper {
            Paper::Lrm => (512, 512),
            Paper::Coa => (1024, 512),
        };
        let (grid, m, n) = match (self.vary, cfg.smoke, cfg.full) {
            (Vary::N, true, _) => (vec![16, 32], 32, 0),
            (Vary::M, true, _) => (vec![8, 16], 0, 32),
            (Vary::S, true, _) => (vec![4, 8], 32, 32),
            (Vary::N, false, false) => (vec![64, 128, 256], 256, 0),
            (Vary::N, false, true) => (vec![64, 128, 256, 512, 1024, 2048], paper_m, 0),
            (Vary::M, false, false) => (vec![64, 128, 256, 512], 0, 128),
            (Vary::M, false, true) => (vec![128, 256, 512, 1024, 2048, 4096], 0, paper_n),
            (Vary::S, false, false) => (vec![8, 16, 32, 64], 128, 128),
            (Vary::S, false, true) => (vec![16, 32, 64, 128, 256, 512], paper_m, paper_n),
        };
        Sizes { grid, m, n }
    }

    fn mechanisms(&self) -> Vec<&'static str> {
        match self.paper {
            Paper::Lrm => vec!["LM", "WM", "HM", "ESM", "LRM"],
            Paper::Coa => vec!["GM", "WM", "HM", "ESM", "AM", "LRM", "COA"],
        }
    }

    fn workload(&self, m: usize, n: usize, s: usize, seed: u64) -> Result<ExplicitWorkload> {
        self.family.generate(m, n, s, seed)
    }
}

/// The strategy of `mechanism` for `problem` (and whether its optimizer
/// converged, and its seconds, WᵀW being formed once by the caller).
pub(super) fn strategy(
    mechanism: &str,
    problem: &Problem,
    budget_seconds: Option<f64>,
) -> Result<(Mat<f64>, bool, f64)> {
    let start = std::time::Instant::now();
    let out = match mechanism {
        "LM" | "GM" => dp_opt::classic::Identity.optimize(problem, &mut ())?,
        "WM" => dp_opt::classic::Wavelet.optimize(problem, &mut ())?,
        "HM" => dp_opt::classic::Hierarchical::default().optimize(problem, &mut ())?,
        "ESM" => {
            let mut esm = dp_opt::esm::Esm::default();
            esm.options.spg.max_seconds = budget_seconds;
            esm.optimize(problem, &mut ())?
        }
        "AM" => dp_opt::am::Am::default().optimize(problem, &mut ())?,
        "COA" => dp_opt::coa::Coa::default().optimize(problem, &mut ())?,
        _ => {
            // LRM's program is the ε-DP one in both papers.
            let mut lrm = dp_opt::lrm::Lrm::default();
            lrm.options.max_seconds = budget_seconds;
            let pure = Problem::from_gram(problem.gram().to_owned(), PrivacyModel::Pure)?;
            lrm.optimize(&pure, &mut ())?
        }
    };
    Ok((
        out.strategy,
        out.report.converged,
        start.elapsed().as_secs_f64(),
    ))
}

#[derive(Debug, Clone)]
struct Cell {
    closed_form: f64,
    measured: MeanCi,
    seconds: f64,
    converged: bool,
}

impl Experiment for Sweep {
    fn name(&self) -> &'static str {
        self.name
    }

    fn reproduces(&self) -> &'static str {
        self.reproduces
    }

    fn run(&self, cfg: &RunConfig, progress: &mut dyn Progress) -> Result<ExperimentResult> {
        let sizes = self.sizes(cfg);
        let mechanisms = self.mechanisms();
        let reps = cfg.repetitions.unwrap_or(if cfg.full { 20 } else { 5 });
        let (budget, privacy, calibration) = match self.paper {
            Paper::Lrm => (
                PrivacyBudget::pure(EPSILON)?,
                PrivacyModel::Pure,
                GaussianCalibration::Coa,
            ),
            Paper::Coa => (
                PrivacyBudget::approx(EPSILON, DELTA)?,
                PrivacyModel::Approx,
                GaussianCalibration::Coa,
            ),
        };
        // Expected total squared error per unit of the objective: 2/ε² for
        // Laplace noise on l1_obj, c² for Gaussian noise on l2_obj.
        let noise_factor = match self.paper {
            Paper::Lrm => 2.0 / (EPSILON * EPSILON),
            Paper::Coa => gaussian_multiplier(budget, calibration)?.powi(2),
        };
        let time_budget = if cfg.full {
            None
        } else {
            Some(if cfg.smoke { 2.0 } else { 15.0 })
        };
        let mut rng = NoiseSource::seeded(cfg.seed);
        progress.start((sizes.grid.len() * mechanisms.len()) as u64);
        let mut table: Vec<Vec<Cell>> = Vec::new();
        let mut points = Vec::new();
        let mut dataset_used = String::new();
        for &value in &sizes.grid {
            let (m, n) = match self.vary {
                Vary::N => (sizes.m, value),
                Vary::M => (value, sizes.n),
                Vary::S => (sizes.m, sizes.n),
            };
            let s = match self.vary {
                Vary::S => value.min(m.min(n)),
                _ => related_rank(m, n),
            };
            let w = self.workload(m, n, s, cfg.seed ^ value as u64)?;
            let hist = histogram(DATASET, n, cfg, progress)?;
            dataset_used = hist.name.clone();
            let truth = dp_workloads::Workload::answer(&w, &hist.counts)?;
            let problem = Problem::from_workload(w.matrix(), privacy)?;
            let mut row = Vec::new();
            for &mech in &mechanisms {
                let (a, converged, seconds) = strategy(mech, &problem, time_budget)?;
                let mechanism = MatrixMechanism::with_calibration(a.as_ref(), budget, calibration)?;
                let closed_form = noise_factor * problem.objective(a.as_ref())?;
                let measured =
                    measure_total(&mechanism, w.matrix(), &hist.counts, &truth, reps, &mut rng)?;
                points.push(Point {
                    mechanism: mech.into(),
                    workload: dp_workloads::Workload::name(&w),
                    dataset: hist.name.clone(),
                    parameter: match self.vary {
                        Vary::N => "n",
                        Vary::M => "m",
                        Vary::S => "s",
                    }
                    .into(),
                    value: value as f64,
                    epsilon: EPSILON,
                    delta: (self.paper == Paper::Coa).then_some(DELTA),
                    seed: cfg.seed,
                    repetitions: reps,
                    mean_squared_error: Some(measured.mean),
                    ci95_low: Some(measured.low()),
                    ci95_high: Some(measured.high()),
                    expected_squared_error: Some(closed_form),
                    metric: format!(
                        "total squared error over the m = {m} queries (the papers' average squared error); optimizer {}",
                        if converged { "converged" } else { "did not converge (budget or iteration cap)" }
                    ),
                    seconds,
                });
                row.push(Cell {
                    closed_form,
                    measured,
                    seconds,
                    converged,
                });
                progress.step(&format!("{} = {value}: {mech}", self.vary_label()));
            }
            table.push(row);
        }
        Ok(ExperimentResult {
            summary: self.summary(&sizes, &mechanisms, &table, reps, &dataset_used),
            plots: vec![Plot {
                file_stem: "error".into(),
                title: format!(
                    "{}: {} vs {}",
                    self.family.label(),
                    "average squared error",
                    self.vary_label()
                ),
                x_label: self.vary_label().into(),
                y_label: "average squared error (total over queries)".into(),
                log_x: true,
                log_y: true,
                series: mechanisms
                    .iter()
                    .enumerate()
                    .map(|(j, name)| Series {
                        name: (*name).into(),
                        points: sizes
                            .grid
                            .iter()
                            .zip(&table)
                            .map(|(&v, row)| {
                                let c = &row[j];
                                (
                                    v as f64,
                                    c.measured.mean,
                                    Some((
                                        c.measured.low().max(c.measured.mean * 1e-3),
                                        c.measured.high(),
                                    )),
                                )
                            })
                            .collect(),
                        markers_only: false,
                        color: j,
                    })
                    .collect(),
            }],
            points,
        })
    }
}

impl Sweep {
    fn vary_label(&self) -> &'static str {
        match self.vary {
            Vary::N => "domain size n",
            Vary::M => "number of queries m",
            Vary::S => "rank s",
        }
    }

    fn summary(
        &self,
        sizes: &Sizes,
        mechanisms: &[&str],
        table: &[Vec<Cell>],
        reps: usize,
        dataset: &str,
    ) -> String {
        let setting = match self.paper {
            Paper::Lrm => format!("ε-DP, ε = {EPSILON}, Laplace noise (closed form 2·l1_obj/ε²)"),
            Paper::Coa => format!(
                "(ε,δ)-DP, ε = {EPSILON}, δ = {DELTA}, Gaussian noise with c = √(2 ln(2/δ))/ε (closed form c²·l2_obj)"
            ),
        };
        let fixed = match self.vary {
            Vary::N => format!("m = {}", sizes.m),
            Vary::M => format!("n = {}", sizes.n),
            Vary::S => format!("m = {}, n = {}", sizes.m, sizes.n),
        };
        let mut s = format!(
            "{} workload, {fixed}, {setting}; data: {dataset} merged to n. Error is the papers' average squared error: \
             ‖W x̂ − W x‖² summed over the queries, mean over {reps} releases with a 95% CI (each mechanism's closed form beside it). \
             The paper's claim: {}\n\n",
            self.family.label(),
            self.claim
        );
        s += &format!(
            "| {} | mechanism | closed form | measured [95% CI] | ratio to best | optimizer seconds |\n|---|---|---|---|---|---|\n",
            self.vary_label()
        );
        for (row, &value) in table.iter().zip(&sizes.grid) {
            let best = row
                .iter()
                .map(|c| c.closed_form)
                .fold(f64::INFINITY, f64::min);
            for (cell, name) in row.iter().zip(mechanisms) {
                s += &format!(
                    "| {value} | {name}{} | {:.4e} | {:.4e} [{:.3e}, {:.3e}] | {:.2} | {:.2} |\n",
                    if cell.converged {
                        ""
                    } else {
                        " (not converged)"
                    },
                    cell.closed_form,
                    cell.measured.mean,
                    cell.measured.low(),
                    cell.measured.high(),
                    cell.closed_form / best,
                    cell.seconds
                );
            }
        }
        if let Some(last) = table.last() {
            let mut order: Vec<(f64, &str)> = last
                .iter()
                .zip(mechanisms)
                .map(|(c, n)| (c.closed_form, *n))
                .collect();
            order.sort_by(|a, b| a.0.total_cmp(&b.0));
            let best = order[0].0;
            s += &format!(
                "\n**Measured ranking at the largest {} ({}):** {}.\n",
                self.vary_label(),
                sizes.grid.last().copied().unwrap_or(0),
                order
                    .iter()
                    .map(|(v, n)| format!("{n} ({:.2}×)", v / best))
                    .collect::<Vec<_>>()
                    .join(" < ")
            );
        }
        s += &self.differences(sizes, mechanisms, table);
        if sizes.grid.last().copied().unwrap_or(0) < 512 {
            s += "\nThe default scale stops short of the paper's sizes (see `--full`); the ordering, not the absolute level, is what compares.\n";
        }
        s
    }
}

impl Sweep {
    /// Where the measurement departs from the papers' findings, computed
    /// from the table and explained.
    fn differences(&self, sizes: &Sizes, mechanisms: &[&str], table: &[Vec<Cell>]) -> String {
        let col = |name: &str| mechanisms.iter().position(|m| *m == name);
        let mut out = String::new();
        if let (Some(lrm), Some(base)) = (col("LRM"), col("LM").or(col("GM"))) {
            let fell_back: Vec<String> = table
                .iter()
                .zip(&sizes.grid)
                .filter(|(row, _)| {
                    (row[lrm].closed_form - row[base].closed_form).abs()
                        <= 1e-9 * row[base].closed_form
                })
                .map(|(_, v)| v.to_string())
                .collect();
            if !fell_back.is_empty() {
                out += &format!(
                    "
**Differs from the paper: LRM equals {} at {} = {}.** dpmm's LRM returns the identity strategy whenever its own \
                     decomposition W ≈ BL ends with a larger l1_obj (or fails the authors' ‖B‖_F² > ‖W‖_F² test): here it did, so it is \
                     never worse than noise on the data but not the low error the paper reports. On WRelated this is the workload, not \
                     the solver: a rank-s strategy L = V_sᵀ/κ (V_s the top right singular vectors, κ their largest column L1 norm, \
                     about s·(2/(πn))^½ for Gaussian W) costs κ²‖W‖_F², above the identity's ‖W‖_F² unless n ≳ πs²/2; with \
                     s = 0.2·min(m, n) and n ≤ 256 that never holds, and neither LRM nor p-Identity finds a better ε-DP strategy. The \
                     paper's two orders of magnitude come at n = 8192, where s = 0.2·min(m, n) stops growing once n > m and κ < 1.\n",
                    mechanisms[base],
                    self.vary_label(),
                    fell_back.join(", ")
                );
            }
        }
        if self.family == Family::Marginal
            && let (Some(esm), Some(am), Some(coa)) = (col("ESM"), col("AM"), col("COA"))
        {
            let worst = table
                .iter()
                .map(|row| {
                    (row[esm].closed_form / row[coa].closed_form)
                        .max(row[am].closed_form / row[coa].closed_form)
                })
                .fold(0.0, f64::max);
            if worst < 1.2 {
                out += &format!(
                    "
**Differs from the paper: ESM and AM are not unstable on WMarginal here** (at most {worst:.2}× COA's error over the grid). \
                     The paper attributes ESM's instability to inverting a nearly low-rank solution and AM's to its reduced subspace; dpmm's ESM \
                     starts at the SVD-bound Gram with smoothing continuation and a floor on the eigenvalues, and its AM is solved to its own \
                     optimum by a barrier method with a certificate, which removes both sources.\n"
                );
            }
        }
        out
    }
}

/// Every vary-n/m/s figure of both papers.
pub fn all() -> Vec<Sweep> {
    use Family::*;
    use Paper::*;
    use Vary::*;
    vec![
        Sweep {
            name: "lrm-fig4",
            reproduces: "LRM paper, Figure 4: vary n on WDiscrete (ε = 0.1)",
            paper: Lrm,
            family: Discrete,
            vary: N,
            claim: "LRM has the lowest error, far below LM, WM and HM, whose error grows with n.",
        },
        Sweep {
            name: "lrm-fig5",
            reproduces: "LRM paper, Figure 5: vary n on WRange (ε = 0.1)",
            paper: Lrm,
            family: Range,
            vary: N,
            claim: "LRM is best or close to WM/HM, which are designed for ranges; LM grows fastest with n.",
        },
        Sweep {
            name: "lrm-fig6",
            reproduces: "LRM paper, Figure 6: vary n on WRelated (ε = 0.1)",
            paper: Lrm,
            family: Related,
            vary: N,
            claim: "on low-rank workloads LRM is best by a wide margin (an order of magnitude below LM).",
        },
        Sweep {
            name: "lrm-fig7",
            reproduces: "LRM paper, Figure 7: vary m on WRange (ε = 0.1)",
            paper: Lrm,
            family: Range,
            vary: M,
            claim: "LRM outperforms the other mechanisms when m is small relative to n; WM/HM catch up as m grows.",
        },
        Sweep {
            name: "lrm-fig8",
            reproduces: "LRM paper, Figure 8: vary m on WRelated (ε = 0.1)",
            paper: Lrm,
            family: Related,
            vary: M,
            claim: "LRM stays best on WRelated for every m.",
        },
        Sweep {
            name: "lrm-fig9",
            reproduces: "LRM paper, Figure 9: vary the rank s of WRelated (ε = 0.1)",
            paper: Lrm,
            family: Related,
            vary: S,
            claim: "LRM's advantage is largest when s is small and shrinks as the workload becomes full-rank.",
        },
        Sweep {
            name: "coa-fig2",
            reproduces: "COA paper, Figure 2: vary n on WDiscrete (m = 1024)",
            paper: Coa,
            family: Discrete,
            vary: N,
            claim: "COA and LRM achieve the best performance, over two orders of magnitude below GM at large n.",
        },
        Sweep {
            name: "coa-fig3",
            reproduces: "COA paper, Figure 3: vary n on WMarginal (m = 1024)",
            paper: Coa,
            family: Marginal,
            vary: N,
            claim: "COA and LRM are best; ESM and AM are unstable on WMarginal.",
        },
        Sweep {
            name: "coa-fig4",
            reproduces: "COA paper, Figure 4: vary n on WRange (m = 1024)",
            paper: Coa,
            family: Range,
            vary: N,
            claim: "COA and LRM are best; WM and HM are good on range queries.",
        },
        Sweep {
            name: "coa-fig5",
            reproduces: "COA paper, Figure 5: vary n on WRelated (m = 1024)",
            paper: Coa,
            family: Related,
            vary: N,
            claim: "COA and LRM are far below GM on low-rank workloads, especially for large n.",
        },
        Sweep {
            name: "coa-fig6",
            reproduces: "COA paper, Figure 6: vary m on WDiscrete (n = 512)",
            paper: Coa,
            family: Discrete,
            vary: M,
            claim: "COA is best or comparable to LRM for every m.",
        },
        Sweep {
            name: "coa-fig7",
            reproduces: "COA paper, Figure 7: vary m on WMarginal (n = 512)",
            paper: Coa,
            family: Marginal,
            vary: M,
            claim: "COA is best; ESM and AM are unstable on WMarginal.",
        },
        Sweep {
            name: "coa-fig8",
            reproduces: "COA paper, Figure 8: vary m on WRange (n = 512)",
            paper: Coa,
            family: Range,
            vary: M,
            claim: "COA is best; WM and HM are competitive on ranges.",
        },
        Sweep {
            name: "coa-fig9",
            reproduces: "COA paper, Figure 9: vary m on WRelated (n = 512)",
            paper: Coa,
            family: Related,
            vary: M,
            claim: "COA and LRM are far below GM on WRelated.",
        },
        Sweep {
            name: "coa-fig10",
            reproduces: "COA paper, Figure 10: vary the rank s of WRelated",
            paper: Coa,
            family: Related,
            vary: S,
            claim: "COA's advantage over GM is largest for small s.",
        },
    ]
}
