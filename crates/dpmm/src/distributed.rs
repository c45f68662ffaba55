//! A release whose records are counted where they live — a Spark
//! cluster's executors — and measured here, on the driver
//! ([`dpmm_records::partition`]; the Python package's `dpmatrix.spark`
//! drives it).
//!
//! [`Release::distributed`] checks everything a local release checks
//! before it reads a record (the plan, the budget, the outputs) and the
//! source's columns against the schema, and makes the counting's spec
//! (with its secret key) for the workers. The engine then runs dpmm's own
//! reading and counting on every partition ([`dpmm_records::partition`]);
//! [`Distributed::finish`] merges the partitions' sealed tables — each
//! partition once, whole, of this counting — and charges, measures and
//! reconstructs exactly as [`Release::run`] does. A job that fails, or
//! tables that do not merge, spend nothing.

use std::path::PathBuf;

use dpmm_records::arrow::{RecordBatchReader, SchemaRef};
use dpmm_records::partition::PartitionSpec;

use crate::nonneg::Marginals;
use crate::release::{Prepared, Release};
use crate::{Answers, Document, Error, Result};

/// A release prepared on the driver, waiting for its partitions' tables
/// (see the [module documentation](self)).
pub struct Distributed {
    release: Release,
    prepared: Prepared,
    nonneg: Option<Marginals>,
    spec: PartitionSpec,
    inputs: Vec<PathBuf>,
    warning: Option<String>,
}

impl std::fmt::Debug for Distributed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Distributed")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Release {
    /// Prepares this release for records a cluster's workers count, from a
    /// source whose columns are `columns` and which reads the files
    /// `sources` (no output may be written over them): everything that
    /// can be refused is refused now, before any job runs and before the
    /// charge.
    pub fn distributed(
        &self,
        columns: &dpmm_records::arrow::Schema,
        sources: &[PathBuf],
    ) -> Result<Distributed> {
        let warning = crate::ledger::head_warning(&self.ledger);
        // The schema is read once: the plan and the workers' spec are
        // made from the same text.
        let text = self.schema.read()?.into_owned();
        let mut release = self.clone();
        release.schema = Document::text(text.clone(), self.schema.name());
        let mut inputs = release.inputs(self.schema.path().map(PathBuf::from).as_ref());
        inputs.extend(sources.iter().cloned());
        let (prepared, nonneg) = release.checked(&inputs)?;
        let spec = PartitionSpec::new(&text, prepared.layout(), &release.people(), columns)?;
        Ok(Distributed {
            release,
            prepared,
            nonneg,
            spec,
            inputs,
            warning,
        })
    }
}

impl Distributed {
    /// The spec for the workers, as bytes: it holds the counting's key,
    /// so it goes to the workers with the code that counts, and nowhere
    /// else.
    pub fn spec(&self) -> Vec<u8> {
        self.spec.to_bytes()
    }

    /// The source columns the workers read, in order.
    pub fn columns(&self) -> &[String] {
        self.spec.columns()
    }

    /// Whether records are bounded per unit: encoded, brought together by
    /// unit hash, then bounded ([`dpmm_records::partition`]).
    pub fn bounds_units(&self) -> bool {
        self.spec.bounds_units()
    }

    /// The cells of the tables each partition counts (what one
    /// partition's tables hold at most).
    pub fn cells(&self) -> u64 {
        self.spec.layout().cells()
    }

    /// The encoded records' columns.
    pub fn encoded_schema(&self) -> SchemaRef {
        self.spec.encoded_schema()
    }

    /// Merges the `partitions` partitions' tables read from `batches`,
    /// then charges, measures and reconstructs as [`Release::run`].
    pub fn finish(
        self,
        partitions: Option<u32>,
        batches: impl RecordBatchReader,
    ) -> Result<Answers> {
        let result = self
            .spec
            .merge(
                partitions,
                batches.map(|b| {
                    b.map_err(|e| dpmm_records::RecordsError::SourceFailed {
                        path: "the partitions' tables".into(),
                        withheld: e.to_string(),
                    })
                }),
            )
            .map_err(Error::from)
            .and_then(|counts| {
                self.release
                    .measure(self.prepared, counts, self.inputs, self.nonneg)
            });
        match (result, self.warning) {
            (Ok(mut answers), w) => {
                answers.warnings.extend(w);
                Ok(answers)
            }
            (Err(e), None) => Err(e),
            (Err(e), Some(w)) => Err(e.with_warning(&w)),
        }
    }
}
