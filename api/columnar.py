"""The columnar fetch encoding: one page of records as parallel arrays instead of one object per record
(pure: no I/O).

A fetch whose ``Accept`` header names one of the two media types below is answered in this encoding;
any other ``Accept`` keeps the record-per-object answer of ``api.schemas.render_record``. Bulk readers
(the Spark connector) turn the arrays into columns without building a dictionary per record.

- ``application/vnd.raftlog.columnar.v1+msgpack``: a msgpack map; keys, values and header values are
  msgpack binaries. The fast one.
- ``application/vnd.raftlog.columnar.v1+json``: the same map as JSON; keys, values and header values are
  base64 strings. For curl and clients without msgpack.

The map: ``{"topic": str, "partition": int, "offsets": [int], "timestamps": [int ms], "timestamp_types":
[0 CreateTime | 1 LogAppendTime], "keys": [bytes | null], "values": [bytes | null], "headers": [[[name,
bytes | null], ...] per record]}``; every array has one entry per record, in offset order. A null value
is a tombstone. An empty page has empty arrays.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import msgpack
import pybase64

from api.schemas import dump_json
from raftlog.storage.batch import Record
from raftlog_contract import COLUMNAR_JSON, COLUMNAR_MSGPACK


class Columnar(enum.Enum):
    MSGPACK = COLUMNAR_MSGPACK
    JSON = COLUMNAR_JSON


def columnar_encoding(media: str) -> Columnar | None:
    """The columnar encoding of a negotiated media type, or None for the record-per-object answer."""
    try:
        return Columnar(media)
    except ValueError:
        return None


def _b64(data: bytes) -> str:
    return pybase64.b64encode_as_string(data)


def columns(topic: str, partition: int, records: Sequence[Record]) -> dict[str, Any]:
    """The page as arrays of raw values (bytes stay bytes). Records are tuples: one ``zip`` transposes
    them in C, several times faster than a list per field (msgpack packs tuples as arrays)."""
    offsets, timestamps, keys, values, headers, types = zip(*records, strict=True) if records else ((),) * 6
    return {
        "topic": topic,
        "partition": partition,
        "offsets": offsets,
        "timestamps": timestamps,
        "timestamp_types": types,  # IntEnum members: packed and dumped as 0 and 1
        "keys": keys,
        "values": values,
        "headers": headers,
    }


def encode_columnar(topic: str, partition: int, records: Sequence[Record], encoding: Columnar) -> bytes:
    page = columns(topic, partition, records)
    if encoding is Columnar.MSGPACK:
        packed: bytes = msgpack.packb(page, use_bin_type=True)
        return packed
    page["keys"] = [None if key is None else _b64(key) for key in page["keys"]]
    page["values"] = [None if value is None else _b64(value) for value in page["values"]]
    page["headers"] = [
        [[name, None if data is None else _b64(data)] for name, data in pairs] for pairs in page["headers"]
    ]
    return dump_json(page)
