"""One segment: a data file of record batches plus its sparse offset and time indexes.

Files are named by the segment's base offset, zero-padded to 20 digits (Kafka's convention):
``00000000000000000042.log``, ``.index`` and ``.timeindex``. Only the last segment of a log (the active
one) is ever appended to; the others are closed and immutable until retention deletes them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from raftlog.errors import InvariantViolation, check
from raftlog.storage.batch import (
    HEADER_SIZE,
    BatchFormatError,
    BatchHeader,
    crc_ok,
    crc_ok_at,
    decode_header,
    frame_at,
)
from raftlog.storage.errors import CorruptRecord, DiskFull, NotBatchBoundary, StorageUnavailable
from raftlog.storage.handle import FileHandle
from raftlog.storage.index import OffsetIndex, TimeIndex
from raftlog.storage.space import no_space, refusal
from raftlog.storage.writeback import start_writeback

log = logging.getLogger("raftlog.storage")

READ_CHUNK_BYTES = 256 * 1024
FIRST_READ_BYTES = 16 * 1024  # a walk's first read: enough for the headers a lookup or one small batch needs
READ_CHUNK_MAX_BYTES = 4 * 1024 * 1024  # after large batches, walk reads chunks of up to this
NAME_DIGITS = 20
DELETED_SUFFIX = ".deleted"  # a deleted segment's files, renamed, until its discard takes them
WRITEBACK_BYTES = 4 * 1024 * 1024  # unflushed bytes after which the kernel is asked to start writing them


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:0{NAME_DIGITS}d}{suffix}"


def fsync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ScanStop(Exception):
    """A walk over a data file met bytes that are not a valid next batch."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"at byte {position}: {reason}")
        self.position = position
        self.reason = reason


class _ReadAhead:
    """A data file read in chunks ahead of a walk over its batches: the header at each position, checked
    the same way for every walk, and the batch's bytes when the walk wants them."""

    __slots__ = ("_end", "_fd", "_grow", "buffer", "buffer_start", "chunk")

    def __init__(self, fd: int, start: int, end: int, grow: Callable[[int], int]) -> None:
        self._fd = fd
        self._end = end
        self._grow = grow  # the size of the next read for headers, after one of ``chunk`` bytes
        self.buffer = b""
        self.buffer_start = start
        self.chunk = FIRST_READ_BYTES

    def header(self, position: int) -> tuple[BatchHeader, int]:
        """The header of the batch at ``position``, well-formed and ending within ``end``, and where the
        batch starts in :attr:`buffer`. Raises :class:`ScanStop`."""
        relative = position - self.buffer_start
        if len(self.buffer) - relative < HEADER_SIZE:
            self.buffer = os.pread(self._fd, self.chunk, position)
            self.chunk = self._grow(self.chunk)
            self.buffer_start, relative = position, 0
            if len(self.buffer) < HEADER_SIZE:
                torn = min(len(self.buffer), self._end - position)
                raise ScanStop(position, f"torn header: {torn} bytes at end")
        try:
            header = decode_header(self.buffer, relative)
        except BatchFormatError as exc:
            raise ScanStop(position, str(exc)) from None
        size = header.size_bytes
        if position + size > self._end:
            raise ScanStop(position, f"batch of {size} bytes runs past the end of the file ({self._end})")
        return header, relative

    def batch(self, position: int, size: int, relative: int) -> memoryview:
        """The ``size`` bytes of the batch at ``position`` (``relative`` in :attr:`buffer`, as
        :meth:`header` said), read with the chunks that follow when the buffer holds less; valid until
        the next read. Raises :class:`ScanStop` on a short read."""
        if len(self.buffer) - relative < size:
            self.chunk = max(self.chunk, min(size, READ_CHUNK_MAX_BYTES))
            self.buffer = os.pread(self._fd, max(self.chunk, size), position)
            self.buffer_start, relative = position, 0
            if len(self.buffer) < size:
                raise ScanStop(position, f"short read: {len(self.buffer)} of {size} bytes")
        return memoryview(self.buffer)[relative : relative + size]


def walk(fd: int, start: int, end: int, verify: bool) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """Yield (position, header, batch bytes) for consecutive batches in ``[start, end)``.

    Reads in chunks so small batches cost no syscall each: a small first read (callers often want one
    batch), then chunks of at least ``READ_CHUNK_BYTES``, or of the largest batch met so far (up to
    ``READ_CHUNK_MAX_BYTES``), so that a run of large batches costs one read each. The yielded view is
    valid only until the next step. With ``verify`` every batch's CRC is checked. Raises
    :class:`ScanStop` at the first byte that is not a complete, well-formed (and, with ``verify``,
    CRC-valid) batch.
    """
    reader = _ReadAhead(fd, start, end, grow=lambda chunk: max(chunk, READ_CHUNK_BYTES))
    position = start
    while position < end:
        header, relative = reader.header(position)
        view = reader.batch(position, header.size_bytes, relative)
        if verify and not crc_ok(view, header):
            raise ScanStop(position, f"crc32c mismatch in batch at offset {header.base_offset}")
        yield position, header, view
        position += header.size_bytes


def walk_headers(fd: int, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for consecutive batches in ``[start, end)``, reading only the headers:
    bodies are skipped, neither read nor CRC-checked. For lookups; raises :class:`ScanStop` like walk.
    Reads start small (a lookup usually ends within a few batches) and double up to ``READ_CHUNK_BYTES``."""
    reader = _ReadAhead(fd, start, end, grow=lambda chunk: min(2 * chunk, READ_CHUNK_BYTES))
    position = start
    while position < end:
        header, _ = reader.header(position)
        yield position, header
        position += header.size_bytes


def headers_from(segments: Sequence[Segment], offset: int) -> Iterator[tuple[Segment, int, BatchHeader]]:
    """(segment, position, header) of every batch of the recovered ``segments`` from the one holding
    ``offset`` on (what opening a table reads past its checkpoint). Recovery checked these bytes a
    moment ago: damage found now raises ``CorruptRecord``."""
    for segment in segments:
        if segment.end_offset <= offset or segment.size == 0:
            continue
        position = 0 if offset <= segment.base_offset else segment.locate(offset)
        if position is None:
            continue
        try:
            for at, header in walk_headers(segment.fd, position, segment.size):
                yield segment, at, header
        except ScanStop as stop:
            raise CorruptRecord(segment.path, stop.position, stop.reason) from None


def read_run(
    fd: int, start: int, end: int, budget: int | None, limit: int, whole_first: bool
) -> tuple[bytes, bool, int | None]:
    """Consecutive CRC-checked batches from ``start`` (a batch boundary) up to ``end``, read with one
    ``pread``: those that fit in ``budget`` bytes (None: no budget) and start below offset ``limit``;
    with ``whole_first`` the first batch comes whole even when larger than the budget. Returns the bytes,
    whether the run stopped before ``end`` (at the budget or the limit) and the end offset of its last
    batch (None: no batch), which the walk that checks them learns on the way. The bytes are the read
    buffer itself when the run ends where the read did, else one copy of what is kept. Raises
    :class:`ScanStop` where ``[start, end)`` does not hold well-formed, CRC-valid batches."""
    want = end - start if budget is None else min(end - start, max(budget, HEADER_SIZE))
    buffer = os.pread(fd, want, start)
    if len(buffer) < want:  # the file was cut under the reader (a truncation of uncommitted entries)
        raise ScanStop(start + len(buffer), f"short read: {len(buffer)} of {want} bytes")
    kept = 0
    stopped = False
    end_offset = None
    while start + kept < end:
        if len(buffer) - kept < HEADER_SIZE:
            if len(buffer) == end - start:
                raise ScanStop(start + kept, f"torn header: {len(buffer) - kept} bytes at end")
            stopped = True  # the budget ends inside this header
            break
        try:  # the header's framing only, no BatchHeader: this walk runs for every batch a fetch sends
            size, base_offset, batch_end, crc = frame_at(buffer, kept)
        except BatchFormatError as exc:
            raise ScanStop(start + kept, str(exc)) from None
        if start + kept + size > end:
            raise ScanStop(start + kept, f"batch of {size} bytes runs past the end of the file ({end})")
        if base_offset >= limit:
            stopped = True
            break
        if kept + size > len(buffer):
            if kept == 0 and whole_first:  # larger than the budget, and the run's first: read it whole
                buffer = os.pread(fd, size, start)
                if len(buffer) < size:
                    raise ScanStop(start, f"short read: {len(buffer)} of {size} bytes")
            else:
                stopped = True  # the budget ends inside this batch
                break
        if not crc_ok_at(buffer, kept, size, crc):
            raise ScanStop(start + kept, f"crc32c mismatch in batch at offset {base_offset}")
        kept += size
        end_offset = batch_end
        if kept == len(buffer) and start + kept < end:
            stopped = True  # the budget is used up exactly (or the first batch was read alone)
            break
    return (buffer if kept == len(buffer) else buffer[:kept]), stopped, end_offset


def batch_bytes(view: memoryview) -> bytes:
    """The bytes of a batch yielded by :func:`walk`, kept past the next step: the read buffer itself when
    the batch fills it (large batches are read alone), else a copy."""
    source = view.obj
    if type(source) is bytes and len(source) == view.nbytes:
        return source
    return bytes(view)


def write_error(path: str, exc: OSError, what: str) -> StorageUnavailable:
    """``DiskFull`` for a write refused for want of room, ``StorageUnavailable`` for any other error."""
    full: DiskFull | None = refusal(path, exc, what)
    return full if full is not None else StorageUnavailable(path, f"{what} failed: {exc}")


def _remove_files(directory: str, base_offset: int, staged: str = "") -> None:
    """The files of a segment whose creation failed (those it made)."""
    for suffix in (".log", ".index", ".timeindex"):
        try:
            os.unlink(os.path.join(directory, segment_name(base_offset, suffix) + staged))
        except FileNotFoundError:
            continue


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What opening a segment had to repair (empty when nothing)."""

    path: str
    truncated_bytes: int = 0
    truncated_at: int = -1
    reason: str = ""
    rebuilt_indexes: bool = False


class Segment(FileHandle):
    """A data file and its indexes. Not thread-safe: the owning :class:`Log` serialises access."""

    def __init__(self, directory: str, base_offset: int, index_interval_bytes: int, staged: str = "") -> None:
        """``staged``: a suffix after each file's name (a segment that compaction writes beside the ones it
        replaces, ``raftlog.storage.cleaner``)."""
        self.directory = directory
        self.base_offset = base_offset
        super().__init__(os.path.join(directory, segment_name(base_offset, ".log") + staged))
        self._index_interval_bytes = index_interval_bytes
        self.size = os.fstat(self.fd).st_size
        try:
            self.index = OffsetIndex(
                os.path.join(directory, segment_name(base_offset, ".index") + staged), base_offset
            )
            try:
                self.time_index = TimeIndex(
                    os.path.join(directory, segment_name(base_offset, ".timeindex") + staged), base_offset
                )
            except BaseException:
                self.index.close()
                raise
        except BaseException:
            self.close_descriptor()
            raise
        self.end_offset = base_offset
        # (base offset, byte position) of the last batch this process tracked: a read at the log's end,
        # what a consumer keeping up asks, finds its batch here without the index or a walk of headers
        # (None until a batch is tracked, and after a truncation)
        self._last_batch: tuple[int, int] | None = None
        self.max_timestamp_ms: int | None = None
        self.first_append_ms: int | None = None  # wall clock of the first append since open (segment.ms)
        self._bytes_since_index = 0
        self._dirty = False
        self._written_back = self.size  # writeback was started (or an fsync done) up to here
        self.readers = 0
        self.deleted = False
        self._close_when_released = False  # deleted, or its log closed, while readers held it
        self._discard: Callable[[str], None] | None = None  # set by delete()
        self._discarded: list[str] = []  # files renamed by delete(), not yet handed to its discard

    # -- creation and recovery -------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str, base_offset: int, index_interval_bytes: int, staged: str = "") -> Segment:
        """A new empty segment, its files created and the directory synced. Raises ``DiskFull`` (no room
        for the files: none of them is left behind) or ``StorageUnavailable``."""
        path = os.path.join(directory, segment_name(base_offset, ".log") + staged)
        check(not os.path.exists(path), f"segment {path} already exists")
        try:
            segment = cls(directory, base_offset, index_interval_bytes, staged)
        except OSError as exc:
            _remove_files(directory, base_offset, staged)
            raise write_error(path, exc, "creating the segment's files") from exc
        try:
            fsync_directory(directory)
        except OSError as exc:
            segment.close()
            _remove_files(directory, base_offset, staged)
            raise write_error(path, exc, "syncing the directory of a new segment") from exc
        return segment

    def recover_active(self) -> RecoveryReport:
        """Verify every batch (CRC and offset contiguity), rebuild both indexes, cut a torn tail."""
        self.index.truncate_from(self.base_offset)
        self.time_index.truncate_from(self.base_offset)
        valid_end, stop = self._rebuild(verify=True)
        if stop is None:
            return RecoveryReport(self.path, rebuilt_indexes=True)
        dropped = self.size - valid_end
        log.warning(
            "%s: truncating %d bytes of torn or corrupt tail at byte %d (offset %d): %s",
            self.path,
            dropped,
            valid_end,
            self.end_offset,
            stop.reason,
        )
        self._truncate_file(valid_end)
        return RecoveryReport(self.path, dropped, valid_end, stop.reason, rebuilt_indexes=True)

    def recover_closed(self, next_base_offset: int) -> RecoveryReport:
        """Check a closed segment cheaply (its tail from the last index entry), rebuild indexes if needed.

        A closed segment was fsynced before the next one was created, so any damage here is corruption of
        acknowledged data: it is raised, naming the file and position, never truncated silently.
        """
        rebuilt = False
        if not self._tail_consistent():
            log.warning("%s: index missing or inconsistent; rebuilding", self.path)
            self.index.truncate_from(self.base_offset)
            self.time_index.truncate_from(self.base_offset)
            valid_end, stop = self._rebuild(verify=True)
            rebuilt = True
            if stop is not None:
                raise CorruptRecord(self.path, stop.position, stop.reason)
            if valid_end != self.size:
                raise CorruptRecord(self.path, valid_end, f"{self.size - valid_end} trailing bytes")
        if self.end_offset != next_base_offset:
            raise CorruptRecord(
                self.path,
                self.size,
                f"segment ends at offset {self.end_offset} but the next segment starts at {next_base_offset}",
            )
        return RecoveryReport(self.path, rebuilt_indexes=rebuilt)

    def _tail_consistent(self) -> bool:
        """Walk from the last index entry to the end; True if it ends exactly at the file's end."""
        last = self.index.last()
        offset, position = last if last is not None else (self.base_offset, 0)
        if position >= self.size or self.size == 0:
            return False
        if self.time_index.count == 0:
            return False  # sealing always leaves a time entry: the time index was lost
        max_ts = self.time_index.max_timestamp()
        expected = offset
        try:
            for batch_position, header, _ in walk(self.fd, position, self.size, verify=True):
                if header.base_offset != expected:
                    return False
                if last is None and batch_position >= self._index_interval_bytes:
                    return False  # appends would have indexed this batch: the index file was lost
                expected = header.end_offset
                max_ts = header.max_timestamp_ms if max_ts is None else max(max_ts, header.max_timestamp_ms)
        except ScanStop:
            return False
        time_last = self.time_index.entries()[-1:] if self.time_index.count else []
        if time_last and not self.base_offset <= time_last[0][1] < expected:
            return False
        self.end_offset = expected
        self.max_timestamp_ms = max_ts
        self._bytes_since_index = self.size - position
        return True

    def _rebuild(self, verify: bool) -> tuple[int, ScanStop | None]:
        """Walk the whole file, re-adding index entries; returns (end of last good batch, why it stopped)."""
        self.end_offset = self.base_offset
        self._last_batch = None
        self.max_timestamp_ms = None
        self._bytes_since_index = 0
        valid_end = 0
        try:
            for position, header, _ in walk(self.fd, 0, self.size, verify):
                if header.base_offset != self.end_offset:
                    raise ScanStop(
                        position, f"batch base offset {header.base_offset}, expected {self.end_offset}"
                    )
                self._track(position, header)
                valid_end = position + header.size_bytes
        except ScanStop as stop:
            return valid_end, stop
        return valid_end, None

    # -- appends ---------------------------------------------------------------------------------------

    def _track(self, position: int, header: BatchHeader) -> None:
        """Account for a batch now present at ``position``: indexes, end offset, max timestamp."""
        if self._bytes_since_index >= self._index_interval_bytes:
            self.index.append(header.base_offset, position)
            running_max = header.max_timestamp_ms
            if self.max_timestamp_ms is not None:  # not `or`: a running max of 0 is a real maximum
                running_max = max(self.max_timestamp_ms, running_max)
            time_max = self.time_index.max_timestamp()
            if time_max is None or running_max > time_max:
                self.time_index.append(running_max, header.base_offset)
            self._bytes_since_index = 0
        self._bytes_since_index += header.size_bytes
        self.end_offset = header.end_offset
        self._last_batch = header.base_offset, position
        if self.max_timestamp_ms is None or header.max_timestamp_ms > self.max_timestamp_ms:
            self.max_timestamp_ms = header.max_timestamp_ms

    def append(
        self, batch: bytes | memoryview, header: BatchHeader, now_ms: int, head: bytes | None = None
    ) -> None:
        """Write ``batch`` at the end of the data file, then its index entries. Raises ``DiskFull`` when
        there is no room for either (the files are cut back to where they were: the segment is exactly
        as before, and a later append may write the same batch) or ``StorageUnavailable``.

        ``head``: bytes written in place of the batch's first ``len(head)`` bytes (a batch stamped with
        its offset and term, ``batch.stamped_head``), so the rest is written from where it lies, not
        copied first."""
        check(
            header.base_offset == self.end_offset,
            f"{self.path}: append at offset {header.base_offset} but segment ends at {self.end_offset}",
        )
        position = self.size
        try:
            _write_all(self.fd, position, batch, head)
        except OSError as exc:
            self._undo_partial_write(position, exc)
            raise write_error(self.path, exc, f"writing {len(batch)} bytes at byte {position}") from exc
        indexed = self.index.count, self.time_index.count
        try:
            self._track(position, header)  # writes its index entries before it changes anything else
        except OSError as exc:
            self._undo_partial_write(position, exc)
            self.index.keep(indexed[0])
            self.time_index.keep(indexed[1])
            raise write_error(self.path, exc, f"indexing the batch at byte {position}") from exc
        self.size = position + len(batch)
        self._dirty = True
        if self.size - self._written_back >= WRITEBACK_BYTES:
            start_writeback(self.fd, self._written_back, self.size - self._written_back)
            self._written_back = self.size
        if self.first_append_ms is None:
            self.first_append_ms = now_ms

    def _undo_partial_write(self, position: int, cause: OSError) -> None:
        try:
            os.ftruncate(self.fd, position)
        except OSError as exc:
            raise StorageUnavailable(
                self.path, f"write failed ({cause}) and rolling back to byte {position} failed too ({exc})"
            ) from exc

    def seal(self) -> None:
        """Close for appends: record the final max timestamp in the time index and fsync everything.
        Raises ``DiskFull`` (no room for the time index entry: nothing changed, a later seal tries again)
        or ``StorageUnavailable`` (an fsync failed, whatever its errno: see ``raftlog.storage.space``)."""
        if self.max_timestamp_ms is not None:
            time_max = self.time_index.max_timestamp()
            if time_max is None or self.max_timestamp_ms > time_max:
                try:
                    self.time_index.append(self.max_timestamp_ms, self._last_batch_offset())
                except OSError as exc:
                    raise write_error(self.time_index.path, exc, "sealing the time index") from exc
        try:
            self.flush()
            self.index.flush()
            self.time_index.flush()
        except OSError as exc:
            raise StorageUnavailable(self.path, f"fsync failed: {exc}") from exc

    def _last_batch_offset(self) -> int:
        last = self.index.last()
        offset, position = last if last is not None else (self.base_offset, 0)
        for _, header in walk_headers(self.fd, position, self.size):
            offset = header.base_offset
        return offset

    def flush(self) -> None:
        if self._dirty:
            os.fdatasync(self.fd)
            self._dirty = False
        self._written_back = self.size

    def claim_flush(self) -> int | None:
        """Under the log's lock, by a reader that holds the segment: the descriptor to fdatasync outside
        the lock, or None when nothing was written since the last flush. The segment counts as clean
        from now on: an append made during that fdatasync marks it dirty again for a later flush."""
        self._written_back = self.size
        if not self._dirty:
            return None
        self._dirty = False
        return self.fd

    # -- reads -----------------------------------------------------------------------------------------

    def locate(self, offset: int) -> int | None:
        """Byte position of the batch holding ``offset`` (or the first one after it), None past the end."""
        last = self._last_batch
        if last is not None and last[0] <= offset < self.end_offset:
            return last[1]
        _, position = self.index.lookup(offset)
        try:
            for batch_position, header in walk_headers(self.fd, position, self.size):
                if header.end_offset > offset:
                    return batch_position
        except ScanStop as stop:
            raise CorruptRecord(self.path, stop.position, stop.reason) from None
        return None

    def batches(self, position: int, end: int | None = None) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """CRC-checked batches from ``position`` to ``end`` (the file's size by default); corruption raises
        ``CorruptRecord``. A reader that holds the segment (:meth:`acquire`) may call it without the log's
        lock, with an ``end`` it read under that lock: its descriptor stays open until it lets go, and
        appends only write past that end."""
        try:
            yield from walk(self.fd, position, self.size if end is None else end, verify=True)
        except ScanStop as stop:
            raise CorruptRecord(self.path, stop.position, stop.reason) from None

    def read_run(
        self, position: int, end: int, budget: int | None, limit: int, whole_first: bool
    ) -> tuple[bytes, bool, int | None]:
        """:func:`read_run` of this segment's data file (corruption raises ``CorruptRecord``); callable
        without the log's lock as :meth:`batches` is."""
        try:
            return read_run(self.fd, position, end, budget, limit, whole_first)
        except ScanStop as stop:
            raise CorruptRecord(self.path, stop.position, stop.reason) from None

    # -- truncation and deletion -----------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after ``offset``, which must be a batch boundary in this segment."""
        check(
            self.base_offset <= offset <= self.end_offset,
            f"{self.path}: truncate to {offset} outside [{self.base_offset}, {self.end_offset}]",
        )
        if offset == self.end_offset:
            return
        position = self.check_boundary(offset)
        self.index.truncate_from(offset)
        self.time_index.truncate_from(offset)
        self._truncate_file(position)
        self.index.flush()
        self.time_index.flush()
        self._resume()

    def check_boundary(self, offset: int) -> int:
        """Byte position of the batch starting at ``offset``; raises ``NotBatchBoundary`` if none does."""
        if offset == self.end_offset:
            return self.size
        position = self.locate(offset)
        if position is None:
            raise NotBatchBoundary(offset, self.end_offset, self.end_offset)
        header = decode_header(os.pread(self.fd, HEADER_SIZE, position))
        if header.base_offset != offset:
            raise NotBatchBoundary(offset, header.base_offset, header.end_offset)
        return position

    def _truncate_file(self, size: int) -> None:
        try:
            os.ftruncate(self.fd, size)
            os.fdatasync(self.fd)
        except OSError as exc:
            raise StorageUnavailable(self.path, f"truncate to {size} failed: {exc}") from exc
        self.size = size
        self._written_back = size
        self._last_batch = None

    def _resume(self) -> None:
        """Recompute end offset, max timestamp and index spacing from the last index entry onward."""
        last = self.index.last()
        offset, position = last if last is not None else (self.base_offset, 0)
        self.end_offset = offset
        self.max_timestamp_ms = self.time_index.max_timestamp()
        for _, header, _ in self.batches(position):
            self.end_offset = header.end_offset
            if self.max_timestamp_ms is None or header.max_timestamp_ms > self.max_timestamp_ms:
                self.max_timestamp_ms = header.max_timestamp_ms
        self._bytes_since_index = self.size - position

    def delete(self, discard: Callable[[str], None]) -> None:
        """Take the segment out of its log now; hand its files to ``discard`` once no reader holds it.

        The files are renamed to ``<name>.<random>.deleted`` at once (cheap: no blocks are freed) and the
        directory synced, so a crash never brings the segment back (recovery discards ``.deleted``
        files); a reader in the middle of the segment finishes undisturbed through its descriptor.
        ``discard`` (``os.unlink``, or a node's remover, which deletes at a pace) runs when the last
        reader lets go: unlinking a large file frees its blocks in the caller's time, which is under the
        log's lock when no reader holds it, and on a file system mounted with ``discard`` holds every
        fsync on the disk behind the freed blocks' discards.
        """
        self.deleted = True
        if self.readers:
            self.open_handles()  # the readers go on through descriptors: the paths are about to go
        for path in (self.path, self.index.path, self.time_index.path):
            # unique: a segment at the same base may be created and deleted again (truncation) while a
            # reader still holds this one
            aside = f"{path}.{uuid.uuid4().hex[:12]}{DELETED_SUFFIX}"
            try:
                os.rename(path, aside)
            except FileNotFoundError:
                log.warning("%s: already gone while deleting segment %d", path, self.base_offset)
                continue
            except OSError as exc:
                if not no_space(exc):
                    raise
                # the longer name needs a directory block and the disk is full: unlinked at once instead
                # (readers go on through their descriptors), which frees the room retention is after
                log.warning("%s: no room to rename it aside, removing it at once", path)
                os.unlink(path)
                continue
            self._discarded.append(aside)
        fsync_directory(self.directory)
        self._discard = discard
        self.close_after_readers()

    def acquire(self) -> None:
        """A reader holds the segment (under the log's lock): its data file is open from now until the
        reader lets go, whatever ``release_handles``, ``delete`` or the log's ``close`` do meanwhile."""
        if self._closed:
            raise InvariantViolation(f"{self.path}: acquired after close")
        self.fd.bit_length()  # the property opens it: a reader reads without the lock, never opens
        self.readers += 1

    def release(self) -> None:
        if self.readers <= 0:
            raise InvariantViolation(f"{self.path}: release without acquire")
        self.readers -= 1
        if self.readers == 0 and self._close_when_released:
            self.close()

    def close_after_readers(self) -> None:
        """Close now, or when the last reader lets go (a deleted segment, a closed log's)."""
        self._close_when_released = True
        if self.readers == 0:
            self.close()

    def open_handles(self) -> None:
        """Open whatever :meth:`release_handles` closed."""
        self.fd.bit_length()  # the property opens it
        self.index.open()
        self.time_index.open()

    def release_handles(self) -> None:
        """Close the data and index files (every use opens them again): a node holding thousands of idle
        partitions keeps no descriptor for each. Data written and not yet fsynced stays in the page
        cache; a later flush reopens the file, and an fsync covers the file, not the descriptor. A
        segment readers hold keeps its files (they may be renamed away by a delete meanwhile)."""
        if self.readers:
            return
        self.release_descriptor()
        self.index.release()
        self.time_index.release()

    def close(self) -> None:
        if not self._closed:
            self.close_descriptor()
            self.index.close()
            self.time_index.close()
        discard, discarded = self._discard, self._discarded
        self._discard, self._discarded = None, []
        if discard is not None:
            for path in discarded:
                discard(path)

    @property
    def is_empty(self) -> bool:
        return self.size == 0


def _write_all(fd: int, position: int, batch: bytes | memoryview, head: bytes | None) -> None:
    """``batch`` written at ``position``, its first ``len(head)`` bytes replaced by ``head`` (one
    ``pwritev`` of the two pieces, again from where a short write stopped)."""
    with memoryview(batch) as view:
        pieces = [view] if head is None else [memoryview(head), view[len(head) :]]
        total, written = len(view), 0
        while written < total:
            skip, remaining = written, []
            for piece in pieces:
                if skip >= len(piece):
                    skip -= len(piece)
                    continue
                remaining.append(piece[skip:])
                skip = 0
            written += os.pwritev(fd, remaining, position + written)


def write_durably(path: str, data: str | bytes, what: str) -> None:
    """A small file replaced whole: written beside it, fsynced, renamed over it, the directory synced, so
    a crash leaves the old contents or the new (text is ASCII). Raises ``DiskFull`` (no room: the old
    file stands) or ``StorageUnavailable``."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode("ascii") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_directory(os.path.dirname(path))
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise write_error(path, exc, f"writing {what}") from exc
