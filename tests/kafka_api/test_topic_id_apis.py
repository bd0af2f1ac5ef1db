"""The APIs that name topics by id in Kafka 4.4 (KIP-516, KIP-848) against a real 3-node cluster: Produce
v13, DeleteTopics v6, OffsetCommit v10 and OffsetFetch v10. A topic's id is the one Metadata v12 answers;
an id no topic has, Kafka's zero id among them, gets Kafka 4.4's answer (read from its broker:
``KafkaApis.handleProduceRequest``, ``handleOffsetCommitRequest``, ``fetchOffsetsForGroup`` and
``ControllerApis.deleteTopics``)."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

from kafka_fixtures import RawKafka, http_client
from kio.schema.errors import ErrorCode
from waiting import wait_for

from kafka_api import wire
from partitions.names import broker_id
from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog_client.local_cluster import LocalCluster

PRODUCE, FETCH, OFFSET_COMMIT, OFFSET_FETCH, METADATA, FIND_COORDINATOR, DELETE_TOPICS = 0, 1, 8, 9, 3, 10, 20
NOWHERE = uuid.UUID("5f1e8a4c-0b2d-4e6f-9a1b-3c5d7e9f0a2b")  # no topic's id
ZERO = None  # Kafka's zero id, as kio writes and reads it


def _metadata(raw: RawKafka, name: str) -> Any:
    cls = wire.request_class(METADATA, 12)
    asked = wire.build(wire.sibling(cls, "MetadataRequestTopic"), topic_id=None, name=name)
    body = wire.build(cls, topics=(asked,), allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False)  # fmt: skip
    (topic,) = raw.call(METADATA, 12, body).topics
    return topic


def _created(cluster: LocalCluster, name: str, partitions: int = 1) -> tuple[uuid.UUID, dict[int, str]]:
    """A new topic's id and the Kafka address of each partition's leader, once each has one."""
    with http_client(cluster) as client:
        client.create_topic(name, partitions, 3)
    addresses = {broker_id(node): address for node, address in cluster.kafka.items()}
    raw = RawKafka(cluster.kafka["n1"])
    try:

        def led() -> Any:
            topic = _metadata(raw, name)
            ready = topic.error_code == ErrorCode.none and len(topic.partitions) == partitions
            return topic if ready and all(p.leader_id >= 0 for p in topic.partitions) else None

        topic = wait_for(led, f"a leader of each partition of {name}", 60)
    finally:
        raw.close()
    return topic.topic_id, {p.partition_index: addresses[p.leader_id] for p in topic.partitions}


def _produce_v13(raw: RawKafka, topics: list[tuple[uuid.UUID | None, list[int]]]) -> Any:
    cls = wire.request_class(PRODUCE, 13)
    batch = encode_batch(
        0, [ProducerRecord(b"k%d" % i, b"by-id", ()) for i in range(3)], 0, int(time.time() * 1000)
    )
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


def test_produce_v13_writes_to_the_topic_of_the_id_and_answers_an_unknown_id_per_partition(
    kafka_cluster: LocalCluster,
) -> None:
    """Kafka's ``handleProduceRequest``: a topic whose id the broker does not know (the zero id too) is
    UNKNOWN_TOPIC_ID for each of its partitions, the others written; the answer names topics by the id
    asked."""
    topic_id, leaders = _created(kafka_cluster, "ids-produce")
    raw = RawKafka(leaders[0])
    try:
        answer = _produce_v13(raw, [(topic_id, [0]), (NOWHERE, [0, 1]), (ZERO, [0])])
        written, unknown, zero = answer.responses
        assert written.topic_id == topic_id
        [part] = written.partition_responses
        assert (part.index, part.error_code, part.base_offset) == (0, ErrorCode.none, 0), part
        assert unknown.topic_id == NOWHERE
        assert [(p.index, p.error_code, p.base_offset) for p in unknown.partition_responses] == [
            (0, ErrorCode.unknown_topic_id, -1),
            (1, ErrorCode.unknown_topic_id, -1),
        ]
        assert zero.topic_id is ZERO
        assert [p.error_code for p in zero.partition_responses] == [ErrorCode.unknown_topic_id]
        read = _fetch_v13(raw, topic_id)  # what was written by id is read back by id: three records
        assert (read.error_code, read.high_watermark) == (ErrorCode.none, 3)
        assert all(b"k%d" % i in bytes(read.records) for i in range(3))
    finally:
        raw.close()


def _delete_v6(raw: RawKafka, topics: list[tuple[str | None, uuid.UUID | None]]) -> list[tuple[Any, ...]]:
    cls = wire.request_class(DELETE_TOPICS, 6)
    states = tuple(wire.build(wire.sibling(cls, "DeleteTopicState"), name=n, topic_id=i) for n, i in topics)
    body = wire.build(cls, topics=states, timeout=datetime.timedelta(seconds=30))
    answers = raw.call(DELETE_TOPICS, 6, body).responses
    return sorted(
        ((r.name, r.topic_id, r.error_code, r.error_message) for r in answers),
        key=lambda r: (str(r[0]), str(r[1])),
    )


def test_delete_topics_v6_deletes_by_id_and_by_name_and_refuses_as_kafka(kafka_cluster: LocalCluster) -> None:
    """Kafka's ``ControllerApis.deleteTopics``: each entry names a topic by name or by id; an id no topic has
    is UNKNOWN_TOPIC_ID; neither, both, a name or an id twice, and a name of a topic also given by id are
    INVALID_REQUEST with Kafka's words, and delete nothing; each answer names its topic and its id."""
    by_id, _ = _created(kafka_cluster, "ids-delete-a")
    by_name, _ = _created(kafka_cluster, "ids-delete-b")
    kept, _ = _created(kafka_cluster, "ids-delete-c")
    raw = RawKafka(kafka_cluster.kafka["n1"])
    try:
        answers = _delete_v6(raw, [
            (None, by_id), ("ids-delete-b", None), (None, NOWHERE), (None, None), ("ids-delete-c", kept),
            ("ids-delete-twice", None), ("ids-delete-twice", None),
        ])  # fmt: skip
        invalid, unknown = ErrorCode.invalid_request, ErrorCode.unknown_topic_id
        assert answers == sorted(
            [
                ("ids-delete-a", by_id, ErrorCode.none, None),
                ("ids-delete-b", by_name, ErrorCode.none, None),
                (None, NOWHERE, unknown, "This server does not host this topic ID."),
                (None, None, invalid, "Neither topic name nor id were specified."),
                ("ids-delete-c", kept, invalid, "You may not specify both topic name and topic id."),
                ("ids-delete-twice", None, invalid, "Duplicate topic name."),
            ],
            key=lambda r: (str(r[0]), str(r[1])),
        )
        # the id given twice, and a name whose topic is also given by id: neither deleted
        twice = _delete_v6(raw, [(None, kept), (None, kept)])
        assert twice == [(None, kept, invalid, "Duplicate topic id.")]
        both = _delete_v6(raw, [(None, kept), ("ids-delete-c", None)])
        assert both == [
            (
                "ids-delete-c",
                kept,
                invalid,
                "The provided topic name maps to an ID that was already supplied.",
            )
        ]

        def gone() -> bool:
            codes = [_metadata(raw, name).error_code for name in ("ids-delete-a", "ids-delete-b")]
            return codes == [ErrorCode.unknown_topic_or_partition] * 2

        wait_for(gone, "the topics deleted by id and by name gone", 60)
        assert _metadata(raw, "ids-delete-c").error_code == ErrorCode.none
        assert _delete_v6(raw, [(None, by_id)]) == [
            (None, by_id, unknown, "This server does not host this topic ID.")
        ]
        assert _delete_v6(raw, [(None, kept)]) == [("ids-delete-c", kept, ErrorCode.none, None)]
    finally:
        raw.close()


def _coordinator(cluster: LocalCluster, group: str) -> RawKafka:
    """A connection to the node coordinating ``group`` (FindCoordinator until one is named)."""
    raw = RawKafka(cluster.kafka["n1"])
    request = wire.build(wire.request_class(FIND_COORDINATOR, 4), key_type=0, coordinator_keys=(group,))

    def named() -> str | None:
        (found,) = raw.call(FIND_COORDINATOR, 4, request).coordinators
        return f"{found.host}:{found.port}" if found.error_code == ErrorCode.none else None

    try:
        address = wait_for(named, f"a coordinator of {group}", 60)
    finally:
        raw.close()
    return RawKafka(address)


def _commit_v10(raw: RawKafka, group: str, topics: list[tuple[uuid.UUID | None, dict[int, int]]]) -> Any:
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


def _fetch_offsets(
    raw: RawKafka, version: int, group: str, topics: list[tuple[Any, list[int]]] | None
) -> Any:
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
    (answer,) = raw.call(
        OFFSET_FETCH, version, wire.build(cls, groups=(group_entry,), require_stable=True)
    ).groups
    assert answer.error_code == ErrorCode.none, answer
    return answer.topics


def test_offsets_committed_by_topic_id_are_fetched_back_by_id_and_by_name(
    kafka_cluster: LocalCluster,
) -> None:
    """OffsetCommit v10 and OffsetFetch v10 name topics by id (KIP-848): Kafka's ``handleOffsetCommitRequest``
    and ``fetchOffsetsForGroup`` answer an id no topic has (the zero id too) UNKNOWN_TOPIC_ID in each
    partition, no offset, and the group's other topics go on; the offsets are the group's by name too."""
    topic_id, _ = _created(kafka_cluster, "ids-offsets", partitions=2)
    group = "ids-offsets-group"
    raw = _coordinator(kafka_cluster, group)
    try:
        committed = _commit_v10(raw, group, [(topic_id, {0: 5, 1: 7}), (NOWHERE, {0: 1}), (ZERO, {3: 1})])
        assert [
            (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in committed.topics
        ] == [
            (topic_id, [(0, ErrorCode.none), (1, ErrorCode.none)]),
            (NOWHERE, [(0, ErrorCode.unknown_topic_id)]),
            (ZERO, [(3, ErrorCode.unknown_topic_id)]),
        ]

        def offsets(topics: Any) -> list[tuple[Any, list[tuple[int, int, ErrorCode]]]]:
            return [
                (getattr(t, "topic_id", None) or getattr(t, "name", None),
                 [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
                for t in topics
            ]  # fmt: skip

        by_id = _fetch_offsets(raw, 10, group, [(topic_id, [0, 1]), (NOWHERE, [0, 2])])
        assert offsets(by_id) == [
            (topic_id, [(0, 5, ErrorCode.none), (1, 7, ErrorCode.none)]),
            (NOWHERE, [(0, -1, ErrorCode.unknown_topic_id), (2, -1, ErrorCode.unknown_topic_id)]),
        ]
        by_name = _fetch_offsets(raw, 9, group, [("ids-offsets", [0, 1])])
        assert offsets(by_name) == [("ids-offsets", [(0, 5, ErrorCode.none), (1, 7, ErrorCode.none)])]
        every = _fetch_offsets(raw, 10, group, None)  # every topic of the group, each with its id
        assert offsets(every) == [(topic_id, [(0, 5, ErrorCode.none), (1, 7, ErrorCode.none)])]
    finally:
        raw.close()
