"""dm.stream: the running counts of `dpmm stream`, through the same
pipeline, from a pandas DataFrame with ISO 8601 date-times on a local
calendar; pure ε without delta; a privacy unit bounded in steps and
records; and dm.check reading the same calendar."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm

SCHEMA = {
    "domain": [
        {"name": "sex", "column": "sex", "values": ["f", "m"]},
        {"name": "age", "column": "age", "bins": {"start": 0, "stop": 20, "width": 1}},
    ]
}
SPEC = {
    "domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 20}],
    "queries": [{"marginals": {"k": 1}}, {"marginal": ["sex", "age"]}],
}
STEPS = 30
ZONE = "America/Chicago"


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    """About 12,000 stops over March 2017 in Chicago (across the change
    to daylight saving time), written as UTC date-times, with a person
    column: each person has records on at most 2 days at least 3 apart."""
    rng = np.random.default_rng(7)
    rows = []
    for person in range(3000):
        first = rng.integers(0, STEPS - 10)
        for day in (first, first + 3 + rng.integers(0, 7)):
            for _ in range(rng.integers(1, 3)):
                # A local wall-clock time of that day (the hour that does
                # not exist on March 12 moved forward, still that day).
                local = (
                    pd.Timestamp("2017-03-01")
                    + pd.Timedelta(days=int(day), seconds=int(rng.integers(0, 86_400)))
                ).tz_localize(ZONE, nonexistent="shift_forward")
                rows.append(
                    {
                        "when": local.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "sex": "fm"[rng.integers(0, 2)],
                        "age": int(rng.integers(0, 20)),
                        "person": person,
                    }
                )
    return pd.DataFrame(rows)


def truth(records: pd.DataFrame) -> dict[tuple[int, str], float]:
    """The running counts by a hand-made local day mapping."""
    local = pd.to_datetime(records["when"], utc=True).dt.tz_convert(ZONE)
    # Local calendar dates, then whole days (a difference of aware
    # midnights is 23 hours across the change to summer time).
    day = (local.dt.tz_localize(None).dt.normalize() - pd.Timestamp("2017-03-01")).dt.days
    out: dict[tuple[int, str], float] = {}
    counts: dict[str, float] = {}
    for step in range(STEPS):
        today = records[day == step]
        for sex, age in zip(today["sex"], today["age"]):
            for label in (f"sex = {sex}", f"age = {age}", f"sex = {sex} & age = {age}"):
                counts[label] = counts.get(label, 0.0) + 1.0
        for label, c in counts.items():
            out[(step, label)] = c
    return out


def z_scores(frame: pd.DataFrame, want: dict[tuple[int, str], float]) -> np.ndarray:
    t = np.array([want.get((s, q), 0.0) for s, q in zip(frame["step"], frame["query"])])
    return (frame["answer"].to_numpy() - t) / frame["std_error"].to_numpy()


def run(tmp_path, records, epsilon, delta=None, **kw) -> tuple[pd.DataFrame, dm.Ledger]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    ledger = dm.Ledger.create(tmp_path / "ledger.jsonl", total_epsilon=epsilon, total_delta=delta)
    frame = dm.stream(
        records,
        schema=dm.Schema.from_dict(SCHEMA),
        workload=dm.Workload.from_dict(SPEC),
        epsilon=epsilon,
        delta=delta,
        ledger=ledger,
        time_column="when",
        steps=STEPS,
        start="2017-03-01",
        step="day",
        timezone=ZONE,
        **kw,
    )
    return frame, ledger


@pytest.mark.parametrize("delta", [None, 1e-6])
def test_running_counts_on_a_local_calendar_match_the_truth(tmp_path, records, delta):
    # A running count's noise is shared by every later step of its query:
    # z-scores are pooled over five streams.
    want = truth(records)
    runs = [run(tmp_path / str(i), records, 2.0, delta) for i in range(5)]
    z = np.concatenate([z_scores(f, want) for f, _ in runs])
    assert 0.9 <= z.std() <= 1.1, z.std()
    assert abs(z.mean()) < 0.15, z.mean()
    frame, ledger = runs[0]
    assert len(frame) == STEPS * (2 + 20 + 40)
    assert list(frame.columns) == [
        "step", "time", "query", "answer", "std_error", "ci_low", "ci_high"
    ]
    assert frame["time"].iloc[0] == "2017-03-01"
    sidecar = frame.attrs["sidecar"]
    assert sidecar["sensitivity_norm"] == ("L1" if delta is None else "L2")
    assert ledger.releases == 1 and ledger.remaining <= 1e-12 * ledger.total


def test_a_privacy_unit_is_bounded_in_steps_and_records(tmp_path, records):
    # Every person is within 2 steps 3 apart and 2 records a day: nothing
    # is dropped (the running counts are unbiased), and the noise protects
    # the whole person.
    unit = {
        "privacy_unit": "person",
        "max_records_per_unit": 2,
        "max_steps_per_unit": 2,
        "min_separation": 3,
    }
    want = truth(records)
    runs = [run(tmp_path / str(i), records, 2.0, nonneg=True, **unit) for i in range(5)]
    z = np.concatenate([z_scores(f, want) for f, _ in runs])
    assert 0.9 <= z.std() <= 1.1, z.std()
    assert abs(z.mean()) < 0.15, z.mean()
    frame = runs[0][0]
    # Nothing dropped: at ε = 100 (Laplace scale 0.12, a draw nonzero with
    # probability 5e-4) nearly every running count is exact (a person's
    # dropped step would leave its counts off from that step on).
    exact, _ = run(tmp_path / "exact", records, 100.0, **unit)
    t = np.array([want.get((s, q), 0.0) for s, q in zip(exact["step"], exact["query"])])
    off = np.abs(exact["answer"].to_numpy() - t)
    assert off.max() < 3 and (off > 0).mean() < 0.05, (off.max(), (off > 0).mean())
    assert frame.attrs["sidecar"]["privacy_unit"]["max_steps_per_unit"] == 2
    # Levels × 2 records × 2 steps × 3 tables.
    sidecar = frame.attrs["sidecar"]
    assert sidecar["sensitivity"] == 12 * sidecar["levels"]
    nonneg = frame.attrs["nonneg"]
    assert (nonneg["answer"] >= 0).all()
    # A unit with no bound on its steps is refused, and nothing is spent.
    ledger = dm.Ledger.create(tmp_path / "other.jsonl", total_epsilon=1.0)
    with pytest.raises(ValueError, match="max-steps-per-unit"):
        dm.stream(
            records,
            schema=dm.Schema.from_dict(SCHEMA),
            workload=dm.Workload.from_dict(SPEC),
            epsilon=1.0,
            ledger=ledger,
            time_column="when",
            steps=STEPS,
            start="2017-03-01",
            step="day",
            timezone=ZONE,
            privacy_unit="person",
            max_records_per_unit=2,
        )
    assert ledger.releases == 0


def test_the_check_reads_the_same_calendar(records):
    late = pd.DataFrame(
        [{"when": "2017-03-31T04:59:59Z", "sex": "f", "age": 3, "person": -1},
         {"when": "2017-03-31T05:00:00Z", "sex": "f", "age": 3, "person": -2}]
    )
    frame = dm.check(
        pd.concat([records, late], ignore_index=True),
        dm.Schema.from_dict(SCHEMA),
        time_column="when",
        steps=STEPS,
        start="2017-03-01",
        step="day",
        timezone=ZONE,
    )
    # March 30 (the last step) ends at 05:00 UTC in Chicago: the second
    # is outside.
    times = frame.attrs["times"]
    assert times["outside_steps"]["rows"] == 1, times
    with pytest.raises(ValueError):
        dm.check(records, dm.Schema.from_dict(SCHEMA), step="day")
    # A stream's units, per step: everyone is within 2 records a day on 2
    # days 3 apart; at one step a unit, every person loses a step.
    calendar = dict(
        time_column="when", steps=STEPS, start="2017-03-01", step="day", timezone=ZONE
    )
    for most, over in [(2, 0), (1, records["person"].nunique())]:
        units = dm.check(
            records,
            dm.Schema.from_dict(SCHEMA),
            privacy_unit="person",
            max_records_per_unit=2,
            max_steps_per_unit=most,
            min_separation=3,
            **calendar,
        ).attrs["units"]
        assert units["per_step"] and units["records_over_bound"] == 0, units
        assert (units["most_steps"], units["units_over_steps"]) == (2, over), units
