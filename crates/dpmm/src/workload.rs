//! A workload spec (`docs/formats.md`), read and validated once: the
//! queries as the planner and the reconstruction see them, and the spec's
//! JSON with every matrix factor inline, so that a plan file (which embeds
//! it) or a program holding it needs no `.npy` file beside it.

use dp_core::DpError;
use dp_workloads::spec::{load_spec_inlined, parse_spec_inlined};
use dp_workloads::structured::StructuredWorkload;

use crate::{Document, Result};

/// The queries of a workload spec and the spec itself.
#[derive(Debug, Clone)]
pub struct Workload {
    structured: StructuredWorkload,
    spec: serde_json::Value,
}

impl Workload {
    /// Reads and validates the spec (a file, or text whose matrix files are
    /// relative to its base); every matrix file is read once.
    pub fn load(spec: impl Into<Document>) -> Result<Self> {
        let spec = spec.into();
        let (structured, json) = match &spec {
            Document::File(path) => load_spec_inlined(path),
            doc => parse_spec_inlined(&doc.read()?, doc.base()),
        }
        .map_err(|e| crate::Error::Workload(DpError::from(e).to_string()))?;
        Ok(Self {
            structured,
            spec: json,
        })
    }

    /// A workload already parsed, with its spec.
    pub(crate) fn from_parts(structured: StructuredWorkload, spec: serde_json::Value) -> Self {
        Self { structured, spec }
    }

    /// The queries: their domain, groups, labels and weights.
    pub fn structured(&self) -> &StructuredWorkload {
        &self.structured
    }

    /// The spec as JSON with matrix factors inline.
    pub fn spec(&self) -> &serde_json::Value {
        &self.spec
    }

    /// The spec as a [`Document`] held in memory, named `name` in messages
    /// (for a [`crate::Release`] of these queries).
    pub fn document(&self, name: &str) -> Document {
        Document::text(self.spec.to_string(), name)
    }

    /// Number of queries.
    pub fn queries(&self) -> f64 {
        self.structured.num_queries()
    }
}
