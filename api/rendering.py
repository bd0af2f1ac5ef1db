"""Fetched records as the JSON array of record objects the REST v2 answers carry (a partition fetch, a
consumer instance's records).

A binary-flavour row is written as text directly: its fields are numbers, base64 text and names, so
the row is known without building a dict for ``json.dumps`` (a third of the cost per record). The text
is exactly what ``json.dumps`` gives for ``schemas.render_record``'s row (``tests/api/test_rendering.py``
checks it on random records); a JSON-flavour row, whose key and value are parsed JSON, goes through
``json.dumps``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import pybase64

from api.schemas import TIMESTAMP_TYPE_NAMES, Flavour, render_record
from raftlog.storage.batch import Record

_TYPES = {kind: json.dumps(name) for kind, name in TIMESTAMP_TYPE_NAMES.items()}


def records_json(parts: Iterable[tuple[str, int, Sequence[Record]]], flavour: Flavour) -> bytes:
    """The records of every ``(topic, partition, records)`` in order, as one JSON array (UTF-8)."""
    rows: list[str] = []
    for topic, partition, records in parts:
        rows += record_rows(topic, partition, records, flavour)
    return ("[" + ", ".join(rows) + "]").encode("utf-8")


def record_rows(topic: str, partition: int, records: Sequence[Record], flavour: Flavour) -> list[str]:
    """Each record's row as JSON text: the items of ``records_json``'s array (``api.answers.json_array``
    writes them a slice at a time)."""
    if flavour is Flavour.BINARY:
        head = f'{{"topic": {json.dumps(topic)}, "partition": {partition}, "offset": '
        return [_binary_row(head, record) for record in records]
    return [json.dumps(render_record(topic, partition, r, flavour)) for r in records]


def _binary_row(head: str, record: Record) -> str:
    headers = "[]" if not record.headers else _binary_headers(record.headers)
    return (
        f'{head}{record.offset}, "timestamp": {record.timestamp_ms}, "timestamp_type": '
        f'{_TYPES[record.timestamp_type]}, "key": {_b64_or_null(record.key)}, '
        f'"value": {_b64_or_null(record.value)}, "headers": {headers}, "format": "binary"}}'
    )


def _binary_headers(headers: Sequence[tuple[str, bytes | None]]) -> str:
    pairs = [f'{{"key": {json.dumps(name)}, "value": {_b64_or_null(data)}}}' for name, data in headers]
    return "[" + ", ".join(pairs) + "]"


def _b64_or_null(data: bytes | None) -> str:
    return "null" if data is None else f'"{pybase64.b64encode_as_string(data)}"'
