"""dpmatrix: differentially private answers to linear counting queries.

The dpmm library for Python. A workload spec names the queries; a plan
optimizes the strategy of queries actually measured (once per workload and
privacy model, never reading data); a ledger holds a dataset's privacy
budget; a release charges it, measures through dpmm's privacy kernel
(exact discrete Laplace or Gaussian noise) and returns every query's
answer with its standard error and 95% interval::

    import dpmatrix as dm

    wl = dm.Workload.from_json("spec.json")
    schema = dm.Schema.from_json("schema.json")
    plan = dm.plan(wl, epsilon=1.0)
    ledger = dm.Ledger.create("ledger.jsonl", total_epsilon=1.0)
    answers = dm.release(df, schema=schema, plan=plan, epsilon=1.0, ledger=ledger)

The research layer works on numpy matrices: :func:`optimize` a strategy
for a workload matrix with any registered optimizer, :func:`error` of a
(workload, strategy) pair, :mod:`dpmatrix.workloads` for the classic
workloads.

Errors are exceptions, one class per kind under :class:`DpmmError`
(:mod:`dpmatrix.errors`), with the ``dpmm`` command's one-line messages:
:class:`SchemaError`, :class:`WorkloadError`, :class:`DataError`,
:class:`ParameterError`, :class:`LedgerError` and :class:`InputError` for
bad input (each also a ``ValueError``), :class:`BudgetExceeded` for an
overspend, :class:`InternalError` (a ``RuntimeError``) for a failure on
valid input, :class:`Cancelled` (a ``KeyboardInterrupt``); ``OSError``
for a missing file. Every refusal comes before a release's charge.
"""

from __future__ import annotations

import atexit
import dataclasses
import errno
import io
import json
import os
import sys
import tempfile
import warnings
from typing import Any, Mapping, Optional, Union

import numpy as np
import pandas as pd

from . import _dpmatrix, workloads
from .errors import (
    BudgetExceeded,
    Cancelled,
    DataError,
    DpmmError,
    InputError,
    InternalError,
    LedgerError,
    ParameterError,
    SchemaError,
    WorkloadError,
)

# A call interrupted before any charge returns at once and leaves its
# worker to stop at its next check; one still holding Python objects (an
# Arrow stream) is waited for before the interpreter finalizes.
atexit.register(_dpmatrix._join_workers)

__all__ = [
    "BudgetExceeded",
    "Cancelled",
    "DataError",
    "DpFtrl",
    "DpmmError",
    "DpmmWarning",
    "InputError",
    "InternalError",
    "LedgerError",
    "ParameterError",
    "SchemaError",
    "WorkloadError",
    "FactorizeResult",
    "Ledger",
    "Measurements",
    "OptimizeResult",
    "Plan",
    "Schema",
    "Workload",
    "check",
    "error",
    "factorize",
    "optimize",
    "optimizers",
    "plan",
    "release",
    "stream",
    "workloads",
]

__version__ = "0.1.0"

PathLike = Union[str, "os.PathLike[str]"]


class DpmmWarning(UserWarning):
    """Something the caller must know about a release that still succeeded
    (a ledger without its head anchor, for one)."""


def _existing(path: PathLike) -> str:
    """The path as a string, or ``FileNotFoundError`` when nothing is there."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), p)
    return p


def _json_text(value: Mapping[str, Any], what: str, error: type) -> str:
    if not isinstance(value, Mapping):
        raise error(f"{what} must be a dict, got {type(value).__name__}")
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise error(f"{what} is not JSON: {e}") from None


class Workload:
    """A workload spec (format: ``docs/formats.md``), read and validated once."""

    def __init__(self, _native: "_dpmatrix.Workload") -> None:
        self._native = _native

    @classmethod
    def from_json(cls, path: PathLike) -> "Workload":
        """Reads the spec file at ``path`` (its ``.npy`` factors relative to it)."""
        return cls(_dpmatrix.Workload.from_path(_existing(path)))

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any], base: PathLike = ".") -> "Workload":
        """The spec given as a dict; its ``.npy`` factors are relative to ``base``."""
        text = _json_text(spec, "the workload spec", WorkloadError)
        return cls(_dpmatrix.Workload.from_text(text, "the workload spec", os.fspath(base)))

    @property
    def queries(self) -> int:
        """The number of queries."""
        return int(self._native.queries)

    @property
    def domain(self) -> list[tuple[str, int]]:
        """The attributes and their sizes, in order."""
        return list(self._native.domain)

    @property
    def groups(self) -> pd.DataFrame:
        """The query groups: label, queries, weight."""
        rows = self._native.groups
        return pd.DataFrame(rows, columns=["label", "queries", "weight"]).astype(
            {"queries": "int64"}
        )

    def to_dict(self) -> dict[str, Any]:
        """The spec, matrix factors inline."""
        return json.loads(self._native.spec_json)

    def __repr__(self) -> str:
        return f"<dpmatrix.Workload: {self.queries} queries on {len(self.domain)} attributes>"


class Schema:
    """A records schema: the columns and their public domains (``docs/formats.md``)."""

    def __init__(self, _native: "_dpmatrix.Schema") -> None:
        self._native = _native

    @classmethod
    def from_json(cls, path: PathLike) -> "Schema":
        """Reads the schema file at ``path``."""
        return cls(_dpmatrix.Schema.from_path(_existing(path)))

    @classmethod
    def from_dict(cls, schema: Mapping[str, Any]) -> "Schema":
        """The schema given as a dict."""
        return cls(_dpmatrix.Schema.from_text(_json_text(schema, "the schema", SchemaError), "the schema"))

    @property
    def domain(self) -> list[tuple[str, int]]:
        """The attributes and their sizes, in order."""
        return list(self._native.domain)

    def __repr__(self) -> str:
        return f"<dpmatrix.Schema: {len(self.domain)} attributes>"


class Plan:
    """A strategy planned for a workload (:func:`plan`), or a plan file read
    back (:meth:`load`, figures recomputed)."""

    def __init__(self, _native: "_dpmatrix.Plan") -> None:
        self._native = _native

    @classmethod
    def load(cls, path: PathLike) -> "Plan":
        """Reads a plan file written by :meth:`save` or ``dpmm plan``; its
        figures are recomputed from its strategy, and an edited file is refused."""
        return cls(_dpmatrix.Plan.load(_existing(path)))

    @property
    def objective(self) -> Optional[float]:
        """The objective: ``l1_obj`` (pure) or ``l2_obj`` (approx), the sum of
        the queries' variances in units of the noise scale, or the largest
        one for a max-variance plan."""
        return self._native.objective

    @property
    def objective_name(self) -> str:
        """``l1_obj``, ``l2_obj`` or ``max_variance``."""
        return self._native.objective_name

    @property
    def lower_bound(self) -> Optional[float]:
        """A proven lower bound on the optimal objective, when one is known."""
        return self._native.lower_bound

    @property
    def duality_gap(self) -> Optional[float]:
        """``(objective - lower_bound) / objective``, when both are known."""
        return self._native.duality_gap

    @property
    def privacy(self) -> str:
        """``pure`` or ``approx``."""
        return self._native.privacy

    @property
    def epsilon(self) -> float:
        """The ε the expected errors are stated at."""
        return self._native.epsilon

    @property
    def delta(self) -> Optional[float]:
        """The δ the expected errors are stated at (``None``: pure ε-DP)."""
        return self._native.delta

    @property
    def groups(self) -> pd.DataFrame:
        """Per query group: label, queries, and the expected RMSE of its
        answers (in counts) when released at the plan's own ``epsilon`` and
        ``delta``. A release of this plan at another budget has other
        errors: its answers' ``std_error`` column states them."""
        return pd.DataFrame(self._native.groups, columns=["label", "queries", "rmse"])

    @property
    def report(self) -> Optional[dict[str, Any]]:
        """The planner's full report (a plan just optimized), else ``None``."""
        text = self._native.report_json()
        return None if text is None else json.loads(text)

    def save_report(self, path: PathLike) -> None:
        """Writes the plan's HTML report (the expected RMSE per query group,
        one self-contained page) to ``path``."""
        with open(os.fspath(path), "w", encoding="utf-8") as out:
            out.write(self._native.report_html())

    def save(self, path: PathLike) -> None:
        """Writes the plan file (atomically), workload included."""
        self._native.save(os.fspath(path))

    def to_json(self) -> str:
        """The plan file's text."""
        return self._native.to_json()

    def __repr__(self) -> str:
        return (
            f"<dpmatrix.Plan: {self.privacy}, {self.objective_name} = {self.objective}, "
            f"lower bound {self.lower_bound}>"
        )


def plan(
    workload: Workload,
    epsilon: float,
    delta: Optional[float] = None,
    objective: str = "total",
    *,
    max_memory: Optional[int] = None,
    progress: Any = None,
) -> Plan:
    """Optimizes the strategy for ``workload``: pure ε-DP, or (ε, δ) when
    ``delta`` is given; ``objective`` is ``"total"`` (the sum of the
    queries' variances) or ``"max"`` (the largest; (ε, δ) marginal
    workloads). Reads no data and spends nothing; ``max_memory`` in bytes
    (default: half the physical memory).

    ``progress``: ``None`` (the default) shows a spinner with the planner's
    passes and iterations against their budgets when ``sys.stderr`` is a
    terminal; ``True`` shows them always (a ``tqdm`` bar when tqdm is
    installed, so that a notebook shows it; else a line on stderr);
    ``False`` shows nothing; a callable is called with each new progress
    line (``"passes 1/20 › iterations 58/2000 (2.9%)"``, at most every
    100 ms, on the calling thread; an exception it raises stops the plan
    as Ctrl-C does)."""
    if not isinstance(workload, Workload):
        raise ParameterError(f"workload must be a dpmatrix.Workload, got {type(workload).__name__}")
    callback, spinner = _progress(progress, "planning")
    try:
        return Plan(
            _dpmatrix.plan(
                workload._native, epsilon, delta, objective, max_memory,
                progress=callback, spinner=spinner,
            )
        )
    finally:
        _close(callback)


class _ProgressLine:
    """Progress lines shown by tqdm when it is installed, else on stderr."""

    def __init__(self, what: str) -> None:
        self.what = what
        try:
            from tqdm.auto import tqdm

            self.bar = tqdm(bar_format="{desc} [{elapsed}]", desc=what)
        except ImportError:
            self.bar = None
        self.shown = False

    def __call__(self, line: str) -> None:
        text = f"{self.what}: {line}"
        if self.bar is not None:
            self.bar.set_description_str(text)
        else:
            sys.stderr.write("\r" + text)
            sys.stderr.flush()
            self.shown = True

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.shown:
            sys.stderr.write("\n")


def _close(callback: Any) -> None:
    """Ends a progress line this package made (not a user's callable)."""
    if isinstance(callback, _ProgressLine):
        callback.close()


def _progress(progress: Any, what: str):
    """A call's ``progress=`` as (the callable the binding calls, whether
    it shows its own spinner on a terminal)."""
    if progress is None:
        return None, True
    if progress is False:
        return None, False
    if progress is True:
        return _ProgressLine(what), False
    if callable(progress):
        return progress, False
    raise ParameterError(f"progress must be None, True, False or a callable, got {progress!r}")


class Ledger:
    """A dataset's durable privacy budget: the ``dpmm`` command's file and
    lock, so a notebook and the command share one budget. Figures are in
    the ledger's unit (``epsilon``, or ``rho`` for an (ε, δ) ledger, kept
    as ρ-zCDP) and read afresh on every access."""

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)

    @classmethod
    def create(
        cls, path: PathLike, total_epsilon: float, total_delta: Optional[float] = None
    ) -> "Ledger":
        """Creates a ledger holding ε (or (ε, δ)); refuses an existing one."""
        p = os.fspath(path)
        if os.path.exists(p):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), p)
        _dpmatrix.ledger_create(p, total_epsilon, total_delta)
        return cls(p)

    @classmethod
    def open(cls, path: PathLike) -> "Ledger":
        """An existing ledger, checked (chain, totals and head)."""
        ledger = cls(_existing(path))
        ledger._status()
        return ledger

    def _status(self) -> tuple[str, float, float, float, int]:
        return _dpmatrix.ledger_status(_existing(self.path))

    @property
    def unit(self) -> str:
        """``epsilon`` or ``rho``."""
        return self._status()[0]

    @property
    def total(self) -> float:
        """The budget it holds."""
        return self._status()[1]

    @property
    def spent(self) -> float:
        """What the releases charged to it have spent."""
        return self._status()[2]

    @property
    def remaining(self) -> float:
        """What is left."""
        return self._status()[3]

    @property
    def releases(self) -> int:
        """The releases charged to it."""
        return self._status()[4]

    def __repr__(self) -> str:
        unit, total, spent, remaining, _ = self._status()
        return f"<dpmatrix.Ledger {self.path!r}: {spent:g} of {total:g} {unit} spent>"


#: Rows per Arrow batch made from a pandas DataFrame.
_CHUNK_ROWS = 1 << 16


def _text(value: Any) -> Optional[str]:
    """One value of a pandas object column as the text it stands for:
    null for None, NaN and NA; ``true``/``false`` for booleans; an integer's
    digits; a float's shortest round-trip form; other text as UTF-8 (a
    character that has none, a lone surrogate, replaced). Each value is
    converted by itself, so a record's text never depends on the other
    rows, and every value converts: one that cannot be written as text at
    all (an integer past Python's 4,300 digits, an object whose ``str``
    raises) is null — missing — rather than an error that one row could
    cause for the whole release."""
    try:
        if value is None or value is pd.NA or value is pd.NaT:
            return None
        if isinstance(value, str):
            text = value
        elif isinstance(value, (bool, np.bool_)):
            return "true" if value else "false"
        elif isinstance(value, (int, np.integer)):
            return str(int(value))
        elif isinstance(value, (float, np.floating)):
            number = float(value)
            return None if number != number else repr(number)
        elif isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        else:
            text = str(value)
        return text.encode("utf-8", "replace").decode("utf-8")
    except Exception:  # noqa: BLE001 (any failure of one value is that value's)
        return None


#: Arrow types of text: a column of one of them converts value by value
#: when pyarrow cannot convert a chunk whole.
def _is_text(kind: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or (
        pa.types.is_string_view(kind) if hasattr(pa.types, "is_string_view") else False)


def _pandas_type(series: pd.Series) -> Any:
    """The Arrow type a pandas column is sent as, from its dtype alone
    (never from its values, which could make one row change how the others
    are read): an object column is text (64-bit offsets: no chunk of text
    can overflow them), every other dtype what pyarrow makes of it, text
    where pyarrow has no conversion for the dtype."""
    import pyarrow as pa

    if series.dtype == object:
        return pa.large_string()
    try:
        kind = pa.array(series.iloc[:0], from_pandas=True).type
    except Exception:  # noqa: BLE001 (a dtype pyarrow does not convert)
        return pa.large_string()
    return pa.large_string() if _is_text(kind) else kind


def _pandas_column(series: pd.Series, kind: Any) -> Any:
    """One chunk of a pandas column as an Arrow array of type ``kind``.
    Text value by value (:func:`_text`) where pyarrow cannot convert the
    chunk whole (an object column mixing strings and numbers, a lone
    surrogate); for other types, value by value too, a value pyarrow
    cannot convert being null. Never an error that one row could cause."""
    import pyarrow as pa

    try:
        array = pa.array(series, type=kind, from_pandas=True)
    except Exception:  # noqa: BLE001 (one value's failure is that value's)
        if _is_text(kind):
            array = pa.array([_text(v) for v in series], type=kind)
        else:
            array = pa.array([_scalar(v, kind) for v in series], type=kind)
    # Columns pyarrow backs (pandas' own Arrow strings) come chunked.
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def _scalar(value: Any, kind: Any) -> Any:
    """One value as a Python value of Arrow type ``kind``, or None."""
    import pyarrow as pa

    try:
        return pa.scalar(value, type=kind, from_pandas=True).as_py()
    except Exception:  # noqa: BLE001
        return None


def _pandas_stream(frame: pd.DataFrame, needed: list[str]) -> Any:
    """The columns ``needed`` of a DataFrame as an Arrow stream, made one
    chunk of rows at a time (memory flat in the rows); the index is not a
    column. Never text: a DataFrame is not written back as CSV."""
    import pyarrow as pa

    names = [c for c in needed if c in frame.columns]
    for c in names:
        if isinstance(frame[c], pd.DataFrame):
            raise DataError(f"the DataFrame has more than one column '{c}'")
    kinds = [_pandas_type(frame[c]) for c in names]
    schema = pa.schema([pa.field(c, k) for c, k in zip(names, kinds)])

    def batches():
        for start in range(0, len(frame), _CHUNK_ROWS):
            chunk = frame.iloc[start : start + _CHUNK_ROWS]
            arrays = [_pandas_column(chunk[c], k) for c, k in zip(names, kinds)]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def _polars_lazy_stream(frame: Any, needed: list[str]) -> Any:
    """A polars LazyFrame's columns ``needed``, collected by the streaming
    engine in batches, as an Arrow stream."""
    import pyarrow as pa

    present = set(frame.collect_schema().names())
    frame = frame.select([c for c in needed if c in present])
    schema = pa.table(frame.limit(0).collect()).schema
    if not hasattr(frame, "collect_batches"):
        return pa.table(frame.collect(engine="streaming"))

    def batches():
        for part in frame.collect_batches():
            yield from pa.table(part).cast(schema).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


def _arrow_stream(data: Any, what: str, needed: list[str]) -> Any:
    """``data`` as an object exporting the Arrow C stream interface."""
    if isinstance(data, pd.DataFrame):
        return _pandas_stream(data, needed)
    kind = type(data)
    if kind.__module__.startswith("polars") and kind.__name__ == "LazyFrame":
        return _polars_lazy_stream(data, needed)
    if hasattr(data, "__arrow_c_stream__"):
        return data
    if hasattr(data, "to_reader"):  # pyarrow before the PyCapsule interface
        return data.to_reader()
    raise ParameterError(
        f"{what} must be a path or a table exporting the Arrow C stream interface "
        f"(pyarrow, polars, DuckDB, pandas, Spark's toArrow()), got {kind.__name__}"
    )


def _needed(schema: "Schema", counts: bool, *extra: Optional[str]) -> list[str]:
    """The columns a call reads: the schema's, ``count`` for a counts
    table, and the time, privacy unit and weight columns it names."""
    names = list(schema._native.columns_read)
    if counts:
        names.append("count")
    names.extend(c for c in extra if c is not None and c not in names)
    return names


def _source(table: Any, what: str, needed: list[str]) -> dict[str, Any]:
    if isinstance(table, (str, os.PathLike)):
        return {"path": _existing(table)}
    return {"stream": _arrow_stream(table, what, needed)}


def release(
    data: Any = None,
    *,
    schema: Schema,
    epsilon: float,
    ledger: Union[Ledger, PathLike],
    plan: Optional[Plan] = None,
    workload: Optional[Workload] = None,
    delta: Optional[float] = None,
    counts: Any = None,
    max_memory: Optional[int] = None,
    report: Optional[PathLike] = None,
    nonneg: bool = False,
    privacy_unit: Optional[str] = None,
    max_records_per_unit: Optional[int] = None,
    weight: Optional[str] = None,
    max_weight: Optional[float] = None,
    measurements: Optional[PathLike] = None,
    progress: Any = None,
) -> pd.DataFrame:
    """Releases private answers to the plan's (or the workload's) queries.

    ``data`` is the records: a path (CSV, plain or gzip'ed, with a header
    row, or Parquet), or a table — anything exporting the Arrow C stream
    interface (a pyarrow Table or RecordBatchReader, a polars DataFrame, a
    DuckDB relation, Spark's ``toArrow()``), a polars LazyFrame (collected
    in streaming batches) or a pandas DataFrame (sent in chunks of rows,
    each column as its dtype says: never written back as text). Each
    value is read by itself: ``27``, ``27.0`` and ``"27"`` read alike, NaN
    and None are missing whatever the column's dtype. Or give ``counts``
    instead: a table of the schema's columns and a ``count`` column, the
    multiplicity of identical records (a whole number, e.g. one GROUP BY in
    DuckDB), never a weight. Records the schema cannot place are dropped
    without a word: :func:`check` shows the curator which (not private).

    The unit of privacy is one record (one row of ``data``) unless
    ``privacy_unit`` names the column saying whom each record is about (a
    person, a household): the kernel then keeps at most
    ``max_records_per_unit`` records of each unit, chosen at random, and
    scales the noise to protect all of them. With ``weight`` (a column of
    finite non-negative numbers) and ``max_weight``, each record counts its
    weight clipped to ``[0, max_weight]``, the noise scaled by it; answers,
    standard errors and intervals are in weighted units. The release is pure ε-DP, or (ε, δ) when
    ``delta`` is given; it is charged to ``ledger`` before any noise is
    drawn, and everything that can be refused is refused before that
    (nothing is spent on an exception).

    Returns one row per query in workload order: ``query``, ``answer``,
    ``std_error`` (exact), ``ci_low`` and ``ci_high`` (95%);
    ``attrs["sidecar"]`` says how they were made (nothing exact about the
    data) and ``attrs["warnings"]`` lists any warning, also issued as a
    :class:`DpmmWarning`. With ``report``, an HTML page is written there
    (checked writable before the charge): what was spent and is left, the
    plan's figures, and every table as a chart with its intervals. With
    ``nonneg=True`` (workloads of marginals only), a ``nonneg`` column holds
    non-negative, consistent tables estimated from the same answers
    (post-processing, no further budget; biased, so without error columns).
    With ``measurements``, the release's measurement file is written there
    (Parquet, checked writable before the charge): the noisy measurements
    and how they were made, publishable with the answers, from which
    :class:`Measurements` answers new queries at no privacy cost.

    ``progress`` is :func:`plan`'s: the planning's passes and iterations,
    then the share of a file's records read (a percentage only: never a
    count of records), then the query products reconstructed. A callable's
    exception stops the release as Ctrl-C does: before the charge nothing
    is spent; after it the release runs to its end and its answers are
    returned with a warning.
    """
    _check_release(schema, plan, workload)
    if (data is None) == (counts is None):
        raise ParameterError("give the records as data, or a counts table as counts=, not both")
    needed = _needed(schema, counts is not None, privacy_unit, weight)
    source = (
        _source(data, "data", needed) if counts is None else _source(counts, "counts", needed)
    )
    book = ledger.path if isinstance(ledger, Ledger) else _existing(ledger)
    callback, spinner = _progress(progress, "releasing")
    try:
        result = _dpmatrix.release(
            schema._native,
            book,
            epsilon,
            delta,
            workload=None if workload is None else workload._native,
            plan=None if plan is None else plan._native,
            counts=counts is not None,
            max_memory=max_memory,
            report=None if report is None else os.fspath(report),
            nonneg=nonneg,
            privacy_unit=privacy_unit,
            max_records_per_unit=max_records_per_unit,
            weight=weight,
            max_weight=max_weight,
            measurements=None if measurements is None else os.fspath(measurements),
            progress=callback,
            spinner=spinner,
            **source,
        )
    finally:
        _close(callback)
    return _answers(*result)


class Measurements:
    """A release's measurement file (``release(measurements=…)``, ``dpmm
    release --measurements``): the noisy measurements of the strategy, the
    strategy exactly as measured and the noise law. Every linear query in
    the row space of that strategy has an unbiased least-squares answer
    with an exact standard error; :meth:`answer` computes them the way the
    release does, reading no data and spending nothing (post-processing).
    """

    def __init__(self, native: Any) -> None:
        self._native = native

    @classmethod
    def load(cls, path: PathLike) -> "Measurements":
        """Reads and checks the measurement file at ``path``."""
        return cls(_dpmatrix.Measurements.load(_existing(path)))

    def answer(
        self,
        workload: Workload,
        *,
        nonneg: bool = False,
        out: Optional[PathLike] = None,
        report: Optional[PathLike] = None,
        max_memory: Optional[int] = None,
        progress: Any = None,
    ) -> pd.DataFrame:
        """Answers ``workload`` (on the release's domain): the DataFrame
        :func:`release` returns, ``attrs["sidecar"]`` saying how (nothing
        charged). A query outside the row space of the measured strategy
        raises ``ValueError`` naming the attribute interaction that was not
        measured. With ``out`` (CSV, or Parquet by its name), the answers
        and their sidecar are written as ``dpmm query`` writes them; with
        ``report``, the HTML page; with ``nonneg`` (marginal workloads), a
        ``nonneg`` column of non-negative consistent tables. ``progress`` is
        :func:`plan`'s (the query products answered).
        """
        if not isinstance(workload, Workload):
            raise ParameterError(f"workload must be a dpmatrix.Workload, got {type(workload).__name__}")
        callback, spinner = _progress(progress, "answering")
        try:
            result = self._native.answer(
                workload._native,
                nonneg=nonneg,
                max_memory=max_memory,
                out=None if out is None else os.fspath(out),
                report=None if report is None else os.fspath(report),
                progress=callback,
                spinner=spinner,
            )
        finally:
            _close(callback)
        return _answers(*result)

    def estimable(self) -> list:
        """The most specific marginals the file answers, as lists of
        attribute names (every marginal inside one is answerable too)."""
        return [list(s) for s in self._native.estimable()]

    @property
    def epsilon(self) -> float:
        """The release's ε."""
        return self._native.budget[0]

    @property
    def delta(self) -> Optional[float]:
        """The release's δ (``None`` under pure ε-DP)."""
        return self._native.budget[1]

    @property
    def domain(self) -> list:
        """The release's domain: ``(attribute, size)`` in order."""
        return list(self._native.domain)

    def __len__(self) -> int:
        return len(self._native)

    def __repr__(self) -> str:
        return f"Measurements({len(self)} measurements, epsilon={self.epsilon}, delta={self.delta})"


def _check_release(schema: Any, plan: Any, workload: Any) -> None:
    """A release's schema and queries, checked before anything else."""
    if not isinstance(schema, Schema):
        raise ParameterError(f"schema must be a dpmatrix.Schema, got {type(schema).__name__}")
    if plan is None and workload is None:
        raise ParameterError("give plan= or workload= (the queries to answer)")
    if plan is not None and not isinstance(plan, Plan):
        raise ParameterError(f"plan must be a dpmatrix.Plan, got {type(plan).__name__}")
    if workload is not None and not isinstance(workload, Workload):
        raise ParameterError(f"workload must be a dpmatrix.Workload, got {type(workload).__name__}")


def _answers(
    queries: Any,
    answer: Any,
    std_error: Any,
    low: Any,
    high: Any,
    sidecar: str,
    notes: Any,
    nonneg_answers: Any,
) -> pd.DataFrame:
    """A release's answers as the DataFrame :func:`release` returns."""
    frame = pd.DataFrame(
        {
            "query": queries,
            "answer": answer,
            "std_error": std_error,
            "ci_low": low,
            "ci_high": high,
        }
    )
    if nonneg_answers is not None:
        frame["nonneg"] = nonneg_answers
    frame.attrs["sidecar"] = json.loads(sidecar)
    frame.attrs["warnings"] = list(notes)
    for note in notes:
        warnings.warn(note, DpmmWarning, stacklevel=3)
    return frame


def stream(
    data: Any,
    *,
    schema: Schema,
    workload: Workload,
    epsilon: float,
    ledger: Union[Ledger, PathLike],
    time_column: str,
    steps: int,
    delta: Optional[float] = None,
    start: Union[int, str, None] = None,
    step: Optional[str] = None,
    timezone: Optional[str] = None,
    bands: Optional[int] = None,
    nonneg: bool = False,
    privacy_unit: Optional[str] = None,
    max_records_per_unit: Optional[int] = None,
    max_steps_per_unit: Optional[int] = None,
    min_separation: Optional[int] = None,
    out: Optional[PathLike] = None,
    report: Optional[PathLike] = None,
    progress: Any = None,
) -> pd.DataFrame:
    """Releases the running counts of a workload of marginals at each of
    ``steps`` steps (``dpmm stream``): the same pipeline, kernel and
    guarantees as the command.

    ``data`` is read as :func:`release` reads records. A record's step comes
    from ``time_column``: a whole number minus ``start`` (default 0), or,
    with ``step`` (``"day"``, ``"hour"``, ``"week"``, ``"month"``,
    ``"<N>s"``), a date or date-time placed on the calendar that begins at
    ``start`` (a date or date-time) in ``timezone`` (an IANA name, default
    UTC). ``start`` is public input, never taken from the data; a time
    outside the steps makes the record malformed under the schema's
    policy. With ``delta`` the stream is (ε, δ)-DP, measured by a banded
    matrix factorization with discrete Gaussian noise (``bands``); without
    it, pure ε-DP, measured by a k-ary tree with discrete Laplace noise.
    The whole horizon is charged to ``ledger`` once, before any draw, and
    every refusal comes before that (nothing is spent on an exception).

    The unit of privacy is one record unless ``privacy_unit`` names the
    column saying whom each record is about: the kernel then keeps, of each
    unit, at most ``max_steps_per_unit`` steps at least ``min_separation``
    (default 1) apart and ``max_records_per_unit`` records in each, chosen
    at random, and the noise protects all of them.

    Returns one row per step and query: ``step``, ``time`` (the step's
    start), ``query``, ``answer``, ``std_error`` (exact), ``ci_low`` and
    ``ci_high`` (95%); ``attrs["sidecar"]`` says how they were made and
    what was charged, and with ``nonneg=True`` ``attrs["nonneg"]`` holds
    running counts that are non-negative, non-decreasing and consistent
    across tables (post-processing). The files are written to ``out``
    (``<out>.json`` the sidecar), or to a temporary directory removed
    afterwards. With ``report``, an HTML page is written there: what was
    spent and is left, and each table's running counts over the steps in
    their 95% bands. ``progress`` is :func:`plan`'s (the steps written).
    """
    if not isinstance(schema, Schema):
        raise ParameterError(f"schema must be a dpmatrix.Schema, got {type(schema).__name__}")
    if not isinstance(workload, Workload):
        raise ParameterError(f"workload must be a dpmatrix.Workload, got {type(workload).__name__}")
    needed = _needed(schema, False, time_column, privacy_unit)
    source = _source(data, "data", needed)
    book = ledger.path if isinstance(ledger, Ledger) else _existing(ledger)
    with tempfile.TemporaryDirectory(prefix="dpmatrix-stream-") as scratch:
        target = os.fspath(out) if out is not None else os.path.join(scratch, "running.csv")
        callback, spinner = _progress(progress, "streaming")
        try:
            summary, late = _dpmatrix.stream(
                schema._native,
                workload._native,
                book,
                epsilon,
                target,
                time_column,
                steps,
                delta=delta,
                start=None if start is None else str(start),
                step=step,
                timezone=timezone,
                bands=bands,
                nonneg=nonneg,
                privacy_unit=privacy_unit,
                max_records_per_unit=max_records_per_unit,
                max_steps_per_unit=max_steps_per_unit,
                min_separation=min_separation,
                report=None if report is None else os.fspath(report),
                progress=callback,
                spinner=spinner,
                **source,
            )
        finally:
            _close(callback)
        types = {"step": "int64", "time": "string", "query": "string"}
        frame = pd.read_csv(target, dtype=types, keep_default_na=False)
        with open(target + ".json", encoding="utf-8") as f:
            frame.attrs["sidecar"] = json.load(f)
        if nonneg:
            stem, ext = os.path.splitext(target)
            path = stem + ".nonneg.csv" if ext.lower() == ".csv" else target + ".nonneg.csv"
            frame.attrs["nonneg"] = pd.read_csv(path, dtype=types, keep_default_na=False)
    frame.attrs["summary"] = summary
    if late:
        warnings.warn(
            "interrupted after the ledger was charged: the stream ran to its end and its "
            "running counts are returned",
            DpmmWarning,
            stacklevel=2,
        )
    return frame


def check(
    data: Any = None,
    schema: Optional[Schema] = None,
    *,
    counts: Any = None,
    workload: Optional[Workload] = None,
    time_column: Optional[str] = None,
    steps: Optional[int] = None,
    start: Union[int, str, None] = None,
    step: Optional[str] = None,
    timezone: Optional[str] = None,
    privacy_unit: Optional[str] = None,
    max_records_per_unit: Optional[int] = None,
    weight: Optional[str] = None,
    max_weight: Optional[float] = None,
    max_steps_per_unit: Optional[int] = None,
    min_separation: Optional[int] = None,
) -> pd.DataFrame:
    """The curator's check — **not private**: what ``schema`` makes of the
    records, exactly, before a release spends budget on them.

    ``data`` (or ``counts``) is read exactly as :func:`release` reads it.
    Returns one row per attribute: the column it reads and what the column
    holds (``mismatch`` says when no value of its type can be a cell, as
    for numbers against categories that list none), and how many rows are
    ``outside`` the domain, ``missing`` (null,
    NaN, a missing-value marker) or ``not_a_number`` (binned attributes),
    each with the most frequent values as ``(value, rows)`` pairs and the
    policy that applies. ``attrs`` holds the totals: ``rows`` read,
    ``records``, ``kept_records``, ``dropped_records``, ``dropped_share``,
    ``malformed`` rows by reason, ``refused`` (what an ``error`` policy
    would refuse), for a stream (``time_column``, ``steps``, ``start``, and
    ``step`` and ``timezone`` as :func:`stream` takes them) the ``times``
    not whole or outside the steps, with ``privacy_unit`` the
    ``units`` (how many, the most records of one, and the units and
    records over ``max_records_per_unit``), with ``weight`` the
    ``weights`` (the largest, the total, and those clipped at
    ``max_weight``), and ``notice``.

    These are exact figures about private records and their values: for
    the curator's eyes only, never to be published or shared. Nothing is
    spent and nothing is written; ``workload``, when given, is checked
    against the schema's domain too.
    """
    if not isinstance(schema, Schema):
        raise ParameterError(f"schema must be a dpmatrix.Schema, got {type(schema).__name__}")
    if workload is not None and not isinstance(workload, Workload):
        raise ParameterError(f"workload must be a dpmatrix.Workload, got {type(workload).__name__}")
    if (data is None) == (counts is None):
        raise ParameterError("give the records as data, or a counts table as counts=, not both")
    if (time_column is None) != (steps is None):
        raise ParameterError("time_column and steps go together")
    needed = _needed(schema, counts is not None, time_column, privacy_unit, weight)
    source = (
        _source(data, "data", needed) if counts is None else _source(counts, "counts", needed)
    )
    report = json.loads(
        _dpmatrix.check(
            schema._native,
            counts=counts is not None,
            workload=None if workload is None else workload._native,
            time_column=time_column,
            steps=steps,
            start=None if start is None else str(start),
            step=step,
            timezone=timezone,
            privacy_unit=privacy_unit,
            max_records_per_unit=max_records_per_unit,
            weight=weight,
            max_weight=max_weight,
            max_steps_per_unit=max_steps_per_unit,
            min_separation=min_separation,
            **source,
        )
    )
    rows = []
    for a in report["attributes"]:
        row: dict[str, Any] = {
            "attribute": a["attribute"],
            "column": a["column"],
            "holds": a["holds"],
            "mismatch": a["mismatch"],
        }
        for key in ("outside", "missing", "not_a_number"):
            problem = a[key]
            row[key] = None if problem is None else problem["rows"]
            row[f"{key}_values"] = (
                None
                if problem is None
                else [(v["value"], v["rows"]) for v in problem["values"]]
            )
            row[f"{key}_policy"] = None if problem is None else problem["policy"]
        rows.append(row)
    frame = pd.DataFrame(rows)
    for key in (
        "notice",
        "source",
        "format",
        "rows",
        "records",
        "kept_records",
        "dropped_records",
        "dropped_share",
        "refused",
        "malformed",
        "malformed_policy",
        "times",
        "units",
        "weights",
    ):
        frame.attrs[key] = report[key]
    return frame


def _matrix(m: Any, name: str) -> np.ndarray:
    """A 2-D float64 array (no copy when it already is one)."""
    try:
        a = np.asarray(m, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ParameterError(f"{name} must be a 2-D array of numbers: {e}") from None
    if a.ndim != 2:
        raise ParameterError(f"{name} must be a 2-D array, got {a.ndim} dimension(s)")
    return a


@dataclasses.dataclass(frozen=True)
class OptimizeResult:
    """A strategy optimized for a workload matrix; every figure is
    recomputed from the workload and the strategy."""

    strategy: np.ndarray
    """The strategy A (p×n)."""
    optimizer: str
    privacy: str
    objective: float
    """``l1_obj`` (pure) or ``l2_obj`` (approx) of the strategy."""
    lower_bound: Optional[float]
    """The optimizer's certified lower bound on the optimum, if any."""
    duality_gap: Optional[float]
    """``(objective - lower_bound) / objective``."""
    svd_bound: float
    """The SVD lower bound ``(Σσᵢ(W))²/n`` on ``l2_obj``."""
    termination: str
    """Why the optimizer stopped."""
    converged: bool
    iterations: int
    seconds: float


def optimize(
    W: Any,
    optimizer: str = "coa",
    privacy: str = "approx",
    *,
    branching: Optional[int] = None,
    effort: Optional[float] = None,
) -> OptimizeResult:
    """Optimizes a strategy for the workload matrix ``W`` (m×n, float64;
    copied once, so that the worker thread owns it) with the registered
    ``optimizer`` (:func:`optimizers`) under ``privacy`` (``"pure"`` or
    ``"approx"``)."""
    w = _matrix(W, "W")
    out = _dpmatrix.optimize(w, optimizer, privacy, branching, effort)
    return OptimizeResult(**out)


def optimizers() -> list[str]:
    """The registered optimizers' names (as ``cargo xtask optimize --help``
    lists them)."""
    return [name for name, _, _ in _dpmatrix.optimizers()]


def error(
    W: Any,
    A: Any,
    privacy: str = "pure",
    *,
    epsilon: float = 1.0,
    delta: Optional[float] = None,
) -> dict[str, Any]:
    """What strategy ``A`` (p×n) gives workload ``W`` (m×n): ``objective``
    (``l1_obj`` or ``l2_obj``), whether ``A`` supports ``W``, and the
    expected total squared error at ``epsilon`` (and ``delta``, default
    1e-6 under ``privacy="approx"``; zCDP calibration, as a release adds
    noise), ``None`` when ``A`` does not support ``W``."""
    if privacy not in ("pure", "approx"):
        raise ParameterError(f"privacy must be 'pure' or 'approx', got {privacy!r}")
    if privacy == "pure" and delta is not None:
        raise ParameterError("privacy='pure' takes no delta")
    if privacy == "approx" and delta is None:
        delta = 1e-6
    return _dpmatrix.error(_matrix(W, "W"), _matrix(A, "A"), epsilon, delta)


@dataclasses.dataclass(frozen=True)
class FactorizeResult:
    """A factorization ``W = BC`` of a streaming workload (continual
    release: both factors lower-triangular) and its figures, in units of
    the noise multiplier; ``cargo xtask factorize`` prints the same."""

    family: str
    """``dense``, ``sqrt``, ``tree``, ``banded`` or ``blt``."""
    workload: str
    """``prefix``, ``window:H`` or ``decayed:R``."""
    steps: int
    """The horizon T."""
    total_squared_error: float
    """``s²‖B‖²_F``: the sum of every step's variance."""
    max_variance: float
    """``s² maxᵢ ‖Bᵢ‖²``: the largest step's variance."""
    sensitivity: float
    """``s``: exact, or a sound upper bound (several participations)."""
    sensitivity_lower: float
    """A participation pattern attains at least this."""
    sensitivity_exact: bool
    lower_bound: Optional[float]
    """The singular value bound on ``total_squared_error``, where known."""
    lower_bound_max: Optional[float]
    """The same bound on ``max_variance``."""
    duality_gap: Optional[float]
    """The dense factorization's certified relative gap."""
    certified_lower_bound: Optional[float]
    termination: Optional[str]
    """Why the optimizer stopped (dense, banded, blt)."""
    bands: Optional[int]
    buffers: Optional[int]
    seconds: float


def factorize(
    steps: int,
    family: str,
    *,
    workload: str = "prefix",
    bands: Optional[int] = None,
    buffers: Optional[int] = None,
    participations: Optional[int] = None,
    separation: Optional[int] = None,
    objective: str = "total",
) -> FactorizeResult:
    """Factors the streaming workload (``prefix`` running sums,
    ``window:H`` sliding windows, ``decayed:R`` decayed sums) over ``steps``
    steps with ``family``: the certified dense optimum (T ≤ 4096), the
    square root, the binary tree, banded Toeplitz (``bands``) or BLT
    (``buffers``), the last two optimized for ``objective`` (``total`` or
    ``max``). With ``participations`` and ``separation``, a person
    contributes to at most that many steps that far apart, and the
    sensitivity accounts for every such pattern (docs/streams.md)."""
    out = _dpmatrix.factorize(
        steps, family, workload, bands, buffers, participations, separation, objective
    )
    return FactorizeResult(**out)


class DpFtrl:
    """DP-FTRL's correlated noise with the data inside the privacy kernel.

    The kernel's streaming matrix mechanism over ``steps`` steps of
    ``dimension`` values: a banded lower-triangular Toeplitz strategy ``C``
    (optimized for running sums by :func:`factorize`'s banded family unless
    ``coefficients`` gives ``C``'s first column), exact discrete Gaussian
    noise, the whole horizon charged once to ``ledger`` at (ε, δ) when the
    object is created (a refusal spends nothing).

    Each :meth:`next` takes the step's contributions, one per row, which
    the kernel clips to ``clip_norm`` and puts on its lattice, and returns
    the private sum of the clipped rows, ``x_t + (C⁻¹z)_t``: its running
    sums are DP-FTRL's noisy prefix sums. A person may contribute to at
    most ``participations`` steps at least ``separation`` apart (the
    sensitivity is exact when ``separation ≥ bands``).

    The rows must come in: exact lattice noise added to real-valued data
    outside the kernel would reveal the data modulo the lattice, so there
    is no separate noise vector to add yourself. ``next()`` with no rows is
    a step without contributions (its result is the step's noise). Once
    charged, nothing about the rows' values raises (a refusal would answer
    about them without noise): a row that is not finite contributes
    nothing."""

    def __init__(
        self,
        ledger: Union[PathLike, Ledger],
        *,
        epsilon: float,
        delta: float,
        steps: int,
        dimension: int,
        clip_norm: float,
        bands: Optional[int] = None,
        participations: int = 1,
        separation: int = 1,
        objective: str = "max",
        coefficients: Optional[Any] = None,
    ) -> None:
        path = ledger.path if isinstance(ledger, Ledger) else ledger
        c = None
        if coefficients is not None:
            c = [float(v) for v in np.asarray(coefficients, dtype=np.float64).ravel()]
        self._native = _dpmatrix.DpFtrl(
            _existing(path),
            float(epsilon),
            float(delta),
            int(steps),
            int(dimension),
            float(clip_norm),
            bands,
            int(participations),
            int(separation),
            objective,
            c,
        )

    def next(self, rows: Any = None) -> np.ndarray:
        """Releases the next step from its contributions (an n × dimension
        array, or one 1-D row); returns the private sum of the clipped
        rows. Raises ``ValueError`` past the horizon."""
        if rows is None:
            return self._native.next(None)
        a = np.asarray(rows, dtype=np.float64)
        if a.ndim == 1:
            a = a.reshape(1, -1)
        if a.ndim != 2:
            raise ParameterError(f"rows must be 2-D (n × dimension), got {a.ndim}-D")
        return self._native.next(np.ascontiguousarray(a))

    @property
    def step(self) -> int:
        """Steps released so far."""
        return self._native.step

    @property
    def steps(self) -> int:
        """The horizon charged for."""
        return self._native.steps

    @property
    def dimension(self) -> int:
        return self._native.dimension

    @property
    def rho(self) -> float:
        """ρ-zCDP charged for the horizon."""
        return self._native.figures[0]

    @property
    def sensitivity(self) -> float:
        """L2 sensitivity of ``Cx`` over the horizon, in data units."""
        return self._native.figures[1]

    @property
    def sigma(self) -> float:
        """Standard deviation of each noise draw, in data units."""
        return self._native.figures[2]

    @property
    def sensitivity_exact(self) -> bool:
        return self._native.figures[4]

    @property
    def coefficients(self) -> np.ndarray:
        """``C``'s first column as measured (quantized to the kernel's
        dyadic grid)."""
        return np.array(self._native.coefficients)

    @property
    def step_std(self) -> float:
        """Standard error of each value of the last step's result."""
        return float(np.sqrt(self._native.variances[0]))

    @property
    def running_std(self) -> float:
        """Standard error of each value of the running sum so far."""
        return float(np.sqrt(self._native.variances[1]))

    @property
    def ledger_entry(self) -> int:
        return self._native.ledger_entry

    def __repr__(self) -> str:
        return (
            f"<dpmatrix.DpFtrl step {self.step} of {self.steps}, dimension {self.dimension}, "
            f"sigma {self.sigma:.4g}>"
        )
