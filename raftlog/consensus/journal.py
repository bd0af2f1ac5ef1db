"""Raft journals: the log of (command, index, term) entries plus the persistent term and vote.

pysyncobj addresses a journal by *position* (0 = oldest entry kept), not by Raft index; every journal here
keeps the entries in a Python list for that reason and bounds its size through ``deleteEntriesTo``
(compaction). On top of pysyncobj's journal protocol each journal offers ``sync()`` (group commit, called
once per tick by the core) and ``durable_index`` (the highest index that survives a crash).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
import re
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, overload

import crc32c
import msgpack

from raftlog.consensus.errors import CorruptJournal
from raftlog.errors import InvariantViolation
from raftlog.histogram import Histogram
from raftlog.packing import bin_header
from raftlog.storage.errors import DiskFull
from raftlog.storage.space import DiskSpace, next_retry_s, refusal

logger = logging.getLogger(__name__)

Entry = tuple[bytes, int, int]  # (command, index, term), the tuple shape pysyncobj uses


class RaftJournal:
    """Base class with the pysyncobj journal protocol (camelCase names are pysyncobj's)."""

    def __init__(self) -> None:
        self._entries: list[Entry] = []
        self._current_term = 0
        self._voted_for: str | None = None

    # -- reads -------------------------------------------------------------------------------------
    @overload
    def __getitem__(self, position: int) -> Entry: ...

    @overload
    def __getitem__(self, position: slice) -> list[Entry]: ...

    def __getitem__(self, position: int | slice) -> Entry | list[Entry]:
        return self._entries[position]

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def first_index(self) -> int:
        return self._entries[0][1] if self._entries else 0

    @property
    def last_index(self) -> int:
        return self._entries[-1][1] if self._entries else 0

    @property
    def last_term(self) -> int:
        return self._entries[-1][2] if self._entries else 0

    def index_term(self, position: int) -> tuple[int, int]:
        """(index, term) of the entry at ``position``, without its command (never read from disk)."""
        _, index, term = self._entries[position]
        return index, term

    def release_through(self, index: int) -> None:
        """Entries up to ``index`` are applied here and held by every follower: a journal that can read
        them back from disk may drop their commands from memory (this one keeps them)."""

    def release_handles(self) -> None:
        """The group is idle: a journal holding open files may close them until it is used again (this
        one holds none)."""

    @property
    def durable_index(self) -> int:
        raise NotImplementedError

    @property
    def sync_pending(self) -> bool:
        """The next :meth:`sync` has something to write or flush (it will wait for the disk)."""
        return False

    @property
    def pending_bytes(self) -> int:
        """Bytes the next sync writes (0 for a journal that writes nothing)."""
        return 0

    @property
    def sync_in_flight(self) -> bool:
        """A job from :meth:`begin_sync` is running and :meth:`finish_sync` has not taken it back."""
        return False

    def begin_sync(self) -> SyncJob | None:
        """What :meth:`sync` would write and flush, as a job another thread runs (``job.run()``) while
        this one goes on adding entries; :meth:`finish_sync` then moves ``durable_index``. None: nothing
        to write (this journal synced, if it had anything to do, before returning)."""
        self.sync()
        return None

    def finish_sync(self) -> bool:
        """Take back a finished job of :meth:`begin_sync` (raising what it raised); True if one was."""
        return False

    @property
    def size_bytes(self) -> int:
        """Bytes the journal keeps on disk; compaction also runs on growth of this (0: nothing on disk)."""
        return 0

    @property
    def disk_full(self) -> DiskFull | None:
        """Why writing here is refused for want of room now: this journal's last sync was, or another
        writer on its file system was and nothing has got through since (``raftlog.storage.space``).
        None: there is room, as far as anyone knows."""
        return None

    @property
    def space_retry_at(self) -> float | None:
        """While a sync refused for want of room waits (its records stay in memory, not durable): the
        monotonic time before which :meth:`sync` does not try again. None: no sync waits."""
        return None

    # -- pysyncobj journal protocol -----------------------------------------------------------------
    def add(self, command: bytes, idx: int, term: int) -> None:
        if self._entries:
            _, last_index, last_term = self._entries[-1]
            if idx != last_index + 1 or term < last_term:
                raise InvariantViolation(
                    f"journal append out of order: index {idx} term {term} after index {last_index} "
                    f"term {last_term}"
                )
        self._entries.append((bytes(command), idx, term))

    def clear(self) -> None:
        self._entries = []

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        del self._entries[entryFrom:]

    def deleteEntriesTo(self, entryTo: int) -> None:
        del self._entries[:entryTo]

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        """Not persisted: Raft does not need it (a restarted node learns it from the leader)."""

    def getRaftCommitIndex(self) -> int:
        return 1

    def setCurrentTerm(self, term: int, votedForNodeId: str | None) -> None:
        self._current_term = term
        self._voted_for = votedForNodeId

    def getCurrentTerm(self) -> int:
        return self._current_term

    def getVotedForNodeId(self) -> str | None:
        return self._voted_for

    def onOneSecondTimer(self) -> None:
        """Nothing is deferred to a timer: ``sync()`` runs every tick."""

    def sync(self) -> None:
        raise NotImplementedError

    def _destroy(self) -> None:
        raise NotImplementedError


class _Released(bytes):
    """The command of an entry whose bytes were dropped from memory (``FileJournal.release_through``)."""


_RELEASED = _Released()


class MemoryJournal(RaftJournal):
    """Volatile journal for tests and benchmarks: everything counts as durable as soon as it is added."""

    @property
    def durable_index(self) -> int:
        return self.last_index

    def sync(self) -> None:
        """Nothing to flush."""

    def _destroy(self) -> None:
        self._entries = []


# -- on-disk journal ------------------------------------------------------------------------------------
#
# A directory per replica:
#   state                       two 512-byte slots, each a header (magic, crc32c(body), len(body), sequence)
#                               and msgpack {"term", "voted_for"}; a change overwrites the older slot in
#                               place and fdatasyncs before any message carrying it leaves; the valid slot
#                               with the higher sequence holds the state (a torn write leaves the other).
#                               The file is created with the journal, synced with its directory. (Format 1,
#                               one record replaced by tmp + rename, is still read and converted on write.)
#   segment-<sequence>.log      16-byte header (magic, flags) then records:
#                                   u32 body length | u32 crc32c(body) | body = msgpack [index, term, command]
# A segment written with direct I/O ends in zeros up to a 4 KiB boundary (see _DirectWriter); a record
# header of zeros ends the records (no record is empty), and so does the end of the file.
# Segments are read in sequence order and must hold contiguous indexes. A segment with FLAG_RESET starts a
# fresh log (after clear(): a snapshot was installed); everything in earlier segments is obsolete.
SEGMENT_MAGIC = b"RLJSEG01"
_SEGMENT_HEADER = struct.Struct("<8sII")  # magic, flags, reserved
_RECORD_HEADER = struct.Struct("<II")  # body length, crc32c(body)
FLAG_RESET = 1
STATE_MAGIC = b"RLJSTA01"  # format 1 (read only)
_STATE_HEADER = struct.Struct("<8sII")  # magic, crc32c(body), len(body)
STATE_SLOT_MAGIC = b"RLJSTA02"
_STATE_SLOT_HEADER = struct.Struct("<8sIIQ")  # magic, crc32c(body), len(body), sequence
STATE_SLOT_BYTES = 512  # one sector: a write of it is not torn on most devices, and the other slot stays
_SEGMENT_NAME = re.compile(r"^segment-(\d{10})\.log$")
RECORD_BYTES_MAX = 256 * 1024 * 1024
SYNC_SECONDS = Histogram()  # every journal fsync/fdatasync of this process, whichever thread ran it


def _segment_name(sequence: int) -> str:
    return f"segment-{sequence:010d}.log"


def encode_record(index: int, term: int, command: bytes) -> bytes:
    return b"".join(record_parts(index, term, command))


def record_parts(index: int, term: int, command: bytes) -> tuple[bytes, bytes, bytes]:
    """A journal record as (header, msgpack of ``[index, term, <bin header>``, command): the body is
    ``msgpack.packb([index, term, command])``, built without copying the command, which may be a ~1 MiB
    batch (a writer appends the three parts where they go)."""
    prefix = b"".join((b"\x93", msgpack.packb(index), msgpack.packb(term), bin_header(len(command))))
    crc = crc32c.crc32c(command, value=crc32c.crc32c(prefix))
    return _RECORD_HEADER.pack(len(prefix) + len(command), crc), prefix, command


def fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_durably(path: str, data: bytes) -> None:
    """tmp + fsync + rename + fsync(dir): after return, ``path`` holds ``data`` across a crash. Raises
    ``DiskFull`` when there is no room for it (the temporary file is removed; ``path`` is as it was)."""
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        full = refusal(path, error, f"writing {len(data)} bytes")
        if full is None:
            raise
        raise full from error
    os.replace(tmp, path)
    fsync_directory(os.path.dirname(os.path.abspath(path)))


def read_term_and_vote(directory: str) -> tuple[int, str | None]:
    """The persisted (term, voted_for) of the journal in ``directory``; (0, None) if never written."""
    return _read_state(os.path.join(directory, "state"))[:2]


def _read_state(path: str) -> tuple[int, str | None, int, bool]:
    """(term, voted_for, sequence of the slot holding them, whether the file has the slot format)."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return 0, None, 0, False
    if data[:8] == STATE_MAGIC:  # format 1
        magic, crc, length = _STATE_HEADER.unpack_from(data)
        body = data[_STATE_HEADER.size :]
        if length != len(body) or crc32c.crc32c(body) != crc:
            raise CorruptJournal(path, 0, "state file length or crc mismatch")
        state = msgpack.unpackb(body, raw=False)
        return int(state["term"]), state["voted_for"], 0, False
    if len(data) != 2 * STATE_SLOT_BYTES:
        raise CorruptJournal(path, 0, f"state file of {len(data)} bytes")
    best: tuple[int, str | None, int, bool] = (0, None, 0, True)
    for slot in range(2):
        record = data[slot * STATE_SLOT_BYTES : (slot + 1) * STATE_SLOT_BYTES]
        magic, crc, length, sequence = _STATE_SLOT_HEADER.unpack_from(record)
        body = record[_STATE_SLOT_HEADER.size : _STATE_SLOT_HEADER.size + length]
        if magic != STATE_SLOT_MAGIC or len(body) != length or crc32c.crc32c(body) != crc:
            continue  # never written, or torn: the other slot holds the state
        if sequence > best[2]:
            state = msgpack.unpackb(body, raw=False)
            best = (int(state["term"]), state["voted_for"], sequence, True)
    return best


def _state_slot(term: int, voted_for: str | None, sequence: int) -> bytes:
    body: bytes = msgpack.packb({"term": term, "voted_for": voted_for}, use_bin_type=True)
    record = _STATE_SLOT_HEADER.pack(STATE_SLOT_MAGIC, crc32c.crc32c(body), len(body), sequence) + body
    if len(record) > STATE_SLOT_BYTES:
        raise InvariantViolation(
            f"term and vote take {len(record)} bytes, above a {STATE_SLOT_BYTES}-byte slot"
        )
    return record.ljust(STATE_SLOT_BYTES, b"\0")


DIRECT_BLOCK = 4096  # offset, length and buffer alignment of a direct write (any logical block size <= it)
_O_DIRECT = getattr(os, "O_DIRECT", 0)
_direct_buffers = threading.local()  # per thread: one aligned buffer, grown to the largest write
_told_no_direct_io: set[str] = set()  # directories already logged as lacking direct I/O


def _aligned_buffer(size: int) -> mmap.mmap:
    """A page-aligned buffer of at least ``size`` bytes, reused by this thread's later writes (fresh
    memory would be faulted in and zeroed again by the kernel on every write)."""
    buffer: mmap.mmap | None = getattr(_direct_buffers, "buffer", None)
    if buffer is None or len(buffer) < size:
        if buffer is not None:
            buffer.close()
        buffer = mmap.mmap(-1, max(1 << (size - 1).bit_length(), 1 << 20))  # doubling: few regrowths
        _direct_buffers.buffer = buffer
    return buffer


class _Pending:
    """Records added since the last sync, as the pieces they were built from: written with one copy into
    the direct-I/O buffer (or one join), where a growing bytearray copied a MiB-sized batch again at
    every reallocation."""

    __slots__ = ("parts", "size")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def __bool__(self) -> bool:
        return self.size > 0

    def add(self, header: bytes, prefix: bytes, body: bytes) -> None:
        self.parts += (header, prefix, body)
        self.size += len(header) + len(prefix) + len(body)

    def extend(self, later: _Pending) -> None:
        """Append the records of ``later`` (added after these)."""
        self.parts += later.parts
        self.size += later.size

    def truncate(self, size: int) -> None:
        """Keep the first ``size`` bytes, which must end where a record ends."""
        parts = self.parts
        while self.size > size:
            self.size -= len(parts.pop())
        if self.size != size:
            raise InvariantViolation(f"pending journal records cut at {size}, not at a record boundary")


class SyncJob:
    """One group commit of a FileJournal, taken off the journal by ``begin_sync``: writes the records
    added since the last one and fdatasyncs (fsync after a truncation). ``run`` may go on another thread
    (``hand_off`` first) while the journal's owner keeps adding entries: it touches only the segment's
    file and direct writer, which nothing else changes until ``finish_sync`` (every other mutation of the
    journal waits for the job first)."""

    __slots__ = ("_done", "_event", "error", "full", "last_index", "offset", "on_done", "pending", "segment")

    def __init__(
        self, segment: _Segment, pending: _Pending, offset: int, full: bool, last_index: int
    ) -> None:
        self.segment = segment
        self.pending = pending
        self.offset = offset  # where the pending records go in the segment file
        self.full = full  # fsync (a truncation changed the file's size), not fdatasync
        self.last_index = last_index  # durable once the job is done
        self.error: Exception | None = None
        self.on_done: Callable[[], None] | None = None
        self._done = False
        self._event: threading.Event | None = None  # only for a job run by another thread

    def hand_off(self, on_done: Callable[[], None]) -> None:
        """Before another thread runs the job: ``on_done`` is called there when it ends, and the
        journal's thread can wait for it."""
        self._event = threading.Event()
        self.on_done = on_done

    @property
    def done(self) -> bool:
        return self._done

    def wait(self) -> None:
        if self._done:
            return
        if self._event is None:
            raise InvariantViolation("waiting for a journal sync job that was neither run nor handed off")
        self._event.wait()

    def run(self) -> None:
        try:
            self._write_and_sync()
        except Exception as error:  # handed to finish_sync, which raises it on the journal's thread
            self.error = error
        self._done = True
        if self._event is not None:
            self._event.set()
        if self.on_done is not None:
            self.on_done()

    def _write_and_sync(self) -> None:
        segment, pending = self.segment, self.pending
        if pending:
            if segment.writer is not None:
                segment.writer.append(pending)
            else:
                view = memoryview(b"".join(pending.parts))
                offset = self.offset
                while view:
                    written = os.pwrite(segment.fd, view, offset)
                    view, offset = view[written:], offset + written
        started = time.perf_counter()
        if self.full:
            os.fsync(segment.fd)
        else:
            os.fdatasync(segment.fd)
        SYNC_SECONDS.observe(time.perf_counter() - started)


class _DirectWriter:
    """Appends to a segment with ``O_DIRECT``: the records go from one reused aligned buffer to the disk
    without a copy into the page cache, which would rarely be read (a running journal reads back only
    entries it released from memory, see ``FileJournal.release_through``). A direct write covers whole
    4 KiB blocks, so each write starts at the block holding the end of the file, rewrites that block's
    bytes as they already are on disk (kept here), appends the new records and pads the last block with zeros,
    which the next write overwrites. A crash in the middle of a write can tear only that last block; its
    old bytes are rewritten unchanged, so what an earlier sync made durable stays, as with the page cache
    writing back the same page. Durability is still the journal's fdatasync (device cache and block
    allocation)."""

    def __init__(self, path: str, size: int) -> None:
        self._fd = os.open(path, os.O_WRONLY | _O_DIRECT)
        self.seek(path, size)

    def seek(self, path: str, size: int) -> None:
        """Continue writing at ``size`` (after opening, or after the file was truncated there)."""
        self._start = size - size % DIRECT_BLOCK
        with open(path, "rb") as file:
            file.seek(self._start)
            self._tail = file.read(size - self._start)
        if len(self._tail) != size - self._start:
            raise InvariantViolation(
                f"journal {path}: {len(self._tail)} bytes where the last block held {size - self._start}"
            )

    def append(self, pending: _Pending) -> None:
        tail = self._tail
        end = len(tail) + pending.size
        padded = -(-end // DIRECT_BLOCK) * DIRECT_BLOCK
        buffer = _aligned_buffer(padded)
        buffer[: len(tail)] = tail
        position = len(tail)
        for part in pending.parts:
            buffer[position : position + len(part)] = part
            position += len(part)
        buffer[end:padded] = bytes(padded - end)
        view = memoryview(buffer)[:padded]
        offset = self._start
        try:
            while view:
                written = os.pwrite(self._fd, view, offset)
                if written % DIRECT_BLOCK:
                    raise OSError(f"direct write of {written} bytes, not whole {DIRECT_BLOCK}-byte blocks")
                view, offset = view[written:], offset + written
        finally:
            view.release()
        last_block = end - end % DIRECT_BLOCK
        self._tail = bytes(buffer[last_block:end])
        self._start += last_block

    def close(self) -> None:
        os.close(self._fd)


def _direct_writer(path: str, size: int) -> _DirectWriter | None:
    """A direct writer for the segment at ``path``, or None where the file system has no direct I/O
    (tmpfs before Linux 6.6, some overlay set-ups): the journal then writes through the page cache."""
    if not _O_DIRECT:
        return None
    try:
        return _DirectWriter(path, size)
    except OSError as error:
        if error.errno != errno.EINVAL:
            raise
        directory = os.path.dirname(os.path.dirname(path))  # the node's raft/ (or the test's) directory
        if directory not in _told_no_direct_io:
            _told_no_direct_io.add(directory)
            logger.info(
                "journals under %s: no direct I/O on this file system (%s); writing through the page cache",
                directory,
                error,
            )
        return None


class _Segment:
    """One segment file. Its descriptors open on first use and close on :meth:`release`, so an idle
    group's journal holds none (a node holds thousands of groups, most of them idle)."""

    def __init__(self, sequence: int, path: str, size: int, direct: bool) -> None:
        self.sequence = sequence
        self.path = path
        self.size = size  # bytes of records written to the file (excludes the journal's pending buffer)
        self.first_index = 0  # 0 while empty
        self.last_index = 0
        self.direct = direct  # appended with direct I/O (the last segment, where the file system has it)
        self._fd: int | None = None
        self._writer: _DirectWriter | None = None

    @property
    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR)
        return self._fd

    @property
    def writer(self) -> _DirectWriter | None:
        """The direct-I/O appender, continuing at ``size``; None: os.pwrite through the page cache."""
        if self._writer is None and self.direct:
            self.open()
        return self._writer

    def open(self) -> None:
        """Open the descriptors now (a sync job uses them on another thread)."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR)
        if self._writer is None and self.direct:
            self._writer = _direct_writer(self.path, self.size)
            self.direct = self._writer is not None

    def truncated(self, size: int) -> None:
        """The file was cut at ``size``: an open direct writer continues there."""
        self.size = size
        if self._writer is not None:
            self._writer.seek(self.path, size)

    def close_writer(self) -> None:
        """No more appends here (the journal rolled to a new segment)."""
        self.direct = False
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def release(self) -> None:
        """Close what is open; the next use opens it again."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class FileJournal(RaftJournal):
    """Durable journal: appends are buffered and written + fdatasync'ed once per tick by :meth:`sync`."""

    def __init__(
        self,
        directory: str,
        segment_bytes_max: int = 64 * 1024 * 1024,
        direct_io: bool = True,
        discard: Callable[[str], None] = os.unlink,
        space: DiskSpace | None = None,
    ) -> None:
        """``direct_io``: append with O_DIRECT where the file system allows it (see _DirectWriter).
        ``discard(path)`` takes a segment file the journal no longer needs out of its directory (it is
        closed; the journal fsyncs the directory after): an unlink by default; a node renames it aside
        and removes it on another thread, at a pace (``raftlog.storage.removal.Remover``). ``space``:
        what the node's writers know of room on its disk, shared by its journals and logs (this
        journal's own by default).

        A sync refused for want of room (ENOSPC, EDQUOT, at the write or at the fdatasync) cuts the
        segment back to where the sync began and keeps its records in memory, ahead of those added
        since, not durable; ``durable_index`` stays, so nothing is acknowledged or counted. A later
        sync (not before ``space_retry_at``, on a backoff of 50 ms doubling to 1 s) writes them again
        from this copy, never trusting what the page cache kept of them (docs/decisions/0014)."""
        super().__init__()
        self._discard = discard
        self._space = space if space is not None else DiskSpace()
        self._space_error: DiskFull | None = None  # the last sync was refused for want of room
        self._retry_at = 0.0  # monotonic: no sync is tried before it while _space_error is set
        self._retry_delay_s = 0.0
        if segment_bytes_max < 4096:
            raise ValueError(f"segment_bytes_max must be >= 4096, got {segment_bytes_max}")
        self._directory = directory
        self._segment_bytes_max = segment_bytes_max
        self._direct_io = direct_io
        self._offsets: list[int] = []  # per entry: byte offset of its record within its segment
        self._segments: list[_Segment] = []  # oldest first; the last one is appended to
        self._pending = _Pending()  # records added since the last sync, not yet written
        self._needs_fsync = False  # a truncation happened: the next sync must fsync, not fdatasync
        self._durable_index = 0
        self._released = 0  # positions below this hold _RELEASED: commands read back from disk on demand
        self._in_flight: SyncJob | None = None  # begun, not yet finished (see begin_sync)
        self._closed = False
        os.makedirs(directory, exist_ok=True)
        self._state_path = os.path.join(directory, "state")
        self._load_state()
        self._recover_segments()

    # -- recovery -------------------------------------------------------------------------------------
    def _load_state(self) -> None:
        term, voted_for, sequence, slotted = _read_state(self._state_path)
        self._current_term, self._voted_for, self._state_sequence = term, voted_for, sequence
        if not slotted:
            # A new journal (or one of format 1): the state file is made here, on the opening thread,
            # so that each later term or vote is one overwrite and one fdatasync on the Raft thread.
            sequence = 1  # in slot 1: the next change goes to slot 0, leaving this one
            empty = bytes(STATE_SLOT_BYTES)
            write_file_durably(self._state_path, empty + _state_slot(term, voted_for, sequence))
            self._state_sequence = sequence

    def _recover_segments(self) -> None:
        sequences = sorted(
            int(match.group(1))
            for name in os.listdir(self._directory)
            if (match := _SEGMENT_NAME.match(name))
        )
        for position, sequence in enumerate(sequences):
            is_last = position == len(sequences) - 1
            self._recover_segment(sequence, is_last)
        if not self._segments:
            # made here, on the thread opening the journal, rather than by the first entry (pysyncobj adds
            # one as it builds the replica, on the Raft thread every group of the node waits for)
            self._open_new_segment(1, reset=False)
        self._durable_index = self.last_index

    def _recover_segment(self, sequence: int, is_last: bool) -> None:
        path = os.path.join(self._directory, _segment_name(sequence))
        with open(path, "rb") as file:
            data = file.read()
        if len(data) < _SEGMENT_HEADER.size:
            if not is_last:
                raise CorruptJournal(path, 0, f"segment of {len(data)} bytes has no header")
            logger.warning("journal %s: dropping torn segment of %d bytes", path, len(data))
            os.unlink(path)
            fsync_directory(self._directory)
            return
        magic, flags, _ = _SEGMENT_HEADER.unpack_from(data)
        if magic != SEGMENT_MAGIC:
            raise CorruptJournal(path, 0, f"bad segment magic {magic!r}")
        if flags & FLAG_RESET:
            self._entries.clear()
            self._offsets.clear()
            for old in self._segments:
                _close(old)
            self._segments.clear()
        offset = _SEGMENT_HEADER.size
        first_index = last_index = 0
        valid_end = offset
        torn = False  # the records end in a torn or damaged tail (not in zero padding, not at the end)
        while offset < len(data):
            problem = None
            head = data[offset : offset + _RECORD_HEADER.size]
            if head.count(0) == len(head) and data.count(0, offset) == len(data) - offset:
                break  # zeros to the end: a direct write's padding (or space never written)
            if offset + _RECORD_HEADER.size > len(data):
                problem = "truncated record header"
            else:
                length, crc = _RECORD_HEADER.unpack_from(data, offset)
                body = data[offset + _RECORD_HEADER.size : offset + _RECORD_HEADER.size + length]
                if length == 0:
                    problem = "empty record"
                elif length > RECORD_BYTES_MAX or len(body) != length:
                    problem = f"truncated record body ({len(body)} of {length} bytes)"
                elif crc32c.crc32c(body) != crc:
                    problem = "record crc mismatch"
            if problem is None:
                index, term, command = msgpack.unpackb(body, raw=False)
                expected = self.last_index + 1 if self._entries else index
                if index != expected:
                    problem = f"index {index} where {expected} was expected"
                elif self._entries and term < self._entries[-1][2]:
                    problem = f"term {term} after term {self._entries[-1][2]}"
            if problem is not None:
                if not is_last:
                    raise CorruptJournal(path, offset, problem)
                logger.warning(
                    "journal %s: torn tail at offset %d (%s): dropping %d bytes",
                    path,
                    offset,
                    problem,
                    len(data) - offset,
                )
                torn = True
                break
            self._entries.append((bytes(command), index, term))
            self._offsets.append(offset)
            first_index = first_index or index
            last_index = index
            offset += _RECORD_HEADER.size + length
            valid_end = offset
        segment = _Segment(sequence, path, valid_end, direct=is_last and self._direct_io)
        if torn:
            os.ftruncate(segment.fd, valid_end)  # zero padding, by contrast, is simply written over
            os.fsync(segment.fd)
        segment.first_index, segment.last_index = first_index, last_index
        self._segments.append(segment)

    def _open_new_segment(self, sequence: int, reset: bool) -> _Segment:
        """Raises ``DiskFull`` (no room for the file: it is removed again, nothing changed) or OSError."""
        path = os.path.join(self._directory, _segment_name(sequence))
        header = _SEGMENT_HEADER.pack(SEGMENT_MAGIC, FLAG_RESET if reset else 0, 0)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                if os.write(fd, header) != len(header):
                    raise OSError(errno.ENOSPC, f"short write of the header of {path}")
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_directory(self._directory)
        except OSError as error:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            full = refusal(path, error, "creating a journal segment")
            if full is None:
                raise
            self._space.refused(full)
            raise full from error
        self._space.wrote()
        segment = _Segment(sequence, path, len(header), direct=self._direct_io)
        self._segments.append(segment)
        return segment

    # -- memory ---------------------------------------------------------------------------------------
    def release_through(self, index: int) -> None:
        """Drop the commands of durable entries up to ``index`` from memory; reading one of them again
        (a new leader sending to a follower that is far behind, a snapshot) reads its record back from
        the segment. A node's memory then holds what is still in flight, not everything since the last
        compaction (up to 256 MiB per group), and the heap reuses what it frees instead of growing."""
        entries = self._entries
        if not entries:
            return
        end = min(index, self._durable_index) - entries[0][1] + 1
        if end <= self._released:
            return
        for position in range(self._released, end):
            _, entry_index, term = entries[position]
            entries[position] = (_RELEASED, entry_index, term)
        self._released = end

    @overload
    def __getitem__(self, position: int) -> Entry: ...

    @overload
    def __getitem__(self, position: slice) -> list[Entry]: ...

    def __getitem__(self, position: int | slice) -> Entry | list[Entry]:
        if isinstance(position, slice):
            return [
                self._read_back(entry) if entry[0] is _RELEASED else entry
                for entry in self._entries[position]
            ]
        entry = self._entries[position]
        return self._read_back(entry) if entry[0] is _RELEASED else entry

    def _read_back(self, entry: Entry) -> Entry:
        """The entry as its record holds it on disk (its command was released from memory)."""
        _, index, term = entry
        position = index - self._entries[0][1]
        segment = next(
            (s for s in reversed(self._segments) if s.first_index and s.first_index <= index), None
        )
        if segment is None or index > segment.last_index:
            raise InvariantViolation(f"journal {self._directory}: released index {index} is in no segment")
        offset = self._offsets[position]
        header = os.pread(segment.fd, _RECORD_HEADER.size, offset)
        length, crc = _RECORD_HEADER.unpack(header)
        body = os.pread(segment.fd, length, offset + _RECORD_HEADER.size)
        if len(body) != length or crc32c.crc32c(body) != crc:
            raise CorruptJournal(segment.path, offset, f"released record of index {index} reads back damaged")
        read_index, read_term, command = msgpack.unpackb(body, raw=False)
        if (read_index, read_term) != (index, term):
            raise InvariantViolation(
                f"journal {self._directory}: record at offset {offset} of {segment.path} holds index "
                f"{read_index} term {read_term}, expected {index} term {term}"
            )
        return bytes(command), index, term

    # -- durability -----------------------------------------------------------------------------------
    @property
    def durable_index(self) -> int:
        return self._durable_index

    @property
    def sync_pending(self) -> bool:
        return bool(self._pending) or self._needs_fsync

    @property
    def directory(self) -> str:
        return self._directory

    def segment_paths(self) -> list[str]:
        return [segment.path for segment in self._segments]

    @property
    def pending_bytes(self) -> int:
        return self._pending.size

    @property
    def sync_in_flight(self) -> bool:
        """A job is running, or a sync refused for want of room waits for its retry: either way the
        acknowledgements and applies waiting for durability are not work a tick could do now (the core
        ticks on its heartbeats and timers meanwhile, and a tick after ``space_retry_at`` tries again)."""
        return self._in_flight is not None or (
            self._space_error is not None and time.monotonic() < self._retry_at
        )

    @property
    def disk_full(self) -> DiskFull | None:
        return self._space_error or self._space.full()

    @property
    def space_retry_at(self) -> float | None:
        return None if self._space_error is None else self._retry_at

    def sync(self) -> None:
        """Write everything added since the last call and make it durable (one fdatasync), here."""
        job = self.begin_sync()
        if job is not None:
            job.run()
            self.finish_sync()

    def begin_sync(self) -> SyncJob | None:
        """The records added since the last sync leave the journal's buffer as a job (see
        RaftJournal.begin_sync); entries added from now on go to the next one. A job still running is
        waited for first: one at a time per journal, in order."""
        if self._closed:
            raise InvariantViolation(f"journal {self._directory}: sync after close")
        self._settle()
        if self._space_error is not None and time.monotonic() < self._retry_at:
            return None  # refused for want of room: what waits is tried again at _retry_at
        if not self._pending and not self._needs_fsync:
            self._durable_index = self.last_index
            return None
        segment = self._segments[-1]
        segment.open()  # here: the job may run on another thread
        job = SyncJob(segment, self._pending, segment.size, self._needs_fsync, self.last_index)
        segment.size += self._pending.size
        self._pending = _Pending()
        self._needs_fsync = False
        self._in_flight = job
        return job

    def finish_sync(self) -> bool:
        job = self._in_flight
        if job is None or not job.done:
            return False
        self._in_flight = None
        if job.error is not None:
            error = job.error
            full = refusal(job.segment.path, error, "journal sync") if isinstance(error, OSError) else None
            if full is None:
                raise job.error  # an I/O error: the core stops, and reopening recovers what is on disk
            self._refused(job, full)
            return True
        if job.last_index > self.last_index:
            raise InvariantViolation(
                f"journal {self._directory}: synced through {job.last_index}, beyond the last index "
                f"{self.last_index} (entries were dropped while the sync ran)"
            )
        self._durable_index = job.last_index
        if self._space_error is not None:
            logger.info("journal %s: room again, synced through index %d", self._directory, job.last_index)
            self._space_error = None
            self._retry_delay_s = 0.0
        self._space.wrote()
        return True

    def _refused(self, job: SyncJob, full: DiskFull) -> None:
        """A sync refused for want of room: cut the segment back to where the job began writing, and put
        its records back in front of those added since (their offsets already count them), to be
        written again from here. Nothing became durable."""
        segment = job.segment
        if segment is not self._segments[-1]:
            raise InvariantViolation(f"journal {self._directory}: a refused sync of a segment not the last")
        os.ftruncate(segment.fd, job.offset)  # an error here is an I/O error: raised, the core stops
        segment.truncated(job.offset)
        job.pending.extend(self._pending)
        self._pending = job.pending
        self._needs_fsync = True  # the file's size changed under the records
        if self._space_error is None:
            logger.warning(
                "journal %s: no room to sync %d bytes (%s); entries after index %d wait in memory, not "
                "durable, retried until there is room",
                self._directory, self._pending.size, full.reason, self._durable_index,
            )  # fmt: skip
        self._space_error = full
        self._space.refused(full)
        self._retry_delay_s = next_retry_s(self._retry_delay_s)
        self._retry_at = time.monotonic() + self._retry_delay_s

    def _settle(self) -> None:
        """Wait for a running sync job and take it back: every mutation but ``add`` does this first."""
        job = self._in_flight
        if job is not None:
            job.wait()
            self.finish_sync()

    def setCurrentTerm(self, term: int, votedForNodeId: str | None) -> None:
        if term == self._current_term and votedForNodeId == self._voted_for:
            return
        if term < self._current_term:
            raise InvariantViolation(
                f"journal {self._directory}: term going back from {self._current_term} to {term}"
            )
        sequence = self._state_sequence + 1
        try:
            fd = os.open(self._state_path, os.O_WRONLY)
            try:
                slot = _state_slot(term, votedForNodeId, sequence)
                if os.pwrite(fd, slot, (sequence % 2) * STATE_SLOT_BYTES) != len(slot):
                    raise OSError(errno.ENOSPC, f"short write of a slot of {self._state_path}")
                os.fdatasync(fd)
            finally:
                os.close(fd)
        except OSError as error:
            # Fails closed: term and vote stay as they were here and on disk (the slot written to is the
            # older one; a torn write of it leaves the other), so no vote or message relies on them.
            full = refusal(self._state_path, error, f"persisting term {term} and vote {votedForNodeId}")
            if full is None:
                raise
            self._space.refused(full)
            raise full from error
        self._state_sequence = sequence
        super().setCurrentTerm(term, votedForNodeId)

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments) + self._pending.size

    # -- mutations ------------------------------------------------------------------------------------
    def add(self, command: bytes, idx: int, term: int) -> None:
        super().add(command, idx, term)
        if not self._segments:
            self._open_new_segment(1, reset=False)
        segment = self._segments[-1]
        if (
            segment.size + self._pending.size >= self._segment_bytes_max
            and segment.first_index
            and self._space_error is None
        ):
            self._roll()
            segment = self._segments[-1]
        header, prefix, body = record_parts(idx, term, bytes(command))
        self._offsets.append(segment.size + self._pending.size)
        self._pending.add(header, prefix, body)
        if not segment.first_index:
            segment.first_index = idx
        segment.last_index = idx

    def _roll(self) -> None:
        """Close the full segment (durably) and continue in a new one. Not while records refused for want
        of room wait (they belong to this segment), nor when there is no room for the new one: the
        segment then grows past its size until a later add rolls it."""
        self.sync()
        if self._space_error is not None or self._pending or self._needs_fsync:
            return
        old = self._segments[-1]
        try:
            self._open_new_segment(old.sequence + 1, reset=False)
        except DiskFull as full:
            logger.warning("journal %s: no room for a new segment, %s grows on: %s", self._directory,
                           old.path, full.reason)  # fmt: skip
            return
        old.close_writer()  # appends go to the new segment only

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        """Drop entries at positions >= entryFrom (a conflicting suffix); durable at the next sync."""
        if entryFrom >= len(self._entries):
            return
        self._settle()
        index = self._entries[entryFrom][1]
        dropped_any = False
        while len(self._segments) > 1 and (
            self._segments[-1].first_index == 0 or self._segments[-1].first_index >= index
        ):
            dropped = self._segments.pop()
            _close(dropped)
            self._discard(dropped.path)
            self._pending = _Pending()
            dropped_any = True
        if dropped_any:
            fsync_directory(self._directory)
        segment = self._segments[-1]
        offset = self._offsets[entryFrom]
        if offset >= segment.size:
            self._pending.truncate(offset - segment.size)
        else:
            self._pending = _Pending()
            os.ftruncate(segment.fd, offset)
            segment.truncated(offset)
            self._needs_fsync = True
        super().deleteEntriesFrom(entryFrom)
        del self._offsets[entryFrom:]
        self._released = min(self._released, entryFrom)
        segment.last_index = index - 1 if index > segment.first_index else 0
        if not segment.last_index:
            segment.first_index = 0
        self._durable_index = min(self._durable_index, index - 1)

    def deleteEntriesTo(self, entryTo: int) -> None:
        """Drop entries at positions < entryTo (compacted into a snapshot): whole old segments are deleted,
        nothing is rewritten. Entries of a partly compacted segment stay on disk until it is deleted."""
        if entryTo <= 0:
            return
        self._settle()
        new_first = self._entries[entryTo][1] if entryTo < len(self._entries) else self.last_index + 1
        super().deleteEntriesTo(entryTo)
        del self._offsets[:entryTo]
        self._released = max(0, self._released - entryTo)
        deleted = False
        while len(self._segments) > 1 and self._segments[0].last_index < new_first:
            old = self._segments.pop(0)
            _close(old)
            self._discard(old.path)
            deleted = True
        if deleted:
            fsync_directory(self._directory)

    def clear(self) -> None:
        """Start a fresh log (a snapshot was installed): a new segment flagged RESET, then old ones go."""
        self._settle()
        old_segments = list(self._segments)
        # made first: no room for it (DiskFull) leaves the journal as it was
        new = self._open_new_segment(old_segments[-1].sequence + 1 if old_segments else 1, reset=True)
        self._pending = _Pending()
        self._space_error = None
        self._retry_delay_s = 0.0
        for old in old_segments:
            _close(old)
            self._discard(old.path)
        fsync_directory(self._directory)
        self._segments = [new]
        super().clear()
        self._offsets = []
        self._released = 0
        self._durable_index = 0

    def _destroy(self) -> None:
        if self._closed:
            return
        self._retry_at = 0.0  # one last attempt of what a refusal left waiting
        self.sync()
        if self._space_error is not None:
            logger.warning(
                "journal %s: closing with %d bytes of entries after index %d never synced (no room); "
                "nothing acknowledged them",
                self._directory, self._pending.size, self._durable_index,
            )  # fmt: skip
        for segment in self._segments:
            _close(segment)
        self._closed = True

    def release_handles(self) -> None:
        """Close every segment's descriptors unless a sync needs them (they open again on use)."""
        if self._in_flight is not None or self._pending or self._needs_fsync:
            return
        for segment in self._segments:
            segment.release()

    def close(self, flush: bool = True) -> None:
        """``flush=False`` drops what the last sync did not cover, like a crash (for tests)."""
        if not flush:
            self._settle()  # a crash may still have written what was in flight
            self._pending = _Pending()
            self._needs_fsync = False
            self._space_error = None
        self._destroy()


def _close(segment: _Segment) -> None:
    segment.release()


def open_journal(directory: str | None, **options: Any) -> RaftJournal:
    """A FileJournal in ``directory``, or a MemoryJournal if it is None."""
    return MemoryJournal() if directory is None else FileJournal(directory, **options)
