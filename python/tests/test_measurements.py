"""Ask after the release: dm.release(measurements=…) writes the noisy
measurements, and dm.Measurements answers new queries from them.

New workloads — sub-marginals of the measured 2-way marginals, ranges over
the binned attributes, and a union of both — are answered from ten
releases' files; their z-scores against the census extract's exact counts
(computed here with numpy, independently of dpmm) must have mean within
±0.15 and standard deviation 0.85–1.15. The DataFrame is the one `dpmm
query` writes, and a query outside the measured interactions is refused
naming it, with nothing spent."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def census(schema_path, spec_path):
    return dm.Schema.from_json(schema_path), dm.Workload.from_json(spec_path)


def _spec(spec_path: Path, queries) -> dm.Workload:
    spec = json.loads(spec_path.read_text())
    spec["queries"] = queries
    return dm.Workload.from_dict(spec)


def _release_with_file(tmp_path: Path, schema, workload):
    """A (1, 10⁻⁹) release of the census extract on a fresh ledger, with
    its measurement file: the file's path and the answers."""
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=2.0, total_delta=1e-6)
    file = tmp_path / "m.parquet"
    released = dm.release(
        str(REPO / "datasets" / "fertility1980.csv.gz"), schema=schema, workload=workload,
        epsilon=1.0, delta=1e-9, ledger=ledger, measurements=file,
    )
    return file, released


AGE_RANGES = [[0, 4], [5, 9], [10, 14]]
AGE_HALVES = [[0, 6], [7, 14]]
WORK_QUARTERS = [[0, 12], [13, 25], [26, 38], [39, 52]]
# Disjoint ranges, so that the z-scores of one release are not dominated
# by a few shared noise terms (a prefix's 53 answers nearly are one).
NEW_QUERIES = [
    {"marginals": {"k": 1}},
    {"kron": {"morekids": "identity", "age": {"ranges": AGE_RANGES}}},
    {"kron": {"age": {"ranges": AGE_HALVES}, "work": {"ranges": WORK_QUARTERS}}},
]


def _truth(records: pd.DataFrame, schema_path: Path) -> np.ndarray:
    """NEW_QUERIES' exact answers, in workload order (products in order,
    rows row-major, the last attribute fastest), from the records alone."""
    schema = json.loads(schema_path.read_text())
    codes = {}
    for attr in schema["domain"]:
        column = records[attr["column"]]
        if "values" in attr:
            codes[attr["name"]] = column.map({v: i for i, v in enumerate(attr["values"])})
        else:
            codes[attr["name"]] = column.astype(int) - attr["bins"]["start"]
    sizes = {a["name"]: (len(a["values"]) if "values" in a else a["bins"]["stop"] - a["bins"]["start"])
             for a in schema["domain"]}
    out = []
    for attr in schema["domain"]:
        out.extend(np.bincount(codes[attr["name"]], minlength=sizes[attr["name"]]))
    for kids in range(2):
        for lo, hi in AGE_RANGES:
            age = codes["age"]
            out.append(((codes["morekids"] == kids) & (age >= lo) & (age <= hi)).sum())
    for lo, hi in AGE_HALVES:
        for first, last in WORK_QUARTERS:
            age, work = codes["age"], codes["work"]
            out.append(((age >= lo) & (age <= hi) & (work >= first) & (work <= last)).sum())
    return np.asarray(out, dtype=float)


def test_new_queries_from_ten_releases_are_unbiased_with_their_stated_errors(
    tmp_path, census, records, spec_path, schema_path
):
    schema, workload = census
    new = _spec(spec_path, NEW_QUERIES)
    truth = _truth(records, schema_path)
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=20.0, total_delta=1e-6)
    z = []
    for k in range(10):
        file = tmp_path / f"m{k}.parquet"
        dm.release(
            str(REPO / "datasets" / "fertility1980.csv.gz"),
            schema=schema, workload=workload, epsilon=1.0, delta=1e-9, ledger=ledger,
            measurements=file,
        )
        spent = ledger.spent
        answers = dm.Measurements.load(file).answer(new)
        assert ledger.spent == spent  # a query spends nothing
        assert answers.attrs["sidecar"]["charged"] == 0.0
        assert len(answers) == len(truth) == 80 + 6 + 8
        z.extend((answers.answer - truth) / answers.std_error)
    z = np.asarray(z)
    assert abs(z.mean()) < 0.15, z.mean()
    assert 0.85 <= z.std() <= 1.15, z.std()


def test_the_answers_are_the_commands(tmp_path, census, spec_path, dpmm_command):
    schema, workload = census
    file, released = _release_with_file(tmp_path, schema, workload)
    m = dm.Measurements.load(file)
    assert (m.epsilon, m.delta) == (1.0, 1e-9)
    assert m.domain == workload.domain
    # The release's own workload comes back as released.
    again = m.answer(workload)
    pd.testing.assert_frame_equal(again, released, check_exact=True)
    new = _spec(spec_path, NEW_QUERIES)
    spec = tmp_path / "new.json"
    spec.write_text(json.dumps(new.to_dict()))
    out = tmp_path / "q.csv"
    subprocess.run(
        [dpmm_command, "query", "--measurements", file, "--workload", spec, "--out", out],
        check=True, capture_output=True,
    )
    ours = m.answer(new)
    theirs = pd.read_csv(out, float_precision="round_trip")
    pd.testing.assert_frame_equal(ours, theirs, check_exact=True)
    sidecar = json.loads((tmp_path / "q.csv.json").read_text())
    assert ours.attrs["sidecar"].keys() == sidecar.keys()
    assert ours.attrs["sidecar"]["groups"] == sidecar["groups"]
    listed = subprocess.run(
        [dpmm_command, "query", "--measurements", file, "--list"],
        check=True, capture_output=True, text=True,
    ).stdout.splitlines()
    assert [" × ".join(s) for s in m.estimable()] == listed


def test_refusals_name_what_was_not_measured_and_spend_nothing(
    tmp_path, census, spec_path
):
    schema, workload = census
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=2.0, total_delta=1e-6)
    data = str(REPO / "datasets" / "fertility1980.csv.gz")
    # The measurement file's path is checked before the charge.
    for bad in (tmp_path, ledger.path):
        with pytest.raises(ValueError):
            dm.release(data, schema=schema, workload=workload, epsilon=1.0, delta=1e-9,
                       ledger=ledger, measurements=bad)
    assert ledger.spent == 0
    file = tmp_path / "m.parquet"
    dm.release(data, schema=schema, workload=workload, epsilon=1.0, delta=1e-9, ledger=ledger,
               measurements=file)
    m = dm.Measurements.load(file)
    with pytest.raises(dm.WorkloadError, match="interaction of morekids × age × work was not measured"):
        m.answer(_spec(spec_path, [{"marginal": ["morekids", "age", "work"]}]))
    with pytest.raises(ValueError, match="not the schema's"):
        m.answer(dm.Workload.from_dict({"domain": [{"name": "x", "size": 2}],
                                        "queries": [{"marginal": ["x"]}]}))
    with pytest.raises(ValueError, match="not a dpmm measurement file|not a Parquet file"):
        (tmp_path / "answers.csv").write_text("query,answer\n")
        dm.Measurements.load(tmp_path / "answers.csv")
    with pytest.raises(FileNotFoundError):
        dm.Measurements.load(tmp_path / "missing.parquet")


def _rewrite(src: Path, dst: Path, header=None, table=None, schema=None) -> Path:
    """The measurement file at ``src`` written again to ``dst`` with its
    header, table or Arrow schema changed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(src)
    h = json.loads(t.schema.metadata[b"dpmm.measurements"])
    if header is not None:
        h = header(h)
    if table is not None:
        t = table(t)
    if schema is not None:
        t = pa.table(t.to_pydict(), schema=schema)
    t = t.replace_schema_metadata({"dpmm.measurements": json.dumps(h)})
    pq.write_table(t, dst)
    return dst


def test_damaged_or_forged_files_are_refused_and_rewrites_are_read(tmp_path, census, spec_path):
    import pyarrow as pa

    schema, workload = census
    file, released = _release_with_file(tmp_path, schema, workload)
    # A rewrite by pyarrow (nullable columns, no nulls) reads the same.
    again = dm.Measurements.load(_rewrite(file, tmp_path / "nullable.parquet")).answer(workload)
    pd.testing.assert_frame_equal(again, released, check_exact=True)
    cases = {
        "term is int64": dict(schema=pa.schema(
            [("term", pa.int64()), ("row", pa.int64()), ("value", pa.float64())])),
        "value is float32": dict(schema=pa.schema(
            [("term", pa.int32()), ("row", pa.int64()), ("value", pa.float32())])),
        "a null value": dict(table=lambda t: t.set_column(
            2, "value", pa.array([None] + t["value"].to_pylist()[1:], pa.float64()))),
        "huge values": dict(table=lambda t: t.set_column(
            2, "value", pa.array([1e308] * len(t), pa.float64()))),
        "off the grid": dict(table=lambda t: t.set_column(
            2, "value", pa.array([3e-17] + t["value"].to_pylist()[1:], pa.float64()))),
        "variance not the law's": dict(header=lambda h: {
            **h, "noise": {**h["noise"], "variance_per_row": 2 * h["noise"]["variance_per_row"]}}),
        "negative epsilon": dict(header=lambda h: {
            **h, "privacy": {**h["privacy"], "epsilon": -1.0}}),
    }
    for name, change in cases.items():
        bad = _rewrite(file, tmp_path / "bad.parquet", **change)
        with pytest.raises(ValueError, match="bad.parquet"):
            dm.Measurements.load(bad).answer(workload)
            pytest.fail(name)
    # The query's own outputs never overwrite the file, nor each other.
    m = dm.Measurements.load(file)
    before = file.read_bytes()
    for out, report in ((None, file), (file, None), (tmp_path / "a.csv", tmp_path / "a.csv")):
        with pytest.raises(ValueError):
            m.answer(workload, out=out, report=report)
    assert file.read_bytes() == before


def test_attributes_of_one_value_and_a_strategy_without_the_total(tmp_path, spec_path):
    import pyarrow as pa

    schema_doc = json.loads((REPO / "examples/fertility1980/schema.json").read_text())
    schema_doc["domain"][0]["values"] = ["no"]  # morekids: one value
    spec = json.loads(spec_path.read_text())
    spec["domain"][0]["size"] = 1
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=2.0, total_delta=1e-6)
    file = tmp_path / "m.parquet"
    dm.release(
        str(REPO / "datasets" / "fertility1980.csv.gz"), schema=dm.Schema.from_dict(schema_doc),
        workload=dm.Workload.from_dict(spec), epsilon=1.0, delta=1e-9, ledger=ledger,
        measurements=file,
    )
    m = dm.Measurements.load(file)
    listed = m.estimable()
    assert all(s[0] == "morekids" for s in listed) and ["morekids", "gender1", "gender2"] in listed
    queries = {**spec, "queries": [{"marginal": ["morekids", "gender1", "gender2"]}]}
    assert len(m.answer(dm.Workload.from_dict(queries))) == 4

    # Without its grand-total term (and its row), no marginal is estimable.
    def drop_total(h):
        terms = h["strategy"]["terms"]
        k = next(i for i, t in enumerate(terms) if not t["support"])
        h["strategy"]["terms"] = terms[:k] + terms[k + 1:]
        h["strategy"]["rows"] -= 1
        return h

    def drop_row(t):
        terms = t["term"].to_pylist()
        k = next(i for i, s in enumerate(json.loads(
            t.schema.metadata[b"dpmm.measurements"])["strategy"]["terms"]) if not s["support"])
        keep = [i for i, x in enumerate(terms) if x != k]
        t = t.take(keep)
        shifted = pa.array([x - (x > k) for x in t["term"].to_pylist()], pa.int32())
        return t.set_column(0, "term", shifted)

    forged = dm.Measurements.load(
        _rewrite(file, tmp_path / "nototal.parquet", header=drop_total, table=drop_row)
    )
    assert forged.estimable() == []
    with pytest.raises(ValueError, match="total"):
        forged.answer(dm.Workload.from_dict({**spec, "queries": [{"marginal": ["age"]}]}))
