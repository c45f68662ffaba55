//! Continual release by the matrix mechanism: at every step `t` of a
//! stream, the answers to a linear query of the data so far (a running
//! count, a sliding window, a decayed sum), released as the step closes.
//!
//! The workload `W` is lower-triangular (`T × T`) and so must be both
//! factors of the strategy `W = BC`: noise is added to `Cx` as the data
//! arrives and step `t`'s answer may use only what was measured by `t`.
//! [`workload`] holds the workloads (Toeplitz, as coefficient sequences)
//! and their singular value bounds, [`factorization`] the factorizations
//! (certified dense optimum, square root, tree, banded) and their
//! figures, [`participation`] the sensitivity when a person may
//! contribute at several steps.

pub mod blt;
pub mod factorization;
pub mod participation;
pub mod toeplitz;
pub mod workload;

pub use blt::Blt;
pub use factorization::{Factorization, Family, Figures, Objective, factorize};
pub use participation::{Participation, Sensitivity};
pub use workload::{Stream, StreamQuery};
