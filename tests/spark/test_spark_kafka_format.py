"""Spark's own Kafka source and sink (``spark-sql-kafka-0-10``, ``format("kafka")``, from the jars the
set-up resolved from Maven Central) against the 3-node cluster's Kafka listeners, unchanged: a batch read
between offsets (and as ``read_committed``), one from timestamps, a write read back through both formats,
a stream that resumes from its checkpoint exactly where it stopped, and a compacted topic read with
``failOnDataLoss`` on, its offset gaps skipped as Kafka's compacted gaps are. Over SASL_SSL:
``test_spark_secure.py``."""

from __future__ import annotations

import itertools
import json
import pathlib
from typing import Any

import pytest
from spark_cluster import SparkTestCluster

from raftlog_spark import spark_kafka
from tests.waiting import wait_for

pytestmark = pytest.mark.spark

BASE_MS = 1_700_000_000_000


@pytest.fixture(scope="module", autouse=True)
def _jars_loaded(spark: Any) -> None:
    """Spark's Kafka connector is on the session's class path (conftest loads what the set-up put there)."""
    loaded = spark.sparkContext.getConf().get("spark.jars", "")
    assert spark_kafka.jars() and all(jar in loaded for jar in spark_kafka.jars()), loaded


def kafka(cluster: SparkTestCluster) -> dict[str, str]:
    assert cluster.local is not None
    return spark_kafka.options(cluster.local.bootstrap_servers)


def read(spark: Any, cluster: SparkTestCluster, topic: str, **options: str) -> list[Any]:
    return (
        spark.read.format("kafka")
        .options(**kafka(cluster))
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .options(**options)
        .load()
        .selectExpr("partition", "offset", "CAST(key AS STRING) k", "CAST(value AS STRING) v", "headers",
                    "unix_millis(timestamp) ms", "timestampType")
        .orderBy("partition", "offset")
        .collect()
    )  # fmt: skip


def test_batch_read_between_offsets(spark: Any, raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(3)
    for p in range(3):
        raftlog_cluster.produce(topic, p, [f"p{p}-{i}" for i in range(60)])

    everything = read(spark, raftlog_cluster, topic, startingOffsets="earliest", endingOffsets="latest")
    assert [(r.partition, r.offset, r.v) for r in everything] == [
        (p, i, f"p{p}-{i}") for p in range(3) for i in range(60)
    ]
    assert {r.timestampType for r in everything} == {0}

    starting = json.dumps({topic: {"0": 10, "1": -2, "2": 50}})  # -2: earliest, -1: latest
    ending = json.dumps({topic: {"0": 20, "1": 5, "2": -1}})
    expected = [(0, i) for i in range(10, 20)] + [(1, i) for i in range(5)] + [(2, i) for i in range(50, 60)]
    for isolation in ("read_uncommitted", "read_committed"):  # no transactions: the same records
        rows = read(spark, raftlog_cluster, topic, startingOffsets=starting, endingOffsets=ending,
                    **{"kafka.isolation.level": isolation})  # fmt: skip
        assert [(r.partition, r.offset) for r in rows] == expected, isolation
        assert [r.v for r in rows] == [f"p{p}-{i}" for p, i in expected], isolation


def test_batch_read_from_timestamps(spark: Any, raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(2)
    for p in range(2):  # record i at BASE_MS + 10 i (CreateTime)
        records = [{"value": f"{p}-{i}".encode(), "timestamp": BASE_MS + 10 * i} for i in range(100)]
        raftlog_cluster.produce_records(topic, p, records)

    # ListOffsets by timestamp: the first offset whose timestamp is at or after the one asked
    starting = json.dumps({topic: {"0": BASE_MS + 505, "1": BASE_MS + 200}})
    ending = json.dumps({topic: {"0": BASE_MS + 800, "1": BASE_MS + 5_000}})  # past the last: the end
    rows = read(spark, raftlog_cluster, topic, startingOffsetsByTimestamp=starting,
                endingOffsetsByTimestamp=ending)  # fmt: skip
    assert [(r.partition, r.offset) for r in rows] == [(0, i) for i in range(51, 80)] + [
        (1, i) for i in range(20, 100)
    ]
    assert all(r.ms == BASE_MS + 10 * r.offset and r.v == f"{r.partition}-{r.offset}" for r in rows)

    every = read(spark, raftlog_cluster, topic, startingTimestamp=str(BASE_MS + 990))  # one for all
    assert [(r.partition, r.offset) for r in every] == [(0, 99), (1, 99)]


def test_write_then_read_back_through_both_formats(spark: Any, raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(2)
    rows = spark.range(0, 200, 1, 2).selectExpr(
        "CAST(id % 2 AS INT) partition",
        "IF(id % 10 = 0, NULL, CAST(CONCAT('k', id) AS STRING)) key",  # every tenth without a key
        "IF(id = 7, NULL, CAST(id AS STRING)) value",  # a tombstone
        "ARRAY(NAMED_STRUCT('key', 'n', 'value', CAST(CAST(id AS STRING) AS BINARY))) headers",
    )
    rows.write.format("kafka").options(**kafka(raftlog_cluster)).option("topic", topic).option(
        "includeHeaders", "true"
    ).save()

    back = read(spark, raftlog_cluster, topic)
    assert len(back) == 200
    assert sorted(int(r.headers[0].value) for r in back) == list(range(200))
    for r in back:
        i = int(r.headers[0].value)
        assert r.partition == i % 2 and r.k == (None if i % 10 == 0 else f"k{i}")
        assert r.v == (None if i == 7 else str(i)) and r.headers[0].key == "n"
    for p in range(2):  # dense offsets from 0 in each partition
        assert [r.offset for r in back if r.partition == p] == list(range(100))

    ours = (
        spark.read.format("raftlog").option("servers", raftlog_cluster.servers).option("subscribe", topic)
        .load().selectExpr("partition", "offset", "CAST(key AS STRING) k", "CAST(value AS STRING) v")
        .orderBy("partition", "offset").collect()
    )  # fmt: skip
    assert [tuple(r) for r in ours] == [(r.partition, r.offset, r.k, r.v) for r in back]


def test_stream_resumes_from_its_checkpoint_exactly_where_it_stopped(
    spark: Any, raftlog_cluster: SparkTestCluster, tmp_path: pathlib.Path
) -> None:
    topic = raftlog_cluster.create_topic(2)
    for p in range(2):
        raftlog_cluster.produce(topic, p, [f"a{p}-{i}" for i in range(40)])
    batches: dict[int, list[tuple[int, int, str]]] = {}  # by id: a replayed batch replaces its first run
    runs: list[list[int]] = []

    def sink(df: Any, batch_id: int) -> None:
        rows = df.selectExpr("partition", "offset", "CAST(value AS STRING) v").collect()
        batches[batch_id] = [(r.partition, r.offset, r.v) for r in rows]
        runs[-1].append(batch_id)

    def run(then_produce: int) -> None:
        runs.append([])
        query = (
            spark.readStream.format("kafka").options(**kafka(raftlog_cluster)).option("subscribe", topic)
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "25").load()
            .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="200 milliseconds").start()
        )  # fmt: skip
        try:
            query.processAllAvailable()
            for p in range(2):
                raftlog_cluster.produce(topic, p, [f"b{len(runs)}-{p}-{i}" for i in range(then_produce)])
            query.processAllAvailable()
        finally:
            query.stop()

    run(then_produce=15)
    first = {(p, o) for b in runs[0] for p, o, _ in batches[b]}
    for p in range(2):
        raftlog_cluster.produce(topic, p, [f"stopped-{p}-{i}" for i in range(20)])  # while no query runs
    run(then_produce=10)

    seen = [row for b in sorted(batches) for row in batches[b]]
    assert sorted((p, o) for p, o, _ in seen) == [(p, o) for p in range(2) for o in range(85)], (
        "a record lost or read twice across the restart"
    )
    second = [(p, o) for b in runs[1] for p, o, _ in batches[b]]
    for p in range(2):  # the second run began where the first stopped
        assert min(o for q, o in second if q == p) == max(o for q, o in first if q == p) + 1 == 55
    assert len(runs[0]) >= 4, "maxOffsetsPerTrigger=25 splits the first 110 records into several batches"


def test_a_compacted_topic_reads_with_fail_on_data_loss(
    spark: Any, raftlog_cluster: SparkTestCluster
) -> None:
    configs = {
        "cleanup.policy": "compact",
        "internal.segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01",
    }
    topic = raftlog_cluster.create_topic(1, **configs)
    keys, written = 20, 1000
    key = f"IF(id % 50 = 0, CONCAT('once-', id), CONCAT('user-', id % {keys}))"  # kept: gaps between
    rows = spark.range(0, written, 1, 1).selectExpr(f"{key} key", "CAST(id AS STRING) value")
    # one task, many small batches in order, so that 4 KiB segments roll and are cleaned
    small = {"kafka.batch.size": "1024", "topic": topic}
    rows.write.format("kafka").options(**kafka(raftlog_cluster), **small).save()
    latest = {(f"once-{i}" if i % 50 == 0 else f"user-{i % keys}"): str(i) for i in range(written)}

    def compacted() -> list[Any] | None:
        rows = read(spark, raftlog_cluster, topic, failOnDataLoss="true")
        return rows if len(rows) < written / 2 else None

    rows = wait_for(compacted, "the cleaner removed superseded records")
    offsets = [r.offset for r in rows]
    assert offsets == sorted(set(offsets)) and offsets[0] == 0 and offsets[-1] == written - 1
    assert sum(b - a > 1 for a, b in itertools.pairwise(offsets)) >= 5, "too few gaps to skip"
    assert {r.k: r.v for r in rows} == latest  # each key's latest value, read past every gap

    stream = (
        spark.readStream.format("kafka").options(**kafka(raftlog_cluster)).option("subscribe", topic)
        .option("startingOffsets", "earliest").option("failOnDataLoss", "true").load()
        .selectExpr("offset", "CAST(key AS STRING) k", "CAST(value AS STRING) v")
        .writeStream.format("memory").queryName("compacted").trigger(availableNow=True).start()
    )  # fmt: skip
    try:
        assert stream.awaitTermination(120), "the availableNow stream did not finish"
        assert stream.exception() is None
        streamed = spark.sql("SELECT k, v, offset FROM compacted ORDER BY offset").collect()
    finally:
        stream.stop()
    latest_streamed: dict[str, str] = {}
    for r in streamed:
        latest_streamed[r.k] = r.v
    assert latest_streamed == latest and len(streamed) < written
