//! Helpers shared by the experiments: dataset loading with a labelled
//! synthetic fallback, and repeated measurement of a mechanism.

use dp_core::calibration::GaussianCalibration;
use dp_core::{MatrixMechanism, PrivacyBudget, Result};
use dp_linalg::MatRef;
use dp_workloads::Workload;
use dp_workloads::datasets::{self, Histogram};

use crate::stats::MeanCi;
use crate::{Progress, RunConfig};

/// The papers' four datasets, `(file, the paper's name)`: the LRM paper
/// uses the first three, the COA paper all four. HEPTH stands in for the
/// Social Network degree histogram, which is not public.
pub const PAPER_DATASETS: [(&str, &str); 4] = [
    ("SEARCHLOGS", "Search Log"),
    ("NETTRACE", "Net Trace"),
    ("HEPTH", "Social Network (stand-in)"),
    ("ADULTFRANK", "UCI Adult"),
];

/// Which histogram stood for which of the papers' datasets, for a summary:
/// `used[d]` are the names of the histograms loaded for `datasets[d]`
/// (merged, refined, or the labelled synthetic fallback).
pub fn datasets_note(datasets: &[(&str, &str)], used: &[Vec<String>]) -> String {
    let pairs = datasets
        .iter()
        .zip(used)
        .map(|((file, paper_name), names)| format!("{paper_name} = {file} ({})", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ");
    format!(
        "{pairs}. The papers' Social Network degree histogram is not public; HEPTH (degree-like counts of a \
         citation graph, DPBench) stands in for it"
    )
}

/// How the sweeps bring a histogram to domain size n, for the summaries.
pub const DOMAIN_SIZE_NOTE: &str = "Each histogram (4096 cells) is merged to n by summing consecutive cells, as the papers do; \
     where n exceeds the data's resolution (n > 4096), each cell is split evenly into n/4096 cells (totals kept, counts fractional)";

/// The histogram `name` at domain size `n`, merged from the real data; when
/// the data are not found, a clearly labelled synthetic stand-in (a
/// deterministic Zipf-like histogram) so that the run still completes.
pub fn histogram(
    name: &str,
    n: usize,
    cfg: &RunConfig,
    progress: &mut dyn Progress,
) -> Result<Histogram> {
    at_domain_size(load_dataset(name, cfg, progress).as_ref(), n)
}

/// The dataset `name` at its own resolution, or `None` (said once through
/// `progress`) when it is not found: [`at_domain_size`] then gives the
/// labelled synthetic stand-in.
pub fn load_dataset(name: &str, cfg: &RunConfig, progress: &mut dyn Progress) -> Option<Histogram> {
    match datasets::load(name, cfg.datasets.as_deref()) {
        Ok(h) => Some(h),
        Err(e) => {
            progress.note(&format!(
                "{e}\nusing an EMBEDDED SYNTHETIC histogram instead of {name} (labelled SYNTHETIC in the outputs)"
            ));
            None
        }
    }
}

/// `loaded` merged (or refined) to domain size `n`; the synthetic
/// stand-in when the data were not found.
pub fn at_domain_size(loaded: Option<&Histogram>, n: usize) -> Result<Histogram> {
    match loaded {
        Some(h) => h.at_domain_size(n),
        None => Ok(synthetic(n)),
    }
}

/// A deterministic synthetic histogram of 100,000 records with Zipf-like
/// counts over `n` cells, for runs without the real data.
pub fn synthetic(n: usize) -> Histogram {
    let weights: Vec<f64> = (0..n)
        .map(|i| 1.0 / (1.0 + ((i * 7919) % n) as f64).powf(1.1))
        .collect();
    let total: f64 = weights.iter().sum();
    Histogram {
        name: "SYNTHETIC".into(),
        shape: vec![n],
        counts: weights.iter().map(|w| (1e5 * w / total).round()).collect(),
    }
}

/// Mean per-query squared error of `mechanism` answering `workload` from
/// `x̂`, over `repetitions` independent releases.
pub fn measure_per_query(
    mechanism: &MatrixMechanism,
    workload: &dyn Workload,
    x: &[f64],
    repetitions: usize,
    rng: &mut dp_core::Session,
) -> Result<MeanCi> {
    let truth = workload.answer(x)?;
    let data = dp_core::PrivateHistogram::from_f64_counts(x)?;
    let m = truth.len() as f64;
    let mut samples = Vec::with_capacity(repetitions);
    for _ in 0..repetitions {
        let x_hat = mechanism.estimate(&data, rng)?;
        let ans = workload.answer(&x_hat)?;
        samples.push(
            ans.iter()
                .zip(&truth)
                .map(|(a, t)| (a - t).powi(2))
                .sum::<f64>()
                / m,
        );
    }
    Ok(MeanCi::of(&samples))
}

/// `records` records drawn without replacement from the histogram's
/// records (a uniform subsample of the database, as a histogram over the
/// same cells); all of them when `records` is at least the total.
pub fn subsample<R: rand::Rng + ?Sized>(
    hist: &Histogram,
    records: usize,
    rng: &mut R,
) -> Result<Vec<f64>> {
    let counts: Vec<usize> = hist
        .counts
        .iter()
        .map(|&c| {
            if c.is_finite() && c >= 0.0 && c.fract() == 0.0 {
                Ok(c as usize)
            } else {
                Err(dp_core::DpError::InvalidParameter {
                    name: "histogram",
                    reason: format!("subsampling needs non-negative integer counts, got {c}"),
                })
            }
        })
        .collect::<Result<_>>()?;
    let total: usize = counts.iter().sum();
    if records >= total {
        return Ok(hist.counts.clone());
    }
    let mut cumulative = Vec::with_capacity(counts.len());
    let mut acc = 0;
    for c in &counts {
        acc += c;
        cumulative.push(acc);
    }
    let mut out = vec![0.0; counts.len()];
    for record in rand::seq::index::sample(rng, total, records) {
        // The cell holding record number `record` (0-based).
        let cell = cumulative.partition_point(|&end| end <= record);
        out[cell] += 1.0;
    }
    Ok(out)
}

/// The total squared error `‖W x̂ − W x‖²` (the papers' "average squared
/// error", not divided by m) of `repetitions` releases of `workload` by
/// `mechanism` over `x` ([`MatrixMechanism::release_many`]), against the
/// exact answers `truth`.
pub fn measure_total(
    mechanism: &MatrixMechanism,
    workload: MatRef<'_, f64>,
    x: &[f64],
    truth: &[f64],
    repetitions: usize,
    rng: &mut dp_core::Session,
) -> Result<MeanCi> {
    let samples: Vec<f64> = mechanism
        .release_many(
            workload,
            &dp_core::PrivateHistogram::from_f64_counts(x)?,
            repetitions,
            rng,
        )?
        .iter()
        .map(|answers| {
            answers
                .iter()
                .zip(truth)
                .map(|(a, t)| (a - t).powi(2))
                .sum()
        })
        .collect();
    Ok(MeanCi::of(&samples))
}

/// The Gaussian noise multiplier `c(ε,δ)` of `calibration` for an (ε,δ)
/// budget (σ = c·Δ₂); an error for a pure budget.
pub fn gaussian_multiplier(budget: PrivacyBudget, calibration: GaussianCalibration) -> Result<f64> {
    let delta = budget
        .delta()
        .ok_or_else(|| dp_core::DpError::InvalidParameter {
            name: "budget",
            reason: "a Gaussian multiplier needs (ε,δ)-DP".into(),
        })?;
    calibration.multiplier(budget.epsilon(), delta)
}
