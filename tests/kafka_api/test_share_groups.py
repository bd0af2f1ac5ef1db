"""Share groups (KIP-932) with Kafka's own KafkaShareConsumer 4.x and real nodes: records acquired,
accepted, released (delivered again, its delivery count 2) and rejected (never again); a partition
leader's kill -9 loses no acknowledgement and delivers again what was acquired but not acknowledged;
ListGroups v5 names each group's type; a lock that expires delivers its record again. The Kafka tests'
cluster holds locks 4 s (``--group-share-record-lock-duration-ms``), not Kafka's 30 s. The records' rules
are the pure state machine's (``tests/partitions/groups/test_share_partition.py``)."""

from __future__ import annotations

import contextlib
import subprocess
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka_fixtures import RawKafka, http_client
from kio.schema.list_groups.v5.request import ListGroupsRequest

from kafka_api.apis import APIS
from raftlog_bench.kafka_peer import kafka_libs
from raftlog_client.local_cluster import LocalCluster
from tests.waiting import wait_for


def test_api_versions_advertise_the_share_group_apis() -> None:
    served = {key: (APIS[key].name, APIS[key].min_version, APIS[key].max_version) for key in (76, 77, 78, 79)}
    assert served == {
        76: ("ShareGroupHeartbeat", 1, 1),
        77: ("ShareGroupDescribe", 1, 1),
        78: ("ShareFetch", 1, 1),
        79: ("ShareAcknowledge", 1, 1),
    }
    assert APIS[16].max_version == 5  # ListGroups with group types


@pytest.mark.timeout(300)
def test_a_share_consumer_accepts_releases_and_rejects(kafka_cluster: LocalCluster, java_client: Any) -> None:
    settings = {"bootstrap.servers": kafka_cluster.bootstrap_servers}
    observed = java_client("share", settings, f"share-{uuid.uuid4().hex[:6]}")
    released = [i for i in range(20) if i % 4 == 1]
    assert observed == {
        "accepted": 15,
        "accepted_twice": 0,
        "rejected": 5,
        "rejected_seen_again": [],
        "redelivered": sorted(f"r{i}@2" for i in released),
    }


def _leader(cluster: LocalCluster, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def found() -> int | None:
        leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        return leader if leader >= 0 else None

    return f"n{wait_for(found, f'a leader of {topic}/0', timeout_s=30)}"


@pytest.mark.timeout(400)
def test_a_leader_kill_loses_no_acknowledgement_and_delivers_again_what_was_not_acknowledged(
    kafka_cluster: LocalCluster, java_client: Any
) -> None:
    """A member acquires 20 records, accepts 10 and halts holding the others; the partition's leader is
    killed; another member of the group gets exactly the 10 not acknowledged, each a second time."""
    topic = f"share-kill-{uuid.uuid4().hex[:6]}"
    settings = {"bootstrap.servers": kafka_cluster.bootstrap_servers}
    held = java_client("share-hold", settings, topic)
    assert held == {"held": 10, "acked": 10, "failed": 0}
    leader = _leader(kafka_cluster, topic)
    kafka_cluster.control("stop", leader, kill=True)
    try:
        drained = java_client("share-drain", settings, topic, "10")
    finally:
        kafka_cluster.control("start", leader)
    assert drained == {"got": sorted(f"r{i}@2" for i in range(10, 20))}


@pytest.mark.timeout(300)
def test_a_record_whose_lock_expired_is_delivered_again(
    kafka_cluster: LocalCluster, java_client: Any
) -> None:
    """A member acquires 20 records, accepts 10 and halts holding the others: once their locks expired,
    another member gets exactly those 10, each a second time."""
    topic = f"share-expiry-{uuid.uuid4().hex[:6]}"
    settings = {"bootstrap.servers": kafka_cluster.bootstrap_servers}
    assert java_client("share-hold", settings, topic) == {"held": 10, "acked": 10, "failed": 0}
    drained = java_client("share-drain", settings, topic, "10")
    assert drained == {"got": sorted(f"r{i}@2" for i in range(10, 20))}


def test_list_groups_v5_names_each_groups_type(kafka_cluster: LocalCluster) -> None:
    """The share groups of the tests above (they ran first) are listed with type share, filtered by type."""

    def listed(types: tuple[str, ...]) -> set[tuple[str, str]]:
        groups: set[tuple[str, str]] = set()
        for address in kafka_cluster.bootstrap_servers.split(","):
            raw = RawKafka(address)
            try:
                answer = raw.call(16, 5, ListGroupsRequest(states_filter=(), types_filter=types))
            finally:
                raw.close()
            groups |= {(g.group_id, g.group_type) for g in answer.groups}
        return groups

    shares = wait_for(
        lambda: {g for g in listed(("share",)) if g[0].startswith("share-")}, "share groups listed"
    )
    assert shares and all(kind == "share" for _, kind in shares)
    assert not {g for g in listed(("classic",)) if g[0].startswith("share-")}


@pytest.mark.timeout(300)
def test_kafka_console_share_consumer_reads_records_of_a_share_group(kafka_cluster: LocalCluster) -> None:
    """``kafka-console-share-consumer --max-messages 5``: records produced while it runs (a share group
    starts at the end) are printed, each once, and it exits."""
    topic = f"share-console-{uuid.uuid4().hex[:6]}"
    with http_client(kafka_cluster) as client:
        client.create_topic(topic, 1, 3)
    console = subprocess.Popen(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{kafka_libs()}/*",
         "org.apache.kafka.tools.consumer.ConsoleShareConsumer", "--bootstrap-server",
         kafka_cluster.bootstrap_servers, "--topic", topic, "--group", f"{topic}-share",
         "--max-messages", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    sent = 0
    deadline = time.monotonic() + 240
    try:
        while console.poll() is None and time.monotonic() < deadline:
            producer.produce(topic, value=b"c%d" % sent)
            producer.flush(30)
            sent += 1
            with contextlib.suppress(subprocess.TimeoutExpired):
                console.wait(timeout=0.3)
    finally:
        if console.poll() is None:
            console.kill()
    out, err = console.communicate(timeout=60)
    printed = out.splitlines()
    assert console.returncode == 0, err[-3000:]
    assert len(printed) == 5 and len(set(printed)) == 5, printed
    assert all(line.startswith("c") and int(line[1:]) < sent for line in printed), printed
