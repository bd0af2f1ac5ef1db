"""A node added as the operator tour (docs/operations.md) adds one, on real node processes: started without
``--kafka``, it would lead partitions that Kafka clients cannot reach (Kafka answers them
LEADER_NOT_AVAILABLE), so it leads none. Health names it and is not healthy, ``cluster nodes`` flags it, a
transfer to it is refused saying to start it with ``--kafka``, and a move that makes it a partition's
preferred leader leaves the leadership elsewhere, where confluent-kafka and kcat read every partition.
Started again with ``--kafka``, it is healthy, takes the leadership, and the same clients read every
partition through it."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from raftlog_cli.admin import nodes_summary
from raftlog_client.client import RaftlogClient
from tests.kafka_api.kafka_fixtures import kcat_path

from .cluster import ProcessCluster
from .test_admin_under_load import TOKEN, admin_token_args, refused, until

pytestmark = pytest.mark.slow

TOPIC, PARTITIONS = "orders", 2
MOVED = 1  # the partition the tour moves to the new node: replicas n4,n1,n2


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[ProcessCluster]:
    started = ProcessCluster.create(str(tmp_path), count=3, joining=1)
    for argv in started.argv.values():
        argv += admin_token_args(str(tmp_path))
    n4 = started.argv["n4"]
    at = n4.index("--kafka")
    started.kafka_n4 = n4[at : at + 2]  # type: ignore[attr-defined]
    del n4[at : at + 2]  # as the tour's command started it
    try:
        started.start_all()
        yield started
    finally:
        started.stop_all()


def _bootstrap(cluster: ProcessCluster) -> str:
    return ",".join(n.kafka for n in cluster.nodes if n.node_id != "n4")


def _read_every_partition(bootstrap: str, each: int) -> dict[int, list[bytes]]:
    """Each partition's values from its start, until ``each`` of each, as a Kafka consumer reads them through
    the leaders its Metadata names (a leader it cannot reach: none come, and the read ends after 60 s)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        found: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        for _ in range(600):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                found[message.partition()].append(message.value())
            if all(len(values) >= each for values in found.values()):
                break
        return found
    finally:
        consumer.close()


def _produce_to_every_partition(bootstrap: str, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30_000})
    failures: list[str] = []
    for partition in range(PARTITIONS):
        producer.produce(
            TOPIC, f"{tag}-{partition}".encode(), partition=partition,
            on_delivery=lambda error, _m: failures.append(str(error)) if error else None,
        )  # fmt: skip
    assert producer.flush(60) == 0 and not failures, failures


def _kcat_reads(bootstrap: str, partition: int) -> list[str]:
    answer = subprocess.run(
        [kcat_path(), "-b", bootstrap, "-C", "-t", TOPIC, "-p", str(partition), "-o", "beginning", "-e",
         "-q"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return answer.stdout.split()


def test_an_added_node_without_the_kafka_door_leads_nothing_until_it_has_one(cluster: ProcessCluster) -> None:
    async def scenario() -> None:
        async with RaftlogClient(cluster.urls, admin_token=TOKEN, retries=60, backoff_max_s=0.5) as admin:
            await until("a controller leader", admin.cluster.controller)
            await admin.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)

            async def named() -> bool:
                health = await admin.cluster.health()
                return health["nodes_missing_doors"] == {"n4": ["kafka"]} and not health["is_healthy"]

            await until("health naming n4 without a Kafka listener", named, 60)
            assert "NO-KAFKA" in nodes_summary(await admin.cluster.nodes())
            await admin.cluster.move_replicas(TOPIC, MOVED, ["n4", "n1", "n2"])

            async def moved() -> bool:
                progress = await admin.cluster.move_progress(TOPIC, MOVED)
                return progress["move"] is None and progress["replicas"] == ["n4", "n1", "n2"]

            await until("the move done", moved, 120)
            await refused(admin.cluster.transfer_leadership(TOPIC, MOVED, "n4"), 400, 40002)
            for partition in range(PARTITIONS):
                state = await until(
                    f"{TOPIC}/{partition} led, not by n4", lambda p=partition: led_not_by(admin, p, "n4"), 60
                )
                assert state != "n4"
        bootstrap = _bootstrap(cluster)
        _produce_to_every_partition(bootstrap, "before")
        _produce_to_every_partition(bootstrap, "before-again")
        read = _read_every_partition(bootstrap, 2)
        assert all(len(values) == 2 for values in read.values()), read
        assert _kcat_reads(bootstrap, MOVED) == [f"before-{MOVED}", f"before-again-{MOVED}"]

        # started again with its Kafka listener, as the tour's command now starts it
        cluster.kill("n4")
        cluster.argv["n4"] += cluster.kafka_n4  # type: ignore[attr-defined]
        cluster.start("n4")
        cluster.wait_ready(["n4"])
        async with RaftlogClient(cluster.urls, admin_token=TOKEN, retries=60, backoff_max_s=0.5) as admin:

            async def healthy() -> bool:
                health = await admin.cluster.health()
                return health["nodes_missing_doors"] == {} and bool(health["is_healthy"])

            await until("health with n4's Kafka listener", healthy, 90)

            async def n4_leads() -> bool:
                await admin.cluster.transfer_leadership(TOPIC, MOVED, "n4")
                return await led_not_by(admin, MOVED, "") == "n4"

            await until("n4 leading the moved partition", n4_leads, 60)
        everyone = ",".join(n.kafka for n in cluster.nodes)
        _produce_to_every_partition(everyone, "after")
        assert _kcat_reads(everyone, MOVED) == [f"before-{MOVED}", f"before-again-{MOVED}", f"after-{MOVED}"]
        read = _read_every_partition(everyone, 3)
        assert all(len(values) == 3 for values in read.values()), read

    asyncio.run(scenario())


async def led_not_by(admin: RaftlogClient, partition: int, node: str) -> str | None:
    """The partition's leader when one is known and it is not ``node``; None otherwise."""
    leader = (await admin.cluster.partition_state(TOPIC, partition)).get("leader")
    return leader if leader is not None and leader != node else None
