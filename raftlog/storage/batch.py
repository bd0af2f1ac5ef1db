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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from types import MemberDescriptorType
from typing import Any, NamedTuple

import crc32c
import msgpack

from raftlog.errors import check
from raftlog.packing import release_if_large, thread_packer
from raftlog.storage.errors import InvalidRecord

MAGIC = 1
_ATTR_HAS_PRODUCER = 0x01
_HEADER = struct.Struct(">IIBBQIqqQqq")
_PREFIX = struct.Struct(">II")  # length, crc
_FIELDS = struct.Struct(">BBQIqqQqq")  # the header after the CRC: what the CRC covers, with the body
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


class Record(NamedTuple):
    """A stored record with its offset. A NamedTuple because reads build one per record: it is the
    cheapest immutable record Python has (1.6x faster to decode than a frozen dataclass)."""

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


# Record and BatchHeader are frozen dataclasses: their __init__ sets each field through object.__setattr__,
# which costs more than the rest of decoding. The decoders fill the slots through their descriptors instead.
_new_object = object.__new__


def _slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Callable[[object, object], None], ...]:
    """The setters of the slots ``names`` of a frozen, slotted dataclass; fails at import if its fields
    are no longer exactly these slots (a new field must be set by the decoder too)."""
    actual = tuple(f.name for f in fields(cls))
    check(
        actual == names and all(isinstance(cls.__dict__[name], MemberDescriptorType) for name in names),
        f"fast construction of {cls.__name__} sets the slots {names}, but its fields are {actual}",
    )
    return tuple(cls.__dict__[name].__set__ for name in names)


(
    _set_length,
    _set_crc,
    _set_attributes,
    _set_base_offset,
    _set_record_count,
    _set_first_timestamp,
    _set_max_timestamp,
    _set_term,
    _set_producer_id,
    _set_sequence,
) = _slot_setters(
    BatchHeader,
    (
        "length",
        "crc",
        "attributes",
        "base_offset",
        "record_count",
        "first_timestamp_ms",
        "max_timestamp_ms",
        "term",
        "producer_id",
        "sequence",
    ),
)


def _check_record(record: ProducerRecord, index: int) -> None:
    if not isinstance(record, ProducerRecord):
        raise InvalidRecord(f"record {index}: must be a ProducerRecord, got {type(record).__name__}")
    if record.timestamp_ms is not None and not _is_int64(record.timestamp_ms):
        raise InvalidRecord(f"record {index}: timestamp_ms {record.timestamp_ms!r} is not a 64-bit integer")
    if not isinstance(record.value, bytes | bytearray | memoryview):
        raise InvalidRecord(f"record {index}: value must be bytes, got {type(record.value).__name__}")
    if record.key is not None and not isinstance(record.key, bytes | bytearray | memoryview):
        raise InvalidRecord(f"record {index}: key must be bytes or None, got {type(record.key).__name__}")
    for header in record.headers:
        pair = isinstance(header, tuple | list) and len(header) == 2
        if not pair or not isinstance(header[0], str) or not isinstance(header[1], bytes):
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
    _check_term(term)
    if (producer_id is None) != (sequence is None):
        raise InvalidRecord("producer_id and sequence must be given together")
    if producer_id is not None and not (_is_int64(producer_id) and _is_int64(sequence)):
        raise InvalidRecord(f"producer_id {producer_id!r} and sequence {sequence!r} must be 64-bit integers")
    if not _is_int64(now_ms):
        raise InvalidRecord(f"now_ms {now_ms!r} must be a 64-bit integer")
    rows: list[_Row] | None = _plain_rows(records)
    if rows is not None:
        first_ts = max_ts = now_ms
    else:
        timestamps = []
        for index, record in enumerate(records):
            _check_record(record, index)
            timestamps.append(now_ms if record.timestamp_ms is None else record.timestamp_ms)
        first_ts, max_ts = timestamps[0], max(timestamps)
        rows = [
            (
                ts - first_ts,
                None if r.key is None else bytes(r.key),
                bytes(r.value),
                [list(h) for h in r.headers],
            )
            for ts, r in zip(timestamps, records, strict=True)
        ]
    has_producer = producer_id is not None
    covered_header = _FIELDS.pack(
        MAGIC,
        _ATTR_HAS_PRODUCER if has_producer else 0,
        base_offset,
        len(records),
        first_ts,
        max_ts,
        term,
        producer_id if producer_id is not None else -1,
        sequence if sequence is not None else -1,
    )
    packer = thread_packer()
    packer.reset()
    packer.pack(rows)
    with packer.getbuffer() as body:
        crc = crc32c.crc32c(body, value=crc32c.crc32c(covered_header))
        batch = b"".join((_PREFIX.pack(HEADER_SIZE - _LENGTH_PREFIX + len(body), crc), covered_header, body))
    release_if_large(len(batch))
    return batch


# A body row: (timestamp delta, key, value, headers). msgpack writes tuples and lists alike, as arrays.
_Row = tuple[int, bytes | None, bytes, Header | list[list[str | bytes]]]


def _plain_rows(records: Sequence[ProducerRecord]) -> list[_Row] | None:
    """The body rows when every record is the common case (an exact ProducerRecord with a bytes value, a
    bytes or None key, no headers, no timestamp), checked and built in one cheap pass; else None, and the
    caller takes the general path (full checks, conversions). Both paths pack to identical bytes."""
    rows: list[_Row] = []
    append = rows.append
    for record in records:
        if type(record) is not ProducerRecord:
            return None
        key, value = record.key, record.value
        if type(value) is not bytes or not (key is None or type(key) is bytes):
            return None
        if record.timestamp_ms is not None or record.headers != ():
            return None
        append((0, key, value, ()))
    return rows


def _is_int64(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _check_term(term: int) -> None:
    if not isinstance(term, int) or isinstance(term, bool) or not 0 <= term < 2**64:
        raise InvalidRecord(f"term {term!r} must be an integer in [0, 2**64)")


def rebase(batch: bytes | memoryview, base_offset: int, term: int) -> bytes:
    """Return the batch with a new base offset and term (the body is untouched, the CRC recomputed).

    The leader encodes a batch once; the apply step stamps the offset and term it commits with.
    """
    if not 0 <= base_offset <= MAX_OFFSET:
        raise InvalidRecord(f"base_offset {base_offset} out of range")
    _check_term(term)
    if len(batch) < HEADER_SIZE:
        raise BatchFormatError(f"need {HEADER_SIZE} header bytes, have {len(batch)}")
    covered = bytearray(batch[_CRC_END:HEADER_SIZE])  # only the header is rewritten; the body is copied once
    struct.pack_into(">Q", covered, _BASE_OFFSET_AT - _CRC_END, base_offset)
    struct.pack_into(">Q", covered, _TERM_AT - _CRC_END, term)
    body = memoryview(batch)[HEADER_SIZE:]
    crc = crc32c.crc32c(body, value=crc32c.crc32c(covered))
    return b"".join((_PREFIX.pack(len(batch) - _LENGTH_PREFIX, crc), covered, body))


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
    has_producer = attributes & _ATTR_HAS_PRODUCER
    header = _new_object(BatchHeader)  # all ten slots set below; see _slot_setters
    _set_length(header, length)
    _set_crc(header, crc)
    _set_attributes(header, attributes)
    _set_base_offset(header, base_offset)
    _set_record_count(header, count)
    _set_first_timestamp(header, first_ts)
    _set_max_timestamp(header, max_ts)
    _set_term(header, term)
    _set_producer_id(header, producer_id if has_producer else None)
    _set_sequence(header, sequence if has_producer else None)
    return header


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
    rows = _body_rows(batch, header)
    records: list[Record] = []
    append = records.append
    base = header.base_offset
    first_ts = header.first_timestamp_ms
    for index, row in enumerate(rows):
        try:  # the same row checks as validate_records
            delta, key, value, headers = row
            record = _new_tuple(
                Record, (base + index, first_ts + delta, key, value, () if headers == () else _pairs(headers))
            )
        except (TypeError, ValueError) as exc:
            raise BatchFormatError(f"record {index} malformed: {exc}") from exc
        append(record)
    return tuple(records)


_new_tuple = tuple.__new__  # builds a Record without NamedTuple.__new__'s Python-level call


def _pairs(headers: Any) -> tuple[tuple[str, bytes], ...]:
    return tuple((k, v) for k, v in headers)


def validate_records(batch: bytes | memoryview, header: BatchHeader) -> None:
    """Raise what :func:`decode_records` would raise for this batch, without building the records
    (several times cheaper: for checking a batch that is stored, not read)."""
    first_ts = header.first_timestamp_ms
    for index, row in enumerate(_body_rows(batch, header)):
        try:  # the same row checks as decode_records
            delta, _, _, headers = row
            first_ts + delta
            if headers != ():
                for _, _ in headers:
                    pass
        except (TypeError, ValueError) as exc:
            raise BatchFormatError(f"record {index} malformed: {exc}") from exc


def check_producer_batch(batch: bytes, latest_ms: int) -> BatchHeader:
    """Check a batch a producer encoded itself (with :func:`encode_batch`, base offset 0 and term 0) as
    strictly as the leader checks records it encodes, so that nothing malformed is ever replicated: framing
    and CRC, every row ``[timestamp_delta, key, value, headers]`` typed as the format says, the first
    record's delta 0, the header's max timestamp the records' largest, no timestamp before the epoch or
    after ``latest_ms``. Raises ``InvalidRecord`` naming what is wrong; returns the header."""
    try:
        header = verify(batch)
        rows = _body_rows(batch, header)
    except BatchFormatError as exc:
        raise InvalidRecord(f"record batch: {exc}") from None
    if header.base_offset != 0 or header.term != 0:
        raise InvalidRecord(
            f"record batch: a producer's batch has base_offset 0 and term 0 (the leader assigns both), "
            f"got {header.base_offset} and {header.term}"
        )
    low = high = 0
    for index, row in enumerate(rows):
        if type(row) is not tuple or len(row) != 4:
            raise InvalidRecord(f"record {index}: must be [timestamp_delta, key, value, headers]")
        delta, key, value, headers = row
        if type(delta) is not int:
            raise InvalidRecord(f"record {index}: timestamp_delta must be an integer")
        if type(value) is not bytes:
            raise InvalidRecord(f"record {index}: value must be bytes, got {type(value).__name__}")
        if key is not None and type(key) is not bytes:
            raise InvalidRecord(f"record {index}: key must be bytes or nil, got {type(key).__name__}")
        if headers != ():
            _check_body_headers(headers, index)
        if delta > high:
            high = delta
        elif delta < low:
            low = delta
    if rows[0][0] != 0:
        raise InvalidRecord(f"record 0: timestamp_delta must be 0, got {rows[0][0]}")
    first = header.first_timestamp_ms
    if first + low < 0 or first + high != header.max_timestamp_ms or header.max_timestamp_ms > latest_ms:
        raise InvalidRecord(
            f"record batch: timestamps [{first + low}, {first + high}] with max_timestamp "
            f"{header.max_timestamp_ms}: must be >= 0, <= {latest_ms} and the max the records'"
        )
    return header


def _check_body_headers(headers: Any, index: int) -> None:
    if type(headers) is not tuple:
        raise InvalidRecord(f"record {index}: headers must be an array of [str, bin] pairs")
    for pair in headers:
        if type(pair) is not tuple or len(pair) != 2 or (type(pair[0]), type(pair[1])) != (str, bytes):
            raise InvalidRecord(f"record {index}: headers must be an array of [str, bin] pairs, got {pair!r}")


def _body_rows(batch: bytes | memoryview, header: BatchHeader) -> tuple[Any, ...]:
    """The body's rows, as msgpack gives them, once their number is checked."""
    try:
        rows = msgpack.unpackb(memoryview(batch)[HEADER_SIZE : header.size_bytes], raw=False, use_list=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise BatchFormatError(f"body is not valid msgpack: {exc}") from exc
    if not isinstance(rows, tuple) or len(rows) != header.record_count:
        raise BatchFormatError(
            f"body holds {len(rows) if isinstance(rows, tuple) else '?'} records, "
            f"header says {header.record_count}"
        )
    return rows


def record_rows(batch: bytes | memoryview) -> tuple[BatchHeader, tuple[Any, ...]]:
    """Verify a batch (framing, CRC) and return its header and body rows as msgpack gives them, each
    ``(timestamp_delta, key, value, headers)``; record i has offset ``header.base_offset + i``. For bulk
    readers that want columns, not a ``Record`` per record: several times cheaper than ``decode_records``
    (the rows are not checked one by one; a CRC-valid stored batch was checked when it was written)."""
    header = verify(batch)
    return header, _body_rows(batch, header)


def split_batches(data: bytes) -> Iterator[bytes]:
    """The batches of a concatenation of whole batches (a fetch answer). Raises BatchFormatError on a torn
    one; checks framing only (``decode_batch`` checks each CRC)."""
    position = 0
    while position < len(data):
        header = decode_header(data, position)
        end = position + header.size_bytes
        if end > len(data):
            raise BatchFormatError(f"batch at byte {position} runs past the end of the data")
        yield data[position:end]
        position = end


def decode_batch(batch: bytes | memoryview) -> RecordBatch:
    """Verify and fully decode one batch."""
    header = verify(batch)
    return RecordBatch(header, decode_records(batch, header))


def records_from(data: bytes, offset: int) -> list[Record]:
    """The records of a concatenation of stored batches (a fetch answer) from ``offset`` on: the first
    batch may begin before it. Framing and every CRC are checked (BatchFormatError)."""
    records: list[Record] = []
    for batch in split_batches(data):
        decoded = decode_batch(batch).records
        if decoded and decoded[0].offset >= offset:
            records.extend(decoded)
        else:
            records.extend(r for r in decoded if r.offset >= offset)
    return records
