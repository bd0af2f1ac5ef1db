"""Confluent REST Proxy v2's schema formats on the HTTP door (``api/typed_records.py``): the Avro, JSON Schema
and Protobuf examples of Confluent's REST Proxy quick start, sent as printed (their curl commands' method,
headers and bodies) to a node, then the records of each side read by the other's reader: records produced
over HTTP by confluent-kafka's deserializers through the Kafka door, records confluent-kafka's serializers
produced over HTTP as JSON; and the refusals, with Confluent's codes, writing nothing."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

import client_records as records
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from waiting import wait_for

from raftlog_client.blocking import BlockingClient
from raftlog_client.local_cluster import LocalCluster

V2 = "application/vnd.kafka.v2+json"
AVRO_V2 = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA_V2 = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF_V2 = "application/vnd.kafka.protobuf.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
READ_S = 60.0  # the records are there before the read starts: the bound is the read's liveness

# The quick start's bodies, character for character (docs.confluent.io, "Quick Start for Confluent REST
# Proxy", "Produce and Consume Avro / Protobuf / JSON Schema Messages")
USER_AVRO = '{"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}'
QUICKSTART = {
    "avro": (
        AVRO_V2,
        "avrotest",
        '{"value_schema": "{\\"type\\": \\"record\\", \\"name\\": \\"User\\", \\"fields\\": [{\\"name\\": '
        '\\"name\\", \\"type\\": \\"string\\"}]}", "records": [{"value": {"name": "testUser"}}]}',
    ),
    "protobuf": (
        PROTOBUF_V2,
        "protobuftest",
        '{"value_schema": "syntax=\\"proto3\\"; message User { string name = 1; }", '
        '"records": [{"value": {"name": "testUser"}}]}',
    ),
    "jsonschema": (
        JSONSCHEMA_V2,
        "jsonschematest",
        '{"value_schema": "{\\"type\\":\\"object\\",\\"properties\\":'
        '{\\"name\\":{\\"type\\":\\"string\\"}}}", '
        '"records": [{"value": {"name": "testUser"}}]}',
    ),
}
AVRO_KEYED = (
    '{"key_schema": "{\\"name\\":\\"user_id\\"  ,\\"type\\": \\"int\\"   }", "value_schema": "{\\"type\\": '
    '\\"record\\", \\"name\\": \\"User\\", \\"fields\\": [{\\"name\\": \\"name\\", '
    '\\"type\\": \\"string\\"}]}", '
    '"records": [{"key" : 1 , "value": {"name": "testUser"}}]}'
)


def call(url: str, method: str, body: str | None = None, **headers: str) -> tuple[int, Any, dict[str, str]]:
    """A request as curl sends it: the status, the JSON answer (None when empty) and the headers."""
    data = None if body is None else body.encode()
    names = {"content_type": "Content-Type", "accept": "Accept"}
    request = urllib.request.Request(url, data=data, method=method)
    for name, value in headers.items():
        request.add_header(names[name], value)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            raw, status, got = answer.read(), answer.status, dict(answer.headers)
    except urllib.error.HTTPError as error:
        raw, status, got = error.read(), error.code, dict(error.headers)
    return status, json.loads(raw) if raw else None, got


def consume(url: str, group: str, fmt: str, topic: str, accept: str, count: int) -> list[dict[str, Any]]:
    """The quick start's consumer: created at the earliest offset, subscribed, read until ``count`` records
    came, deleted."""
    created = call(
        f"{url}/consumers/{group}",
        "POST",
        json.dumps({"name": "my_consumer_instance", "format": fmt, "auto.offset.reset": "earliest"}),
        content_type=V2,
    )
    assert created[0] == 200, created
    instance = f"{url}/consumers/{group}/instances/my_consumer_instance"
    assert created[1]["base_uri"].endswith(f"/consumers/{group}/instances/my_consumer_instance")
    subscribed = call(f"{instance}/subscription", "POST", json.dumps({"topics": [topic]}), content_type=V2)
    assert subscribed[0] == 204, subscribed
    got: list[dict[str, Any]] = []

    def more() -> bool:
        status, rows, headers = call(f"{instance}/records", "GET", accept=accept)
        assert status == 200, rows
        assert headers["Content-Type"].startswith(accept)
        got.extend(rows)
        return len(got) >= count

    wait_for(more, f"{count} records of {topic} through a {fmt} consumer", READ_S)
    assert call(instance, "DELETE", content_type=V2)[0] == 204
    return got


def fetch(url: str, topic: str, accept: str, offset: int = 0) -> tuple[int, Any]:
    status, answer, _ = call(
        f"{url}/topics/{topic}/partitions/0/records?offset={offset}", "GET", accept=accept
    )
    return status, answer


def end_offset(url: str, topic: str) -> int:
    return int(call(f"{url}/topics/{topic}/partitions/0/offsets", "GET")[1]["end_offset"])


def user_class() -> type[Message]:
    """The quick start's ``message User { string name = 1; }``, as protoc would generate it."""
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="user.proto", syntax="proto3")
    file.message_type.add(name="User").field.add(
        name="name", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL, json_name="name"
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("User"))


def test_quickstart_examples_as_printed_and_read_by_confluent_deserializers(
    running_cluster: LocalCluster,
) -> None:
    cluster = running_cluster
    url, other = cluster.servers[0], cluster.servers[1]
    records.create_topics(cluster, *(topic for _, topic, _ in QUICKSTART.values()), "avrokeytest2")
    ids = {}
    for fmt, (media, topic, body) in QUICKSTART.items():
        status, answer, headers = call(f"{url}/topics/{topic}", "POST", body, content_type=media, accept=V2)
        assert status == 200, answer
        assert headers["Content-Type"].startswith(V2)
        assert answer["key_schema_id"] is None and isinstance(answer["value_schema_id"], int), answer
        assert answer["offsets"] == [{"partition": 0, "offset": 0, "error_code": None, "error": None}]
        ids[fmt] = answer["value_schema_id"]
        # the schema was registered under the topic's subject, TopicNameStrategy's
        versions = call(f"{other}/subjects/{topic}-value/versions", "GET")
        assert versions[:2] == (200, [1]), versions
        # read back through another node, as the quick start's consumer reads
        rows = consume(other, f"my_{fmt}_consumer", fmt, topic, media, 1)
        assert [(row["key"], row["value"], row["topic"], row["format"]) for row in rows] == [
            (None, {"name": "testUser"}, topic, fmt)
        ]
    status, answer, _ = call(
        f"{url}/topics/avrokeytest2", "POST", AVRO_KEYED, content_type=AVRO_V2, accept=V2
    )
    assert status == 200 and isinstance(answer["key_schema_id"], int), answer
    status, rows = fetch(other, "avrokeytest2", AVRO_V2)
    assert status == 200 and [(r["key"], r["value"]) for r in rows] == [(1, {"name": "testUser"})], rows

    # the same records, read by confluent-kafka's deserializers through the Kafka door
    client = SchemaRegistryClient({"url": other})
    assert records.read(cluster, "avrotest", AvroDeserializer(client), 1) == [{"name": "testUser"}]
    assert records.read(
        cluster, "jsonschematest", JSONDeserializer(None, schema_registry_client=client), 1
    ) == [{"name": "testUser"}]
    user = user_class()
    proto = ProtobufDeserializer(user, {"use.deprecated.format": False})
    assert [MessageToDict(m) for m in records.read(cluster, "protobuftest", proto, 1)] == [
        {"name": "testUser"}
    ]
    # the id in each record is the one the answer named
    for fmt, (_, topic, _) in QUICKSTART.items():
        (raw,) = records.read(cluster, topic, lambda value, _context: value, 1)
        assert raw[0] == 0 and int.from_bytes(raw[1:5], "big") == ids[fmt], (fmt, raw[:6])


def test_confluent_serializers_records_read_over_http(running_cluster: LocalCluster) -> None:
    cluster = running_cluster
    topics = {"avro": "http-read-avro", "jsonschema": "http-read-json", "protobuf": "http-read-protobuf"}
    records.create_topics(cluster, *topics.values())
    client = SchemaRegistryClient({"url": cluster.servers[2]})
    customer = records.customer_class()
    payments, readings = records.payments("http"), records.readings("http")
    customers = records.customers(customer, "http")
    records.produce(cluster, topics["avro"], AvroSerializer(client, records.AVRO), payments)
    records.produce(cluster, topics["jsonschema"], JSONSerializer(records.JSON_SCHEMA, client), readings)
    serializer = ProtobufSerializer(customer, client, {"use.deprecated.format": False})
    records.produce(cluster, topics["protobuf"], serializer, customers)
    url = cluster.servers[0]
    avro_rows = fetch(url, topics["avro"], AVRO_V2)[1]
    # Avro's JSON encoding, as Confluent's REST Proxy answers it: a union's value named by its branch
    assert [row["value"] for row in avro_rows] == [
        {**p, "note": None if p["note"] is None else {"string": p["note"]}} for p in payments
    ]
    assert [row["value"] for row in fetch(url, topics["jsonschema"], JSONSCHEMA_V2)[1]] == readings
    # protobuf's JSON mapping (an int64 as a string), the message found through the schema's import
    rows = consume(url, "http-protobuf-reader", "protobuf", topics["protobuf"], PROTOBUF_V2, len(customers))
    assert [row["value"] for row in rows] == [MessageToDict(c) for c in customers]


def test_refusals_write_nothing_and_undecodable_records_stop_a_read(running_cluster: LocalCluster) -> None:
    cluster = running_cluster
    url = cluster.servers[1]
    topic = "http-refusals"
    records.create_topics(cluster, topic, f"{topic}-json", f"{topic}-proto")
    good = {"value_schema": USER_AVRO, "records": [{"value": {"name": "a"}}]}
    assert call(f"{url}/topics/{topic}", "POST", json.dumps(good), content_type=AVRO_V2)[0] == 200
    # the same schema by id, to the partition's route: the same id, nothing registered again
    schema_id = call(f"{url}/subjects/{topic}-value/versions/1", "GET")[1]["id"]
    by_id = {"value_schema_id": schema_id, "records": [{"value": {"name": "a"}}]}
    status, answer, _ = call(
        f"{url}/topics/{topic}/partitions/0", "POST", json.dumps(by_id), content_type=AVRO_V2
    )
    assert status == 200 and answer["value_schema_id"] == schema_id and answer["offsets"][0]["offset"] == 1
    assert call(f"{url}/subjects/{topic}-value/versions", "GET")[1] == [1]
    before = end_offset(url, topic)
    assert before == 2

    def refused(
        body: dict[str, Any], media: str = AVRO_V2, path: str = "", into: str = topic
    ) -> tuple[int, int]:
        status, answer, _ = call(f"{url}/topics/{into}{path}", "POST", json.dumps(body), content_type=media)
        return status, answer["error_code"]

    # a record its schema refuses, after one it takes: nothing of the request written (Confluent's 42203)
    mixed = {"value_schema_id": schema_id, "records": [{"value": {"name": "b"}}, {"value": {"name": 3}}]}
    assert refused(mixed) == (422, 42203)
    assert refused(mixed, path="/partitions/0") == (422, 42203)
    assert refused({"records": [{"value": {"name": "b"}}]}) == (422, 42202)  # no value schema
    assert refused({"value_schema_id": schema_id, "records": [{"key": 1, "value": {"name": "b"}}]}) == (
        422,
        42201,
    )
    assert refused({"value_schema": "{not avro", "records": [{"value": 1}]}) == (422, 42205)
    assert refused({"value_schema_id": 2**31 - 1, "records": [{"value": {"name": "b"}}]}) == (422, 42207)
    # an id registered, but not under this topic's subject (Confluent's REST Proxy: 42207)
    other = call(
        f"{url}/subjects/elsewhere-value/versions",
        "POST",
        json.dumps({"schema": '{"type": "string"}'}),
        content_type="application/vnd.schemaregistry.v1+json",
    )
    assert other[0] == 200, other
    assert refused({"value_schema_id": other[1]["id"], "records": [{"value": "x"}]}) == (422, 42207)
    # the id's schema is Avro: a Protobuf produce naming it is refused
    assert refused({"value_schema_id": schema_id, "records": [{"value": {"name": "b"}}]}, PROTOBUF_V2) == (
        422,
        42207,
    )
    assert end_offset(url, topic) == before
    # the other formats' data their schemas refuse (topics whose subjects hold no Avro schema): a JSON
    # Schema's document, a field the Protobuf message does not have
    strict = '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
    json_body = {"value_schema": strict, "records": [{"value": {"n": "x"}}]}
    assert refused(json_body, JSONSCHEMA_V2, into=f"{topic}-json") == (422, 42203)
    message = 'syntax = "proto3"; message M { int32 n = 1; }'
    proto_body = {"value_schema": message, "records": [{"value": {"m": 1}}]}
    assert refused(proto_body, PROTOBUF_V2, into=f"{topic}-proto") == (422, 42203)
    assert end_offset(url, f"{topic}-json") == end_offset(url, f"{topic}-proto") == 0
    # ... and their schemas, given by text, were not registered: the records are encoded first
    for subject in (f"{topic}-json-value", f"{topic}-proto-value"):
        assert call(f"{url}/subjects/{subject}/versions", "GET")[0] == 404

    # a record not in Confluent's wire format (a JSON-format record) after the two good ones: a read answers
    # the records before it, a read starting at it fails naming it, as Confluent's consumer's poll
    plain = call(
        f"{url}/topics/{topic}", "POST", '{"records": [{"value": {"name": "c"}}]}', content_type=JSON_V2
    )
    assert plain[0] == 200, plain
    status, rows = fetch(url, topic, AVRO_V2)
    assert status == 200 and [row["value"] for row in rows] == [{"name": "a"}, {"name": "a"}], rows
    status, answer = fetch(url, topic, AVRO_V2, offset=2)
    assert (status, answer["error_code"]) == (500, 50002), answer
    assert f"value for partition {topic}-0 at offset 2" in answer["message"], answer
    # a consumer instance stops there too, and stays there: its next read starts at the record again
    rows = consume(url, "http-refusals-reader", "avro", topic, AVRO_V2, 2)
    assert [row["offset"] for row in rows] == [0, 1]
    created = call(
        f"{url}/consumers/http-refusals-stuck",
        "POST",
        json.dumps({"name": "stuck", "format": "avro", "auto.offset.reset": "earliest"}),
        content_type=V2,
    )
    assert created[0] == 200, created
    instance = f"{url}/consumers/http-refusals-stuck/instances/stuck"
    call(f"{instance}/subscription", "POST", json.dumps({"topics": [topic]}), content_type=V2)
    answers: list[tuple[int, Any]] = []

    def failed_twice() -> bool:
        status, answer, _ = call(f"{instance}/records", "GET", accept=AVRO_V2)
        if status == 200:  # not assigned yet ([]), then the records before the undecodable one
            assert [row["offset"] for row in answer] in ([], [0, 1]), answer
            return False
        answers.append((status, answer))
        return len(answers) >= 2

    wait_for(failed_twice, "two reads of the undecodable record", READ_S)
    assert [(s, a["error_code"]) for s, a in answers] == [(500, 50002), (500, 50002)], answers
    seek = {"offsets": [{"topic": topic, "partition": 0, "offset": 3}]}
    # seeking past it, as the message says, reads on (nothing more here: an empty answer)
    assert call(f"{instance}/positions", "POST", json.dumps(seek), content_type=V2)[0] == 204
    status, answer, _ = call(f"{instance}/records?timeout=0", "GET", accept=AVRO_V2)
    assert (status, answer) == (200, []), answer
    call(instance, "DELETE", content_type=V2)
    # the stored bytes of the HTTP-produced records are Confluent's frame: magic 0, the id, Avro's bytes
    binary = fetch(url, topic, "application/vnd.kafka.binary.v2+json")[1]
    assert base64.b64decode(binary[0]["value"]) == bytes([0]) + schema_id.to_bytes(4, "big") + b"\x02a"


def test_schema_format_records_pass_the_brokers_schema_validation(running_cluster: LocalCluster) -> None:
    """A topic whose leader checks every value against its registered schema
    (``confluent.value.schema.validation``) takes what the schema formats produce over HTTP, in each
    format, and refuses a JSON-format value (no Confluent header) with nothing written."""
    cluster = running_cluster
    url = cluster.servers[2]
    bodies = {
        AVRO_V2: {"value_schema": USER_AVRO, "records": [{"value": {"name": "v"}}]},
        JSONSCHEMA_V2: {"value_schema": '{"type": "object"}', "records": [{"value": {"name": "v"}}]},
        PROTOBUF_V2: {
            "value_schema": 'syntax = "proto3"; message U { string name = 1; }',
            "records": [{"value": {"name": "v"}}],
        },
    }
    for media, body in bodies.items():
        topic = f"validated-{media.split('.')[2]}"
        with BlockingClient(cluster.servers, timeout_ms=15_000) as client:
            client.create_topic(topic, 1, 3, {"confluent.value.schema.validation": "true"})
        status, answer, _ = call(f"{url}/topics/{topic}", "POST", json.dumps(body), content_type=media)
        assert status == 200 and answer["offsets"][0]["error_code"] is None, answer
        status, answer, _ = call(
            f"{url}/topics/{topic}", "POST", '{"records": [{"value": 1}]}', content_type=JSON_V2
        )
        assert (status, answer["error_code"]) == (422, 42201), answer  # the broker's INVALID_RECORD
        assert end_offset(url, topic) == 1
        status, rows = fetch(url, topic, media)
        assert status == 200 and [row["value"] for row in rows] == [{"name": "v"}], rows
