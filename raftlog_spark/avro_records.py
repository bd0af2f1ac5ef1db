"""Values in Confluent's wire format under Avro schemas of the cluster's registry: the reader schema a
query's columns come from, each record decoded with the schema its own id names and resolved to the
reader's (Avro's schema evolution, done by fastavro), and rows encoded and framed for the sink.

Confluent's wire format: the magic byte 0, the schema id as 4 bytes big-endian, the Avro payload. The
server's reading of it is ``partitions/registry/framing.py``, which this package may not import (it
talks to the cluster over the public API only, a test checks); for Avro the header is these 5 bytes.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import fastavro
from pyspark.sql.types import DataType

from raftlog_client.blocking import BlockingClient
from raftlog_spark.avro_types import Convert, spark_type, to_avro_value
from raftlog_spark.errors import BadRecord, SchemaError

MAGIC = 0
_HEADER = struct.Struct(">bI")  # the magic byte, the schema id
AVRO = "AVRO"
REFERENCE_DEPTH_MAX = 100


def frame(schema_id: int, payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, schema_id) + payload


def unframe(data: bytes) -> tuple[int, memoryview]:
    """The schema id and the payload of a framed value; ``ValueError`` saying why when it is not one."""
    if len(data) < _HEADER.size:
        raise ValueError(f"{len(data)} bytes: shorter than the {_HEADER.size}-byte header of a framed value")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError(f"Unknown magic byte! (the first byte is {data[0]}, not {MAGIC})")
    return schema_id, memoryview(data)[_HEADER.size :]


@dataclass(frozen=True, slots=True)
class Registered:
    """An Avro schema as registered: its id, its JSON value, and the named types of its references (full
    name -> JSON), which fastavro and the Spark types need parsed first."""

    schema_id: int
    schema: Any
    named: tuple[tuple[str, Any], ...]  # in dependency order


def _avro_json(answer: dict[str, Any], what: str) -> Any:
    kind = answer.get("schemaType", AVRO)
    if kind != AVRO:
        raise SchemaError(
            f"{what} is a {kind} schema: valueFormat 'avro' reads Avro schemas only (JSON Schema and "
            "Protobuf values are not built; read the value column as binary)"
        )
    return json.loads(answer["schema"])


def _references(client: BlockingClient, answer: dict[str, Any], depth: int = 0) -> list[tuple[str, Any]]:
    """The named types an answer's references define, transitively, each after those it refers to."""
    out: list[tuple[str, Any]] = []
    for reference in answer.get("references") or []:
        if depth > REFERENCE_DEPTH_MAX:
            raise SchemaError(f"references nested deeper than {REFERENCE_DEPTH_MAX} at {reference['name']!r}")
        found = client.subject_version(reference["subject"], reference["version"])
        what = f"reference {reference['name']!r} ({reference['subject']} version {reference['version']})"
        out += _references(client, found, depth + 1)
        out.append((reference["name"], _avro_json(found, what)))
    return out


def latest(client: BlockingClient, subject: str) -> Registered:
    """The latest version of ``subject``: the reader schema of a query."""
    answer = client.subject_version(subject, "latest")
    schema = _avro_json(answer, f"subject {subject!r}")
    return Registered(int(answer["id"]), schema, tuple(_references(client, answer)))


def by_id(client: BlockingClient, schema_id: int) -> Registered:
    answer = client.schema_by_id(schema_id)
    schema = _avro_json(answer, f"schema id {schema_id}")
    return Registered(schema_id, schema, tuple(_references(client, answer)))


def column_type(registered: Registered, subject: str) -> DataType:
    """The Spark type of the value column (always nullable: a tombstone is a null value)."""
    kind, _, _ = spark_type(registered.schema, dict(registered.named), where=f"{subject} (value)")
    return kind


def _parsed(registered: Registered) -> Any:
    named: dict[str, Any] = {}
    for _, schema in registered.named:
        fastavro.parse_schema(schema, named)
    return fastavro.parse_schema(registered.schema, named)


class ValueDecoder:
    """Decodes one query's values: the reader schema parsed once, each writer schema fetched and parsed
    once per id (``fetch``: the registry's schema of an id)."""

    def __init__(self, reader: Registered, fetch: Callable[[int], Registered]) -> None:
        self.reader = _parsed(reader)
        _, _, self.convert = spark_type(reader.schema, dict(reader.named))
        self.fetch = fetch
        self.writers: dict[int, Any] = {}

    def decode(self, value: bytes | None) -> Any:
        """The value as pyarrow takes it for the column's type; ``BadRecord`` (the caller names the
        record) when it is not a framed value of an Avro schema the reader's resolves."""
        if value is None:
            return None  # a tombstone
        try:
            schema_id, payload = unframe(value)
        except ValueError as exc:
            raise BadRecord(f"the value is not in Confluent's wire format: {exc}") from None
        writer = self.writers.get(schema_id)
        if writer is None:
            writer = self.writers[schema_id] = _parsed(self.fetch(schema_id))
        try:
            datum = fastavro.schemaless_reader(io.BytesIO(payload), writer, self.reader)
        except Exception as exc:  # fastavro's errors: EOFError, SchemaResolutionError, ValueError...
            raise BadRecord(
                f"the value does not decode with schema id {schema_id} read as the subject's "
                f"latest schema: {type(exc).__name__}: {exc}"
            ) from exc
        convert: Convert = self.convert
        return datum if convert is None else convert(datum)


class ValueEncoder:
    """Encodes the sink's values with the schema registered for them."""

    def __init__(self, schema_id: int, schema: Any, kind: DataType) -> None:
        self.schema_id = schema_id
        self.schema = fastavro.parse_schema(schema)
        self.convert = to_avro_value(kind)

    def encode(self, value: Any) -> bytes:
        out = io.BytesIO()
        datum = value if self.convert is None else self.convert(value)
        try:
            fastavro.schemaless_writer(out, self.schema, datum)
        except (ValueError, TypeError) as exc:
            raise BadRecord(f"the value does not encode in its Avro schema: {exc}") from exc
        return frame(self.schema_id, out.getvalue())
