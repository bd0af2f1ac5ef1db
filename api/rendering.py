"""Fetched records as the JSON array of record objects the REST v2 answers carry (a partition fetch, a
consumer instance's records).

A binary-flavour row is written as bytes directly from the C reader's plain rows
(``raftlog.storage.batch_reads.rows_by_batch``: no ``Record`` per record): its fields are numbers, base64 text
(pybase64, in SIMD) and names, so the row is known without building a dict for ``json.dumps``, and a
batch's rows are joined once, each value's base64 copied once into the answer. The text is exactly what
``json.dumps`` gives for ``schemas.render_record``'s row (``tests/api/test_rendering.py`` checks it on
random records); a JSON-flavour row, whose key and value are parsed JSON, goes through ``json.dumps``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pybase64

from api.schemas import TIMESTAMP_TYPE_NAMES, Flavour, render_record
from raftlog.storage.batch import Record
from raftlog.storage.batch_reads import BatchRows

_TYPES = {kind: json.dumps(name).encode() for kind, name in TIMESTAMP_TYPE_NAMES.items()}
_b64 = pybase64.b64encode
_SEPARATOR = b", "


def records_json(parts: Iterable[tuple[str, int, Sequence[Record]]], flavour: Flavour) -> bytes:
    """The records of every ``(topic, partition, records)`` in order, as one JSON array (UTF-8)."""
    texts = [record_rows(topic, partition, records, flavour) for topic, partition, records in parts]
    return b"[" + _SEPARATOR.join(text for text in texts if text) + b"]"


def record_rows(topic: str, partition: int, records: Sequence[Record], flavour: Flavour) -> bytes:
    """Each record's row as JSON text, the rows joined by ", ": items of ``records_json``'s array."""
    if flavour is Flavour.BINARY:
        return _SEPARATOR.join(
            b"".join(binary_rows(topic, partition, BatchRows([r.offset], r.timestamp_type, [r[1:5]])))
            for r in records
        )
    return ", ".join(json.dumps(render_record(topic, partition, r, flavour)) for r in records).encode()


def rows_text(rows: Sequence[str]) -> list[bytes]:
    """Rows of JSON text (a schema format's, a JSON-flavour record's) as ``batch_rows`` gives them."""
    return [", ".join(rows).encode("utf-8")] if rows else []


def batch_rows(topic: str, partition: int, batch: BatchRows, flavour: Flavour) -> list[bytes]:
    """A batch's rows (``rows_by_batch``) as the parts of their JSON text, the rows separated by ", "
    (``api.answers.json_array`` joins a slice's parts once)."""
    if flavour is Flavour.BINARY:
        return binary_rows(topic, partition, batch)
    records = [
        Record(offset, timestamp_ms, key, value, headers, batch.timestamp_type)
        for offset, (timestamp_ms, key, value, headers) in zip(batch.offsets, batch.rows, strict=True)
    ]
    return rows_text([json.dumps(render_record(topic, partition, r, flavour)) for r in records])


def binary_rows(topic: str, partition: int, batch: BatchRows) -> list[bytes]:
    """A batch's binary-flavour rows as the parts of their text (joined once, where the answer's slice is
    written: ``api.answers.json_array``), a record's usually three: its fields up to its value, the
    value's base64, the rest."""
    head = b'{"topic": %s, "partition": %d, "offset": ' % (json.dumps(topic).encode(), partition)
    timestamp_type = b', "timestamp_type": ' + _TYPES[batch.timestamp_type] + b', "key": '
    plain_tail = b'", "headers": [], "format": "binary"}'
    parts: list[bytes] = []
    append = parts.append
    for offset, (timestamp_ms, key, value, headers) in zip(batch.offsets, batch.rows, strict=True):
        fields = b'%s%d, "timestamp": %d%s%s, "value": ' % (
            head if not parts else b", " + head,
            offset,
            timestamp_ms,
            timestamp_type,
            b"null" if key is None else b'"' + _b64(key) + b'"',
        )
        if value is not None and not headers:  # the common record: three parts
            append(fields + b'"')
            append(_b64(value))
            append(plain_tail)
            continue
        append(fields)
        append(_b64_or_null(value))
        append(b', "headers": ' + (_binary_headers(headers) if headers else b"[]") + b', "format": "binary"}')
    return parts


def _binary_headers(headers: Sequence[tuple[str, Any]]) -> bytes:
    pairs = [
        b'{"key": %s, "value": %s}' % (json.dumps(name).encode(), _b64_or_null(data))
        for name, data in headers
    ]
    return b"[" + b", ".join(pairs) + b"]"


def _b64_or_null(data: bytes | None) -> bytes:
    return b"null" if data is None else b'"' + _b64(data) + b'"'


def rows_of(
    topic: str, partition: int, batches: Iterator[BatchRows], flavour: Flavour
) -> Iterator[list[bytes]]:
    """Each batch's rows (``batch_rows``), a batch at a time (``api.answers.json_array``)."""
    for batch in batches:
        yield batch_rows(topic, partition, batch, flavour)
