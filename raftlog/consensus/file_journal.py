"""FileJournal, the durable Raft journal, and ``open_journal``.

``FileJournal`` recovers its directory (torn tails, reset segments, the state file), buffers appends and
makes them durable once per tick (in the tick or as a ``SyncJob`` another thread runs), persists term and
vote, truncates a conflicting suffix, compacts by deleting whole segments, keeps records refused for want
of room until a retry writes them, and releases commands from memory, reading them back from disk if they
are needed again. The files it is made of and their format are ``journal_files``'.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections.abc import Callable
from typing import Any, overload

import crc32c
import msgpack

from raftlog.consensus.errors import CorruptJournal
from raftlog.consensus.journal import Entry, MemoryJournal, RaftJournal
from raftlog.consensus.journal_files import (
    FLAG_RESET,
    RECORD_BYTES_MAX,
    RECORD_HEADER,
    SEGMENT_HEADER,
    SEGMENT_MAGIC,
    SEGMENT_NAME,
    STATE_SLOT_BYTES,
    JournalSegment,
    PendingRecords,
    SyncJob,
    fsync_directory,
    read_state,
    record_parts,
    segment_name,
    state_slot,
    write_file_durably,
)
from raftlog.errors import InvariantViolation
from raftlog.storage.errors import DiskFull
from raftlog.storage.space import DiskSpace, next_retry_s, refusal

logger = logging.getLogger(__name__)


class _Released(bytes):
    """The command of an entry whose bytes were dropped from memory (``FileJournal.release_through``)."""


_RELEASED = _Released()


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
        """``direct_io``: append with O_DIRECT where the file system allows it (see
        ``journal_files._DirectWriter``). ``discard(path)`` takes a segment file the journal no longer
        needs out of its directory (it is closed; the journal fsyncs the directory after): an unlink by
        default; a node renames it aside and removes it on another thread, at a pace
        (``raftlog.storage.removal.Remover``). ``space``: what the node's writers know of room on its
        disk, shared by its journals and logs (this journal's own by default).

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
        self._segments: list[JournalSegment] = []  # oldest first; the last one is appended to
        self._pending = PendingRecords()  # records added since the last sync, not yet written
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
        term, voted_for, sequence, slotted = read_state(self._state_path)
        self._current_term, self._voted_for, self._state_sequence = term, voted_for, sequence
        if not slotted:
            # A new journal (or one of format 1): the state file is made here, on the opening thread,
            # so that each later term or vote is one overwrite and one fdatasync on the Raft thread.
            sequence = 1  # in slot 1: the next change goes to slot 0, leaving this one
            empty = bytes(STATE_SLOT_BYTES)
            write_file_durably(self._state_path, empty + state_slot(term, voted_for, sequence))
            self._state_sequence = sequence

    def _recover_segments(self) -> None:
        sequences = sorted(
            int(match.group(1)) for name in os.listdir(self._directory) if (match := SEGMENT_NAME.match(name))
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
        path = os.path.join(self._directory, segment_name(sequence))
        with open(path, "rb") as file:
            data = file.read()
        if len(data) < SEGMENT_HEADER.size:
            if not is_last:
                raise CorruptJournal(path, 0, f"segment of {len(data)} bytes has no header")
            logger.warning("journal %s: dropping torn segment of %d bytes", path, len(data))
            os.unlink(path)
            fsync_directory(self._directory)
            return
        magic, flags, _ = SEGMENT_HEADER.unpack_from(data)
        if magic != SEGMENT_MAGIC:
            raise CorruptJournal(path, 0, f"bad segment magic {magic!r}")
        if flags & FLAG_RESET:
            self._entries.clear()
            self._offsets.clear()
            for old in self._segments:
                _close(old)
            self._segments.clear()
        offset = SEGMENT_HEADER.size
        first_index = last_index = 0
        valid_end = offset
        torn = False  # the records end in a torn or damaged tail (not in zero padding, not at the end)
        while offset < len(data):
            problem = None
            head = data[offset : offset + RECORD_HEADER.size]
            if head.count(0) == len(head) and data.count(0, offset) == len(data) - offset:
                break  # zeros to the end: a direct write's padding (or space never written)
            if offset + RECORD_HEADER.size > len(data):
                problem = "truncated record header"
            else:
                length, crc = RECORD_HEADER.unpack_from(data, offset)
                body = data[offset + RECORD_HEADER.size : offset + RECORD_HEADER.size + length]
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
            offset += RECORD_HEADER.size + length
            valid_end = offset
        segment = JournalSegment(sequence, path, valid_end, direct=is_last and self._direct_io)
        if torn:
            os.ftruncate(segment.fd, valid_end)  # zero padding, by contrast, is simply written over
            os.fsync(segment.fd)
        segment.first_index, segment.last_index = first_index, last_index
        self._segments.append(segment)

    def _open_new_segment(self, sequence: int, reset: bool) -> JournalSegment:
        """Raises ``DiskFull`` (no room for the file: it is removed again, nothing changed) or OSError."""
        path = os.path.join(self._directory, segment_name(sequence))
        header = SEGMENT_HEADER.pack(SEGMENT_MAGIC, FLAG_RESET if reset else 0, 0)
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
        segment = JournalSegment(sequence, path, len(header), direct=self._direct_io)
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
        header = os.pread(segment.fd, RECORD_HEADER.size, offset)
        length, crc = RECORD_HEADER.unpack(header)
        body = os.pread(segment.fd, length, offset + RECORD_HEADER.size)
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
        self._pending = PendingRecords()
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
                slot = state_slot(term, votedForNodeId, sequence)
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
            self._pending = PendingRecords()
            dropped_any = True
        if dropped_any:
            fsync_directory(self._directory)
        segment = self._segments[-1]
        offset = self._offsets[entryFrom]
        if offset >= segment.size:
            self._pending.truncate(offset - segment.size)
        else:
            self._pending = PendingRecords()
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
        self._pending = PendingRecords()
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

    def release_handles(self) -> bool:
        """Close every segment's descriptors unless a sync needs them (False: they stay; they open again on
        use)."""
        if self._in_flight is not None or self._pending or self._needs_fsync:
            return False
        for segment in self._segments:
            segment.release()
        return True

    def close(self, flush: bool = True) -> None:
        """``flush=False`` drops what the last sync did not cover, like a crash (for tests)."""
        if not flush:
            self._settle()  # a crash may still have written what was in flight
            self._pending = PendingRecords()
            self._needs_fsync = False
            self._space_error = None
        self._destroy()


def _close(segment: JournalSegment) -> None:
    segment.release()


def open_journal(directory: str | None, **options: Any) -> RaftJournal:
    """A FileJournal in ``directory``, or a MemoryJournal if it is None."""
    return MemoryJournal() if directory is None else FileJournal(directory, **options)
