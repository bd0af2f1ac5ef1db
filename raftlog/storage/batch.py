"""The on-disk and on-wire record-batch format (pure: no I/O).

A batch is a fixed big-endian header followed by a msgpack body::

    offset size field
    0      4    length            bytes after this field (header rest + body)
    4      4    crc               crc32c of every byte after this field (header rest + body)
    8      1    magic             format version, currently 1
    9      1    attributes        bit 0: producer_id/sequence present
    10     8    base_offset       offset of the first record; record i has offset base_offset + i
    18     4    record_count      >= 1
    22     8    first_timestamp   ms since epoch of the first record
    30     8    max_timestamp     largest record timestamp in the batch
    38     8    term              Raft term of the entry that committed the batch
    46     8    producer_id       -1 when absent
    54     8    sequence          -1 when absent
    62     ...  body              msgpack array of records, each [timestamp_delta, key, value, headers]
                                  key: bin or nil; value: bin; headers: array of [str, bin]

The header is fixed-size so that recovery, index rebuilds and offset lookups can walk a segment without
decoding bodies; the CRC covers the header fields after it, so a flipped base offset is caught as well.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import crc32c
import msgpack

from raftlog.storage.errors import InvalidRecord

MAGIC = 1
_ATTR_HAS_PRODUCER = 0x01
_HEADER = struct.Struct(">IIBBQIqqQqq")
HEADER_SIZE = _HEADER.size  # 62
_LENGTH_PREFIX = 4
_CRC_END = 8  # the CRC covers bytes [8, end)
MIN_LENGTH = HEADER_SIZE - _LENGTH_PREFIX
_BASE_OFFSET_AT = 10
_TERM_AT = 38
MAX_OFFSET = 2**63 - 1

Header = tuple[tuple[str, bytes], ...]


class BatchFormatError(ValueError):
    """Bytes that are not a well-formed batch. Storage code turns it into ``CorruptRecord`` with a path."""


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """A record as a producer hands it in: no offset yet."""

    value: bytes
    key: bytes | None = None
    headers: Header = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """A stored record with its offset."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes
    headers: Header = ()


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed part of a batch, readable without touching the body."""

    length: int
    crc: int
    attributes: int
    base_offset: int
    record_count: int
    first_timestamp_ms: int
    max_timestamp_ms: int
    term: int
    producer_id: int | None
    sequence: int | None

    @property
    def size_bytes(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return _LENGTH_PREFIX + self.length

    @property
    def end_offset(self) -> int:
        """The offset after the last record of the batch."""
        return self.base_offset + self.record_count


@dataclass(frozen=True, slots=True)
class RecordBatch:
    header: BatchHeader
    records: tuple[Record, ...] = field(default_factory=tuple)


def _check_record(record: ProducerRecord, index: int) -> None:
    if not isinstance(record.value, bytes | bytearray | memoryview):
        raise InvalidRecord(f"record {index}: value must be bytes, got {type(record.value).__name__}")
    if record.key is not None and not isinstance(record.key, bytes | bytearray | memoryview):
        raise InvalidRecord(f"record {index}: key must be bytes or None, got {type(record.key).__name__}")
    for header in record.headers:
        if len(header) != 2 or not isinstance(header[0], str) or not isinstance(header[1], bytes):
            raise InvalidRecord(f"record {index}: headers must be (str, bytes) pairs, got {header!r}")


def encode_batch(
    base_offset: int,
    records: Sequence[ProducerRecord],
    term: int,
    now_ms: int,
    producer_id: int | None = None,
    sequence: int | None = None,
) -> bytes:
    """Encode records into one batch. Records without a timestamp get ``now_ms``."""
    if not records:
        raise InvalidRecord("a batch needs at least one record")
    if not 0 <= base_offset <= MAX_OFFSET - len(records):
        raise InvalidRecord(f"base_offset {base_offset} out of range")
    if term < 0:
        raise InvalidRecord(f"term {term} must be >= 0")
    if (producer_id is None) != (sequence is None):
        raise InvalidRecord("producer_id and sequence must be given together")
    timestamps = []
    for index, record in enumerate(records):
        _check_record(record, index)
        timestamps.append(now_ms if record.timestamp_ms is None else record.timestamp_ms)
    first_ts = timestamps[0]
    body = msgpack.packb(
        [
            [
                ts - first_ts,
                None if r.key is None else bytes(r.key),
                bytes(r.value),
                [list(h) for h in r.headers],
            ]
            for ts, r in zip(timestamps, records, strict=True)
        ],
        use_bin_type=True,
    )
    has_producer = producer_id is not None
    rest = _HEADER.pack(
        0,
        0,
        MAGIC,
        _ATTR_HAS_PRODUCER if has_producer else 0,
        base_offset,
        len(records),
        first_ts,
        max(timestamps),
        term,
        producer_id if producer_id is not None else -1,
        sequence if sequence is not None else -1,
    )
    return _seal(bytearray(rest) + body)


def _seal(buf: bytearray) -> bytes:
    """Fill in length and CRC of an encoded batch."""
    struct.pack_into(">I", buf, 0, len(buf) - _LENGTH_PREFIX)
    struct.pack_into(">I", buf, 4, crc32c.crc32c(memoryview(buf)[_CRC_END:]))
    return bytes(buf)


def rebase(batch: bytes, base_offset: int, term: int) -> bytes:
    """Return the batch with a new base offset and term (the body is untouched, the CRC recomputed).

    The leader encodes a batch once; the apply step stamps the offset and term it commits with.
    """
    if not 0 <= base_offset <= MAX_OFFSET:
        raise InvalidRecord(f"base_offset {base_offset} out of range")
    buf = bytearray(batch)
    struct.pack_into(">Q", buf, _BASE_OFFSET_AT, base_offset)
    struct.pack_into(">Q", buf, _TERM_AT, term)
    return _seal(buf)


def decode_header(buf: bytes | memoryview, position: int = 0) -> BatchHeader:
    """Parse the fixed header at ``position``. Checks framing, not the CRC."""
    if len(buf) - position < HEADER_SIZE:
        raise BatchFormatError(f"need {HEADER_SIZE} header bytes, have {len(buf) - position}")
    (length, crc, magic, attributes, base_offset, count, first_ts, max_ts, term, producer_id, sequence) = (
        _HEADER.unpack_from(buf, position)
    )
    if magic != MAGIC:
        raise BatchFormatError(f"bad magic {magic}")
    if length < MIN_LENGTH:
        raise BatchFormatError(f"length {length} shorter than a header")
    if count < 1:
        raise BatchFormatError(f"record_count {count} < 1")
    if base_offset > MAX_OFFSET - count:
        raise BatchFormatError(f"base_offset {base_offset} out of range")
    has_producer = bool(attributes & _ATTR_HAS_PRODUCER)
    return BatchHeader(
        length=length,
        crc=crc,
        attributes=attributes,
        base_offset=base_offset,
        record_count=count,
        first_timestamp_ms=first_ts,
        max_timestamp_ms=max_ts,
        term=term,
        producer_id=producer_id if has_producer else None,
        sequence=sequence if has_producer else None,
    )


def crc_ok(batch: bytes | memoryview, header: BatchHeader) -> bool:
    """True when the CRC stored in ``header`` matches the batch bytes."""
    return int(crc32c.crc32c(memoryview(batch)[_CRC_END : header.size_bytes])) == header.crc


def verify(batch: bytes | memoryview) -> BatchHeader:
    """Parse and CRC-check a whole batch given as exactly its bytes."""
    header = decode_header(batch)
    if header.size_bytes != len(batch):
        raise BatchFormatError(f"batch is {len(batch)} bytes, header says {header.size_bytes}")
    if not crc_ok(batch, header):
        raise BatchFormatError("crc32c mismatch")
    return header


def decode_records(batch: bytes | memoryview, header: BatchHeader) -> tuple[Record, ...]:
    """Decode the body of a (CRC-checked) batch into records."""
    try:
        rows = msgpack.unpackb(memoryview(batch)[HEADER_SIZE : header.size_bytes], raw=False, use_list=True)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise BatchFormatError(f"body is not valid msgpack: {exc}") from exc
    if not isinstance(rows, list) or len(rows) != header.record_count:
        raise BatchFormatError(
            f"body holds {len(rows) if isinstance(rows, list) else '?'} records, "
            f"header says {header.record_count}"
        )
    records = []
    base = header.base_offset
    first_ts = header.first_timestamp_ms
    for index, row in enumerate(rows):
        try:
            delta, key, value, headers = row
            records.append(
                Record(base + index, first_ts + delta, key, value, tuple((k, v) for k, v in headers))
            )
        except (TypeError, ValueError) as exc:
            raise BatchFormatError(f"record {index} malformed: {exc}") from exc
    return tuple(records)


def decode_batch(batch: bytes | memoryview) -> RecordBatch:
    """Verify and fully decode one batch."""
    header = verify(batch)
    return RecordBatch(header, decode_records(batch, header))
