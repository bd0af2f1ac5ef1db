"""One raftlog cluster and one SparkSession for the Spark tests (a JVM start costs seconds).

``local[2,4]``: two task slots, and a failed task is retried up to 4 times (plain ``local[2]`` never
retries), so the sink's retry deduplication really runs. The session loads Spark's own Kafka source and
sink (``format("kafka")``) from the jars the set-up resolved (``raftlog_spark.spark_kafka.jars()``) when
they are there; the tests of that format fail naming the install command when they are not."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import folder_scope
import pytest
from spark_cluster import SparkTestCluster

import raftlog_spark
from raftlog_spark import spark_kafka


def _cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkTestCluster]:
    cluster = SparkTestCluster(str(tmp_path_factory.mktemp("raftlog")))
    cluster.start()
    yield cluster
    cluster.stop()


# The folder's files share the cluster and the session (``file_costs.SHARED_SESSION_FOLDERS`` gives the
# folder to one worker whole) until the run leaves the folder (``folder_scope``).
@pytest.fixture(scope="module")
def raftlog_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> SparkTestCluster:
    return folder_scope.shared(request, lambda: _cluster(tmp_path_factory))


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Any:
    return folder_scope.shared(request, _session)


def _session() -> Iterator[Any]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    try:
        jars = spark_kafka.jars()
    except spark_kafka.JarsMissing:
        jars = []
    session = (
        SparkSession.builder.master("local[2,4]")
        .config("spark.jars", ",".join(jars))  # "": none
        .appName("raftlog-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.driver.memory", "1g")
        # The tests' data is small: the JIT's first tier is enough, and the optimizing compiler's threads
        # and G1's would spend half the driver's CPU (45 -> 23 CPU s over test_spark_read.py).
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    raftlog_spark.register(session)
    yield session
    session.stop()
