"""Records cross between the Kafka protocol and the Spark connector unchanged: what a confluent-kafka
producer sends (null keys and values, headers with null values, CreateTime timestamps, a compressed
batch) Spark reads as sent, and what Spark writes a confluent-kafka consumer reads as written."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, Producer, TopicPartition
from spark_cluster import SparkTestCluster

pytestmark = pytest.mark.spark

BASE_MS = 1_600_000_000_000
SENT: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (None, b"v0", [("trace", None)]),  # no key, a header without a value
    (b"k1", None, []),  # a tombstone
    (b"k2", b"v2", [("a", b"1"), ("b", b"")]),
    (b"k3", b"\x00\xff binary", []),
]


def _bootstrap(cluster: SparkTestCluster) -> str:
    assert cluster.local is not None
    return cluster.local.bootstrap_servers


def test_spark_reads_what_a_kafka_producer_sent(spark: Any, raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(1)
    producer = Producer({
        "bootstrap.servers": _bootstrap(raftlog_cluster),
        "enable.idempotence": True,
        "compression.type": "zstd",
        "linger.ms": 50,  # one batch
    })  # fmt: skip
    for i, (key, value, headers) in enumerate(SENT):
        producer.produce(topic, partition=0, key=key, value=value, headers=headers, timestamp=BASE_MS + i)
    assert producer.flush(30) == 0
    for fetch_format in ("columnar", "json"):
        rows = (
            spark.read.format("raftlog")
            .option("servers", raftlog_cluster.servers)
            .option("subscribe", topic)
            .option("fetchFormat", fetch_format)
            .load()
            .selectExpr("offset", "key", "value", "headers", "unix_millis(timestamp) ms", "timestampType")
            .orderBy("offset")
            .collect()
        )
        got = [(r.key, r.value, [(h.key, h.value) for h in r.headers]) for r in rows]
        assert got == [(k, v, h) for k, v, h in SENT], fetch_format
        assert [(r.offset, r.ms, r.timestampType) for r in rows] == [(i, BASE_MS + i, 0) for i in range(4)]


def test_a_kafka_consumer_reads_what_spark_wrote(spark: Any, raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(1)
    df = spark.range(0, 4, 1, 1).selectExpr(  # one Spark partition: offsets follow the rows
        "IF(id = 1, NULL, CAST(CONCAT('v', id) AS BINARY)) value",
        "IF(id = 0, NULL, CAST(CONCAT('k', id) AS BINARY)) key",
        "IF(id = 0, array(named_struct('key', 'trace', 'value', CAST(NULL AS BINARY))), NULL) headers",
        f"timestamp_millis({BASE_MS} + id) timestamp",
    )
    df.write.format("raftlog").option("servers", raftlog_cluster.servers).option("topic", topic).mode(
        "append"
    ).save()
    consumer = Consumer({
        "bootstrap.servers": _bootstrap(raftlog_cluster),
        "group.id": f"spark-written-{topic}",
        "enable.auto.commit": False,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while len(messages) < 4 and time.monotonic() < deadline:
            messages += [m for m in consumer.consume(10, 0.5) if m.error() is None]
    finally:
        consumer.close()
    assert [(m.offset(), m.key(), m.value(), m.headers() or []) for m in messages] == [
        (0, None, b"v0", [("trace", None)]),
        (1, b"k1", None, []),
        (2, b"k2", b"v2", []),
        (3, b"k3", b"v3", []),
    ]
    assert [m.timestamp() for m in messages] == [(TIMESTAMP_CREATE_TIME, BASE_MS + i) for i in range(4)]
