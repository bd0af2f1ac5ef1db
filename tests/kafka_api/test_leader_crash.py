"""kill -9 of a partition's leader during a confluent-kafka idempotent producer stream of 100k records:
every acknowledged record is in the log exactly once, in the order it was sent, after the node is back."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka_fixtures import http_client
from waiting import wait_for

from raftlog_client.local_cluster import LocalCluster

RECORDS = 100_000
KILL_AFTER = 20_000  # acknowledged records before the leader is killed


def _leader(cluster: LocalCluster, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def led() -> str | None:
        leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        return f"n{leader}" if leader >= 0 else None

    return str(wait_for(led, f"a leader of {topic}/0", 30))


def test_acknowledged_records_survive_the_leaders_kill_exactly_once_in_order(
    kafka_cluster: LocalCluster,
) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("crash", 1, 3)
    leader = _leader(kafka_cluster, "crash")
    acked: list[int] = []
    failed: list[Any] = []
    lock = threading.Lock()

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failed.append(error)
        else:
            with lock:
                acked.append(int(message.key()))
            if len(acked) == KILL_AFTER:  # here, not after the loop: later records are still on their way
                kafka_cluster.control("stop", leader, kill=True)

    producer = Producer({
        "bootstrap.servers": kafka_cluster.bootstrap_servers,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 120_000,
    })  # fmt: skip
    for i in range(RECORDS):  # queued in the client, sent as fast as the cluster takes them
        while True:
            try:
                producer.produce("crash", key=b"%d" % i, value=b"value-%d" % i, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1_000 == 0:
            producer.poll(0)  # delivery reports, and with them the kill, come while the loop still produces
    assert producer.flush(180) == 0
    kafka_cluster.control("start", leader)
    assert failed == [], failed[:5]
    assert sorted(acked) == list(range(RECORDS))

    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": "crash-check",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition("crash", 0, 0)])
    keys: list[int] = []
    offsets: list[int] = []
    deadline = time.monotonic() + 120
    while len(keys) < RECORDS and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            assert message.error() is None, message.error()
            keys.append(int(message.key()))
            offsets.append(message.offset())
    consumer.close()
    assert offsets == list(range(len(offsets))), "offsets are dense"
    assert keys == list(range(RECORDS)), "every acknowledged record once, in the order sent"
