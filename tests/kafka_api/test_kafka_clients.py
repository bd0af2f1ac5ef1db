"""Real Kafka client libraries of other authors against a real cluster: confluent-kafka (librdkafka),
kafka-python and aiokafka produce idempotently with acks=all and every codec, and consume; records read
identically through Kafka and through the HTTP API, both ways (keys, null values, headers with null
values, timestamps)."""

from __future__ import annotations

import asyncio
import pathlib
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KPTopicPartition
from kafka_fixtures import http_client
from waiting import wait_for

from raftlog_client.local_cluster import LocalCluster

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_CODEC = 400


def _expected(codec: str, count: int) -> list[tuple[bytes, bytes | None, list[tuple[str, bytes | None]]]]:
    return [
        (
            f"{codec}-{i}".encode(),
            None if i % 7 == 0 else f"value {i} ".encode() * 3,
            [("i", str(i).encode()), ("n", None)],
        )
        for i in range(count)
    ]


def _read_http(cluster: LocalCluster, topic: str, partitions: int) -> list[tuple[Any, ...]]:
    rows = []
    with http_client(cluster) as client:
        for partition in range(partitions):
            page = client.fetch_page(topic, partition, 0, 8 << 20, 0, columnar=True)
            for key, value, headers, ts in zip(
                page.keys, page.values, page.headers, page.timestamps_ms, strict=True
            ):
                rows.append((key, value, [(h[0], h[1]) for h in headers], ts))
    return rows


def _confluent_consume(cluster: LocalCluster, topic: str, partitions: int, count: int) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"read-{topic}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages: list[Any] = []
    deadline = time.monotonic() + 60
    try:
        while len(messages) < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, 1.0):
                assert message.error() is None, message.error()
                messages.append(message)
    finally:
        consumer.close()
    return messages


def test_confluent_kafka_produces_idempotently_with_every_codec(kafka_cluster: LocalCluster) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("ck", 3, 3)
    sent = {}
    failures: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    for codec in CODECS:
        producer = Producer({
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": codec,
            "linger.ms": 5,
        })  # fmt: skip
        for key, value, headers in _expected(codec, PER_CODEC):
            producer.produce("ck", key=key, value=value, headers=headers, on_delivery=delivered)
            producer.poll(0)
        assert producer.flush(60) == 0 and failures == []
        sent.update({key: (value, headers) for key, value, headers in _expected(codec, PER_CODEC)})
    read = _read_http(kafka_cluster, "ck", 3)
    assert len(read) == len(sent) == PER_CODEC * len(CODECS), "each record stored exactly once"
    for key, value, headers, _ in read:
        assert (value, headers) == sent[key]
    consumed = _confluent_consume(kafka_cluster, "ck", 3, len(sent))
    assert sorted(m.key() for m in consumed) == sorted(sent)
    for message in consumed:
        assert (message.value(), message.headers()) == sent[message.key()]


def test_kafka_python_and_aiokafka_produce_and_consume(kafka_cluster: LocalCluster) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("kp", 2, 3)
    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers, acks="all",
                             enable_idempotence=True, compression_type="gzip")  # fmt: skip
    futures = [
        producer.send("kp", key=b"kp-%d" % i, value=b"v%d" % i, headers=[("h", b"1")]) for i in range(300)
    ]
    producer.flush(30)
    assert all(f.succeeded() for f in futures)
    producer.close()

    async def aiokafka_round() -> int:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers,
                                    enable_idempotence=True, compression_type="zstd")  # fmt: skip
        await producer.start()
        try:
            for i in range(300):
                await producer.send("kp", key=b"ak-%d" % i, value=b"w%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_cluster.bootstrap_servers,
                                    enable_auto_commit=False, auto_offset_reset="earliest")  # fmt: skip
        await consumer.start()
        try:
            consumer.assign([KPTopicPartition("kp", p) for p in range(2)])
            seen = 0
            while seen < 600:
                batches = await consumer.getmany(timeout_ms=5000)
                if not batches:
                    break
                seen += sum(len(records) for records in batches.values())
            return seen
        finally:
            await consumer.stop()

    assert asyncio.run(aiokafka_round()) == 600
    consumer = KafkaConsumer(bootstrap_servers=kafka_cluster.bootstrap_servers, enable_auto_commit=False,
                             consumer_timeout_ms=5000)  # fmt: skip
    consumer.assign([KPTopicPartition("kp", p) for p in range(2)])
    consumer.seek_to_beginning()
    keys = [record.key for record in consumer]
    consumer.close()
    assert sorted(keys) == sorted([b"kp-%d" % i for i in range(300)] + [b"ak-%d" % i for i in range(300)])


def test_records_produced_over_http_read_identically_through_kafka(kafka_cluster: LocalCluster) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("fromhttp", 1, 3)
        records = [
            {
                "key": None,
                "value": "aGk=",
                "headers": [{"key": "a", "value": None}],
                "timestamp": 1_700_000_000_000,
            },
            {"key": "aw==", "value": None},  # a tombstone
            {
                "key": "aw==",
                "value": "",
                "headers": [{"key": "b", "value": "eA=="}, {"key": "b", "value": "eQ=="}],
            },
        ]
        client.produce("fromhttp", records, partition=0)
    messages = _confluent_consume(kafka_cluster, "fromhttp", 1, 3)
    assert [m.offset() for m in messages] == [0, 1, 2]
    assert [(m.key(), m.value()) for m in messages] == [(None, b"hi"), (b"k", None), (b"k", b"")]
    assert messages[0].headers() == [("a", None)] and messages[1].headers() is None
    assert messages[2].headers() == [("b", b"x"), ("b", b"y")]
    assert messages[0].timestamp() == (1, 1_700_000_000_000)  # (CreateTime, ms)


def test_acks_zero_gets_no_answer_and_still_appends(kafka_cluster: LocalCluster) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("acks0", 1, 3)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": 0, "linger.ms": 0})
    for i in range(50):
        producer.produce("acks0", key=b"%d" % i, value=b"x")
    assert producer.flush(30) == 0
    with http_client(kafka_cluster) as client:
        wait_for(lambda: client.offsets("acks0", 0)[1] >= 50, "the 50 records appended", 30)
        assert client.offsets("acks0", 0) == (0, 50)


@pytest.mark.parametrize("codec", ["snappy"])
def test_a_topic_codec_recompresses_what_a_kafka_producer_sent(
    kafka_cluster: LocalCluster, codec: str
) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("recompressed", 1, 3, {"compression.type": "zstd"})
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "compression.type": codec,
                         "enable.idempotence": True})  # fmt: skip
    for i in range(100):
        producer.produce("recompressed", key=b"%d" % i, value=b"text " * 20)
    assert producer.flush(30) == 0
    messages = _confluent_consume(kafka_cluster, "recompressed", 1, 100)
    assert [int(m.key()) for m in messages] == list(range(100))


def test_a_log_append_time_topic_answers_the_leaders_stamp(kafka_cluster: LocalCluster) -> None:
    """The produce answer carries the stamp the leader wrote, so the producer's delivery report shows the
    time the record has in the log, not the one the producer gave it."""
    with http_client(kafka_cluster) as client:
        client.create_topic("stamped", 1, 3, {"message.timestamp.type": "LogAppendTime"})
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "enable.idempotence": True})
    reports: list[Any] = []
    before_ms = int(time.time() * 1000)
    for i in range(3):
        producer.produce(
            "stamped",
            value=b"%d" % i,
            timestamp=1_000_000 + i,
            on_delivery=lambda e, m: reports.append((e, m)),
        )
    assert producer.flush(30) == 0
    after_ms = int(time.time() * 1000)
    assert [error for error, _ in reports] == [None] * 3
    stamps = [message.timestamp() for _, message in reports]
    assert all(
        kind == TIMESTAMP_LOG_APPEND_TIME and before_ms - 1000 <= ms <= after_ms + 1000 for kind, ms in stamps
    )
    consumed = [m.timestamp() for m in _confluent_consume(kafka_cluster, "stamped", 1, 3)]
    assert consumed == stamps  # as stored: the stamp of each record's batch


def test_aiokafkas_default_producer_and_acks_0_are_stored(kafka_cluster: LocalCluster) -> None:
    """aiokafka's plain producer writes producer_id -1, epoch -1 and base_sequence 0, which Kafka takes
    (without a producer id the sequence is not looked at): every record is stored, with acks=1 (its
    default) and with acks=0, whose answers are never read, and no node logs a handler's failure."""
    with http_client(kafka_cluster) as client:
        client.create_topic("plain", 1, 3)

    async def produce(acks: int, prefix: bytes) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers, acks=acks)
        await producer.start()
        try:
            sent = [await producer.send("plain", key=prefix + b"%d" % i, value=b"v") for i in range(50)]
            if acks:
                assert all([(await future).offset >= 0 for future in sent])
        finally:
            await producer.stop()

    asyncio.run(produce(1, b"a1-"))
    asyncio.run(produce(0, b"a0-"))
    with http_client(kafka_cluster) as client:
        wait_for(lambda: client.offsets("plain", 0)[1] >= 100, "the 100 records appended", 30, every_s=0.1)
        assert client.offsets("plain", 0) == (0, 100)
    consumer = KafkaConsumer(bootstrap_servers=kafka_cluster.bootstrap_servers, enable_auto_commit=False,
                             consumer_timeout_ms=5000)  # fmt: skip
    consumer.assign([KPTopicPartition("plain", 0)])
    consumer.seek_to_beginning()
    keys = [record.key for record in consumer]
    consumer.close()
    assert keys == [b"a1-%d" % i for i in range(50)] + [b"a0-%d" % i for i in range(50)]
    for node in kafka_cluster.urls:
        log = pathlib.Path(kafka_cluster.directory, node, "node.log").read_text(errors="replace")
        assert "Task exception was never retrieved" not in log
