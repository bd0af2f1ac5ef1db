"""Compacted topics end to end on a real 3-node cluster, through unchanged Kafka clients: created with
``cleanup.policy=compact`` (and described so), a keyless record refused, DeleteRecords refused, each
replica compacting its own copy (every node's cleaner counts), a consumer reading each key's latest value
from the beginning, and every replica, led in turn, holding the same records once each has cleaned."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from raftlog_client.client import RaftlogClient
from raftlog_client.errors import RequestFailed
from raftlog_client.local_cluster import LocalCluster
from tests.waiting import node_metric, wait_for

TOPIC = "profiles"
KEYS = 25
RECORDS = 3000


@pytest.fixture(scope="module")
def cluster(compacting_cluster: LocalCluster) -> LocalCluster:
    return compacting_cluster


def consume_all(cluster: LocalCluster) -> list[tuple[int, bytes | None, bytes | None]]:
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"reader-{time.monotonic_ns()}",
         "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.partition.eof": True}
    )  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    rows = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return rows
                raise KafkaException(message.error())
            rows.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    raise AssertionError("the consumer did not reach the end of the partition")


async def transfer(cluster: LocalCluster, node: str) -> None:
    """Leadership of the partition to ``node``, waited for."""
    async with RaftlogClient(list(cluster.urls.values())) as client:
        deadline = time.monotonic() + 60
        while (await client.cluster.partition_state(TOPIC, 0)).get("leader") != node:
            assert time.monotonic() < deadline, f"{node} did not come to lead"
            with contextlib.suppress(RequestFailed):
                await client.cluster.transfer_leadership(TOPIC, 0, node)
            await asyncio.sleep(0.5)


def test_a_compacted_topic_keeps_each_keys_latest_value_on_every_replica(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    configs = {
        "cleanup.policy": "compact",
        "internal.segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01",
    }
    admin.create_topics([NewTopic(TOPIC, 1, 3, config=configs)])[TOPIC].result(timeout=30)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, TOPIC)])
    entries = next(iter(described.values())).result(timeout=30)
    assert entries["cleanup.policy"].value == "compact"

    # batches within the 4 KiB segments: a larger one is refused RECORD_BATCH_TOO_LARGE, as Kafka refuses it
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "batch.size": 2048})
    latest: dict[bytes, bytes | None] = {}
    written: set[tuple[bytes, bytes | None]] = set()
    for i in range(RECORDS):
        key = b"user-%d" % (i % KEYS)
        value = None if i % KEYS == 3 and i > RECORDS - KEYS else b"v%d" % i  # user-3 deleted at the end
        producer.produce(TOPIC, value=value, key=key, partition=0)
        latest[key], _ = value, written.add((key, value))
        if i % 500 == 0:
            producer.flush(30)
    assert producer.flush(30) == 0

    refused: list[Any] = []
    producer.produce(TOPIC, value=b"no key", partition=0, on_delivery=lambda err, _msg: refused.append(err))
    producer.flush(30)
    assert refused and refused[0] is not None and refused[0].code() == KafkaError.INVALID_RECORD

    deleted = admin.delete_records([TopicPartition(TOPIC, 0, 10)])
    with pytest.raises(KafkaException) as raised:
        next(iter(deleted.values())).result(timeout=30)
    assert raised.value.args[0].code() == KafkaError.POLICY_VIOLATION

    urls = list(cluster.urls.values())
    wait_for(lambda: all(node_metric(url, "raftlog_cleaner_records_removed_total") > 0 for url in urls),
             "every replica compacted its copy")  # fmt: skip
    wait_for(lambda: all(node_metric(url, "raftlog_cleaner_dirty_bytes") == 0 for url in urls),
             "no replica has anything cleanable left")  # fmt: skip

    rows = consume_all(cluster)
    assert len(rows) < RECORDS / 2, "compaction removed the superseded records"
    assert [offset for offset, _, _ in rows] == sorted({offset for offset, _, _ in rows})
    assert all((key, value) in written for _, key, value in rows), "nothing that was never written"
    last = {key: value for _, key, value in rows}
    assert last == latest, "each key's latest value, user-3 as its tombstone"

    seen = []
    for node in sorted(cluster.urls):
        asyncio.run(transfer(cluster, node))
        seen.append(consume_all(cluster))
    assert seen[0] == seen[1] == seen[2], "every replica holds the same records"


def test_the_cleaners_threads_change_while_the_nodes_run(cluster: LocalCluster) -> None:
    """``log.cleaner.threads`` set on one broker, then on the others, through Kafka's admin client (the
    cluster's default, broker ``""``, which this client cannot name, is tests/partitions'): each node
    runs as many compaction threads as its setting says from its next look on (the metric counts them),
    a compacted topic is still cleaned on every replica, a change past double is refused in Kafka's
    words, and removing the settings brings every node back to one."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    urls = cluster.urls  # n1 is broker 1

    def alter(broker: str, op: AlterConfigOpType, value: str = "") -> None:
        entry = ConfigEntry("log.cleaner.threads", value, incremental_operation=op)
        resource = ConfigResource(ConfigResource.Type.BROKER, broker, incremental_configs=[entry])
        next(iter(admin.incremental_alter_configs([resource]).values())).result(timeout=30)

    def threads() -> dict[str, float]:
        return {node: node_metric(url, "raftlog_cleaner_threads") for node, url in sorted(urls.items())}

    try:
        alter("1", AlterConfigOpType.SET, "2")
        wait_for(lambda: threads() == {"n1": 2, "n2": 1, "n3": 1}, "broker 1 runs two cleaner threads")
        with pytest.raises(KafkaException) as refused:
            alter("1", AlterConfigOpType.SET, "5")
        assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
        assert "cannot be increased to more than double the current value 2" in refused.value.args[0].str()
        for broker in ("2", "3"):
            alter(broker, AlterConfigOpType.SET, "2")
        wait_for(lambda: threads() == {"n1": 2, "n2": 2, "n3": 2}, "every node runs two cleaner threads")

        topic = "profiles-threads"
        configs = {
            "cleanup.policy": "compact",
            "internal.segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01",
        }
        admin.create_topics([NewTopic(topic, 2, 3, config=configs)])[topic].result(timeout=30)
        removed_before = {
            url: node_metric(url, "raftlog_cleaner_records_removed_total") for url in urls.values()
        }
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "batch.size": 2048}
        )
        for i in range(1000):
            producer.produce(topic, value=b"v%d" % i, key=b"k%d" % (i % 10), partition=i % 2)
        assert producer.flush(30) == 0
        removed = "raftlog_cleaner_records_removed_total"
        wait_for(lambda: all(node_metric(url, removed) > removed_before[url] for url in urls.values()),
                 "every replica compacted with two threads")  # fmt: skip
    finally:
        for broker in ("1", "2", "3"):
            alter(broker, AlterConfigOpType.DELETE)
    wait_for(lambda: threads() == {"n1": 1, "n2": 1, "n3": 1}, "every node back to one cleaner thread")
