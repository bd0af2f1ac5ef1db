"""Transactions in a partition's log: control batches, the last stable offset and the aborted index
(docs/decisions/0019-transactions.md).

A transactional producer's batches carry the transactional bit; its transaction ends in the partition with
a *control batch* (Kafka's marker: the transactional and control bits, the producer's id and epoch, base
sequence -1, one record whose key is version 0 and the type, 0 ABORT or 1 COMMIT, and whose value is
version 0 and the coordinator's epoch). :class:`LogTransactions` follows the log as ``LeaderEpochs`` does:
every append is noted (the first transactional batch of a producer opens its transaction at that offset,
a control batch closes it, an ABORT adding the row ``(producer_id, first_offset, last_offset)`` to the
aborted index), so it is a function of the batches alone and every replica holds the same, whichever way
its batches came (apply, replay, recovery from a peer). A control batch of a producer with no open
transaction (a marker written again after a coordinator's failover) changes nothing.

- The *last stable offset* is the first offset of the oldest open transaction, or the log's end: below it
  every transaction has ended, and a read_committed reader reads only there.
- :meth:`LogTransactions.aborted_between` answers a read_committed fetch: the aborted transactions whose
  records lie among the offsets it returns, found by bisection on the rows' last offsets (a row whose
  last offset is more than the longest aborted transaction past the range cannot begin inside it).

Persisted as ``transactions-checkpoint`` (msgpack under a CRC32C, written to a temporary file, fsynced,
renamed, the directory fsynced): the open transactions and aborted rows as they stood at ``covered_end``.
It is written when they changed, at a flush (a Raft snapshot flushes the log first), at every roll and at
close. Opening reads it and walks the batches from ``covered_end`` to the log's end (the headers, and each
control batch's key), so it covers what was appended since; a log without a usable checkpoint is walked
whole (the index is derived data, rebuilt from the batches). A checkpoint covering more than the log holds
(a truncation, or a crash that took the unflushed tail back) is not used, and is replaced at once by one
true of the log as it is, before anything is appended where the cut batches were. A truncation walks the
log again from a checkpoint below the cut (a marker cut reopens its transaction, and only the batches say
where it began) and writes the checkpoint before the log takes another append. Rows whose transaction lies
wholly below the log's start are dropped when the start moves.

Pure but for :func:`open_transactions` and :meth:`LogTransactions.save`, which the owning ``Log`` calls
under its lock. Readers on other threads use ``open_first``/``rows`` snapshots replaced whole.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from collections.abc import Sequence
from typing import NamedTuple

import crc32c
import msgpack

from raftlog.storage.batch import (
    _ATTRIBUTES_AT,
    _CONTROL,
    _CRC_AT,
    _CRC_START,
    _TRANSACTIONAL,
    HEADER_SIZE,
    BatchFormatError,
    BatchHeader,
    ProducerRecord,
    encode_batch,
)
from raftlog.storage.checkpoint import Checkpointed
from raftlog.storage.errors import CorruptRecord
from raftlog.storage.segment import Segment, headers_from

log = logging.getLogger("raftlog.storage")

CHECKPOINT_FILE = "transactions-checkpoint"
CHECKPOINT_VERSION = 1
ABORT, COMMIT = 0, 1  # the control record's type
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_BASE_SEQUENCE_AT = 53
_CONTROL_HEAD_BYTES = 32  # enough of a control batch's records section to read its one record's key


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


# -- control batches (pure) ----------------------------------------------------------------------------


def encode_control_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """Kafka's end-of-transaction marker as a batch of base offset 0 and term 0 (the append stamps both)."""
    record = ProducerRecord(
        key=_CONTROL_KEY.pack(0, COMMIT if commit else ABORT),
        value=_CONTROL_VALUE.pack(0, coordinator_epoch),
        timestamp_ms=timestamp_ms,
    )
    batch = bytearray(
        encode_batch(0, [record], 0, timestamp_ms, producer_id, 0, producer_epoch=producer_epoch)
    )
    attributes = struct.unpack_from(">h", batch, _ATTRIBUTES_AT)[0] | _TRANSACTIONAL | _CONTROL
    struct.pack_into(">h", batch, _ATTRIBUTES_AT, attributes)
    struct.pack_into(">i", batch, _BASE_SEQUENCE_AT, -1)
    struct.pack_into(">I", batch, _CRC_AT, crc32c.crc32c(memoryview(batch)[_CRC_START:]))
    return bytes(batch)


def control_type(records: bytes | memoryview) -> int:
    """ABORT or COMMIT: the type in the key of a control batch's first record, read from the start of its
    (uncompressed) records section. BatchFormatError when it is not a control record."""
    position = 0

    def varint() -> int:
        nonlocal position
        shift = result = 0
        while True:
            if position >= len(records) or shift > 63:
                raise BatchFormatError("control record: truncated varint")
            byte = records[position]
            position += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    varint()  # the record's length
    position += 1  # attributes
    varint()  # timestamp delta
    varint()  # offset delta
    key_length = varint()
    if key_length < _CONTROL_KEY.size or position + _CONTROL_KEY.size > len(records):
        raise BatchFormatError(f"control record: a key of {key_length} bytes")
    version, kind = _CONTROL_KEY.unpack_from(records, position)
    if version < 0 or kind not in (ABORT, COMMIT):
        raise BatchFormatError(f"control record: version {version}, type {kind}")
    return int(kind)


def marker(key: bytes | None, value: bytes | None) -> tuple[str, int] | None:
    """A control record read as Kafka's ``kafka-dump-log`` shows it: ("COMMIT" or "ABORT", the
    coordinator's epoch); None when its key or value is not a marker's."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    version, kind = _CONTROL_KEY.unpack_from(key)
    if version < 0 or kind not in (ABORT, COMMIT):
        return None
    epoch = (
        _CONTROL_VALUE.unpack_from(value)[1]
        if value is not None and len(value) >= _CONTROL_VALUE.size
        else -1
    )
    return ("COMMIT" if kind == COMMIT else "ABORT"), int(epoch)


# -- the log's transactions ----------------------------------------------------------------------------


class LogTransactions(Checkpointed):
    """Open transactions and aborted rows of one log. Not thread-safe for changes (the log's lock
    serialises them); ``open_first`` and ``rows`` may be read from any thread."""

    checkpoint_file = CHECKPOINT_FILE
    checkpoint_name = "transactions checkpoint"

    def __init__(
        self,
        directory: str,
        open_txns: dict[int, int] | None = None,
        rows: Sequence[AbortedTransaction] = (),
        saved_end: int | None = None,
    ) -> None:
        super().__init__(directory, saved_end)
        self._open: dict[int, int] = dict(open_txns or {})  # producer id -> its transaction's first offset
        self.open_first: int | None = min(self._open.values(), default=None)
        self.rows: tuple[AbortedTransaction, ...] = tuple(rows)  # in increasing last offset
        self._lasts = [row.last_offset for row in self.rows]
        self._longest = max((r.last_offset - r.first_offset for r in self.rows), default=0)

    # -- changes ---------------------------------------------------------------------------------------

    def note(self, header: BatchHeader, kind: int | None) -> None:
        """A batch was appended at ``header.base_offset``; ``kind``: a control batch's type (None for any
        other batch). Called on every append: a non-transactional batch costs one test."""
        if not header.attributes & _TRANSACTIONAL or header.producer_id is None:
            return
        producer_id = header.producer_id
        if kind is None:
            if producer_id not in self._open:
                self._open[producer_id] = header.base_offset
                self._changed()
            return
        first = self._open.pop(producer_id, None)
        if first is None:
            return  # a marker written again: its transaction had ended
        if kind == ABORT:
            row = AbortedTransaction(producer_id, first, header.base_offset)
            self.rows = (*self.rows, row)
            self._lasts.append(row.last_offset)
            self._longest = max(self._longest, row.last_offset - row.first_offset)
        self._changed()

    def _changed(self) -> None:
        self.open_first = min(self._open.values(), default=None)
        self.dirty = True

    def truncate_from_start(self, start_offset: int) -> None:
        """The log starts at ``start_offset`` now: rows wholly below it go (no read reaches them)."""
        if self.rows and self.rows[0].last_offset < start_offset:
            kept = tuple(row for row in self.rows if row.last_offset >= start_offset)
            self.rows = kept
            self._lasts = [row.last_offset for row in kept]
            self.dirty = True

    def clear(self) -> None:
        """The log holds no batch any more (a reset to a new start)."""
        self._open.clear()
        self.rows, self._lasts, self._longest = (), [], 0
        self._changed()

    # -- answers ---------------------------------------------------------------------------------------

    def is_open(self, producer_id: int) -> bool:
        return producer_id in self._open

    def open_first_offsets(self) -> dict[int, int]:
        """Producer id -> the first offset of its open transaction (a copy; under the log's lock, or on
        the thread that changes the log)."""
        return dict(self._open)

    def last_stable_offset(self, end_offset: int, start_offset: int) -> int:
        """The first offset of the oldest open transaction (never below ``start_offset``), or the end."""
        first = self.open_first
        return end_offset if first is None else max(min(first, end_offset), start_offset)

    def aborted_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions with records in ``[start, end)``, in the
        order of their markers."""
        rows, lasts = self.rows, self._lasts
        if not rows or end <= start:
            return []
        low = bisect.bisect_left(lasts, start)
        high = bisect.bisect_left(lasts, end + self._longest + 1)
        return [(r.producer_id, r.first_offset) for r in rows[low:high] if r.first_offset < end]

    def is_aborted(self, producer_id: int, offset: int) -> bool:
        """Whether the producer's record at ``offset`` belongs to an aborted transaction."""
        rows = self.rows
        at = bisect.bisect_left(self._lasts, offset)
        high = bisect.bisect_left(self._lasts, offset + self._longest + 1)
        return any(r.producer_id == producer_id and r.first_offset <= offset for r in rows[at:high])

    # -- the checkpoint file ---------------------------------------------------------------------------

    def checkpoint(self, end_offset: int) -> bytes:
        body: bytes = msgpack.packb(
            [CHECKPOINT_VERSION, end_offset, sorted(self._open.items()), [list(r) for r in self.rows]]
        )
        return struct.pack(">I", crc32c.crc32c(body)) + body


# -- opening -------------------------------------------------------------------------------------------


def open_transactions(
    directory: str, segments: Sequence[Segment], log_start_offset: int, use_checkpoint: bool = True
) -> LogTransactions:
    """The transactions of the log whose recovered ``segments`` are given: the checkpoint's, completed from
    the batches it does not cover (module docstring); ``use_checkpoint=False`` walks the whole log."""
    first, end = segments[0].base_offset, segments[-1].end_offset
    saved = read_checkpoint(directory) if use_checkpoint else None
    stale = saved is not None and saved[0] > end
    if stale:
        saved = None  # it covers batches a crash or a truncation took back: only the batches say what is left
    if saved is None:
        txns, covered = LogTransactions(directory), first
    else:
        covered, open_txns, rows = saved
        txns = LogTransactions(directory, open_txns, rows, covered)
    for segment, at, header in headers_from(segments, max(covered, first)):
        kind = None
        if header.is_control and header.record_count > 0:
            head = os.pread(segment.fd, _CONTROL_HEAD_BYTES, at + HEADER_SIZE)
            try:
                kind = control_type(head)
            except BatchFormatError as exc:
                raise CorruptRecord(segment.path, at, str(exc)) from None
        txns.note(header, kind)
    txns.truncate_from_start(log_start_offset)
    if stale:
        txns.save(end)  # before an append reuses the offsets the stale one described
    elif txns.saved_end != end:
        txns.dirty = True
    return txns


def read_checkpoint(directory: str) -> tuple[int, dict[int, int], list[AbortedTransaction]] | None:
    """(covered end, open transactions, aborted rows) from the checkpoint; None when there is none or it
    does not check (logged: rebuilt from the batches)."""
    path = os.path.join(directory, CHECKPOINT_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("%s: unreadable, rebuilt from the log's batches: %s", path, exc)
        return None
    try:
        if len(data) < 4 or struct.unpack_from(">I", data)[0] != crc32c.crc32c(data[4:]):
            raise ValueError("CRC mismatch")
        version, covered, open_rows, rows = msgpack.unpackb(data[4:], strict_map_key=False)
        if version != CHECKPOINT_VERSION or type(covered) is not int or covered < 0:
            raise ValueError(f"version {version}, covered end {covered}")
        open_txns = {int(p): int(o) for p, o in open_rows}
        aborted = [AbortedTransaction(int(p), int(a), int(b)) for p, a, b in rows]
        lasts = [r.last_offset for r in aborted]
        if lasts != sorted(lasts) or any(r.last_offset >= covered for r in aborted):
            raise ValueError("rows out of order or past the covered end")
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        log.warning("%s: not a transactions checkpoint, rebuilt from the log's batches: %s", path, exc)
        return None
    return covered, open_txns, aborted
