"""The source's schema and the Arrow record batches handed to Spark (pure).

Spark checks a yielded ``pyarrow.RecordBatch`` against the schema exactly (names, types, nullability), so
the Arrow schema is derived from the Spark one; timestamps are ``timestamp[us, tz=UTC]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from raftlog_client.blocking import Page

HEADER = StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)])

CREATE_TIME = 0  # timestampType: the producer's timestamp
LOG_APPEND_TIME = 1  # the leader's clock when it appended the record (topic message.timestamp.type)

# The columns of Spark's Kafka source, in its order (headers as with includeHeaders=true). A null key is
# a keyless record, a null value a tombstone, a null header value a header without one.
SCHEMA = StructType(
    [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
        StructField("headers", ArrayType(HEADER, True), True),
    ]
)
ARROW_SCHEMA: pa.Schema = to_arrow_schema(SCHEMA, timezone="UTC")
_HEADERS_TYPE = ARROW_SCHEMA.field("headers").type


def _headers(headers: list[Sequence[Sequence[Any]]]) -> pa.Array:
    if not any(headers):  # the common case: no record has headers; no Python object per record
        empty = pa.array([], _HEADERS_TYPE.value_type)
        offsets = pa.repeat(pa.scalar(0, pa.int32()), len(headers) + 1)
        return pa.ListArray.from_arrays(offsets, empty, _HEADERS_TYPE)
    rows: list[Any] = [[{"key": name, "value": value} for name, value in pairs] for pairs in headers]
    return pa.array(rows, _HEADERS_TYPE)


def _timestamp_types(types: list[int]) -> pa.Array:
    for kind in (CREATE_TIME, LOG_APPEND_TIME):  # a topic keeps one type: skip converting each int
        if types.count(kind) == len(types):
            return pa.repeat(pa.scalar(kind, pa.int32()), len(types))
    return pa.array(types, pa.int32())


def typed(value_type: DataType) -> tuple[StructType, pa.Schema]:
    """The source's schema with the value column of ``value_type`` (nullable: a tombstone is null), and
    its Arrow schema."""
    schema = StructType(
        [StructField("value", value_type, True) if f.name == "value" else f for f in SCHEMA.fields]
    )
    return schema, to_arrow_schema(schema, timezone="UTC")


def record_batch(
    topic: str,
    partition: int,
    page: Page,
    count: int,
    values: pa.Array | None = None,
    schema: pa.Schema = ARROW_SCHEMA,
) -> pa.RecordBatch:
    """The first ``count`` records of ``page`` as a batch of the source's schema; ``values``: the value
    column already typed (``schema``'s), else the values' bytes."""
    if count < len(page.offsets):
        page = Page(*(getattr(page, column.name)[:count] for column in fields(page)))
    millis = pa.array(page.timestamps_ms, pa.int64())
    micros = pc.multiply(millis, pa.scalar(1000, pa.int64())).cast(pa.timestamp("us", tz="UTC"))
    return pa.RecordBatch.from_arrays(
        [
            pa.array(page.keys, pa.binary()),
            pa.array(page.values, pa.binary()) if values is None else values,
            pa.repeat(pa.scalar(topic, pa.string()), count),  # 3 ns a row; a list of the name costs 110
            pa.repeat(pa.scalar(partition, pa.int32()), count),
            pa.array(page.offsets, pa.int64()),
            micros,
            _timestamp_types(page.timestamp_types),
            _headers(page.headers),
        ],
        schema=schema,
    )
