"""One process per data directory: an exclusive ``flock`` on ``<directory>/.lock``.

Two processes on one directory both write its logs and journals: two clusters on one ``./data`` each
acknowledged writes at the same offset, and the log was corrupt. As Kafka and Redpanda do, the lock is
taken before anything else in the directory is read or written, and a second process is refused at once,
having touched nothing but the lock file. The lock is held for the holder's life and released by
``close`` or, however the holder ends (``kill -9`` included), by the kernel when its last descriptor
closes: there is never a stale lock to remove by hand. The descriptor is not inherited by child
processes (``O_CLOEXEC``).

Once it holds the lock, the holder writes who it is into the file (pid, a description such as
``node n1``, and its start time, as one JSON object), so that a refused process can name it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from raftlog.storage.closing import Closing
from raftlog.storage.errors import DirectoryLocked

LOCK_FILE = ".lock"
HOLDER_BYTES_MAX = 4096  # a refused process reads at most this much of the holder's description


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a data directory, as it wrote itself into the lock file."""

    pid: int
    owner: str  # e.g. "node n1", "raftlog dev"
    started_at: str  # UTC, ISO 8601

    def describe(self) -> str:
        return f"{self.owner} (pid {self.pid}, since {self.started_at})"

    def encode(self) -> bytes:
        return json.dumps({"pid": self.pid, "owner": self.owner, "started_at": self.started_at}).encode()

    @classmethod
    def decode(cls, data: bytes) -> Holder | None:
        """The holder a lock file names; None when it names none yet (the holder took the lock and has
        not written it yet) or holds something else."""
        try:
            fields = json.loads(data.decode("utf-8"))
            pid, owner, started_at = fields["pid"], fields["owner"], fields["started_at"]
        except (UnicodeDecodeError, ValueError, TypeError, KeyError):
            return None
        if not isinstance(pid, int) or not isinstance(owner, str) or not isinstance(started_at, str):
            return None
        return cls(pid, owner, started_at)


class DirectoryLock(Closing):
    """Held from ``acquire`` until ``close`` (or the process's end)."""

    def __init__(self, directory: str, fd: int, holder: Holder) -> None:
        self.directory = directory
        self.holder = holder
        self._fd = fd

    @classmethod
    def acquire(cls, directory: str, owner: str, clock: Callable[[], float] | None = None) -> DirectoryLock:
        """Lock ``directory`` (created if missing) for this process, described as ``owner``. Raises
        ``DirectoryLocked`` naming the holder when another process (or another lock in this one) holds it;
        nothing in the directory is changed then."""
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                os.close(fd)
                raise
            holder = Holder.decode(os.pread(fd, HOLDER_BYTES_MAX, 0))
            os.close(fd)
            raise DirectoryLocked(directory, holder.describe() if holder else None) from None
        try:
            # time.time looked up now, not when this module loaded: a process that replaced it since (the
            # fault harness's clock skew, installed after a forked node's imports) is heard
            started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((clock or time.time)()))
            holder = Holder(os.getpid(), owner, started_at)
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder.encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(directory, fd, holder)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def close(self) -> None:
        """Release the lock (the file stays, emptied: removing it could let two processes lock two
        different files of the same name). Idempotent."""
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
