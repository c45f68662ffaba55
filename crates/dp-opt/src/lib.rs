//! Strategy optimizers for the matrix mechanism.
//!
//! This crate will own one `StrategyOptimizer` trait and its
//! implementations — COA, LRM, ESM/AMM, AM, p-Identity, the singular value
//! bound approximation and the projection mechanism's covariance — each
//! returning the strategy plus a report (objective history, iterations,
//! termination reason, seconds, convergence flag). It is filled by the
//! optimizer issues; nothing here is usable yet.
