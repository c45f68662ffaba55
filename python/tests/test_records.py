"""Records in: every way a table reaches dm.release, and the stability the
privacy guarantee rests on — one added row moves the count tables by at
most one record, whatever the row holds and whatever the column types.

Answers are compared between independent releases at ε = 100 (noise of
RMSE 0.13 per answer on this workload), where an added row that counted as
more than one record (the attacks these tests replay moved answers by
hundreds) shows at once; the curator's exact check (dm.check) gives the
kept records exactly."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "datasets" / "fertility1980.csv.gz"
EPSILON = 100.0


@pytest.fixture(scope="module")
def typed() -> pd.DataFrame:
    """The records as pandas reads them: age and work as int64."""
    return pd.read_csv(RECORDS)


@pytest.fixture(scope="module")
def setting(spec_path, schema_path):
    schema = dm.Schema.from_json(schema_path)
    plan = dm.plan(dm.Workload.from_json(spec_path), epsilon=EPSILON)
    return schema, plan


def released(tmp_path: Path, setting, data=None, **kw) -> np.ndarray:
    schema, plan = setting
    ledger = dm.Ledger.create(tmp_path / f"l{next(_ledgers)}.jsonl", total_epsilon=EPSILON)
    out = dm.release(data, schema=schema, plan=plan, epsilon=EPSILON, ledger=ledger, **kw)
    assert ledger.spent == pytest.approx(EPSILON)
    return out["answer"].to_numpy()


_ledgers = itertools.count()


def kept(data, schema, **kw) -> int:
    return dm.check(data, schema, **kw).attrs["kept_records"]


def with_row(frame: pd.DataFrame, **values) -> pd.DataFrame:
    """`frame` and one more row: a copy of its first with `values`."""
    row = frame.iloc[[0]].copy()
    for column, value in values.items():
        row[column] = pd.Series([value], index=row.index, dtype=object) if not isinstance(
            value, float) else value
    return pd.concat([frame, row], ignore_index=True)


def neighbours(typed: pd.DataFrame):
    """(what, frame, neighbour): one added row of each kind the attacks
    used, and of ordinary ones."""
    line = ",".join(str(v) for v in typed.iloc[0].values)
    noted = typed.assign(note="free text, never read")
    text = typed.astype(str)
    return [
        ("a NaN in the integer column age", typed, with_row(typed, age=float("nan"))),
        ("300 lines in an unread text column", noted,
         with_row(noted, note="\n".join([line] * 300))),
        ("carriage returns in an unread column", noted,
         with_row(noted, note="\r".join([line] * 300) + "\r\n")),
        ("a quoted value", text, with_row(text, morekids='"yes"')),
        ("a quote left open", noted, with_row(noted, note='x,"p')),
        ("a number in an object column of text", text, with_row(text, morekids=27)),
        ("a line break in a read value", text, with_row(text, gender1="male\nfemale")),
        ("an ordinary record", typed, with_row(typed)),
    ]


def test_one_added_row_moves_every_answer_by_less_than_five(tmp_path, typed, setting):
    schema, _ = setting
    for what, frame, neighbour in neighbours(typed):
        a = released(tmp_path, setting, frame)
        b = released(tmp_path, setting, neighbour)
        moved = np.abs(a - b).max()
        assert moved < 5, (what, moved)
        # Exactly: the neighbour keeps at most one record more.
        assert 0 <= kept(neighbour, schema) - kept(frame, schema) <= 1, what


def test_the_same_records_read_alike_under_every_type(tmp_path, typed, setting):
    pa = pytest.importorskip("pyarrow")
    polars = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    schema, _ = setting
    numeric = {"age": "float64", "work": "float64"}
    con = duckdb.connect()
    forms = {
        "float64": typed.astype(numeric),
        "float64 with a NaN row": pd.concat(
            [typed, typed.iloc[[0]].assign(age=np.nan)], ignore_index=True
        ).astype(numeric),
        "Int64": typed.astype({"age": "Int64", "work": "Int64"}),
        "string": typed.astype("string"),
        "str": typed.astype(str),
        "object": typed.astype(object),
        "category": typed.astype("category"),
        "pyarrow Table": pa.Table.from_pandas(typed, preserve_index=False),
        "polars DataFrame": polars.from_pandas(typed),
        "polars LazyFrame": polars.from_pandas(typed).lazy(),
        "DuckDB relation": con.from_df(typed),
    }
    base = released(tmp_path, setting, typed)
    want = kept(typed, schema)
    assert want == len(typed)
    for name, data in forms.items():
        assert kept(data, schema) == want, name
        moved = np.abs(released(tmp_path, setting, data) - base).max()
        assert moved < 5, (name, moved)


def test_a_parquet_file_releases_like_its_table(tmp_path, typed, setting):
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    path = tmp_path / "records.parquet"
    pq.write_table(pa.Table.from_pandas(typed, preserve_index=False), path, row_group_size=50_000)
    schema, _ = setting
    assert kept(path, schema) == len(typed)
    moved = np.abs(released(tmp_path, setting, path) - released(tmp_path, setting, typed)).max()
    assert moved < 5


def test_duckdb_sums_and_integer_counts_give_the_same_answers(tmp_path, typed, setting):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.register("records", typed)
    columns = ", ".join(typed.columns)
    integers = con.execute(
        f"SELECT {columns}, count(*) AS count FROM records GROUP BY ALL").df()
    doubles = con.execute(
        f"SELECT {columns}, sum(1.0) AS count FROM records GROUP BY ALL").df()
    assert doubles["count"].dtype == np.float64
    schema, _ = setting
    for counts in (integers, doubles):
        assert kept(None, schema, counts=counts) == len(typed)
    a = released(tmp_path, setting, counts=integers)
    b = released(tmp_path, setting, counts=doubles)
    assert np.abs(a - b).max() < 5
    truth = released(tmp_path, setting, typed)
    assert np.abs(a - truth).max() < 5


def test_the_check_names_the_attribute_and_shows_the_value(tmp_path, typed, setting):
    schema, _ = setting
    frame = typed.head(1000).copy()
    frame["morekids"] = frame["morekids"].astype(object)
    frame.loc[3, "morekids"] = "z"
    frame["share"] = 0.5
    frame.loc[4, "share"] = np.nan
    frame.loc[5, "age"] = 99
    before = sorted(os.listdir(tmp_path))
    report = dm.check(frame, schema)
    assert sorted(os.listdir(tmp_path)) == before, "the check writes nothing"
    morekids = report.set_index("attribute").loc["morekids"]
    assert morekids["outside"] == 1
    assert morekids["outside_values"] == [('"z"', 1)]
    age = report.set_index("attribute").loc["age"]
    assert age["outside_values"] == [("99", 1)]
    assert report.attrs["kept_records"] == 998
    assert report.attrs["dropped_records"] == 2
    assert report.attrs["dropped_share"] == pytest.approx(0.002)
    assert "NOT PRIVATE" in report.attrs["notice"]
    # A column the schema reads but the frame lacks: refused, one message.
    with pytest.raises(ValueError, match="morekids"):
        dm.check(frame.drop(columns=["morekids"]), schema)


def test_types_never_refuse_a_release_values_no_listed_value_can_be_are_dropped(
        tmp_path, typed, setting):
    """A column's type never refuses (pandas infers dtypes from the values:
    a column of nothing but NaN is float64, and one added "yes" makes it
    object, so a refusal on the type would tell the two apart). Values no
    listed value can be are dropped, and the check says why."""
    schema, _ = setting
    frame = typed.head(2000).copy()
    all_nan = frame.assign(morekids=np.nan)
    assert all_nan["morekids"].dtype == np.float64
    one_more = pd.concat([all_nan, frame.head(1)], ignore_index=True)
    assert one_more["morekids"].dtype == object
    assert kept(all_nan, schema) == 0
    assert kept(one_more, schema) == 1
    for data in (all_nan, one_more, frame.assign(morekids=pd.Timestamp("2020-01-01")),
                 frame.assign(morekids=1.5)):
        answers = released(tmp_path, setting, data)
        assert np.abs(answers).max() < 5, "every record dropped: noise only"
    report = dm.check(frame.assign(morekids=1.5), schema).set_index("attribute")
    assert "cannot read" in report.loc["morekids", "mismatch"]
    assert pd.isna(report.loc["gender1", "mismatch"])
    _, plan = setting
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=1.0)
    with pytest.raises(ValueError, match="Arrow C stream"):
        dm.release([1, 2], schema=schema, plan=plan, epsilon=1.0, ledger=ledger)
    assert ledger.spent == 0


class Unprintable:
    def __str__(self):
        raise RuntimeError("secret 42")


def test_every_value_of_an_object_column_converts_and_no_message_quotes_one(
        tmp_path, typed, setting):
    """Values pyarrow cannot convert (a lone surrogate, an integer past
    Python's 4,300 digits, an object whose str raises) are each one value,
    missing or outside, never an error one row could cause; a producer's
    own failure is refused without its message."""
    schema, _ = setting
    frame = typed.head(1000).astype({"morekids": object})
    for odd in ("ssn=123-45-\udc806789", 10 ** 5000, Unprintable(), b"\xff\xfe"):
        row = frame.head(1).copy()
        row["morekids"] = pd.Series([odd], index=row.index, dtype=object)
        neighbour = pd.concat([frame, row], ignore_index=True)
        assert kept(neighbour, schema) == kept(frame, schema)
        released(tmp_path, setting, neighbour)
    pa = pytest.importorskip("pyarrow")

    def failing():
        yield pa.record_batch(frame.head(10))
        raise RuntimeError("value secret-42 broke the producer")

    _, plan = setting
    reader = pa.RecordBatchReader.from_batches(pa.record_batch(frame.head(10)).schema, failing())
    ledger = dm.Ledger.create(tmp_path / "failing.jsonl", total_epsilon=1.0)
    with pytest.raises(ValueError) as refused:
        dm.release(reader, schema=schema, plan=plan, epsilon=1.0, ledger=ledger)
    assert "secret" not in str(refused.value)
    assert ledger.spent == 0
    reader = pa.RecordBatchReader.from_batches(pa.record_batch(frame.head(10)).schema, failing())
    with pytest.raises(ValueError, match="secret-42"):
        dm.check(reader, schema)


ALPHABET = ["yes", "no", "male", "female", "", "NA", "x", " yes ", "a,b", '"q"',
            "line\nbreak", "cr\r", "é", None, np.nan]


def random_frame(rng: np.random.Generator, rows: int) -> pd.DataFrame:
    """A frame of the schema's columns with random dtypes, nulls and text."""
    frame = {}
    for column in ["morekids", "gender1", "gender2", "afam", "hispanic", "other"]:
        values = [ALPHABET[i] for i in rng.integers(0, len(ALPHABET), rows)]
        kind = rng.integers(0, 3)
        series = pd.Series(values, dtype=object)
        frame[column] = series.astype("category") if kind == 1 else (
            series.astype("string") if kind == 2 else series)
    for column, (lo, hi) in {"age": (15, 40), "work": (-2, 60)}.items():
        values = rng.integers(lo, hi, rows).astype(float)
        values[rng.random(rows) < 0.1] = np.nan
        kind = rng.integers(0, 3)
        frame[column] = (values if kind == 0 else
                         pd.array(values, dtype="Float64") if kind == 1 else
                         pd.Series(values).map(lambda v: None if v != v else str(v)).astype(object))
    frame["note"] = [ALPHABET[i] for i in rng.integers(0, len(ALPHABET), rows)]
    return pd.DataFrame(frame)


def test_random_frames_one_added_row_keeps_at_most_one_record(setting):
    """Random frames (random dtypes, nulls, NaN, text with line breaks,
    quotes and separators): one added row changes the kept records, and
    each attribute's counts of dropped values, by at most one."""
    schema, _ = setting
    rng = np.random.default_rng(2026)
    for _ in range(25):
        frame = random_frame(rng, int(rng.integers(1, 60)))
        extra = random_frame(rng, 1)
        at = int(rng.integers(0, len(frame) + 1))
        bigger = pd.concat([frame.iloc[:at], extra, frame.iloc[at:]], ignore_index=True)
        a, b = dm.check(frame, schema), dm.check(bigger, schema)
        assert 0 <= b.attrs["kept_records"] - a.attrs["kept_records"] <= 1
        for key in ("outside", "missing"):
            assert ((b[key] - a[key]).between(0, 1)).all(), key
