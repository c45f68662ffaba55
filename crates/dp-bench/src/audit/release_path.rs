//! The measurement `dpmm release` performs, for the audit: a workload
//! spec planned by [`plan_strategy`] with the default options, its plan's
//! terms as a [`MarginalStrategy`] (quantized by the kernel), measured by
//! `Session::measure_marginals` on the count table of a domain small
//! enough that the release's layout is the full histogram (so every term
//! is summed from it), at the cost `dpmm release` charges (ε, or the zCDP
//! ρ of (ε, δ)). Only the reading of records into counts is left out.

use std::path::Path;

use dp_core::kernel::records::{Contributions, Counting, Records, TableLayout};
use dp_core::{Cost, DpError, Measurement, PrivacyBudget, Result, Session};
use dp_core::{MarginalStrategy, PrivateMarginals};
use dp_opt::PrivacyModel;
use dp_plan::{PlanOptions, plan_strategy};
use dp_workloads::spec::parse_spec;

use super::kernel_path::KernelPath;
use super::likelihood::{Likelihood, dense_measured};

/// Three attributes; their 1-way marginals and one 2-way marginal at
/// half weight: on this domain a strategy of several marginal terms under
/// both privacy models (the full histogram would cost more).
const SPEC: &str = r#"{
  "domain": [{"name": "a", "size": 5}, {"name": "b", "size": 4}, {"name": "c", "size": 6}],
  "queries": [{"marginals": {"k": 1}}, {"marginal": ["a", "c"], "weight": 0.5}]
}"#;

/// The dataset without the record, row-major over the domain.
fn base(cells: usize) -> Vec<u64> {
    (0..cells as u64).map(|i| i * 7 % 11).collect()
}

/// The full table of `shape` as the kernel counts it from records: one
/// record per cell, of multiplicity its count (the neighbour differs by
/// one record), so the audit measures tables the kernel made itself.
fn counted(shape: &[usize], counts: &[u64]) -> Result<PrivateMarginals> {
    let all: Vec<usize> = (0..shape.len()).collect();
    let layout = TableLayout::new(shape.to_vec(), vec![all], 1, 1 << 20)?;
    // Cell `i` row-major, last attribute fastest: its digits in `shape`.
    let mut codes: Vec<Vec<u32>> = vec![Vec::with_capacity(counts.len()); shape.len()];
    for cell in 0..counts.len() {
        let mut rest = cell;
        for (a, &n) in shape.iter().enumerate().rev() {
            codes[a].push((rest % n) as u32);
            rest /= n;
        }
    }
    let counting = Counting::new(
        layout,
        Contributions::default(),
        1 << 20,
        std::env::temp_dir(),
        1,
    )?;
    let mut tally = counting.tally()?;
    tally.add(&Records {
        codes: &codes,
        multiplicity: counts,
        units: None,
        weights: None,
        steps: &[],
    })?;
    counting.finish(vec![tally])?.into_marginals()
}

/// The release path's measurement of one count table.
pub(super) struct MarginalPath {
    strategy: MarginalStrategy,
    method: String,
}

impl KernelPath for MarginalPath {
    type Data = PrivateMarginals;
    fn measure(&self, data: &PrivateMarginals, s: &mut Session, cost: Cost) -> Result<Measurement> {
        s.measure_marginals(&self.strategy, data, cost)
    }
}

impl MarginalPath {
    /// The path planned for `budget`'s privacy model, the privacy loss
    /// of its measurement at the `claimed` cost, and the count tables
    /// with and without the record (placed where the sensitivity is
    /// attained).
    pub(super) fn new(
        budget: PrivacyBudget,
        claimed: Cost,
    ) -> Result<(Self, Likelihood, [PrivateMarginals; 2])> {
        let workload = parse_spec(SPEC, Path::new(".")).map_err(|e| DpError::InvalidParameter {
            name: "audit workload",
            reason: e.to_string(),
        })?;
        let model = PrivacyModel::of(budget);
        let plan = plan_strategy(&workload, model, &PlanOptions::default())?;
        let shape = workload.domain().shape();
        let strategy = MarginalStrategy::new(shape.clone(), &plan.strategy.terms)?;
        let dense = dense_measured(strategy.measured_strategy(), &shape)?;
        let without = base(dense.ncols());
        let loss = Likelihood::new(dense.as_ref(), &without, claimed)?;
        let mut with = without.clone();
        with[loss.cell()] += 1;
        let data = [counted(&shape, &with)?, counted(&shape, &without)?];
        let path = Self {
            strategy,
            method: plan.method,
        };
        Ok((path, loss, data))
    }

    /// E.g. `marginals of 5x4x6, opt-m, 4 terms`.
    pub(super) fn describe(&self) -> String {
        let shape: Vec<String> = self
            .strategy
            .shape()
            .iter()
            .map(|s| s.to_string())
            .collect();
        format!(
            "marginals of {}, {}, {} terms",
            shape.join("x"),
            self.method,
            self.strategy.supports().len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dp_core::experiments::SeededSession;

    fn ok<T>(r: Result<T>) -> T {
        r.unwrap_or_else(|e| panic!("{e}"))
    }

    /// The audit is sharp only if the record's cell attains the
    /// sensitivity the kernel calibrates to: the largest column norm of
    /// the densified strategy (the likelihood's scale) must equal the
    /// kernel's stated union-bound sensitivity. And the strategy must
    /// have more than one term, so that the union bound and the summation of
    /// tables are exercised.
    #[test]
    fn the_record_attains_the_kernels_sensitivity() {
        for budget in [
            ok(PrivacyBudget::pure(1.0)),
            ok(PrivacyBudget::approx(1.0, 1e-5)),
        ] {
            let cost = ok(dp_core::mechanism::cost_for(
                budget,
                dp_core::calibration::GaussianCalibration::Zcdp,
            ));
            let (path, loss, data) = ok(MarginalPath::new(budget, cost));
            assert!(path.strategy.supports().len() >= 2, "{}", path.describe());
            let mut s = SeededSession::unlimited(1);
            let m = ok(path.measure(&data[0], &mut s, cost));
            let shift = loss.shift();
            let attained = match cost {
                Cost::Epsilon(_) => shift.iter().map(|a| a.abs()).sum::<f64>(),
                Cost::Rho(_) => shift.iter().map(|a| a * a).sum::<f64>().sqrt(),
            };
            assert!(
                (attained - m.sensitivity).abs() <= 1e-9 * m.sensitivity,
                "{}: column {attained}, kernel {}",
                path.describe(),
                m.sensitivity
            );
            if let Some(l) = loss.largest_loss() {
                assert!((l - 1.0).abs() < 1e-9, "{l}");
            }
        }
    }

    /// The noiseless answers the likelihood assumes are the kernel's: at
    /// ε = 100 the noise (scale Δ₁/100) is far below the gap between the
    /// record's two neighbours, and the loss of a draw on each side has
    /// the sign of its side.
    #[test]
    fn the_likelihood_knows_the_kernels_answers() {
        let budget = ok(PrivacyBudget::pure(100.0));
        let cost = Cost::Epsilon(100.0);
        let (path, loss, data) = ok(MarginalPath::new(budget, cost));
        let mut s = SeededSession::unlimited(3);
        for _ in 0..50 {
            let with = ok(path.measure(&data[0], &mut s, cost)).values;
            let without = ok(path.measure(&data[1], &mut s, cost)).values;
            assert!(loss.loss(&with) > 0.0 && loss.loss(&without) < 0.0);
        }
    }
}
