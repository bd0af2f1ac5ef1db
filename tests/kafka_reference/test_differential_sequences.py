"""An idempotent producer's sequences against Apache Kafka: the same crafted batches to the partition's
leader on both systems get the same answers (a gap refused OUT_OF_ORDER_SEQUENCE_NUMBER and the batches
that fill it appended; a retry of one of the last batches answered its first offset; a new epoch
starting past 0 refused), and both logs end holding the same records."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from conftest import Systems
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode

from kafka_api import wire
from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog.storage.batch_reads import records_from

pytestmark = pytest.mark.slow

SYSTEMS = ("raftlog", "kafka")
PRODUCE, FETCH, METADATA, INIT_PRODUCER_ID = 0, 1, 3, 22


def _leader(bootstrap: str, topic: str) -> str:
    """The Kafka address of partition 0's leader, once Metadata names one."""
    raw = RawKafka(bootstrap.split(",")[0])
    try:
        cls = wire.request_class(METADATA, 12)
        entry = wire.build(wire.sibling(cls, "MetadataRequestTopic"), name=topic, topic_id=None)
        body = wire.build(cls, topics=(entry,), allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            answer = raw.call(METADATA, 12, body)
            brokers = {b.node_id: f"{b.host}:{b.port}" for b in answer.brokers}
            partitions = answer.topics[0].partitions
            if partitions and partitions[0].leader_id in brokers:
                return brokers[partitions[0].leader_id]
            assert time.monotonic() < deadline, f"{topic} has no leader after 60 s"
            time.sleep(0.2)  # polling Metadata until the topic's leader shows
    finally:
        raw.close()


def _init_producer(raw: RawKafka) -> tuple[int, int]:
    """An idempotent producer's id and epoch, asked again while the broker answers a retriable code (a
    Kafka broker is loading its producer id block)."""
    cls = wire.request_class(INIT_PRODUCER_ID, 4)
    body = wire.build(cls, transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                      producer_id=-1, producer_epoch=-1)  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        answer = raw.call(INIT_PRODUCER_ID, 4, body)
        if answer.error_code is ErrorCode.none:
            return answer.producer_id, answer.producer_epoch
        assert answer.error_code is ErrorCode.coordinator_load_in_progress and time.monotonic() < deadline
        time.sleep(0.2)  # as a client backs off before asking again


def _produce(raw: RawKafka, topic: str, producer: tuple[int, int], sequence: int, *values: bytes) -> Any:
    records = [ProducerRecord(v) for v in values]
    batch = encode_batch(
        0, records, 0, int(time.time() * 1000), producer[0], sequence, producer_epoch=producer[1]
    )
    cls = wire.request_class(PRODUCE, 9)
    part = wire.build(wire.sibling(cls, "PartitionProduceData"), index=0, records=batch)
    data = wire.build(wire.sibling(cls, "TopicProduceData"), name=topic, partition_data=(part,))
    body = wire.build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
                      topic_data=(data,))  # fmt: skip
    answer = raw.call(PRODUCE, 9, body).responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset if answer.error_code is ErrorCode.none else None


def _values(raw: RawKafka, topic: str) -> list[bytes | None]:
    cls = wire.request_class(FETCH, 12)
    part = wire.build(wire.sibling(cls, "FetchPartition"), partition=0, current_leader_epoch=-1,
                      fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                      partition_max_bytes=1 << 20)  # fmt: skip
    entry = wire.build(wire.sibling(cls, "FetchTopic"), topic=topic, partitions=(part,))
    body = wire.build(cls, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=100),
                      min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                      topics=(entry,), forgotten_topics_data=(), rack_id="")  # fmt: skip
    records = raw.call(FETCH, 12, body).responses[0].partitions[0].records
    return [r.value for r in records_from(bytes(records or b""), 0)]


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_a_sequence_gap_is_answered_as_kafka_answers_it(systems: Systems, system: str) -> None:
    bootstrap = systems.servers()[system]
    topic = f"sequences-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=30)[topic].result(60)
    raw = RawKafka(_leader(bootstrap, topic))
    try:
        producer = _init_producer(raw)
        answers = [
            _produce(raw, topic, producer, 0, b"s0", b"s1"),
            _produce(raw, topic, producer, 5, b"s5"),
            _produce(raw, topic, producer, 2, b"s2"),
            _produce(raw, topic, producer, 3, b"s3"),
            _produce(raw, topic, producer, 2, b"s2"),  # a retry of a batch the partition holds
            _produce(raw, topic, (producer[0], producer[1] + 1), 1, b"e1"),  # a new epoch past 0
            _produce(raw, topic, (producer[0], producer[1] + 1), 0, b"e0"),
        ]
        values = _values(raw, topic)
    finally:
        raw.close()
    assert answers == [
        (ErrorCode.none, 0),
        (ErrorCode.out_of_order_sequence_number, None),
        (ErrorCode.none, 2),
        (ErrorCode.none, 3),
        (ErrorCode.none, 2),
        (ErrorCode.out_of_order_sequence_number, None),
        (ErrorCode.none, 4),
    ]
    assert values == [b"s0", b"s1", b"s2", b"s3", b"e0"]
