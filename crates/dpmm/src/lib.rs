//! dpmm: private answers to a batch of linear counting queries, with the
//! least error the matrix mechanism can give — records in, answers with
//! error bars out.
//!
//! This crate is the whole system for a Rust program, and the `dpmm`
//! command is a thin layer of flags over it:
//!
//! * [`Schema`] reads records (CSV, gzip, Parquet) into the attributes of
//!   a public domain; a workload spec names the queries
//!   (`docs/formats.md`).
//! * [`Plan`] optimizes the strategy of queries actually measured, once
//!   per workload and privacy model (it never reads data), reports every
//!   query group's expected error with the optimizer's certificate, and
//!   saves the plan file.
//! * [`ledger`] creates, verifies and repairs the durable privacy budget
//!   every release is charged to before any noise is drawn.
//! * [`Release`] validates everything, sizes every step, charges the
//!   ledger, measures through the privacy kernel (exact discrete Laplace
//!   or Gaussian noise) and reconstructs [`Answers`] by least squares;
//!   they iterate in workload order or are written as CSV with a JSON
//!   sidecar.
//!
//! The research layer is re-exported: [`dp_core`] (the privacy kernel,
//! the matrix mechanism, the audit's samplers), [`dp_opt`] (strategy
//! optimizers), [`dp_plan`] (the multi-dimensional planner and
//! reconstruction), [`dp_workloads`] (workloads, classic strategies) and [`dpmm_records`] (schemas, count tables).
//!
//! ```no_run
//! use std::path::Path;
//!
//! use dpmm::{Data, PrivacyBudget, Release, ledger};
//!
//! fn main() -> dpmm::Result<()> {
//!     // A ledger holding ε = 1 in total, then one release of every
//!     // 2-way marginal of the census extract at ε = 0.5.
//!     let book = Path::new("results/ledger.jsonl");
//!     ledger::create(book, PrivacyBudget::pure(1.0)?)?;
//!     let release = Release::new(
//!         Path::new("examples/fertility1980/schema.json"),
//!         Path::new("examples/fertility1980/spec.json"),
//!         PrivacyBudget::pure(0.5)?,
//!         book,
//!     );
//!     let answers = release.run(Data::Records("datasets/fertility1980.csv.gz".into()))?;
//!     for a in answers.iter().take(3) {
//!         println!("{}: {:.1} ± {:.1}", a.query, a.answer, a.std_error);
//!     }
//!     answers.write(Path::new("results/answers.csv"))
//! }
//! ```

pub mod answers;
mod error;
pub mod ledger;
pub mod output;
pub mod plan;
pub mod privacy;
pub mod release;
mod release_figures;
mod release_plan;
pub mod resources;

pub use answers::{Answer, Answers};
pub use error::{Error, Result};
pub use plan::Plan;
pub use release::{Data, Release};

pub use dp_core::{Delta, Epsilon, PrivacyBudget};
pub use dp_plan::PlanObjective;
pub use dp_workloads::structured::StructuredWorkload;
pub use dpmm_records::{Rows, Schema};

pub use dp_core;
pub use dp_opt;
pub use dp_plan;
pub use dp_workloads;
pub use dpmm_records;
