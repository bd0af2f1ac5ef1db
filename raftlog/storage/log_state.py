"""``LogState``: what a partition's log holds and the checks every operation on it makes.

The segments (in offset order) and their base offsets, the start offset, what is fsynced, whether the log
failed or closed, its leader epochs and transactions, and the one lock that serialises every operation.
:class:`~raftlog.storage.log.Log` appends, flushes and reads over it; ``raftlog.storage.log_cut``
truncates it, moves its start and swaps its segments. Both change it only under ``_lock``.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from collections.abc import Callable

from raftlog.storage.closing import Closing
from raftlog.storage.config import LogConfig
from raftlog.storage.errors import LogClosed, OffsetOutOfRange, StorageUnavailable
from raftlog.storage.leader_epochs import LeaderEpochs
from raftlog.storage.log_open import OpenReport
from raftlog.storage.segment import Segment
from raftlog.storage.space import DiskSpace
from raftlog.storage.transactions import LogTransactions

log = logging.getLogger("raftlog.storage")


class LogState(Closing):
    """The state of one log and its invariant checks; :class:`~raftlog.storage.log.Log` is the log."""

    def __init__(
        self,
        directory: str,
        config: LogConfig,
        clock: Callable[[], int],
        discard: Callable[[str], None] = os.unlink,
        space: DiskSpace | None = None,
    ) -> None:
        self.directory = directory
        self.config = config
        self._clock = clock
        self._discard = discard  # where deleted segments' files go (Segment.delete)
        self.space = space if space is not None else DiskSpace()  # told of refused and accepted writes
        self._lock = threading.RLock()
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        # Where reading starts when that is above the first segment's base (deleted records: advance_start)
        self._start_offset = 0
        # Batches below this offset may have been rewritten by compaction (raftlog.storage.cleaner): the
        # bytes on disk are no longer those appended, though every kept record keeps its offset
        self.compacted_below = 0
        self._unflushed_bytes = 0
        self._last_flush_ms = clock()
        self._durable_end_offset = 0
        self._truncations = 0  # a flush outside the lock advances durability only if none came meanwhile
        self._failed: str | None = None
        self._closed = False
        self.open_report = OpenReport()
        # Each leader epoch's start offset (raftlog.storage.leader_epochs): changed under the lock, its
        # ``entries`` read from any thread
        self.leader_epochs = LeaderEpochs(directory)
        # Open transactions and the aborted index (raftlog.storage.transactions): changed under the lock,
        # its ``open_first`` and ``rows`` read from any thread
        self.transactions = LogTransactions(directory)
        # Open files: the LogManager closes those of a log unused for a while (release_handles); any use
        # marks the log (no lock: a plain store, read by the manager's sweep as a hint).
        self.used_at = time.monotonic()
        self.handles_open = True

    @property
    def log_start_offset(self) -> int:
        """The first offset read (Kafka's log start offset): the first segment's base, or above it when
        records were deleted (:meth:`advance_start`). It may lie inside a batch, which is then served
        whole, as Kafka serves it; and above the end while a replica is behind its peers."""
        return max(self._segments[0].base_offset, self._start_offset)

    @property
    def end_offset(self) -> int:
        """The offset the next appended record gets (Kafka's log end offset)."""
        return self._segments[-1].end_offset

    @property
    def durable_end_offset(self) -> int:
        """Every record below this offset is fsynced."""
        return self._durable_end_offset

    def _check_writable(self) -> None:
        if self._closed:
            raise LogClosed(f"log {self.directory} is closed")
        if self._failed is not None:
            raise StorageUnavailable(self.directory, f"log failed earlier and refuses writes: {self._failed}")

    def _fail(self, reason: str) -> None:
        log.error(
            "%s: storage failure, log refuses further writes until reopened: %s", self.directory, reason
        )
        self._failed = reason

    def _check_offset(self, offset: int) -> None:
        if not self.log_start_offset <= offset <= self.end_offset:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.end_offset)

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def _touch(self) -> None:
        self.used_at = time.monotonic()
        self.handles_open = True
