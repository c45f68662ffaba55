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
//! * [`Measurements`] reads a release's measurement file (its noisy
//!   measurements, publishable) and answers new queries in the row space
//!   of the strategy it measured, with exact errors and no budget.
//!
//! The research layer is re-exported: [`dp_linalg`] (the dense matrices
//! every layer passes), [`dp_core`] (the privacy kernel,
//! the matrix mechanism, the audit's samplers), [`dp_opt`] (strategy
//! optimizers), [`dp_plan`] (the multi-dimensional planner and
//! reconstruction), [`dp_workloads`] (workloads, classic strategies) and [`dpmm_records`] (schemas, count tables).
//!
//! ```
//! use std::path::Path;
//!
//! use dpmm::{Data, PrivacyBudget, Release, Rows, ledger};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fertility1980");
//! let dir = std::env::temp_dir().join(format!("dpmm-doc-{}", std::process::id()));
//! // A ledger holding ε = 1 in total, then a release of every 2-way
//! // marginal at ε = 0.6 from records the caller streams in.
//! let book = dir.join("ledger.jsonl");
//! ledger::create(&book, PrivacyBudget::pure(1.0)?)?;
//! let release = Release::new(
//!     &examples.join("schema.json"),
//!     &examples.join("spec.json"),
//!     PrivacyBudget::pure(0.6)?,
//!     &book,
//! );
//! let records = "morekids,gender1,gender2,age,afam,hispanic,other,work\n\
//!                no,male,female,27,no,no,no,0\n\
//!                yes,female,female,33,no,yes,no,40\n";
//! let csv = |text: &'static str| Data::Csv {
//!     reader: Box::new(text.as_bytes()),
//!     name: "records".into(),
//!     rows: Rows::Records,
//! };
//! let answers = release.run(csv(records))?;
//! assert_eq!(answers.len(), 1671);
//! let first = answers.iter().next().unwrap();
//! assert_eq!(first.query, "morekids = no & gender1 = male");
//! assert!(first.ci_low < first.answer && first.answer < first.ci_high);
//! // 0.4 is left: a second release at 0.6 is refused before any noise is
//! // drawn, and spends nothing.
//! assert!(release.run(csv(records)).is_err());
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

pub mod answers;
pub mod check;
#[cfg(feature = "cli")]
pub mod cli;
pub mod distributed;
pub mod document;
mod error;
pub mod ledger;
pub mod matrix;
pub mod measurements;
pub mod nonneg;
pub mod output;
pub mod parquet_output;
pub mod plan;
pub mod privacy;
pub mod release;
mod release_figures;
mod release_plan;
pub mod report;
pub mod resources;
pub mod stream;
pub mod workload;

pub use answers::{Answer, Answers};
pub use distributed::Distributed;
pub use document::Document;
pub use error::{Error, Result};
pub use measurements::Measurements;
pub use plan::{Plan, PlanSummary, SavedPlan};
pub use release::{Data, Release};
pub use release_figures::GroupRmse;
pub use workload::Workload;

pub use dp_core::{Delta, Epsilon, PrivacyBudget};
pub use dp_plan::PlanObjective;
pub use dp_workloads::structured::StructuredWorkload;
pub use dpmm_records::{Rows, Schema};

pub use dp_core;
pub use dp_linalg;
pub use dp_opt;
pub use dp_plan;
pub use dp_stream;
pub use dp_workloads;
pub use dpmm_records;
