"""dpmatrix.spark against Spark itself, on the same session.

All 2-way marginals of 8 attributes from a Parquet file of ``--rows``
records (the record shapes of ``ingest.py``: ``fertility``, the embedded
extract resampled, 50,880 cells, so dpmm counts the full table; or
``census``, 2·10⁷ cells, so dpmm counts the 28 marginal tables), read by
a local Spark session (``--master``, default ``local[2]``):

* Spark alone, the count tables three ways: one ``groupBy(a, b).count()``
  per pair (28 jobs), one ``GROUP BY GROUPING SETS`` of the 28 pairs (one
  job), and one ``groupBy`` of all 8 columns (the full table, whose
  margins are the 28), each encoding the columns as the schema bins them
  and collecting the tables to the driver;
* ``dpmatrix.spark.release`` of the same workload from a plan made
  beforehand (planning reads no data): the whole release — the jobs that
  read, encode and count every partition, the merge, the charge, the
  measurement and the reconstruction.

Best of ``--repeat`` runs each; the ratio is dpmm's time over the fastest
Spark formulation. Each size runs in a fresh process, whose peak resident
memory after dpmm's releases (the Python driver, where the kernel merges,
measures and reconstructs; taken before Spark's own formulations collect
their tables into it) is reported at ``--rows`` and at a tenth of it; the
JVM's at the end (it holds the executors too in local mode) beside it.

    python python/benches/spark_release.py --rows 5000000 --repeat 3
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("ingest", HERE / "ingest.py")
ingest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ingest)


def peak_kib(pid) -> int:
    """A process's peak resident set (VmHWM, which unlike ru_maxrss does
    not carry the parent's peak across fork and exec), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def child(args) -> None:
    import dpmatrix as dm
    import dpmatrix.spark as dms
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.read.parquet(args.child)
    frame.createOrReplaceTempView("records")
    attributes, encoded = ingest.shape(args.shape)
    encoded_frame = spark.sql(f"SELECT {encoded} FROM records")

    def per_pair():
        for pair in itertools.combinations(attributes, 2):
            encoded_frame.groupBy(*pair).count().collect()

    def full_table():
        encoded_frame.groupBy(*attributes).count().collect()

    sets = ", ".join("(" + ", ".join(p) + ")" for p in itertools.combinations(attributes, 2))

    def grouping_sets():
        spark.sql(
            f"SELECT {', '.join(attributes)}, count(*) AS n FROM (SELECT {encoded} FROM records) "
            f"GROUP BY GROUPING SETS ({sets})"
        ).collect()

    if args.shape == "census":
        schema_doc, spec_doc = ingest.schema(), ingest.spec()
    else:
        schema_doc = json.loads((ingest.FERTILITY / "schema.json").read_text())
        spec_doc = json.loads((ingest.FERTILITY / "spec.json").read_text())
        spec_doc["queries"] = [{"marginals": {"k": 2}}]
    work = Path(tempfile.mkdtemp())
    (work / "schema.json").write_text(json.dumps(schema_doc))
    (work / "spec.json").write_text(json.dumps(spec_doc))
    schema = dm.Schema.from_json(work / "schema.json")
    workload = dm.Workload.from_json(work / "spec.json")
    plan = dm.plan(workload, epsilon=1.0)
    ledger = dm.Ledger.create(work / "ledger.jsonl", total_epsilon=100.0)

    def release():
        dms.release(frame, schema=schema, plan=plan, epsilon=1.0, ledger=ledger)

    # A warm-up of each (the JVM's JIT, the Python workers' start); the
    # driver's peak is read before the full table is first collected
    # (that collect brings every group into this process); then rounds
    # of all four, so that each runs in the same state of the JVM.
    release(), per_pair(), grouping_sets()
    out = {"driver_peak_mib": peak_kib("self") / 1024}
    full_table()
    runs = {"dpmm": release, "per_pair": per_pair, "grouping_sets": grouping_sets,
            "full_table": full_table}
    times = {name: [] for name in runs}
    for _ in range(args.repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    out |= {name: min(t) for name, t in times.items()}
    out |= {
        "jvm_peak_mib": peak_kib(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        / 1024,
    }
    spark.stop()
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shape", choices=["fertility", "census"], default="fertility")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    import pyarrow.parquet as pq

    load = os.getloadavg()[0]
    results = {}
    for rows in (args.rows // 10, args.rows):
        path = Path(tempfile.mkdtemp()) / "records.parquet"
        table = ingest.records(rows) if args.shape == "census" else ingest.fertility(rows)
        pq.write_table(table, path, row_group_size=1 << 20)
        del table
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(path), "--shape", args.shape,
             "--repeat", str(args.repeat), "--master", args.master],
            capture_output=True, text=True, check=True,
        )
        results[rows] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"shape {args.shape}, {args.master}, best of {args.repeat}; load average {load:.2f}")
    print(f"{'rows':>10} {'groupBy x28':>12} {'grouping sets':>14} {'full table':>11} "
          f"{'dpmm':>8} {'ratio':>6} {'driver MiB':>11} {'JVM MiB':>8}")
    for rows, r in results.items():
        plain = min(r["per_pair"], r["grouping_sets"], r["full_table"])
        print(f"{rows:>10} {r['per_pair']:>11.2f}s {r['grouping_sets']:>13.2f}s "
              f"{r['full_table']:>10.2f}s {r['dpmm']:>7.2f}s {r['dpmm'] / plain:>6.2f} "
              f"{r['driver_peak_mib']:>11.0f} {r['jvm_peak_mib']:>8.0f}")


if __name__ == "__main__":
    main()
