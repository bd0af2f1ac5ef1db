"""The same client scenarios against raftlog's Kafka listeners and against Apache Kafka itself, with the
same assertions: where raftlog and Kafka differ, the test of that scenario fails, unless
docs/kafka-compatibility.md lists the difference ("Differences from Apache Kafka") and the scenario names
it in ``KNOWN_DIFFERENCES``. Kafka runs the scenarios too, so none of them encodes a guess of what Kafka
does. Both clusters have three nodes and replication factor 3 (Kafka: 3 KRaft nodes on loopback from the
jars the project installed, ``raftlog_bench.kafka_peer``); the clients are confluent-kafka (librdkafka),
Kafka's own Java client (kafka-clients, ``java_client.py``), kafka-python, aiokafka, kcat and a Go client
(franz-go, ``go/``)."""

from __future__ import annotations

import asyncio
import pathlib
import re
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AIOTopicPartition
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    NewPartitions,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from conftest import Systems
from java_client import JavaClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka import errors as kafka_errors
from kafka_fixtures import kcat_path

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]
COMPATIBILITY = ROOT / "docs" / "kafka-compatibility.md"
SYSTEMS = ("raftlog", "kafka")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# scenario -> why raftlog answers otherwise than Kafka (each listed in docs/kafka-compatibility.md)
KNOWN_DIFFERENCES: dict[str, str] = {}


def _differs(system: str, scenario: str) -> None:
    """A known difference: raftlog's side of ``scenario`` is expected to fail, and the doc says why."""
    if system == "raftlog" and scenario in KNOWN_DIFFERENCES:
        assert scenario in COMPATIBILITY.read_text(encoding="utf-8"), f"{scenario} is not in {COMPATIBILITY}"
        pytest.xfail(KNOWN_DIFFERENCES[scenario])


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _create(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = _admin(bootstrap)  # held until its futures end: a client collected first cancels them
    futures = admin.create_topics([NewTopic(name, partitions, 3)], operation_timeout=30)
    futures[name].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until every partition has a leader the client sees
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if (
            topic is not None
            and topic.error is None
            and all(p.leader >= 0 for p in topic.partitions.values())
        ):
            return
        time.sleep(0.2)
    raise AssertionError(f"{name} has no leaders after 60 s")


def _produce(bootstrap: str, topic: str, values: list[bytes], **settings: object) -> list[int]:
    """Idempotent, acks=all; the offsets the broker acknowledged, in order."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", **settings}
    )
    offsets: list[int] = []
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: object) -> None:
        if error is not None:
            failures.append(error)
        else:
            offsets.append(message.offset())  # type: ignore[attr-defined]

    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=delivered)
    assert producer.flush(60) == 0
    assert failures == []
    return offsets


def _read(bootstrap: str, topic: str, count: int, offset: int = 0) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, offset)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


def _first_error(consumer: Consumer) -> KafkaError | None:
    """The first error the consumer polls within 30 s (None if none came); the consumer is closed."""
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is not None:
                return message.error()
    finally:
        consumer.close()
    return None


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_with_each_codec(servers: dict[str, str], system: str, codec: str) -> None:
    _differs(system, f"codec-{codec}")
    bootstrap = servers[system]
    topic = _topic(f"codec-{codec}")
    _create(bootstrap, topic)
    values = [b"value-%d-" % i + bytes(i % 7) * 50 for i in range(300)]
    offsets = _produce(bootstrap, topic, values, **{"compression.type": codec, "linger.ms": 5})
    assert offsets == list(range(300))  # dense, in order, from 0
    assert _read(bootstrap, topic, 300) == values


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_create_topics_refuses_an_invalid_name_and_takes_the_valid_ones(
    servers: dict[str, str], system: str
) -> None:
    _differs(system, "create-invalid-name")
    admin = _admin(servers[system])
    good = _topic("good")
    futures = admin.create_topics([NewTopic("bad name!", 1, 3), NewTopic(good, 1, 3)], operation_timeout=30)
    with pytest.raises(KafkaException) as refused:
        futures["bad name!"].result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION  # Kafka's INVALID_TOPIC_EXCEPTION (17)
    futures[good].result(30)


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_creating_an_existing_topic_is_refused_as_existing(servers: dict[str, str], system: str) -> None:
    _differs(system, "create-existing")
    bootstrap = servers[system]
    topic = _topic("twice")
    _create(bootstrap, topic)
    admin = _admin(bootstrap)
    futures = admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=30)
    with pytest.raises(KafkaException) as refused:
        futures[topic].result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_a_replication_factor_above_the_brokers_is_refused(servers: dict[str, str], system: str) -> None:
    _differs(system, "create-replication-factor")
    topic = _topic("rf5")
    admin = _admin(servers[system])
    futures = admin.create_topics([NewTopic(topic, 1, 5)], operation_timeout=30)
    with pytest.raises(KafkaException) as refused:
        futures[topic].result(30)
    assert refused.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_offsets_for_times_finds_the_first_record_at_or_after_a_time(
    servers: dict[str, str], system: str
) -> None:
    _differs(system, "offsets-for-times")
    bootstrap = servers[system]
    topic = _topic("times")
    _create(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i, timestamp in enumerate((1_000_000, 2_000_000, 3_000_000)):
        producer.produce(topic, b"%d" % i, partition=0, timestamp=timestamp)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}"})
    try:
        asked = [TopicPartition(topic, 0, t) for t in (1_500_000, 3_000_000, 4_000_000)]
        found = [consumer.offsets_for_times([tp], timeout=30)[0].offset for tp in asked]
    finally:
        consumer.close()
    assert found == [1, 2, -1]  # -1: no record at or after it (the end)


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_reading_past_the_end_with_no_reset_policy_is_an_error(servers: dict[str, str], system: str) -> None:
    _differs(system, "offset-out-of-range")
    bootstrap = servers[system]
    topic = _topic("range")
    _create(bootstrap, topic)
    _produce(bootstrap, topic, [b"a", b"b"])
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}", "auto.offset.reset": "error",
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 100)])
    error = _first_error(consumer)
    assert error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_delete_records_moves_the_log_start_and_reads_below_it_are_out_of_range(
    servers: dict[str, str], system: str
) -> None:
    _differs(system, "delete-records")
    bootstrap = servers[system]
    topic = _topic("trim")
    _create(bootstrap, topic)
    _produce(bootstrap, topic, [b"%d" % i for i in range(10)], **{"linger.ms": 50})
    admin = _admin(bootstrap)

    def delete(offset: int) -> int:
        futures = admin.delete_records([TopicPartition(topic, 0, offset)], operation_timeout=30)
        return int(next(iter(futures.values())).result(60).low_watermark)

    assert delete(4) == 4
    assert delete(2) == 4  # below the start: nothing changes
    with pytest.raises(KafkaException) as refused:
        delete(50)  # past the high watermark
    assert refused.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30) == (4, 10)
    finally:
        consumer.close()
    assert _read(bootstrap, topic, 6, offset=4) == [b"%d" % i for i in range(4, 10)]
    strict = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}", "auto.offset.reset": "error",
    })  # fmt: skip
    strict.assign([TopicPartition(topic, 0, 1)])
    error = _first_error(strict)
    assert error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET
    assert delete(-1) == 10  # every record: the high watermark


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_a_record_above_max_message_bytes_is_refused_as_too_large(
    servers: dict[str, str], system: str
) -> None:
    _differs(system, "record-too-large")
    bootstrap = servers[system]
    topic = _topic("large")
    admin = _admin(bootstrap)
    futures = admin.create_topics(
        [NewTopic(topic, 1, 3, config={"max.message.bytes": "10000"})], operation_timeout=30
    )
    futures[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False})
    failures: list[KafkaError] = []
    producer.produce(topic, b"x" * 50_000, partition=0, on_delivery=lambda e, m: failures.append(e))
    producer.flush(60)
    assert len(failures) == 1 and failures[0] is not None
    assert failures[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_create_partitions_grows_a_topic_and_refuses_a_count_not_above_it(
    servers: dict[str, str], system: str
) -> None:
    _differs(system, "create-partitions")
    bootstrap = servers[system]
    topic = _topic("grow")
    _create(bootstrap, topic, partitions=2)
    admin = _admin(bootstrap)
    checked = admin.create_partitions([NewPartitions(topic, 6)], validate_only=True)
    assert checked[topic].result(30) is None
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2, "validate only"
    assert admin.create_partitions([NewPartitions(topic, 4)])[topic].result(60) is None
    for count in (4, 3):
        with pytest.raises(KafkaException) as refused:
            admin.create_partitions([NewPartitions(topic, count)])[topic].result(30)
        assert refused.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    missing = _topic("nope")
    futures = admin.create_partitions([NewPartitions(missing, 2)])  # held: a dropped dict cancels them
    with pytest.raises(KafkaException) as unknown:
        futures[missing].result(30)
    assert unknown.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every new partition gets a leader
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if len(partitions) == 4 and all(p.leader >= 0 for p in partitions.values()):
            break
        time.sleep(0.2)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    offsets: list[int] = []
    producer.produce(topic, b"new", partition=3, on_delivery=lambda e, m: offsets.append(m.offset()))
    assert producer.flush(60) == 0 and offsets == [0]


# -- the reference client: Apache Kafka's own Java client (kafka-clients) ----------------------------

# the classic protocol's client assignors, then the consumer group protocol's server ones (KIP-848)
ASSIGNORS = (
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "CooperativeStickyAssignor",
    "uniform",
    "range",
)


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("codec", CODECS)
def test_java_client_produces_idempotently_and_reads_back_with_each_codec(
    servers: dict[str, str], java_client: JavaClient, system: str, codec: str
) -> None:
    _differs(system, f"java-codec-{codec}")
    settings = {"bootstrap.servers": servers[system]}
    observed = java_client("produce-consume", settings, _topic(f"java-{codec}"), codec)
    assert observed == {"dense_offsets_from_0": True, "read": 300, "read_as_written": True}


def _fetches(systems: Systems, kind: str) -> float:
    """raftlog's Fetch requests answered of ``kind`` (full, incremental), over its nodes' /metrics."""
    total = 0.0
    for url in systems.raftlog.servers:
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        found = re.search(rf'^raftlog_kafka_fetches_total{{kind="{kind}"}} (\S+)$', text, re.M)
        total += float(found.group(1)) if found else 0.0
    return total


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_java_client_group_of_three_with_each_assignor_reads_once_and_rebalances_on_a_leave(
    servers: dict[str, str], systems: Systems, java_client: JavaClient, system: str, assignor: str
) -> None:
    _differs(system, f"java-group-{assignor}")
    incremental_before = _fetches(systems, "incremental")
    observed = java_client("group", {"bootstrap.servers": servers[system]}, _topic("java-group"), assignor)
    assert observed == {
        "first_600_read": True,
        "shares_of_three": [2, 2, 2],
        "after_a_leave_660_read": True,
        "two_hold_all_six": True,
        "read_twice": 0,
        "member_failures": [],
        "committed": [110] * 6,
        "group_state": "Empty",
    }
    if system == "raftlog":  # the consumers fetched with incremental fetch sessions (KIP-227)
        assert _fetches(systems, "incremental") > incremental_before


@pytest.mark.timeout(600)
@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_java_share_consumer_accepts_releases_and_rejects(
    servers: dict[str, str], java_client: JavaClient, system: str
) -> None:
    """Share groups (KIP-932): 20 records to a KafkaShareConsumer; released ones come back with delivery
    count 2 and are accepted, rejected ones never come back, nothing accepted twice."""
    _differs(system, "java-share")
    observed = java_client("share", {"bootstrap.servers": servers[system]}, _topic("java-share"))
    assert observed == {
        "accepted": 15,
        "accepted_twice": 0,
        "rejected": 5,
        "rejected_seen_again": [],
        "redelivered": sorted(f"r{i}@2" for i in range(20) if i % 4 == 1),
    }


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_java_admin_client_configs_partitions_and_refusals(
    servers: dict[str, str], java_client: JavaClient, system: str
) -> None:
    _differs(system, "java-admin")
    observed = java_client("admin", {"bootstrap.servers": servers[system]}, _topic("java-admin"))
    assert observed == {
        "retention_ms": "3600000 DYNAMIC_TOPIC_CONFIG",
        "after_alter": "1048576 DYNAMIC_TOPIC_CONFIG, retention.ms DEFAULT_CONFIG",
        "partitions_after_growth": 4,
        "replicas_each": [3],
        "grow_to_3": "InvalidPartitionsException",
        "create_again": "TopicExistsException",
        "create_bad_name": "InvalidTopicException",
        "create_factor_5": "InvalidReplicationFactorException",
        "cluster_nodes": 3,
        "new_partition_end": 0,
        "delete_again": "UnknownTopicOrPartitionException",
    }


class _Tracked:
    """A confluent-kafka group member that counts its assignments and revocations."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance: str | None) -> None:
        settings = {
            "bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest",
        }  # fmt: skip
        if instance is not None:
            settings["group.instance.id"] = instance
        self.consumer = Consumer(settings)
        self.assigned: list[list[int]] = []
        self.revoked = 0
        self.consumer.subscribe(
            [topic],
            on_assign=lambda c, parts: self.assigned.append(sorted(p.partition for p in parts)),
            on_revoke=lambda c, parts: setattr(self, "revoked", self.revoked + 1),
        )

    def holds(self) -> list[int]:
        return sorted(p.partition for p in self.consumer.assignment())


def _poll_until(members: list[_Tracked], condition: object, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the group did not get there in time"
        for member in members:
            member.consumer.poll(0.1)


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_a_static_member_restarting_within_its_session_keeps_its_partitions_and_nobody_rebalances(
    servers: dict[str, str], system: str
) -> None:
    _differs(system, "static-membership")
    bootstrap = servers[system]
    topic = _topic("static")
    _create(bootstrap, topic, partitions=2)
    group = f"static-{uuid.uuid4().hex[:8]}"
    a, b = _Tracked(bootstrap, group, topic, "a"), _Tracked(bootstrap, group, topic, "b")
    _poll_until([a, b], lambda: len(a.holds()) == 1 and len(b.holds()) == 1)
    held = b.holds()
    rebalances_of_a = (len(a.assigned), a.revoked)
    b.consumer.close()  # a static member does not leave: its place waits for it (the session)
    again = _Tracked(bootstrap, group, topic, "b")
    try:
        _poll_until([a, again], lambda: again.holds() != [])
        assert again.holds() == held, "the new incarnation has the partition the old one had"
        assert (len(a.assigned), a.revoked) == rebalances_of_a, "the other member never rebalanced"
    finally:
        again.consumer.close()
        a.consumer.close()


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_an_idempotent_producer_keeps_every_acknowledged_record_once_in_order_across_a_leader_kill(
    systems: Systems, system: str
) -> None:
    """SIGKILL of the partition's leader while an idempotent producer streams: it retries to the new
    leader and every record it acknowledged is in the log once, in the order sent; nothing fails."""
    _differs(system, "idempotent-leader-kill")
    bootstrap = systems.servers()[system]
    topic = _topic("kill")
    _create(bootstrap, topic)
    admin = _admin(bootstrap)
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    producer = Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        "message.timeout.ms": 120_000,
    })  # fmt: skip
    acked: list[bytes] = []
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: object) -> None:
        if error is not None:
            failures.append(error)
        else:
            acked.append(message.value())  # type: ignore[attr-defined]

    killed = False
    try:
        for i in range(20_000):
            while True:
                try:
                    producer.produce(topic, b"%d" % i, partition=0, on_delivery=delivered)
                    break
                except BufferError:  # the local queue is full: let deliveries drain
                    producer.poll(0.1)
            producer.poll(0)
            deadline = time.monotonic() + 120
            while i - len(acked) - len(failures) > 1_000:  # a stream, not one burst: ~1,000 in flight
                assert time.monotonic() < deadline, f"{len(acked)} acknowledged of {i} after 120 s"
                producer.poll(0.05)
            if not killed and len(acked) >= 5_000:
                systems.kill(system, leader)
                killed = True
        assert producer.flush(180) == 0
    finally:
        if killed:
            systems.restart(system, leader)
    assert killed and failures == [] and len(acked) == 20_000
    assert acked == [b"%d" % i for i in range(20_000)], "acknowledged in the order sent"
    assert _read(bootstrap, topic, 20_000) == acked, "each once, in order, dense from offset 0"


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_offset_delete_removes_a_groups_offsets_but_not_those_its_consumers_subscribe_to(
    servers: dict[str, str], system: str
) -> None:
    """OffsetDelete (kafka-python's ``delete_group_offsets``; Kafka Connect resets a sink connector's
    partitions with it): the named partitions' committed offsets go, the others stay; an unknown group is
    GROUP_ID_NOT_FOUND; while a consumer subscribed to a topic is in the group, that topic's offsets are
    GROUP_SUBSCRIBED_TO_TOPIC and another topic's still go."""
    _differs(system, "offset-delete")
    bootstrap = servers[system]
    held, other = _topic("offsets-held"), _topic("offsets-other")
    _create(bootstrap, held, partitions=2)
    _create(bootstrap, other)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for topic, partition in ((held, 0), (held, 1), (other, 0)):
        for i in range(3):
            producer.produce(topic, b"%d" % i, partition=partition)
    assert producer.flush(60) == 0
    group = f"offsets-{uuid.uuid4().hex[:8]}"
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    committed = [TopicPartition(held, 0, 1), TopicPartition(held, 1, 2), TopicPartition(other, 0, 3)]
    committer.commit(offsets=committed, asynchronous=False)  # from outside the group's management
    committer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        held0, held1, other0 = (KafkaTopicPartition(t.topic, t.partition) for t in committed)
        assert admin.delete_group_offsets(group, [held0]) == {held0: kafka_errors.NoError}
        left = admin.list_group_offsets(group)[group]
        assert {tp: o.offset for tp, o in left.items()} == {held1: 2, other0: 3}
        with pytest.raises(kafka_errors.GroupIdNotFoundError):
            admin.delete_group_offsets(f"none-{uuid.uuid4().hex[:8]}", [held0])
        member.subscribe([held])
        deadline = time.monotonic() + 60
        while not member.assignment():  # the group is Stable with a consumer subscribed to ``held``
            assert time.monotonic() < deadline, "the consumer got no partitions in 60 s"
            member.poll(0.2)
        answers = admin.delete_group_offsets(group, [held1, other0])
        assert answers == {held1: kafka_errors.GroupSubscribedToTopicError, other0: kafka_errors.NoError}
        assert {tp: o.offset for tp, o in admin.list_group_offsets(group)[group].items()} == {held1: 2}
    finally:
        member.close()
        admin.close()


# -- kafka-python, aiokafka and kcat: each codec, the same assertions on both systems -----------------


def _kafka_python_round_trip(
    bootstrap: str, topic: str, codec: str, values: list[bytes]
) -> tuple[list[int], list[bytes]]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap.split(","), acks="all", enable_idempotence=True,
        compression_type=None if codec == "none" else codec, linger_ms=5,
    )  # fmt: skip
    try:
        offsets = [future.get(60).offset for future in [producer.send(topic, v, partition=0) for v in values]]
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), consumer_timeout_ms=20_000)
    try:
        consumer.assign([KafkaTopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        read = [message.value for _, message in zip(range(len(values)), consumer, strict=False)]
    finally:
        consumer.close()
    return offsets, read


def _aiokafka_round_trip(
    bootstrap: str, topic: str, codec: str, values: list[bytes]
) -> tuple[list[int], list[bytes]]:
    async def run() -> tuple[list[int], list[bytes]]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
            compression_type=None if codec == "none" else codec, linger_ms=5,
        )  # fmt: skip
        await producer.start()
        try:
            sent = [await producer.send(topic, v, partition=0) for v in values]
            offsets = [(await future).offset for future in sent]
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            partition = AIOTopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            read: list[bytes] = []
            async with asyncio.timeout(60):
                while len(read) < len(values):
                    batches = await consumer.getmany(partition, timeout_ms=500)
                    read += [m.value for m in batches.get(partition, [])]
        finally:
            await consumer.stop()
        return offsets, read

    return asyncio.run(run())


def _kcat_round_trip(
    bootstrap: str, topic: str, codec: str, values: list[bytes]
) -> tuple[list[int], list[bytes]]:
    lines = b"".join(v + b"\n" for v in values)
    subprocess.run(
        [kcat_path(), "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-z", codec,
         "-X", "enable.idempotence=true", "-X", "acks=all"],
        input=lines, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    done = subprocess.run(
        [kcat_path(), "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
         "-f", "%o %s\\n"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    rows = [line.split(b" ", 1) for line in done.stdout.splitlines()]
    return [int(offset) for offset, _ in rows], [value for _, value in rows]


ROUND_TRIPS = {
    "kafka-python": _kafka_python_round_trip,
    "aiokafka": _aiokafka_round_trip,
    "kcat": _kcat_round_trip,
}


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("client", sorted(ROUND_TRIPS))
def test_other_clients_produce_and_read_back_with_each_codec(
    servers: dict[str, str], system: str, client: str
) -> None:
    """kcat's producer is librdkafka's (its Debian build); kafka-python and aiokafka write their own
    batches, so each codec's framing is theirs."""
    _differs(system, f"{client}-codecs")
    bootstrap = servers[system]
    for codec in CODECS:
        topic = _topic(f"{client}-{codec}")
        _create(bootstrap, topic)
        values = [b"%s-%d-%s" % (codec.encode(), i, b"v" * (i % 40)) for i in range(200)]
        offsets, read = ROUND_TRIPS[client](bootstrap, topic, codec, values)
        assert offsets == list(range(200)), codec
        assert read == values, codec


# -- a Go client: franz-go ------------------------------------------------------------------------------

BALANCERS = ("range", "roundrobin", "sticky", "cooperative-sticky")


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_go_client_produces_and_reads_back_with_each_codec(
    servers: dict[str, str], go_client: Callable[..., dict[str, Any]], system: str
) -> None:
    _differs(system, "go-codecs")
    for codec in CODECS:
        observed = go_client("produce-consume", servers[system], _topic(f"go-{codec}"), codec)
        assert observed == {"dense_offsets_from_0": True, "read": 300, "read_as_written": True}, codec


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("balancer", BALANCERS)
def test_go_client_group_of_three_with_each_balancer_reads_once_and_rebalances_on_a_leave(
    servers: dict[str, str], go_client: Callable[..., dict[str, Any]], system: str, balancer: str
) -> None:
    _differs(system, f"go-group-{balancer}")
    observed = go_client("group", servers[system], _topic("go-group"), balancer)
    assert observed == {
        "first_600_read": True,
        "shares_of_three": [2, 2, 2],
        "after_a_leave_660_read": True,
        "two_hold_all_six": True,
        "read_twice": 0,
        "committed": [110] * 6,
        "group_state": "Empty",
    }


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_go_admin_client_configs_growth_and_refusals(
    servers: dict[str, str], go_client: Callable[..., dict[str, Any]], system: str
) -> None:
    _differs(system, "go-admin")
    observed = go_client("admin", servers[system], _topic("go-admin"))
    assert observed == {
        "retention_ms": "3600000 DYNAMIC_TOPIC_CONFIG",
        "partitions_after_growth": 4,
        "grow_to_3": "INVALID_PARTITIONS",
        "create_again": "TOPIC_ALREADY_EXISTS",
    }


# -- SCRAM users and SASL logins --------------------------------------------------------------------------


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_a_scram_user_made_by_the_admin_client_logs_in_and_a_wrong_password_is_refused(
    systems: Systems, system: str
) -> None:
    """AlterUserScramCredentials makes a user (anyone may on raftlog without ``--enforce-acls``; on Kafka
    whoever comes over PLAINTEXT is a super user); the user then produces over SASL with SCRAM-SHA-512 to
    a topic no ACL names, and the same user with a wrong password is refused
    with an authentication error before anything is sent."""
    _differs(system, "scram-login")
    bootstrap, sasl = systems.servers()[system], systems.sasl_servers()[system]
    topic = _topic("scram")
    _create(bootstrap, topic)
    user = f"u{uuid.uuid4().hex[:8]}"
    admin = _admin(bootstrap)
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"right"
    )
    futures = admin.alter_user_scram_credentials([upsert])
    assert futures[user].result(30) is None
    deadline = time.monotonic() + 30
    while True:  # Kafka's brokers learn a new credential from the metadata log a moment later
        try:
            asked = admin.describe_user_scram_credentials([user])  # held: a dropped dict cancels its futures
            found = asked[user].result(30)
            break
        except KafkaException:
            assert time.monotonic() < deadline, f"{user}'s credential was never described"
            time.sleep(0.2)
    assert [c.mechanism for c in found.scram_credential_infos] == [ScramMechanism.SCRAM_SHA_512]

    def login(password: str) -> tuple[list[int], list[KafkaError]]:
        errors: list[KafkaError] = []
        producer = Producer({
            "bootstrap.servers": sasl, "security.protocol": "sasl_plaintext",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
            "acks": "all", "message.timeout.ms": 15_000, "error_cb": errors.append,
        })  # fmt: skip
        offsets: list[int] = []

        def delivered(error: KafkaError | None, message: object) -> None:
            if error is None:
                offsets.append(message.offset())  # type: ignore[attr-defined]
            else:
                errors.append(error)

        producer.produce(topic, b"as " + user.encode(), partition=0, on_delivery=delivered)
        producer.flush(30)
        return offsets, errors

    deadline = time.monotonic() + 30
    while True:  # a user made a moment ago reaches every broker's credentials shortly after
        offsets, errors = login("right")
        if offsets or time.monotonic() > deadline:
            break
    assert offsets == [0], errors
    offsets, errors = login("wrong")
    assert offsets == [] and KafkaError._AUTHENTICATION in {e.code() for e in errors}
