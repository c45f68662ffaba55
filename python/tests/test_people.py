"""People, not lines: the privacy unit and weights through dm.release and
dm.check.

One person added with fifty records must move every answer by less than
K + 5 when at most K records per person are kept (by less than K plus the
noise: the other people all have one record, so only the added person's
kept records differ between the releases), and by about fifty without a
privacy unit. Weights scale the sensitivity by exactly the bound when it
is a power of two (it is then on the kernel's grid)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "datasets" / "fertility1980.csv.gz"
EPSILON = 50.0
K = 3

_ledgers = itertools.count()


@pytest.fixture(scope="module")
def people() -> pd.DataFrame:
    """The census records, each its own person."""
    frame = pd.read_csv(RECORDS, dtype=str, keep_default_na=False)
    return frame.assign(person=np.arange(len(frame)))


@pytest.fixture(scope="module")
def one_way(tmp_path_factory, spec_path, schema_path):
    """Every 1-way marginal (80 answers: the noise's largest move between
    two releases at ε = 50 and K = 3 stays near 2)."""
    spec = json.loads(spec_path.read_text())
    spec["queries"] = [{"marginals": {"k": 1}}]
    path = tmp_path_factory.mktemp("spec") / "one_way.json"
    path.write_text(json.dumps(spec))
    return dm.Schema.from_json(schema_path), dm.Workload.from_json(path)


def released(tmp_path: Path, setting, data, **kw) -> pd.DataFrame:
    schema, workload = setting
    ledger = dm.Ledger.create(tmp_path / f"l{next(_ledgers)}.jsonl", total_epsilon=EPSILON)
    return dm.release(data, schema=schema, workload=workload, epsilon=EPSILON, ledger=ledger, **kw)


def test_one_person_with_fifty_records_moves_answers_by_less_than_k_plus_five(
    tmp_path, people, one_way
):
    intruder = people.iloc[[0] * 50].assign(person=-1)
    added = pd.concat([people, intruder], ignore_index=True)
    unit = {"privacy_unit": "person", "max_records_per_unit": K}
    a = released(tmp_path, one_way, people, **unit)
    b = released(tmp_path, one_way, added, **unit)
    moved = np.abs(a["answer"] - b["answer"]).max()
    assert moved < K + 5, moved
    bound = a.attrs["sidecar"]["privacy_unit"]
    assert (bound["column"], bound["max_records_per_unit"]) == ("person", K)

    # Without a privacy unit the intruder is fifty neighbours: the sidecar
    # says the unit is one record, and the count of their cell moves by 50.
    a = released(tmp_path, one_way, people)
    b = released(tmp_path, one_way, added)
    assert np.abs(a["answer"] - b["answer"]).max() > 45
    assert a.attrs["sidecar"]["privacy_unit"].startswith("one record")


def test_the_unit_multiplies_the_sensitivity_and_the_weight_bound_scales_it(
    tmp_path, people, one_way
):
    base = released(tmp_path, one_way, people).attrs["sidecar"]["sensitivity"]
    unit = released(
        tmp_path, one_way, people, privacy_unit="person", max_records_per_unit=K
    ).attrs["sidecar"]
    assert unit["sensitivity"] == pytest.approx(K * base, rel=1e-12)
    weighted = people.assign(w=np.linspace(0.0, 6.0, len(people)))
    # 4 is a power of two: on the kernel's weight grid, so exactly 4 times.
    side = released(tmp_path, one_way, weighted, weight="w", max_weight=4.0).attrs["sidecar"]
    assert side["sensitivity"] == pytest.approx(4 * base, rel=1e-12)
    assert (side["weights"]["column"], side["weights"]["max_weight"]) == ("w", 4.0)


def test_the_check_counts_the_units_over_the_bound_and_the_clipped_weights(people, one_way):
    schema, _ = one_way
    # Person 0 gets ten records, person 1 five; everyone else one.
    frame = pd.concat(
        [people, people.iloc[[0] * 9], people.iloc[[1] * 4]], ignore_index=True
    ).assign(w=1.0)
    frame.loc[frame.index[-1], "w"] = 9.0
    report = dm.check(
        frame, schema, privacy_unit="person", max_records_per_unit=K, weight="w", max_weight=2.0
    )
    units = report.attrs["units"]
    assert units["units"] == len(people)
    assert units["most_records"] == 10
    assert units["units_over_bound"] == 2
    assert units["records_over_bound"] == (10 - K) + (5 - K)
    weights = report.attrs["weights"]
    assert weights["clipped_records"] == 1
    assert weights["largest"] == 9.0


def test_a_unit_or_weight_a_release_cannot_honour_is_refused_before_the_charge(
    tmp_path, people, one_way
):
    schema, workload = one_way
    ledger = dm.Ledger.create(tmp_path / "refused.jsonl", total_epsilon=EPSILON)
    bad = [
        {"privacy_unit": "nobody", "max_records_per_unit": K},
        {"privacy_unit": "person", "max_records_per_unit": 0},
        {"privacy_unit": "person"},
        {"weight": "person", "max_weight": -1.0},
        {"weight": "person", "max_weight": float("nan")},
    ]
    for kw in bad:
        with pytest.raises(ValueError):
            dm.release(people, schema=schema, workload=workload, epsilon=1.0, ledger=ledger, **kw)
    assert ledger.spent == 0
