"""The Kafka wire format, the one place that speaks it: size-prefixed frames, request headers, request
bodies and responses, encoded and decoded by kio (typed classes generated from Kafka's own message
schemas, a native reader; the few versions kio lacks built by kio's rules from Kafka's own schema files,
``message_classes.py``). Nothing of the protocol's schemas is written here by hand.

A request frame is ``int32 size`` then the request header (api key, api version, correlation id, client
id; tagged fields from the flexible versions on) and the body of that API at that version. A response
is ``int32 size``, the response header (correlation id; tagged fields when flexible, except for
ApiVersions, whose response header is always v0) and the body.
"""

from __future__ import annotations

import datetime
import functools
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from kafka_api import message_classes

SIZE = struct.Struct(">i")
HEAD = struct.Struct(">hhi")  # api key, api version, correlation id: the same in every header version
NO_THROTTLE = datetime.timedelta(0)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)  # an answer's authorized operations, not asked for
_MILLISECOND = datetime.timedelta(milliseconds=1)
T = TypeVar("T")


def millis(value: datetime.timedelta) -> int:
    """A duration kio decoded (timeouts, waits), in whole milliseconds."""
    return int(value / _MILLISECOND)


def timestamp(ms: int) -> datetime.datetime:
    """Milliseconds since the epoch as the timezone-aware, millisecond-precise datetime kio encodes."""
    return datetime.datetime.fromtimestamp(ms // 1000, datetime.UTC) + (ms % 1000) * _MILLISECOND


class MalformedRequest(Exception):
    """A frame that is not a request of the version it names: the connection is closed."""


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # kio's request class of that API and version


def peek(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a frame, before anything else is decoded."""
    if len(frame) < HEAD.size:
        raise MalformedRequest(f"a request of {len(frame)} bytes is shorter than a request header")
    key, version, correlation_id = HEAD.unpack_from(frame)
    return key, version, correlation_id


# The versions kio (0.6.5, the newest on PyPI) has no class of, built by kio's generator's rules from Kafka
# 4.4.0's message schemas (message_classes.py): (api key, version) -> the API's name, which its request and
# response schemas begin with
_EXTRA = {
    (18, 5): "ApiVersions",
    (42, 3): "DeleteGroups",
    (28, 6): "TxnOffsetCommit",
    (88, 0): "StreamsGroupHeartbeat",
    (88, 1): "StreamsGroupHeartbeat",
    (89, 0): "StreamsGroupDescribe",
    (89, 1): "StreamsGroupDescribe",
}


def _extra(api_key: int, version: int, part: str) -> Any:
    return message_classes.message_class(f"{_EXTRA[api_key, version]}{part}", version)


@functools.cache
def request_class(api_key: int, version: int) -> Any:
    if (api_key, version) in _EXTRA:
        return _extra(api_key, version, "Request")
    return load_request_schema(api_key, version)


@functools.cache
def response_class(api_key: int, version: int) -> Any:
    if (api_key, version) in _EXTRA:
        return _extra(api_key, version, "Response")
    return load_response_schema(api_key, version)


def _trailing_zero(body: bytes) -> bytes | None:
    return body[:-1] if body.endswith(b"\0") else None


def _null_topics_in_four_bytes(body: bytes) -> bytes | None:
    return b"\0" + body[4:] if body.startswith(b"\0\0\0\0") else None


@dataclass(frozen=True, slots=True)
class ClientSlip:
    """A request that a widely used client sends in bytes that are not its schema's, and what it meant: a
    body that does not decode as sent, or leaves bytes over, is decoded once more as ``mend`` makes it (None:
    not this slip). Only these slips are forgiven; anything else that does not decode is refused."""

    client: str
    what: str
    mend: Callable[[bytes], bytes | None]


_ALTER_USER_SCRAM_TRAILER = ClientSlip(
    "librdkafka 2.16 and before",
    "AlterUserScramCredentials' empty tagged fields written twice: the byte after the request is dropped, "
    "as Kafka's broker drops it (it does not look past a request's end)",
    _trailing_zero,
)
_METADATA_ALL_TOPICS = ClientSlip(
    "librdkafka 2.16 (issue 5049; master as of 2026)",
    "a flexible Metadata request for all topics leaves the four bytes it reserved for the topic count "
    "as they were, 00 00 00 00, where the compact null array it means is the one byte 00: the three bytes "
    "after it are dropped. Kafka's broker reads those zeros as the next fields (allow_auto_topic_creation "
    "false, no authorized operations) and the rest as tagged fields or past the end: every topic either "
    "way, and raftlog never creates topics from Metadata nor answers authorized operations",
    _null_topics_in_four_bytes,
)
CLIENT_SLIPS: dict[tuple[int, int], ClientSlip] = {
    (51, 0): _ALTER_USER_SCRAM_TRAILER,
    **{(3, version): _METADATA_ALL_TOPICS for version in range(9, 14)},
}


def parse(frame: bytes | memoryview) -> Request:
    """Decode a whole request frame (without its size prefix; a large one as a read-only view of the
    buffer it was read into) whose API and version are supported. Raises MalformedRequest: bytes that do
    not decode, or bytes left over (but a known ``CLIENT_SLIPS``)."""
    key, version, _ = peek(frame)
    cls = request_class(key, version)
    try:
        header, used = entity_reader(cls.__header_schema__)(frame, 0)
    except Exception as exc:  # kio's reader raises its own errors and the C extension's
        raise MalformedRequest(f"{cls.__name__} v{version} does not decode: {exc!r}") from None
    body, refusal = _body(cls, version, frame, used)
    slip = CLIENT_SLIPS.get((key, version))
    if refusal is not None and slip is not None:
        mended = slip.mend(bytes(frame[used:]))
        if mended is not None:
            body, _ = _body(cls, version, mended, 0)
    if body is None:
        raise MalformedRequest(refusal)
    return Request(key, version, header.correlation_id, getattr(header, "client_id", None), body)


def _body(cls: Any, version: int, frame: bytes | memoryview, start: int) -> tuple[Any, str | None]:
    """(the body, None) when ``frame`` from ``start`` is exactly one body of ``cls``, else (None, why)."""
    try:
        body, size = entity_reader(cls)(frame, start)
    except Exception as exc:  # kio's reader raises its own errors and the C extension's
        return None, f"{cls.__name__} v{version} does not decode: {exc!r}"
    if start + size != len(frame):
        return None, f"{cls.__name__} v{version}: {len(frame) - start - size} bytes after the request"
    return body, None


def build(cls: type[T], **values: Any) -> T:
    """An entity of ``cls`` from the values its version has: a value for a field another version of the
    API has is left out, so one handler serves every version."""
    names = _field_names(cls)
    return cls(**{name: value for name, value in values.items() if name in names})


_FIELD_NAMES: dict[type, frozenset[str]] = {}  # per entity class, of a bounded set: kio's schema classes


def _field_names(cls: type) -> frozenset[str]:
    """The fields of an entity class, read once per class: every answer and every part of one is built
    with ``build``."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in fields(cls))
    return names


def sibling(cls: type, name: str, missing_ok: bool = False) -> Any:
    """The entity class ``name`` of the same API version as ``cls`` (its nested parts); None with
    ``missing_ok`` when that version has no such part."""
    module = sys.modules[cls.__module__]
    return getattr(module, name, None) if missing_ok else getattr(module, name)
