"""The APIs that name topics by id in Kafka 4.4 (KIP-516, KIP-848), as scenarios a test runs against any
cluster's Kafka listeners: raftlog's (``test_topic_id_apis``) and Apache Kafka's beside raftlog's
(``tests/kafka_reference/test_differential_topic_ids``), with the same assertions. Produce v13,
DeleteTopics v6, OffsetCommit v10 and OffsetFetch v10: a topic's id is the one Metadata v12 answers; an id
no topic has, Kafka's zero id among them, gets Kafka 4.4's answer (its broker's
``KafkaApis.handleProduceRequest``, ``handleOffsetCommitRequest``, ``fetchOffsetsForGroup`` and
``ControllerApis.deleteTopics``). The order of an answer's topics and partitions is no part of it (Kafka
lists the unknown ids of an OffsetCommit first)."""

from __future__ import annotations

import datetime
import functools
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from waiting import wait_for

from kafka_api import wire
from raftlog.storage.batch import ProducerRecord, encode_batch

PRODUCE, FETCH, OFFSET_COMMIT, OFFSET_FETCH, METADATA, FIND_COORDINATOR = 0, 1, 8, 9, 3, 10
CREATE_TOPICS, DELETE_TOPICS = 19, 20
NOWHERE = uuid.UUID("5f1e8a4c-0b2d-4e6f-9a1b-3c5d7e9f0a2b")  # no topic's id
ZERO = None  # Kafka's zero id, as kio writes and reads it
INVALID, UNKNOWN_ID = ErrorCode.invalid_request, ErrorCode.unknown_topic_id
UNKNOWN_ID_WORDS = "This server does not host this topic ID."  # Kafka's words for UNKNOWN_TOPIC_ID
# what a group's coordinator answers while it is being found or loads: the client asks again
NOT_YET = {
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
}


def metadata_v12(raw: RawKafka, name: str) -> Any:
    cls = wire.request_class(METADATA, 12)
    asked = wire.build(wire.sibling(cls, "MetadataRequestTopic"), topic_id=None, name=name)
    body = wire.build(cls, topics=(asked,), allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False)  # fmt: skip
    return raw.call(METADATA, 12, body)


def _created(bootstrap: str, prefix: str, partitions: int = 1) -> tuple[str, uuid.UUID, dict[int, str]]:
    """A new topic (replication factor 3) named after ``prefix``: its name, its id and the Kafka address of
    each partition's leader, once every broker's Metadata names a leader of each (a broker resolves ids
    with its own metadata: one without the topic yet answers its id UNKNOWN_TOPIC_ID, Kafka's as
    raftlog's)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    raw = RawKafka(bootstrap.split(",")[0])
    try:
        cls = wire.request_class(CREATE_TOPICS, 7)
        topic = wire.build(wire.sibling(cls, "CreatableTopic"), name=name, num_partitions=partitions,
                           replication_factor=3, assignments=(), configs=())  # fmt: skip
        request = wire.build(
            cls, topics=(topic,), timeout=datetime.timedelta(seconds=30), validate_only=False
        )
        (made,) = raw.call(CREATE_TOPICS, 7, request).topics
        assert made.error_code == ErrorCode.none, made

        answer, found = wait_for(
            lambda: _led(raw, name, partitions), f"a leader of each partition of {name}", 60
        )
    finally:
        raw.close()
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in answer.brokers}
    for address in brokers.values():
        broker = RawKafka(address)
        try:
            wait_for(functools.partial(_led, broker, name, partitions), f"{address}'s leaders of {name}", 60)
        finally:
            broker.close()
    return name, found.topic_id, {p.partition_index: brokers[p.leader_id] for p in found.partitions}


def _led(raw: RawKafka, name: str, partitions: int) -> tuple[Any, Any] | None:
    """The Metadata answer and its topic once it names a leader of each partition."""
    answer = metadata_v12(raw, name)
    (found,) = answer.topics
    ready = found.error_code == ErrorCode.none and len(found.partitions) == partitions
    return (answer, found) if ready and all(p.leader_id >= 0 for p in found.partitions) else None


def _in_any_order(topics: Iterable[tuple[Any, list[Any]]]) -> dict[Any, list[Any]]:
    """An answer's topics by name or id, each one's partitions sorted (a topic twice fails)."""
    found: dict[Any, list[Any]] = {}
    for key, partitions in topics:
        assert key not in found, f"{key} answered twice"
        found[key] = sorted(partitions)
    return found


# -- Produce v13 ------------------------------------------------------------------------------------


def produce_v13(raw: RawKafka, topics: list[tuple[uuid.UUID | None, list[int]]]) -> Any:
    cls = wire.request_class(PRODUCE, 13)
    records = [ProducerRecord(b"k%d" % i, b"by-id", ()) for i in range(3)]
    batch = encode_batch(0, records, 0, int(time.time() * 1000))
    data = tuple(
        wire.build(
            wire.sibling(cls, "TopicProduceData"),
            topic_id=topic_id,
            partition_data=tuple(
                wire.build(wire.sibling(cls, "PartitionProduceData"), index=p, records=batch)
                for p in partitions
            ),
        )
        for topic_id, partitions in topics
    )
    body = wire.build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
                      topic_data=data)  # fmt: skip
    return raw.call(PRODUCE, 13, body)


def _fetch_v13(raw: RawKafka, topic_id: uuid.UUID) -> Any:
    cls = wire.request_class(FETCH, 13)
    partition = wire.build(wire.sibling(cls, "FetchPartition"), partition=0, current_leader_epoch=-1,
                           fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                           partition_max_bytes=1 << 20)  # fmt: skip
    topic = wire.build(wire.sibling(cls, "FetchTopic"), topic_id=topic_id, partitions=(partition,))
    body = wire.build(cls, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
                      max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, topics=(topic,),
                      forgotten_topics_data=(), rack_id="")  # fmt: skip
    (answer,) = raw.call(FETCH, 13, body).responses
    return answer.partitions[0]


def produces_by_id(bootstrap: str) -> None:
    """A topic whose id the broker does not know (the zero id too) is UNKNOWN_TOPIC_ID for each of its
    partitions, nothing of it written; the known one's records are written and read back by id; the answer
    names each topic by the id asked."""
    _, topic_id, leaders = _created(bootstrap, "ids-produce")
    raw = RawKafka(leaders[0])
    try:
        answer = produce_v13(raw, [(topic_id, [0]), (NOWHERE, [0, 1]), (ZERO, [0])])
        assert _in_any_order(
            (t.topic_id, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
            for t in answer.responses
        ) == {
            topic_id: [(0, ErrorCode.none, 0)],
            NOWHERE: [(0, UNKNOWN_ID, -1), (1, UNKNOWN_ID, -1)],
            ZERO: [(0, UNKNOWN_ID, -1)],
        }
        read = _fetch_v13(raw, topic_id)  # what was written by id is read back by id: three records
        assert (read.error_code, read.high_watermark) == (ErrorCode.none, 3)
        assert all(b"k%d" % i in bytes(read.records) for i in range(3))
    finally:
        raw.close()


# -- DeleteTopics v6 --------------------------------------------------------------------------------


def delete_v6(raw: RawKafka, topics: list[tuple[str | None, uuid.UUID | None]]) -> list[tuple[Any, ...]]:
    """Each answer's name, id, code and words, in one order (Kafka shuffles its answers)."""
    cls = wire.request_class(DELETE_TOPICS, 6)
    states = tuple(wire.build(wire.sibling(cls, "DeleteTopicState"), name=n, topic_id=i) for n, i in topics)
    body = wire.build(cls, topics=states, timeout=datetime.timedelta(seconds=30))
    answers = raw.call(DELETE_TOPICS, 6, body).responses
    return _sorted([(r.name, r.topic_id, r.error_code, r.error_message) for r in answers])


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda row: (str(row[0]), str(row[1])))


def deletes_by_id_and_by_name(bootstrap: str) -> None:
    """Each entry names a topic by name or by id; an id no topic has is UNKNOWN_TOPIC_ID; neither, both, a
    name or an id twice, and a name of a topic also given by id are INVALID_REQUEST with Kafka's words, and
    delete nothing; each answer names its topic and its id."""
    by_id_name, by_id, _ = _created(bootstrap, "ids-delete-a")
    by_name, by_name_id, _ = _created(bootstrap, "ids-delete-b")
    kept_name, kept, _ = _created(bootstrap, "ids-delete-c")
    twice = f"ids-delete-twice-{uuid.uuid4().hex[:8]}"
    raw = RawKafka(bootstrap.split(",")[0])
    try:
        answers = delete_v6(raw, [
            (None, by_id), (by_name, None), (None, NOWHERE), (None, None), (kept_name, kept), (twice, None),
            (twice, None),
        ])  # fmt: skip
        assert answers == _sorted([
            (by_id_name, by_id, ErrorCode.none, None),
            (by_name, by_name_id, ErrorCode.none, None),
            (None, NOWHERE, UNKNOWN_ID, UNKNOWN_ID_WORDS),
            (None, None, INVALID, "Neither topic name nor id were specified."),
            (kept_name, kept, INVALID, "You may not specify both topic name and topic id."),
            (twice, None, INVALID, "Duplicate topic name."),
        ])  # fmt: skip
        # the id given twice, and a name whose topic is also given by id: neither deleted
        assert delete_v6(raw, [(None, kept), (None, kept)]) == [(None, kept, INVALID, "Duplicate topic id.")]
        assert delete_v6(raw, [(None, kept), (kept_name, None)]) == [
            (kept_name, kept, INVALID, "The provided topic name maps to an ID that was already supplied.")
        ]

        def gone() -> bool:
            codes = [metadata_v12(raw, name).topics[0].error_code for name in (by_id_name, by_name)]
            return codes == [ErrorCode.unknown_topic_or_partition] * 2

        wait_for(gone, "the topics deleted by id and by name gone", 60)
        assert metadata_v12(raw, kept_name).topics[0].error_code == ErrorCode.none
        assert delete_v6(raw, [(None, by_id)]) == [(None, by_id, UNKNOWN_ID, UNKNOWN_ID_WORDS)]
        assert delete_v6(raw, [(None, kept)]) == [(kept_name, kept, ErrorCode.none, None)]
    finally:
        raw.close()


# -- OffsetCommit v10, OffsetFetch v10 --------------------------------------------------------------


def _coordinator(bootstrap: str, group: str) -> RawKafka:
    """A connection to the node coordinating ``group`` (FindCoordinator until one is named)."""
    raw = RawKafka(bootstrap.split(",")[0])
    request = wire.build(wire.request_class(FIND_COORDINATOR, 4), key_type=0, coordinator_keys=(group,))

    def named() -> str | None:
        (found,) = raw.call(FIND_COORDINATOR, 4, request).coordinators
        return f"{found.host}:{found.port}" if found.error_code == ErrorCode.none else None

    try:
        address = wait_for(named, f"a coordinator of {group}", 60)
    finally:
        raw.close()
    return RawKafka(address)


class AtCoordinator:
    """Requests to the node coordinating ``group``, as a Kafka client sends them: an answer that the group
    is coordinated elsewhere or still loading (``NOT_YET``; its partition's leader moved, say by the leader
    balancer) finds the coordinator again and asks again, for up to 60 s."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.bootstrap, self.group = bootstrap, group
        self.raw = _coordinator(bootstrap, group)

    def ask(self, call: Callable[[RawKafka], Any | None], what: str) -> Any:
        """``call``'s answer from the coordinator; ``call`` returns None for an answer of ``NOT_YET``."""

        def answered() -> tuple[Any] | None:
            answer = call(self.raw)
            if answer is None:
                self.raw.close()
                self.raw = _coordinator(self.bootstrap, self.group)
                return None
            return (answer,)  # a tuple: an answer that is empty is an answer all the same

        (answer,) = wait_for(answered, what, 60, every_s=0.5)
        return answer

    def close(self) -> None:
        self.raw.close()


def commit_v10(raw: RawKafka, group: str, topics: list[tuple[uuid.UUID | None, dict[int, int]]]) -> Any:
    cls = wire.request_class(OFFSET_COMMIT, 10)
    entries = tuple(
        wire.build(
            wire.sibling(cls, "OffsetCommitRequestTopic"),
            topic_id=topic_id,
            partitions=tuple(
                wire.build(
                    wire.sibling(cls, "OffsetCommitRequestPartition"),
                    partition_index=p,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata="",
                )
                for p, offset in offsets.items()
            ),
        )
        for topic_id, offsets in topics
    )
    body = wire.build(cls, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                      group_instance_id=None, topics=entries)  # fmt: skip
    return raw.call(OFFSET_COMMIT, 10, body)


def fetch_offsets(raw: RawKafka, version: int, group: str, topics: list[tuple[Any, list[int]]] | None) -> Any:
    """The group's topics' offsets from the node ``raw`` reaches: by name (v9) or by id (v10), every
    topic for None (``AtCoordinator.ask`` with ``offsets_fetched`` asks until the coordinator answers)."""
    answer = offsets_fetched(raw, version, group, topics)
    assert answer is not None, f"{group}: the node asked does not coordinate it now"
    return answer


def offsets_fetched(
    raw: RawKafka, version: int, group: str, topics: list[tuple[Any, list[int]]] | None
) -> Any:
    """One OffsetFetch: None if the group's answer is ``NOT_YET``."""
    cls = wire.request_class(OFFSET_FETCH, version)
    entry = wire.sibling(cls, "OffsetFetchRequestTopics")
    key = "topic_id" if version >= 10 else "name"
    asked = (
        None
        if topics is None
        else tuple(wire.build(entry, **{key: t}, partition_indexes=tuple(p)) for t, p in topics)
    )
    group_entry = wire.build(wire.sibling(cls, "OffsetFetchRequestGroup"), group_id=group, member_id=None,
                             member_epoch=-1, topics=asked)  # fmt: skip
    body = wire.build(cls, groups=(group_entry,), require_stable=True)
    (answer,) = raw.call(OFFSET_FETCH, version, body).groups
    if answer.error_code in NOT_YET:
        return None
    assert answer.error_code == ErrorCode.none, answer
    return _in_any_order(
        (getattr(t, "topic_id", None) or getattr(t, "name", None),
         [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
          for p in t.partitions])
        for t in answer.topics
    )  # fmt: skip


def commits_and_fetches_offsets_by_id(bootstrap: str) -> None:
    """An id no topic has (the zero id too) is UNKNOWN_TOPIC_ID in each partition of the commit, and of the
    fetch, no offset; a partition the topic has not UNKNOWN_TOPIC_OR_PARTITION; the group's other topics go
    on; offsets committed by id are the group's by name too, and every topic of the group is answered with
    its id."""
    name, topic_id, _ = _created(bootstrap, "ids-offsets", partitions=2)
    group = f"ids-offsets-{uuid.uuid4().hex[:8]}"
    coordinator = AtCoordinator(bootstrap, group)
    try:

        def committed(raw: RawKafka) -> dict[Any, list[Any]] | None:
            answer = commit_v10(
                raw, group, [(topic_id, {0: 5, 1: 7, 9: 1}), (NOWHERE, {0: 1}), (ZERO, {3: 1})]
            )
            codes = _in_any_order(
                (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics
            )
            return None if {code for _, code in codes[topic_id]} & NOT_YET else codes

        assert coordinator.ask(committed, f"{group}'s commit") == {
            topic_id: [(0, ErrorCode.none), (1, ErrorCode.none), (9, ErrorCode.unknown_topic_or_partition)],
            NOWHERE: [(0, UNKNOWN_ID)],
            ZERO: [(3, UNKNOWN_ID)],
        }
        offsets = [(0, 5, -1, "", ErrorCode.none), (1, 7, -1, "", ErrorCode.none)]

        def fetched(version: int, topics: list[tuple[Any, list[int]]] | None) -> Any:
            asked = functools.partial(offsets_fetched, version=version, group=group, topics=topics)
            return coordinator.ask(asked, f"{group}'s offsets (OffsetFetch v{version})")

        assert fetched(10, [(topic_id, [0, 1]), (NOWHERE, [0, 2])]) == {
            topic_id: offsets,
            NOWHERE: [(0, -1, -1, "", UNKNOWN_ID), (2, -1, -1, "", UNKNOWN_ID)],
        }
        assert fetched(9, [(name, [0, 1])]) == {name: offsets}
        assert fetched(10, None) == {topic_id: offsets}  # every topic, with its id
    finally:
        coordinator.close()
