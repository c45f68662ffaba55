//! The Spark release's two sides (driven by `dpmatrix/spark.py`): on the
//! driver, [`SparkRelease`] — a release prepared and checked before any
//! job runs, then finished from the partitions' tables; on the
//! executors, the functions that read, encode, bound and count one
//! partition with dpmm's own reading and the kernel's own counting
//! ([`dpmm::dpmm_records::partition`]).

use std::path::PathBuf;

use dpmm::Rows;
use dpmm::dpmm_records::Source;
use dpmm::dpmm_records::arrow::{DataType, RecordBatch, Schema as ArrowSchema};
use dpmm::dpmm_records::partition::{
    PartitionSpec, bound_partition, count_partition, encode_partition, partial_batch,
};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::{PyRecordBatch, PyRecordBatchReader, PySchema};

use super::{
    Holds, Plan, Released, Schema, Workload, budget, interruptible, people, py_err, release_of,
    released,
};

/// A release prepared on the driver: checked (plan, budget, outputs, the
/// DataFrame's columns) and holding the counting's spec; nothing charged
/// until [`SparkRelease::finish`].
#[pyclass(unsendable, module = "dpmatrix._dpmatrix")]
struct SparkRelease {
    inner: Option<dpmm::Distributed>,
}

/// Prepares a Spark release of records whose columns are `columns` (an
/// Arrow schema): everything that can be refused is refused here.
#[pyfunction]
#[pyo3(signature = (schema, ledger, epsilon, columns, sources=Vec::new(), delta=None, workload=None, plan=None, max_memory=None, report=None, nonneg=false, privacy_unit=None, max_records_per_unit=None, weight=None, max_weight=None, measurements=None))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
fn spark_prepare(
    schema: &Schema,
    ledger: PathBuf,
    epsilon: f64,
    columns: PySchema,
    sources: Vec<PathBuf>,
    delta: Option<f64>,
    workload: Option<&Workload>,
    plan: Option<&Plan>,
    max_memory: Option<u64>,
    report: Option<PathBuf>,
    nonneg: bool,
    privacy_unit: Option<String>,
    max_records_per_unit: Option<u32>,
    weight: Option<String>,
    max_weight: Option<f64>,
    measurements: Option<PathBuf>,
) -> PyResult<SparkRelease> {
    let budget = budget(epsilon, delta)?;
    let people = people(privacy_unit, max_records_per_unit, weight, max_weight)?;
    let release = release_of(
        schema,
        ledger,
        budget,
        (workload, plan),
        (max_memory, report, nonneg, measurements),
        people,
        false,
    )?;
    let columns = columns.into_inner();
    let inner = release.distributed(&columns, &sources).map_err(py_err)?;
    Ok(SparkRelease { inner: Some(inner) })
}

/// Spark's SQL type of an Arrow type dpmm's batches use.
fn sql_type(t: &DataType) -> &'static str {
    match t {
        DataType::Int32 => "INT",
        DataType::Int64 => "BIGINT",
        _ => "DOUBLE",
    }
}

/// A Spark DDL schema string for `schema`.
fn ddl(schema: &ArrowSchema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), sql_type(f.data_type())))
        .collect::<Vec<_>>()
        .join(", ")
}

impl SparkRelease {
    fn inner(&self) -> PyResult<&dpmm::Distributed> {
        self.inner.as_ref().ok_or_else(|| {
            py_err(dpmm::Error::BadInput(
                "this Spark release has finished".into(),
            ))
        })
    }
}

#[pymethods]
impl SparkRelease {
    /// The spec for the executors (secret: it holds the counting's key).
    fn spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, &self.inner()?.spec()))
    }

    /// The DataFrame's columns read, in order.
    fn columns(&self) -> PyResult<Vec<String>> {
        Ok(self.inner()?.columns().to_vec())
    }

    /// Whether records are bounded per unit (encoded, shuffled by unit
    /// hash, then bounded).
    fn bounds_units(&self) -> PyResult<bool> {
        Ok(self.inner()?.bounds_units())
    }

    /// Lets the release go without finishing it (nothing was charged):
    /// the ledger it holds open is released now, not when Python
    /// collects this object.
    fn close(&mut self) {
        self.inner = None;
    }

    /// The cells of the tables each partition counts.
    fn cells(&self) -> PyResult<u64> {
        Ok(self.inner()?.cells())
    }

    /// The Spark DDL of the encoded records.
    fn encoded_ddl(&self) -> PyResult<String> {
        Ok(ddl(&self.inner()?.encoded_schema()))
    }

    /// Merges the partitions' tables (an Arrow stream; `partitions` of
    /// them when the engine says how many) and
    /// charges, measures and reconstructs: the release's answers. Once.
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
        partitions: Option<u32>,
        stream: PyRecordBatchReader,
    ) -> PyResult<Released<'py>> {
        let inner = self.inner.take().ok_or_else(|| {
            py_err(dpmm::Error::BadInput(
                "this Spark release has finished".into(),
            ))
        })?;
        let reader = stream.into_reader()?;
        released(
            py,
            interruptible(py, Holds::Python, move || inner.finish(partitions, reader))?,
        )
    }
}

/// The Spark DDL of a partition's tables.
#[pyfunction]
fn spark_partial_ddl() -> String {
    ddl(&PartitionSpec::partial_schema())
}

fn spec_of(spec: &[u8]) -> PyResult<PartitionSpec> {
    PartitionSpec::from_bytes(spec).map_err(|e| py_err(e.into()))
}

fn to_python(py: Python<'_>, batch: RecordBatch) -> PyResult<Bound<'_, PyAny>> {
    PyRecordBatch::new(batch).into_pyarrow(py)
}

fn source(stream: PyRecordBatchReader) -> PyResult<Source<'static>> {
    Ok(Source::Arrow {
        reader: stream.into_reader()?,
        name: "the DataFrame's partition".into(),
    })
}

/// On an executor: partition `partition`'s records (with `counts`,
/// groups of identical records and their `count`) counted into its
/// sealed tables (a pyarrow RecordBatch).
#[pyfunction]
#[pyo3(signature = (spec, partition, stream, counts=false))]
fn spark_count<'py>(
    py: Python<'py>,
    spec: &[u8],
    partition: u32,
    stream: PyRecordBatchReader,
    counts: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let spec = spec_of(spec)?;
    let source = source(stream)?;
    let rows = if counts {
        Rows::CountsTable
    } else {
        Rows::Records
    };
    let partial = py
        .detach(|| count_partition(&spec, source, partition, rows))
        .map_err(|e| py_err(e.into()))?;
    to_python(py, partial_batch(&partial).map_err(|e| py_err(e.into()))?)
}

/// On an executor: a partition's records encoded for bounding by unit.
#[pyfunction]
fn spark_encode<'py>(
    py: Python<'py>,
    spec: &[u8],
    stream: PyRecordBatchReader,
) -> PyResult<Bound<'py, PyAny>> {
    let spec = spec_of(spec)?;
    let source = source(stream)?;
    let batch = py
        .detach(|| encode_partition(&spec, source))
        .map_err(|e| py_err(e.into()))?;
    to_python(py, batch)
}

/// On an executor: partition `partition`'s encoded records (every
/// record of each of its units) bounded and counted into its sealed
/// tables; beyond `memory` bytes they spill under `spill_dir`.
#[pyfunction]
#[pyo3(signature = (spec, partition, stream, memory=1 << 30, spill_dir=None))]
fn spark_bound<'py>(
    py: Python<'py>,
    spec: &[u8],
    partition: u32,
    stream: PyRecordBatchReader,
    memory: u64,
    spill_dir: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let spec = spec_of(spec)?.with_spill(memory, spill_dir.unwrap_or_else(std::env::temp_dir));
    let reader = stream.into_reader()?;
    let partial = py
        .detach(|| {
            let batches = reader.map(|b| {
                b.map_err(|e| dpmm::dpmm_records::RecordsError::SourceFailed {
                    path: "the encoded records".into(),
                    withheld: e.to_string(),
                })
            });
            bound_partition(&spec, batches, partition)
        })
        .map_err(|e| py_err(e.into()))?;
    to_python(py, partial_batch(&partial).map_err(|e| py_err(e.into()))?)
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SparkRelease>()?;
    m.add_function(wrap_pyfunction!(spark_prepare, m)?)?;
    m.add_function(wrap_pyfunction!(spark_partial_ddl, m)?)?;
    m.add_function(wrap_pyfunction!(spark_count, m)?)?;
    m.add_function(wrap_pyfunction!(spark_encode, m)?)?;
    m.add_function(wrap_pyfunction!(spark_bound, m)?)?;
    Ok(())
}
