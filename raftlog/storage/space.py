"""Room on a data directory's file system: what a write refused for want of it means, and who decides
what follows (docs/decisions/0014).

A write refused with ENOSPC (the file system is full) or EDQUOT (a quota is spent) is expected, not a
failure, and it is told apart from every other I/O error:

- The writer cuts what it had written of the refused write back to where the write began, so no torn
  record is left for recovery to read (recovery would cut it too: every record is length-framed and
  CRC-checked), and keeps nothing of it: a partition ``Log`` raises :class:`DiskFull` and stays
  writable; a Raft ``FileJournal`` keeps the records in memory, not durable, and writes them again
  from its own copy later. It notes the refusal here (:meth:`DiskSpace.refused`), and every write that
  gets through (:meth:`DiskSpace.wrote`).
- Everything else stays as it was: an I/O error fails a log until it is reopened, and an fsync that
  fails fails it whatever its errno, ENOSPC included (a file system with delayed allocation may report
  ENOSPC only at writeback, and the kernel may then have dropped the dirty pages: retrying the fsync
  could report success for data that is gone). The journal may retry a refused sync only because it
  rewrites the bytes from its own copy after cutting the file back, never trusting the page cache.
- The node's parts read :meth:`DiskSpace.full`: a Raft replica on a full file system hands leadership
  to a follower that holds its whole log, stands for no election and refuses proposals (HTTP 507,
  Kafka ``KAFKA_STORAGE_ERROR``), and keeps serving reads; health and ``/metrics`` report it.
- Room comes back without a restart: the journal retries a refused sync on a backoff
  (:func:`next_retry_s`), a refused apply is retried the same way, and :meth:`DiskSpace.probe` (the
  node, while full) reserves a little room in a scratch file: once that works and ``HOLD_S`` has passed
  since the last refusal, the file system counts as having room again.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time

from raftlog.storage.errors import DiskFull

NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
HOLD_S = 2.0  # full from a refusal until a write gets through and this long has passed since the last one
RETRY_MIN_S = 0.05  # a refused sync or apply is retried after this, doubling up to RETRY_MAX_S
RETRY_MAX_S = 1.0
PROBE_NAME = ".space-probe"
PROBE_BYTES = 1 << 20


def no_space(error: BaseException) -> bool:
    """The error says the file system is full or the quota spent (not an I/O error)."""
    return isinstance(error, OSError) and error.errno in NO_SPACE_ERRNOS


def next_retry_s(previous_s: float) -> float:
    """The delay before the next retry of a refused write, after ``previous_s`` (0: the first refusal)."""
    return min(RETRY_MAX_S, max(RETRY_MIN_S, previous_s * 2))


def refusal(path: str, error: OSError, what: str) -> DiskFull | None:
    """:class:`DiskFull` for a write refused for want of room, None for any other error."""
    if not no_space(error):
        return None
    return DiskFull(path, f"{what}: {os.strerror(error.errno or 0)} (errno {error.errno})")


class DiskSpace:
    """What the writers under one data directory learned about room on its file system. A node holds
    one and hands it to its logs and journals; a log or journal opened alone gets its own. Any thread:
    ``refused`` takes a lock, ``wrote`` and ``full`` are a few attribute reads (every Raft tick asks)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.refusals = 0  # writes refused for want of room (each attempt, retries included)
        self._last: DiskFull | None = None
        self._last_at = 0.0  # monotonic time of the last refusal
        self._written_since = True

    def refused(self, error: DiskFull) -> None:
        with self._lock:
            self.refusals += 1
            self._last = error
            self._last_at = time.monotonic()
            self._written_since = False

    def wrote(self) -> None:
        """A write got through (there was room for it)."""
        if not self._written_since:
            self._written_since = True

    def full(self, now: float | None = None) -> DiskFull | None:
        """The last refusal while the file system counts as full: until a write got through after it and
        ``HOLD_S`` has passed since it (a retry that keeps failing keeps it full). None: room."""
        last = self._last
        if last is None:
            return None
        if self._written_since and (time.monotonic() if now is None else now) - self._last_at >= HOLD_S:
            return None
        return last

    def probe(self, directory: str) -> bool:
        """Reserve ``PROBE_BYTES`` in a scratch file under ``directory`` and remove it: True (and noted
        as a write that got through) if there was room, False if it was refused for want of it."""
        path = os.path.join(directory, PROBE_NAME)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.posix_fallocate(fd, 0, PROBE_BYTES)
        except OSError as error:
            if not no_space(error):
                raise
            return False
        finally:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self.wrote()
        return True
