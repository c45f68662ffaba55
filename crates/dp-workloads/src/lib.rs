//! Workloads, classic strategies, baseline mechanisms and datasets.
//!
//! * [`workload`]: the [`Workload`] trait — a batch of linear queries that
//!   knows `n`, `m`, its Gram matrix `WᵀW` and how to answer `W x`, with
//!   closed-form implicit workloads (Identity, Total, Prefix, AllRange) and
//!   [`composite`] ones (Kronecker products, unions, k-way marginals).
//! * [`generators`]: the papers' seeded WDiscrete, WRange, WMarginal and
//!   WRelated.
//! * [`strategies`]: I_n, H_n (any branching, any n), Y_n (any n) and the
//!   singular value bound strategy.
//! * [`baselines`]: LM, NOQ, GM, WM, HM.
//! * [`datasets`]: the real histograms, verified against the manifest.
//! * [`npy`]: `.npy` input and output.
//! * [`domain`], [`structured`], [`marginals`]: multi-dimensional domains,
//!   Kronecker/union/marginal workloads kept structured (docs/formats.md).
//!
//! ```
//! use dp_workloads::workload::{AllRange, Workload};
//! use dp_workloads::strategies::hierarchical;
//! use dp_core::evaluate_strategy_gram;
//!
//! // All 524,800 range queries over 1024 cells, never built row by row.
//! let ranges = AllRange::new(1024).unwrap();
//! assert_eq!(ranges.num_queries(), 524_800);
//! let h = hierarchical(1024, 2).unwrap();
//! let eval = evaluate_strategy_gram(ranges.gram().as_ref(), h.as_ref()).unwrap();
//! assert_eq!(eval.sensitivity_l1, 11.0); // log2(1024) + 1
//! println!("l1_obj of H_1024 on all ranges: {:.4e}", eval.l1_obj());
//! ```

pub mod baselines;
pub mod composite;
pub mod datasets;
pub mod domain;
pub mod generators;
pub mod marginals;
pub mod npy;
pub mod spec;
pub mod strategies;
pub mod structured;
pub mod workload;

pub use workload::Workload;
