//! Experiment definitions for `cargo xtask experiment`.
//!
//! This crate will own the reproductions of the papers' figures
//! (workload × mechanism × dataset × parameter grids), their runners, the
//! CSV/SVG/markdown outputs and the regression gates. It is filled by the
//! experiments issue; nothing here is usable yet.
