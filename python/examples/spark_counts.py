"""Records beyond one machine: aggregate with Spark, release with dpmatrix.

The aggregation is one GROUP BY over the schema's columns in the engine
that holds the records; only the counts table (one row per occupied cell)
comes to the release, which reads it through the same schema as records.
Run from the repository root with PySpark installed (not part of the test
suite, which runs the same path with DuckDB):

    pip install pyspark && python python/examples/spark_counts.py
"""

import tempfile

import dpmatrix as dm
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

schema = dm.Schema.from_json("examples/fertility1980/schema.json")
plan = dm.plan(dm.Workload.from_json("examples/fertility1980/spec.json"), epsilon=1.0)

spark = SparkSession.builder.master("local[*]").appName("dpmatrix counts").getOrCreate()
# inferSchema=False keeps every value as the text the schema names (Spark
# would otherwise type 27 as an integer, which is fine, but could read
# other columns as booleans or doubles and write them back differently).
records = spark.read.csv("datasets/fertility1980.csv.gz", header=True, inferSchema=False)
columns = [name for name, _ in schema.domain]  # here each attribute reads the column of its name
counts = records.groupBy(*columns).agg(F.count(F.lit(1)).alias("count")).toPandas()
spark.stop()

ledger = dm.Ledger.create(tempfile.mkdtemp() + "/ledger.jsonl", total_epsilon=1.0)
answers = dm.release(counts=counts, schema=schema, plan=plan, epsilon=1.0, ledger=ledger)
print(answers.head())
