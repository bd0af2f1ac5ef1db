"""Leader epochs over Kafka's wire (KIP-101, KIP-320) against a real 3-node cluster: Metadata's epochs,
OffsetForLeaderEpoch's answers and refusals, the epoch checks of Fetch and ListOffsets, and a librdkafka
consumer validating its position with OffsetForLeaderEpoch after a SIGKILL of the partition's leader, then
reading on."""

from __future__ import annotations

import datetime
import logging
import re
import struct
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka_fixtures import RawKafka, http_client
from kio.schema.errors import ErrorCode

from kafka_api import wire
from raftlog_client.local_cluster import LocalCluster
from tests.waiting import wait_for

METADATA, FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 3, 1, 2, 23
EARLIEST, LATEST = -2, -1
# librdkafka 2.16's Metadata v12 for all topics, correlation id 3 (tests/kafka_api/test_kafka_wire.py)
LIBRDKAFKA_ALL_TOPICS_V12 = bytes.fromhex("0003000c00000003000772646b61666b610000000000000000")


def metadata(raw: RawKafka, topic: str) -> Any:
    cls = wire.request_class(METADATA, 8)
    body = wire.build(
        cls,
        topics=(wire.build(wire.sibling(cls, "MetadataRequestTopic"), name=topic),),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    return raw.call(METADATA, 8, body).topics[0].partitions[0]


def leader_and_epoch(cluster: LocalCluster, topic: str, asked: str) -> tuple[str, int] | None:
    raw = RawKafka(cluster.kafka[asked])
    try:
        partition = metadata(raw, topic)
    finally:
        raw.close()
    if partition.error_code != ErrorCode.none or partition.leader_id < 0:
        return None
    return f"n{partition.leader_id}", int(partition.leader_epoch)


def offset_for_leader_epoch(raw: RawKafka, version: int, topic: str, epoch: int, current: int) -> Any:
    cls = wire.request_class(OFFSET_FOR_LEADER_EPOCH, version)
    partition = wire.build(
        wire.sibling(cls, "OffsetForLeaderPartition"),
        partition=0,
        current_leader_epoch=current,
        leader_epoch=epoch,
    )
    topic_entry = wire.build(wire.sibling(cls, "OffsetForLeaderTopic"), topic=topic, partitions=(partition,))
    answer = raw.call(OFFSET_FOR_LEADER_EPOCH, version, wire.build(cls, replica_id=-1, topics=(topic_entry,)))
    return answer.topics[0].partitions[0]


def list_offsets(raw: RawKafka, topic: str, timestamp: int, current: int) -> Any:
    cls = wire.request_class(LIST_OFFSETS, 6)
    partition = wire.build(
        wire.sibling(cls, "ListOffsetsPartition"),
        partition_index=0,
        current_leader_epoch=current,
        timestamp=timestamp,
    )
    topic_entry = wire.build(wire.sibling(cls, "ListOffsetsTopic"), name=topic, partitions=(partition,))
    body = wire.build(cls, replica_id=-1, isolation_level=0, topics=(topic_entry,))
    return raw.call(LIST_OFFSETS, 6, body).topics[0].partitions[0]


def fetch(raw: RawKafka, topic: str, offset: int, current: int) -> Any:
    cls = wire.request_class(FETCH, 12)
    partition = wire.build(
        wire.sibling(cls, "FetchPartition"),
        partition=0,
        current_leader_epoch=current,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    topic_entry = wire.build(wire.sibling(cls, "FetchTopic"), topic=topic, partitions=(partition,))
    body = wire.build(
        cls,
        cluster_id=None,
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(topic_entry,),
        forgotten_topics_data=(),
        rack_id="",
    )
    return raw.call(FETCH, 12, body).responses[0].partitions[0]


def produce(cluster: LocalCluster, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True,
                         "message.timeout.ms": 120_000})  # fmt: skip
    failed: list[Any] = []
    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=lambda e, m: e and failed.append(e))
    assert producer.flush(150) == 0
    assert failed == []


def test_offset_for_leader_epoch_answers_and_refuses_as_kafka(kafka_cluster: LocalCluster) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("epochs", 1, 3)
    produce(kafka_cluster, "epochs", [b"v%d" % i for i in range(10)])
    leader, epoch = wait_for(lambda: leader_and_epoch(kafka_cluster, "epochs", "n1"), "a leader of epochs/0")
    assert epoch >= 1  # a Raft term: the first election's is 1
    assert all(
        leader_and_epoch(kafka_cluster, "epochs", node) == (leader, epoch) for node in kafka_cluster.kafka
    )
    other = next(node for node in sorted(kafka_cluster.kafka) if node != leader)
    raw = RawKafka(kafka_cluster.kafka[leader])
    try:
        for version in (2, 3, 4):
            current = offset_for_leader_epoch(raw, version, "epochs", epoch, epoch)
            assert (current.error_code, current.leader_epoch, current.end_offset) == (
                ErrorCode.none,
                epoch,
                10,
            )
            above = offset_for_leader_epoch(raw, version, "epochs", epoch + 5, -1)
            assert (above.error_code, above.leader_epoch, above.end_offset) == (ErrorCode.none, -1, -1)
            below = offset_for_leader_epoch(raw, version, "epochs", epoch - 1, -1)  # before the first batch
            assert (below.error_code, below.leader_epoch, below.end_offset) == (ErrorCode.none, epoch - 1, 0)
            fenced = offset_for_leader_epoch(raw, version, "epochs", epoch, epoch - 1)
            assert (fenced.error_code, fenced.end_offset) == (ErrorCode.fenced_leader_epoch, -1)
            unknown = offset_for_leader_epoch(raw, version, "epochs", epoch, epoch + 1)
            assert unknown.error_code == ErrorCode.unknown_leader_epoch
            missing = offset_for_leader_epoch(raw, version, "no-such-topic", epoch, -1)
            assert missing.error_code == ErrorCode.unknown_topic_or_partition

        earliest = list_offsets(raw, "epochs", EARLIEST, epoch)
        latest = list_offsets(raw, "epochs", LATEST, epoch)
        assert (earliest.error_code, earliest.offset, earliest.leader_epoch) == (ErrorCode.none, 0, epoch)
        assert (latest.error_code, latest.offset, latest.leader_epoch) == (ErrorCode.none, 10, epoch)
        assert list_offsets(raw, "epochs", LATEST, epoch - 1).error_code == ErrorCode.fenced_leader_epoch
        assert list_offsets(raw, "epochs", LATEST, epoch + 1).error_code == ErrorCode.unknown_leader_epoch

        read = fetch(raw, "epochs", 0, epoch)
        assert read.error_code == ErrorCode.none and read.records and read.high_watermark == 10
        stale = fetch(raw, "epochs", 0, epoch - 1)
        assert stale.error_code == ErrorCode.fenced_leader_epoch and not stale.records
        assert fetch(raw, "epochs", 0, epoch + 1).error_code == ErrorCode.unknown_leader_epoch
    finally:
        raw.close()
    follower = RawKafka(kafka_cluster.kafka[other])
    try:
        elsewhere = offset_for_leader_epoch(follower, 4, "epochs", epoch, epoch)
        assert elsewhere.error_code == ErrorCode.not_leader_or_follower
        assert offset_for_leader_epoch(follower, 4, "epochs", epoch, epoch + 1).error_code == (
            ErrorCode.unknown_leader_epoch  # the follower's own epoch is checked first, as Kafka's
        )
    finally:
        follower.close()


def metadata_at(raw: RawKafka, version: int, topics: list[tuple[str | None, uuid.UUID | None]] | None) -> Any:
    cls = wire.request_class(METADATA, version)
    entry = wire.sibling(cls, "MetadataRequestTopic")
    asked = None if topics is None else tuple(wire.build(entry, name=n, topic_id=i) for n, i in topics)
    body = wire.build(
        cls,
        topics=asked,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    return raw.call(METADATA, version, body)


def test_metadata_v9_to_v13_answers_epochs_topic_ids_and_librdkafkas_all_topics(
    kafka_cluster: LocalCluster,
) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("epochs-ids", 2, 3)
        client.create_topic("epochs-gone", 1, 3)
    produce(kafka_cluster, "epochs-ids", [b"x"])
    wait_for(lambda: leader_and_epoch(kafka_cluster, "epochs-ids", "n1"), "a leader of epochs-ids/0")
    ids = set()
    for address in kafka_cluster.kafka.values():
        raw = RawKafka(address)
        try:
            for version in (9, 10, 11, 12, 13):
                answer = metadata_at(raw, version, [("epochs-ids", None), ("no-such-topic", None)])
                found, missing = answer.topics
                assert found.error_code == ErrorCode.none and len(found.partitions) == 2
                assert all(p.leader_epoch >= 1 for p in found.partitions if p.leader_id >= 0)
                assert missing.error_code == ErrorCode.unknown_topic_or_partition
                if version >= 10:
                    assert found.topic_id not in (None, uuid.UUID(int=0), uuid.UUID(int=1))
                    assert missing.topic_id in (None, uuid.UUID(int=0))  # Kafka's zero: no id
                    ids.add(found.topic_id)
                if version >= 13:
                    assert answer.error_code == ErrorCode.none
        finally:
            raw.close()
    (topic_id,) = ids  # every node answers the same id at every version
    raw = RawKafka(kafka_cluster.kafka["n2"])
    try:
        by_id, unknown = metadata_at(raw, 12, [(None, topic_id), (None, uuid.UUID(int=7))]).topics
        assert (by_id.error_code, by_id.name, by_id.topic_id) == (ErrorCode.none, "epochs-ids", topic_id)
        assert (unknown.error_code, unknown.name) == (ErrorCode.unknown_topic_id, None)
        # what librdkafka sends for all topics (four bytes where the null array's one belongs), answered
        raw.send_raw(struct.pack(">i", len(LIBRDKAFKA_ALL_TOPICS_V12)) + LIBRDKAFKA_ALL_TOPICS_V12)
        raw.correlation_id = 3  # the frame's own
        every = raw.answer(METADATA, 12)
        assert {"epochs-ids", "epochs-gone"} <= {t.name for t in every.topics}
        gone = next(t.topic_id for t in every.topics if t.name == "epochs-gone")
        assert gone not in (topic_id, uuid.UUID(int=0))
    finally:
        raw.close()
    # librdkafka's own all-topics request through its AdminClient, then a name deleted and created again:
    # another topic, with another id
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    assert {"epochs-ids", "epochs-gone"} <= set(admin.list_topics(timeout=30).topics)
    admin.delete_topics(["epochs-gone"])["epochs-gone"].result(timeout=60)
    wait_for(lambda: "epochs-gone" not in admin.list_topics(timeout=30).topics, "epochs-gone deleted")
    with http_client(kafka_cluster) as client:
        client.create_topic("epochs-gone", 1, 3)

    def again() -> uuid.UUID | None:
        raw = RawKafka(kafka_cluster.kafka["n1"])
        try:
            (topic,) = metadata_at(raw, 12, [("epochs-gone", None)]).topics
        finally:
            raw.close()
        return topic.topic_id if topic.error_code == ErrorCode.none and topic.topic_id != gone else None

    wait_for(again, "epochs-gone created again, with a new id")
    raw = RawKafka(kafka_cluster.kafka["n3"])
    try:
        (old,) = metadata_at(raw, 12, [(None, gone)]).topics
        assert old.error_code == ErrorCode.unknown_topic_id
    finally:
        raw.close()


class LibrdkafkaLog(logging.Handler):
    """librdkafka's debug lines, as confluent-kafka hands them to a ``logger`` while the client polls."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def matching(self, pattern: str) -> list[re.Match[str]]:
        return [m for m in (re.search(pattern, line) for line in list(self.lines)) if m is not None]


def test_a_librdkafka_consumer_validates_its_position_after_a_leader_kill(
    kafka_cluster: LocalCluster,
) -> None:
    """librdkafka trusts leader epochs only from Metadata v9 on (``rd_kafka_has_reliable_leader_epochs``):
    served v9+, a consumer that sees the epoch rise after its leader is SIGKILLed asks the new leader
    where the epoch of the last record it read ends (OffsetForLeaderEpoch), is told its own position, and
    reads on from there: nothing lost, nothing read twice."""
    topic = "epochs-failover"
    with http_client(kafka_cluster) as client:
        client.create_topic(topic, 1, 3)
    produce(kafka_cluster, topic, [b"%d" % i for i in range(300)])
    leader, first_epoch = wait_for(lambda: leader_and_epoch(kafka_cluster, topic, "n1"), "a leader")
    log = LibrdkafkaLog()
    logger = logging.getLogger(f"librdkafka.{topic}")
    logger.addHandler(log)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    consumer = Consumer({
        "bootstrap.servers": kafka_cluster.bootstrap_servers,
        "group.id": "epochs-reader",
        "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 500,
        "debug": "fetch,metadata",
    }, logger=logger)  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    read: list[tuple[int, bytes, int]] = []

    def consume_until(count: int) -> None:
        deadline = time.monotonic() + 120
        while len(read) < count and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                assert message.error() is None, message.error()
                read.append((message.offset(), message.value(), message.leader_epoch()))
        assert len(read) >= count, f"{len(read)} of {count} records read"

    try:
        consume_until(300)
        assert {epoch for _, _, epoch in read} == {first_epoch}  # the stored batches' epoch
        kafka_cluster.control("stop", leader, kill=True)
        survivor = next(node for node in sorted(kafka_cluster.kafka) if node != leader)

        def moved() -> tuple[str, int] | None:
            found = leader_and_epoch(kafka_cluster, topic, survivor)
            return found if found is not None and found[0] != leader else None

        _, new_epoch = wait_for(moved, "a new leader")
        assert new_epoch > first_epoch
        produce(kafka_cluster, topic, [b"%d" % i for i in range(300, 600)])
        consume_until(600)
        assert [offset for offset, _, _ in read] == list(range(600)), "no record lost or read twice"
        assert [value for _, value, _ in read] == [b"%d" % i for i in range(600)]
        assert all(epoch >= new_epoch for _, _, epoch in read[300:])  # written in the new leader's term

        # the validation, as librdkafka logs it: its position 300 in the first epoch, asked of a new
        # leader, and the answer that the first epoch ends at 300. Of whichever node led when it asked:
        # the leader balancer may move the leadership on right after the election (a run saw n2 killed,
        # n1 elected in term 2 and n1 hand it to n3, the balancer's choice, 41 ms later)
        asked = log.matching(
            rf"/(\d+): {topic} \[0\]: querying broker for epoch validation of offset 300 "
            rf"\(leader epoch {first_epoch}"
        )
        assert asked, "librdkafka asked a new leader for the epoch of its position"
        assert all(m[1] != leader[1:] for m in asked), f"asked of the killed leader {leader}"
        validated = log.matching(
            rf"/(\d+): {topic} \[0\]: offset and epoch validation succeeded: "
            rf"broker end offset (\d+) \(offset leader epoch (\d+)\)"
        )
        assert [(int(m[2]), int(m[3])) for m in validated] == [(300, first_epoch)]
        assert all(m[1] != leader[1:] for m in validated)
        # no validation refused or seen as a truncation (librdkafka may also skip validating a later
        # position while a metadata refresh has not yet given it the leader's epoch: seen when the machine
        # is loaded, and it loses nothing, as asserted above)
        assert not log.matching(r"not supported|[Tt]runcation")
    finally:
        consumer.close()
        logger.removeHandler(log)
        kafka_cluster.control("start", leader)


def fetch_v17(
    raw: RawKafka,
    parts: list[tuple[uuid.UUID, int, int]],
    session_id: int,
    epoch: int,
    forgotten: tuple[Any, ...] = (),
) -> Any:
    """Fetch v17 (Kafka 4.1's consumers): topics by id, ``parts`` as (topic id, partition, offset)."""
    cls = wire.request_class(FETCH, 17)
    topics = tuple(
        wire.build(
            wire.sibling(cls, "FetchTopic"),
            topic_id=topic_id,
            partitions=(
                wire.build(
                    wire.sibling(cls, "FetchPartition"),
                    partition=partition,
                    fetch_offset=offset,
                    partition_max_bytes=1 << 20,
                ),
            ),
        )
        for topic_id, partition, offset in parts
    )
    body = wire.build(
        cls,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=topics,
        forgotten_topics_data=forgotten,
        rack_id="",
    )
    return raw.call(FETCH, 17, body)


def test_fetch_v17_names_topics_by_id_and_a_session_answers_only_what_changed(
    kafka_cluster: LocalCluster,
) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("epochs-session", 1, 3)
    produce(kafka_cluster, "epochs-session", [b"a", b"b", b"c"])
    leader, _ = wait_for(lambda: leader_and_epoch(kafka_cluster, "epochs-session", "n1"), "a leader")
    raw = RawKafka(kafka_cluster.kafka[leader])
    try:
        topic_id = metadata_at(raw, 12, [("epochs-session", None)]).topics[0].topic_id
        opened = fetch_v17(raw, [(topic_id, 0, 0)], 0, 0)  # a full fetch opening a session
        assert opened.error_code == ErrorCode.none and opened.session_id != 0
        [topic] = opened.responses
        assert topic.topic_id == topic_id
        assert topic.partitions[0].records and topic.partitions[0].high_watermark == 3
        session = opened.session_id
        # the new offset told, nothing new at it: an answer of no partitions
        idle = fetch_v17(raw, [(topic_id, 0, 3)], session, 1)
        assert (idle.error_code, idle.session_id, idle.responses) == (ErrorCode.none, session, ())
        produce(kafka_cluster, "epochs-session", [b"d"])
        news = fetch_v17(raw, [], session, 2)  # names nothing: the session's partitions are read
        [topic] = news.responses
        assert topic.partitions[0].records and topic.partitions[0].high_watermark == 4
        stale = fetch_v17(raw, [], session, 2)  # the same epoch again
        assert (stale.error_code, stale.responses) == (ErrorCode.invalid_fetch_session_epoch, ())
        unknown = fetch_v17(raw, [], session + 1, 1)
        assert unknown.error_code == ErrorCode.fetch_session_id_not_found
        assert fetch_v17(raw, [], 0, -1).responses == ()  # sessionless, of nothing: nothing
        nowhere = uuid.uuid4()
        [missing] = fetch_v17(raw, [(nowhere, 0, 0)], session, -1).responses  # closes the session
        assert missing.topic_id == nowhere
        assert missing.partitions[0].error_code == ErrorCode.unknown_topic_id
        assert fetch_v17(raw, [], session, 3).error_code == ErrorCode.fetch_session_id_not_found
    finally:
        raw.close()
