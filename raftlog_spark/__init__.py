"""A PySpark (4.x) data source for raftlog topics: ``spark.read/readStream.format("raftlog")`` and
``df.write/writeStream.format("raftlog")`` with Spark's Kafka conventions, over the HTTP API only.

    import raftlog_spark  # before the session starts: its Python workers then run this interpreter
    raftlog_spark.register(spark)
    reader = spark.read.format("raftlog").option("servers", "http://127.0.0.1:8081")
    df = reader.option("subscribe", "orders").load()
"""

from __future__ import annotations

import os
import sys

# Spark's Python workers run ``$PYSPARK_PYTHON`` (else ``python3`` on the PATH), which may not have this
# package, pyarrow or pandas: unless the user chose an interpreter, they run this one. Set on import,
# before the session (and its workers) start, as a script imports this package first.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

try:
    from pyspark.sql import SparkSession
except ImportError as error:  # a node's install leaves the connector's dependencies out
    raise ImportError(f"raftlog_spark needs PySpark: pip install 'raftlog[spark]' ({error})") from error

from raftlog_spark.source import RaftlogDataSource


def register(spark: SparkSession) -> None:
    """Make ``format("raftlog")`` known to ``spark``. The Python workers import this package by name,
    so it must be installed where they run (it is, in this project's environment)."""
    spark.dataSource.register(RaftlogDataSource)


__all__ = ["RaftlogDataSource", "register"]
