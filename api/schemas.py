"""Request parsing and response rendering of the client and admin APIs (pure: no I/O, no event loop).

Every function here either returns a fully validated value or raises a typed ``ApiError`` whose message
names the offending field (``records[2].value: ...``), so a bad request is refused before anything is
written.

Record encodings ("flavours"), chosen by the request's ``Content-Type`` (produce) or ``Accept`` (fetch):

- JSON (``application/vnd.kafka.json.v2+json`` or ``application/json``): ``key`` and ``value`` are any JSON
  and are stored as their compact UTF-8 JSON text (``"abc"`` is stored as the 5 bytes ``"abc"``, like
  Confluent's JSON embedded format; a key is hashed on those bytes); ``null`` is no key, or no value (a
  tombstone), as in Confluent's proxies. Header values are strings, stored as UTF-8, or null.
- binary (``application/vnd.kafka.binary.v2+json``): ``key``, ``value`` and header values are base64
  strings of the raw bytes, or null.

A produced record may carry ``timestamp`` (ms since the epoch, CreateTime); without one it gets the
entry node's clock. A topic whose ``message.timestamp.type`` is LogAppendTime has the leader's clock
instead, and a fetched record says which with ``timestamp_type``.

Headers are given either as a list of ``{"key": str, "value": ...}`` (order and repeats kept) or as an
object ``{"name": value}``; they are always returned as the list form.

Fetch in the JSON flavour renders a record as JSON when its key and value are null or valid UTF-8 JSON
other than the text ``null`` (which would read as null) and its header values null or valid UTF-8; any
other record is rendered in the binary flavour. Every fetched record says which with
``"format": "json" | "binary"``, so a client never has to guess, and null always means absent.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import pybase64

from api.errors import BadRequest, NotAcceptable, UnsupportedMediaType
from api.negotiation import names
from partitions.data.service import HIGH_WATERMARK
from partitions.names import check_group_name, check_topic_name, check_user_topic_name
from raftlog.storage.batch import Record, TimestampType
from raftlog.storage.errors import InvalidRecord
from raftlog_contract import BINARY_V2, JSON_V2, LEGACY_RECORD_BATCH, PLAIN_JSON, RECORD_BATCH

INT64_MAX = 2**63 - 1
RECORDS_MAX = 10_000  # records in one produce request
HEADERS_MAX = 1_000  # headers on one record
HEADERS_PER_REQUEST_MAX = 10_000  # headers on all the records of one produce request
JSON_VALUES_MAX = 200_000  # values (objects, lists, strings, numbers) in a JSON body other than a produce
OFFSETS_MAX = 10_000  # entries in one consumer-offset commit


class Flavour(enum.Enum):
    JSON = "json"
    BINARY = "binary"


RECORD_CONTENT_TYPES = {JSON_V2: Flavour.JSON, PLAIN_JSON: Flavour.JSON, BINARY_V2: Flavour.BINARY}


def request_flavour(content_type: str) -> Flavour:
    """The flavour of a produce body; anything but the three record content types is refused (415)."""
    flavour = RECORD_CONTENT_TYPES.get(content_type.strip().lower())
    if flavour is None:
        if is_record_batch(content_type):
            raise UnsupportedMediaType(
                content_type, "a record batch goes to one partition: POST /topics/{topic}/partitions/{p}"
            )
        refuse_legacy_batch(content_type)
        raise UnsupportedMediaType(content_type)
    return flavour


def refuse_legacy_accept(accept: str | None) -> None:
    """An ``Accept`` asking for the record-batch type of the format before v2 names what replaced it."""
    if names(accept, LEGACY_RECORD_BATCH):
        raise NotAcceptable(LEGACY_RECORD_BATCH, _LEGACY_HINT)


def is_record_batch(content_type: str) -> bool:
    """The body is one Kafka RecordBatch v2 encoded by the producer (any Kafka producer's batch, or
    ``raftlog.storage.batch.encode_batch``)."""
    return content_type.strip().lower() == RECORD_BATCH


def refuse_legacy_batch(media_type: str) -> None:
    """The record-batch type of the format stored before Kafka's RecordBatch v2 names what replaced it."""
    if media_type.strip().lower() == LEGACY_RECORD_BATCH:
        raise UnsupportedMediaType(media_type, _LEGACY_HINT)


_LEGACY_HINT = f"record batches are Kafka's RecordBatch v2 (magic 2) now: use {RECORD_BATCH}"


def require_json_body(content_type: str) -> None:
    """Admin and consumer bodies are plain JSON; the record content types are accepted too."""
    request_flavour(content_type)


def record_flavour(media: str) -> Flavour:
    """The flavour of records answered in a negotiated media type: binary for the binary type, else JSON."""
    return Flavour.BINARY if media == BINARY_V2 else Flavour.JSON


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_document(raw: bytes) -> Any:
    """A JSON body's document, refused (400) past ``JSON_VALUES_MAX`` values: every route's entries are
    bounded well below it, and a document is sent back from the JSON worker (``api.json_work``) whole."""
    document = parse_json(raw)
    count, pending = 0, [document]
    while pending:
        value = pending.pop()
        count += 1
        if count > JSON_VALUES_MAX:
            raise BadRequest(f"body: more than {JSON_VALUES_MAX} JSON values")
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return document


def parse_json(raw: bytes) -> Any:
    if not raw:
        raise BadRequest("body: empty; a JSON document is required")
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
    except UnicodeDecodeError as exc:
        raise BadRequest(f"body: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except (ValueError, RecursionError) as exc:
        raise BadRequest(f"body: malformed JSON: {exc}") from None


def dump_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# -- field checks --------------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def require_object(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f"{field}: must be an object, got {_type_name(value)}")
    return value


def reject_unknown(obj: Mapping[str, Any], allowed: set[str], field: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        where = f"{field}." if field else ""
        raise BadRequest(f"{where}{unknown[0]}: unknown field (allowed: {', '.join(sorted(allowed))})")


def require_int(value: Any, field: str, minimum: int = 0, maximum: int = INT64_MAX) -> int:
    if type(value) is not int:
        raise BadRequest(f"{field}: must be an integer, got {_type_name(value)}")
    if not minimum <= value <= maximum:
        raise BadRequest(f"{field}: {value} is outside [{minimum}, {maximum}]")
    return value


def require_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f"{field}: must be true or false, got {_type_name(value)}")
    return value


def path_partition(raw: str) -> int:
    if not raw.isascii() or not raw.isdigit() or len(raw) > 10:
        raise BadRequest(f"partition: {raw!r} is not a non-negative integer")
    return int(raw)


def query_int(
    query: Mapping[str, str], name: str, default: int | None, minimum: int, maximum: int
) -> int | None:
    """An integer query parameter in ``[minimum, maximum]``; ``default`` when absent (None = optional)."""
    given = _query_value(query, name)
    if given is None:
        return default
    raw = given.strip()
    digits = raw[1:] if raw.startswith("-") else raw
    if not digits.isascii() or not digits.isdigit() or len(digits) > 19:
        raise BadRequest(f"query parameter {name}: {given!r} is not an integer")
    value = int(raw)
    if not minimum <= value <= maximum:
        raise BadRequest(f"query parameter {name}: {value} is outside [{minimum}, {maximum}]")
    return value


def query_bool(query: Mapping[str, str], name: str, default: bool) -> bool:
    """``true`` or ``false`` (any case); ``default`` when absent."""
    raw = query_str(query, name)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise BadRequest(f"query parameter {name}: {raw!r} is not true or false")
    return raw.strip().lower() == "true"


def query_str(query: Mapping[str, str], name: str) -> str | None:
    given = _query_value(query, name)
    if given == "":
        raise BadRequest(f"query parameter {name}: empty")
    return given


def _query_value(query: Mapping[str, str], name: str) -> str | None:
    """A query parameter's one value (a multidict's repeats refused), None when absent."""
    getall = getattr(query, "getall", None)
    values = getall(name, []) if getall is not None else ([query[name]] if name in query else [])
    if len(values) > 1:
        raise BadRequest(f"query parameter {name}: given {len(values)} times")
    return str(values[0]) if values else None


# -- produce -------------------------------------------------------------------------------------------


class ParsedRecord(NamedTuple):  # a tuple: built once per record of every produce request
    key: bytes | None
    value: bytes | None  # None: a tombstone
    headers: tuple[tuple[str, bytes | None], ...]
    partition: int | None
    timestamp_ms: int | None = None  # None: the entry node's clock


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    records: list[ParsedRecord]
    producer_id: int | None
    sequence: int | None


_b64decode = pybase64.b64decode  # SIMD: ~10x CPython's binascii on 1 KiB


def _decode_base64(value: Any, field: str) -> bytes:
    if not isinstance(value, str):
        raise BadRequest(f"{field}: must be a base64 string, got {_type_name(value)}")
    try:
        return pybase64.b64decode(value, validate=True)  # SIMD: ~10x CPython's binascii on 1 KiB
    except ValueError:  # binascii.Error: a character outside the alphabet, or wrong padding
        raise InvalidRecord(f"{field}: not valid base64") from None


def _encode_field(value: Any, flavour: Flavour, field: str, dump: Callable[[Any], bytes]) -> bytes | None:
    if value is None:
        return None
    if flavour is Flavour.BINARY:
        return _decode_base64(value, field)
    return dump(value)


def _headers(value: Any, flavour: Flavour, field: str) -> tuple[tuple[str, bytes | None], ...]:
    """A record's headers, each checked; where an error is, is named only when there is one (a request
    may carry ``HEADERS_PER_REQUEST_MAX`` of them)."""
    if value is None:
        return ()
    if isinstance(value, dict):
        pairs: list[tuple[Any, Any]] = list(value.items())
    elif isinstance(value, list):
        pairs = []
        for i, entry in enumerate(value):
            if type(entry) is not dict or len(entry) != 2 or "key" not in entry or "value" not in entry:
                entry = require_object(entry, f"{field}[{i}]")
                reject_unknown(entry, {"key", "value"}, f"{field}[{i}]")
                raise BadRequest(f"{field}[{i}]: needs both key and value")
            pairs.append((entry["key"], entry["value"]))
    else:
        raise BadRequest(f"{field}: must be a list of {{key, value}} or an object, got {_type_name(value)}")
    if len(pairs) > HEADERS_MAX:
        raise BadRequest(f"{field}: at most {HEADERS_MAX} headers per record")
    out: list[tuple[str, bytes | None]] = []
    binary = flavour is Flavour.BINARY
    for i, (key, header_value) in enumerate(pairs):
        if type(key) is not str:
            raise BadRequest(f"{_header_at(value, field, i, key)}: header key must be a string")
        if header_value is None:
            out.append((key, None))
        elif binary:
            out.append((key, _decode_base64(header_value, _header_at(value, field, i, key))))
        elif type(header_value) is str:
            out.append((key, header_value.encode("utf-8", "surrogatepass")))
        else:
            raise BadRequest(
                f"{_header_at(value, field, i, key)}: header value must be a string or null, "
                f"got {_type_name(header_value)}"
            )
    return tuple(out)


def _header_at(headers: Any, field: str, index: int, key: Any) -> str:
    """Where a header's value is, as an error names it."""
    return f"{field}.{key}" if isinstance(headers, dict) else f"{field}[{index}].value"


_new_tuple = tuple.__new__


def parse_produce(
    body: Any, flavour: Flavour, partition: int | None = None, dump: Callable[[Any], bytes] = dump_json
) -> ProduceRequest:
    """Validate a produce body; ``partition`` is the path's partition for the partition endpoint. The
    JSON flavour's keys and values are written as their text by ``dump`` (``dump_json``, or a faster
    writer of the same text, ``api.produce_encoding``). One pass over the records: each is checked and its
    key, value and headers made into the bytes the batch holds (``ParsedRecord``, which
    ``raftlog.storage.batch.encode_batch`` takes as it is)."""
    obj = require_object(body, "body")
    reject_unknown(obj, {"records", "producer_id", "sequence"}, "")
    records = obj.get("records")
    if not isinstance(records, list):
        raise BadRequest(f"records: must be a list, got {_type_name(records)}")
    if not 1 <= len(records) <= RECORDS_MAX:
        raise BadRequest(f"records: must hold 1 to {RECORDS_MAX} records, got {len(records)}")
    producer_id = obj.get("producer_id")
    sequence = obj.get("sequence")
    if (producer_id is None) != (sequence is None):
        raise BadRequest("producer_id, sequence: give both or neither")
    if producer_id is not None:
        require_int(producer_id, "producer_id")
        require_int(sequence, "sequence")
    parsed: list[ParsedRecord] = []
    append = parsed.append
    binary = flavour is Flavour.BINARY
    headers_count = 0
    for i, item in enumerate(records):
        # The common shapes, {"value": ...} and {"key": ..., "value": ...} with no headers, partition or
        # timestamp, checked without the general path's per-field work (and built as a plain tuple); a
        # field they refuse (not base64) goes on to the general path, which names it
        if type(item) is dict and 1 <= len(item) <= 2 and "value" in item:
            key = item.get("key")
            if len(item) == 1 or "key" in item:
                value = item["value"]
                if not binary:
                    fields = (None if key is None else dump(key), None if value is None else dump(value))
                    append(_new_tuple(ParsedRecord, (*fields, (), partition, None)))
                    continue
                if type(value) is str and (key is None or type(key) is str):
                    decoded: tuple[bytes | None, bytes] | None
                    try:
                        decoded = (
                            None if key is None else _b64decode(key, validate=True),
                            _b64decode(value, validate=True),
                        )
                    except ValueError:  # binascii.Error: the general path below refuses it by name
                        decoded = None
                    if decoded is not None:
                        append(_new_tuple(ParsedRecord, (*decoded, (), partition, None)))
                        continue
        where = f"records[{i}]"
        record = require_object(item, where)
        reject_unknown(record, {"key", "value", "partition", "headers", "timestamp"}, where)
        if "value" not in record:
            raise BadRequest(f"{where}.value: missing (null for a tombstone)")
        key = record.get("key")
        timestamp = record.get("timestamp")
        if timestamp is not None:
            require_int(timestamp, f"{where}.timestamp")
        chosen = record.get("partition")
        if chosen is not None:
            require_int(chosen, f"{where}.partition", maximum=2**31 - 1)
            if partition is not None and chosen != partition:
                raise BadRequest(
                    f"{where}.partition: {chosen} differs from partition {partition} in the path"
                )
        headers = _headers(record.get("headers"), flavour, f"{where}.headers")
        headers_count += len(headers)
        if headers_count > HEADERS_PER_REQUEST_MAX:
            raise BadRequest(f"{where}.headers: at most {HEADERS_PER_REQUEST_MAX} headers in one request")
        append(
            ParsedRecord(
                key=None if key is None else _encode_field(key, flavour, f"{where}.key", dump),
                value=_encode_field(record["value"], flavour, f"{where}.value", dump),
                headers=headers,
                partition=partition if partition is not None else chosen,
                timestamp_ms=timestamp,
            )
        )
    return ProduceRequest(parsed, producer_id, sequence)


def produce_entry(partition: int, offset: int) -> dict[str, Any]:
    return {"partition": partition, "offset": offset, "error_code": None, "error": None}


_PRODUCED_ENTRY = '{"partition": %d, "offset": %d, "error_code": null, "error": null}'


def batch_produced_answer(partition: int, base_offset: int, count: int) -> bytes:
    """The answer to a produced record batch: its base offset and count (record i has offset
    ``base_offset + i``), as a Kafka produce response gives a base offset per partition."""
    return b'{"partition": %d, "base_offset": %d, "count": %d}' % (partition, base_offset, count)


def produce_answer(partition: int, base_offset: int, count: int) -> bytes:
    """The JSON answer to a produce of ``count`` records appended from ``base_offset``: the same text as
    ``json.dumps({"offsets": [produce_entry(...) for each record]})`` without a dict per record."""
    entries = ", ".join(
        _PRODUCED_ENTRY % (partition, offset) for offset in range(base_offset, base_offset + count)
    )
    return ('{"offsets": [' + entries + "]}").encode("ascii")


def produce_error_entry(partition: int, error_code: int, message: str) -> dict[str, Any]:
    return {"partition": partition, "offset": None, "error_code": error_code, "error": message}


# -- fetch ---------------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return pybase64.b64encode_as_string(data)


def _as_json(data: bytes) -> tuple[bool, Any]:
    try:
        return True, json.loads(data.decode("utf-8"), parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False, None


TIMESTAMP_TYPE_NAMES = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


def _json_field(data: bytes | None) -> tuple[bool, Any]:
    """(renderable, value): null as null; JSON text other than ``null`` as its value."""
    if data is None:
        return True, None
    ok, value = _as_json(data)
    return ok and value is not None, value


def render_record(topic: str, partition: int, record: Record, flavour: Flavour) -> dict[str, Any]:
    row: dict[str, Any] = {
        "topic": topic,
        "partition": partition,
        "offset": record.offset,
        "timestamp": record.timestamp_ms,
        "timestamp_type": TIMESTAMP_TYPE_NAMES[record.timestamp_type],
    }
    if flavour is Flavour.JSON:
        key_ok, key = _json_field(record.key)
        value_ok, value = _json_field(record.value)
        headers: list[dict[str, Any]] = []
        headers_ok = True
        for name, data in record.headers:
            try:
                headers.append({"key": name, "value": None if data is None else data.decode("utf-8")})
            except UnicodeDecodeError:
                headers_ok = False
                break
        if key_ok and value_ok and headers_ok:
            row.update(key=key, value=value, headers=headers, format="json")
            return row
    row.update(
        key=None if record.key is None else _b64(record.key),
        value=None if record.value is None else _b64(record.value),
        headers=[
            {"key": name, "value": None if data is None else _b64(data)} for name, data in record.headers
        ],
        format="binary",
    )
    return row


# -- admin and consumer bodies -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateTopicRequest:
    name: str
    partitions: int
    replication_factor: int | None  # None: the server's default
    configs: dict[str, Any]


def parse_create_topic(body: Any) -> CreateTopicRequest:
    obj = require_object(body, "body")
    reject_unknown(obj, {"name", "partitions", "replication_factor", "configs"}, "")
    if "name" not in obj:
        raise BadRequest("name: missing")
    name = check_user_topic_name(obj["name"], "name")
    partitions = require_int(obj.get("partitions", 1), "partitions", minimum=1, maximum=10_000)
    factor = obj.get("replication_factor")
    if factor is not None:
        require_int(factor, "replication_factor", minimum=1, maximum=100)
    configs = obj.get("configs", {})
    if configs is None:
        configs = {}
    require_object(configs, "configs")
    for key, value in configs.items():
        if isinstance(value, dict | list) or value is None:
            raise BadRequest(f"configs.{key}: must be a string, number or boolean")
    return CreateTopicRequest(name, partitions, factor, dict(configs))


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    reset: bool
    metadata: str = ""  # kept with the offset, as a Kafka client's commit keeps its metadata


def parse_commit_offsets(body: Any) -> list[OffsetCommit]:
    """``{"offsets": [{"topic", "partition", "offset", "reset"?, "metadata"?}], "reset"?}``; a body-level
    ``reset`` applies to every entry. ``metadata``'s bound is the partitions' rule
    (``GroupOffsets.check_metadata``), asked by the handler before any entry is committed."""
    obj = require_object(body, "body")
    reject_unknown(obj, {"offsets", "reset"}, "")
    reset_all = require_bool(obj.get("reset", False), "reset")
    entries = obj.get("offsets")
    if not isinstance(entries, list):
        raise BadRequest(f"offsets: must be a list, got {_type_name(entries)}")
    if not 1 <= len(entries) <= OFFSETS_MAX:
        raise BadRequest(f"offsets: must hold 1 to {OFFSETS_MAX} entries, got {len(entries)}")
    out = []
    for i, item in enumerate(entries):
        where = f"offsets[{i}]"
        entry = require_object(item, where)
        reject_unknown(entry, {"topic", "partition", "offset", "reset", "metadata"}, where)
        for name in ("topic", "partition", "offset"):
            if name not in entry:
                raise BadRequest(f"{where}.{name}: missing")
        out.append(
            OffsetCommit(
                topic=check_topic_name(entry["topic"], f"{where}.topic"),
                partition=require_int(entry["partition"], f"{where}.partition", maximum=2**31 - 1),
                offset=require_int(entry["offset"], f"{where}.offset"),
                reset=reset_all or require_bool(entry.get("reset", False), f"{where}.reset"),
                metadata=_metadata_text(entry.get("metadata", ""), f"{where}.metadata"),
            )
        )
    return out


def _metadata_text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{where}: must be a string, got {_type_name(value)}")
    return value


def parse_delete_records(body: Any) -> int:
    """``{"offset": N}``: the partition's new log start offset (-1: its high watermark)."""
    obj = require_object(body, "body")
    reject_unknown(obj, {"offset"}, "")
    if "offset" not in obj:
        raise BadRequest("offset: missing")
    return require_int(obj["offset"], "offset", minimum=HIGH_WATERMARK)


def check_group(group: str) -> str:
    return check_group_name(group, "group")
