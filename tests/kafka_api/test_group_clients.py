"""Consumer groups with real clients: three confluent-kafka members share a topic while records keep
coming, one leaves and another joins mid-run; every record is read exactly once across the clean
rebalances, and the offsets they committed are the ones the HTTP API shows. kafka-python and aiokafka
each consume as a group of three."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from collections import Counter
from typing import Any

from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, KafkaException, Producer
from kafka import KafkaConsumer
from kafka_fixtures import http_client

from raftlog_client.local_cluster import LocalCluster

PARTITIONS = 6
BEFORE, DURING = 1500, 1500
RUN_LIMIT_S = 90


def _produce(cluster: LocalCluster, topic: str, keys: range) -> None:
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True, "linger.ms": 5}
    )
    for i in keys:
        producer.produce(topic, key=b"%d" % i, value=b"x")
        if i % 100 == 0:
            producer.poll(0)
            time.sleep(0.01)  # spread over the run, so rebalances happen while records arrive
    assert producer.flush(60) == 0


class Member(threading.Thread):
    """A confluent-kafka group member that commits what it processed before every rebalance and after
    each batch, so a clean rebalance hands over exactly where it stopped."""

    def __init__(
        self, cluster: LocalCluster, topic: str, group: str, seen: list[bytes], lock: threading.Lock
    ) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        })  # fmt: skip
        self.topic, self.seen, self.lock = topic, seen, lock
        self.stop = threading.Event()
        self.errors: list[Any] = []

    def run(self) -> None:
        def revoked(consumer: Any, _partitions: Any) -> None:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as exc:  # nothing consumed since the last commit
                if "NO_OFFSET" not in str(exc):
                    self.errors.append(exc)

        self.consumer.subscribe([self.topic], on_revoke=revoked)
        while not self.stop.is_set():
            messages = self.consumer.consume(200, 0.2)
            batch = []
            for message in messages:
                if message.error() is not None:
                    self.errors.append(message.error())
                else:
                    batch.append(message.key())
            if batch:
                with self.lock:
                    self.seen.extend(batch)
                self.consumer.commit(asynchronous=False)
        self.consumer.close()  # commits nothing more; leaves the group (LeaveGroup)


def test_a_group_of_three_reads_every_record_once_while_members_leave_and_join(
    kafka_cluster: LocalCluster,
) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("grouped", PARTITIONS, 3)
    _produce(kafka_cluster, "grouped", range(BEFORE))
    seen: list[bytes] = []
    lock = threading.Lock()
    members = [Member(kafka_cluster, "grouped", "readers", seen, lock) for _ in range(3)]
    for member in members:
        member.start()
    producing = threading.Thread(
        target=_produce, args=(kafka_cluster, "grouped", range(BEFORE, BEFORE + DURING))
    )
    producing.start()
    deadline = time.monotonic() + RUN_LIMIT_S
    while len(seen) < BEFORE // 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    members[1].stop.set()  # one leaves ...
    members[1].join(30)
    late = Member(kafka_cluster, "grouped", "readers", seen, lock)  # ... and another joins
    late.start()
    members.append(late)
    producing.join(60)
    while len(set(seen)) < BEFORE + DURING and time.monotonic() < deadline:
        time.sleep(0.2)
    for member in members:
        member.stop.set()
    for member in members:
        member.join(30)
    counts = Counter(seen)
    assert set(counts) == {b"%d" % i for i in range(BEFORE + DURING)}, "no record skipped"
    assert [k for k, n in counts.items() if n > 1] == [], "none read twice across clean rebalances"
    assert all(m.errors == [] for m in members), [m.errors for m in members]
    # one group, one truth: what the members committed is what the HTTP API shows, the partitions' ends
    url = f"{kafka_cluster.servers[0]}/consumers/readers/offsets?topic=grouped"
    with urllib.request.urlopen(url, timeout=10) as answer:
        committed = {row["partition"]: row["offset"] for row in json.load(answer)["offsets"]}
    with http_client(kafka_cluster) as client:
        ends = {p: client.offsets("grouped", p)[1] for p in range(PARTITIONS)}
    assert committed == ends


def test_kafka_python_and_aiokafka_consume_as_groups_of_three(kafka_cluster: LocalCluster) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("shared", PARTITIONS, 3)
    _produce(kafka_cluster, "shared", range(600))
    keys: list[bytes] = []
    lock = threading.Lock()

    deadline = time.monotonic() + RUN_LIMIT_S

    def kafka_python_member() -> None:
        # Polls until the group as a whole has read everything: how long three joins and their
        # rebalances take depends on the machine, so no member stops on a quiet spell alone.
        consumer = KafkaConsumer(
            "shared",
            bootstrap_servers=kafka_cluster.bootstrap_servers,
            group_id="kp-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        while time.monotonic() < deadline:
            with lock:
                if len(set(keys)) >= 600:
                    break
            batches = consumer.poll(timeout_ms=200)
            for records in batches.values():
                with lock:
                    keys.extend(r.key for r in records)
            if batches:
                consumer.commit()
        consumer.close()

    threads = [threading.Thread(target=kafka_python_member) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(keys) == sorted(b"%d" % i for i in range(600))

    async def aiokafka_group() -> list[bytes]:
        consumers = [
            AIOKafkaConsumer(
                "shared",
                bootstrap_servers=kafka_cluster.bootstrap_servers,
                group_id="ak-group",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            )
            for _ in range(3)
        ]
        for consumer in consumers:
            await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < 600 and time.monotonic() < deadline:
                for consumer in consumers:
                    batches = await consumer.getmany(timeout_ms=200)
                    for records in batches.values():
                        got.extend(r.key for r in records)
                    if batches:
                        await consumer.commit()
            assignments = [consumer.assignment() for consumer in consumers]
        finally:
            for consumer in consumers:
                await consumer.stop()
        assert sum(len(a) for a in assignments) == PARTITIONS and all(assignments)
        return got

    assert sorted(asyncio.run(aiokafka_group())) == sorted(b"%d" % i for i in range(600))
