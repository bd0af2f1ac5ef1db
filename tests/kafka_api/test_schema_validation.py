"""Records checked against their registered schema in the broker (topic config
``confluent.value.schema.validation``, Confluent Server's): records written by confluent-kafka's own
AvroSerializer pass and read back through its AvroDeserializer; the same serializer's bytes corrupted
(no Confluent header, an unknown schema id, an id registered under another subject, a payload the schema
does not decode) are refused with INVALID_RECORD on the Kafka door and 422 over HTTP, and nothing of their
batch is written."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from kafka_fixtures import http_client

from raftlog_client.errors import RequestFailed
from raftlog_client.local_cluster import LocalCluster

TOPIC = "validated-users"
USER = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
OTHER = {"type": "record", "name": "Order", "fields": [{"name": "total", "type": "long"}]}


@pytest.fixture(scope="module")
def typed(kafka_cluster: LocalCluster) -> Iterator[tuple[LocalCluster, SchemaRegistryClient]]:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    created = admin.create_topics(
        [NewTopic(TOPIC, 1, 3, config={"confluent.value.schema.validation": "true"})]
    )
    created[TOPIC].result(30)
    yield kafka_cluster, SchemaRegistryClient({"url": kafka_cluster.urls["n1"]})


def _serialized(registry: SchemaRegistryClient, schema: dict, value: dict, topic: str = TOPIC) -> bytes:
    serializer = AvroSerializer(registry, json.dumps(schema))
    framed = serializer(value, SerializationContext(topic, MessageField.VALUE))
    assert framed is not None
    return framed


def _produce(cluster: LocalCluster, values: list[bytes | None]) -> list[str | None]:
    """Each value produced alone (its own batch), as the broker answered it: None when stored."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True})
    answers: list[str | None] = []
    for value in values:
        producer.produce(
            TOPIC, key=b"k", value=value, callback=lambda error, _: answers.append(error and error.name())
        )
        assert producer.flush(30) == 0
    return answers


def _end_offset(cluster: LocalCluster) -> int:
    with http_client(cluster) as client:
        return client.offsets(TOPIC, 0)[1]


def test_good_records_pass_and_each_kind_of_corruption_is_refused_with_nothing_written(typed) -> None:
    cluster, registry = typed
    good = _serialized(registry, USER, {"name": "ann"})
    other_subject = _serialized(registry, OTHER, {"total": 7}, topic="validated-orders")
    unknown_id = good[:1] + (2**31 - 2).to_bytes(4, "big") + good[5:]
    bad_payload = good[:5] + b"\x99\x99\x99"  # a string length past the bytes there are
    before = _end_offset(cluster)
    answers = _produce(cluster, [good, b"no header at all", unknown_id, other_subject, bad_payload, None])
    assert answers == [None, "INVALID_RECORD", "INVALID_RECORD", "INVALID_RECORD", "INVALID_RECORD", None]
    assert _end_offset(cluster) == before + 2, "the good record and the tombstone alone were written"

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "validated",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([TOPIC])
    deserializer = AvroDeserializer(registry)
    read: list[object] = []
    try:
        while len(read) < 2:
            message = consumer.poll(30)
            assert message is not None, f"read only {read}"
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF
                continue
            value = message.value()
            read.append(
                None
                if value is None
                else deserializer(value, SerializationContext(TOPIC, MessageField.VALUE))
            )
    finally:
        consumer.close()
    assert read == [{"name": "ann"}, None]


def test_one_bad_record_refuses_its_whole_batch_over_http(typed) -> None:
    cluster, registry = typed
    good = _serialized(registry, USER, {"name": "bob"})
    before = _end_offset(cluster)
    records = [{"value": base64.b64encode(v).decode()} for v in (good, good[:5] + b"\x99", good)]
    with http_client(cluster) as client, pytest.raises(RequestFailed) as refused:
        client.produce(TOPIC, records, partition=0)
    assert refused.value.status == 422 and "record 1 of the batch" in refused.value.message, refused.value
    assert _end_offset(cluster) == before, "nothing of the batch was written"
