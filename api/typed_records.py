"""Confluent REST Proxy v2's schema formats on the HTTP door: records produced and read as JSON under a
schema of the node's registry (``application/vnd.kafka.avro.v2+json``, ``.jsonschema.v2+json``,
``.protobuf.v2+json``), stored framed in Confluent's wire format (``partitions.registry.framing``), so that
Kafka's clients with Confluent's serializers read and write the same records.

Produce: the body names the key's and the value's schema by text (``key_schema``, ``value_schema``: found or
registered under the topic's subject, ``{topic}-key`` / ``{topic}-value``, Confluent's TopicNameStrategy,
so the subject's compatibility applies) or by id (``key_schema_id``, ``value_schema_id``: registered under
that subject already); every record is encoded by the schema (``ParsedSchema.encode``) and framed before
anything is written, so a record the schema refuses writes nothing of the request. A null key or value is
no key, or a tombstone, as the JSON format's. The answer names the ids, as Confluent's.

Read (a fetch, a consumer instance of the format): each key and value is decoded with the schema its header
names (``partitions.registry.schema_cache``: parsed once per node) into JSON. A key or value that is not
framed, names an id the registry does not have, a schema of another type, or does not decode is Confluent's
answer to its consumer's failed poll: the records before it are answered, and a read starting at it is
500/50002 naming its partition and offset ("seek past the record"), never skipped.

Errors are Confluent REST Proxy's codes (``io.confluent.kafkarest.Errors``): 42201/42202 a key or value
without a schema, 42203 a record the schema refuses, 42205 a schema that does not parse, 42207 a schema the
registry refuses or does not hold under the subject.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pybase64
from aiohttp import web

from api import access, state
from api.access import READ, WRITE
from api.errors import (
    BadRequest,
    InvalidEmbeddedSchema,
    KeySchemaMissing,
    RecordConversionFailed,
    RecordNotDeserializable,
    SchemaSerializationFailed,
    ValueSchemaMissing,
)
from api.schemas import (
    RECORDS_MAX,
    TIMESTAMP_TYPE_NAMES,
    Flavour,
    ParsedRecord,
    ProduceRequest,
    parse_produce,
    reject_unknown,
    require_int,
    require_object,
)
from partitions.errors import RegistryError
from partitions.registry.framing import NotFramed, frame, message_indexes, unframe
from partitions.registry.schema_cache import Registered, SchemaCache
from partitions.registry.schema_types import AVRO, JSON, PROTOBUF, InvalidRecord, InvalidSchema, ParsedSchema
from partitions.registry.service import RegistryService, SchemaInput
from raftlog.errors import InvariantViolation
from raftlog.storage.batch import Record
from raftlog_contract import SCHEMA_FORMATS

SCHEMA_TYPES = {"avro": AVRO, "jsonschema": JSON, "protobuf": PROTOBUF}  # a format's registry type
FORMAT_OF_MEDIA = {media: name for name, media in SCHEMA_FORMATS.items()}
ENCODE_INLINE_RECORDS_MAX = 100  # a produce of more records is encoded on a thread
RENDER_INLINE_RECORDS_MAX = 100  # a read of more records is decoded and rendered on a thread
SCHEMAS = web.AppKey("raftlog_schemas", SchemaCache)
# what a schema format's produce asks of the caller's ACLs beyond WRITE on the topic (as its own calls of
# the registry would: lookupSchema, registerSchema)
SUBJECT_NEEDS = "a schema format's: READ subject {topic}-key / {topic}-value, WRITE it to register a schema"
_SCHEMA_FIELDS = frozenset({"key_schema", "key_schema_id", "value_schema", "value_schema_id"})


def schema_cache(node: Any) -> SchemaCache:
    """The node's cache of parsed schemas, asking its cluster-wide registry service (at call time: the
    node's cluster is built after the app)."""

    async def by_id(schema_id: int) -> Any:
        return await node.cluster.registry.call(RegistryService.schema, schema_id, "", "", True)

    return SchemaCache(by_id)


def media_format(content_type: str) -> str | None:
    """The schema format of a media type (``avro``, ``jsonschema``, ``protobuf``), None for the others."""
    return FORMAT_OF_MEDIA.get(content_type.strip().lower())


# -- produce -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SchemaProduce:
    """A schema format's produce body, checked: the records' JSON keys and values, and each schema as text
    or id (None: not given)."""

    keys: list[Any]
    values: list[Any]
    shell: ProduceRequest  # the records with no key or value yet: partitions, headers, timestamps
    key_schema: str | None
    key_schema_id: int | None
    value_schema: str | None
    value_schema_id: int | None


def parse_schema_produce(body: Any, partition: int | None) -> SchemaProduce:
    """A produce body of a schema format: Confluent's fields and the JSON format's record fields (a
    record's ``value`` may be left out: null)."""
    obj = require_object(body, "body")
    reject_unknown(obj, {"records", "producer_id", "sequence", *_SCHEMA_FIELDS}, "")
    records = obj.get("records")
    if not isinstance(records, list) or not 1 <= len(records) <= RECORDS_MAX:
        raise BadRequest(f"records: must be a list of 1 to {RECORDS_MAX} records")
    keys, values, shells = [], [], []
    for i, item in enumerate(records):
        record = require_object(item, f"records[{i}]")
        keys.append(record.get("key"))
        values.append(record.get("value"))
        shells.append({**record, "key": None, "value": None})
    schemas: dict[str, Any] = {}
    for name in ("key", "value"):
        text, schema_id = obj.get(f"{name}_schema"), obj.get(f"{name}_schema_id")
        if text is not None and schema_id is not None:
            raise BadRequest(f"{name}_schema, {name}_schema_id: give one, not both")
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise BadRequest(f"{name}_schema: must be the schema's text")
        schemas[f"{name}_schema"] = text
        schemas[f"{name}_schema_id"] = (
            None if schema_id is None else require_int(schema_id, f"{name}_schema_id")
        )
    rest = {k: v for k, v in obj.items() if k not in _SCHEMA_FIELDS}
    shell = parse_produce({**rest, "records": shells}, Flavour.JSON, partition)
    return SchemaProduce(keys, values, shell, **schemas)


async def produce_request(
    request: web.Request, media_format_name: str, topic: str, partition: int | None
) -> tuple[ProduceRequest, int | None, int | None]:
    """The records of a schema format's produce body, encoded and framed, and the key's and value's schema
    ids (None: none given). Every record is encoded before the registry is asked to hold a schema, so a
    request refused for its records (42201, 42202, 42203) registers nothing either."""
    body = parse_schema_produce(await state.json_of(request, await state.body(request)), partition)
    schema_type = SCHEMA_TYPES[media_format_name]
    key = await _named(request, schema_type, topic, True, body.key_schema, body.key_schema_id)
    value = await _named(request, schema_type, topic, False, body.value_schema, body.value_schema_id)
    key_parsed, value_parsed = (None if n is None else n.parsed for n in (key, value))
    if len(body.keys) > ENCODE_INLINE_RECORDS_MAX:
        payloads = await asyncio.to_thread(encode_records, body, key_parsed, value_parsed)
    else:
        payloads = encode_records(body, key_parsed, value_parsed)
    key_id, value_id = await _held(request, key), await _held(request, value)
    framed = frame_records(body, payloads, key_id, value_id, schema_type == PROTOBUF)
    return framed, key_id, value_id


@dataclass(frozen=True, slots=True)
class Named:
    """A schema a produce names for its keys or values, parsed: by id (``registered``) or by its text
    (``text``, not yet known to be held under ``subject``)."""

    subject: str
    schema_type: str
    parsed: ParsedSchema
    text: str | None = None
    registered: Registered | None = None


async def _named(
    request: web.Request, schema_type: str, topic: str, is_key: bool, text: str | None, schema_id: int | None
) -> Named | None:
    """The schema a produce names for the topic's subject (``{topic}-key`` / ``{topic}-value``, Confluent's
    TopicNameStrategy), found by id or parsed from its text; nothing is registered yet. With ACLs enforced
    the caller asks the registry as itself (``SUBJECT_NEEDS``): READ on the subject first."""
    if text is None and schema_id is None:
        return None
    subject = f"{topic}-{'key' if is_key else 'value'}"
    access.authorize(request, access.SUBJECT, READ, subject)
    cache = request.app[SCHEMAS]
    if schema_id is None:
        try:
            return Named(subject, schema_type, await cache.parse_text(schema_type, str(text)), text=str(text))
        except InvalidSchema as exc:
            raise InvalidEmbeddedSchema(f"Invalid schema: {exc}") from None
    try:
        registered = await cache.registered(schema_id)
    except RegistryError as exc:
        raise _refused(exc, f"Error when fetching schema by id. schemaId = {schema_id}") from None
    if registered.view.schema_type != schema_type:
        raise SchemaSerializationFailed(
            f"Error serializing message. Schema {schema_id} is of type {registered.view.schema_type}, "
            f"not {schema_type}"
        )
    return Named(subject, schema_type, registered.parsed, registered=registered)


async def _held(request: web.Request, named: Named | None) -> int | None:
    """The id of the schema ``named`` as its subject holds it, as Confluent's ``SchemaManagerImpl`` finds
    it: an id must be registered under the subject already; a text is looked up under it and registered
    when it is not there (WRITE on the subject, with ACLs enforced), so the subject's compatibility
    applies."""
    if named is None:
        return None
    registry = state.node(request).cluster.registry
    if named.registered is not None:
        view = named.registered.view
        schema = SchemaInput(view.schema, view.schema_type, view.references)
        try:
            await registry.call(RegistryService.lookup, named.subject, schema, False, False)
        except RegistryError as exc:
            what = f"Error when fetching schema version. subject = {named.subject}, schemaId = {view.id}"
            raise _refused(exc, what) from None
        return named.registered.id
    schema = SchemaInput(str(named.text), named.schema_type)
    try:
        found = await registry.call(RegistryService.lookup, named.subject, schema, False, False)
    except RegistryError as exc:
        if exc.error_code not in (40401, 40403):  # the subject, or the schema under it, not found
            raise _refused(exc, f"Error when registering schema. subject = {named.subject}") from None
        access.authorize(request, access.SUBJECT, WRITE, named.subject)
        try:
            found = await registry.call(RegistryService.register, named.subject, schema, False, 0, 0)
        except RegistryError as refused:
            raise _refused(refused, f"Error when registering schema. subject = {named.subject}") from None
    return int(found.id)


def _refused(exc: RegistryError, what: str) -> Exception:
    """A registry refusal as Confluent's REST Proxy words it: an invalid schema 42205, any other refusal
    of the request 42207; the registry's own unavailability (5xx) as it is."""
    if exc.status >= 500:
        return exc
    if exc.error_code in (42201, 422):
        return InvalidEmbeddedSchema(f"Invalid schema: {exc.reason}")
    return SchemaSerializationFailed(f"Error serializing message. {what}\n{exc.reason}")


Payload = tuple[tuple[int, ...], bytes]  # Protobuf's message indexes (() for the others), the payload


def encode_records(
    body: SchemaProduce, key: ParsedSchema | None, value: ParsedSchema | None
) -> list[tuple[Payload | None, Payload | None]]:
    """Every record's key and value encoded by its schema (pure); a record that is not data of its schema
    refuses the whole request (42203), a key or value without a schema too (42201, 42202)."""
    return [
        (
            _encoded(body.keys[i], key, f"records[{i}].key", True),
            _encoded(body.values[i], value, f"records[{i}].value", False),
        )
        for i in range(len(body.keys))
    ]


def _encoded(data: Any, schema: ParsedSchema | None, where: str, is_key: bool) -> Payload | None:
    if data is None:
        return None
    if schema is None:
        if is_key:
            raise KeySchemaMissing("Request includes keys but does not include key schema")
        raise ValueSchemaMissing("Request includes values but does not include value schema")
    try:
        return schema.encode(data)
    except InvalidRecord as exc:
        raise RecordConversionFailed(f"Conversion of JSON to Object failed: {where}: {exc}") from None


def frame_records(
    body: SchemaProduce,
    payloads: list[tuple[Payload | None, Payload | None]],
    key_id: int | None,
    value_id: int | None,
    protobuf: bool,
) -> ProduceRequest:
    """The records with their keys and values framed under the schema ids (pure)."""

    def framed(payload: Payload | None, schema_id: int | None) -> bytes | None:
        if payload is None:
            return None
        if schema_id is None:
            raise InvariantViolation("a key or value was encoded by a schema without an id")
        indexes, data = payload
        return frame(schema_id, data, indexes if protobuf else None)

    records = [
        ParsedRecord(
            framed(key, key_id), framed(value, value_id), shell.headers, shell.partition, shell.timestamp_ms
        )
        for shell, (key, value) in zip(body.shell.records, payloads, strict=True)
    ]
    return ProduceRequest(records, body.shell.producer_id, body.shell.sequence)


def with_schema_ids(answer: dict[str, Any], key_id: int | None, value_id: int | None) -> dict[str, Any]:
    """A produce answer with the schema ids, as Confluent's ``ProduceResponse``."""
    return {**answer, "key_schema_id": key_id, "value_schema_id": value_id}


# -- read ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Undecodable:
    """The first record of a partition a schema format's reader cannot decode, and why."""

    topic: str
    partition: int
    offset: int
    is_key: bool
    reason: str

    def error(self) -> RecordNotDeserializable:
        which = "key" if self.is_key else "value"
        return RecordNotDeserializable(
            f"Error deserializing {which} for partition {self.topic}-{self.partition} at offset "
            f"{self.offset}. If needed, please seek past the record to continue consumption. ({self.reason})"
        )


@dataclass(frozen=True, slots=True)
class Rendered:
    """A read's rows, and per partition whose records stopped at one that does not decode, that record."""

    rows: list[str]
    undecodable: list[Undecodable]


async def render(
    cache: SchemaCache, media_format_name: str, parts: Sequence[tuple[str, int, Sequence[Record]]]
) -> Rendered:
    """The rows of every part's records in order, each partition's up to its first record that does not
    decode (``Undecodable``). The schemas the records name are found first (each id once, from the node's
    cache or the registry), then the records decoded and rendered, on a thread when they are many."""
    schemas: dict[int, Registered | str] = {}  # an id: its schema, or why there is none
    for _, _, records in parts:
        for record in records:
            for data in (record.key, record.value):
                if data is None or len(data) < 5 or data[0] != 0:
                    continue
                schema_id = int.from_bytes(data[1:5], "big")
                if schema_id in schemas:
                    continue
                try:
                    schemas[schema_id] = await cache.registered(schema_id)
                except RegistryError as exc:
                    if exc.status >= 500:
                        raise
                    schemas[schema_id] = f"Error retrieving schema for id {schema_id}: {exc.reason}"
    count = sum(len(records) for _, _, records in parts)
    schema_type = SCHEMA_TYPES[media_format_name]
    if count > RENDER_INLINE_RECORDS_MAX:
        return await asyncio.to_thread(render_rows, schemas, schema_type, media_format_name, parts)
    return render_rows(schemas, schema_type, media_format_name, parts)


def render_rows(
    schemas: dict[int, Registered | str],
    schema_type: str,
    media_format_name: str,
    parts: Sequence[tuple[str, int, Sequence[Record]]],
) -> Rendered:
    """``render``'s rows once the schemas are found (pure)."""
    rows: list[str] = []
    undecodable: list[Undecodable] = []
    for topic, partition, records in parts:
        for record in records:
            try:
                key = _decoded(record.key, schemas, schema_type)
            except _Failed as failed:
                undecodable.append(Undecodable(topic, partition, record.offset, True, str(failed)))
                break
            try:
                value = _decoded(record.value, schemas, schema_type)
            except _Failed as failed:
                undecodable.append(Undecodable(topic, partition, record.offset, False, str(failed)))
                break
            row = {
                "topic": topic,
                "partition": partition,
                "offset": record.offset,
                "timestamp": record.timestamp_ms,
                "timestamp_type": TIMESTAMP_TYPE_NAMES[record.timestamp_type],
                "key": key,
                "value": value,
                "headers": [
                    {"key": name, "value": None if data is None else pybase64.b64encode_as_string(data)}
                    for name, data in record.headers
                ],
                "format": media_format_name,
            }
            rows.append(json.dumps(row))
    return Rendered(rows, undecodable)


class _Failed(Exception):
    pass


def _decoded(data: bytes | None, schemas: dict[int, Registered | str], schema_type: str) -> Any:
    if data is None:
        return None
    try:
        framed = unframe(data)
        schema = schemas.get(framed.schema_id)
        if schema is None or isinstance(schema, str):
            raise _Failed(schema or f"Error retrieving schema for id {framed.schema_id}")
        if schema.view.schema_type != schema_type:
            raise _Failed(
                f"schema {framed.schema_id} is of type {schema.view.schema_type}, not {schema_type}"
            )
        if schema_type == PROTOBUF:
            indexes, payload = message_indexes(framed.body)
            return schema.parsed.decode(payload, indexes)
        return schema.parsed.decode(framed.body)
    except (NotFramed, InvalidRecord) as exc:
        raise _Failed(str(exc)) from None
