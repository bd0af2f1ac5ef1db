"""The files of an on-disk Raft journal and how they are written.

Owns the segment and record format (``encode_record``, ``record_parts``), the term-and-vote state file
(two slots: ``read_state``, ``state_slot``, ``read_term_and_vote``), durable writes of whole files
(``write_file_durably``, ``fsync_directory``), the records waiting for a sync (``PendingRecords``), one
group commit (``SyncJob``), the direct-I/O appender and a segment file's handle (``JournalSegment``).
``file_journal.FileJournal`` puts them together into a journal.
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

import crc32c
import msgpack

from raftlog.consensus.defaults import SYNC_THREAD_MIN_BYTES_DEFAULT
from raftlog.consensus.errors import CorruptJournal
from raftlog.errors import InvariantViolation
from raftlog.histogram import Histogram
from raftlog.packing import bin_header
from raftlog.storage.space import refusal

logger = logging.getLogger(__name__)

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
SEGMENT_HEADER = struct.Struct("<8sII")  # magic, flags, reserved
RECORD_HEADER = struct.Struct("<II")  # body length, crc32c(body)
FLAG_RESET = 1
STATE_MAGIC = b"RLJSTA01"  # format 1 (read only)
_STATE_HEADER = struct.Struct("<8sII")  # magic, crc32c(body), len(body)
STATE_SLOT_MAGIC = b"RLJSTA02"
_STATE_SLOT_HEADER = struct.Struct("<8sIIQ")  # magic, crc32c(body), len(body), sequence
STATE_SLOT_BYTES = 512  # one sector: a write of it is not torn on most devices, and the other slot stays
SEGMENT_NAME = re.compile(r"^segment-(\d{10})\.log$")
RECORD_BYTES_MAX = 256 * 1024 * 1024
SYNC_SECONDS = Histogram()  # every journal fsync/fdatasync of this process, whichever thread ran it
# A disk whose recent small syncs took this long on average is slow: a Raft thread waiting for such a sync
# holds up every other group it drives for as long (``RaftCore._sync_and_release_replies`` then hands every
# sync to a sync thread, not only large ones). This machine's disk syncs a small append in 0.16 ms (p50;
# 0.27 ms p99), where a hand-off costs about as much CPU as it saves waiting (docs/decisions/0009); a
# loaded or networked disk takes 5-50 ms. Only syncs of fewer than ``SMALL_SYNC_BYTES`` count: a large
# one's time is its bytes' (a 1 MiB append's fdatasync took 11 ms at the median in batched produce here),
# which says nothing of what a small one waits.
SLOW_SYNC_S = 0.002
SMALL_SYNC_BYTES = SYNC_THREAD_MIN_BYTES_DEFAULT


class SyncLatency:
    """The recent mean time of this process's small journal fsyncs, every journal's on every thread:
    weighted 1/16 to the newest, so a few dozen slow syncs in a row make it slow and as many fast ones
    undo it."""

    __slots__ = ("mean_s",)

    def __init__(self) -> None:
        self.mean_s = 0.0

    def observe(self, seconds: float) -> None:
        self.mean_s += (seconds - self.mean_s) / 16  # (threads race on it: a lost update costs nothing)

    @property
    def slow(self) -> bool:
        return self.mean_s >= SLOW_SYNC_S


SYNC_LATENCY = SyncLatency()


def segment_name(sequence: int) -> str:
    return f"segment-{sequence:010d}.log"


def encode_record(index: int, term: int, command: bytes) -> bytes:
    return b"".join(record_parts(index, term, command))


def record_parts(index: int, term: int, command: bytes) -> tuple[bytes, bytes, bytes]:
    """A journal record as (header, msgpack of ``[index, term, <bin header>``, command): the body is
    ``msgpack.packb([index, term, command])``, built without copying the command, which may be a ~1 MiB
    batch (a writer appends the three parts where they go)."""
    prefix = b"".join((b"\x93", msgpack.packb(index), msgpack.packb(term), bin_header(len(command))))
    crc = crc32c.crc32c(command, value=crc32c.crc32c(prefix))
    return RECORD_HEADER.pack(len(prefix) + len(command), crc), prefix, command


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
    return read_state(os.path.join(directory, "state"))[:2]


def read_state(path: str) -> tuple[int, str | None, int, bool]:
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


def state_slot(term: int, voted_for: str | None, sequence: int) -> bytes:
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


class PendingRecords:
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

    def extend(self, later: PendingRecords) -> None:
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
        self, segment: JournalSegment, pending: PendingRecords, offset: int, full: bool, last_index: int
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
        small = pending.size < SMALL_SYNC_BYTES
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
        took = time.perf_counter() - started
        SYNC_SECONDS.observe(took)
        if small:
            SYNC_LATENCY.observe(took)


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

    def __init__(self, path: str, size: int, tail: bytes | None = None) -> None:
        """``tail``: the file's bytes from the block holding ``size`` up to it, as the writer closed before
        left them (``kept_tail``), so that a reopening reads nothing back from the disk (a direct write
        leaves no copy in the page cache: the read is a disk's round trip on every append of a group that
        goes quiet between its records)."""
        self._fd = os.open(path, os.O_WRONLY | _O_DIRECT)
        if tail is not None and len(tail) == size % DIRECT_BLOCK:
            self._start, self._tail = size - len(tail), tail
        else:
            self.seek(path, size)

    @property
    def kept_tail(self) -> bytes:
        """The bytes of the block the next write starts at, as written (see ``__init__``)."""
        return self._tail

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

    def append(self, pending: PendingRecords) -> None:
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


def _direct_writer(path: str, size: int, tail: bytes | None = None) -> _DirectWriter | None:
    """A direct writer for the segment at ``path``, or None where the file system has no direct I/O
    (tmpfs before Linux 6.6, some overlay set-ups): the journal then writes through the page cache."""
    if not _O_DIRECT:
        return None
    try:
        return _DirectWriter(path, size, tail)
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


class JournalSegment:
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
        # the direct writer's last block as it closed it (``release``), for the next one to go on from:
        # valid while ``size`` ends in it (only this segment's writer and ``truncated`` change the file)
        self._kept_tail: bytes | None = None

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
            self._writer = _direct_writer(self.path, self.size, self._kept_tail)
            self._kept_tail = None
            self.direct = self._writer is not None

    def truncated(self, size: int) -> None:
        """The file was cut at ``size``: an open direct writer continues there."""
        self.size = size
        self._kept_tail = None
        if self._writer is not None:
            self._writer.seek(self.path, size)

    def close_writer(self) -> None:
        """No more appends here (the journal rolled to a new segment)."""
        self.direct = False
        self._kept_tail = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def release(self) -> None:
        """Close what is open; the next use opens it again."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._writer is not None:
            self._kept_tail = self._writer.kept_tail
            self._writer.close()
            self._writer = None
