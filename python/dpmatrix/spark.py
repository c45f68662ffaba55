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

Without a privacy unit this is one pass over the data (a ``mapInArrow``
and a collect of the partitions' tables). With one it is two: the records
are encoded (each unit replaced by its keyed 128-bit hash), shuffled by
that hash so that every record of a unit is in one partition, and bounded
there; ``partitions`` sets how many partitions the shuffle makes.
"""

from __future__ import annotations

import os
from typing import Any, Iterator, Optional, Union

import pandas as pd

from . import Ledger, Plan, Schema, Workload, _answers, _dpmatrix, _existing

__all__ = ["release"]


def _arrow_schema(frame: Any) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(frame.schema)


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


def _counter(spec: bytes, schema: Any) -> Any:
    def count(batches: Iterator[Any]) -> Iterator[Any]:
        _one_thread()
        yield _dpmatrix.spark_count(spec, _partition(), _reader(batches, schema))

    return count


def _encoder(spec: bytes, schema: Any) -> Any:
    def encode(batches: Iterator[Any]) -> Iterator[Any]:
        _one_thread()
        yield _dpmatrix.spark_encode(spec, _reader(batches, schema))

    return encode


def _bounder(spec: bytes, schema: Any, memory: int) -> Any:
    def bound(batches: Iterator[Any]) -> Iterator[Any]:
        _one_thread()
        yield _dpmatrix.spark_bound(spec, _partition(), _reader(batches, schema), memory)

    return bound


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
    partitions: Optional[int] = None,
    bound_memory: int = 1 << 30,
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
    """
    from pyspark.sql import DataFrame

    if not isinstance(frame, DataFrame):
        raise ValueError(f"frame must be a pyspark.sql.DataFrame, got {type(frame).__name__}")
    if not isinstance(schema, Schema):
        raise ValueError(f"schema must be a dpmatrix.Schema, got {type(schema).__name__}")
    if plan is None and workload is None:
        raise ValueError("give plan= or workload= (the queries to answer)")
    if plan is not None and not isinstance(plan, Plan):
        raise ValueError(f"plan must be a dpmatrix.Plan, got {type(plan).__name__}")
    if workload is not None and not isinstance(workload, Workload):
        raise ValueError(f"workload must be a dpmatrix.Workload, got {type(workload).__name__}")
    if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
        raise ValueError(f"partitions must be a positive whole number, got {partitions!r}")
    if partitions is not None and privacy_unit is None:
        raise ValueError("partitions= sets the shuffle by privacy unit: give privacy_unit= too")
    book = ledger.path if isinstance(ledger, Ledger) else _existing(ledger)
    prepared = _dpmatrix.spark_prepare(
        schema._native,
        book,
        epsilon,
        _arrow_schema(frame),
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
    )
    try:
        tables = _tables(prepared, frame, partitions, bound_memory)
        return _answers(*prepared.finish(None, tables))
    finally:
        # A job that failed (or was interrupted) spends nothing, and the
        # ledger is not held until the exception's frames are collected.
        prepared.close()


def _tables(prepared: Any, frame: Any, partitions: Optional[int], bound_memory: int) -> Any:
    """The Spark jobs: every partition's sealed tables, collected (a pyarrow
    Table for the kernel's merge)."""
    spec = prepared.spec()
    source = frame.select(*prepared.columns())
    source_schema = _arrow_schema(source)
    partial_ddl = _dpmatrix.spark_partial_ddl()
    if prepared.bounds_units():
        encoded = source.mapInArrow(_encoder(spec, source_schema), prepared.encoded_ddl())
        if partitions is None:
            partitions = int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions"))
        by_unit = encoded.repartition(partitions, "_dpmm_unit_hi", "_dpmm_unit_lo")
        tables = by_unit.mapInArrow(
            _bounder(spec, _arrow_schema(encoded), bound_memory), partial_ddl
        )
    else:
        tables = source.mapInArrow(_counter(spec, source_schema), partial_ddl)
    return _collect(tables)
