"""Records in, count tables out: dpmm against DuckDB on the same input.

All 2-way marginals of 8 attributes, in one run, on one of two record
shapes (``--shape``):

* ``census``: synthetic census-like records (text categories, integer
  ages binned by 5, integer codes, decimal incomes in 14 bins; 2·10⁷
  cells, so dpmm keeps the 28 marginal tables);
* ``fertility``: the embedded 1980 census extract resampled with
  replacement (six yes/no or male/female columns, two integer ones;
  50,880 cells, so dpmm keeps the full table, and so can DuckDB).

The comparisons:

* from the same CSV file: ``dpmm release`` (the command, a fresh process)
  against DuckDB computing the same count tables from ``read_csv`` both
  ways it can be asked — ``GROUP BY GROUPING SETS`` of the 28 pairs, and
  the full table ``GROUP BY ALL`` followed by its 28 margins;
* from the same in-memory pyarrow Table: ``dpmatrix.release`` against
  DuckDB both ways on that Table.

Best of ``--repeat`` runs each, the faster DuckDB formulation counting;
the ratio is DuckDB's time over dpmm's. dpmm's times are whole releases
(read, count, charge, measure, reconstruct, write the answers) from a
plan made beforehand (planning reads no data; ``--with-planning`` times
``--workload`` instead). Peak memory: the command's maximum resident set
at ``--rows`` and at a tenth of it, to show it flat in the rows.

Run from the repository, in an environment with dpmatrix, pyarrow and
duckdb, after ``cargo build --release -p dpmm``::

    python python/benches/ingest.py --rows 10000000 --repeat 3 [--shape fertility]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ATTRIBUTES = ["sex", "age", "race", "hispanic", "education", "income", "state", "employment"]
RACES = ["white", "black", "asian", "native", "pacific", "other"]
EMPLOYMENT = ["employed", "unemployed", "not in labor force", "armed forces"]
INCOME_EDGES = [0, 5000, 10000, 15000, 20000, 25000, 30000, 40000, 50000, 60000, 75000,
                100000, 150000, 200000, 1e12]
STATES = [f"S{i:02d}" for i in range(51)]


REPO = Path(__file__).resolve().parents[2]
FERTILITY = REPO / "examples" / "fertility1980"


def fertility(rows: int, seed: int = 7):
    """The embedded extract resampled to `rows` records, as a pyarrow Table."""
    import pyarrow.csv as pacsv

    table = pacsv.read_csv(REPO / "datasets" / "fertility1980.csv.gz")
    rng = np.random.default_rng(seed)
    return table.take(rng.integers(0, table.num_rows, rows))


def records(rows: int, seed: int = 7):
    """The synthetic records as a pyarrow Table."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    return pa.table({
        "sex": np.array(["female", "male"])[rng.integers(0, 2, rows)],
        "age": rng.integers(0, 100, rows),
        "race": np.array(RACES)[rng.choice(6, rows, p=[.6, .13, .06, .01, .01, .19])],
        "hispanic": np.array(["no", "yes"])[rng.integers(0, 2, rows)],
        "education": rng.integers(1, 17, rows),
        "income": np.round(rng.lognormal(10.5, 1.0, rows), 2),
        "state": np.array(STATES)[rng.integers(0, 51, rows)],
        "employment": np.array(EMPLOYMENT)[rng.choice(4, rows, p=[.6, .05, .34, .01])],
    })


def schema() -> dict:
    return {"domain": [
        {"name": "sex", "values": ["female", "male"]},
        {"name": "age", "bins": {"start": 0, "stop": 100, "width": 5}},
        {"name": "race", "values": RACES},
        {"name": "hispanic", "values": ["no", "yes"]},
        {"name": "education", "values": [str(i) for i in range(1, 17)]},
        {"name": "income", "bins": INCOME_EDGES},
        {"name": "state", "values": STATES},
        {"name": "employment", "values": EMPLOYMENT},
    ]}


def spec() -> dict:
    sizes = [2, 20, 6, 2, 16, len(INCOME_EDGES) - 1, 51, 4]
    return {
        "domain": [{"name": n, "size": s} for n, s in zip(ATTRIBUTES, sizes)],
        "queries": [{"marginals": {"k": 2}}],
    }


# DuckDB's count tables: the schema's bins in SQL.
INCOME_CASE = "CASE " + " ".join(
    f"WHEN income < {e} THEN {i - 1}" for i, e in enumerate(INCOME_EDGES) if i > 0
) + " END"
ENCODED = (f"sex, floor(age / 5) AS age, race, hispanic, education, {INCOME_CASE} AS income, "
           "state, employment")


FERTILITY_ATTRIBUTES = ["morekids", "gender1", "gender2", "age", "afam", "hispanic", "other",
                        "work"]


def shape(name: str):
    """(attributes, the SELECT list that encodes them as the schema bins)."""
    if name == "census":
        return ATTRIBUTES, ENCODED
    # The extract's ages (21-35) and weeks (0-52) are one bin each value.
    return FERTILITY_ATTRIBUTES, ", ".join(FERTILITY_ATTRIBUTES)


def duckdb_grouping_sets(con, source: str, attributes: list[str], encoded: str):
    pairs = itertools.combinations(attributes, 2)
    sets = ", ".join("(" + ", ".join(p) + ")" for p in pairs)
    return con.execute(
        f"SELECT {', '.join(attributes)}, count(*) AS n FROM (SELECT {encoded} FROM {source}) "
        f"GROUP BY GROUPING SETS ({sets})"
    ).fetchall()


def duckdb_full_then_margins(con, source: str, attributes: list[str], encoded: str):
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE full_table AS SELECT {', '.join(attributes)}, "
        f"count(*) AS n FROM (SELECT {encoded} FROM {source}) GROUP BY ALL"
    )
    return [
        con.execute(f"SELECT {', '.join(p)}, sum(n) FROM full_table GROUP BY ALL").fetchall()
        for p in itertools.combinations(attributes, 2)
    ]


def best(repeat: int, run) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def command(dpmm: Path, args: list[str]) -> None:
    """Runs `dpmm args`, failing loudly."""
    done = subprocess.run([str(dpmm), *args], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise SystemExit(f"dpmm {' '.join(args)} failed: {done.stderr.decode()}")


def child_peak(dpmm: Path, args: list[str]) -> int:
    """The peak RSS (KiB) of one `dpmm args` run, in a process of its own."""
    out = subprocess.run(
        [sys.executable, "-c",
         "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
         "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
         "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
         str(dpmm), *args],
        check=True, capture_output=True, text=True)
    return int(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--shape", choices=["census", "fertility"], default="census")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dpmm", type=Path, default=Path("target/release/dpmm"))
    parser.add_argument("--with-planning", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import duckdb
    import pyarrow.csv as pacsv

    import dpmatrix as dm

    if not args.dpmm.exists():
        raise SystemExit(f"{args.dpmm} is missing: cargo build --release -p dpmm")
    out: dict = {"rows": args.rows, "shape": args.shape, "repeat": args.repeat,
                 "load_before": os.getloadavg()}
    attributes, encoded = shape(args.shape)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        table = records(args.rows) if args.shape == "census" else fertility(args.rows)
        csv_path = tmp / "records.csv"
        pacsv.write_csv(table, csv_path, write_options=pacsv.WriteOptions(quoting_style="none"))
        out["csv_mb"] = csv_path.stat().st_size / 1e6
        if args.shape == "census":
            (tmp / "schema.json").write_text(json.dumps(schema()))
            (tmp / "spec.json").write_text(json.dumps(spec()))
        else:
            (tmp / "schema.json").write_text((FERTILITY / "schema.json").read_text())
            (tmp / "spec.json").write_text((FERTILITY / "spec.json").read_text())
        s = dm.Schema.from_json(tmp / "schema.json")
        w = dm.Workload.from_json(tmp / "spec.json")
        plan = dm.plan(w, epsilon=1.0)
        plan.save(tmp / "plan.json")
        ledger = tmp / "ledger.jsonl"
        dm.Ledger.create(ledger, total_epsilon=100)
        queries = ["--workload", str(tmp / "spec.json")] if args.with_planning else [
            "--plan", str(tmp / "plan.json")]
        release_args = ["release", "--data", str(csv_path), "--schema", str(tmp / "schema.json"),
                        *queries, "--epsilon", "0.001", "--ledger", str(ledger),
                        "--out", str(tmp / "answers.csv")]

        con = duckdb.connect()
        source = f"read_csv('{csv_path}')"
        out["csv"] = {
            "dpmm release": best(args.repeat, lambda: command(args.dpmm, release_args)),
            "duckdb grouping sets": best(
                args.repeat, lambda: duckdb_grouping_sets(con, source, attributes, encoded)),
            "duckdb full then margins": best(
                args.repeat, lambda: duckdb_full_then_margins(con, source, attributes, encoded)),
        }
        con.register("in_memory", table)
        release = (lambda: dm.release(table, schema=s, workload=w, epsilon=0.001, ledger=ledger)
                   ) if args.with_planning else (
            lambda: dm.release(table, schema=s, plan=plan, epsilon=0.001, ledger=ledger))
        out["arrow"] = {
            "dm.release": best(args.repeat, release),
            "duckdb grouping sets": best(
                args.repeat, lambda: duckdb_grouping_sets(con, "in_memory", attributes, encoded)),
            "duckdb full then margins": best(
                args.repeat,
                lambda: duckdb_full_then_margins(con, "in_memory", attributes, encoded)),
        }
        for key, dpmm_key in (("csv", "dpmm release"), ("arrow", "dm.release")):
            r = out[key]
            duck = min(r["duckdb grouping sets"], r["duckdb full then margins"])
            r["ratio (duckdb / dpmm)"] = duck / r[dpmm_key]
        # Peak memory of the command at a tenth of the rows and at all of them.
        small = tmp / "small.csv"
        pacsv.write_csv(table.slice(0, args.rows // 10), small,
                        write_options=pacsv.WriteOptions(quoting_style="none"))
        peaks = {}
        for name, path in (("tenth", small), ("all", csv_path)):
            run = [a if a != str(csv_path) else str(path) for a in release_args]
            peaks[name] = child_peak(args.dpmm, run) / 1024
        out["peak_mib"] = peaks
    out["load_after"] = os.getloadavg()
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{args.rows:,} {args.shape} records, {out['csv_mb']:.0f} MB of CSV, best of {args.repeat}; "
          f"load {out['load_before'][0]:.2f} before, {out['load_after'][0]:.2f} after")
    for key in ("csv", "arrow"):
        print(f"  from {'the CSV file' if key == 'csv' else 'a pyarrow Table'}:")
        for name, value in out[key].items():
            unit = "×" if name.startswith("ratio") else " s"
            print(f"    {name:28} {value:8.3f}{unit}")
    print(f"  dpmm release peak RSS: {peaks['tenth']:.1f} MiB at {args.rows // 10:,} rows, "
          f"{peaks['all']:.1f} MiB at {args.rows:,}")


if __name__ == "__main__":
    main()
