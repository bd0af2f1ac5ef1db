"""The on-disk and on-wire record-batch format: Kafka's RecordBatch v2 (magic 2), stored as it is.

A batch is a fixed big-endian header of 61 bytes followed by its records (compressed as a whole when the
attributes say so)::

    offset size field
    0      8    base_offset             offset of the first record (stamped by the leader)
    8      4    batch_length            bytes after this field
    12     4    partition_leader_epoch  the Raft term of the entry that committed the batch (stamped)
    16     1    magic                   2
    17     4    crc                     CRC-32C (Castagnoli) of bytes [21, end)
    21     2    attributes              bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
                                        bit 3 timestamp type (1: LogAppendTime), bit 4 transactional,
                                        bit 5 control
    23     4    last_offset_delta       the last offset the batch covers, less base_offset
    27     8    base_timestamp          ms of the first record
    35     8    max_timestamp           largest record timestamp (with LogAppendTime: the append time)
    43     8    producer_id             -1 when absent
    51     2    producer_epoch          -1 when absent
    53     4    base_sequence           -1 when absent
    57     4    records_count           last_offset_delta + 1 in a producer's batch; fewer, even
                                        none, in one compaction rewrote (offsets never change)
    61     ...  records                 each: length, attributes, timestamp delta, offset delta, key, value,
                                        headers (zig-zag varints; a length of -1 is null)

The CRC leaves out the base offset and the leader epoch, so a leader stamps both in place and followers
store identical bytes; a producer's batch (Kafka's or one encoded here) is stored as it came, and a read
answers the stored bytes without re-encoding anything. The records section is written and read in C
(``_records.c``: every bound checked, a damaged section refused by name), compressed through aiokafka's
codecs (cramjam and the standard library): docs/decisions/0011 and 0012. A compressed section is inflated
with a bound (``inflate.py``): a producer's batch up to the bound its caller gives (``InflatedTooLarge``
past it: a decompression bomb), a stored batch up to ``INFLATED_BYTES_CEILING``.
The header is fixed-size so that recovery, index rebuilds and offset lookups walk a segment without
touching records.
"""

from __future__ import annotations

import contextlib
import enum
import gc
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from types import MemberDescriptorType, ModuleType
from typing import Any, NamedTuple, Protocol

import crc32c

from raftlog.errors import check
from raftlog.storage import _records  # type: ignore[attr-defined]
from raftlog.storage.defaults import INFLATED_BYTES_MAX_DEFAULT
from raftlog.storage.errors import InflatedTooLarge, InvalidRecord
from raftlog.storage.inflate import InflateLimit, Undecompressable, inflate

MAGIC = 2
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
_LENGTH_END = 12  # batch_length counts the bytes after it
_CRC_AT = 17
_CRC_START = 21  # the CRC covers bytes [21, end)
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35
_PRODUCER_ID_AT = 43
_RECORD_COUNT_AT = 57
_RECORD_COUNT = struct.Struct(">i")
MIN_LENGTH = HEADER_SIZE - _LENGTH_END
MAX_OFFSET = 2**63 - 1
EPOCH_MAX = 2**31 - 1
_COMPRESSION_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_NO_PRODUCER = -1
MiB = 1024 * 1024
# The most a producer's batch's records may inflate to unless its caller says otherwise (a node: its
# --inflated-batch-max-mib, or the topic's max.message.bytes when larger): 64 times Kafka's default
# What a stored batch's records are inflated up to when read: more than any bound a produce may have been
# checked with (max.message.bytes and a node's bound are both below 2 GiB), so every stored batch reads,
# and still a bound should bytes that were never checked (a damaged disk) be read as one.
INFLATED_BYTES_CEILING = 2**31 - 1

Header = tuple[tuple[str, bytes | None], ...]


class Compression(enum.IntEnum):
    """Kafka's codec ids (the low three bits of a batch's attributes)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0  # the producer's
    LOG_APPEND_TIME = 1  # stamped by the leader when it appends (topic config message.timestamp.type)


class BatchFormatError(ValueError):
    """Bytes that are not a well-formed batch. Storage code turns it into ``CorruptRecord`` with a path."""


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """A record as a producer hands it in: no offset yet. A ``None`` value is a tombstone."""

    value: bytes | None
    key: bytes | None = None
    headers: Header = ()
    timestamp_ms: int | None = None


class Record(NamedTuple):
    """A stored record with its offset. A NamedTuple because reads build one per record: it is the
    cheapest immutable record Python has."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Header = ()
    timestamp_type: TimestampType = (
        TimestampType.CREATE_TIME
    )  # the batch's: LogAppendTime stamped by the leader


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed part of a batch, readable without touching the records."""

    length: int  # batch_length: bytes after that field
    crc: int
    attributes: int
    base_offset: int
    record_count: int
    last_offset_delta: int  # record_count - 1, unless compaction removed records (raftlog.storage.compaction)
    first_timestamp_ms: int
    max_timestamp_ms: int
    term: int  # the partition leader epoch
    producer_id: int | None
    producer_epoch: int | None
    sequence: int | None  # base sequence

    @property
    def size_bytes(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return _LENGTH_END + self.length

    @property
    def end_offset(self) -> int:
        """The offset after the last the batch covers (after its last record, unless compaction removed
        records at its end: the batch still covers their offsets)."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def span(self) -> int:
        """How many offsets the batch covers: ``record_count`` in a producer's batch."""
        return self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME if self.attributes & _LOG_APPEND_TIME else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        """A transaction marker (``encode_control_batch``): no record of it is a producer's."""
        return bool(self.attributes & _CONTROL)


@dataclass(frozen=True, slots=True)
class RecordBatch:
    header: BatchHeader
    records: tuple[Record, ...] = field(default_factory=tuple)


# BatchHeader is a frozen dataclass: its __init__ sets each field through object.__setattr__, which costs
# more than parsing. The decoder fills the slots through their descriptors instead.
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


_HEADER_SETTERS = _slot_setters(
    BatchHeader,
    (
        "length",
        "crc",
        "attributes",
        "base_offset",
        "record_count",
        "last_offset_delta",
        "first_timestamp_ms",
        "max_timestamp_ms",
        "term",
        "producer_id",
        "producer_epoch",
        "sequence",
    ),
)


# -- encoding ------------------------------------------------------------------------------------------


class RecordFields(Protocol):
    """What the encoder reads of a record: ``ProducerRecord``'s fields, which the HTTP door's checked
    records (``api.schemas.ParsedRecord``) have too, so they are encoded as they are."""

    @property
    def value(self) -> bytes | None: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def headers(self) -> Header: ...
    @property
    def timestamp_ms(self) -> int | None: ...


def _check_record(record: RecordFields, index: int) -> None:
    if not all(hasattr(record, name) for name in ("value", "key", "headers", "timestamp_ms")):
        raise InvalidRecord(f"record {index}: must be a ProducerRecord, got {type(record).__name__}")
    if record.timestamp_ms is not None and not (_is_int64(record.timestamp_ms) and record.timestamp_ms >= 0):
        raise InvalidRecord(
            f"record {index}: timestamp_ms {record.timestamp_ms!r} must be ms since the epoch"
        )
    if record.value is not None and not isinstance(record.value, bytes | bytearray | memoryview):
        raise InvalidRecord(f"record {index}: value must be bytes or None, got {type(record.value).__name__}")
    if record.key is not None and not isinstance(record.key, bytes | bytearray | memoryview):
        raise InvalidRecord(f"record {index}: key must be bytes or None, got {type(record.key).__name__}")
    for header in record.headers:
        pair = isinstance(header, tuple | list) and len(header) == 2
        if (
            not pair
            or not isinstance(header[0], str)
            or not (header[1] is None or isinstance(header[1], bytes))
        ):
            raise InvalidRecord(f"record {index}: headers must be (str, bytes or None) pairs, got {header!r}")


def encode_batch(
    base_offset: int,
    records: Sequence[RecordFields],
    term: int,
    now_ms: int,
    producer_id: int | None = None,
    sequence: int | None = None,
    *,
    producer_epoch: int | None = None,
    compression: Compression = Compression.NONE,
) -> bytes:
    """Encode records into one batch (CreateTime). Records without a timestamp get ``now_ms``. A producer
    id comes with a sequence (the batch's base sequence) and an epoch (0 when not given)."""
    if not records:
        raise InvalidRecord("a batch needs at least one record")
    if not 0 <= base_offset <= MAX_OFFSET - len(records):
        raise InvalidRecord(f"base_offset {base_offset} out of range")
    _check_term(term)
    if (producer_id is None) != (sequence is None):
        raise InvalidRecord("producer_id and sequence must be given together")
    if producer_id is not None and not (0 <= producer_id < 2**63 and 0 <= sequence < 2**31):  # type: ignore[operator]
        raise InvalidRecord(f"producer_id {producer_id!r} and sequence {sequence!r} out of range")
    epoch = _NO_PRODUCER if producer_id is None else (0 if producer_epoch is None else producer_epoch)
    if not -1 <= epoch < 2**15:
        raise InvalidRecord(f"producer_epoch {epoch!r} out of range")
    if not _is_int64(now_ms):
        raise InvalidRecord(f"now_ms {now_ms!r} must be a 64-bit integer")
    if not isinstance(compression, Compression):
        raise InvalidRecord(f"compression {compression!r} must be a Compression")
    try:
        batch, first_ts, max_ts = _records.encode(records, now_ms, HEADER_SIZE)
    except (TypeError, ValueError, AttributeError) as exc:
        for index, record in enumerate(records):  # the message of a type error names the field
            _check_record(record, index)
        raise InvalidRecord(str(exc)) from exc
    _HEADER.pack_into(
        batch, 0, base_offset, len(batch) - _LENGTH_END, term, MAGIC, 0, 0, len(records) - 1,
        first_ts, max_ts, _NO_PRODUCER if producer_id is None else producer_id, epoch,
        _NO_PRODUCER if sequence is None else sequence, len(records),
    )  # fmt: skip
    if compression is not Compression.NONE:
        return _compressed(batch, compression)
    struct.pack_into(">I", batch, _CRC_AT, crc32c.crc32c(memoryview(batch)[_CRC_START:]))
    return bytes(batch)


# Each codec's level: Kafka's defaults where they are fast enough to run on a leader (gzip 6 as zlib's
# default, zstd 3), lz4's fast mode rather than its high-compression level 9, which costs ~50x more CPU
# for a few percent (raftlog bench codec). The codecs are aiokafka's (Kafka's framing, e.g. xerial snappy).
# aiokafka is imported at the first compression, not with this module: its package brings its whole
# client, which the command line and the client (uncompressed batches) would pay for at every start.
def _codec() -> ModuleType:
    import aiokafka.codec

    codec: ModuleType = aiokafka.codec
    return codec


_ENCODERS: dict[Compression, Callable[[bytes], bytes]] = {
    Compression.GZIP: lambda data: _codec().gzip_encode(data, compresslevel=6),
    Compression.SNAPPY: lambda data: _codec().snappy_encode(data),
    Compression.LZ4: lambda data: _codec().lz4_encode(data, level=1),
    Compression.ZSTD: lambda data: _codec().zstd_encode(data, level=3),
}


def _compressed(batch: bytearray, compression: Compression) -> bytes:
    """An uncompressed batch with its records compressed by ``compression``: the attributes name the
    codec, the length and the CRC are computed again; base offset, epoch and the rest of the header stay."""
    records = _ENCODERS[compression](bytes(memoryview(batch)[HEADER_SIZE:]))
    out = bytearray(batch[:HEADER_SIZE])
    out += records
    struct.pack_into(">i", out, 8, len(out) - _LENGTH_END)
    attributes = struct.unpack_from(">h", out, _ATTRIBUTES_AT)[0] & ~_COMPRESSION_MASK | int(compression)
    struct.pack_into(">h", out, _ATTRIBUTES_AT, attributes)
    struct.pack_into(">I", out, _CRC_AT, crc32c.crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)


_PLAIN_TS = (type(None), int)  # the timestamps the common path takes without a closer look


def _is_int64(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _check_term(term: int) -> None:
    if not isinstance(term, int) or isinstance(term, bool) or not 0 <= term <= EPOCH_MAX:
        raise InvalidRecord(f"term {term!r} must be an integer in [0, {EPOCH_MAX}] (Kafka's leader epoch)")


def rebase(batch: bytes | memoryview, base_offset: int, term: int) -> bytes:
    """The batch with a new base offset and term (leader epoch): both lie outside the CRC, so the rest of
    the bytes are copied as they are (once)."""
    return b"".join((stamped_head(batch, base_offset, term), memoryview(batch)[HEADER_SIZE:]))


def stamped_head(batch: bytes | memoryview, base_offset: int, term: int) -> bytes:
    """The batch's header (its first ``HEADER_SIZE`` bytes) with a new base offset and term: written in
    place of the batch's own, the rest of it as it lies, it is ``rebase`` without copying the records."""
    if not 0 <= base_offset <= MAX_OFFSET:
        raise InvalidRecord(f"base_offset {base_offset} out of range")
    _check_term(term)
    if len(batch) < HEADER_SIZE:
        raise BatchFormatError(f"need {HEADER_SIZE} header bytes, have {len(batch)}")
    head = bytearray(memoryview(batch)[:HEADER_SIZE])
    struct.pack_into(">q", head, 0, base_offset)
    struct.pack_into(">i", head, 12, term)
    return bytes(head)


def with_log_append_time(batch: bytes | memoryview, now_ms: int) -> bytes:
    """The batch with its timestamp type LogAppendTime and ``now_ms`` as every record's timestamp (Kafka
    keeps the records' deltas and reads ``max_timestamp`` for all of them); the CRC is computed again."""
    stamped = bytearray(batch)
    attributes = struct.unpack_from(">h", stamped, _ATTRIBUTES_AT)[0] | _LOG_APPEND_TIME
    struct.pack_into(">h", stamped, _ATTRIBUTES_AT, attributes)
    struct.pack_into(">q", stamped, _MAX_TIMESTAMP_AT, now_ms)
    struct.pack_into(">I", stamped, _CRC_AT, crc32c.crc32c(memoryview(stamped)[_CRC_START:]))
    return bytes(stamped)


def with_producer_id(batch: bytes | memoryview, producer_id: int) -> bytes:
    """The batch with another producer id in its header (``partitions.security.producer_ids.own``: the id
    its owner's batch is written with); the CRC is computed again."""
    if not 0 <= producer_id <= MAX_OFFSET:
        raise InvalidRecord(f"producer id {producer_id} outside 0..2^63-1")
    owned = bytearray(batch)
    struct.pack_into(">q", owned, _PRODUCER_ID_AT, producer_id)
    struct.pack_into(">I", owned, _CRC_AT, crc32c.crc32c(memoryview(owned)[_CRC_START:]))
    return bytes(owned)


def encode_retained(
    batch: bytes | memoryview | None,
    header: BatchHeader | None,
    kept: Sequence[Record] | None,
    base_offset: int,
    end_offset: int,
    empty_timestamp_ms: int = 0,
    empty_term: int = 0,
) -> bytes:
    """A stored batch as compaction rewrites it (``raftlog.storage.compaction``): covering the offsets
    ``[base_offset, end_offset)``, holding ``kept`` (its records that survive, each at its own offset;
    None: all of them), with the batch's term, attributes (codec, timestamp type) and producer fields.
    Only the header changes when every record stays and the base offset with it. Without a batch: an
    empty one (no records) covering the offsets, timestamped ``empty_timestamp_ms``, of ``empty_term``."""
    if not 0 <= base_offset < end_offset <= MAX_OFFSET or end_offset - base_offset > 2**31:
        raise InvalidRecord(f"offsets [{base_offset}, {end_offset}) cannot make one batch")
    if batch is None or header is None:
        out = bytearray(HEADER_SIZE)
        _HEADER.pack_into(
            out, 0, base_offset, HEADER_SIZE - _LENGTH_END, empty_term, MAGIC, 0, 0,
            end_offset - base_offset - 1, empty_timestamp_ms, empty_timestamp_ms, _NO_PRODUCER,
            _NO_PRODUCER, _NO_PRODUCER, 0,
        )  # fmt: skip
        struct.pack_into(">I", out, _CRC_AT, crc32c.crc32c(memoryview(out)[_CRC_START:]))
        return bytes(out)
    if kept is None and base_offset == header.base_offset:
        out = bytearray(batch)
        struct.pack_into(">i", out, 23, end_offset - base_offset - 1)  # last_offset_delta
        struct.pack_into(">I", out, _CRC_AT, crc32c.crc32c(memoryview(out)[_CRC_START:]))
        return bytes(out)
    records = decode_records(batch, header) if kept is None else kept
    check(
        all(base_offset <= r.offset < end_offset for r in records),
        f"records kept at offsets outside [{base_offset}, {end_offset})",
    )
    section, first_ts, max_ts = _records.encode(records, 0, HEADER_SIZE, base_offset)
    if header.attributes & _LOG_APPEND_TIME or not records:
        first_ts, max_ts = header.first_timestamp_ms, header.max_timestamp_ms
    _HEADER.pack_into(
        section, 0, base_offset, len(section) - _LENGTH_END, header.term, MAGIC, 0,
        header.attributes & ~_COMPRESSION_MASK, end_offset - base_offset - 1, first_ts, max_ts,
        _NO_PRODUCER if header.producer_id is None else header.producer_id,
        _NO_PRODUCER if header.producer_epoch is None else header.producer_epoch,
        _NO_PRODUCER if header.sequence is None else header.sequence, len(records),
    )  # fmt: skip
    if header.compression is not Compression.NONE:
        return _compressed(section, header.compression)
    struct.pack_into(">I", section, _CRC_AT, crc32c.crc32c(memoryview(section)[_CRC_START:]))
    return bytes(section)


def recompress(batch: bytes | memoryview, header: BatchHeader, compression: Compression) -> bytes:
    """The same records in a batch compressed with ``compression`` (the topic's ``compression.type`` when
    it is not ``producer``): the records section is inflated and compressed again as it is, every header
    field kept but the codec, the length and the CRC (records are stored alike whatever the codec, so no
    record is decoded). For a batch already checked: inflated up to ``INFLATED_BYTES_CEILING``."""
    section = _section(batch, header, INFLATED_BYTES_CEILING)
    out = bytearray(memoryview(batch)[:HEADER_SIZE])
    out += section if compression is Compression.NONE else _ENCODERS[compression](bytes(section))
    struct.pack_into(">i", out, 8, len(out) - _LENGTH_END)
    attributes = header.attributes & ~_COMPRESSION_MASK | int(compression)
    struct.pack_into(">h", out, _ATTRIBUTES_AT, attributes)
    struct.pack_into(">I", out, _CRC_AT, crc32c.crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)


# -- decoding ------------------------------------------------------------------------------------------


def decode_header(buf: bytes | memoryview, position: int = 0) -> BatchHeader:
    """Parse the fixed header at ``position``. Checks framing, not the CRC."""
    (
        base_offset,
        length,
        epoch,
        _,
        crc,
        attributes,
        last_offset_delta,
        first_ts,
        max_ts,
        producer_id,
        producer_epoch,
        sequence,
        count,
    ) = _framed_fields(buf, position)
    has_producer = producer_id != _NO_PRODUCER
    header = _new_object(BatchHeader)  # every slot set below; see _slot_setters
    for setter, value in zip(
        _HEADER_SETTERS,
        (
            length,
            crc,
            attributes,
            base_offset,
            count,
            last_offset_delta,
            first_ts,
            max_ts,
            epoch,
            producer_id if has_producer else None,
            producer_epoch if has_producer else None,
            sequence if has_producer else None,
        ),
        strict=True,
    ):
        setter(header, value)
    return header


def _framed_fields(buf: bytes | memoryview, position: int) -> tuple[Any, ...]:
    """The header's fields at ``position``, its framing checked (the one place it is: ``decode_header``
    and ``frame_at`` both read through here)."""
    if len(buf) - position < HEADER_SIZE:
        raise BatchFormatError(f"need {HEADER_SIZE} header bytes, have {len(buf) - position}")
    fields = _HEADER.unpack_from(buf, position)
    base_offset, length, _, magic, _, attributes, last_offset_delta = fields[:7]
    count = fields[12]
    if magic != MAGIC:
        raise BatchFormatError(f"magic {magic}: only Kafka's RecordBatch v2 (magic 2) is stored")
    if length < MIN_LENGTH:
        raise BatchFormatError(f"batch_length {length} shorter than a header")
    if not 0 <= count <= last_offset_delta + 1:
        raise BatchFormatError(f"records_count {count} with last_offset_delta {last_offset_delta}")
    if not 0 <= base_offset <= MAX_OFFSET - last_offset_delta - 1:
        raise BatchFormatError(f"base_offset {base_offset} out of range")
    if attributes & _COMPRESSION_MASK > Compression.ZSTD:
        raise BatchFormatError(f"unknown compression codec {attributes & _COMPRESSION_MASK}")
    return fields


def frame_at(buf: bytes | memoryview, position: int = 0) -> tuple[int, int, int, int]:
    """What walking stored batches needs of the header at ``position``, framing checked as
    ``decode_header`` checks it, without building a ``BatchHeader``: (size_bytes, base_offset,
    end_offset, crc). A fetch walks every batch it sends (dozens per MiB) this way."""
    fields = _framed_fields(buf, position)
    base_offset = fields[0]
    return _LENGTH_END + fields[1], base_offset, base_offset + fields[6] + 1, fields[4]


def crc_ok_at(buf: bytes | memoryview, position: int, size_bytes: int, crc: int) -> bool:
    """``crc_ok`` for the batch of ``size_bytes`` at ``position`` of ``buf`` (its header's ``crc``)."""
    return crc32c.crc32c(memoryview(buf)[position + _CRC_START : position + size_bytes]) == crc


def is_compressed(batch: bytes | memoryview) -> bool:
    """Whether the attributes of the batch at the start of ``batch`` name a codec, read without checking
    anything else (False when the bytes are too short to hold them)."""
    return len(batch) > _ATTRIBUTES_AT + 1 and batch[_ATTRIBUTES_AT + 1] & _COMPRESSION_MASK != 0


def claimed_record_count(batch: bytes | memoryview) -> int:
    """How many records the header at the start of ``batch`` says it holds, read without checking anything
    else (0 when the bytes are too short to hold a header): what a caller sizes work by before the batch is
    checked, which refuses it if the header lies."""
    if len(batch) < HEADER_SIZE:
        return 0
    return int(_RECORD_COUNT.unpack_from(batch, _RECORD_COUNT_AT)[0])


def crc_ok(batch: bytes | memoryview, header: BatchHeader) -> bool:
    """True when the CRC stored in ``header`` matches the batch bytes."""
    return int(crc32c.crc32c(memoryview(batch)[_CRC_START : header.size_bytes])) == header.crc


def framed(batch: bytes | memoryview) -> BatchHeader:
    """Parse a whole batch given as exactly its bytes, without checking its CRC: for bytes checked where
    they entered and carried since under checks of their own (a committed Raft entry)."""
    header = decode_header(batch)
    if header.size_bytes != len(batch):
        raise BatchFormatError(f"batch is {len(batch)} bytes, header says {header.size_bytes}")
    return header


def verify(batch: bytes | memoryview) -> BatchHeader:
    """Parse and CRC-check a whole batch given as exactly its bytes."""
    header = framed(batch)
    if not crc_ok(batch, header):
        raise BatchFormatError("crc32c mismatch")
    return header


def _section(
    batch: bytes | memoryview, header: BatchHeader, inflated_bytes_max: int
) -> bytes | bytearray | memoryview:
    """The records section of a (CRC-checked) batch, inflated when its attributes name a codec: up to
    ``inflated_bytes_max`` bytes (InflatedTooLarge past it, inflating stopped there), BatchFormatError when
    it does not decompress."""
    records = memoryview(batch)[HEADER_SIZE : header.size_bytes]
    codec_id = header.attributes & _COMPRESSION_MASK
    if codec_id == Compression.NONE:
        return records
    try:
        return inflate(codec_id, records, inflated_bytes_max)
    except InflateLimit as exc:
        raise InflatedTooLarge(
            header.compression.name.lower(), len(records), exc.inflated_bytes, exc.limit_bytes, exc.why
        ) from None
    except Undecompressable as exc:
        raise BatchFormatError(
            f"records do not decode ({header.compression.name.lower()}): they do not decompress: {exc}"
        ) from None


def _fixed_timestamp(header: BatchHeader) -> int | None:
    """Every record's timestamp when the batch is LogAppendTime (its max timestamp), else None."""
    return header.max_timestamp_ms if header.attributes & _LOG_APPEND_TIME else None


def decode_records(batch: bytes | memoryview, header: BatchHeader) -> tuple[Record, ...]:
    """Decode the records of a (CRC-checked) batch, decompressing them first when they are compressed.
    With LogAppendTime every record's timestamp is the batch's ``max_timestamp``. A record's offset is
    the base offset plus its offset delta: its index in a producer's batch, rising within the batch's
    span in one compaction rewrote (the reader checks both)."""
    kind = (
        TimestampType.LOG_APPEND_TIME if header.attributes & _LOG_APPEND_TIME else TimestampType.CREATE_TIME
    )
    section = _section(batch, header, INFLATED_BYTES_CEILING)
    try:
        with _collector_paused():
            return _records.records(  # type: ignore[no-any-return]
                section, header.record_count, header.span, header.base_offset, header.first_timestamp_ms,
                _fixed_timestamp(header), Record, kind,
            )  # fmt: skip
    except ValueError as exc:
        raise BatchFormatError(f"records do not decode ({header.compression.name.lower()}): {exc}") from exc


def _timestamp_range(
    batch: bytes | memoryview, header: BatchHeader, inflated_bytes_max: int
) -> tuple[int, int]:
    """The lowest and highest record timestamp, once the records decode into exactly ``record_count``
    records whose offset deltas rise within the batch's span and whose header keys are UTF-8
    (BatchFormatError otherwise; InflatedTooLarge when they inflate past ``inflated_bytes_max``). No
    Python object is made per record. A batch that compaction emptied answers its header's timestamps."""
    section = _section(batch, header, inflated_bytes_max)
    if header.record_count == 0 and not section:
        return header.first_timestamp_ms, header.max_timestamp_ms
    try:
        return _records.check(section, header.record_count, header.span, header.first_timestamp_ms)  # type: ignore[no-any-return]
    except ValueError as exc:
        raise BatchFormatError(f"records do not decode ({header.compression.name.lower()}): {exc}") from exc


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while one batch decodes: the decoder allocates a few
    tracked objects per record, and with the default threshold (700) the collector would run every few
    hundred records, each time walking every young object, the rows already decoded included. It runs
    once afterwards instead. Process-wide, so it is only ever turned back on by whoever turned it off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def validate_records(batch: bytes | memoryview, header: BatchHeader) -> None:
    """Check that a (CRC-checked) batch's records decode into exactly its records with offset deltas
    rising within its span: BatchFormatError otherwise (a compressed batch inflated up to
    ``INFLATED_BYTES_CEILING``)."""
    _timestamp_range(batch, header, INFLATED_BYTES_CEILING)


def check_producer_batch(
    batch: bytes, latest_ms: int, inflated_bytes_max: int = INFLATED_BYTES_MAX_DEFAULT
) -> BatchHeader:
    """Check a batch a producer encoded (Kafka's RecordBatch v2, as any Kafka producer or
    :func:`encode_batch` makes it) before it is replicated, as strictly as records encoded here: framing
    and CRC, a supported codec and a body that decompresses and decodes into exactly its records with
    offset deltas 0, 1, ...; no control batch (markers are the coordinator's), a transactional one only with a
    producer id, and CreateTime (the leader
    stamps LogAppendTime); a producer id (-1: none, and then the epoch and sequence are not looked at)
    with a non-negative epoch and sequence; timestamps in
    [0, ``latest_ms``], the header's max timestamp the records' largest. The base offset and leader epoch the
    producer sent are overwritten by the leader. Raises ``InvalidRecord`` naming what is wrong, or
    ``InflatedTooLarge`` when compressed records inflate past ``inflated_bytes_max`` (inflating stops
    there: a decompression bomb costs at most that much memory)."""
    try:
        header = verify(batch)
    except BatchFormatError as exc:
        raise InvalidRecord(f"record batch: {exc}") from None
    if header.record_count < 1 or header.record_count != header.span:
        raise InvalidRecord(
            f"record batch: records_count {header.record_count} with last_offset_delta "
            f"{header.last_offset_delta}: a producer's batch holds last_offset_delta + 1 records, "
            "at least one"
        )
    if header.attributes & _CONTROL:
        raise InvalidRecord("record batch: a control batch is written by the transaction coordinator only")
    if header.attributes & _TRANSACTIONAL and header.producer_id is None:
        raise InvalidRecord("record batch: a transactional batch needs a producer id")
    if header.attributes & _LOG_APPEND_TIME:
        raise InvalidRecord(
            "record batch: LogAppendTime is stamped by the leader; a producer sends CreateTime"
        )
    _, _, _, _, _, _, _, _, _, producer_id, producer_epoch, sequence, _ = _HEADER.unpack_from(batch)
    # No producer id: the epoch and sequence mean nothing and are not looked at, as Kafka does (a plain
    # producer, aiokafka's default among them, writes base_sequence 0 there)
    if producer_id != _NO_PRODUCER and (producer_id < 0 or producer_epoch < 0 or sequence < 0):
        raise InvalidRecord(
            f"record batch: producer_id {producer_id}, producer_epoch {producer_epoch} and base_sequence "
            f"{sequence}: with a producer id, none may be negative (without one, producer_id is -1)"
        )
    try:
        # header keys decode as UTF-8 text or fail here
        low, high = _timestamp_range(batch, header, inflated_bytes_max)
    except BatchFormatError as exc:
        raise InvalidRecord(f"record batch: {exc}") from None
    if low < 0 or high != header.max_timestamp_ms or high > latest_ms:
        raise InvalidRecord(
            f"record batch: timestamps [{low}, {high}] with max_timestamp {header.max_timestamp_ms}: "
            f"must be >= 0, <= {latest_ms} and the max the records'"
        )
    return header
