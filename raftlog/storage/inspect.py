"""Read-only inspection of a log directory: verify every batch, or dump batches and records. Never
modifies files (unlike ``Log.open``, which repairs a torn tail and writes the format marker).

Both read a log of either format: Kafka RecordBatch v2, and the format v1 (magic 1) an older raftlog
wrote, through ``legacy_batch``, so that a log can be checked and dumped before ``raftlog log migrate``
rewrites it and compared after. A directory with the ``format`` marker is v2 throughout; without it
(written before the upgrade, or a migration interrupted midway) each segment is read in the format its
first batch has.

Verification is permissive where a log is strict: it reports every damaged batch (framing, magic, codec,
CRC, records that do not decode, offsets out of order) with its file and byte position, and goes on
past one whose length still leads to a batch; a bad length ends its segment, since nothing after it can
be found.
"""

from __future__ import annotations

import enum
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import crc32c

from raftlog.storage import legacy_batch, log_format
from raftlog.storage.batch import (
    EPOCH_MAX,
    HEADER_SIZE,
    MAGIC,
    BatchFormatError,
    BatchHeader,
    Compression,
    Record,
    TimestampType,
    decode_header,
    decode_records,
)
from raftlog.storage.errors import CorruptRecord
from raftlog.storage.segment import NAME_DIGITS

READ_CHUNK_BYTES = 4 * 1024 * 1024
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")  # batch.py's header, read without its checks
_LENGTH_END = 12  # a v2 batch's length counts the bytes after its first 12
_CRC_START = 21
_COMPRESSION_MASK = 0x07
_LEGACY_LENGTH_END = 4  # a v1 batch's length counts the bytes after its first 4


class Format(enum.Enum):
    V2 = "v2"  # Kafka RecordBatch v2
    LEGACY = "v1"  # raftlog's own, before the upgrade: raftlog log migrate rewrites it


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """A batch's header as a dump shows it."""

    path: str
    position: int
    size_bytes: int
    magic: int
    base_offset: int
    record_count: int
    span: int  # offsets covered: record_count, or more in a batch compaction rewrote
    leader_epoch: int  # the Raft term that committed it
    compression: Compression
    timestamp_type: TimestampType
    producer_id: int | None
    producer_epoch: int | None  # None in format v1, which had no epochs
    base_sequence: int | None
    max_timestamp_ms: int
    transactional: bool = False  # a transactional producer's batch (Kafka's isTransactional)
    control: bool = False  # a transaction marker, COMMIT or ABORT (Kafka's isControl); format v1 had none

    @property
    def end_offset(self) -> int:
        return self.base_offset + self.span


@dataclass(frozen=True, slots=True)
class BatchProblem:
    """A damaged batch (or bytes that are no batch), where it is and what is wrong."""

    path: str
    position: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path} at byte {self.position}: {self.reason}"


@dataclass(slots=True)
class SegmentCheck:
    path: str
    base_offset: int
    end_offset: int  # after the last batch read (sound or not)
    size_bytes: int
    batches: int
    format: Format = Format.V2
    problems: list[BatchProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(slots=True)
class VerifyReport:
    directory: str
    marked: bool  # holds the format marker
    segments: list[SegmentCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.segments)

    @property
    def problems(self) -> list[BatchProblem]:
        return [p for s in self.segments for p in s.problems]

    @property
    def records(self) -> int:
        return sum(s.end_offset - s.base_offset for s in self.segments)

    @property
    def formats(self) -> set[Format]:
        return {s.format for s in self.segments if s.size_bytes}


def data_files(directory: str) -> list[tuple[int, str]]:
    """(base offset, path) of each segment's data file, in offset order (a deleted one's left out)."""
    found = []
    for name in os.listdir(directory):
        stem, _, suffix = name.partition(".")
        if suffix == "log" and stem.isdigit() and len(stem) == NAME_DIGITS:
            found.append((int(stem), os.path.join(directory, name)))
    return sorted(found)


class _Reader:
    """Reads of a file through one chunk at a time: a walk over small batches costs no syscall each."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size
        self._chunk = b""
        self._start = 0

    def read(self, position: int, length: int) -> bytes | memoryview:
        """Up to ``length`` bytes at ``position`` (fewer at the end of the file)."""
        relative = position - self._start
        if relative < 0 or relative + length > len(self._chunk):
            self._chunk = os.pread(self.fd, max(length, READ_CHUNK_BYTES), position)
            self._start, relative = position, 0
        return memoryview(self._chunk)[relative : relative + length]


def _segment_format(reader: _Reader, marked: bool) -> Format:
    """v2 in a marked log; else v1 when the first batch is one, or looks like one (v1's magic where v1
    has it, not v2's where v2 has it: a damaged first batch is still reported in its own format)."""
    if marked or reader.size < legacy_batch.HEADER_SIZE:
        return Format.V2
    head = reader.read(0, legacy_batch.HEADER_SIZE)
    if head[8] != legacy_batch.MAGIC:
        return Format.V2
    length: int = legacy_batch.HEADER.unpack_from(head)[0]
    if legacy_batch.is_legacy(reader.read(0, 4 + length)) or head[16] != MAGIC:
        return Format.LEGACY
    return Format.V2


# -- verify ----------------------------------------------------------------------------------------


def verify_directory(directory: str) -> VerifyReport:
    """Check every batch (framing, magic, codec, CRC, records decoding, offsets dense within and across
    segments) and report each damaged one."""
    report = VerifyReport(directory, log_format.marked(directory))
    files = data_files(directory)
    for position, (base, path) in enumerate(files):
        fd = os.open(path, os.O_RDONLY)
        try:
            reader = _Reader(fd, os.fstat(fd).st_size)
            check = SegmentCheck(path, base, base, reader.size, 0, _segment_format(reader, report.marked))
            _verify_segment(reader, check, _LEGACY if check.format is Format.LEGACY else _V2)
        finally:
            os.close(fd)
        report.segments.append(check)
        following = files[position + 1][0] if position + 1 < len(files) else None
        if check.ok and following is not None and check.end_offset != following:
            reason = f"segment ends at offset {check.end_offset}, the next one starts at {following}"
            check.problems.append(BatchProblem(path, check.size_bytes, reason))
    return report


@dataclass(frozen=True, slots=True)
class _Framing:
    """How a format's batches follow each other, and what makes one damaged."""

    header_size: int
    size: Callable[[bytes | memoryview], int]  # a batch's whole size, from its header
    size_min: int
    # base offset, offsets covered (records, or more in a batch compaction rewrote), what is wrong
    examine: Callable[[bytes | memoryview], tuple[int, int, list[str]]]


def _examine_v2(batch: bytes | memoryview) -> tuple[int, int, list[str]]:
    (base, _, _, magic, crc, attributes, delta, _, _, _, _, _, count) = _V2_HEADER.unpack_from(batch)
    reasons = []
    if magic != MAGIC:
        reasons.append(f"unknown magic {magic}")
    if attributes & _COMPRESSION_MASK > Compression.ZSTD:
        reasons.append(f"unsupported compression codec {attributes & _COMPRESSION_MASK}")
    computed = int(crc32c.crc32c(memoryview(batch)[_CRC_START:]))
    if computed != crc:
        reasons.append(f"crc32c mismatch (stored {crc:#010x}, computed {computed:#010x})")
    if delta < 0 or not 0 <= count <= delta + 1:  # fewer records than offsets: compaction removed some
        reasons.append(f"records_count {count} with last_offset_delta {delta}")
    if not reasons:
        try:
            decode_records(batch, decode_header(batch))
        except BatchFormatError as exc:
            reasons.append(str(exc))
    return base, delta + 1, reasons


def _examine_legacy(batch: bytes | memoryview) -> tuple[int, int, list[str]]:
    (_, _, magic, _, base, count, _, _, term, _, _) = legacy_batch.HEADER.unpack_from(batch)
    reasons = []
    if magic != legacy_batch.MAGIC:
        reasons.append(f"unknown magic {magic}")
    elif not legacy_batch.is_legacy(batch):
        reasons.append("crc32c mismatch")
    else:
        try:
            legacy_batch.decode(batch)
        except BatchFormatError as exc:
            reasons.append(str(exc))
    if not reasons and term > EPOCH_MAX:
        reasons.append(
            f"term {term} is above {EPOCH_MAX}, which no Kafka leader epoch holds: migrate refuses"
        )
    return base, count, reasons


_V2 = _Framing(
    HEADER_SIZE,
    lambda head: _LENGTH_END + int(struct.unpack_from(">i", head, 8)[0]),
    HEADER_SIZE,
    _examine_v2,
)
_LEGACY = _Framing(
    legacy_batch.HEADER_SIZE,
    lambda head: _LEGACY_LENGTH_END + int(struct.unpack_from(">I", head)[0]),
    legacy_batch.HEADER_SIZE,
    _examine_legacy,
)


def _verify_segment(reader: _Reader, check: SegmentCheck, framing: _Framing) -> None:
    """Walk the segment's batches, adding a problem for each damaged one. A damaged batch whose size
    fits the file is stepped over (the next one is checked as any other); a size that does not ends the
    walk. The offsets of a damaged batch are not trusted: the next sound one is not compared with them."""
    position = 0
    expected: int | None = check.base_offset
    while position < reader.size:
        head = reader.read(position, framing.header_size)
        if len(head) < framing.header_size:
            check.problems.append(
                BatchProblem(check.path, position, f"torn header: {len(head)} bytes at the end")
            )
            return
        size = framing.size(head)
        if size < framing.size_min or position + size > reader.size:
            reason = (
                f"length says {size} bytes, from byte {position} of {reader.size}: the rest is unreadable"
            )
            check.problems.append(BatchProblem(check.path, position, reason))
            return
        base, count, reasons = framing.examine(reader.read(position, size))
        if not reasons and expected is not None and base != expected:
            reasons.append(f"starts at offset {base}, expected {expected}")
        check.batches += 1
        if reasons:
            check.problems.append(
                BatchProblem(check.path, position, f"batch at offset {base}: {'; '.join(reasons)}")
            )
            expected = None
        else:
            expected = check.end_offset = base + count
        position += size


# -- dump ------------------------------------------------------------------------------------------


def dump_batches(directory: str, from_offset: int = 0) -> Iterator[tuple[BatchInfo, tuple[Record, ...]]]:
    """Yield each CRC-checked batch holding records from ``from_offset`` on, with its records, in offset
    order. At the first damaged batch raises ``CorruptRecord`` naming its data file and byte position,
    once every batch before it has been yielded."""
    marked = log_format.marked(directory)
    for _, path in data_files(directory):
        fd = os.open(path, os.O_RDONLY)
        try:
            reader = _Reader(fd, os.fstat(fd).st_size)
            if _segment_format(reader, marked) is Format.LEGACY:
                yield from _dump_legacy(reader, path, from_offset)
            else:
                yield from _dump_v2(reader, path, from_offset)
        finally:
            os.close(fd)


def _dump_v2(reader: _Reader, path: str, from_offset: int) -> Iterator[tuple[BatchInfo, tuple[Record, ...]]]:
    position = 0
    while position < reader.size:
        try:
            header = decode_header(reader.read(position, HEADER_SIZE))
            if position + header.size_bytes > reader.size:
                raise BatchFormatError(f"batch of {header.size_bytes} bytes runs past the end of the file")
            batch = reader.read(position, header.size_bytes)
            if int(crc32c.crc32c(batch[_CRC_START:])) != header.crc:
                raise BatchFormatError(f"crc32c mismatch in batch at offset {header.base_offset}")
            records = decode_records(batch, header) if header.end_offset > from_offset else ()
        except BatchFormatError as exc:
            raise CorruptRecord(path, position, str(exc)) from None
        if header.end_offset > from_offset:
            yield _info_v2(path, position, header), records
        position += header.size_bytes


def _info_v2(path: str, position: int, header: BatchHeader) -> BatchInfo:
    return BatchInfo(
        path,
        position,
        header.size_bytes,
        MAGIC,
        header.base_offset,
        header.record_count,
        header.span,
        header.term,
        header.compression,
        header.timestamp_type,
        header.producer_id,
        header.producer_epoch,
        header.sequence,
        header.max_timestamp_ms,
        header.is_transactional,
        header.is_control,
    )


def _dump_legacy(
    reader: _Reader, path: str, from_offset: int
) -> Iterator[tuple[BatchInfo, tuple[Record, ...]]]:
    position = 0
    while position < reader.size:
        head = reader.read(position, legacy_batch.HEADER_SIZE)
        length = legacy_batch.HEADER.unpack_from(head)[0] if len(head) == legacy_batch.HEADER_SIZE else 0
        data = reader.read(position, _LEGACY_LENGTH_END + length)
        if not legacy_batch.is_legacy(data):
            raise CorruptRecord(path, position, "no whole v1 batch with a valid CRC32C")
        try:
            batch = legacy_batch.decode(data)
        except BatchFormatError as exc:
            raise CorruptRecord(path, position, str(exc)) from None
        end_offset = batch.base_offset + len(batch.records)
        if end_offset > from_offset:
            info = BatchInfo(
                path,
                position,
                batch.size_bytes,
                legacy_batch.MAGIC,
                batch.base_offset,
                len(batch.records),
                len(batch.records),
                batch.term,
                Compression.NONE,
                TimestampType.CREATE_TIME,
                batch.producer_id,
                None,
                batch.sequence,
                max(r.timestamp_ms or 0 for r in batch.records),
            )
            records = tuple(
                Record(batch.base_offset + i, r.timestamp_ms or 0, r.key, r.value, r.headers)
                for i, r in enumerate(batch.records)
            )
            yield info, records
        position += batch.size_bytes


def dump_records(directory: str, from_offset: int = 0) -> Iterator[Record]:
    """Yield CRC-checked records from ``from_offset`` on, in offset order. At the first damaged batch
    raises ``CorruptRecord`` naming its data file and byte position, once every record before it has
    been yielded."""
    for _, records in dump_batches(directory, from_offset):
        for record in records:
            if record.offset >= from_offset:
                yield record
