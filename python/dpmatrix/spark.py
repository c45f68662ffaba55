"""Private releases of records that live in Spark.

:func:`release` answers the same queries as :func:`dpmatrix.release`,
from a Spark DataFrame, with dpmm's own transformation running inside
Spark: every partition is read by the same schema encoding as a local
release (the Rust reader, inside ``mapInArrow``), records are bounded per
privacy unit by the kernel's own counting, and each partition is counted
into exactly the tables the strategy reads. Only those tables — sealed
with a key the driver's kernel drew for this release — come back to the
driver, where the kernel merges them (each partition once), charges the
ledger, measures and reconstructs. docs/spark.md says what runs where and
what must be kept secret.

Without a privacy unit this is one pass over the data: Spark groups
identical records (a GROUP BY of the columns read, where that is exact and
no weights are counted) and a ``mapInArrow`` counts the groups (or the
records one by one) into each partition's tables, which are collected.
With a privacy unit it is two: the records
are encoded (each unit replaced by its keyed 128-bit hash), shuffled by
that hash so that every record of a unit is in one partition, and bounded
there; ``partitions`` sets how many partitions the shuffle makes.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator, Optional, Union

import pandas as pd

from . import Ledger, Plan, Schema, Workload, _answers, _check_release, _dpmatrix, _existing
from .errors import ParameterError

__all__ = ["release"]


def _arrow_schema(frame: Any) -> Any:
    """The frame's columns as Arrow types; a column of a type Arrow cannot
    carry is given as nulls (no attribute can read it: a schema naming it
    fails the job, before the charge)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    fields = []
    for field in frame.schema.fields:
        try:
            kind = to_arrow_type(field.dataType)
        except Exception:
            kind = pa.null()
        fields.append(pa.field(field.name, kind))
    return pa.schema(fields)


def _column(name: str) -> Any:
    """The column named `name` exactly (a dot or a backtick in it is part of
    the name, not a path into a struct)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _deterministic(frame: Any) -> Optional[bool]:
    """Whether Spark's analysed plan of the frame is deterministic (None
    when it cannot say, e.g. over Spark Connect)."""
    try:
        return bool(frame._jdf.queryExecution().analyzed().deterministic())
    except Exception:
        return None


def _max_result_bytes(frame: Any) -> int:
    """The most the driver collects from one job (spark.driver.maxResultSize,
    0 for no limit)."""
    try:
        conf = frame.sparkSession.sparkContext._jsc.sc().conf()
        return int(conf.getSizeAsBytes("spark.driver.maxResultSize", "1g"))
    except Exception:
        return 1 << 30


def _shuffle_partitions(frame: Any) -> int:
    """spark.sql.shuffle.partitions, or the default parallelism when it is
    not a number (e.g. "auto")."""
    try:
        return max(1, int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions")))
    except (TypeError, ValueError):
        return max(1, frame.sparkSession.sparkContext.defaultParallelism)


def _input_paths(frame: Any) -> list[str]:
    """The local files the frame reads (no output may be written over them)."""
    from urllib.parse import unquote, urlparse

    try:
        uris = frame.inputFiles()
    except Exception:
        return []
    out = []
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme in ("", "file"):
            out.append(unquote(parsed.path))
    return out


def _reader(batches: Iterator[Any], schema: Any) -> Any:
    """The partition's batches as one stream (of the first batch's types:
    Spark's own, which the reader reads by value whatever they are)."""
    import pyarrow as pa

    it = iter(batches)
    first = next(it, None)
    if first is None:
        return pa.RecordBatchReader.from_batches(schema, [])

    def chained() -> Iterator[Any]:
        yield first
        yield from it

    return pa.RecordBatchReader.from_batches(first.schema, chained())


def _partition() -> int:
    from pyspark import TaskContext

    return TaskContext.get().partitionId()


def _one_thread() -> None:
    # One task per core: the reader's thread pool (sized on its first use
    # in this worker process) takes one thread, not every core per task.
    os.environ.setdefault("RAYON_NUM_THREADS", "1")


def _counter(spec: bytes, schema: Any, counts: bool) -> Any:
    def count(batches: Iterator[Any]) -> Iterator[Any]:
        _one_thread()
        reader = _reader(batches, schema)
        yield _dpmatrix.spark_count(spec, _partition(), reader, counts)

    return count


def _encoder(spec: bytes, schema: Any) -> Any:
    def encode(batches: Iterator[Any]) -> Iterator[Any]:
        _one_thread()
        yield _dpmatrix.spark_encode(spec, _reader(batches, schema))

    return encode


def _bounder(spec: bytes, schema: Any, memory: int) -> Any:
    def bound(batches: Iterator[Any]) -> Iterator[Any]:
        _one_thread()
        # Spills go where Spark keeps its own (else the system's temporary
        # directory); their files are removed as soon as they are opened.
        local = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0] or None
        reader = _reader(batches, schema)
        yield _dpmatrix.spark_bound(spec, _partition(), reader, memory, local)

    return bound


def _local_python(frame: Any) -> None:
    """In local mode, with no Python named for the executors, they run
    this interpreter (which has dpmatrix) rather than Spark's default
    ``python3`` from the PATH (which may not)."""
    try:
        context = frame.sparkSession.sparkContext
    except Exception:  # Spark Connect: the server decides.
        return
    if (
        context.master.startswith("local")
        and "PYSPARK_PYTHON" not in os.environ
        and context.pythonExec == "python3"
    ):
        context.pythonExec = sys.executable


def _groupable(frame: Any, columns: list[str]) -> Optional[str]:
    """Why the records cannot be grouped by the columns read before they
    are counted, or None: Spark's GROUP BY must put together only records
    whose values are the same bytes (text of a binary collation; numbers
    exact: floats and decimals, which are often continuous and would
    group little, are counted one by one)."""
    from pyspark.sql import types as T

    if "count" in columns:
        return "a column read is named count"
    if _runs_python(frame):
        # Grouping adds a shuffle: a Python function Spark believes
        # deterministic but is not could put one record in two groups
        # when a lost partition is recomputed.
        return "the frame's plan runs Python code"
    kinds = {f.name: f.dataType for f in frame.schema.fields}
    for name in columns:
        kind = kinds.get(name)
        if kind is None:
            return f"column {name} is not the frame's"
        if isinstance(kind, T.StringType) and getattr(kind, "collation", "UTF8_BINARY") not in (
            "UTF8_BINARY",
            None,
        ):
            return f"column {name} compares text by a collation, not by its bytes"
        if isinstance(kind, (T.FloatType, T.DoubleType, T.DecimalType)):
            return f"column {name} holds floats or decimals"
        if not isinstance(kind, (T.StringType, T.BooleanType, T.IntegralType, T.BinaryType)):
            return f"column {name} is of type {kind.simpleString()}"
    return None


def _runs_python(frame: Any) -> bool:
    """Whether Spark's optimized plan of the frame runs Python code (a UDF,
    mapInPandas, …); True when it cannot say."""
    try:
        plan = frame._jdf.queryExecution().optimizedPlan().toString()
    except Exception:
        return True
    return any(word in plan for word in ("EvalPython", "InPandas", "InArrow", "PythonUDF"))


def _collect(frame: Any) -> Any:
    """The frame as a pyarrow Table on the driver."""
    import pyarrow as pa

    if hasattr(frame, "toArrow"):  # pyspark >= 4.0
        return frame.toArrow()
    return pa.Table.from_batches(frame._collect_as_arrow(), schema=_arrow_schema(frame))


def release(
    frame: Any,
    *,
    schema: Schema,
    epsilon: float,
    ledger: Union[Ledger, os.PathLike, str],
    plan: Optional[Plan] = None,
    workload: Optional[Workload] = None,
    delta: Optional[float] = None,
    max_memory: Optional[int] = None,
    report: Optional[Union[os.PathLike, str]] = None,
    nonneg: bool = False,
    privacy_unit: Optional[str] = None,
    max_records_per_unit: Optional[int] = None,
    weight: Optional[str] = None,
    max_weight: Optional[float] = None,
    measurements: Optional[Union[os.PathLike, str]] = None,
    partitions: Optional[int] = None,
    bound_memory: int = 1 << 30,
    group: bool = True,
) -> pd.DataFrame:
    """Releases private answers from the records of a Spark DataFrame.

    The arguments and the returned DataFrame are those of
    :func:`dpmatrix.release` (one row per query: ``query``, ``answer``,
    ``std_error``, ``ci_low``, ``ci_high``; ``attrs["sidecar"]``), with the
    records given as ``frame``, a ``pyspark.sql.DataFrame`` whose columns
    the schema (and ``privacy_unit``, ``weight``) name. Everything that can
    be refused — the schema against the frame's columns, the plan, the
    budget, the outputs — is refused before any Spark job runs; a job that
    fails spends nothing. ``partitions`` (with ``privacy_unit`` only) is
    the number of partitions records are shuffled into by unit (default:
    ``spark.sql.shuffle.partitions``); ``bound_memory`` is what each of
    them may hold in memory before it spills to the executor's temporary
    directory.

    Without a privacy unit or weights, Spark first groups identical
    records (a GROUP BY of the columns read) and the reader counts each
    group as a counts table's row — the same tables, without sending
    every record through Python — when every column read holds text (of a
    binary collation), booleans or integers and the frame's plan runs no
    Python code; otherwise, or with ``group=False``, records are counted
    one by one.
    """
    from pyspark.sql import DataFrame

    if not isinstance(frame, DataFrame):
        raise ParameterError(f"frame must be a pyspark.sql.DataFrame, got {type(frame).__name__}")
    _check_release(schema, plan, workload)
    if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
        raise ParameterError(f"partitions must be a positive whole number, got {partitions!r}")
    if partitions is not None and privacy_unit is None:
        raise ParameterError("partitions= sets the shuffle by privacy unit: give privacy_unit= too")
    book = ledger.path if isinstance(ledger, Ledger) else _existing(ledger)
    if _deterministic(frame) is False:
        raise ParameterError(
            "the DataFrame's plan is not deterministic (rand(), uuid(), a UDF marked "
            "non-deterministic, …): a partition Spark recomputes could count a record twice. "
            "Materialize it first: frame = frame.localCheckpoint() (or checkpoint())"
        )
    prepared = _dpmatrix.spark_prepare(
        schema._native,
        book,
        epsilon,
        _arrow_schema(frame),
        # Only a report or a measurement file is written: the frame's files
        # are listed for them (never overwritten).
        sources=_input_paths(frame) if report is not None or measurements is not None else [],
        delta=delta,
        workload=None if workload is None else workload._native,
        plan=None if plan is None else plan._native,
        max_memory=max_memory,
        report=None if report is None else os.fspath(report),
        nonneg=nonneg,
        privacy_unit=privacy_unit,
        max_records_per_unit=max_records_per_unit,
        weight=weight,
        max_weight=max_weight,
        measurements=None if measurements is None else os.fspath(measurements),
    )
    try:
        jobs = _Jobs(prepared, frame, partitions, bound_memory, group, weight is not None)
        tables = _run(jobs.tables)
        return _answers(*prepared.finish(jobs.partitions, tables))
    finally:
        # A job that failed (or was interrupted) spent nothing, and the
        # ledger is not held until the exception's frames are collected
        # (an interrupted finish's worker is waited for by the next call).
        prepared.close()


def _run(job: Any) -> Any:
    """The job's result; a failure is raised without Spark's message, which
    may quote a record (Spark's own logs on the cluster keep it)."""
    import re

    try:
        return job()
    except Exception as e:  # noqa: BLE001 - any failure of the job
        text = str(e)
        kind = type(e).__name__
    # A missing module on the executors is the setup's, not the data's:
    # named when it is one dpmatrix needs (the message may quote a record).
    missing = re.search(r"No module named '(dpmatrix|pyarrow|pandas|numpy|pyspark)[\w.]*'", text)
    raise RuntimeError(
        f"the Spark job failed ({kind}{': ' + missing.group(0) if missing else ''}); nothing "
        "was spent. Its message is withheld here (it may quote a record): Spark's logs on the "
        "cluster have it, and dm.check on the records shows what the schema refuses"
    )


class _Jobs:
    """The Spark jobs of one release: every partition's sealed tables,
    collected for the kernel's merge. `partitions` is their number when it
    is known before the jobs run (the shuffle by unit), else None."""

    def __init__(
        self,
        prepared: Any,
        frame: Any,
        partitions: Optional[int],
        memory: int,
        group: bool = True,
        weighted: bool = False,
    ):
        _local_python(frame)
        self.spec = prepared.spec()
        columns = prepared.columns()
        self.source = frame.select(*[_column(c) for c in columns])
        # Identical records grouped by Spark first (one GROUP BY of the
        # columns read, a counts table's rows for the reader): the same
        # tables, without sending every record through Python.
        self.group = (
            group
            and not prepared.bounds_units()
            and not weighted
            and _groupable(self.source, columns) is None
        )
        self.memory = memory
        self.units = prepared.bounds_units()
        self.encoded_ddl = prepared.encoded_ddl()
        # Each partition's tables hold at most `cells` cells of 24 bytes:
        # no more partitions than the driver may collect (a bound from the
        # layout alone, never from the data).
        limit = _max_result_bytes(frame)
        cap = limit // (32 * prepared.cells() + 4096) if limit > 0 else 1 << 20
        if cap < 1:
            raise ParameterError(
                "one partition's tables could pass spark.driver.maxResultSize: raise it"
            )
        if self.units:
            if partitions is not None and partitions > cap:
                raise ParameterError(
                    f"partitions={partitions}: the driver may collect the tables of at most "
                    f"{cap} (spark.driver.maxResultSize)"
                )
            self.partitions = (
                partitions if partitions is not None else min(_shuffle_partitions(frame), cap)
            )
        else:
            if self.group:
                from pyspark.sql import functions as F

                self.source = self.source.groupBy(*[_column(c) for c in columns]).agg(
                    F.count(F.lit(1)).alias("count")
                )
            # Coalescing never adds partitions: at most `cap`, no shuffle.
            self.source = self.source.coalesce(cap)
            self.partitions = None

    def tables(self) -> Any:
        partial_ddl = _dpmatrix.spark_partial_ddl()
        source_schema = _arrow_schema(self.source)
        if self.units:
            encoded = self.source.mapInArrow(_encoder(self.spec, source_schema), self.encoded_ddl)
            by_unit = encoded.repartition(self.partitions, "_dpmm_unit_hi", "_dpmm_unit_lo")
            tables = by_unit.mapInArrow(
                _bounder(self.spec, _arrow_schema(encoded), self.memory), partial_ddl
            )
        else:
            tables = self.source.mapInArrow(
                _counter(self.spec, source_schema, self.group), partial_ddl
            )
        return _collect(tables)
