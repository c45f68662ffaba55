"""Records in Spark, released by dpmatrix: dpmm's own reading, bounding and
counting run inside Spark; only count tables reach the driver, where the
privacy kernel merges them, charges the ledger and draws the noise
(docs/spark.md). Run from the repository root with PySpark installed
(`pip install './python[spark]'`, and a Java runtime):

    python python/examples/spark_counts.py
"""

import os
import sys
import tempfile

import dpmatrix as dm
import dpmatrix.spark
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the executors' Python
schema = dm.Schema.from_json("examples/fertility1980/schema.json")
plan = dm.plan(dm.Workload.from_json("examples/fertility1980/spec.json"), epsilon=1.0)

spark = SparkSession.builder.master("local[*]").appName("dpmatrix").getOrCreate()
records = spark.read.csv("datasets/fertility1980.csv.gz", header=True)
ledger = dm.Ledger.create(tempfile.mkdtemp() + "/ledger.jsonl", total_epsilon=2.0)

# The release: the schema reads each value by itself (text or typed
# columns alike), the records are counted per partition by dpmm's code.
answers = dpmatrix.spark.release(records, schema=schema, plan=plan, epsilon=1.0, ledger=ledger)
print(answers.head())

# The hand-written path, for a counts table made by one GROUP BY: the
# stability of that query (one row per record, no join, no DISTINCT, no
# privacy unit possible) is the user's responsibility, not dpmm's.
columns = [name for name, _ in schema.domain]  # each attribute reads the column of its name
counts = records.groupBy(*columns).agg(F.count(F.lit(1)).alias("count")).toPandas()
print(dm.release(counts=counts, schema=schema, plan=plan, epsilon=1.0, ledger=ledger).head())
spark.stop()
