"""What the registry's client tests (``test_clients.py``) write and read: one schema of each type Confluent's
serializers take (an Avro record with a union, a JSON Schema object, a Protobuf message importing another
file, so its serializer registers a reference), records of them, and the Kafka door's topics to carry them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import DeserializingConsumer, Producer, SerializingProducer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message
from waiting import wait_for

from partitions.names import SCHEMAS_TOPIC
from raftlog_client.blocking import BlockingClient
from raftlog_client.local_cluster import LocalCluster

RECORDS = 5
PROTOBUF_TEXT = """syntax = "proto3";
package raftlog.registry_test;

message Sample {
  string name = 1;
  int32 count = 2;
}
"""
READ_TIMEOUT_S = 60.0  # the records are there before the read starts: the bound is the read's liveness
LEADER_TIMEOUT_S = 30.0  # a partition's election after a node's kill or start (liveness bound)

AVRO_FIELDS: list[dict[str, Any]] = [
    {"name": "id", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "note", "type": ["null", "string"], "default": None},
]
AVRO = json.dumps(
    {"type": "record", "name": "Payment", "namespace": "raftlog.registry_test", "fields": AVRO_FIELDS}
)
# BACKWARD compatible with AVRO (Confluent's default level): a new field with a default
AVRO_V2 = json.dumps(
    {
        "type": "record",
        "name": "Payment",
        "namespace": "raftlog.registry_test",
        "fields": [*AVRO_FIELDS, {"name": "currency", "type": "string", "default": "EUR"}],
    }
)
# not BACKWARD compatible with AVRO: a reader of it cannot fill the new field from AVRO's records
AVRO_INCOMPATIBLE = json.dumps(
    {
        "type": "record",
        "name": "Payment",
        "namespace": "raftlog.registry_test",
        "fields": [*AVRO_FIELDS, {"name": "currency", "type": "string"}],
    }
)
JSON_SCHEMA = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Reading",
        "type": "object",
        "properties": {"sensor": {"type": "string"}, "celsius": {"type": "number"}},
        "required": ["sensor", "celsius"],
        "additionalProperties": False,
    }
)

PROTOBUF_PACKAGE = "raftlog.registry_test"
ADDRESS_FILE = "raftlog/registry_test/address.proto"
CUSTOMER_FILE = "raftlog/registry_test/customer.proto"


def customer_class() -> type[Message]:
    """``raftlog.registry_test.Customer`` (customer.proto, importing address.proto's ``Address``), built
    from its file descriptors in a pool of its own, as protoc's generated module would register them."""
    field = descriptor_pb2.FieldDescriptorProto
    address = descriptor_pb2.FileDescriptorProto(name=ADDRESS_FILE, package=PROTOBUF_PACKAGE, syntax="proto3")
    message = address.message_type.add(name="Address")
    message.field.add(
        name="city", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL, json_name="city"
    )
    message.field.add(
        name="street", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL, json_name="street"
    )
    customer = descriptor_pb2.FileDescriptorProto(
        name=CUSTOMER_FILE, package=PROTOBUF_PACKAGE, syntax="proto3", dependency=[ADDRESS_FILE]
    )
    message = customer.message_type.add(name="Customer")
    message.field.add(
        name="name", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL, json_name="name"
    )
    message.field.add(name="id", number=2, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL, json_name="id")
    message.field.add(
        name="address",
        number=3,
        type=field.TYPE_MESSAGE,
        label=field.LABEL_OPTIONAL,
        type_name=f".{PROTOBUF_PACKAGE}.Address",
        json_name="address",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(address)
    pool.Add(customer)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PROTOBUF_PACKAGE}.Customer"))


def payments(tag: str) -> list[dict[str, Any]]:
    return [
        {"id": f"{tag}-{n}", "amount": n * 1.5, "note": None if n % 2 else f"note {n}"}
        for n in range(RECORDS)
    ]


def readings(tag: str) -> list[dict[str, Any]]:
    return [{"sensor": f"{tag}-{n}", "celsius": 20 + n / 4} for n in range(RECORDS)]


def customers(customer: type[Message], tag: str) -> list[Message]:
    made = []
    for n in range(RECORDS):
        record = customer(name=f"{tag}-{n}", id=1_000_000_000_000 + n)
        record.address.city = f"city {n}"  # type: ignore[attr-defined]
        record.address.street = f"street {n}"  # type: ignore[attr-defined]
        made.append(record)
    return made


def registry_leader(cluster: LocalCluster) -> str:
    """The node leading ``__schemas``, the partition whose Raft group holds the registry's table: it serves
    every registry call, the others forward theirs to it. Found in the Kafka door's metadata once a
    registration made sure the topic exists (it is created on first use)."""
    client = SchemaRegistryClient({"url": cluster.servers[0]})
    client.register_schema("registry-leader-probe", Schema('"string"', "AVRO"))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def led() -> str | None:
        partition = admin.list_topics(SCHEMAS_TOPIC, timeout=10).topics[SCHEMAS_TOPIC].partitions.get(0)
        return f"n{partition.leader}" if partition is not None and partition.leader >= 0 else None

    return str(wait_for(led, f"a leader of {SCHEMAS_TOPIC}/0", LEADER_TIMEOUT_S))


def other_node(cluster: LocalCluster, node: str) -> str:
    return next(other for other in sorted(cluster.urls) if other != node)


def create_topics(cluster: LocalCluster, *topics: str) -> None:
    """One partition each, on all three nodes (a kill leaves two replicas to read from)."""
    with BlockingClient(cluster.servers, timeout_ms=15_000) as client:
        for topic in topics:
            client.create_topic(topic, 1, 3)


def produce(cluster: LocalCluster, topic: str, serializer: Callable[..., Any], values: list[Any]) -> None:
    """``values`` to ``topic`` through the Kafka door, each serialized by ``serializer`` (a confluent-kafka
    serializer: it registers or looks up the schema first), every one acknowledged by all replicas."""
    producer = SerializingProducer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "value.serializer": serializer}
    )
    errors: list[Any] = []
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda error, _message: errors.append(error))
    assert producer.flush(60) == 0, f"{topic}: records still queued after 60 s"
    assert errors == [None] * len(values), errors


def read(cluster: LocalCluster, topic: str, deserializer: Callable[..., Any], count: int) -> list[Any]:
    """The first ``count`` values of ``topic``'s partition 0, each deserialized by ``deserializer`` (it
    fetches the writer's schema by the id in the record)."""
    consumer = DeserializingConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
            "value.deserializer": deserializer,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[Any] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
    finally:
        consumer.close()
    assert len(values) == count, f"{topic}: {len(values)} of {count} records read within {READ_TIMEOUT_S:g} s"
    return values


def produce_bytes(cluster: LocalCluster, topic: str, payloads: list[bytes]) -> None:
    """Payloads a client serialized itself, to ``topic`` through the Kafka door, every one acknowledged."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    errors: list[Any] = []
    for payload in payloads:
        producer.produce(topic, payload, on_delivery=lambda error, _message: errors.append(error))
    assert producer.flush(60) == 0, f"{topic}: records still queued after 60 s"
    assert errors == [None] * len(payloads), errors


def read_bytes(cluster: LocalCluster, topic: str) -> list[bytes]:
    return read(cluster, topic, lambda value, _context: value, RECORDS)
