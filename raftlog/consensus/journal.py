"""Raft journals: the log of (command, index, term) entries plus the persistent term and vote.

This module holds the journal interface (``RaftJournal``, pysyncobj's journal protocol and ours) and the
in-memory journal (``MemoryJournal``); the on-disk one is ``file_journal.FileJournal``, built from the
file pieces of ``journal_files``.

pysyncobj addresses a journal by *position* (0 = oldest entry kept), not by Raft index; every journal here
keeps the entries in a Python list for that reason and bounds its size through ``deleteEntriesTo``
(compaction). On top of pysyncobj's journal protocol each journal offers ``sync()`` (group commit, called
once per tick by the core) and ``durable_index`` (the highest index that survives a crash).
"""

from __future__ import annotations

from typing import overload

from raftlog.consensus.journal_files import SyncJob
from raftlog.errors import InvariantViolation
from raftlog.storage.errors import DiskFull

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

    def release_handles(self) -> bool:
        """The group is idle: a journal holding open files may close them until it is used again (this
        one holds none). False: not now (a sync needs them), to be asked again."""
        return True

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


class MemoryJournal(RaftJournal):
    """Volatile journal for tests and benchmarks: everything counts as durable as soon as it is added."""

    @property
    def durable_index(self) -> int:
        return self.last_index

    def sync(self) -> None:
        """Nothing to flush."""

    def _destroy(self) -> None:
        self._entries = []
