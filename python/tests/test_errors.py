"""Each kind of failure is its own exception class under dm.DpmmError
(bad input also a ValueError), raised before anything is charged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dpmatrix as dm
from conftest import RECORDS


def _release(tmp_path: Path, schema_path: Path, spec_path: Path, **change):
    ledger = tmp_path / "ledger.jsonl"
    if not ledger.exists():
        dm.Ledger.create(ledger, total_epsilon=1.0)
    args = dict(
        data=RECORDS,
        schema=dm.Schema.from_json(schema_path),
        workload=dm.Workload.from_json(spec_path),
        epsilon=0.5,
        ledger=ledger,
    )
    args.update(change)
    return dm.release(args.pop("data"), **args)


def test_four_failures_raise_four_classes_and_spend_nothing(tmp_path, schema_path, spec_path):
    schema = json.loads(schema_path.read_text())
    bad_schema = dict(schema, domain=[dict(schema["domain"][0], bins="nonsense")])
    with pytest.raises(dm.SchemaError) as a:
        dm.Schema.from_dict(bad_schema)
    with pytest.raises(dm.WorkloadError) as b:
        dm.Workload.from_dict({"domain": [{"name": "x", "size": 2}], "queries": [{"kron": {"x": "no-such"}}]})
    # The records lack a column the schema reads.
    missing = dict(schema, columns=schema["columns"] + ["not_a_column"])
    missing["domain"] = [dict(schema["domain"][0], column="not_a_column")] + schema["domain"][1:]
    short = tmp_path / "schema.json"
    short.write_text(json.dumps(missing))
    with pytest.raises(dm.DataError) as c:
        _release(tmp_path, short, spec_path)
    with pytest.raises(dm.ParameterError) as d:
        _release(tmp_path, schema_path, spec_path, epsilon=-1.0)
    raised = [a, b, c, d]
    assert len({type(e.value) for e in raised}) == 4
    for e in raised:
        assert isinstance(e.value, dm.DpmmError) and isinstance(e.value, ValueError), e.value
        assert "\n" not in str(e.value)
    assert dm.Ledger(tmp_path / "ledger.jsonl").spent == 0


def test_an_overspend_a_ledger_and_a_query_not_measured(tmp_path, schema_path, spec_path):
    with pytest.raises(dm.BudgetExceeded) as over:
        _release(tmp_path, schema_path, spec_path, epsilon=2.0)
    assert isinstance(over.value, dm.DpmmError) and not isinstance(over.value, ValueError)
    dm.Ledger.create(tmp_path / "other.jsonl", total_epsilon=1.0)
    with pytest.raises(dm.LedgerError):
        _release(tmp_path, schema_path, spec_path, ledger=tmp_path / "other.jsonl", delta=1e-9)
    # Cancelled is a KeyboardInterrupt: `except KeyboardInterrupt` sees it.
    assert issubclass(dm.Cancelled, KeyboardInterrupt) and issubclass(dm.Cancelled, dm.DpmmError)
    assert issubclass(dm.InternalError, RuntimeError)
