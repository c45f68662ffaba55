//! The 1-D strategy optimizers, one file or folder each, every one behind
//! [`crate::StrategyOptimizer`] and listed by [`crate::registry`].

pub mod am;
pub mod best_of;
pub mod classic;
pub mod coa;
pub mod epsilon_default;
pub mod esm;
pub mod lrm;
pub mod pidentity;
