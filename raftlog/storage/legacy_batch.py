"""Reading the batch format raftlog stored before Kafka's RecordBatch v2 (its magic 1), to convert it.

Only two places meet it: ``raftlog log migrate`` rewrites a data directory's partition logs from it,
and a Raft journal written before the upgrade may still replay ``Produce`` entries that carry such
batches, which the partition's state machine converts before it compares or appends them. Nothing writes
this format any more. Pure: no I/O.

The layout (big-endian): ``length u32 | crc32c u32 (of every byte after it) | magic u8 = 1 | attributes
u8 (bit 0: producer id and sequence present) | base_offset u64 | record_count u32 | first_timestamp i64
| max_timestamp i64 | term u64 | producer_id i64 | sequence i64 | body``, the body a msgpack array of
``[timestamp_delta, key (bin|nil), value (bin), headers ([str, bin] pairs)]``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c
import msgpack

from raftlog.storage.batch import BatchFormatError, ProducerRecord, encode_batch

MAGIC = 1
HEADER = struct.Struct(">IIBBQIqqQqq")
HEADER_SIZE = HEADER.size  # 62
_MAGIC_AT = 8
_ATTR_HAS_PRODUCER = 0x01


@dataclass(frozen=True, slots=True)
class LegacyBatch:
    base_offset: int
    term: int
    producer_id: int | None
    sequence: int | None
    records: tuple[ProducerRecord, ...]  # with their timestamps
    size_bytes: int


def is_legacy(batch: bytes | memoryview, position: int = 0) -> bool:
    """Whether the bytes at ``position`` start a batch of this format with a valid CRC (a Kafka v2
    batch's byte 8 is the top byte of its length: 0 up to 16 MiB; the CRC settles the rest)."""
    if len(batch) - position < HEADER_SIZE or batch[position + _MAGIC_AT] != MAGIC:
        return False
    length = struct.unpack_from(">I", batch, position)[0]
    end = position + 4 + length
    if length < HEADER_SIZE - 4 or end > len(batch):
        return False
    stored: int = struct.unpack_from(">I", batch, position + 4)[0]
    return int(crc32c.crc32c(memoryview(batch)[position + 8 : end])) == stored


def decode(batch: bytes | memoryview, position: int = 0) -> LegacyBatch:
    """The batch at ``position``, CRC-checked; BatchFormatError when it is not one."""
    if not is_legacy(batch, position):
        raise BatchFormatError(f"no legacy (magic 1) batch with a valid CRC at byte {position}")
    (length, _, _, attributes, base_offset, count, first_ts, _, term, producer_id, sequence) = (
        HEADER.unpack_from(batch, position)
    )
    body = memoryview(batch)[position + HEADER_SIZE : position + 4 + length]
    try:
        rows = msgpack.unpackb(body, raw=False, use_list=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise BatchFormatError(f"legacy batch body is not msgpack: {exc}") from exc
    if not isinstance(rows, tuple) or len(rows) != count:
        raise BatchFormatError(f"legacy batch body does not hold {count} records")
    records = []
    for index, row in enumerate(rows):
        try:
            delta, key, value, headers = row
            records.append(ProducerRecord(value, key, tuple((k, v) for k, v in headers), first_ts + delta))
        except (TypeError, ValueError) as exc:
            raise BatchFormatError(f"legacy record {index} malformed: {exc}") from exc
    has_producer = bool(attributes & _ATTR_HAS_PRODUCER)
    return LegacyBatch(
        base_offset,
        term,
        producer_id if has_producer else None,
        sequence if has_producer else None,
        tuple(records),
        4 + length,
    )


def convert(batch: bytes | memoryview) -> bytes:
    """The same batch as a Kafka RecordBatch v2: same base offset, term (as the partition leader epoch),
    producer id and sequence, records and timestamps (CreateTime), uncompressed. Deterministic: every
    replica converting the same bytes gets the same bytes."""
    legacy = decode(batch)
    if legacy.size_bytes != len(batch):
        raise BatchFormatError(f"legacy batch is {len(batch)} bytes, header says {legacy.size_bytes}")
    return encode_batch(
        legacy.base_offset,
        legacy.records,
        legacy.term,
        0,  # every record carries its own timestamp
        legacy.producer_id,
        legacy.sequence,
    )


def batches(data: bytes | memoryview) -> Iterator[tuple[int, LegacyBatch]]:
    """(byte position, batch) of each whole legacy batch of ``data``, in order; stops at the first bytes
    that are not one (a torn tail), which the caller compares with the data's length."""
    position = 0
    while position < len(data) and is_legacy(data, position):
        legacy = decode(data, position)
        yield position, legacy
        position += legacy.size_bytes
