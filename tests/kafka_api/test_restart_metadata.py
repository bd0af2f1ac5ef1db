"""A node just restarted tells Kafka clients of no topic list older than the cluster's: as a Kafka broker
opens its listeners only once its metadata caught up with the controller's, the node's Kafka listener
opens (and ``/status/ready`` says ready) only once it applied the controller's metadata up to what the
controller had applied when the node started. Before, a node answered Metadata from its last snapshot
right after a restart, and librdkafka cached "unknown partition" for the topics created while it was
down.

A topic created while a node is down after a crash gets its full replication factor, as on Kafka (which
places on a fenced broker still registered): the down node holds a replica, never the leader, and catches
up once it is back. Before, such a creation was refused with INVALID_REPLICATION_FACTOR. So does
``__consumer_groups`` when a group's first FindCoordinator comes then: before, it was created with a
replication factor of 2, its partitions without a majority once another node went down."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from waiting import wait_for

from kafka_api import wire
from partitions.groups.coordinator import GROUP_PARTITIONS_DEFAULT
from raftlog_client.local_cluster import LocalCluster

METADATA, FIND_COORDINATOR = 3, 10
BEFORE, WHILE_DOWN = 40, 40  # topics created before the node stops, and while it is down
SAMPLE = 5  # topics written while the node is down, whose replica on it must catch up
WATCH_S = 180.0  # the whole restart watched at most this long


def _create(cluster: LocalCluster, names: list[str], replicas: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(name, 1, replicas) for name in names], operation_timeout=60)
    for future in futures.values():
        future.result(120)


def _metadata_topics(address: str) -> set[str] | None:
    """The topics a Metadata request for every topic is answered with, or None: not connected (the
    listener is not open) or the connection closed."""
    try:
        raw = RawKafka(address)
    except OSError:
        return None
    try:
        raw.sock.settimeout(10)
        cls = wire.request_class(METADATA, 12)
        body = wire.build(cls, topics=None, allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)  # fmt: skip
        answer = raw.call(METADATA, 12, body)
        return {topic.name for topic in answer.topics}
    except (OSError, ConnectionError):
        return None
    finally:
        raw.close()


def _ready(http: str) -> bool:
    try:
        with urllib.request.urlopen(f"{http.rstrip('/')}/status/ready", timeout=5) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def test_a_restarted_node_answers_metadata_only_once_it_knows_every_topic(
    kafka_cluster: LocalCluster,
) -> None:
    first = [f"before-{i}" for i in range(BEFORE)]
    _create(kafka_cluster, first, 3)
    restarted = "n3"
    kafka_cluster.control("stop", restarted, kill=True)
    _seen_down(kafka_cluster, restarted)
    # a group's first use while the node is down: __consumer_groups (if this module is the cluster's
    # first to use a group) takes a replica on it too, and each partition elects on the two others. If an
    # earlier module of this worker created it, a partition the killed node led names it until its
    # election, as Kafka names a dead broker until the controller fences it: clients ask again, so does this
    wait_for(lambda: _group_coordinator(kafka_cluster, "group-while-down") != restarted,
             "a coordinator other than the killed node", WATCH_S)  # fmt: skip
    for partition in range(GROUP_PARTITIONS_DEFAULT):
        state = wait_for(
            lambda p=partition: _led(kafka_cluster, "__consumer_groups", p, other_than=restarted),
            "a leader other than the killed node", WATCH_S)  # fmt: skip
        assert restarted in [r["node"] for r in state["replicas"]], state
    later = [f"while-down-{i}" for i in range(WHILE_DOWN)]
    _create(kafka_cluster, later, 3)  # the down node takes a replica of each, leading none
    _produce(kafka_cluster, later[:SAMPLE])
    for name in later:
        replicas = _partition_state(kafka_cluster, name)["replicas"]
        assert restarted in [r["node"] for r in replicas], (name, replicas)
    expected = set(first) | set(later)

    started: dict[str, Any] = {}

    def start() -> None:
        try:
            started["answer"] = kafka_cluster.control("start", restarted)
        except Exception as exc:  # reported by the test below
            started["error"] = exc

    starter = threading.Thread(target=start)
    starter.start()
    address = kafka_cluster.kafka[restarted]
    http = kafka_cluster.urls[restarted]
    answers, refused, lacking = 0, 0, []
    ready_seen = False
    deadline = time.monotonic() + WATCH_S
    # as fast as it answers, from the restart until 20 answers after the start returned (bounded)
    while time.monotonic() < deadline and (starter.is_alive() or answers < 20):
        topics = _metadata_topics(address)
        if topics is None:
            refused += 1
            time.sleep(0.02)  # the listener is not open yet: asking again at once
            continue
        answers += 1
        if not expected <= topics:
            lacking.append(sorted(expected - topics)[:5])
        if not ready_seen:
            ready_seen = _ready(http)
    starter.join(60)
    assert "error" not in started, started
    assert not lacking, f"{len(lacking)} of {answers} Metadata answers lacked topics, e.g. {lacking[:3]}"
    assert answers >= 20 and ready_seen, (answers, refused, ready_seen)
    caught_up = {name: _caught_up(kafka_cluster, name, restarted) for name in later[:SAMPLE]}
    assert all(caught_up.values()), caught_up


def _partition_state(cluster: LocalCluster, topic: str, partition: int = 0) -> dict[str, Any]:
    url = f"{cluster.urls['n1'].rstrip('/')}/v1/partitions/{topic}/{partition}"
    with urllib.request.urlopen(url, timeout=30) as r:
        return dict(json.load(r))


def _led(cluster: LocalCluster, topic: str, partition: int, other_than: str) -> dict[str, Any] | None:
    """The partition's state once it has a leader other than ``other_than``, as n1 knows it; None before."""
    state = _partition_state(cluster, topic, partition)
    return state if state["leader"] not in (None, other_than) else None


def _group_coordinator(cluster: LocalCluster, group: str) -> str:
    """The node coordinating ``group``, as n1 answers FindCoordinator (asked again while it answers a
    retriable code, as clients do)."""
    cls = wire.request_class(FIND_COORDINATOR, 4)
    body = wire.build(cls, key_type=0, coordinator_keys=(group,))

    def ask() -> str | None:
        raw = RawKafka(cluster.kafka["n1"])
        try:
            [found] = raw.call(FIND_COORDINATOR, 4, body).coordinators
        finally:
            raw.close()
        assert found.error_code in (ErrorCode.none, ErrorCode.coordinator_not_available), found
        return f"n{found.node_id}" if found.error_code == ErrorCode.none else None

    return str(wait_for(ask, f"a coordinator of group {group}", WATCH_S))


def _seen_down(cluster: LocalCluster, node: str) -> None:
    """Wait until n1's gossip no longer counts ``node`` alive (what placement asks)."""

    def down() -> bool:
        with urllib.request.urlopen(f"{cluster.urls['n1'].rstrip('/')}/v1/nodes", timeout=30) as answer:
            states = {n["node_id"]: n["state"] for n in json.load(answer)}
        return states.get(node) in ("suspect", "dead")

    wait_for(down, f"gossip to report {node} down", WATCH_S, every_s=0.1)  # gossip's next probe


def _produce(cluster: LocalCluster, topics: list[str]) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for topic in topics:
        producer.produce(topic, b"written while a replica was down")
    assert producer.flush(60) == 0, "records left unacknowledged"


def _caught_up(cluster: LocalCluster, topic: str, node: str) -> bool:
    """Whether ``node``'s replica of the topic's partition matches its leader's log (waited for)."""
    deadline = time.monotonic() + WATCH_S
    while time.monotonic() < deadline:
        replicas = {r["node"]: r for r in _partition_state(cluster, topic)["replicas"]}
        if replicas.get(node, {}).get("lag") == 0:
            return True
        time.sleep(0.2)  # polling the leader's view of the replica
    return False
