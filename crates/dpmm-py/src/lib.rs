//! `dpmatrix._dpmatrix`: the `dpmm` library for Python. The package
//! `dpmatrix` (under `python/`) wraps this module in the API its users
//! see (pandas data frames, dataclasses, paths); everything here is a thin
//! call into `dpmm`, which it reimplements nothing of.
//!
//! * Errors cross as Python exceptions (`py_err`), one class per kind of
//!   [`dpmm::Error`] from `dpmatrix.errors`, all under `DpmmError`, with
//!   the same one-line message as the `dpmm` command's: the input kinds
//!   (`SchemaError`, `WorkloadError`, `DataError`, `ParameterError`,
//!   `LedgerError`, `InputError`) are also `ValueError`s, an overspend is
//!   `BudgetExceeded`, a failure on valid input `InternalError` (a
//!   `RuntimeError`). Every refusal comes before a release's charge.
//! * Records cross as Arrow: any object exporting the Arrow C stream
//!   interface is read batch by batch by the library's own door (the
//!   Python package turns a pandas DataFrame into such a stream, chunk by
//!   chunk), or a file is read by path; counts, seeds and generators
//!   never cross back. The ledger is the command's
//!   file format and lock, so a notebook and the command share one budget.
//! * Optimization, planning and releases run with the GIL released, on a
//!   worker thread under a [`dpmm::dp_core::interrupt`] token: the calling
//!   thread wakes every 50 ms to run Python's signal handlers, and Ctrl-C
//!   (a `KeyboardInterrupt`) triggers the token. Work that has not begun
//!   its charge never will: the exception is raised at once and the worker
//!   stops at its next check, having spent nothing. Work past its charge
//!   runs to its end (further Ctrl-Cs are absorbed) and returns its
//!   answers, with a warning (its budget is spent).
//! * How far the work has come (planning, reading, reconstructing, a
//!   stream's steps) shows on stderr when `sys.stderr` is a terminal (not
//!   under pytest, not in a notebook), or goes to a `progress=` callable.

use std::path::PathBuf;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dpmm::dp_core::interrupt::Interrupt;
use dpmm::dp_core::{DpError, GaussianCalibration, PrivacyBudget};
use dpmm::dp_linalg::{Mat, MatRef};
use dpmm::dp_opt::{Params, PrivacyModel};
use dpmm::resources::Spinner;
use dpmm::{Data, Document, Error, PlanObjective, PlanSummary, Rows};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3_arrow::PyRecordBatchReader;

mod spark;

/// The Python exception for a library error: the class of its kind from
/// `dpmatrix.errors` (`SchemaError`, `WorkloadError`, `DataError`,
/// `ParameterError`, `LedgerError`, `InputError`, `BudgetExceeded`,
/// `InternalError`, `Cancelled`, all under `DpmmError`), with its one-line
/// message.
fn py_err(e: Error) -> PyErr {
    let class = match &e {
        Error::Schema(_) => "SchemaError",
        Error::Workload(_) => "WorkloadError",
        Error::Data(_) => "DataError",
        Error::Parameter(_) => "ParameterError",
        Error::Ledger(_) => "LedgerError",
        Error::BudgetExceeded(_) => "BudgetExceeded",
        Error::Internal(_) => "InternalError",
        Error::Interrupted => "Cancelled",
        _ => "InputError",
    };
    let message = e.to_string();
    Python::attach(|py| {
        let typed = py
            .import("dpmatrix.errors")
            .and_then(|m| m.getattr(class))
            .and_then(|c| Ok(c.cast_into::<pyo3::types::PyType>()?));
        match typed {
            Ok(class) => PyErr::from_type(class, message),
            // The package's own module is missing (a bare extension):
            // the builtin class the kind derives from.
            Err(_) => match e {
                Error::Internal(_) => PyRuntimeError::new_err(message),
                Error::Interrupted => PyKeyboardInterrupt::new_err(message),
                _ => PyValueError::new_err(message),
            },
        }
    })
}

/// A Python argument out of its range or in a combination that does not
/// go together: `dpmatrix.ParameterError`.
fn parameter_err(message: impl Into<String>) -> PyErr {
    py_err(Error::Parameter(message.into()))
}

/// How often the calling thread runs Python's signal handlers while the
/// worker runs.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// The worker's stack: as the main thread's, for the planner's recursion.
const WORKER_STACK: usize = 8 << 20;

/// Workers a call stopped waiting for (interrupted before any charge),
/// each with whether it holds Python objects (an Arrow stream read from
/// Python).
static ABANDONED: Mutex<Vec<(std::thread::JoinHandle<()>, bool)>> = Mutex::new(Vec::new());

/// Waits, the GIL released, for the abandoned workers (all of them, or
/// those holding Python objects), which end at their next interrupt
/// check. Every call does this first for all of them, so that a call
/// never runs beside one (its ledger lock, its memory); at exit the
/// module does it for those that would call into a finalizing interpreter
/// (and, off Unix, for all: their spill directories are removed on drop).
fn join_abandoned(py: Python<'_>, only_python: bool) {
    let mut waiting = Vec::new();
    if let Ok(mut abandoned) = ABANDONED.lock() {
        let all = std::mem::take(&mut *abandoned);
        for (handle, python) in all {
            if python || !only_python {
                waiting.push(handle);
            } else {
                abandoned.push((handle, python));
            }
        }
    }
    if !waiting.is_empty() {
        py.detach(move || {
            for handle in waiting {
                // A panic there was printed when it happened.
                let _ = handle.join();
            }
        });
    }
}

/// The module's exit hook ([`join_abandoned`]).
#[pyfunction]
fn _join_workers(py: Python<'_>) {
    join_abandoned(py, cfg!(unix));
}

/// What a worker holds: only Rust values, or objects of the Python that
/// called it (an Arrow stream whose batches Python produces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holds {
    Rust,
    Python,
}

/// Runs `work` on a worker thread under a fresh interrupt token, the GIL
/// released; returns its result and, when a signal handler raised (Ctrl-C:
/// `KeyboardInterrupt`) meanwhile, that exception. On the exception the
/// token is triggered; work that had not begun its ledger charge or its
/// writing ([`Interrupt::has_committed`]) never will, so the exception is
/// raised at once and the worker left to end at its next check, having
/// spent and written nothing ([`join_abandoned`] waits for it before the
/// next call). Work past a charge is waited for: it runs to its end
/// ([`dpmm::dp_core::interrupt::commit`]) and its result is returned with
/// the exception.
fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    holds: Holds,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<(T, Option<PyErr>)> {
    interruptible_with(py, None, holds, work)
}

/// [`interruptible`], and with `progress`, a Python callable, called on
/// the calling thread with the work's progress line
/// ([`dpmm::dp_core::progress::line`]) when it changed, between two
/// polls; an exception it raises stops the work as Ctrl-C does.
fn interruptible_with<T: Send + 'static>(
    py: Python<'_>,
    progress: Option<&Bound<'_, PyAny>>,
    holds: Holds,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<(T, Option<PyErr>)> {
    join_abandoned(py, false);
    let token = Interrupt::new();
    let (done, mut finished) = channel::<T>();
    let latest: Arc<Mutex<Option<String>>> = Arc::default();
    let sink: Option<dpmm::dp_core::progress::Sink> = progress.map(|_| {
        let slot = latest.clone();
        let sink: dpmm::dp_core::progress::Sink = Arc::new(move |stages| {
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(dpmm::dp_core::progress::line(stages));
            }
        });
        sink
    });
    let worker_token = token.clone();
    let worker = std::thread::Builder::new()
        .name("dpmatrix".into())
        .stack_size(WORKER_STACK)
        .spawn(move || {
            let out = match sink {
                Some(sink) => dpmm::dp_core::progress::show(sink, || worker_token.run(work)),
                None => worker_token.run(work),
            };
            // The caller may have stopped waiting (an interrupt before
            // any charge): the result is dropped here.
            let _ = done.send(out);
        })
        .map_err(|e| {
            py_err(Error::Internal(format!(
                "cannot start a worker thread: {e}"
            )))
        })?;
    let mut raised = None;
    loop {
        let wait;
        (wait, finished) = py.detach(move || (finished.recv_timeout(SIGNAL_POLL), finished));
        match wait {
            Ok(out) => return Ok((out, raised)),
            // The worker panicked before sending: its panic, here.
            Err(RecvTimeoutError::Disconnected) => {
                return match py.detach(|| worker.join()) {
                    Err(panic) => std::panic::resume_unwind(panic),
                    Ok(()) => Err(py_err(Error::Internal(
                        "the worker ended without a result".into(),
                    ))),
                };
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        // A later Ctrl-C, while committed work finishes, is absorbed: left
        // pending it would be raised as the call returns, losing the
        // answers of a budget already spent.
        if let Err(e) = py.check_signals()
            && raised.is_none()
        {
            raised = Some(e);
        }
        let line = latest.lock().ok().and_then(|mut l| l.take());
        if let (Some(callback), Some(line), None) = (progress, line, &raised)
            && let Err(e) = callback.call1((line,))
        {
            raised = Some(e);
        }
        if let Some(e) = raised.take() {
            token.trigger();
            if !token.has_committed() {
                if let Ok(mut abandoned) = ABANDONED.lock() {
                    abandoned.push((worker, holds == Holds::Python));
                }
                return Err(e);
            }
            raised = Some(e);
        }
    }
}

/// Whether `sys.stderr` is a terminal (pytest's capture and a notebook's
/// stream are not).
fn stderr_is_terminal(py: Python<'_>) -> bool {
    py.import("sys")
        .and_then(|sys| sys.getattr("stderr"))
        .and_then(|err| err.call_method0("isatty"))
        .and_then(|t| t.extract::<bool>())
        .unwrap_or(false)
}

/// A spinner on stderr while a long call runs, when `sys.stderr` is a
/// terminal.
fn spinner(py: Python<'_>, message: &'static str) -> Spinner {
    if stderr_is_terminal(py) {
        Spinner::start(message)
    } else {
        Spinner::hidden()
    }
}

/// `work`'s result, or the exception a signal handler raised while it ran.
fn uninterrupted<T: Send + 'static>(
    py: Python<'_>,
    holds: Holds,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    match interruptible(py, holds, work)? {
        (_, Some(raised)) => Err(raised),
        (out, None) => Ok(out),
    }
}

/// The Python exception for a research-layer error.
fn dp_err(e: DpError) -> PyErr {
    py_err(e.into())
}

/// ε, or (ε, δ) when `delta` is given.
fn budget(epsilon: f64, delta: Option<f64>) -> PyResult<PrivacyBudget> {
    dpmm::privacy::budget(epsilon, delta).map_err(py_err)
}

fn privacy_model(privacy: &str) -> PyResult<PrivacyModel> {
    match privacy {
        "pure" => Ok(PrivacyModel::Pure),
        "approx" => Ok(PrivacyModel::Approx),
        other => Err(parameter_err(format!(
            "privacy must be 'pure' or 'approx', got '{other}'"
        ))),
    }
}

/// A workload spec, read and validated once.
#[pyclass(frozen, module = "dpmatrix._dpmatrix")]
struct Workload {
    inner: dpmm::Workload,
}

#[pymethods]
impl Workload {
    /// Reads the spec file at `path` (its `.npy` factors relative to it).
    #[staticmethod]
    fn from_path(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = py.detach(|| dpmm::Workload::load(path)).map_err(py_err)?;
        Ok(Self { inner })
    }

    /// Parses the spec `text`, named `name` in messages, its `.npy`
    /// factors relative to `base`.
    #[staticmethod]
    fn from_text(text: String, name: String, base: PathBuf) -> PyResult<Self> {
        let doc = Document::Text { text, name, base };
        let inner = dpmm::Workload::load(doc).map_err(py_err)?;
        Ok(Self { inner })
    }

    /// The spec as JSON, matrix factors inline.
    #[getter]
    fn spec_json(&self) -> String {
        self.inner.spec().to_string()
    }

    /// The number of queries.
    #[getter]
    fn queries(&self) -> f64 {
        self.inner.queries()
    }

    /// The domain: (attribute name, size) in order.
    #[getter]
    fn domain(&self) -> Vec<(String, usize)> {
        let domain = self.inner.structured().domain();
        domain
            .attributes()
            .iter()
            .map(|a| (a.name.clone(), a.size))
            .collect()
    }

    /// The query groups: (label, queries, weight) in order.
    #[getter]
    fn groups(&self) -> Vec<(String, f64, f64)> {
        let w = self.inner.structured();
        w.groups()
            .iter()
            .map(|g| (g.label.clone(), w.group_queries(g), g.weight))
            .collect()
    }
}

/// A records schema: the columns and their public domains.
#[pyclass(frozen, module = "dpmatrix._dpmatrix")]
struct Schema {
    doc: Document,
    inner: dpmm::Schema,
}

#[pymethods]
impl Schema {
    /// Reads the schema file at `path`.
    #[staticmethod]
    fn from_path(path: PathBuf) -> PyResult<Self> {
        let inner = dpmm::Schema::from_path(&path).map_err(|e| py_err(e.into()))?;
        Ok(Self {
            doc: Document::File(path),
            inner,
        })
    }

    /// Parses the schema `text`, named `name` in messages.
    #[staticmethod]
    fn from_text(text: String, name: String) -> PyResult<Self> {
        let inner = dpmm::Schema::from_json(&text).map_err(|e| py_err(e.into()))?;
        Ok(Self {
            doc: Document::text(text, name),
            inner,
        })
    }

    /// The columns: (attribute name, size) in order.
    #[getter]
    fn domain(&self) -> Vec<(String, usize)> {
        self.inner
            .domain()
            .attributes()
            .iter()
            .map(|a| (a.name.clone(), a.size))
            .collect()
    }

    /// The columns the attributes read, each once, in domain order.
    #[getter]
    fn columns_read(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for a in self.inner.attributes() {
            if !out.contains(&a.column) {
                out.push(a.column.clone());
            }
        }
        out
    }
}

/// Who the records are about: the privacy unit (its column and the most
/// records of one unit kept) and the weights (column and bound), each
/// given whole or not at all.
fn people(
    privacy_unit: Option<String>,
    max_records_per_unit: Option<u32>,
    weight: Option<String>,
    max_weight: Option<f64>,
) -> PyResult<dpmm::dpmm_records::People> {
    let pair = |what: &str, a: bool, b: bool| {
        if a == b {
            Ok(())
        } else {
            Err(parameter_err(format!("{what} go together")))
        }
    };
    pair(
        "privacy_unit and max_records_per_unit",
        privacy_unit.is_some(),
        max_records_per_unit.is_some(),
    )?;
    pair(
        "weight and max_weight",
        weight.is_some(),
        max_weight.is_some(),
    )?;
    Ok(dpmm::dpmm_records::People {
        unit: privacy_unit.zip(max_records_per_unit),
        weight: weight.zip(max_weight),
        ..dpmm::dpmm_records::People::records()
    })
}

/// The records of a call: a file at `path`, or an Arrow stream.
fn data(
    path: Option<PathBuf>,
    stream: Option<PyRecordBatchReader>,
    counts: bool,
) -> PyResult<Data> {
    let rows = if counts {
        Rows::CountsTable
    } else {
        Rows::Records
    };
    match (path, stream) {
        (Some(p), None) if counts => Ok(Data::CountsTable(p)),
        (Some(p), None) => Ok(Data::Records(p)),
        (None, Some(stream)) => Ok(Data::Arrow {
            reader: stream.into_reader()?,
            name: if counts {
                "the counts table"
            } else {
                "the records"
            }
            .into(),
            rows,
        }),
        _ => Err(parameter_err(
            "give the data as a path or as an Arrow stream",
        )),
    }
}

/// What a worker given `data` holds: an Arrow stream is Python's.
fn holds(data: &Data) -> Holds {
    match data {
        Data::Arrow { .. } => Holds::Python,
        _ => Holds::Rust,
    }
}

enum PlanSource {
    Optimized(Box<dpmm::Plan>),
    Saved(Box<dpmm::SavedPlan>),
}

/// A strategy planned for a workload, or a plan file read back.
#[pyclass(frozen, module = "dpmatrix._dpmatrix")]
struct Plan {
    source: PlanSource,
    summary: PlanSummary,
}

#[pymethods]
impl Plan {
    /// Reads a plan file written by `save` (or `dpmm plan`) and states its
    /// figures again, recomputed; an edited file is refused.
    #[staticmethod]
    #[pyo3(signature = (path, max_memory=None))]
    fn load(py: Python<'_>, path: PathBuf, max_memory: Option<u64>) -> PyResult<Self> {
        let saved = py
            .detach(|| dpmm::SavedPlan::load(path, max_memory))
            .map_err(py_err)?;
        Ok(Self {
            summary: saved.summary().clone(),
            source: PlanSource::Saved(Box::new(saved)),
        })
    }

    /// `pure` or `approx`.
    #[getter]
    fn privacy(&self) -> &str {
        &self.summary.privacy
    }

    /// `l1_obj`, `l2_obj` or `max_variance`.
    #[getter]
    fn objective_name(&self) -> &str {
        &self.summary.objective_name
    }

    /// The objective (`None` only for a plan file whose variances are
    /// bounded rather than exact).
    #[getter]
    fn objective(&self) -> Option<f64> {
        self.summary.objective
    }

    /// A proven lower bound on the optimum, when one is known.
    #[getter]
    fn lower_bound(&self) -> Option<f64> {
        self.summary.lower_bound
    }

    /// `(objective − lower_bound)/objective`, when both are known.
    #[getter]
    fn duality_gap(&self) -> Option<f64> {
        self.summary.duality_gap
    }

    /// The ε the errors are stated at.
    #[getter]
    fn epsilon(&self) -> f64 {
        self.summary.budget.epsilon().get()
    }

    /// The δ the errors are stated at (`None`: pure ε-DP).
    #[getter]
    fn delta(&self) -> Option<f64> {
        self.summary.budget.delta().map(|d| d.get())
    }

    /// Per query group: (label, queries, RMSE per answer as released).
    #[getter]
    fn groups(&self) -> Vec<(String, usize, f64)> {
        self.summary
            .groups
            .iter()
            .map(|g| (g.label.clone(), g.queries, g.rmse))
            .collect()
    }

    /// The plan's full report as JSON (a plan just optimized), else `None`.
    fn report_json(&self) -> PyResult<Option<String>> {
        match &self.source {
            PlanSource::Optimized(p) => p.report_json(None).map(Some).map_err(py_err),
            PlanSource::Saved(_) => Ok(None),
        }
    }

    /// The plan file's text.
    fn to_json(&self) -> PyResult<String> {
        match &self.source {
            PlanSource::Optimized(p) => p.to_json().map_err(py_err),
            PlanSource::Saved(p) => Ok(p.to_json().to_string()),
        }
    }

    /// The plan's HTML report: the expected RMSE per query group (one
    /// self-contained page).
    fn report_html(&self) -> String {
        self.summary.report_html()
    }

    /// Writes the plan file (atomically: whole or absent).
    fn save(&self, path: PathBuf) -> PyResult<()> {
        match &self.source {
            PlanSource::Optimized(p) => p.save(&path),
            PlanSource::Saved(p) => p.save(&path),
        }
        .map_err(py_err)
    }
}

/// Plans `workload` under ε (or (ε, δ)), minimizing `objective` (`total`:
/// the sum of the queries' variances; `max`: the largest).
#[pyfunction]
#[pyo3(signature = (workload, epsilon, delta=None, objective="total", max_memory=None, progress=None, spinner=true))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
fn plan(
    py: Python<'_>,
    workload: &Workload,
    epsilon: f64,
    delta: Option<f64>,
    objective: &str,
    max_memory: Option<u64>,
    progress: Option<Bound<'_, PyAny>>,
    spinner: bool,
) -> PyResult<Plan> {
    let budget = budget(epsilon, delta)?;
    let objective = match objective {
        "total" => PlanObjective::TotalVariance,
        "max" => PlanObjective::MaxVariance,
        other => {
            return Err(parameter_err(format!(
                "objective must be 'total' or 'max', got '{other}'"
            )));
        }
    };
    let w = workload.inner.clone();
    let spinner = if spinner && progress.is_none() {
        self::spinner(py, "planning")
    } else {
        Spinner::hidden()
    };
    let shown = spinner.clone();
    let optimized = match interruptible_with(py, progress.as_ref(), Holds::Rust, move || {
        shown.show(|| dpmm::Plan::optimize(&w, budget, objective, max_memory))
    })? {
        (_, Some(raised)) => Err(raised),
        (out, None) => Ok(out),
    };
    spinner.finish();
    let optimized = optimized?.map_err(py_err)?;
    Ok(Plan {
        summary: optimized.summary(),
        source: PlanSource::Optimized(Box::new(optimized)),
    })
}

/// Creates a ledger at `path` holding ε (or (ε, δ), kept as ρ-zCDP);
/// refuses an existing one. Returns what it holds, in words.
#[pyfunction]
#[pyo3(signature = (path, total_epsilon, total_delta=None))]
fn ledger_create(path: PathBuf, total_epsilon: f64, total_delta: Option<f64>) -> PyResult<String> {
    let budget = budget(total_epsilon, total_delta)?;
    dpmm::ledger::create(&path, budget).map_err(py_err)
}

/// The ledger's (unit, total, spent, remaining, releases), read without
/// changing anything.
#[pyfunction]
fn ledger_status(path: PathBuf) -> PyResult<(&'static str, f64, f64, f64, usize)> {
    let s = dpmm::ledger::status(&path).map_err(py_err)?;
    Ok((s.unit, s.total, s.spent, s.remaining, s.releases))
}

/// A release: the answers' query labels, the four columns (answer,
/// standard error, 95% interval), the sidecar as JSON, the warnings and
/// the non-negative estimates when asked for.
type Released<'py> = (
    Vec<String>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    String,
    Vec<String>,
    Option<Bound<'py, PyArray1<f64>>>,
);

/// Releases answers from records or a counts table (a file at `path`,
/// or an Arrow `stream`), charged to the ledger at `ledger`; `workload`
/// (planned now) or `plan` or both; with `report`, its HTML report is
/// written there; with `nonneg`, the non-negative consistent estimates
/// are returned too. With `progress`, a Python callable, how far the
/// release has come ([`interruptible_with`]); `spinner`: the command's
/// progress lines on stderr when it is a terminal.
#[pyfunction]
#[pyo3(signature = (schema, ledger, epsilon, delta=None, workload=None, plan=None, path=None, stream=None, counts=false, max_memory=None, report=None, nonneg=false, privacy_unit=None, max_records_per_unit=None, weight=None, max_weight=None, measurements=None, progress=None, spinner=true))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
fn release<'py>(
    py: Python<'py>,
    schema: &Schema,
    ledger: PathBuf,
    epsilon: f64,
    delta: Option<f64>,
    workload: Option<&Workload>,
    plan: Option<&Plan>,
    path: Option<PathBuf>,
    stream: Option<PyRecordBatchReader>,
    counts: bool,
    max_memory: Option<u64>,
    report: Option<PathBuf>,
    nonneg: bool,
    privacy_unit: Option<String>,
    max_records_per_unit: Option<u32>,
    weight: Option<String>,
    max_weight: Option<f64>,
    measurements: Option<PathBuf>,
    progress: Option<Bound<'py, PyAny>>,
    spinner: bool,
) -> PyResult<Released<'py>> {
    let budget = budget(epsilon, delta)?;
    let people = people(privacy_unit, max_records_per_unit, weight, max_weight)?;
    let data = data(path, stream, counts)?;
    let release = release_of(
        schema,
        ledger,
        budget,
        (workload, plan),
        (max_memory, report, nonneg, measurements),
        people,
        spinner && progress.is_none() && stderr_is_terminal(py),
    )?;
    let holds = holds(&data);
    released(
        py,
        interruptible_with(py, progress.as_ref(), holds, move || release.run(data))?,
    )
}

/// The library's release of a Python call's arguments: the schema,
/// ledger and budget, the queries (`workload` and/or `plan`), the
/// options (`max_memory`, `report`, `nonneg`, `measurements`), who the records are about,
/// and whether to show progress.
fn release_of(
    schema: &Schema,
    ledger: PathBuf,
    budget: PrivacyBudget,
    (workload, plan): (Option<&Workload>, Option<&Plan>),
    (max_memory, report, nonneg, measurements): (
        Option<u64>,
        Option<PathBuf>,
        bool,
        Option<PathBuf>,
    ),
    people: dpmm::dpmm_records::People,
    progress: bool,
) -> PyResult<dpmm::Release> {
    let plan_doc = plan
        .map(|p| p.to_json().map(|t| Document::text(t, "the plan")))
        .transpose()?;
    Ok(dpmm::Release {
        schema: schema.doc.clone(),
        workload: workload.map(|w| w.inner.document("the workload")),
        plan: plan_doc,
        objective: None,
        budget,
        ledger,
        out: None,
        max_memory,
        progress,
        report,
        nonneg,
        privacy_unit: people.unit,
        weight: people.weight,
        measurements,
    })
}

/// A release's outcome for Python: its answers (with a warning when an
/// interrupt came after the charge), or its error.
fn released<'py>(
    py: Python<'py>,
    outcome: (dpmm::Result<dpmm::Answers>, Option<PyErr>),
) -> PyResult<Released<'py>> {
    let (answers, late) = match outcome {
        // Past its charge: the budget is spent, the answers are kept.
        (Ok(answers), Some(_)) => (answers, true),
        (_, Some(raised)) => return Err(raised),
        (answers, None) => (answers.map_err(py_err)?, false),
    };
    let mut warnings = answers.warnings().to_vec();
    if late {
        warnings.push(
            "interrupted after the ledger was charged: the release ran to its end and its \
             answers are returned"
                .into(),
        );
    }
    Ok(columns(py, &answers, warnings))
}

/// The answers as the columns Python builds its DataFrame from.
fn columns<'py>(py: Python<'py>, answers: &dpmm::Answers, warnings: Vec<String>) -> Released<'py> {
    let n = answers.len();
    let (mut queries, mut answer, mut std_error, mut low, mut high) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for a in answers.iter() {
        queries.push(a.query);
        answer.push(a.answer);
        std_error.push(a.std_error);
        low.push(a.ci_low);
        high.push(a.ci_high);
    }
    (
        queries,
        PyArray1::from_vec(py, answer),
        PyArray1::from_vec(py, std_error),
        PyArray1::from_vec(py, low),
        PyArray1::from_vec(py, high),
        answers.sidecar().to_string(),
        warnings,
        answers.nonneg().map(|v| PyArray1::from_slice(py, v)),
    )
}

/// A release's measurement file, read and checked once: answers new
/// queries in the row space of the strategy it measured, spending nothing.
#[pyclass(frozen, module = "dpmatrix._dpmatrix")]
struct Measurements {
    inner: Arc<dpmm::Measurements>,
}

#[pymethods]
impl Measurements {
    /// Reads the measurement file at `path`.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = py
            .detach(|| dpmm::Measurements::load(&path))
            .map_err(py_err)?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The answers to `workload` (and with `out`, written there with
    /// their sidecar; with `report`, the HTML page): refused, with
    /// nothing written, for a query outside the strategy's row space.
    /// `progress` and `spinner` as [`plan`]'s.
    #[pyo3(signature = (workload, nonneg=false, max_memory=None, out=None, report=None, progress=None, spinner=true))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn answer<'py>(
        &self,
        py: Python<'py>,
        workload: &Workload,
        nonneg: bool,
        max_memory: Option<u64>,
        out: Option<PathBuf>,
        report: Option<PathBuf>,
        progress: Option<Bound<'py, PyAny>>,
        spinner: bool,
    ) -> PyResult<Released<'py>> {
        let options = dpmm::measurements::AnswerOptions { nonneg, max_memory };
        let doc = workload.inner.document("the workload");
        let inner = self.inner.clone();
        let spinner = if spinner && progress.is_none() {
            self::spinner(py, "answering")
        } else {
            Spinner::hidden()
        };
        let shown = spinner.clone();
        let work = move || -> dpmm::Result<dpmm::Answers> {
            inner.check_outputs(None, out.as_deref(), nonneg, report.as_deref())?;
            let answers = shown.show(|| inner.answer_with(doc, &options))?;
            dpmm::Measurements::write(&answers, out.as_deref(), report.as_deref())?;
            Ok(answers)
        };
        let result = interruptible_with(py, progress.as_ref(), Holds::Rust, work);
        spinner.finish();
        let (outcome, raised) = result?;
        if let Some(raised) = raised {
            return Err(raised);
        }
        let answers = outcome.map_err(py_err)?;
        let warnings = answers.warnings().to_vec();
        Ok(columns(py, &answers, warnings))
    }

    /// The most specific marginals the file can answer (attribute names
    /// in domain order; every marginal inside one is answerable too).
    fn estimable(&self, py: Python<'_>) -> PyResult<Vec<Vec<String>>> {
        py.detach(|| self.inner.estimable()).map_err(py_err)
    }

    /// The noisy measurements (strategy rows).
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The release's ε and δ (`None` under pure ε-DP).
    #[getter]
    fn budget(&self) -> PyResult<(f64, Option<f64>)> {
        let b = self.inner.budget().map_err(py_err)?;
        Ok((b.epsilon().get(), b.delta().map(|d| d.get())))
    }

    /// The release's domain: (attribute name, size) in order.
    #[getter]
    fn domain(&self) -> Vec<(String, usize)> {
        self.inner
            .schema()
            .domain()
            .attributes()
            .iter()
            .map(|a| (a.name.clone(), a.size))
            .collect()
    }
}

/// A continual release of running counts (`dpmm stream`) of records (a
/// file at `path`, or an Arrow `stream`), written to `out` (and its
/// sidecar `<out>.json`, and with `nonneg` the non-negative running
/// counts): the summary line. Everything is refused before the charge;
/// once charged the stream runs to its end and an interrupt is raised
/// after it.
#[pyfunction]
#[pyo3(signature = (schema, workload, ledger, epsilon, out, time_column, steps, delta=None, path=None, stream=None, start=None, step=None, timezone=None, bands=None, nonneg=false, privacy_unit=None, max_records_per_unit=None, max_steps_per_unit=None, min_separation=None, report=None, progress=None, spinner=true))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
fn stream(
    py: Python<'_>,
    schema: &Schema,
    workload: &Workload,
    ledger: PathBuf,
    epsilon: f64,
    out: PathBuf,
    time_column: String,
    steps: usize,
    delta: Option<f64>,
    path: Option<PathBuf>,
    stream: Option<PyRecordBatchReader>,
    start: Option<String>,
    step: Option<String>,
    timezone: Option<String>,
    bands: Option<usize>,
    nonneg: bool,
    privacy_unit: Option<String>,
    max_records_per_unit: Option<u32>,
    max_steps_per_unit: Option<u32>,
    min_separation: Option<u32>,
    report: Option<PathBuf>,
    progress: Option<Bound<'_, PyAny>>,
    spinner: bool,
) -> PyResult<(String, bool)> {
    let budget = budget(epsilon, delta)?;
    if min_separation.is_some() && max_steps_per_unit.is_none() {
        return Err(parameter_err("min_separation goes with max_steps_per_unit"));
    }
    let (start, calendar) =
        dpmm::stream::clock(start.as_deref(), step.as_deref(), timezone.as_deref())
            .map_err(py_err)?;
    let people = dpmm::dpmm_records::People {
        steps: max_steps_per_unit.map(|max_steps| dpmm::dp_core::kernel::records::StepBound {
            max_steps,
            min_separation: min_separation.unwrap_or(1),
        }),
        ..people(privacy_unit, max_records_per_unit, None, None)?
    };
    let data = data(path, stream, false)?;
    // The outputs never land on the ledger, its head or the records.
    let head = dpmm::dp_core::ledger::head_path(&ledger);
    let inputs: Vec<PathBuf> = [ledger.clone(), head]
        .into_iter()
        .chain(data.path().cloned())
        .collect();
    let sidecar = dpmm::answers::sidecar_path(&out);
    let nonneg_out = nonneg.then(|| dpmm::stream::nonneg_path(&out));
    let outputs: Vec<&PathBuf> = [&out, &sidecar]
        .into_iter()
        .chain(nonneg_out.as_ref())
        .chain(report.as_ref())
        .collect();
    if (1..outputs.len()).any(|i| outputs[..i].contains(&outputs[i])) {
        return Err(parameter_err(
            "the running counts, their sidecar, the nonneg file and the report need paths of \
             their own",
        ));
    }
    for p in outputs {
        dpmm::output::check_output(p, &inputs).map_err(py_err)?;
        dpmm::output::check_writable(p).map_err(py_err)?;
    }
    let run = dpmm::stream::StreamRelease {
        schema: schema.doc.clone(),
        workload: workload.inner.document("the workload"),
        budget,
        ledger,
        time_column,
        start,
        calendar,
        steps,
        bands,
        nonneg,
        people,
        report,
    };
    let holds = holds(&data);
    let source = data.into_source(|f| Box::new(f)).map_err(py_err)?;
    let spinner = if spinner && progress.is_none() && stderr_is_terminal(py) {
        Spinner::plain("streaming")
    } else {
        Spinner::hidden()
    };
    let shown = spinner.clone();
    let result = interruptible_with(py, progress.as_ref(), holds, move || {
        shown.show(|| run.run(source, &out))
    });
    spinner.finish();
    match result? {
        // Past its charge: the running counts are written.
        (Ok(summary), Some(_)) => Ok((describe(&summary), true)),
        (_, Some(raised)) => Err(raised),
        (summary, None) => Ok((describe(&summary.map_err(py_err)?), false)),
    }
}

fn describe(summary: &dpmm::stream::StreamSummary) -> String {
    format!(
        "{} queries a step, {}; ledger entry {}",
        summary.queries,
        summary.noise.describe(),
        summary.ledger_entry
    )
}

/// The curator's check of records or a counts table (a file at `path`, or
/// an Arrow `stream`) under `schema` (and, for a stream, its time column,
/// steps and start): the report as JSON. Exact figures, not private; spends
/// and writes nothing.
#[pyfunction]
#[pyo3(signature = (schema, path=None, stream=None, counts=false, workload=None, time_column=None, steps=None, start=None, step=None, timezone=None, privacy_unit=None, max_records_per_unit=None, weight=None, max_weight=None, max_steps_per_unit=None, min_separation=None))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
fn check(
    py: Python<'_>,
    schema: &Schema,
    path: Option<PathBuf>,
    stream: Option<PyRecordBatchReader>,
    counts: bool,
    workload: Option<&Workload>,
    time_column: Option<String>,
    steps: Option<u64>,
    start: Option<String>,
    step: Option<String>,
    timezone: Option<String>,
    privacy_unit: Option<String>,
    max_records_per_unit: Option<u32>,
    weight: Option<String>,
    max_weight: Option<f64>,
    max_steps_per_unit: Option<u32>,
    min_separation: Option<u32>,
) -> PyResult<String> {
    if max_steps_per_unit.is_some() && (privacy_unit.is_none() || time_column.is_none()) {
        return Err(parameter_err(
            "max_steps_per_unit bounds a stream's privacy unit: give time_column and privacy_unit",
        ));
    }
    if min_separation.is_some() && max_steps_per_unit.is_none() {
        return Err(parameter_err("min_separation goes with max_steps_per_unit"));
    }
    let people = dpmm::dpmm_records::People {
        steps: max_steps_per_unit.map(|max_steps| dpmm::dp_core::kernel::records::StepBound {
            max_steps,
            min_separation: min_separation.unwrap_or(1),
        }),
        ..people(privacy_unit, max_records_per_unit, weight, max_weight)?
    };
    let data = data(path, stream, counts)?;
    let (start, calendar) =
        dpmm::stream::clock(start.as_deref(), step.as_deref(), timezone.as_deref())
            .map_err(py_err)?;
    let time = match (time_column, steps) {
        (Some(column), Some(steps)) => Some(dpmm::check::StreamTime {
            column,
            steps,
            start,
            calendar,
        }),
        (None, None) if calendar.is_some() || start != 0 => {
            return Err(parameter_err(
                "start, step and timezone place a stream's steps: give time_column and steps",
            ));
        }
        (None, None) => None,
        _ => {
            return Err(parameter_err("time_column and steps go together"));
        }
    };
    let spec = workload.map(|w| w.inner.document("the workload"));
    let doc = schema.doc.clone();
    let holds = holds(&data);
    let report = uninterrupted(py, holds, move || {
        dpmm::check::check(&doc, data, spec.as_ref(), time.as_ref(), &people)
    })?
    .map_err(py_err)?;
    serde_json::to_string(&report).map_err(|e| py_err(Error::Internal(e.to_string())))
}

/// A float64 array's entries as a matrix: a view of its memory when it is
/// C- or Fortran-contiguous, a copy otherwise.
enum Matrix<'a> {
    View(MatRef<'a, f64>),
    Owned(Mat<f64>),
}

impl Matrix<'_> {
    fn as_ref(&self) -> MatRef<'_, f64> {
        match self {
            Self::View(m) => *m,
            Self::Owned(m) => m.as_ref(),
        }
    }
}

fn matrix<'a>(a: &'a PyReadonlyArray2<'_, f64>) -> PyResult<Matrix<'a>> {
    let (m, n) = (a.shape()[0], a.shape()[1]);
    if a.is_c_contiguous() || a.is_fortran_contiguous() {
        let data = a.as_slice().map_err(|e| parameter_err(e.to_string()))?;
        return Ok(Matrix::View(if a.is_c_contiguous() {
            MatRef::from_row_major_slice(data, m, n)
        } else {
            MatRef::from_column_major_slice(data, m, n)
        }));
    }
    let view = a.as_array();
    Ok(Matrix::Owned(Mat::from_fn(m, n, |i, j| view[[i, j]])))
}

/// A matrix as a new C-ordered float64 array.
fn to_numpy<'py>(py: Python<'py>, m: MatRef<'_, f64>) -> PyResult<Bound<'py, PyAny>> {
    let mut data = Vec::with_capacity(m.nrows() * m.ncols());
    for i in 0..m.nrows() {
        data.extend((0..m.ncols()).map(|j| m[(i, j)]));
    }
    Ok(PyArray1::from_vec(py, data)
        .reshape([m.nrows(), m.ncols()])?
        .into_any())
}

/// Optimizes a strategy for `w` with the registered `optimizer` under
/// `privacy` (`pure` or `approx`); every figure recomputed from `w` and
/// the strategy.
#[pyfunction]
#[pyo3(signature = (w, optimizer, privacy, branching=None, effort=None))]
fn optimize<'py>(
    py: Python<'py>,
    w: PyReadonlyArray2<'py, f64>,
    optimizer: &str,
    privacy: &str,
    branching: Option<usize>,
    effort: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let model = privacy_model(privacy)?;
    let params = Params {
        branching,
        effort,
        ..Params::default()
    };
    // Owned: a worker interrupted before it ends is not waited for.
    let w = matrix(&w)?.as_ref().to_owned();
    let optimizer = optimizer.to_owned();
    let spinner = spinner(py, "optimizing");
    let shown = spinner.clone();
    let o = uninterrupted(py, Holds::Rust, move || {
        shown.show(|| dpmm::matrix::optimize(w.as_ref(), &optimizer, model, &params, &mut ()))
    });
    spinner.finish();
    let o = o?.map_err(dp_err)?;
    let out = PyDict::new(py);
    out.set_item("strategy", to_numpy(py, o.strategy.as_ref())?)?;
    out.set_item("optimizer", o.optimizer)?;
    out.set_item("privacy", o.privacy.name())?;
    out.set_item("objective", o.verified.objective)?;
    out.set_item("svd_bound", o.verified.svd_bound)?;
    out.set_item("lower_bound", o.verified.lower_bound)?;
    out.set_item("duality_gap", o.verified.duality_gap)?;
    out.set_item("termination", o.report.termination.to_string())?;
    out.set_item("converged", o.report.termination.converged())?;
    out.set_item("iterations", o.report.iterations)?;
    out.set_item("seconds", o.report.seconds)?;
    Ok(out)
}

/// Evaluates strategy `a` for workload `w` at ε (or (ε, δ), zCDP
/// calibration, as a release adds noise).
#[pyfunction]
#[pyo3(signature = (w, a, epsilon, delta=None))]
fn error<'py>(
    py: Python<'py>,
    w: PyReadonlyArray2<'py, f64>,
    a: PyReadonlyArray2<'py, f64>,
    epsilon: f64,
    delta: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let budget = budget(epsilon, delta)?;
    let (w, a) = (matrix(&w)?, matrix(&a)?);
    let (wr, ar) = (w.as_ref(), a.as_ref());
    let e = py
        .detach(|| dpmm::matrix::error(wr, ar, budget, GaussianCalibration::Zcdp))
        .map_err(dp_err)?;
    let out = PyDict::new(py);
    out.set_item("privacy", e.privacy.name())?;
    out.set_item("objective", e.objective)?;
    out.set_item(
        "expected_total_squared_error",
        e.expected_total_squared_error,
    )?;
    out.set_item("supported", e.supported)?;
    out.set_item("support_residual", e.support_residual)?;
    out.set_item("strategy_rank", e.strategy_rank)?;
    out.set_item("trace", e.trace)?;
    out.set_item("sensitivity", e.sensitivity)?;
    out.set_item("noise_scale", e.noise_scale)?;
    Ok(out)
}

/// The registered optimizers: (name, description, privacy models).
#[pyfunction]
fn optimizers() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    dpmm::dp_opt::REGISTRY
        .iter()
        .map(|d| {
            let models = d.privacy.iter().map(|m| m.name()).collect();
            (d.name, d.description, models)
        })
        .collect()
}

/// The workload `name` (`identity`, `prefix`, `all_range`) on `n` cells.
#[pyfunction]
fn workload_matrix<'py>(py: Python<'py>, name: &str, n: usize) -> PyResult<Bound<'py, PyAny>> {
    let m = dpmm::matrix::workload(name, n).map_err(dp_err)?;
    to_numpy(py, m.as_ref())
}

/// A factorization `W = BC` of a streaming workload and its figures
/// ([`dpmm::dp_stream`]), as `cargo xtask factorize` prints them.
#[pyfunction]
#[pyo3(signature = (steps, family, workload="prefix", bands=None, buffers=None,
                    participations=None, separation=None, objective="total"))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
fn factorize<'py>(
    py: Python<'py>,
    steps: usize,
    family: &str,
    workload: &str,
    bands: Option<usize>,
    buffers: Option<usize>,
    participations: Option<usize>,
    separation: Option<usize>,
    objective: &str,
) -> PyResult<Bound<'py, PyDict>> {
    use dpmm::dp_stream::{Family, Objective, Participation, Stream, StreamQuery};
    let stream =
        Stream::new(workload.parse::<StreamQuery>().map_err(dp_err)?, steps).map_err(dp_err)?;
    let family = Family::from_name(family).map_err(dp_err)?;
    let objective = Objective::from_name(objective).map_err(dp_err)?;
    let participation = match (participations, separation) {
        (None, None) => Participation::Single,
        (Some(k), Some(b)) => Participation::Multi {
            participations: k,
            separation: b,
        },
        _ => {
            return Err(parameter_err("participations and separation go together"));
        }
    };
    if bands.is_some() && family != Family::Banded {
        return Err(parameter_err("bands applies to family 'banded' only"));
    }
    if buffers.is_some() && family != Family::Blt {
        return Err(parameter_err("buffers applies to family 'blt' only"));
    }
    let (f, figures, seconds) = py
        .detach(|| {
            let started = std::time::Instant::now();
            let (f, _) = dpmm::dp_stream::factorize(
                &stream,
                family,
                bands,
                buffers,
                participation,
                objective,
            )?;
            let figures = f.figures(participation)?;
            Ok((f, figures, started.elapsed().as_secs_f64()))
        })
        .map_err(dp_err)?;
    let out = PyDict::new(py);
    out.set_item("family", family.name())?;
    out.set_item("workload", workload)?;
    out.set_item("steps", steps)?;
    out.set_item("total_squared_error", figures.total_squared_error)?;
    out.set_item("max_variance", figures.max_variance)?;
    out.set_item("sensitivity", figures.sensitivity.value)?;
    out.set_item("sensitivity_lower", figures.sensitivity.lower)?;
    out.set_item("sensitivity_exact", figures.sensitivity.is_exact())?;
    out.set_item("lower_bound", figures.lower_bound.map(|(total, _)| total))?;
    out.set_item("lower_bound_max", figures.lower_bound.map(|(_, max)| max))?;
    out.set_item(
        "duality_gap",
        f.certificate.as_ref().map(|c| c.relative_gap),
    )?;
    out.set_item(
        "certified_lower_bound",
        f.certificate.as_ref().map(|c| c.lower_bound),
    )?;
    out.set_item("termination", f.termination.as_ref().map(|t| t.to_string()))?;
    out.set_item(
        "bands",
        f.toeplitz_c()
            .filter(|_| family == Family::Banded)
            .map(<[f64]>::len),
    )?;
    out.set_item("buffers", f.blt.as_ref().map(|b| b.buffers()))?;
    out.set_item("seconds", seconds)?;
    Ok(out)
}

/// DP-FTRL's correlated noise, with the data inside the kernel: the
/// kernel's streaming mechanism (a banded Toeplitz strategy, exact
/// discrete Gaussian noise), charged once to a ledger for the horizon.
#[pyclass(module = "dpmatrix._dpmatrix")]
struct DpFtrl {
    inner: dpmm::dp_core::StreamMechanism,
    ledger_entry: usize,
}

#[pymethods]
impl DpFtrl {
    #[new]
    #[pyo3(signature = (ledger, epsilon, delta, steps, dimension, clip_norm, bands=None,
                        participations=1, separation=1, objective="max", coefficients=None))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn new(
        py: Python<'_>,
        ledger: PathBuf,
        epsilon: f64,
        delta: f64,
        steps: usize,
        dimension: usize,
        clip_norm: f64,
        bands: Option<usize>,
        participations: usize,
        separation: usize,
        objective: &str,
        coefficients: Option<Vec<f64>>,
    ) -> PyResult<Self> {
        use dpmm::dp_core::{Contribution, StreamSpec};
        use dpmm::dp_stream::{Objective, Participation};
        let budget = budget(epsilon, Some(delta))?;
        let objective = Objective::from_name(objective).map_err(dp_err)?;
        if participations == 0 || separation == 0 {
            return Err(parameter_err(
                "participations and separation must be at least 1",
            ));
        }
        let participation = if participations == 1 {
            Participation::Single
        } else {
            Participation::Multi {
                participations,
                separation,
            }
        };
        if coefficients.is_some() && bands.is_some() {
            return Err(parameter_err("give coefficients or bands, not both"));
        }
        let (inner, ledger_entry) = py
            .detach(|| -> dpmm::Result<_> {
                let coefficients = match coefficients {
                    Some(c) => c,
                    None => {
                        // At most the separation under several
                        // participations (where the sensitivity is exact).
                        let most = if participations > 1 { separation } else { steps };
                        let bands = bands
                            .unwrap_or(dpmm::stream::DEFAULT_BANDS.min(steps.max(1)).min(most));
                        dpmm::stream::banded_coefficients(steps, bands, participation, objective)?
                    }
                };
                let spec = StreamSpec {
                    coefficients,
                    horizon: steps,
                    dimension,
                    participations,
                    separation,
                    contribution: Contribution::Clipped { norm: clip_norm },
                };
                let label = format!(
                    "DP-FTRL stream of {steps} steps × {dimension} (epsilon {epsilon}, delta {delta})"
                );
                dpmm::stream::open_stream(&ledger, budget, &spec, &label, || Ok(()))
            })
            .map_err(py_err)?;
        Ok(Self {
            inner,
            ledger_entry,
        })
    }

    /// The next step: each row of `rows` (n × dimension) is one
    /// contribution, clipped and put on the lattice by the kernel; returns
    /// the private sum of the clipped rows (x̂_t = x_t + (C⁻¹z)_t).
    #[pyo3(signature = (rows=None))]
    fn next<'py>(
        &mut self,
        py: Python<'py>,
        rows: Option<PyReadonlyArray2<'py, f64>>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let data: Vec<f64> = match &rows {
            None => Vec::new(),
            Some(a) => {
                let (n, d) = (a.shape()[0], a.shape()[1]);
                if d != self.inner.dimension() && n > 0 {
                    return Err(parameter_err(format!(
                        "rows have {d} columns for a stream of dimension {}",
                        self.inner.dimension()
                    )));
                }
                match a.as_slice() {
                    Ok(s) => s.to_vec(),
                    Err(_) => a.as_array().iter().copied().collect(),
                }
            }
        };
        let inner = &mut self.inner;
        let released = py.detach(|| inner.next_clipped(&data)).map_err(dp_err)?;
        Ok(PyArray1::from_vec(py, released))
    }

    /// Steps released so far.
    #[getter]
    fn step(&self) -> usize {
        self.inner.step()
    }

    /// The horizon charged for.
    #[getter]
    fn steps(&self) -> usize {
        self.inner.horizon()
    }

    /// Values per step.
    #[getter]
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    /// The kernel's figures: (rho, sensitivity, sigma, coefficient bits,
    /// sensitivity exact).
    #[getter]
    fn figures(&self) -> (f64, f64, f64, u32, bool) {
        let f = self.inner.figures();
        (
            f.rho,
            f.sensitivity,
            f.sigma,
            f.coefficient_bits,
            f.sensitivity_exact,
        )
    }

    /// The quantized strategy's coefficients (C's first column).
    #[getter]
    fn coefficients(&self) -> Vec<f64> {
        self.inner.coefficients().to_vec()
    }

    /// (variance of each coordinate of the last step, of its running sum).
    #[getter]
    fn variances(&self) -> (f64, f64) {
        self.inner.variances()
    }

    /// The ledger entry charged.
    #[getter]
    fn ledger_entry(&self) -> usize {
        self.ledger_entry
    }
}

/// The module.
#[pymodule]
fn _dpmatrix(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Workload>()?;
    m.add_class::<Schema>()?;
    m.add_class::<Plan>()?;
    m.add_class::<DpFtrl>()?;
    m.add_class::<Measurements>()?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(ledger_create, m)?)?;
    m.add_function(wrap_pyfunction!(ledger_status, m)?)?;
    m.add_function(wrap_pyfunction!(release, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(stream, m)?)?;
    m.add_function(wrap_pyfunction!(optimize, m)?)?;
    m.add_function(wrap_pyfunction!(error, m)?)?;
    m.add_function(wrap_pyfunction!(optimizers, m)?)?;
    m.add_function(wrap_pyfunction!(workload_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(factorize, m)?)?;
    m.add_function(wrap_pyfunction!(_join_workers, m)?)?;
    spark::register(m)?;
    Ok(())
}
