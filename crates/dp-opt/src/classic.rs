//! The closed-form strategies behind the optimizer trait, so they can be
//! compared with the iterative optimizers on equal terms: I_n, H_n, Y_n
//! and the singular value bound strategy (matrix mechanism paper §6 and
//! Theorem 5.25).
//!
//! This module only wraps: the constructions themselves live in
//! [`dp_workloads::strategies`], which needs no optimizer; each wrapper
//! builds its strategy there and reports its objective for the problem.

use std::time::Instant;

use dp_core::Result;
use dp_linalg::Mat;
use dp_workloads::strategies;

use crate::registry::{Descriptor, Param};
use crate::{Draft, Observer, Optimized, Problem, StrategyOptimizer, Termination};

fn closed_form(problem: &Problem, start: Instant, strategy: Mat<f64>) -> Result<Optimized> {
    Draft::new(strategy, Termination::ClosedForm).finish(problem, start)
}

/// The identity strategy I_n (noise on the data).
#[derive(Debug, Clone, Copy, Default)]
pub struct Identity;

impl StrategyOptimizer for Identity {
    fn name(&self) -> &'static str {
        "identity"
    }
    fn optimize(&self, problem: &Problem, _observer: &mut dyn Observer) -> Result<Optimized> {
        let start = Instant::now();
        closed_form(problem, start, strategies::identity(problem.domain_size())?)
    }
}

/// The hierarchical strategy H_n.
#[derive(Debug, Clone, Copy)]
pub struct Hierarchical {
    /// Branching factor (2 in the papers).
    pub branching: usize,
}

impl Default for Hierarchical {
    fn default() -> Self {
        Self { branching: 2 }
    }
}

impl StrategyOptimizer for Hierarchical {
    fn name(&self) -> &'static str {
        "hierarchical"
    }
    fn optimize(&self, problem: &Problem, _observer: &mut dyn Observer) -> Result<Optimized> {
        let start = Instant::now();
        closed_form(
            problem,
            start,
            strategies::hierarchical(problem.domain_size(), self.branching)?,
        )
    }
}

/// The Haar wavelet strategy Y_n.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wavelet;

impl StrategyOptimizer for Wavelet {
    fn name(&self) -> &'static str {
        "wavelet"
    }
    fn optimize(&self, problem: &Problem, _observer: &mut dyn Observer) -> Result<Optimized> {
        let start = Instant::now();
        closed_form(problem, start, strategies::wavelet(problem.domain_size())?)
    }
}

/// The singular value bound strategy `diag(√σ) Pᵀ` (Theorem 5.25).
#[derive(Debug, Clone, Copy, Default)]
pub struct SvdBound;

impl StrategyOptimizer for SvdBound {
    fn name(&self) -> &'static str {
        "svdb"
    }
    fn optimize(&self, problem: &Problem, _observer: &mut dyn Observer) -> Result<Optimized> {
        let start = Instant::now();
        closed_form(problem, start, strategies::svd_bound(problem.gram())?)
    }
}

/// [`Identity`] in the registry.
pub const IDENTITY: Descriptor = Descriptor::new(
    "identity",
    &["LM", "GM"],
    "identity strategy I_n: noise on every cell (closed form)",
    |_| Box::new(Identity),
);

/// [`Hierarchical`] in the registry (its branching factor is a parameter).
pub const HIERARCHICAL: Descriptor = Descriptor::new(
    "hierarchical",
    &["HM"],
    "hierarchical strategy H_n: one query per node of a b-ary tree (closed form)",
    |p| {
        Box::new(Hierarchical {
            branching: p.branching.unwrap_or(Hierarchical::default().branching),
        })
    },
)
.with_params(&[Param::Branching]);

/// [`Wavelet`] in the registry.
pub const WAVELET: Descriptor = Descriptor::new(
    "wavelet",
    &["WM"],
    "Haar wavelet strategy Y_n (closed form)",
    |_| Box::new(Wavelet),
);

/// [`SvdBound`] in the registry (a closed form on the Gram's numerically
/// nonzero spectrum, left unrepaired).
pub const SVDB: Descriptor = Descriptor::new(
    "svdb",
    &["SVDB"],
    "singular value bound strategy diag(sqrt σ) Pᵀ of WᵀW (closed form)",
    |_| Box::new(SvdBound),
);
