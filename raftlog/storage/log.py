"""A partition's log: an ordered run of segments in one directory, with dense offsets.

Invariants, checked on every append and on open:
- segments are contiguous: each one's end offset is the next one's base offset;
- offsets are dense: batch i+1's base offset is batch i's end offset;
- under flush mode "always", an append returns only after its bytes are fsynced;
- only the last (active) segment is written; closed segments were fsynced before the next was created.

Thread-safe: one lock serialises every operation on a log. A read holds it only to resolve which
segments and byte ranges it covers (a ``LogView`` of ``log_read``, which holds those segments); the preads,
CRC checks and decoding run without it, so a large fetch does not delay the appends of the thread applying
the partition's entries. The streaming ``LogReader`` reads one segment's view at a time.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from raftlog.errors import check
from raftlog.storage import log_cut
from raftlog.storage.batch import (
    HEADER_SIZE,
    BatchFormatError,
    BatchHeader,
    ProducerRecord,
    Record,
    decode_records,
    encode_batch,
    stamped_head,
    validate_records,
    verify,
)
from raftlog.storage.config import LogConfig
from raftlog.storage.errors import DiskFull, InvalidRecord, LogClosed, RecordTooLarge, StorageUnavailable
from raftlog.storage.leader_epochs import open_epochs
from raftlog.storage.log_open import open_segments, read_cleaner_offsets, read_start_offset
from raftlog.storage.log_read import LogReader, LogView, ReadBatch
from raftlog.storage.log_state import LogState
from raftlog.storage.retention import SegmentInfo, segments_to_delete
from raftlog.storage.segment import Segment
from raftlog.storage.space import DiskSpace
from raftlog.storage.transactions import control_type, open_transactions

log = logging.getLogger("raftlog.storage")

_MAX_RELATIVE_OFFSET = 2**32 - 1
_READS_PAST_COMPACTED_MAX = 64  # reads of record-less compacted batches one read goes past


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    end_offset: int  # offset after the last record appended
    term: int


def last_stable_offset(log: Log) -> int:
    """Below it every transaction in ``log`` has ended (Kafka's LSO): a read_committed reader stops there."""
    return log.transactions.last_stable_offset(log.end_offset, log.log_start_offset)


class Log(LogState):
    """A durable, segmented, append-only log of record batches. Create with :meth:`Log.open`. What it
    holds and the checks it makes are its ``LogState``'s; truncation and start moves are ``log_cut``'s."""

    # -- opening -------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str,
        config: LogConfig | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        discard: Callable[[str], None] = os.unlink,
        space: DiskSpace | None = None,
        damaged_to: str | None = None,
        mark_level: int = 1,
    ) -> Log:
        """Open (creating if needed) and recover the log in ``directory``. ``discard(path)`` takes the
        files of segments that retention or truncation deletes, once no reader holds them (see
        ``Segment.delete``): an unlink by default; it runs under the log's lock, so a caller that cares
        about that lock hands the file on (a node: a rename into its trash and its paced remover).
        ``space``: what the node's writers know of room on the disk (the log tells it of every write it
        makes or cannot make for want of room; its own by default). ``damaged_to``: a damaged sealed
        segment raises ``CorruptRecord``, unless this names where it and the segments after it are set
        aside (``raftlog.storage.salvage``: for a log whose records can be had again elsewhere).
        ``mark_level``: the level a new log's format marker is fenced at (``log_format.fence``)."""
        os.makedirs(directory, exist_ok=True)
        self = cls(directory, config or LogConfig(), clock, discard, space)
        self._segments, self.open_report = open_segments(
            directory, self.config, discard, damaged_to, mark_level
        )
        self._bases = [s.base_offset for s in self._segments]
        self._start_offset = read_start_offset(directory)
        self.compacted_below = read_cleaner_offsets(directory).rewritten_below
        self._durable_end_offset = self.end_offset
        self.leader_epochs = open_epochs(directory, self._segments, self.log_start_offset)
        self.transactions = open_transactions(directory, self._segments, self.log_start_offset)
        return self

    # -- offsets -------------------------------------------------------------------------------------

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    # -- appends -------------------------------------------------------------------------------------

    def append(
        self,
        records: Sequence[ProducerRecord],
        term: int = 0,
        producer_id: int | None = None,
        sequence: int | None = None,
    ) -> AppendResult:
        """Append records as one batch at the end of the log; offsets are assigned densely."""
        with self._lock:
            self._check_writable()
            now_ms = self._clock()
            batch = encode_batch(self.end_offset, records, term, now_ms, producer_id, sequence)
            return self._append(batch, verify(batch), now_ms)

    def append_prepared(
        self,
        batch: bytes | memoryview,
        term: int,
        enforce_size_limit: bool = True,
        durable_elsewhere: bool = False,
        checked_records: bool = False,
        verified_header: BatchHeader | None = None,
    ) -> AppendResult:
        """Append a batch encoded elsewhere (e.g. by a Raft leader), stamping the next offset and ``term``.

        A replica applying a committed entry passes ``enforce_size_limit=False``: the leader checked the
        limit before proposing, and every replica must apply the same entries whatever its local config.

        ``durable_elsewhere=True``: the caller already holds this batch durably (a Raft journal entry,
        fsynced on a majority before it was committed) and calls :meth:`flush` before it lets go of that
        copy, so the append skips ``flush.policy``'s fsync; ``durable_end_offset`` stays behind until the
        next flush, roll or close.

        ``checked_records=True``: whoever encoded the batch already checked every record (a Raft leader
        does before proposing), so only framing and CRC are checked here, not each record again: a
        replica must apply a committed entry as it is, and decoding every record costs more than the
        rest of the append.

        ``verified_header``: this very batch's header as :func:`verify` returned it, or as
        :func:`framed` did for bytes whose CRC the caller trusts (a committed Raft entry): its CRC is not
        checked here.
        """
        with self._lock:
            # the CRC it came with covers everything the stamp leaves alone
            header = self._checked(batch, enforce_size_limit, verified_header)
            try:
                if not checked_records:
                    validate_records(batch, header)
                head = stamped_head(batch, self.end_offset, term)
            except BatchFormatError as exc:
                raise InvalidRecord(f"malformed batch: {exc}") from exc
            header = dataclasses.replace(header, base_offset=self.end_offset, term=term)
            return self._append(
                batch, header, self._clock(), enforce_size_limit, durable_elsewhere, head=head
            )

    def append_batch(
        self,
        batch: bytes,
        enforce_size_limit: bool = True,
        verified_header: BatchHeader | None = None,
        durable_elsewhere: bool = False,
    ) -> AppendResult:
        """Append an already-offset batch exactly as given (replica recovery); it must start at the end.
        A replica copying committed batches passes ``enforce_size_limit=False`` (see append_prepared);
        ``verified_header``: what :func:`verify` returned for this very batch (its CRC is not checked
        twice); ``durable_elsewhere``: as in append_prepared (the peers hold the batch; the caller
        flushes when it chooses)."""
        with self._lock:
            header = self._checked(batch, enforce_size_limit, verified_header)
            if header.base_offset != self.end_offset:
                raise InvalidRecord(
                    f"batch starts at offset {header.base_offset} but the log ends at {self.end_offset}"
                )
            return self._append(batch, header, self._clock(), enforce_size_limit, durable_elsewhere)

    def _checked(
        self, batch: bytes | memoryview, enforce_size_limit: bool, verified_header: BatchHeader | None
    ) -> BatchHeader:
        """Under the lock, before an append: the log takes writes, the batch is within
        ``max.message.bytes`` (when enforced), and its header, CRC-checked unless ``verified_header`` is
        what :func:`verify` already said of it (InvalidRecord for a malformed batch)."""
        self._check_writable()
        if enforce_size_limit:
            self._check_size(len(batch))
        try:
            return verify(batch) if verified_header is None else verified_header
        except BatchFormatError as exc:
            raise InvalidRecord(f"malformed batch: {exc}") from exc

    def _check_size(self, size: int) -> None:
        if size > self.config.max_message_bytes:
            raise RecordTooLarge(size, self.config.max_message_bytes)

    def _append(
        self,
        batch: bytes | memoryview,
        header: BatchHeader,
        now_ms: int,
        enforce_size_limit: bool = True,
        durable_elsewhere: bool = False,
        head: bytes | None = None,
    ) -> AppendResult:
        self._touch()
        if enforce_size_limit:
            self._check_size(header.size_bytes)
        check(
            header.base_offset == self.end_offset,
            f"{self.directory}: batch at {header.base_offset} does not start at end {self.end_offset}",
        )
        kind = None
        if header.is_control and header.record_count > 0:
            try:
                kind = control_type(memoryview(batch)[HEADER_SIZE:])
            except BatchFormatError as exc:
                raise InvalidRecord(f"malformed control batch: {exc}") from exc
        active = self._segments[-1]
        try:
            if not active.is_empty and self._should_roll(active, header, now_ms):
                self._roll_locked()
                active = self._segments[-1]
            active.append(batch, header, now_ms, head)
            self.leader_epochs.note(header.term, header.base_offset)
            self.transactions.note(header, kind)
            self._unflushed_bytes += header.size_bytes
            due = self.config.flush_mode == "always" or self._unflushed_bytes >= self.config.flush_bytes
            if due and not durable_elsewhere:  # else the caller's durable copy stands in until flush()
                self._flush_locked(now_ms)
        except DiskFull as exc:
            # Nothing of the batch was kept (Segment.append cut it back) and nothing before it is at
            # risk: the log stays writable, and the same append may come again once there is room.
            self.space.refused(exc)
            raise
        except StorageUnavailable as exc:
            self._fail(str(exc))
            raise
        except OSError as exc:
            self._fail(str(exc))
            raise StorageUnavailable(active.path, str(exc)) from exc
        self.space.wrote()
        return AppendResult(header.base_offset, header.end_offset, header.term)

    def _should_roll(self, active: Segment, header: BatchHeader, now_ms: int) -> bool:
        if active.size + header.size_bytes > self.config.segment_bytes:
            return True
        if header.end_offset - active.base_offset > _MAX_RELATIVE_OFFSET:
            return True
        first = active.first_append_ms
        # compaction never cleans the active segment: it rolls by max.compaction.lag.ms as well (Kafka's)
        roll_ms = self.config.segment_ms
        if self.config.compacted:
            roll_ms = min(roll_ms, self.config.max_compaction_lag_ms)
        return first is not None and now_ms - first >= roll_ms

    # -- rolling and flushing ------------------------------------------------------------------------

    def roll(self) -> None:
        """Close the active segment and start a new one (no-op when the active segment is empty)."""
        with self._lock:
            self._check_writable()
            if not self._segments[-1].is_empty:
                self._roll_locked()

    def _roll_locked(self) -> None:
        """Raises ``DiskFull`` with the active segment still active (sealed or not): a later append
        rolls again."""
        active = self._segments[-1]
        active.seal()  # fsync data and indexes before the next segment exists
        self._durable_end_offset = active.end_offset
        self.leader_epochs.save_if_behind(active.end_offset)  # opening walks at most the active segment
        self.transactions.save_if_behind(active.end_offset)
        segment = Segment.create(self.directory, active.end_offset, self.config.index_interval_bytes)
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def flush(self) -> None:
        """fsync everything appended so far. The fdatasync runs outside the log's lock (the segment held),
        so the applies and reads that need the lock go on meanwhile; what they append is left for a later
        flush. A failed fdatasync fails the log, as in :meth:`flush_if_due`."""
        with self._lock:
            if self._closed:
                return
            self._touch()
            if self._failed is not None:
                raise StorageUnavailable(self.directory, f"log failed earlier: {self._failed}")
            segment = self._segments[-1]  # earlier segments were flushed when they rolled
            end_offset, now_ms, truncations = self.end_offset, self._clock(), self._truncations
            segment.acquire()
            fd = segment.claim_flush()
            self._unflushed_bytes = 0
        try:
            if fd is not None:
                os.fdatasync(fd)
        except OSError as exc:
            with self._lock:
                self._fail(f"fsync failed: {exc}")
            raise StorageUnavailable(segment.path, f"fsync failed: {exc}") from exc
        finally:
            with self._lock:
                segment.release()
        with self._lock:
            self._last_flush_ms = max(self._last_flush_ms, now_ms)
            if self._truncations == truncations:  # else the records it covered may be gone
                self._durable_end_offset = max(self._durable_end_offset, end_offset)
            if self.leader_epochs.dirty and not self._closed:
                self.leader_epochs.save_if_behind(self.end_offset)
            if self.transactions.dirty and not self._closed:
                self.transactions.save_if_behind(self.end_offset)

    def flush_if_due(self, now_ms: int) -> bool:
        """Group-commit tick: fsync if unflushed data is older than ``flush.ms``. True if it flushed."""
        with self._lock:
            if self._closed or self._unflushed_bytes == 0:
                return False
            if now_ms - self._last_flush_ms < self.config.flush_interval_ms:
                return False
            self._flush_locked(now_ms)
            return True

    def _flush_locked(self, now_ms: int) -> None:
        self._touch()
        if self._failed is not None:
            raise StorageUnavailable(self.directory, f"log failed earlier: {self._failed}")
        try:
            self._segments[-1].flush()
        except OSError as exc:
            # After a failed fsync the kernel may have dropped the dirty pages: retrying could report
            # success for data that is gone. The log stops accepting writes until it is reopened and
            # recovered from what is really on disk.
            self._fail(f"fsync failed: {exc}")
            raise StorageUnavailable(self._segments[-1].path, f"fsync failed: {exc}") from exc
        self._unflushed_bytes = 0
        self._last_flush_ms = now_ms
        self._durable_end_offset = self.end_offset

    # -- reads ---------------------------------------------------------------------------------------

    def read_view(self, offset: int, max_bytes: int, max_offset: int | None = None) -> LogView:
        """The batches a read from ``offset`` may return, resolved under the lock and read outside it.

        Under the lock this only checks ``offset`` (``LogClosed``, ``OffsetOutOfRange``), finds the
        segments and byte ranges that cover the read (no more than ``max_bytes`` of them past the first
        batch, none starting at or after ``max_offset``), notes each one's readable end (its size now) and
        holds them (``Segment.acquire``): retention, truncation, handle sweeps and the log's close leave
        their files open and readable until the view lets go. The preads, CRC checks and decoding happen
        in :meth:`LogView.batches` and :meth:`LogView.records`, without the lock that applies (appends)
        need. Use as a context manager, or ``close()`` it."""
        with self._lock:
            return self._view(offset, max_bytes, max_offset, one_segment=False)

    def _view(self, offset: int, max_bytes: int | None, max_offset: int | None, one_segment: bool) -> LogView:
        """Under the lock. ``max_bytes`` None: no byte budget; ``one_segment``: cover only the segment
        holding ``offset`` (a streaming reader moves on one segment at a time)."""
        if self._closed:
            raise LogClosed(f"log {self.directory} is closed")
        self._check_offset(offset)
        self._touch()
        limit = self.end_offset if max_offset is None else min(max_offset, self.end_offset)
        spans: list[tuple[Segment, int, int]] = []
        index = self._segment_index(offset)
        position = self._segments[index].locate(offset)
        covered = 0
        while index < len(self._segments):
            segment = self._segments[index]
            if segment.base_offset >= limit:
                break
            if position is not None and position < segment.size:
                spans.append((segment, position, segment.size))
                covered += segment.size - position
                # a batch never spans two segments: the first span holds at least one whole batch, and
                # once the spans hold max_bytes the cut stops before any byte past them
                if one_segment or (max_bytes is not None and covered >= max_bytes):
                    break
            index += 1
            position = 0
        for segment, _, _ in spans:
            segment.acquire()
        return LogView(self._lock, self.directory, offset, max_bytes, limit, spans)

    def read_batches(self, offset: int, max_bytes: int, max_offset: int | None = None) -> list[ReadBatch]:
        """CRC-checked batches holding records from ``offset`` on, up to ``max_bytes`` (at least one batch
        when any record is available), never including a batch that starts at or after ``max_offset``.
        The lock is held only to resolve the read (:meth:`read_view`), not while it reads."""
        with self.read_view(offset, max_bytes, max_offset) as view:
            return view.batches()

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> list[Record]:
        """Records from ``offset`` on, within ``max_bytes`` of batches (at least one record if any), all
        below ``max_offset`` (e.g. the high watermark) when given. Decoded outside the lock. Batches that
        compaction left without a record at or past ``offset`` are read past, so a reader that goes on from
        its last record + 1 always moves."""
        for _ in range(_READS_PAST_COMPACTED_MAX):
            with self.read_view(offset, max_bytes, max_offset) as view:
                records = view.records()
                end = view.batches_end
            if records or end is None or end >= (self.end_offset if max_offset is None else max_offset):
                return records
            offset = end
        return []

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """The first offset whose record has a timestamp >= ``timestamp_ms``, or None if there is none."""
        found = self.first_record_at(timestamp_ms)
        return None if found is None else found.offset

    def first_record_at(self, timestamp_ms: int, after_segment: int = -1) -> Record | None:
        """The first record (in offset order, from the log start offset) whose timestamp is >=
        ``timestamp_ms``, or None if there is none: Kafka's ListOffsets by timestamp. Under the lock only
        the segment and byte position to start from are found (the time index narrows the scan to a few
        batches) and the segment is held; its batches are read and decoded without the lock, as a fetch's
        are. ``after_segment``: only segments whose base offset is above it."""
        with self._lock:
            if self._closed:
                raise LogClosed(f"log {self.directory} is closed")
            self._touch()
            first = self.log_start_offset
            start = None
            for segment in self._segments:  # the first segment whose max timestamp reaches it holds it
                if segment.base_offset <= after_segment:
                    continue
                if segment.max_timestamp_ms is None or segment.max_timestamp_ms < timestamp_ms:
                    continue
                position = segment.locate(segment.time_index.scan_start(timestamp_ms))
                if position is not None:
                    start = (segment, position, segment.size)
                    break
            if start is None:
                return None
            segment, position, end = start
            segment.acquire()
        try:
            deleted = False  # a record late enough lies below the start (deleted records: advance_start)
            for _, header, view in segment.batches(position, end):
                if header.max_timestamp_ms >= timestamp_ms:
                    for record in decode_records(view, header):
                        if record.timestamp_ms >= timestamp_ms:
                            if record.offset >= first:
                                return record
                            deleted = True
            if deleted:  # every late enough record of the segment holding the start lies below it
                return self.first_record_at(timestamp_ms, after_segment=segment.base_offset)
            check(
                False,
                f"{segment.path}: max timestamp {segment.max_timestamp_ms} >= {timestamp_ms} "
                "but no batch reaches it",
            )
            return None
        finally:
            with self._lock:
                segment.release()

    def reader(self, offset: int, max_offset: int | None = None) -> LogReader:
        """A streaming reader from ``offset``; it keeps the segment it reads from open, even if retention
        deletes it meanwhile, and reads it without the log's lock (a view of one segment at a time). Use
        as a context manager."""

        def segment_view(at: int) -> LogView | None:
            """A view of the one segment holding ``at``; None at the end of the log or at ``max_offset``."""
            with self._lock:
                end = self.end_offset
                if at >= (end if max_offset is None else min(max_offset, end)):
                    return None
                view = self._view(at, None, max_offset, one_segment=True)
            check(not view.is_empty, f"{self.directory}: no batch holds offset {at}")
            return view

        with self._lock:
            self._check_offset(offset)
            return LogReader(segment_view, offset)

    # -- truncation and retention --------------------------------------------------------------------

    def truncate(self, offset: int) -> None:
        """Discard every record at or after ``offset`` (a batch boundary): :func:`log_cut.truncate`."""
        log_cut.truncate(self, offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Replace the whole log with an empty one starting at ``offset`` (>= end offset):
        :func:`log_cut.truncate_fully_and_start_at`."""
        log_cut.truncate_fully_and_start_at(self, offset)

    def advance_start(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (Kafka's DeleteRecords); returns the start offset:
        :func:`log_cut.advance_start`."""
        return log_cut.advance_start(self, offset)

    def restart_empty_before(self, offset: int) -> None:
        """An empty log restarted at its start offset begins at ``offset`` instead, below its start:
        :func:`log_cut.restart_empty_before`."""
        log_cut.restart_empty_before(self, offset)

    def apply_retention(self, now_ms: int) -> int:
        """Delete the leading segments that ``retention.ms`` / ``retention.bytes`` no longer keep."""
        with self._lock:
            if self._closed or self._failed is not None or not self.config.retained:
                return 0  # cleanup.policy compact alone: nothing goes for its age or size
            infos = [SegmentInfo(s.base_offset, s.size, s.max_timestamp_ms) for s in self._segments]
            count = segments_to_delete(infos, self.config.retention_ms, self.config.retention_bytes, now_ms)
            if count:
                log.info(
                    "%s: retention deletes %d segment(s) below offset %d",
                    self.directory,
                    count,
                    self._segments[count].base_offset,
                )
            return log_cut.delete_oldest_segments(self, count)

    # -- open files ----------------------------------------------------------------------------------

    def release_handles(self) -> bool:
        """Close this log's open files; every later use opens what it needs again. False, and nothing
        done, while another thread holds the log (it is in use: not worth closing now)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if not self._closed:
                for segment in self._segments:
                    segment.release_handles()
            self.handles_open = False
            return True
        finally:
            self._lock.release()

    def reconfigure(self, config: LogConfig) -> None:
        """Apply a new configuration live (it takes effect from the next append, roll and retention run)."""
        with self._lock:
            check(config.index_interval_bytes > 0, "index interval must be positive")
            self.config = config

    def segment_infos(self) -> list[SegmentInfo]:
        with self._lock:
            return [SegmentInfo(s.base_offset, s.size, s.max_timestamp_ms) for s in self._segments]

    # -- closing -------------------------------------------------------------------------------------

    def close(self, seal: bool = True) -> None:
        """Flush and close. Further calls on this handle raise ``LogClosed``. ``seal=False`` skips the
        flush: for a log whose files are deleted next (what was not fsynced may then be lost)."""
        with self._lock:
            if self._closed:
                return
            try:
                if self._failed is None and seal:
                    self._segments[-1].seal()
                    self.leader_epochs.save_if_behind(self.end_offset)  # a clean reopen walks nothing
                    self.transactions.save_if_behind(self.end_offset)
            finally:
                for segment in self._segments:
                    segment.close_after_readers()  # a view or reader still reading closes it last
                self._closed = True
