"""Typed columns from the registry's Avro schemas (``valueFormat`` 'avro'): what confluent-kafka's
AvroSerializer produced under a first version and then a second adding fields with defaults, Spark reads
as the latest version's columns, older records showing the defaults; what Spark writes as Avro,
confluent-kafka's AvroDeserializer reads; values that are not what the option says fail naming the record."""

from __future__ import annotations

import datetime
import decimal
import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from spark_cluster import SparkTestCluster

from raftlog_client.errors import RequestFailed
from raftlog_spark.avro_types import avro_schema, spark_type
from raftlog_spark.errors import OptionError, SchemaError
from raftlog_spark.options import parse_read_options, parse_write_options
from raftlog_spark.source import value_schema
from raftlog_spark.writer import register_value

pytestmark = pytest.mark.spark

V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    ],
}
V2 = {  # two fields added with defaults: a BACKWARD change, so the registry takes it as version 2
    **V1,
    "fields": [
        *V1["fields"],
        {"name": "note", "type": "string", "default": "none"},
        {"name": "qty", "type": ["null", "int"], "default": None},
    ],
}
AT = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)


def _bootstrap(cluster: SparkTestCluster) -> str:
    assert cluster.local is not None
    return cluster.local.bootstrap_servers


def _read(spark: Any, cluster: SparkTestCluster, topic: str, **options: str) -> Any:
    reader = spark.read.format("raftlog").option("servers", cluster.servers).option("subscribe", topic)
    for name, value in {"valueFormat": "avro", **options}.items():
        reader = reader.option(name, value)
    return reader.load()


def test_spark_reads_avro_values_as_typed_columns_of_the_latest_version(
    spark: Any, raftlog_cluster: SparkTestCluster
) -> None:
    topic = raftlog_cluster.create_topic(1)
    registry = SchemaRegistryClient({"url": raftlog_cluster.urls[0]})
    producer = Producer({"bootstrap.servers": _bootstrap(raftlog_cluster), "linger.ms": 5})
    context = SerializationContext(topic, MessageField.VALUE)
    first = AvroSerializer(registry, json.dumps(V1))
    for i in range(2):
        order = {"id": i, "status": "NEW", "tags": ["a", f"t{i}"], "at": AT, "price": decimal.Decimal("9.99")}
        producer.produce(topic, key=f"k{i}", value=first(order, context))
    producer.produce(topic, key="k-gone", value=None)  # a tombstone: a null value
    second = AvroSerializer(registry, json.dumps(V2))
    order = {"id": 2, "status": "PAID", "tags": [], "at": AT, "price": decimal.Decimal("-1.50")}
    producer.produce(topic, key="k2", value=second({**order, "note": "gift", "qty": 3}, context))
    assert producer.flush(30) == 0
    versions = registry.get_versions(f"{topic}-value")
    assert versions == [1, 2]

    df = _read(spark, raftlog_cluster, topic)
    value = df.schema["value"].dataType
    assert isinstance(value, StructType) and df.schema["value"].nullable
    assert [f.name for f in value.fields] == ["id", "status", "tags", "at", "price", "note", "qty"]
    kinds = {f.name: (f.dataType, f.nullable) for f in value.fields}
    assert kinds["id"] == (LongType(), False) and kinds["status"] == (StringType(), False)
    assert kinds["tags"] == (ArrayType(StringType(), False), False)
    assert kinds["at"] == (TimestampType(), False) and kinds["price"] == (DecimalType(9, 2), False)
    assert kinds["qty"][1] is True  # a union with null: nullable
    rows = df.orderBy("offset").select("offset", "value.*").collect()
    assert [r.offset for r in rows] == [0, 1, 2, 3]
    assert rows[2].id is None  # the tombstone
    got = [(r.id, r.status, r.tags, r.price, r.note, r.qty) for r in rows if r.id is not None]
    assert got == [
        (0, "NEW", ["a", "t0"], decimal.Decimal("9.99"), "none", None),  # v1 records: the defaults
        (1, "NEW", ["a", "t1"], decimal.Decimal("9.99"), "none", None),
        (2, "PAID", [], decimal.Decimal("-1.50"), "gift", 3),
    ]
    stamps = df.selectExpr("unix_millis(value.at) ms").where("ms IS NOT NULL").collect()
    assert {r.ms for r in stamps} == {int(AT.timestamp() * 1000)}


def test_a_dataframe_written_as_avro_is_read_by_confluent_kafkas_deserializer(
    spark: Any, raftlog_cluster: SparkTestCluster
) -> None:
    topic = raftlog_cluster.create_topic(1)
    df = spark.range(0, 3, 1, 1).selectExpr(  # one Spark partition: offsets follow the rows
        "CAST(id AS STRING) key",
        "named_struct('id', id, 'name', CONCAT('n', id), 'amount', CAST(id * 1.25 AS DECIMAL(10, 2)),"
        " 'day', DATE'2026-11-28', 'attrs', map('x', CAST(id AS INT)),"
        " 'nick', IF(id = 1, NULL, 'z')) value",
    )
    df.write.format("raftlog").option("servers", raftlog_cluster.servers).option("topic", topic).option(
        "valueFormat", "avro"
    ).mode("append").save()

    registry = SchemaRegistryClient({"url": raftlog_cluster.urls[1]})
    registered = registry.get_latest_version(f"{topic}-value")
    assert registered.version == 1
    assert json.loads(registered.schema.schema_str)["name"] == "topLevelRecord"  # Spark's to_avro name
    deserialize = AvroDeserializer(registry)
    consumer = Consumer({"bootstrap.servers": _bootstrap(raftlog_cluster), "group.id": f"g-{topic}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while len(messages) < 3 and time.monotonic() < deadline:
            messages += [m for m in consumer.consume(10, 0.5) if m.error() is None]
    finally:
        consumer.close()
    context = SerializationContext(topic, MessageField.VALUE)
    values = [deserialize(m.value(), context) for m in messages]
    assert values == [
        {
            "id": i,
            "name": f"n{i}",
            "amount": decimal.Decimal(i * 125) / 100,
            "day": datetime.date(2026, 11, 28),
            "attrs": {"x": i},
            "nick": None if i == 1 else "z",
        }
        for i in range(3)
    ]
    # and Spark reads its own records back as the columns it wrote
    back = _read(spark, raftlog_cluster, topic)
    assert back.schema["value"].dataType == df.schema["value"].dataType
    assert back.orderBy("offset").select("value.*").collect() == df.select("value.*").collect()


def test_a_value_not_in_the_wire_format_fails_the_read_naming_its_offset(
    spark: Any, raftlog_cluster: SparkTestCluster
) -> None:
    topic = raftlog_cluster.create_topic(1)
    registry = SchemaRegistryClient({"url": raftlog_cluster.urls[0]})
    serializer = AvroSerializer(registry, json.dumps(V1))
    good = serializer(
        {"id": 0, "status": "NEW", "tags": [], "at": AT, "price": decimal.Decimal("1.00")},
        SerializationContext(topic, MessageField.VALUE),
    )
    raftlog_cluster.produce_records(topic, 0, [{"value": good}, {"value": b"plain bytes"}])
    with pytest.raises(Exception, match=rf"{topic}-0 offset 1: the value is not in Confluent's wire format"):
        _read(spark, raftlog_cluster, topic).collect()


# -- without a session: options and types --------------------------------------------------------------

SERVERS = "http://127.0.0.1:1"


def test_value_options_are_parsed_once_and_refused_naming_what_is_not_built() -> None:
    read = parse_read_options({"servers": SERVERS, "subscribe": "orders", "valueFormat": "AVRO"}, False)
    assert (read.value.format, read.value.subject) == ("avro", "orders-value")  # TopicNameStrategy
    named = {"servers": SERVERS, "subscribe": "a,b", "valueFormat": "avro", "valueSubject": "shared"}
    assert parse_read_options(named, True).value.subject == "shared"
    with pytest.raises(OptionError, match=r"'valueFormat'.*names 2"):
        parse_read_options({"servers": SERVERS, "subscribe": "a,b", "valueFormat": "avro"}, False)
    for name, word in (("protobuf", "Protobuf"), ("jsonschema", "JSON Schema"), ("json", "JSON Schema")):
        with pytest.raises(OptionError, match=f"'{name}': {word} values are not built"):
            parse_read_options({"servers": SERVERS, "subscribe": "a", "valueFormat": name}, False)
    with pytest.raises(OptionError, match="'valueSubject': only with valueFormat 'avro'"):
        parse_read_options({"servers": SERVERS, "subscribe": "a", "valueSubject": "s"}, False)
    write = parse_write_options({"servers": SERVERS, "topic": "out", "valueFormat": "avro"})
    assert write.value.subject == "out-value"
    with pytest.raises(OptionError, match="'valueFormat'"):
        parse_write_options({"servers": SERVERS, "valueFormat": "avro"})  # the topic column: no subject


def test_avro_types_map_as_spark_maps_them_and_back() -> None:
    kind, nullable, _ = spark_type(V2)
    assert not nullable and isinstance(kind, StructType)
    assert kind["qty"].nullable and not kind["note"].nullable
    assert spark_type({"type": "map", "values": ["null", "long"]})[0] == MapType(
        StringType(), LongType(), True
    )
    assert spark_type(["null", "int", "long"])[:2] == (LongType(), True)  # Spark widens int|long
    with pytest.raises(SchemaError, match=r"value.x: the Avro union .* member0"):
        spark_type({"type": "record", "name": "R", "fields": [{"name": "x", "type": ["int", "string"]}]})
    recursive = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(SchemaError, match=r"value\.next: the Avro record Node contains itself"):
        spark_type(recursive)
    # Spark's type to Avro and back is the same type
    written = avro_schema(kind)
    assert spark_type(written)[0] == kind
    assert written["fields"][-1] == {"name": "qty", "type": ["null", "int"], "default": None}


# -- the registry without a session: what the driver asks before Spark runs anything -------------------


def test_a_subject_of_another_schema_type_is_refused_naming_it(raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(1)
    registry = SchemaRegistryClient({"url": raftlog_cluster.urls[0]})
    registry.register_schema(f"{topic}-value", Schema(json.dumps({"type": "object"}), "JSON"))
    options = {"servers": raftlog_cluster.servers, "subscribe": topic, "valueFormat": "avro"}
    with pytest.raises(SchemaError, match=f"subject '{topic}-value' is a JSON schema: valueFormat 'avro'"):
        value_schema(options)


def test_the_sink_registers_its_schema_and_the_registry_refuses_an_incompatible_one(
    raftlog_cluster: SparkTestCluster,
) -> None:
    topic = raftlog_cluster.create_topic(1)
    options = parse_write_options({"servers": raftlog_cluster.servers, "topic": topic, "valueFormat": "avro"})
    first = StructType([StructField("value", StructType([StructField("id", LongType(), False)]), True)])
    registered = register_value(options, first)
    assert registered is not None and register_value(options, first) == registered  # the same id again
    registry = SchemaRegistryClient({"url": raftlog_cluster.urls[2]})
    assert registry.get_latest_version(f"{topic}-value").schema_id == registered.schema_id
    # a nullable column added: ["null", type] with default null, which BACKWARD (the default) accepts
    fields = [*first["value"].dataType, StructField("n", StringType())]
    grown = StructType([StructField("value", StructType(fields), True)])
    assert register_value(options, grown) is not None
    assert registry.get_versions(f"{topic}-value") == [1, 2]
    # a required column added has no default: the registry's 409, before any task runs
    required = StructType([StructField("value", StructType([StructField("x", StringType(), False)]), True)])
    with pytest.raises(RequestFailed) as refused:
        register_value(options, required)
    assert refused.value.status == 409
