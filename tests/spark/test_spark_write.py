"""Writing DataFrames to topics with Spark: Kafka's sink columns, clear errors for bad rows, and exactly
once through idempotent produce when a task is retried or a micro-batch is replayed."""

from __future__ import annotations

import json
import os
import pathlib
from collections import Counter
from typing import Any

import pytest
from spark_cluster import FailingProxy, SparkTestCluster

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


def test_bad_rows_and_options_give_clear_errors(spark: Any, raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(1)
    servers = raftlog_cluster.servers
    nulls = spark.range(3).selectExpr("IF(id = 1, NULL, CAST(id AS STRING)) value")
    with pytest.raises(Exception, match="null 'value'"):
        nulls.write.format("raftlog").option("servers", servers).option("topic", topic).mode("append").save()
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

    def run(servers: str) -> None:
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
        assert query.awaitTermination(120)
        assert query.exception() is None

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
