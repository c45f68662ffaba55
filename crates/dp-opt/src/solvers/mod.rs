//! The solvers the optimizers are built from: the iteration engine
//! ([`engine`]: budgets, one [`Termination`], events), L-BFGS, the
//! spectral projected gradient and projected Newton.

pub mod engine;
pub mod lbfgs;
pub mod projected_newton;
pub mod spg;
mod termination;

pub use termination::Termination;
