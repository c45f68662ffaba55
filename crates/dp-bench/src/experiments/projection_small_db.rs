//! Nikolov's projection mechanism against the Gaussian mechanism and the
//! COA strategy as the database size N grows (issue 6): WRange (m = 1024
//! range queries over n = 1024 cells) over SEARCHLOGS subsampled to N
//! records, ε = 1, δ = 1e-6, every mechanism calibrated with the paper's
//! `c = (0.5√ε + √(2 ln 1/δ))/ε` (Theorem 2.2).
//!
//! - GM: `W x + N(0, c² Δ₂(W)² I)`, the generalized Gaussian mechanism with
//!   `Σ = Δ₂² I`.
//! - COA: the Gaussian matrix mechanism on COA's strategy A (`Δ₂(A) = 1`),
//!   answers `W A⁺(A x + N(0, c² I))`.
//! - Projection: Algorithm 1 with the optimal covariance of program
//!   (4)–(6) at `k = min(⌊εN⌋, m)`, the projection computed to a relative
//!   Frank–Wolfe gap of 1e-6.
//!
//! The projection mechanism's error splits (Lemma 3.0.2's proof) into the
//! kept part `E‖Π(ỹ − y)‖² = c² ‖Σ‖_(k)` (closed form, checked against
//! the measurement) and the projected part, at most
//! `4 E‖(I − Π)w‖_{L°} ≤ 4 N c σ_{k+1}(Σ) √(2 ln 2n)` (Lemma 3.0.1 with a
//! union bound over the 2n vertices: each `⟨(I − Π)w, w_e⟩` is Gaussian
//! with variance at most `c² σ_{k+1}²` because `w_eᵀΣ⁻¹w_e ≤ 1`).

use dp_core::calibration::GaussianCalibration;
use dp_core::{MatrixMechanism, PrivacyBudget, Result};
use dp_linalg::{Mat, MatRef, SymmetricEigen};
use dp_opt::projection::{
    GeneralizedGaussian, KyFanCovariance, KyFanOptions, ProjectionMechanism, optimal_covariance,
};
use dp_opt::{PrivacyModel, Problem, StrategyOptimizer};
use dp_workloads::generators::wrange;

use super::common::{histogram, subsample};
use crate::stats::MeanCi;
use crate::{About, Experiment, ExperimentResult, Panel, Plot, Point, Progress, RunConfig, Series};

/// `projection-small-db`.
pub struct ProjectionSmallDb;

/// The optimal covariance at one k, with σ_(k+1) and its solve time.
struct Solved {
    k: usize,
    cov: KyFanCovariance,
    next_eig: f64,
    seconds: f64,
}

const EPSILON: f64 = 1.0;
const DELTA: f64 = 1e-6;
const DATASET: &str = "SEARCHLOGS";
const CALIBRATION: GaussianCalibration = GaussianCalibration::Projection;
const PROJECTION_TOLERANCE: f64 = 1e-6;

/// One N: the three mechanisms' per-query MSE, the projection's parts and
/// the Lemma 3.0.2 quantities.
#[derive(Debug, Clone)]
struct Row {
    records: f64,
    k: usize,
    gm: MeanCi,
    coa: MeanCi,
    projection: MeanCi,
    kept: MeanCi,
    projected: MeanCi,
    /// `c² ‖Σ‖_(k) / m`.
    kept_closed_form: f64,
    /// `4 N c σ_{k+1} √(2 ln 2n) / m`.
    projected_bound: f64,
    /// Certified relative gap of the covariance.
    gap: f64,
    covariance_seconds: f64,
}

fn squared_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum()
}

fn mat_vec(a: MatRef<'_, f64>, x: &[f64]) -> Vec<f64> {
    (0..a.nrows())
        .map(|i| (0..a.ncols()).map(|j| a[(i, j)] * x[j]).sum())
        .collect()
}

const ABOUT: About = About {
    name: "projection-small-db",
    reproduces: "Nikolov, projection mechanism (Algorithm 1, Lemma 3.0.2): error against database size N on WRange 1024x1024 over SEARCHLOGS, vs GM and COA",
};

impl Experiment for ProjectionSmallDb {
    fn about(&self) -> About {
        ABOUT
    }

    fn run(&self, cfg: &RunConfig, progress: &mut dyn Progress) -> Result<ExperimentResult> {
        let (m, n) = if cfg.smoke { (128, 128) } else { (1024, 1024) };
        let grid: Vec<f64> = cfg.by_scale(
            vec![10.0, 100.0],
            vec![10.0, 30.0, 100.0, 300.0, 1000.0, 10000.0],
            vec![
                10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 3000.0, 10000.0,
            ],
        );
        let reps = cfg.repetitions.unwrap_or(cfg.by_scale(5, 100, 200));
        let budget = PrivacyBudget::approx(EPSILON, DELTA)?;
        let mut rng = dp_core::experiments::SeededSession::unlimited(cfg.seed);
        // Subsampling the database is not a privacy mechanism: a plain seeded generator.
        let mut sampler = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(cfg.seed);
        let workload = wrange(m, n, cfg.seed)?;
        let w = workload.matrix();
        let workload_name = dp_workloads::Workload::name(&workload);
        let hist = histogram(DATASET, n, cfg, progress)?;
        let total = hist.counts.iter().sum::<f64>();
        let mut records: Vec<f64> = grid.into_iter().filter(|&r| r < total).collect();
        records.push(total);
        progress.start(records.len() as u64 + 1);

        // GM: Σ = Δ₂² I.
        let delta2_sq = (0..n)
            .map(|e| w.col(e).squared_norm_l2())
            .fold(0.0, f64::max);
        let gm_cov = Mat::<f64>::identity(m, m) * dp_linalg::Scale(delta2_sq);
        let gm = GeneralizedGaussian::new(w, gm_cov.as_ref(), budget, CALIBRATION)?;
        let c = gm.multiplier();
        // COA.
        let start = std::time::Instant::now();
        let problem = Problem::from_workload(w, PrivacyModel::Approx)?;
        let coa = dp_opt::coa::Coa::default().optimize(&problem, &mut ())?;
        let coa_l2 = problem.objective(coa.strategy.as_ref())?;
        let coa_mech =
            MatrixMechanism::with_calibration(coa.strategy.as_ref(), budget, CALIBRATION)?;
        let coa_seconds = start.elapsed().as_secs_f64();
        progress.step(&format!(
            "COA strategy: l2_obj {coa_l2:.6e}, gap {:.1e}, {coa_seconds:.1} s",
            coa.report
                .certificate
                .as_ref()
                .map_or(f64::NAN, |c| c.relative_gap)
        ));

        let mut rows: Vec<Row> = Vec::new();
        let mut points = Vec::new();
        // One covariance per k (every N ≥ m shares k = m); the mechanism
        // is built per N, since its hull N (I − Π) K_W scales with N.
        let mut solved: Vec<Solved> = Vec::new();
        let mut rank = 0;
        for &records_n in &records {
            let x = subsample(&hist, records_n as usize, &mut sampler)?;
            let data = dp_core::PrivateHistogram::from_f64_counts(&x)?;
            let truth = mat_vec(w, &x);
            let k = ((EPSILON * records_n).floor() as usize).min(m);
            if !solved.iter().any(|s| s.k == k) {
                let start = std::time::Instant::now();
                let cov = optimal_covariance(w, k, &KyFanOptions::default())?;
                rank = cov.rank;
                let eig = SymmetricEigen::values_only(cov.covariance.as_ref())?;
                solved.push(Solved {
                    k,
                    next_eig: if k < m { eig[m - 1 - k] } else { 0.0 },
                    seconds: start.elapsed().as_secs_f64(),
                    cov,
                });
            }
            let Some(sol) = solved.iter().find(|s| s.k == k) else {
                continue;
            };
            let (next_eig, gap, cov_seconds) = (sol.next_eig, sol.cov.relative_gap, sol.seconds);
            let mech = ProjectionMechanism::new(
                w,
                sol.cov.covariance.as_ref(),
                budget,
                CALIBRATION,
                records_n,
                PROJECTION_TOLERANCE,
            )?;
            let start = std::time::Instant::now();
            let (mut s_gm, mut s_coa, mut s_proj, mut s_kept, mut s_rest) =
                (vec![], vec![], vec![], vec![], vec![]);
            let mut fw_iterations = 0usize;
            let mut unconverged = 0usize;
            let kept_truth = mat_vec(mech.projector(), &truth);
            for _ in 0..reps {
                let y = gm.release(&data, &mut rng)?;
                s_gm.push(squared_distance(&y, &truth) / m as f64);
                let y = coa_mech.release(w, &data, &mut rng)?;
                s_coa.push(squared_distance(&y, &truth) / m as f64);
                let out = mech.release(&data, &mut rng)?;
                fw_iterations += out.projection.iterations;
                unconverged += usize::from(!out.projection.converged);
                s_proj.push(squared_distance(&out.answers, &truth) / m as f64);
                let kept = mat_vec(mech.projector(), &out.gaussian);
                s_kept.push(squared_distance(&kept, &kept_truth) / m as f64);
                let rest_truth: Vec<f64> =
                    truth.iter().zip(&kept_truth).map(|(a, b)| a - b).collect();
                s_rest.push(squared_distance(&out.projection.point, &rest_truth) / m as f64);
            }
            let seconds = start.elapsed().as_secs_f64();
            let row = Row {
                records: records_n,
                k,
                gm: MeanCi::of(&s_gm),
                coa: MeanCi::of(&s_coa),
                projection: MeanCi::of(&s_proj),
                kept: MeanCi::of(&s_kept),
                projected: MeanCi::of(&s_rest),
                kept_closed_form: mech.expected_kept_error() / m as f64,
                projected_bound: if k < m {
                    4.0 * records_n * c * next_eig * (2.0 * (2.0 * n as f64).ln()).sqrt() / m as f64
                } else {
                    0.0
                },
                gap,
                covariance_seconds: cov_seconds,
            };
            let base = |mechanism: &str, ci: MeanCi, expected: Option<f64>, metric: String| Point {
                mechanism: mechanism.into(),
                workload: workload_name.clone(),
                dataset: format!("{} subsampled to N", hist.name),
                parameter: "N".into(),
                value: records_n,
                epsilon: EPSILON,
                delta: Some(DELTA),
                seed: cfg.seed,
                repetitions: reps,
                mean_squared_error: Some(ci.mean),
                ci95_low: Some(ci.low()),
                ci95_high: Some(ci.high()),
                expected_squared_error: expected,
                metric,
                seconds,
            };
            let per_query = "average squared error per query (total / m)".to_string();
            points.push(base(
                "GM",
                row.gm,
                Some(c * c * delta2_sq),
                per_query.clone(),
            ));
            points.push(base(
                "COA",
                row.coa,
                Some(c * c * coa_l2 / m as f64),
                per_query.clone(),
            ));
            points.push(base(
                "Projection",
                row.projection,
                None,
                format!("{per_query}; k = {k}, Frank-Wolfe {} steps per release on average, {unconverged} releases above the gap tolerance", fw_iterations / reps.max(1)),
            ));
            points.push(base(
                "Projection: kept part",
                row.kept,
                Some(row.kept_closed_form),
                "‖Π(ỹ − y)‖² / m; closed form c²‖Σ‖_(k)/m".into(),
            ));
            points.push(base(
                "Projection: projected part",
                row.projected,
                None,
                format!(
                    "‖ȳ − (I − Π)y‖² / m; Lemma 3.0.1 bound 4Ncσ_(k+1)√(2 ln 2n)/m = {:.4e}",
                    row.projected_bound
                ),
            ));
            progress.step(&format!(
                "N = {records_n}: k = {k}, projection {:.3e}, COA {:.3e}, GM {:.3e}",
                row.projection.mean, row.coa.mean, row.gm.mean
            ));
            rows.push(row);
        }
        Ok(ExperimentResult {
            summary: summary(&rows, c, coa_l2, delta2_sq, (m, n, rank), reps, &hist.name),
            plots: plots(&rows),
            points,
        })
    }
}

fn apart_below(a: &MeanCi, b: &MeanCi) -> bool {
    a.high() < b.low()
}

fn summary(
    rows: &[Row],
    c: f64,
    coa_l2: f64,
    delta2_sq: f64,
    (m, n, rank): (usize, usize, usize),
    reps: usize,
    dataset: &str,
) -> String {
    let mut s = format!(
        "WRange ({m} random ranges over n = {n} cells), {dataset} subsampled without replacement to N records \
         (N is the public database-size bound the mechanism is given), ε = {EPSILON}, δ = {DELTA}, \
         c = (0.5√ε + √(2 ln 1/δ))/ε = {c:.4} for all three mechanisms. Error: squared error summed over the m queries, \
         divided by m (average squared error per query), mean over {reps} releases with a 95% confidence interval. \
         GM's and COA's closed forms are c²Δ₂(W)² = {:.4e} and c²·l2_obj(COA)/m = {:.4e} (COA's certified optimum {coa_l2:.6e}).\n\n",
        c * c * delta2_sq,
        c * c * coa_l2 / m as f64,
    );
    s += "| N | k = ⌊εN⌋ | GM | COA | Projection | kept part (closed form) | projected part (Lemma 3.0.1 bound) | covariance gap | projection below both, CIs apart |\n|---|---|---|---|---|---|---|---|---|\n";
    for r in rows {
        let f = |ci: &MeanCi| format!("{:.4e} [{:.3e}, {:.3e}]", ci.mean, ci.low(), ci.high());
        s += &format!(
            "| {} | {} | {} | {} | {} | {:.4e} ({:.4e}) | {:.4e} ({:.3e}) | {:.1e} ({:.0} s) | {} |\n",
            r.records,
            r.k,
            f(&r.gm),
            f(&r.coa),
            f(&r.projection),
            r.kept.mean,
            r.kept_closed_form,
            r.projected.mean,
            r.projected_bound,
            r.gap,
            r.covariance_seconds,
            if apart_below(&r.projection, &r.gm) && apart_below(&r.projection, &r.coa) {
                "yes"
            } else {
                "no"
            }
        );
    }
    let small: Vec<&Row> = rows.iter().filter(|r| r.records <= 100.0).collect();
    let wins = small
        .iter()
        .filter(|r| apart_below(&r.projection, &r.gm) && apart_below(&r.projection, &r.coa))
        .count();
    s += &format!(
        "\n**Claim (issue 6 bar): for N ≤ 100 the projection mechanism's error is below GM's and COA's with the confidence intervals apart.** \
         Measured: {wins} of {} such N.\n\n",
        small.len()
    );
    let crossover = rows
        .iter()
        .find(|r| !apart_below(&r.projection, &r.coa))
        .map(|r| format!("N = {} (k = {})", r.records, r.k))
        .unwrap_or_else(|| "beyond the grid".into());
    s += &format!(
        "**Crossover.** The projection mechanism stops being clearly better than COA at {crossover}. \
         rank(W) = {rank} here, so from k = {rank} on the Ky Fan program is COA's program and the kept part is COA's error exactly. \
         Lemma 3.0.2 explains the shape: its error is the kept part c²‖Σ‖_(k)/m, which grows with k = ⌊εN⌋ towards COA's c²·tr Σ/m \
         (at k ≥ rank W the Ky Fan program is COA's, and at k = m, Π = I and the mechanism is the Gaussian mechanism with COA's covariance), \
         plus the projected part, bounded by 4Ncσ_(k+1)√(2 ln 2n)/m, which grows linearly in N while σ_(k+1) falls. \
         For small N both are far below COA's trace; as N grows the kept part approaches COA's error and the projection's gain vanishes: \
         the projection mechanism adapts to the database size, the matrix mechanism does not.\n"
    );
    s
}

fn plots(rows: &[Row]) -> Vec<Plot> {
    let series = |name: &str, color: usize, pick: fn(&Row) -> MeanCi| Series {
        name: name.into(),
        points: rows
            .iter()
            .map(|r| {
                let ci = pick(r);
                (
                    r.records,
                    ci.mean,
                    Some((ci.low().max(ci.mean * 1e-3), ci.high())),
                )
            })
            .collect(),
        markers_only: false,
        color,
    };
    let closed = Series {
        name: "Projection kept part, closed form c²‖Σ‖_(k)/m".into(),
        points: rows
            .iter()
            .map(|r| (r.records, r.kept_closed_form, None))
            .collect(),
        markers_only: false,
        color: 3,
    };
    vec![Plot {
        file_stem: "error_vs_database_size".into(),
        title: "WRange, ε = 1, δ = 1e-6: average squared error per query against N".into(),
        x_label: "database size N (records)".into(),
        y_label: "average squared error per query".into(),
        log_x: true,
        log_y: true,
        panels: Panel::only(vec![
            series("GM", 0, |r| r.gm),
            series("COA", 1, |r| r.coa),
            series("Projection", 2, |r| r.projection),
            closed,
        ]),
    }]
}
