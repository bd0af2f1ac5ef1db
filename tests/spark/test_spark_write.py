"""Writing DataFrames to topics with Spark: Kafka's sink columns (tombstones, keyless records, null header
values, timestamps kept or stamped by the leader), clear errors for bad rows, and exactly once through
idempotent produce when a task is retried or a micro-batch is replayed."""

from __future__ import annotations

import json
import os
import pathlib
import time
from collections import Counter
from typing import Any

import pytest
from spark_cluster import FailingProxy, SparkTestCluster
from spark_queries import again_if_a_worker_did_not_connect, ended

pytestmark = pytest.mark.spark


def read_back(spark: Any, cluster: SparkTestCluster, topic: str) -> list[Any]:
    df = spark.read.format("raftlog").option("servers", cluster.servers).option("subscribe", topic).load()
    return list(
        df.selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v", "partition", "headers").collect()
    )


def test_batch_write_takes_kafka_sink_columns(spark: Any, raftlog_cluster: SparkTestCluster) -> None:
    first = raftlog_cluster.create_topic(3)
    second = raftlog_cluster.create_topic(2)
    df = spark.range(300).selectExpr(
        f"IF(id % 3 = 0, '{second}', '{first}') topic",
        "CAST(id % 7 AS STRING) key",
        "CAST(id AS STRING) value",
        "IF(id < 10, 1, NULL) partition",
        "array(named_struct('key', 'n', 'value', CAST(CAST(id AS STRING) AS BINARY))) headers",
    )
    df.write.format("raftlog").option("servers", raftlog_cluster.servers).mode("append").save()
    rows = read_back(spark, raftlog_cluster, first) + read_back(spark, raftlog_cluster, second)
    assert sorted(int(r.v) for r in rows) == list(range(300))
    assert all(r.partition == 1 for r in rows if int(r.v) < 10)
    keyed = [r for r in rows if int(r.v) >= 10]
    for key in {r.k for r in keyed}:  # one key, one partition per topic (murmur2 of the key)
        for topic_rows in ([r for r in keyed if r.k == key and int(r.v) % 3 == t] for t in (0, 1)):
            assert len({r.partition for r in topic_rows}) <= 1
    assert all(r.headers[0].key == "n" and r.headers[0].value == r.v.encode() for r in rows)


def test_record_model_round_trips_through_the_sink(spark: Any, raftlog_cluster: SparkTestCluster) -> None:
    """One DataFrame, in one Spark partition (so offsets follow rows), written to a CreateTime topic,
    which keeps the rows' timestamps, and to a LogAppendTime one, whose leader stamps its own."""
    create_time = raftlog_cluster.create_topic(1)
    append_time = raftlog_cluster.create_topic(1, **{"message.timestamp.type": "LogAppendTime"})
    df = spark.range(0, 4, 1, 1).selectExpr(
        "IF(id = 0, NULL, CAST(id AS STRING)) value",  # row 0: a tombstone
        "IF(id = 1, NULL, CONCAT('k', id)) key",  # row 1: no key
        "IF(id = 2, array(named_struct('key', 'trace', 'value', CAST(NULL AS BINARY)),"
        " named_struct('key', 'n', 'value', CAST('2' AS BINARY))), NULL) headers",
        "IF(id = 3, NULL, timestamp_millis(1600000000000 + id)) timestamp",  # row 3: the node's clock
    )
    started_ms = int(time.time() * 1000)
    for topic in (create_time, append_time):
        df.write.format("raftlog").option("servers", raftlog_cluster.servers).option("topic", topic).mode(
            "append"
        ).save()
    written_ms = int(time.time() * 1000)
    for fetch_format in ("columnar", "json"):
        rows = (
            spark.read.format("raftlog")
            .option("servers", raftlog_cluster.servers)
            .option("subscribe", f"{create_time},{append_time}")
            .option("fetchFormat", fetch_format)
            .load()
            .selectExpr(
                "topic", "offset", "key", "value", "headers", "unix_millis(timestamp) ms", "timestampType"
            )
            .orderBy("topic", "offset")
            .collect()
        )
        for topic, kind in ((create_time, 0), (append_time, 1)):
            mine = [r for r in rows if r.topic == topic]
            assert [(r.offset, r.key, r.value) for r in mine] == [
                (0, b"k0", None),
                (1, None, b"1"),
                (2, b"k2", b"2"),
                (3, b"k3", b"3"),
            ]
            assert [[(h.key, h.value) for h in r.headers] for r in mine] == [
                [],
                [],
                [("trace", None), ("n", b"2")],
                [],
            ]
            assert {r.timestampType for r in mine} == {kind}
            if kind == 0:
                assert [r.ms for r in mine[:3]] == [1_600_000_000_000 + i for i in range(3)]
                assert started_ms - 1000 <= mine[3].ms <= written_ms + 1000
            else:
                assert all(started_ms - 1000 <= r.ms <= written_ms + 1000 for r in mine)


def test_bad_rows_and_options_give_clear_errors(spark: Any, raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(1)
    servers = raftlog_cluster.servers
    no_header_key = spark.range(3).selectExpr(
        "CAST(id AS STRING) value", "array(named_struct('key', CAST(NULL AS STRING), 'value', 'v')) headers"
    )
    with pytest.raises(Exception, match="null header or header key"):
        no_header_key.write.format("raftlog").option("servers", servers).option("topic", topic).mode(
            "append"
        ).save()
    values = spark.range(3).selectExpr("CAST(id AS STRING) value")
    with pytest.raises(Exception, match="option 'topic'"):
        values.write.format("raftlog").option("servers", servers).mode("append").save()
    with pytest.raises(Exception, match="'value' column"):
        spark.range(3).write.format("raftlog").option("servers", servers).option("topic", topic).mode(
            "append"
        ).save()
    with pytest.raises(Exception, match="only appends"):
        values.write.format("raftlog").option("servers", servers).option("topic", topic).mode(
            "overwrite"
        ).save()
    with pytest.raises(Exception, match="option 'servers'"):
        values.write.format("raftlog").option("topic", topic).mode("append").save()
    with pytest.raises(Exception, match="option 'startingOffsets'"):
        spark.read.format("raftlog").option("servers", servers).option("subscribe", topic).option(
            "startingOffsets", "sometime"
        ).load().count()


def test_batch_write_task_retry_appends_once(spark: Any, raftlog_cluster: SparkTestCluster) -> None:
    """One task sends 20 requests to one partition; the 12th is applied but answered 500. Its retry
    resends sequences 0..11: the server remembers 7..11 (duplicates) and refuses 0..6 as too old, which
    the sink must take as written."""
    topic = raftlog_cluster.create_topic(1)
    values = spark.range(0, 1000, 1, 1).selectExpr("CAST(id AS STRING) value")
    with FailingProxy(raftlog_cluster.urls[0], fail_at=12) as proxy:
        (
            values.write.format("raftlog")
            .option("servers", proxy.url)
            .option("topic", topic)
            .option("batchRecords", "50")
            .mode("append")
            .save()
        )
    assert proxy.failed and proxy.posts > 20  # 20 requests, one failed and retried with its task
    assert sum(raftlog_cluster.end_offsets(topic)) == 1000
    assert Counter(r.v for r in read_back(spark, raftlog_cluster, topic)) == Counter(map(str, range(1000)))


def test_stream_write_task_retry_and_replayed_batch_append_once(
    spark: Any, raftlog_cluster: SparkTestCluster, tmp_path: pathlib.Path
) -> None:
    source = raftlog_cluster.create_topic(1)
    sink = raftlog_cluster.create_topic(2)
    raftlog_cluster.produce(source, 0, [str(i) for i in range(600)])
    checkpoint = tmp_path / "ck"

    def run_once(servers: str) -> None:
        query = (
            spark.readStream.format("raftlog")
            .option("servers", raftlog_cluster.servers)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
            .writeStream.format("raftlog")
            .option("servers", servers)
            .option("topic", sink)
            .option("batchRecords", "50")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        ended(query)

    def run(servers: str) -> None:
        again_if_a_worker_did_not_connect(lambda: run_once(servers))

    with FailingProxy(raftlog_cluster.urls[0], fail_at=5) as proxy:
        run(proxy.url)
    assert proxy.failed and proxy.posts > 12  # 12 requests, one failed and retried with its task
    assert sum(raftlog_cluster.end_offsets(sink)) == 600
    # As if the driver died after the sink wrote batch 0 but before Spark recorded its commit:
    assert sorted(int(name) for name in os.listdir(checkpoint / "commits") if name.isdigit()) == [0]
    os.remove(checkpoint / "commits" / "0")
    os.remove(checkpoint / "commits" / ".0.crc")
    run(raftlog_cluster.servers)  # Spark runs batch 0 again: same offsets, same query id and batch id
    assert sorted(int(name) for name in os.listdir(checkpoint / "commits") if name.isdigit()) == [0]
    assert sum(raftlog_cluster.end_offsets(sink)) == 600
    assert Counter(r.v for r in read_back(spark, raftlog_cluster, sink)) == Counter(map(str, range(600)))
    offsets = json.loads((checkpoint / "offsets" / "0").read_text().splitlines()[-1])
    assert offsets == {source: {"0": 600}}
