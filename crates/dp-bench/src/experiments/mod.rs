//! The experiment registry.

mod common;
mod lrm_params;
mod mm_range_error;
mod projection_small_db;
mod sweep;
mod timing;

use crate::Experiment;

/// Every experiment, in listing order.
pub fn all() -> Vec<Box<dyn Experiment>> {
    let mut out: Vec<Box<dyn Experiment>> = vec![
        Box::new(mm_range_error::RangeErrorGrowth),
        Box::new(projection_small_db::ProjectionSmallDb),
    ];
    out.extend(
        sweep::all()
            .into_iter()
            .map(|s| Box::new(s) as Box<dyn Experiment>),
    );
    out.extend(
        lrm_params::all()
            .into_iter()
            .map(|t| Box::new(t) as Box<dyn Experiment>),
    );
    out.extend(
        timing::all()
            .into_iter()
            .map(|t| Box::new(t) as Box<dyn Experiment>),
    );
    out.push(Box::new(Pending {
        name: "coa-fig1",
        reproduces: "COA paper, Figure 1: convergence of COA (objective, optimality measure, test error per iteration)",
    }));
    out
}

/// A figure whose runner is not written yet: listed, never faked.
struct Pending {
    name: &'static str,
    reproduces: &'static str,
}

impl Experiment for Pending {
    fn name(&self) -> &'static str {
        self.name
    }

    fn reproduces(&self) -> &'static str {
        self.reproduces
    }

    fn pending(&self) -> Option<&'static str> {
        Some(
            "its runner is not written yet (the mechanisms exist; `cargo xtask bench` measures the optimizers' times meanwhile)",
        )
    }

    fn run(
        &self,
        _cfg: &crate::RunConfig,
        _progress: &mut dyn crate::Progress,
    ) -> dp_core::Result<crate::ExperimentResult> {
        Err(dp_core::DpError::InvalidParameter {
            name: "experiment",
            reason: format!("{} is pending", self.name),
        })
    }
}
