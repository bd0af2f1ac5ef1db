"""Reading topics with Spark from a real 3-node cluster: Kafka's columns (tombstones, keyless records,
null header values, timestamp types), batch ranges by offset and by timestamp, assign, minPartitions,
failOnDataLoss, and streaming with admission control, Trigger.AvailableNow and checkpoint restarts."""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any

import pytest
from spark_cluster import SparkTestCluster
from spark_queries import again_if_a_worker_did_not_connect, ended

pytestmark = pytest.mark.spark


def read(spark: Any, cluster: SparkTestCluster, topic: str, **options: str) -> Any:
    reader = spark.read.format("raftlog").option("servers", cluster.servers).option("subscribe", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def stream(spark: Any, cluster: SparkTestCluster, topic: str, **options: str) -> Any:
    reader = spark.readStream.format("raftlog").option("servers", cluster.servers).option("subscribe", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


@pytest.mark.parametrize("fetch_format", ["columnar", "json"])
def test_batch_read_returns_every_record_once_with_kafka_columns(
    spark: Any, raftlog_cluster: SparkTestCluster, fetch_format: str
) -> None:
    topic = raftlog_cluster.create_topic(3)
    sizes = {0: 120, 1: 3, 2: 0}
    for p, n in sizes.items():
        if n:
            raftlog_cluster.produce(topic, p, [f"{p}:{i}" for i in range(n)], key=f"k{p}")
    special = [  # partition 1, offsets 3, 4, 5
        {"key": b"gone", "value": None, "timestamp": 1_000},  # a tombstone with its producer's time
        {"key": None, "value": b"keyless", "headers": [("trace", None), ("n", b"1")]},
        {"key": b"", "value": b"", "headers": [("", b"")], "timestamp": 1_600_000_000_000},
    ]
    raftlog_cluster.produce_records(topic, 1, special)
    sizes[1] += len(special)
    df = read(spark, raftlog_cluster, topic, fetchFormat=fetch_format, fetchMaxBytes="1000")
    kafka_columns = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert df.columns == kafka_columns
    rows = df.selectExpr(
        "CAST(value AS STRING) v", "CAST(key AS STRING) k", "unix_millis(timestamp) ms", *kafka_columns
    ).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in sizes for o in range(sizes[p])]
    plain = [r for r in rows if r.partition == 0 or r.offset < 3]
    assert all(r.v == f"{r.partition}:{r.offset}" and r.k == f"k{r.partition}" for r in plain)
    assert {r.topic for r in rows} == {topic} and {r.timestampType for r in rows} == {0}  # CreateTime
    assert all(abs(r.timestamp.timestamp() - time.time()) < 600 for r in plain)
    tombstone, keyless, empty = sorted(
        (r for r in rows if r.partition == 1 and r.offset >= 3), key=lambda r: r.offset
    )
    assert (tombstone.key, tombstone.value, tombstone.ms, tombstone.headers) == (b"gone", None, 1_000, [])
    assert (keyless.key, keyless.value) == (None, b"keyless")
    assert [(h.key, h.value) for h in keyless.headers] == [("trace", None), ("n", b"1")]
    assert abs(keyless.ms / 1000 - time.time()) < 600  # none given: the node's clock
    assert (empty.key, empty.value, empty.ms) == (b"", b"", 1_600_000_000_000)
    assert [(h.key, h.value) for h in empty.headers] == [("", b"")]


def test_batch_offsets_assign_and_min_partitions(spark: Any, raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(3)
    base_ms = 1_600_000_000_000
    for p in range(3):  # record i of each partition has timestamp base_ms + 10 i
        records = [{"value": str(i).encode(), "timestamp": base_ms + 10 * i} for i in range(100)]
        raftlog_cluster.produce_records(topic, p, records)
    reader = (
        spark.read.format("raftlog")
        .option("servers", raftlog_cluster.servers)
        .option("assign", json.dumps({topic: [0, 1]}))
        .option("startingOffsets", json.dumps({topic: {"0": 20, "1": -2}}))
        .option("endingOffsets", json.dumps({topic: {"0": 70, "1": -1}}))
        .option("minPartitions", "6")
    )
    df = reader.load()
    assert df.rdd.getNumPartitions() >= 6
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(20, 70)] + [(1, o) for o in range(100)]
    # By timestamp: the first record at or after it. Partition 1 has none that late and starts at its
    # end (strategy latest); partition 2 is not named and takes startingOffsets (earliest).
    by_time = read(
        spark,
        raftlog_cluster,
        topic,
        startingOffsetsByTimestamp=json.dumps({topic: {"0": base_ms + 205, "1": base_ms + 10**6}}),
        startingOffsetsByTimestampStrategy="latest",
        endingTimestamp=str(base_ms + 505),
    )
    got = sorted((r.partition, r.offset) for r in by_time.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(21, 51)] + [(2, o) for o in range(51)]


def test_fail_on_data_loss(spark: Any, raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(1, **{"internal.segment.bytes": 1024, "retention.bytes": 2048})
    raftlog_cluster.produce(topic, 0, [f"{i:040d}" for i in range(300)], chunk=10)
    raftlog_cluster.wait_for_log_start(topic, 0)
    log_start, end = raftlog_cluster.bounds(topic, 0)
    assert 0 < log_start < end == 300
    start = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="deleted by retention"):
        read(spark, raftlog_cluster, topic, startingOffsets=start).count()
    offsets = read(spark, raftlog_cluster, topic, startingOffsets=start, failOnDataLoss="false")
    got = sorted(r.offset for r in offsets.select("offset").collect())
    assert got[0] >= log_start and got == list(range(got[0], 300))


def test_an_option_the_format_does_not_have_fails_the_query_naming_it(
    spark: Any, raftlog_cluster: SparkTestCluster
) -> None:
    topic = raftlog_cluster.create_topic(1)
    raftlog_cluster.produce(topic, 0, ["a"])
    with pytest.raises(Exception, match="raftlog option 'groupIdPrefix': reads use no consumer group"):
        read(spark, raftlog_cluster, topic, groupIdPrefix="mine").count()
    with pytest.raises(Exception, match="raftlog option 'startingoffset': not an option"):
        read(spark, raftlog_cluster, topic, startingOffset="latest").count()  # a typo, not ignored
    assert read(spark, raftlog_cluster, topic).count() == 1


def test_stream_rate_limit_and_available_now(
    spark: Any, raftlog_cluster: SparkTestCluster, tmp_path: pathlib.Path
) -> None:
    topic = raftlog_cluster.create_topic(2)
    raftlog_cluster.produce(topic, 0, [f"a{i}" for i in range(30)])
    raftlog_cluster.produce(topic, 1, [f"b{i}" for i in range(20)])

    runs: list[int] = []

    def run() -> Any:
        # A memory sink's query cannot go on from its checkpoint, and the batch sizes below are a whole
        # run's: a run after one whose Python worker did not connect back starts afresh.
        runs.append(len(runs))
        query = (
            stream(spark, raftlog_cluster, topic, startingOffsets="earliest", maxOffsetsPerTrigger="20")
            .selectExpr("partition", "offset")
            .writeStream.format("memory")
            .queryName(f"an_{topic}")
            .option("checkpointLocation", str(tmp_path / f"ck{runs[-1]}"))
            .trigger(availableNow=True)
            .start()
        )
        return ended(query)

    query = again_if_a_worker_did_not_connect(run)
    rows = spark.sql(f"select * from an_{topic}").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, o) for o in range(30)] + [
        (1, o) for o in range(20)
    ]
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [20, 20, 10]


def test_stream_restart_from_checkpoint_has_no_gap_and_no_duplicate(
    spark: Any, raftlog_cluster: SparkTestCluster, tmp_path: pathlib.Path
) -> None:
    topic = raftlog_cluster.create_topic(2)
    raftlog_cluster.produce(topic, 0, ["before"] * 5)  # startingOffsets=latest (the default): never read
    seen: list[tuple[int, int, str]] = []

    def sink(df: Any, batch_id: int) -> None:
        rows = df.selectExpr("partition", "offset", "CAST(value AS STRING) v").collect()
        seen.extend((r.partition, r.offset, r.v) for r in rows)

    def started() -> Any:
        """The query, once its first trigger ran (a run that fails before it has written nothing)."""
        query = (
            stream(spark, raftlog_cluster, topic, maxOffsetsPerTrigger="7")
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .start()
        )
        try:
            query.processAllAvailable()
        except Exception:
            query.stop()
            raise
        return query

    def run(produce: list[tuple[int, int]]) -> None:
        query = again_if_a_worker_did_not_connect(started)
        try:
            for partition, count in produce:
                raftlog_cluster.produce(topic, partition, [f"p{partition}"] * count)
            query.processAllAvailable()
        finally:
            query.stop()

    run([(0, 9), (1, 4)])
    raftlog_cluster.produce(topic, 1, ["while stopped"] * 6)
    run([(0, 3)])
    assert sorted((p, o) for p, o, _ in seen) == [(0, o) for o in range(5, 17)] + [(1, o) for o in range(10)]
    assert "before" not in {v for _, _, v in seen}
