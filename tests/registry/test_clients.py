"""Other authors' registry clients, as their users call them, against the registry every node serves:
confluent-kafka's ``SchemaRegistryClient`` and ``AsyncSchemaRegistryClient`` with its Avro, JSON Schema
and Protobuf serializers and deserializers producing and consuming through the Kafka door, and
python-schema-registry-client (sync and async). Each test registers through the node leading the registry's
partition (``__schemas``), kill -9s that node, reads every record back and registers a new version through
another (the registry has moved to a new leader), starts the node again and finds there the ids it gave and
the one given while it was down: ids are unique and stable across a leader's kill and restart, and any node
answers for them."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import client_records as records
from confluent_kafka import TopicPartition
from confluent_kafka.aio import AsyncDeserializingConsumer, AsyncSerializingProducer
from confluent_kafka.schema_registry import (
    AsyncSchemaRegistryClient,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from confluent_kafka.schema_registry._async.avro import AsyncAvroDeserializer, AsyncAvroSerializer
from confluent_kafka.schema_registry._async.json_schema import AsyncJSONDeserializer, AsyncJSONSerializer
from confluent_kafka.schema_registry._async.protobuf import AsyncProtobufDeserializer, AsyncProtobufSerializer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from schema_registry.client import AsyncSchemaRegistryClient as AsyncPythonClient
from schema_registry.client import SchemaRegistryClient as PythonClient
from schema_registry.client import schema as python_schema
from schema_registry.client.errors import ClientError as PythonClientError
from schema_registry.serializers import AsyncJsonMessageSerializer, AvroMessageSerializer
from waiting import wait_for, wait_until

from raftlog_client.local_cluster import LocalCluster

CATCH_UP_S = 30.0  # a node started again has the registrations made while it was down (liveness bound)
KINDS = ("avro", "json", "protobuf")


def subject(topic: str) -> str:
    return f"{topic}-value"  # confluent-kafka's default: TopicNameStrategy


def test_confluent_sync_client_and_serializers_across_a_kill(running_cluster: LocalCluster) -> None:
    cluster = running_cluster
    writer = records.registry_leader(cluster)  # takes the registrations; its kill moves the registry
    survivor = records.other_node(cluster, writer)
    topics = {kind: f"sync-{kind}" for kind in KINDS}
    records.create_topics(cluster, *topics.values())
    customer = records.customer_class()
    values: dict[str, list[Any]] = {
        "avro": records.payments("sync"),
        "json": records.readings("sync"),
        "protobuf": records.customers(customer, "sync"),
    }
    client = SchemaRegistryClient({"url": cluster.urls[writer]})
    serializers = {
        "avro": AvroSerializer(client, records.AVRO),
        "json": JSONSerializer(records.JSON_SCHEMA, client),
        "protobuf": ProtobufSerializer(customer, client, {"use.deprecated.format": False}),
    }
    for kind in KINDS:  # each serializer registers its schema (the Protobuf one its import first)
        records.produce(cluster, topics[kind], serializers[kind], values[kind])
    ids = {kind: client.get_latest_version(subject(topics[kind])).schema_id for kind in KINDS}
    texts = {kind: client.get_schema(ids[kind]).schema_str for kind in KINDS}
    assert len(set(ids.values())) == len(KINDS), ids
    assert client.get_latest_version(records.ADDRESS_FILE).version == 1  # the import, under its file name

    cluster.control("stop", writer, kill=True)
    other = SchemaRegistryClient({"url": cluster.urls[survivor]})
    assert {kind: other.get_schema(ids[kind]).schema_str for kind in KINDS} == texts
    deserializers = {
        "avro": AvroDeserializer(other),
        "json": JSONDeserializer(None, schema_registry_client=other),
        "protobuf": ProtobufDeserializer(customer, {"use.deprecated.format": False}, other),
    }
    for kind in KINDS:
        assert records.read(cluster, topics[kind], deserializers[kind], records.RECORDS) == values[kind], kind
    avro_subject = subject(topics["avro"])
    assert other.test_compatibility(avro_subject, Schema(records.AVRO_INCOMPATIBLE, "AVRO")) is False
    new_id = other.register_schema(avro_subject, Schema(records.AVRO_V2, "AVRO"))
    assert new_id not in ids.values()

    cluster.control("start", writer)
    back = SchemaRegistryClient({"url": cluster.urls[writer]})
    wait_for(
        lambda: back.get_schema(new_id),
        f"{writer} knows id {new_id}",
        CATCH_UP_S,
        retrying=(SchemaRegistryError,),
    )
    assert {kind: back.get_schema(ids[kind]).schema_str for kind in KINDS} == texts
    assert back.get_versions(avro_subject) == [1, 2]
    assert back.register_schema(avro_subject, Schema(records.AVRO, "AVRO")) == ids["avro"]  # known: its id


async def test_confluent_async_client_and_serializers_across_a_kill(running_cluster: LocalCluster) -> None:
    cluster = running_cluster
    writer = records.registry_leader(cluster)  # takes the registrations; its kill moves the registry
    survivor = records.other_node(cluster, writer)
    topics = {kind: f"async-{kind}" for kind in KINDS}
    records.create_topics(cluster, *topics.values())
    customer = records.customer_class()
    values: dict[str, list[Any]] = {
        "avro": records.payments("async"),
        "json": records.readings("async"),
        "protobuf": records.customers(customer, "async"),
    }
    client = AsyncSchemaRegistryClient({"url": cluster.urls[writer]})
    serializers = {
        "avro": await AsyncAvroSerializer(client, records.AVRO),
        "json": await AsyncJSONSerializer(records.JSON_SCHEMA, client),
        "protobuf": await AsyncProtobufSerializer(customer, client, {"use.deprecated.format": False}),
    }
    for kind in KINDS:
        await produce_async(cluster, topics[kind], serializers[kind], values[kind])
    ids = {kind: (await client.get_latest_version(subject(topics[kind]))).schema_id for kind in KINDS}
    texts = {kind: (await client.get_schema(ids[kind])).schema_str for kind in KINDS}
    assert len(set(ids.values())) == len(KINDS), ids

    await asyncio.to_thread(cluster.control, "stop", writer, kill=True)
    other = AsyncSchemaRegistryClient({"url": cluster.urls[survivor]})
    assert {kind: (await other.get_schema(ids[kind])).schema_str for kind in KINDS} == texts
    deserializers = {
        "avro": await AsyncAvroDeserializer(other),
        "json": await AsyncJSONDeserializer(None, schema_registry_client=other),
        "protobuf": await AsyncProtobufDeserializer(customer, {"use.deprecated.format": False}, other),
    }
    for kind in KINDS:
        assert await read_async(cluster, topics[kind], deserializers[kind]) == values[kind], kind
    new_id = await other.register_schema(subject(topics["avro"]), Schema(records.AVRO_V2, "AVRO"))
    assert new_id not in ids.values()

    await asyncio.to_thread(cluster.control, "start", writer)
    back = AsyncSchemaRegistryClient({"url": cluster.urls[writer]})
    await wait_until(
        lambda: back.get_schema(new_id),
        f"{writer} knows id {new_id}",
        CATCH_UP_S,
        retrying=(SchemaRegistryError,),
    )
    assert {kind: (await back.get_schema(ids[kind])).schema_str for kind in KINDS} == texts
    assert await back.get_versions(subject(topics["avro"])) == [1, 2]


async def produce_async(cluster: LocalCluster, topic: str, serializer: Any, values: list[Any]) -> None:
    producer = await AsyncSerializingProducer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "value.serializer": serializer}
    )
    try:
        delivered = [await producer.produce(topic, value=value) for value in values]
        await producer.flush()
        for future in delivered:
            message = await future
            assert message.error() is None, message.error()
    finally:
        await producer.close()


async def read_async(cluster: LocalCluster, topic: str, deserializer: Any) -> list[Any]:
    consumer = await AsyncDeserializingConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
            "value.deserializer": deserializer,
        }
    )
    values: list[Any] = []
    try:
        await consumer.assign([TopicPartition(topic, 0, 0)])

        async def one_more() -> bool:
            message = await consumer.poll(1.0)
            if message is not None:
                values.append(message.value())
            return len(values) == records.RECORDS

        await wait_until(one_more, f"{records.RECORDS} records of {topic}", records.READ_TIMEOUT_S, every_s=0)
    finally:
        await consumer.close()
    return values


FAILOVER_S = 30.0  # a registry leader's kill until a survivor leads it: elections, a split vote, load


def _unless_503(read: Any, *args: Any) -> Any:
    """``read(*args)``, or None while the registry answers 503 (no leader yet)."""
    try:
        return read(*args)
    except PythonClientError as error:
        if error.http_code == 503:
            return None
        raise


async def test_python_schema_registry_client_sync_and_async_across_a_kill(
    running_cluster: LocalCluster,
) -> None:
    cluster = running_cluster
    writer = records.registry_leader(cluster)  # takes the registrations; its kill moves the registry
    survivor = records.other_node(cluster, writer)
    avro_topic, json_topic = "python-client-avro", "python-client-json"
    records.create_topics(cluster, avro_topic, json_topic)
    avro = python_schema.AvroSchema(json.loads(records.AVRO))
    reading = python_schema.JsonSchema(json.loads(records.JSON_SCHEMA))
    sync_client, async_client = (
        PythonClient(url=cluster.urls[writer]),
        AsyncPythonClient(url=cluster.urls[writer]),
    )
    payments, readings = records.payments("python"), records.readings("python")
    avro_payloads = [
        AvroMessageSerializer(sync_client).encode_record_with_schema(subject(avro_topic), avro, value)
        for value in payments
    ]
    json_serializer = AsyncJsonMessageSerializer(async_client)
    json_payloads = [
        await json_serializer.encode_record_with_schema(subject(json_topic), reading, value)
        for value in readings
    ]
    records.produce_bytes(cluster, avro_topic, avro_payloads)
    records.produce_bytes(cluster, json_topic, json_payloads)
    avro_id = sync_client.check_version(subject(avro_topic), avro).schema_id
    json_id = (await async_client.check_version(subject(json_topic), reading)).schema_id
    assert avro_id != json_id

    await asyncio.to_thread(cluster.control, "stop", writer, kill=True)
    sync_other, async_other = (
        PythonClient(url=cluster.urls[survivor]),
        AsyncPythonClient(url=cluster.urls[survivor]),
    )
    # the registry's reads are its leader's: until the survivors elect a new one (a split vote made it 5.6 s
    # once, beyond the 3 s a node waits for a leader) they answer 503, which Confluent's clients retry
    # themselves and this client leaves to its caller
    read_back: list[Any] = []

    def answered() -> bool:
        read_back.append(_unless_503(sync_other.get_by_id, avro_id))
        return read_back[-1] is not None

    wait_for(answered, "the survivor's answer, once the registry has a leader again", FAILOVER_S)
    assert read_back[-1] == avro
    assert await async_other.get_by_id(json_id) == reading
    avro_reader, json_reader = AvroMessageSerializer(sync_other), AsyncJsonMessageSerializer(async_other)
    assert [avro_reader.decode_message(p) for p in records.read_bytes(cluster, avro_topic)] == payments
    assert [await json_reader.decode_message(p) for p in records.read_bytes(cluster, json_topic)] == readings
    incompatible = python_schema.AvroSchema(json.loads(records.AVRO_INCOMPATIBLE))
    assert sync_other.test_compatibility(subject(avro_topic), incompatible) is False
    new_id = await async_other.register(
        subject(avro_topic), python_schema.AvroSchema(json.loads(records.AVRO_V2))
    )
    assert new_id not in (avro_id, json_id)

    await asyncio.to_thread(cluster.control, "start", writer)
    sync_back, async_back = (
        PythonClient(url=cluster.urls[writer]),
        AsyncPythonClient(url=cluster.urls[writer]),
    )
    await wait_until(lambda: async_back.get_by_id(new_id), f"{writer} knows id {new_id}", CATCH_UP_S)
    assert sync_back.get_by_id(avro_id) == avro
    assert sync_back.get_versions(subject(avro_topic)) == [1, 2]
    latest = await async_back.get_schema(subject(avro_topic))
    assert latest is not None and (latest.schema_id, latest.version) == (new_id, 2)
