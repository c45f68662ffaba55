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

use crate::descriptor::{Descriptor, Param};
use crate::{Draft, Observer, Optimized, Problem, StrategyOptimizer, Termination};

/// The closed-form strategy `build(problem)`, timed from the call.
fn closed_form(
    problem: &Problem,
    build: impl FnOnce(&Problem) -> Result<Mat<f64>>,
) -> Result<Optimized> {
    let start = Instant::now();
    Draft::new(build(problem)?, Termination::ClosedForm).finish(problem, start)
}

/// A parameterless closed-form strategy: the unit struct, its optimizer
/// (which builds the strategy with `$build` through [`closed_form`]) and
/// its registry descriptor `$descriptor`, all from one name.
macro_rules! closed_form_strategy {
    (
        $(#[$doc:meta])* $name:ident, $(#[$ddoc:meta])* $descriptor:ident,
        $label:literal, $papers:expr, $summary:literal, $build:expr $(,)?
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl StrategyOptimizer for $name {
            fn name(&self) -> &'static str {
                $label
            }
            fn optimize(&self, problem: &Problem, _observer: &mut dyn Observer) -> Result<Optimized> {
                closed_form(problem, $build)
            }
        }

        $(#[$ddoc])*
        pub const $descriptor: Descriptor =
            Descriptor::new($label, $papers, $summary, |_| Box::new($name));
    };
}

closed_form_strategy!(
    /// The identity strategy I_n (noise on the data).
    Identity,
    /// [`Identity`] in the registry.
    IDENTITY,
    "identity",
    &["LM", "GM"],
    "identity strategy I_n: noise on every cell (closed form)",
    |p: &Problem| strategies::identity(p.domain_size()),
);

closed_form_strategy!(
    /// The Haar wavelet strategy Y_n.
    Wavelet,
    /// [`Wavelet`] in the registry.
    WAVELET,
    "wavelet",
    &["WM"],
    "Haar wavelet strategy Y_n (closed form)",
    |p: &Problem| strategies::wavelet(p.domain_size()),
);

closed_form_strategy!(
    /// The singular value bound strategy `diag(√σ) Pᵀ` (Theorem 5.25).
    SvdBound,
    /// [`SvdBound`] in the registry: a closed form on W's singular values,
    /// from its QR when the problem holds W's rows (which keeps every
    /// direction W has), else on the Gram's numerically nonzero spectrum.
    SVDB,
    "svdb",
    &["SVDB"],
    "singular value bound strategy diag(sqrt σ) Pᵀ of W (closed form)",
    |p: &Problem| match p.workload_root() {
        Some((root, rows)) => strategies::svd_bound_from_root(root, rows),
        None => strategies::svd_bound(p.gram()),
    },
);

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
        closed_form(problem, |p| {
            strategies::hierarchical(p.domain_size(), self.branching)
        })
    }
}

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
