"""No Kafka client writes into the topics the cluster keeps for itself (``partitions.names.INTERNAL_TOPICS``:
the groups', transactions' and schemas' own, which hold their services' commands): every node answers a
produce to one INVALID_TOPIC_EXCEPTION, as Kafka answers a client's append to ``__consumer_offsets``, and
nothing is written. The rule is the one write's (``admission.check_topic``), so the HTTP door refuses the
same (``tests/api/test_batch_produce.py``). Before it, a plain Kafka producer's record was appended to
``__consumer_groups`` at offset 0, among the group commands."""

from __future__ import annotations

import datetime
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode

from kafka_api import wire
from partitions.names import GROUPS_TOPIC, INTERNAL_TOPICS
from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog_client.local_cluster import LocalCluster

PRODUCE = 0


def _produce(raw: RawKafka, topic: str) -> ErrorCode:
    cls = wire.request_class(PRODUCE, 9)
    batch = encode_batch(0, [ProducerRecord(b"garbage", b"key", ())], 0, int(time.time() * 1000))
    partition = wire.build(wire.sibling(cls, "PartitionProduceData"), index=0, records=batch)
    data = wire.build(wire.sibling(cls, "TopicProduceData"), name=topic, partition_data=(partition,))
    body = wire.build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
                      topic_data=(data,))  # fmt: skip
    ((answered,),) = [t.partition_responses for t in raw.call(PRODUCE, 9, body).responses]
    return answered.error_code


def _committed_group(cluster: LocalCluster, group: str, topic: str) -> Consumer:
    """A consumer of ``group`` that read and committed the one record of ``topic`` (so ``__consumer_groups``
    exists and holds the group), left open."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    producer.produce(topic, b"v", partition=0)
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            consumer.commit(message, asynchronous=False)
            return consumer
    raise AssertionError(f"{group} read nothing of {topic}")


def test_every_node_refuses_a_produce_to_an_internal_topic(kafka_cluster: LocalCluster) -> None:
    tag = uuid.uuid4().hex[:8]
    group, topic = f"internal-{tag}", f"internal-{tag}"
    consumer = _committed_group(kafka_cluster, group, topic)
    try:
        for address in kafka_cluster.kafka.values():
            raw = RawKafka(address)
            try:
                for internal in sorted(INTERNAL_TOPICS):
                    assert _produce(raw, internal) is ErrorCode.invalid_topic_exception, (address, internal)
            finally:
                raw.close()
        errors: list[KafkaError | None] = []
        producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all",
                             "message.timeout.ms": 30_000})  # fmt: skip
        producer.produce(GROUPS_TOPIC, b"garbage", key=b"key", on_delivery=lambda e, m: errors.append(e))
        producer.flush(40)
        assert [e.code() if e else None for e in errors] == [KafkaError.TOPIC_EXCEPTION]
        # the group's table is as its commands left it: its committed offset is there to read
        (committed,) = consumer.committed([consumer.assignment()[0]], timeout=30)
        assert committed.offset == 1
    finally:
        consumer.close()
