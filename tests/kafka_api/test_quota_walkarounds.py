"""A consumer quota that kept a consumer from ever getting a record (issue 72 item 6), against the shared
3-node cluster: a confluent-kafka consumer whose ``max.partition.fetch.bytes`` (1 MiB) is far above ten
times its client id's ``consumer_byte_rate`` gets every record, throttled on the way (the node's count of
throttled fetches grows), and never faster than the quota allows. Before, the partition was read up to
1 MiB, past what the quota allows in its window, and every answer was thrown away as throttled. The
rules: ``tests/kafka_api/test_throttling.py``."""

from __future__ import annotations

import time
import urllib.request
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode

from kafka_api import wire
from raftlog_client.local_cluster import LocalCluster
from tests.waiting import wait_for

TOPIC, CLIENT = "quota-large-partition-fetch", "quota-large-partition-fetch"
QUOTA = 2_048  # bytes a second; the meter's ten-second window holds 20 KiB of it
WINDOW_S = 11  # the meter's samples (Kafka's quota.window.num): what it may still count of the past
RECORDS, RECORD_BYTES = 30, 1_024  # 30 KiB in 30 batches: more than one window's worth
PARTITION_FETCH_BYTES = 1024 * 1024  # far above ten times the quota
DESCRIBE, ALTER = 48, 49


def _alter(address: str, remove: bool) -> None:
    cls = wire.request_class(ALTER, 1)
    entity = wire.build(wire.sibling(cls, "EntityData"), entity_type="client-id", entity_name=CLIENT)
    op = wire.build(wire.sibling(cls, "OpData"), key="consumer_byte_rate", value=float(QUOTA), remove=remove)
    entry = wire.build(wire.sibling(cls, "EntryData"), entity=(entity,), ops=(op,))
    raw = RawKafka(address)
    try:
        (answer,) = raw.call(ALTER, 1, wire.build(cls, entries=(entry,), validate_only=False)).entries
    finally:
        raw.close()
    assert answer.error_code == ErrorCode.none, answer


def _quota_on(address: str) -> bool:
    """Whether the node at ``address`` holds the client id's quota now (its own metadata)."""
    cls = wire.request_class(DESCRIBE, 1)
    component = wire.build(
        wire.sibling(cls, "ComponentData"), entity_type="client-id", match_type=0, match=CLIENT
    )
    raw = RawKafka(address)
    try:
        answer = raw.call(DESCRIBE, 1, wire.build(cls, components=(component,), strict=False))
    finally:
        raw.close()
    return any(v.key == "consumer_byte_rate" for entry in answer.entries or () for v in entry.values)


def _throttled(cluster: LocalCluster) -> float:
    total = 0.0
    for url in cluster.servers:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith(
                    'raftlog_client_quota_throttled_requests_total{quota="consumer_byte_rate"}'
                ):
                    total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_consumer_whose_partition_fetch_bytes_is_far_above_its_quota_gets_every_record_at_the_quota(
    kafka_cluster: LocalCluster,
) -> None:
    addresses = kafka_cluster.bootstrap_servers.split(",")
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "linger.ms": 0})
    for index in range(RECORDS):  # one batch each
        producer.produce(TOPIC, bytes([index % 256]) * RECORD_BYTES)
        assert producer.flush(30) == 0
    _alter(addresses[0], remove=False)
    try:
        wait_for(lambda: all(_quota_on(a) for a in addresses), "every node to hold the quota")
        before = _throttled(kafka_cluster)
        consumer = Consumer(
            {
                "bootstrap.servers": kafka_cluster.bootstrap_servers, "client.id": CLIENT,
                "group.id": "quota-large-partition-fetch", "auto.offset.reset": "earliest",
                "max.partition.fetch.bytes": PARTITION_FETCH_BYTES, "enable.auto.commit": False,
            }
        )  # fmt: skip
        consumer.subscribe([TOPIC])
        got: list[Any] = []
        started = time.monotonic()
        try:
            wait_for(
                lambda: _poll(consumer, got) >= RECORDS,
                f"the consumer to get all {RECORDS} records",
                timeout_s=120,
                every_s=0.0,
            )
        finally:
            consumer.close()
        elapsed_s = time.monotonic() - started
        delivered = sum(len(m.value()) for m in got)
        # the meter lets an answer through only while the rate over its window is within the quota,
        # so what came is at most the quota over the time taken and one window, and one answer more
        # (at most a window's worth: the partitions read no more than what the quota allows in one)
        assert delivered <= QUOTA * (elapsed_s + WINDOW_S) + QUOTA * (WINDOW_S - 1), (delivered, elapsed_s)
        assert _throttled(kafka_cluster) > before, "the consumer was throttled on the way"
    finally:
        _alter(addresses[0], remove=True)


def _poll(consumer: Consumer, got: list[Any]) -> int:
    message = consumer.poll(1.0)
    if message is not None and message.error() is None:
        got.append(message)
    return len(got)
