//! Workloads, classic strategies, baseline mechanisms and dataset loading.
//!
//! At this stage the crate provides `.npy` input and output ([`npy`]);
//! the workload generators, implicit workloads with closed-form Gram
//! matrices, classic strategies (I_n, H_n, Y_n) and dataset search path
//! follow in the workloads issue.
//!
//! ```no_run
//! use std::path::Path;
//! let w = dp_workloads::npy::read_matrix(Path::new("W.npy"))?;
//! println!("{} queries over {} cells", w.nrows(), w.ncols());
//! # Ok::<(), dp_core::DpError>(())
//! ```

pub mod datasets;
pub mod npy;
