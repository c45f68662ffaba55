"""The whole dpmatrix API against independent truth: closed forms, the
command's own figures (cargo xtask), the true counts of the embedded
census extract, and the ledger's bytes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from conftest import RECORDS, copy_to


def true_counts(records: pd.DataFrame, queries: pd.Series) -> np.ndarray:
    """Each query `a = v & b = w` counted on the records directly."""
    out = []
    for q in queries:
        mask = np.ones(len(records), dtype=bool)
        for term in q.split(" & "):
            name, value = term.split(" = ")
            mask &= (records[name] == value).to_numpy()
        out.append(mask.sum())
    return np.array(out, dtype=float)


def z_scores(a: pd.DataFrame, b: pd.DataFrame) -> np.ndarray:
    """Differences of two independent releases of the same queries in units
    of their joint standard error."""
    assert list(a["query"]) == list(b["query"])
    se = np.sqrt(a["std_error"] ** 2 + b["std_error"] ** 2)
    return ((a["answer"] - b["answer"]) / se).to_numpy()


# --- the research layer on matrices -------------------------------------


def test_workloads_are_the_matrices_they_name():
    p = dm.workloads.prefix(5)
    assert p.dtype == np.float64 and p.shape == (5, 5)
    assert np.array_equal(p, np.tril(np.ones((5, 5))))
    r = dm.workloads.all_range(6)
    assert r.shape == (21, 6)
    rows = [(a, b) for a in range(6) for b in range(a, 6)]
    for row, (a, b) in zip(r, rows):
        assert np.array_equal(row, [1.0 if a <= j <= b else 0.0 for j in range(6)])
    assert np.array_equal(dm.workloads.identity(3), np.eye(3))
    with pytest.raises(ValueError):
        dm.workloads.prefix(0)


def test_error_of_the_identity_on_prefix_is_its_closed_form():
    n, eps = 8, 0.5
    w = dm.workloads.prefix(n)
    e = dm.error(w, np.eye(n), privacy="pure", epsilon=eps)
    trace = n * (n + 1) / 2  # tr(WᵀW) with Δ₁(I) = 1
    assert e["supported"]
    assert e["objective"] == pytest.approx(trace, rel=1e-12)
    # Laplace of scale 1/ε per cell: variance 2/ε² per unit of trace.
    assert e["expected_total_squared_error"] == pytest.approx(2 / eps**2 * trace, rel=1e-12)
    missing = np.eye(n)[:-1]
    e = dm.error(w, missing, privacy="pure")
    assert not e["supported"] and e["expected_total_squared_error"] is None
    # (ε, δ): l2_obj of the identity is tr(WᵀW) too (Δ₂ = 1).
    e = dm.error(w, np.eye(n), privacy="approx", epsilon=1.0, delta=1e-6)
    assert e["objective"] == pytest.approx(trace, rel=1e-12)


def test_optimize_reports_what_cargo_xtask_optimize_reports(tmp_path: Path, xtask: Path):
    w = dm.workloads.all_range(48)
    res = dm.optimize(w, optimizer="coa", privacy="approx")
    np.save(tmp_path / "w.npy", w)
    out = subprocess.run(
        [xtask, "optimize", "--workload", tmp_path / "w.npy", "--optimizer", "coa",
         "--privacy", "approx"],
        capture_output=True, text=True, check=True,
    )
    cli = json.loads(out.stdout)
    assert res.objective == pytest.approx(cli["objective"], rel=1e-9)
    assert res.lower_bound == pytest.approx(cli["lower_bound"], rel=1e-9)
    assert res.optimizer == "coa" and res.privacy == "approx"
    assert res.converged and 0 <= res.duality_gap < 1e-3
    assert res.lower_bound <= res.objective
    assert res.strategy.shape[1] == 48
    # The objective is the strategy's own, recomputed independently.
    assert dm.error(w, res.strategy, privacy="approx")["objective"] == pytest.approx(
        res.objective, rel=1e-9
    )
    # A Fortran-ordered W (read in place too) is the same problem.
    again = dm.optimize(np.asfortranarray(w), optimizer="coa", privacy="approx")
    assert again.objective == pytest.approx(res.objective, rel=1e-9)


def test_optimizers_are_the_registry_xtask_lists(xtask: Path):
    names = dm.optimizers()
    assert "coa" in names and "pidentity" in names and len(set(names)) == len(names)
    help_text = subprocess.run(
        [xtask, "optimize", "--help"], capture_output=True, text=True, check=True
    ).stdout
    listed = help_text.split("The optimizer, one of:\n", 1)[1].split("\n\n", 1)[0]
    assert [line.split()[0] for line in listed.splitlines()] == names
    w = dm.workloads.prefix(16)
    pure = dm.optimize(w, optimizer="pidentity", privacy="pure")
    assert pure.privacy == "pure" and pure.objective > 0


def test_a_matrix_that_is_not_2d_is_a_value_error():
    with pytest.raises(ValueError, match="2-D"):
        dm.optimize(np.ones(5))
    with pytest.raises(ValueError, match="2-D"):
        dm.optimize(np.ones((2, 2, 2)))
    with pytest.raises(ValueError):
        dm.optimize([["a", "b"]])
    with pytest.raises(ValueError):
        dm.optimize(np.full((3, 3), np.nan))
    with pytest.raises(ValueError):
        dm.optimize(np.eye(3), optimizer="no-such-optimizer")
    with pytest.raises(ValueError):
        dm.error(np.eye(3), np.eye(3), privacy="approximately")


# --- plans --------------------------------------------------------------


def test_a_plan_states_its_figures_and_scales_with_epsilon(spec_path: Path, tmp_path: Path):
    wl = dm.Workload.from_json(spec_path)
    assert wl.queries == 1671 and len(wl.domain) == 8
    plan = dm.plan(wl, epsilon=1.0)
    assert (plan.privacy, plan.objective_name) == ("pure", "l1_obj")
    assert plan.lower_bound is not None and plan.lower_bound <= plan.objective
    groups = plan.groups
    assert list(groups.columns) == ["label", "queries", "rmse"]
    assert groups["queries"].sum() == 1671
    # One unweighted group: its RMSE is √(2·l1_obj/ε² / queries)
    # (Laplace variance 2b² per row, b = Δ₁/ε, l1_obj = Δ₁²·Σ unit variances).
    rmse = np.sqrt(2 * plan.objective / 1.0**2 / 1671)
    assert groups["rmse"].iloc[0] == pytest.approx(rmse, rel=1e-9)
    twice = dm.plan(wl, epsilon=2.0)
    assert twice.groups["rmse"].iloc[0] == pytest.approx(rmse / 2, rel=1e-9)
    # Saved and loaded: the same figures, recomputed from the strategy.
    plan.save(tmp_path / "plan.json")
    back = dm.Plan.load(tmp_path / "plan.json")
    assert back.privacy == "pure" and back.epsilon == 1.0 and back.delta is None
    assert back.objective == pytest.approx(plan.objective, rel=1e-3)
    assert back.groups["rmse"].iloc[0] == pytest.approx(rmse, rel=1e-3)
    # An edited plan file is refused.
    edited = json.loads((tmp_path / "plan.json").read_text())
    edited["objective"] *= 0.5
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    with pytest.raises(ValueError, match="not its strategy's"):
        dm.Plan.load(tmp_path / "edited.json")


def test_an_approx_plan_and_a_max_variance_plan(spec_path: Path):
    wl = dm.Workload.from_json(spec_path)
    total = dm.plan(wl, epsilon=1.0, delta=1e-6)
    assert (total.privacy, total.objective_name) == ("approx", "l2_obj")
    # The optimal marginal mechanism: certified to its closed-form bound.
    assert total.duality_gap < 1e-9
    worst = dm.plan(wl, epsilon=1.0, delta=1e-6, objective="max")
    assert worst.objective_name == "max_variance"
    with pytest.raises(ValueError):
        dm.plan(wl, epsilon=1.0, objective="median")


def test_workloads_and_schemas_from_dicts(spec_path: Path, schema_path: Path):
    spec = json.loads(spec_path.read_text())
    wl = dm.Workload.from_dict(spec)
    assert wl.queries == dm.Workload.from_json(spec_path).queries
    assert wl.to_dict()["queries"] == spec["queries"]
    schema = dm.Schema.from_dict(json.loads(schema_path.read_text()))
    assert schema.domain == wl.domain


@pytest.mark.parametrize(
    "bad",
    [
        {"domain": [{"name": "a", "size": 0}], "queries": [{"marginals": {"k": 1}}]},
        {"domain": [{"name": "a", "size": 2}], "queries": [{"marginal": ["b"]}]},
        {"domain": [], "queries": []},
        {"queries": [{"marginals": {"k": 1}}]},
    ],
)
def test_a_bad_spec_is_a_value_error(bad):
    with pytest.raises(ValueError):
        dm.Workload.from_dict(bad)


@pytest.mark.parametrize(
    "bad",
    [
        {"domain": [{"name": "a", "column": "a", "values": []}]},
        {"domain": [{"name": "a", "column": "a", "bins": {"start": 5, "stop": 1, "width": 1}}]},
        {"domain": "a"},
        {},
    ],
)
def test_a_bad_schema_is_a_value_error(bad):
    with pytest.raises(ValueError):
        dm.Schema.from_dict(bad)


def test_missing_files_are_os_errors(tmp_path: Path):
    for call in (dm.Workload.from_json, dm.Schema.from_json, dm.Plan.load, dm.Ledger.open):
        with pytest.raises(FileNotFoundError):
            call(tmp_path / "absent.json")
    with pytest.raises(ValueError):
        dm.Workload.from_json(Path(__file__))  # exists, is not a spec


# --- ledgers and releases -----------------------------------------------


def test_a_ledger_counts_what_releases_spend(tmp_path: Path, spec_path, schema_path):
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=2.0)
    assert (ledger.unit, ledger.total, ledger.spent, ledger.remaining) == ("epsilon", 2.0, 0.0, 2.0)
    with pytest.raises(FileExistsError):
        dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=1.0)
    wl, schema = dm.Workload.from_json(spec_path), dm.Schema.from_json(schema_path)
    dm.release(RECORDS, schema=schema, workload=wl, epsilon=0.5, ledger=ledger)
    assert dm.Ledger.open(tmp_path / "l.jsonl").spent == pytest.approx(0.5)
    assert ledger.remaining == pytest.approx(1.5) and ledger.releases == 1
    approx = dm.Ledger.create(tmp_path / "a.jsonl", total_epsilon=1.0, total_delta=1e-6)
    assert approx.unit == "rho" and approx.spent == 0.0
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            dm.Ledger.create(tmp_path / f"bad{bad}.jsonl", total_epsilon=bad)


def test_an_overspend_raises_budget_exceeded_and_spends_nothing(tmp_path, spec_path, schema_path):
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=1.0)
    before = (tmp_path / "l.jsonl").read_bytes()
    wl, schema = dm.Workload.from_json(spec_path), dm.Schema.from_json(schema_path)
    with pytest.raises(dm.BudgetExceeded):
        dm.release(RECORDS, schema=schema, workload=wl, epsilon=1.5, ledger=ledger)
    assert (tmp_path / "l.jsonl").read_bytes() == before and ledger.spent == 0.0
    # Bad input: ValueError, and nothing spent either.
    for eps in (0.0, -1.0):
        with pytest.raises(ValueError):
            dm.release(RECORDS, schema=schema, workload=wl, epsilon=eps, ledger=ledger)
    with pytest.raises(ValueError):
        dm.release(RECORDS, schema=schema, epsilon=0.5, ledger=ledger)  # no queries
    with pytest.raises(ValueError):
        dm.release([1, 2], schema=schema, workload=wl, epsilon=0.5, ledger=ledger)
    assert (tmp_path / "l.jsonl").read_bytes() == before


def test_records_from_a_dataframe_are_released_like_the_file(tmp_path, records, spec_path, schema_path):
    """The same plan released from the CSV file and from a DataFrame of its
    records: the same queries, and answers that differ by independent noise
    only (z-scores of mean 0, standard deviation 1); both cover the true
    counts at their nominal 95%."""
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=2.0)
    wl, schema = dm.Workload.from_json(spec_path), dm.Schema.from_json(schema_path)
    plan = dm.plan(wl, epsilon=1.0)
    from_file = dm.release(RECORDS, schema=schema, plan=plan, epsilon=1.0, ledger=ledger)
    from_frame = dm.release(records, schema=schema, plan=plan, epsilon=1.0, ledger=ledger)
    assert list(from_frame.columns) == ["query", "answer", "std_error", "ci_low", "ci_high"]
    assert len(from_frame) == 1671
    z = z_scores(from_file, from_frame)
    assert abs(z.mean()) < 0.2 and 0.85 < z.std() < 1.15, (z.mean(), z.std())
    truth = true_counts(records, from_frame["query"])
    for answers in (from_file, from_frame):
        covered = ((answers["ci_low"] <= truth) & (truth <= answers["ci_high"])).mean()
        assert 0.9 <= covered <= 0.99, covered
    sidecar = from_frame.attrs["sidecar"]
    assert sidecar["epsilon"] == 1.0 and sidecar["queries"] == 1671
    assert "count" not in json.dumps(sidecar).lower().replace("counts", "")
    assert ledger.spent == pytest.approx(2.0)


def test_a_pyarrow_table_releases_like_a_dataframe(tmp_path, records, spec_path, schema_path):
    pa = pytest.importorskip("pyarrow")
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=20.0)
    wl, schema = dm.Workload.from_json(spec_path), dm.Schema.from_json(schema_path)
    table = pa.Table.from_pandas(records, preserve_index=False)
    a = dm.release(table, schema=schema, workload=wl, epsilon=10.0, ledger=ledger)
    b = dm.release(records, schema=schema, workload=wl, epsilon=10.0, ledger=ledger)
    z = z_scores(a, b)
    assert abs(z.mean()) < 0.2 and 0.85 < z.std() < 1.15


def test_counts_from_duckdb_release_under_epsilon_delta(tmp_path, records, spec_path, schema_path, duckdb_module):
    """The documented DuckDB GROUP BY (all_varchar) gives a counts table a
    release reads; planned and released under (ε, δ); it covers the truth."""
    con = duckdb_module.connect()
    counts = con.execute(
        f"""SELECT morekids, gender1, gender2, age, afam, hispanic, other, work,
                   count(*) AS count
            FROM read_csv('{RECORDS}', all_varchar = true) GROUP BY ALL"""
    ).df()
    assert counts["count"].sum() == len(records)
    # (2, 1e-6) as ρ-zCDP holds the (1, 1e-6) release and a small one after.
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=2.0, total_delta=1e-6)
    wl, schema = dm.Workload.from_json(spec_path), dm.Schema.from_json(schema_path)
    plan = dm.plan(wl, epsilon=1.0, delta=1e-6)
    ans = dm.release(counts=counts, schema=schema, plan=plan, epsilon=1.0, delta=1e-6, ledger=ledger)
    truth = true_counts(records, ans["query"])
    covered = ((ans["ci_low"] <= truth) & (truth <= ans["ci_high"])).mean()
    assert 0.9 <= covered <= 0.99, covered
    assert ans.attrs["sidecar"]["delta"] == 1e-6
    assert 0 < ledger.spent <= ledger.total
    # The same table as a CSV file on disk.
    counts.to_csv(tmp_path / "counts.csv", index=False)
    again = dm.release(counts=tmp_path / "counts.csv", schema=schema, plan=plan,
                       epsilon=0.05, delta=1e-9, ledger=ledger)
    assert list(again["query"]) == list(ans["query"])


def test_a_plan_loaded_from_a_file_releases(tmp_path, spec_path, schema_path):
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=1.0)
    plan = dm.plan(dm.Workload.from_json(spec_path), epsilon=1.0)
    plan.save(tmp_path / "plan.json")
    loaded = dm.Plan.load(tmp_path / "plan.json")
    schema = dm.Schema.from_json(copy_to(tmp_path, schema_path))
    ans = dm.release(RECORDS, schema=schema, plan=loaded, epsilon=1.0, ledger=ledger)
    assert len(ans) == 1671
    assert ans.attrs["sidecar"]["plan"]["objective"] == pytest.approx(loaded.objective, rel=1e-9)


def test_reports_are_written_for_a_release_and_a_plan(tmp_path, spec_path, schema_path):
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=1.0)
    plan = dm.plan(dm.Workload.from_json(spec_path), epsilon=1.0)
    plan.save_report(tmp_path / "plan.html")
    page = (tmp_path / "plan.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Expected RMSE" in page
    schema = dm.Schema.from_json(copy_to(tmp_path, schema_path))
    ans = dm.release(
        RECORDS, schema=schema, plan=plan, epsilon=1.0, ledger=ledger, report=tmp_path / "r.html"
    )
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    # A tooltip with its interval for every answer (twice for the cells of
    # heat maps with a drill-down), and the ledger's state.
    assert page.count("(95% interval ") >= len(ans)
    assert "1.0000 of 1.0000 epsilon spent by 1 release(s)" in page
    assert "<script" not in page and "http" not in page


def test_nonneg_tables_are_non_negative_consistent_and_closer_to_the_truth(tmp_path, records, spec_path, schema_path):
    ledger = dm.Ledger.create(tmp_path / "l.jsonl", total_epsilon=4.0)
    schema = dm.Schema.from_json(copy_to(tmp_path, schema_path))
    wl = dm.Workload.from_json(spec_path)
    ans = dm.release(RECORDS, schema=schema, workload=wl, epsilon=1.0, ledger=ledger, nonneg=True)
    assert (ans["answer"] < 0).any() and (ans["nonneg"] >= 0).all()
    truth = true_counts(records, ans["query"])
    # The projection is non-expansive towards the true tables.
    assert ((ans["nonneg"] - truth) ** 2).sum() <= ((ans["answer"] - truth) ** 2).sum()
    assert "projection" in ans.attrs["sidecar"]["nonneg"]["method"]
    plain = dm.release(RECORDS, schema=schema, workload=wl, epsilon=1.0, ledger=ledger)
    assert "nonneg" not in plain.columns


def test_factorize_closed_forms_and_the_command(xtask: Path):
    # The tree at T = 2**20: 21 levels, step 2**20 - 2 sums 20 blocks.
    tree = dm.factorize(2**20, "tree")
    assert tree.max_variance == 420.0 and tree.sensitivity_exact
    # The square root at T = 4: a = 1, 1/2, 3/8, 5/16; B = C, so the
    # largest variance is (sum a**2)**2.
    energy = sum(a * a for a in (1.0, 0.5, 0.375, 0.3125))
    assert dm.factorize(4, "sqrt").max_variance == pytest.approx(energy**2, rel=1e-14)
    # Banded under 4 participations: what the command prints, and below
    # the square root's total.
    args = dict(participations=4, separation=64)
    res = dm.factorize(256, "banded", **args)
    out = subprocess.run(
        [xtask, "factorize", "--steps", "256", "--family", "banded",
         "--participations", "4", "--separation", "64"],
        capture_output=True, text=True, check=True,
    )
    cli = json.loads(out.stdout)
    assert res.total_squared_error == pytest.approx(cli["total_squared_error"], rel=1e-12)
    assert res.sensitivity == pytest.approx(cli["sensitivity"], rel=1e-12)
    assert res.bands == 64 and res.sensitivity_exact
    sqrt = dm.factorize(256, "sqrt", **args)
    assert res.total_squared_error < sqrt.total_squared_error
    assert res.lower_bound <= res.total_squared_error


def test_factorize_refuses_bad_input_with_value_error():
    for kwargs in (
        dict(steps=0, family="sqrt"),
        dict(steps=8, family="nope"),
        dict(steps=8, family="sqrt", workload="window:x"),
        dict(steps=8, family="tree", workload="decayed:0.5"),
        dict(steps=8, family="sqrt", bands=2),
        dict(steps=8, family="banded", participations=2),
        dict(steps=8, family="banded", bands=9),
        dict(steps=5000, family="dense"),
        dict(steps=8, family="banded", objective="mean"),
    ):
        with pytest.raises(ValueError):
            dm.factorize(**kwargs)


def _zcdp_ledger(tmp_path: Path, epsilon: float = 2.0, delta: float = 1e-6) -> dm.Ledger:
    return dm.Ledger.create(tmp_path / "ledger.jsonl", total_epsilon=epsilon, total_delta=delta)


def test_dpftrl_sums_are_the_clipped_sums_with_the_stated_error(tmp_path: Path):
    ledger = _zcdp_ledger(tmp_path)
    d, steps = 3000, 8
    s = dm.DpFtrl(ledger, epsilon=2.0, delta=1e-6, steps=steps, dimension=d,
                  clip_norm=1.0, bands=4)
    # Charged once, at creation, the whole budget.
    assert ledger.releases == 1 and ledger.spent == pytest.approx(ledger.total, rel=1e-12)
    assert s.rho == pytest.approx(ledger.total, rel=1e-12)
    assert s.sensitivity_exact and s.coefficients[0] == 1.0
    rng = np.random.default_rng(5)
    z_step, z_sum = [], []
    truth = np.zeros(d)
    running = np.zeros(d)
    for t in range(steps):
        rows = rng.normal(size=(3, d))
        # Row 0 far outside the clip (scaled down to norm 1 by the kernel),
        # rows 1, 2 inside it (kept as they are, up to the 2^-14 lattice).
        rows[0] *= 10.0 / np.linalg.norm(rows[0])
        rows[1:] *= 0.5 / np.linalg.norm(rows[1:], axis=1, keepdims=True)
        clipped = rows.copy()
        clipped[0] /= 10.0
        x = clipped.sum(axis=0)
        out = s.next(rows)
        assert out.shape == (d,) and out.dtype == np.float64
        truth += x
        running += out
        z_step.append((out - x) / s.step_std)
        z_sum.append((running - truth) / s.running_std)
    assert s.step == steps
    for z in (np.concatenate(z_step), np.concatenate(z_sum)):
        assert abs(z.mean()) < 0.05
        assert 0.95 < z.std() < 1.05
    with pytest.raises(ValueError):
        s.next()
    assert ledger.releases == 1


def test_dpftrl_refusals_spend_nothing(tmp_path: Path):
    ledger = _zcdp_ledger(tmp_path)
    good = dict(epsilon=1.0, delta=1e-6, steps=10, dimension=4, clip_norm=1.0)
    for bad in (
        dict(clip_norm=0.0),
        dict(clip_norm=float("nan")),
        dict(steps=0),
        dict(dimension=0),
        dict(bands=11),
        dict(delta=0.0),
        dict(participations=0),
        dict(objective="mean"),
        dict(coefficients=[0.0, 1.0]),
        dict(coefficients=[1.0, 0.5], bands=2),
    ):
        with pytest.raises(ValueError):
            dm.DpFtrl(ledger, **{**good, **bad})
    with pytest.raises(dm.BudgetExceeded):
        dm.DpFtrl(ledger, **{**good, "epsilon": 3.0})
    pure = dm.Ledger.create(tmp_path / "pure.jsonl", total_epsilon=1.0)
    with pytest.raises(ValueError):
        dm.DpFtrl(pure, **good)
    assert ledger.releases == 0 and pure.releases == 0
    # The default bands fit a separation below 16 (banded C with at most
    # `separation` bands keeps the sensitivity exact).
    multi = dm.DpFtrl(ledger, **{**good, "epsilon": 0.5}, participations=3, separation=4)
    assert len(multi.coefficients) == 4 and multi.sensitivity_exact
    s = dm.DpFtrl(ledger, **{**good, "epsilon": 0.5}, coefficients=[1.0, 0.5, 0.25])
    assert list(s.coefficients) == [1.0, 0.5, 0.25]
    for rows in (np.zeros((2, 5)), np.zeros((2, 2, 4))):
        with pytest.raises(ValueError):
            s.next(rows)
    assert s.step == 0
    assert s.next(np.zeros(4)).shape == (4,)
    # No value refuses once charged (that would answer about the data
    # without noise): a row that is not finite contributes nothing.
    out = s.next(np.array([[np.nan, 0, 0, 0], [1e300, -1e300, 0, 0]]))
    assert np.isfinite(out).all() and s.step == 2
