"""A JSON produce body made into the RecordBatch v2 the leader checks and stores (pure: no I/O), in one
pass over its records.

orjson parses the body (in C, into the same Python values as the standard library's parser) and writes
the JSON flavour's keys and values as their compact text; ``schemas.parse_produce`` checks each record
once and makes its key, value and headers the bytes the batch holds (base64 decoded in SIMD by
pybase64); the C records module (``raftlog.storage.batch.encode_batch``) writes those records into one
batch per partition, with no Python object in between. Every rule of the records themselves (limits,
schema validation, producer ids, ACLs, quotas) stays below the door, with ``DataService.produce_batch``.

orjson is used only where it gives exactly what the standard library gives, so that a record's stored
bytes, a key's partition and every error's text stay as they were: a body orjson refuses (its parser
names errors differently, and refuses what the standard library takes: a lone surrogate, ``1e400``), a
record the checks refuse (their message names it), and a JSON-flavour text where the two writers could
differ are done again by the standard library (``encode_exactly``). The writers differ only for floats:
below 1e-4 (Python writes ``1e-05``, orjson ``0.00001`` or ``1e-5``) and those orjson parsed from an
integer past 64 bits, which the standard library keeps exact (a float written with ``e+`` either way);
so any text holding ``e+``, ``e-`` or ``0.0000`` is written by the standard library
(``tests/api/test_produce_encoding.py`` checks both on random documents).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from api.errors import ApiError
from api.routing import assign_partitions, group_by_partition
from api.schemas import Flavour, ProduceRequest, parse_json, parse_produce
from raftlog.storage.batch import encode_batch
from raftlog.storage.errors import InvalidRecord

# A body up to this is parsed, checked and encoded on the event loop with orjson; a larger one, or one
# orjson does not take exactly, in the node's JSON worker (``api.json_work``, whose bound for the standard
# library's parser is 64 KiB). orjson parses and writes a document of small objects about four times as
# fast as the standard library, so the worst body here holds the loop about as long as a 64 KiB one did
# there (docs/performance.md, "The HTTP JSON path"), while a produce of 100 records of 1 KiB (138 KB
# of base64) is no longer sent to another process and back.
FAST_INLINE_BYTES_MAX = 256 * 1024
# ... and holding at most this many records: a record costs a few µs however small it is, so 10,000 tiny
# records (the most a request holds, 200 KiB of them) would hold the loop longer than the bound above does
FAST_INLINE_RECORDS_MAX = 2_000


@dataclass(frozen=True, slots=True)
class EncodedProduce:
    """A JSON produce body made into batches (``encode_json_produce``): small, so that it comes back
    from the JSON worker process cheaply."""

    count: int  # records in the request
    batches: dict[int, tuple[list[int], bytes]]  # partition: (its records' indexes in the request, batch)
    unknown_partition: int | None = None  # a record named a partition the topic does not have


class _NotExact(Exception):
    """orjson's text of a value may differ from the standard library's: the body is done again there."""


def _dump_fast(value: Any) -> bytes:
    """The compact UTF-8 JSON text of ``value`` (``schemas.dump_json``'s text) by orjson, or _NotExact
    where the two may differ (floats below 1e-4, integers past 64 bits parsed as floats)."""
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError:  # nesting orjson does not write
        raise _NotExact from None
    if b"e+" in text or b"e-" in text or b"0.0000" in text:
        raise _NotExact
    return text


def encode_fast(
    body: bytes,
    flavour: Flavour,
    partition: int | None,
    partitions: int,
    keyless: int,
    now_ms: int,
    records_max: int | None = None,
) -> EncodedProduce | None:
    """``encode_json_produce`` through orjson; None when the body must be done by the standard library
    (anything orjson does not take exactly, and every refusal, so that its error is the same text), or
    holds more than ``records_max`` records."""
    try:
        document = orjson.loads(body)
        if records_max is not None and _records_in(document) > records_max:
            return None
        parsed = parse_produce(document, flavour, partition, _dump_fast)
    except (orjson.JSONDecodeError, _NotExact, ApiError, InvalidRecord):
        return None
    return encode_produce(parsed, partition, partitions, keyless, now_ms)


def _records_in(document: Any) -> int:
    records = document.get("records") if isinstance(document, dict) else None
    return len(records) if isinstance(records, list) else 0


def encode_json_produce(
    body: bytes, flavour: Flavour, partition: int | None, partitions: int, keyless: int, now_ms: int
) -> EncodedProduce:
    """A JSON produce body parsed, checked and encoded, one batch per partition: every record in
    ``partition`` (the path's), else each record in its own, its key's, or for records without either
    the partition of its producer id and sequence, or ``keyless`` (the round robin's turn). Runs in the
    JSON worker process when the body is large (``api.json_work``)."""
    encoded = encode_fast(body, flavour, partition, partitions, keyless, now_ms)
    if encoded is not None:
        return encoded
    return encode_exactly(body, flavour, partition, partitions, keyless, now_ms)


def encode_exactly(
    body: bytes, flavour: Flavour, partition: int | None, partitions: int, keyless: int, now_ms: int
) -> EncodedProduce:
    """``encode_json_produce`` through the standard library's parser and writer: its errors, its text."""
    parsed = parse_produce(parse_json(body), flavour, partition)
    return encode_produce(parsed, partition, partitions, keyless, now_ms)


def encode_produce(
    parsed: ProduceRequest, partition: int | None, partitions: int, keyless: int, now_ms: int
) -> EncodedProduce:
    """Checked records grouped by partition (as ``encode_json_produce`` says), one batch each."""
    records = parsed.records
    if partition is not None:
        return EncodedProduce(
            len(records), {partition: (list(range(len(records))), _batch(parsed, records, now_ms))}
        )
    for record in records:
        if record.partition is not None and record.partition >= partitions:
            return EncodedProduce(len(records), {}, record.partition)
    if parsed.producer_id is not None and parsed.sequence is not None:
        keyless = (parsed.producer_id + parsed.sequence) % partitions
    groups = group_by_partition(assign_partitions(records, partitions, keyless))
    batches = {
        p: (indexes, _batch(parsed, [records[i] for i in indexes], now_ms)) for p, indexes in groups.items()
    }
    return EncodedProduce(len(records), batches)


def _batch(parsed: ProduceRequest, records: Sequence[Any], now_ms: int) -> bytes:
    """The records as one batch (uncompressed, CreateTime: a record without a timestamp gets this node's
    clock, ``now_ms``), encoded once, where they entered, straight from the checked records (a
    ``ParsedRecord`` has the fields the C encoder reads): the leader checks and stores it as any
    producer's batch (``DataService.produce_batch``, the topic's codec and timestamp type applied there),
    with who produced it (the producer id's owner is checked, and an id the caller picked is written as
    one bound to it, ``partitions.security.producer_ids``). Never transactional."""
    return encode_batch(0, records, 0, now_ms, parsed.producer_id, parsed.sequence)
