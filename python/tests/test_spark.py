"""dpmatrix.spark on a real Spark (local[2]): the tables its jobs count
are the census extract's exact counts; one added row moves them by 1 and
one added person of fifty rows by K; releases are unbiased with honest
standard errors; everything that can be refused is refused before any
job runs, and a job that fails spends nothing.

Skipped when pyspark or Java is missing, unless DPMM_REQUIRE_SPARK is set
(as `.ci/run` sets it, after installing both)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "datasets" / "fertility1980.csv.gz"
SCHEMA = json.loads((REPO / "examples" / "fertility1980" / "schema.json").read_text())
K = 3

_ledgers = itertools.count()


def _spark_available() -> bool:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return shutil.which("java") is not None or "JAVA_HOME" in os.environ


if not _spark_available():
    if os.environ.get("DPMM_REQUIRE_SPARK"):
        raise RuntimeError("DPMM_REQUIRE_SPARK is set but pyspark or Java is missing")
    pytest.skip("pyspark and a Java runtime are needed", allow_module_level=True)

import dpmatrix.spark as dms  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    # The executors' Python is this one (with dpmatrix installed).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("dpmatrix tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def people() -> pd.DataFrame:
    """The census records as strings, each its own person."""
    frame = pd.read_csv(RECORDS, dtype=str, keep_default_na=False)
    return frame.assign(person=np.arange(len(frame)))


def frame_of(spark, records: pd.DataFrame, parts: int = 5):
    """A Spark DataFrame of the records in `parts` partitions, computed
    once (each test's neighbours are this frame and a few rows more)."""
    return spark.createDataFrame(records).repartition(parts).localCheckpoint()


@pytest.fixture(scope="module")
def census(spark, people):
    """The census records as a Spark DataFrame."""
    return frame_of(spark, people)


def plus(spark, frame, rows: pd.DataFrame):
    """`frame` and `rows` (in partitions of their own)."""
    return frame.unionByName(spark.createDataFrame(rows))


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    """The schema and every 1-way marginal (80 answers)."""
    spec = json.loads((REPO / "examples" / "fertility1980" / "spec.json").read_text())
    spec["queries"] = [{"marginals": {"k": 1}}]
    path = tmp_path_factory.mktemp("spec") / "one_way.json"
    path.write_text(json.dumps(spec))
    return dm.Schema.from_json(REPO / "examples/fertility1980/schema.json"), dm.Workload.from_json(
        path
    )


def ledger(tmp_path: Path, epsilon: float = 100.0) -> dm.Ledger:
    return dm.Ledger.create(tmp_path / f"l{next(_ledgers)}.jsonl", total_epsilon=epsilon)


def cells_of(records: pd.DataFrame) -> dict[int, int]:
    """The full histogram's non-zero cells, counted by pandas from the
    schema's domains (row-major, last attribute fastest): the truth."""
    cell = np.zeros(len(records), dtype=np.int64)
    for attribute in SCHEMA["domain"]:
        column = records[attribute["column"]]
        if "values" in attribute:
            size = len(attribute["values"])
            code = column.map({v: i for i, v in enumerate(attribute["values"])})
        else:
            bins = attribute["bins"]
            size = (bins["stop"] - bins["start"]) // bins["width"]
            code = (column.astype(int) - bins["start"]) // bins["width"]
        cell = cell * size + code.to_numpy(dtype=np.int64)
    counts = pd.Series(cell).value_counts()
    return {int(c): int(n) for c, n in counts.items()}


def counted(tmp_path, spark_frame, setting, group=True, **kw) -> dict[int, int]:
    """The exact tables dpmatrix.spark's jobs count (the full histogram:
    the extract's 50,880 cells fit), summed over the partitions as the
    kernel merges them; nothing is charged."""
    schema, workload = setting
    prepared = dm._dpmatrix.spark_prepare(
        schema._native,
        ledger(tmp_path).path,
        1.0,
        dms._arrow_schema(spark_frame),
        workload=workload._native,
        **kw,
    )
    try:
        jobs = dms._Jobs(prepared, spark_frame, None, 1 << 30, group, "weight" in kw)
        # Text and integer columns, no unit: grouped unless told not to.
        assert jobs.group == (group and "privacy_unit" not in kw)
        table = jobs.tables().to_pandas()
    finally:
        prepared.close()
    assert set(table["_dpmm_table"]) == {-1, 0}, "one table: the full histogram"
    cells = table[table["_dpmm_table"] == 0].groupby("_dpmm_cell")["_dpmm_count"].sum()
    return {int(c): int(n) for c, n in cells.items()}


def moved(a: dict[int, int], b: dict[int, int]) -> int:
    return sum(abs(a.get(c, 0) - b.get(c, 0)) for c in set(a) | set(b))


def test_the_jobs_count_the_exact_tables_of_the_records(tmp_path, spark, census, people, setting):
    truth = cells_of(people)
    # Grouped by Spark first (text columns: the default) and one by one.
    assert counted(tmp_path, census, setting) == truth
    assert counted(tmp_path, census, setting, group=False) == truth
    # Typed columns (integers for age and weeks) read as their text does.
    from pyspark.sql import functions as F

    typed = census.withColumn("age", F.col("age").cast("int")).withColumn(
        "work", F.col("work").cast("long")
    )
    assert counted(tmp_path, typed, setting) == truth
    # Bounded per person (each has one record): the same tables.
    assert (
        counted(
            tmp_path,
            census,
            setting,
            privacy_unit="person",
            max_records_per_unit=K,
        )
        == truth
    )


def test_one_added_row_moves_the_tables_by_one_and_the_answers_by_less_than_5(
    tmp_path, spark, census, people, setting
):
    a, b = census, plus(spark, census, people.iloc[[17]])
    for group in (True, False):
        assert moved(counted(tmp_path, a, setting, group), counted(tmp_path, b, setting, group)) == 1
    schema, workload = setting
    kw = dict(schema=schema, workload=workload, epsilon=50.0)
    x = dms.release(a, ledger=ledger(tmp_path, 50.0), **kw)
    y = dms.release(b, ledger=ledger(tmp_path, 50.0), **kw)
    assert np.abs(x["answer"] - y["answer"]).max() < 5


def test_one_added_person_of_fifty_rows_moves_the_tables_by_k_and_the_answers_by_less_than_8(
    tmp_path, spark, census, people, setting
):
    # Every other person has at most K records (the census's rows, K at a
    # time), so their kept records are all of them: the tables differ by
    # the added person's kept records alone.
    from pyspark.sql import functions as F

    a = census.withColumn("person", (F.col("person") / K).cast("long"))
    intruder = people.iloc[[5] * 25 + [9] * 25].assign(person=-1)
    # The intruder's rows in two partitions of their own.
    b = plus(spark, plus(spark, a, intruder.iloc[:25]), intruder.iloc[25:])
    unit = dict(privacy_unit="person", max_records_per_unit=K)
    assert moved(counted(tmp_path, a, setting, **unit), counted(tmp_path, b, setting, **unit)) == K
    schema, workload = setting
    kw = dict(schema=schema, workload=workload, epsilon=50.0, **unit)
    x = dms.release(a, ledger=ledger(tmp_path, 50.0), **kw)
    y = dms.release(b, ledger=ledger(tmp_path, 50.0), **kw)
    assert np.abs(x["answer"] - y["answer"]).max() < 8
    assert x.attrs["sidecar"]["privacy_unit"]["max_records_per_unit"] == K
    # Without the unit the fifty rows are fifty neighbours.
    x = dms.release(a, ledger=ledger(tmp_path, 50.0), schema=schema, workload=workload, epsilon=50.0)
    y = dms.release(b, ledger=ledger(tmp_path, 50.0), schema=schema, workload=workload, epsilon=50.0)
    assert np.abs(x["answer"] - y["answer"]).max() > 20


def truth_of(records: pd.DataFrame, answers: pd.DataFrame) -> np.ndarray:
    """Each 1-way answer's true count, by pandas."""
    out = []
    for query in answers["query"]:
        name, value = (s.strip() for s in query.split("="))
        column = next(a for a in SCHEMA["domain"] if a["name"] == name)["column"]
        out.append(int((records[column] == value).sum()))
    return np.array(out, dtype=float)


def test_ten_releases_are_unbiased_with_honest_errors_and_agree_with_the_local_release(
    tmp_path, spark, census, people, setting
):
    schema, workload = setting
    frame = census
    book = ledger(tmp_path, 10.0)
    z = []
    for _ in range(10):
        a = dms.release(frame, schema=schema, workload=workload, epsilon=1.0, ledger=book)
        truth = truth_of(people, a)
        z.extend((a["answer"] - truth) / a["std_error"])
    z = np.array(z)
    assert len(z) == 800
    assert abs(z.mean()) < 0.15, z.mean()
    assert 0.85 < z.std() < 1.15, z.std()
    # At ε = 100 the Spark release and the local one are within 1.
    file = tmp_path / "spark.parquet"
    s = dms.release(
        frame, schema=schema, workload=workload, epsilon=100.0, ledger=ledger(tmp_path),
        measurements=file,
    )
    # Its measurement file answers the release's workload as released.
    pd.testing.assert_frame_equal(dm.Measurements.load(file).answer(workload), s, check_exact=True)
    local = dm.release(people, schema=schema, workload=workload, epsilon=100.0, ledger=ledger(tmp_path))
    assert list(s["query"]) == list(local["query"])
    assert np.abs(s["answer"] - local["answer"]).max() < 1
    assert s.attrs["sidecar"]["sensitivity"] == local.attrs["sidecar"]["sensitivity"]


def test_refusals_come_before_any_job_and_a_failed_job_spends_nothing(
    tmp_path, spark, census, people, setting
):
    from pyspark.sql import functions as F

    schema, workload = setting
    frame = census
    book = ledger(tmp_path, 1.0)
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("refusals", "refusals")
    refusals = [
        dict(frame=frame.drop("age")),
        dict(frame=frame, privacy_unit="nobody", max_records_per_unit=K),
        dict(frame=frame, privacy_unit="person"),
        dict(frame=frame, epsilon=2.0),
        dict(frame=frame, partitions=4),
        dict(frame=frame.withColumnRenamed("person", "_dpmm_unit_hi")),
        # A plan Spark could recompute differently: refused, not run.
        dict(frame=frame.withColumn("noise", F.rand())),
        dict(frame=frame, privacy_unit="person", max_records_per_unit=K, partitions=10**9),
    ]
    for kw in refusals:
        args = dict(schema=schema, workload=workload, epsilon=1.0, ledger=book) | kw
        with pytest.raises((ValueError, dm.BudgetExceeded)):
            dms.release(**args)
    assert tracker.getJobIdsForGroup("refusals") == []
    with pytest.raises(ValueError):
        dms.release(people, schema=schema, workload=workload, epsilon=1.0, ledger=book)
    # An `error` policy the records break fails the job on an executor:
    # nothing is spent.
    strict = json.loads(json.dumps(SCHEMA))
    strict["domain"][3]["outside"] = "error"
    path = tmp_path / "strict.json"
    path.write_text(json.dumps(strict))
    stray = plus(spark, census, people.iloc[[4]].assign(age="99"))
    with pytest.raises(RuntimeError) as failed:
        dms.release(
            stray,
            schema=dm.Schema.from_json(path),
            workload=workload,
            epsilon=1.0,
            ledger=book,
        )
    # Spark's message (which quotes the record's value) is withheld.
    message = str(failed.value)
    assert message.startswith("the Spark job failed (") and "nothing was spent" in message
    assert "Traceback" not in message and "99" not in message
    assert book.spent == 0
    a = dms.release(frame, schema=schema, workload=workload, epsilon=1.0, ledger=book)
    assert len(a) == 80 and book.spent == pytest.approx(1.0)
