//! The experiment registry.

mod coa_convergence;
mod common;
mod hdmm;
mod hdmm_peers;
mod lrm_params;
mod mechanisms;
mod mm_range_error;
mod projection_small_db;
mod reconstruction;
mod runner;
mod streams;
mod sweep;
mod timing;

use crate::Experiment;

/// Every experiment, in listing order.
pub fn all() -> Vec<Box<dyn Experiment>> {
    let mut out: Vec<Box<dyn Experiment>> = vec![
        Box::new(mm_range_error::EXPERIMENT),
        Box::new(projection_small_db::EXPERIMENT),
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
    out.push(Box::new(coa_convergence::EXPERIMENT));
    out.push(Box::new(hdmm::SCALABILITY));
    out.push(Box::new(hdmm_peers::CENSUS));
    out.push(Box::new(hdmm_peers::PEERS));
    out.push(Box::new(hdmm_peers::CENSUS_RANDOM));
    out.push(Box::new(reconstruction::Scaling));
    out.push(Box::new(streams::Streams));
    out
}
