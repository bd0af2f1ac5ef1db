"""A disk that refuses writes for want of room, for one directory: ``os.write``, ``os.pwrite``,
``os.fdatasync`` and ``os.fsync`` of descriptors open under it fail with ENOSPC while ``refusing`` is set
(a write may first go half through, as a real one that runs out of room midway). What the other
replicas of a scripted cluster write goes through."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from typing import Any

import pytest
from waiting import wait_for

from raftlog.consensus.journal import RaftJournal


class Refusal:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, directory: str, at: tuple[str, ...]) -> None:
        """``at``: which calls refuse ("write", "sync")."""
        self.directory = os.path.realpath(directory) + os.sep
        self.refusing = True
        self.refused: list[str] = []  # the calls refused, in order
        self.written: list[tuple[int, bytes]] = []  # (offset, bytes) of every pwrite that went through here
        real_write, real_pwrite = os.write, os.pwrite
        real_fdatasync, real_fsync = os.fdatasync, os.fsync

        def ours(fd: int) -> bool:
            try:
                return os.readlink(f"/proc/self/fd/{fd}").startswith(self.directory)
            except OSError:
                return False

        def refuse(name: str) -> None:
            self.refused.append(name)
            raise OSError(errno.ENOSPC, "No space left on device")

        def pwrite(fd: int, data: Any, offset: int) -> int:
            if ours(fd):
                if self.refusing and "write" in at:
                    if len(data) > 4096 and not self.refused:  # the first one goes half through
                        half = len(data) // 2 // 4096 * 4096
                        self.refused.append("half")
                        return real_pwrite(fd, memoryview(data)[:half], offset)
                    refuse("pwrite")
                self.written.append((offset, bytes(data)))
            return real_pwrite(fd, data, offset)

        def write(fd: int, data: Any) -> int:
            if ours(fd) and self.refusing and "write" in at:
                refuse("write")
            return real_write(fd, data)

        def syncing(real: Callable[[int], None], name: str) -> Callable[[int], None]:
            def sync(fd: int) -> None:
                if ours(fd) and self.refusing and "sync" in at:
                    refuse(name)
                real(fd)

            return sync

        monkeypatch.setattr(os, "pwrite", pwrite)
        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "fdatasync", syncing(real_fdatasync, "fdatasync"))
        monkeypatch.setattr(os, "fsync", syncing(real_fsync, "fsync"))


def after_space_retry_time(journal: RaftJournal) -> None:
    """Until ``journal``'s retry time of a sync refused for want of room has come (a sync before it tries
    nothing). The journal reads it on its own monotonic clock, and its backoff doubles on every refusal,
    so no fixed wait fits every case."""

    def due() -> bool:
        retry_at = journal.space_retry_at
        return retry_at is None or time.monotonic() >= retry_at

    wait_for(due, "the journal's retry time", timeout_s=10, every_s=0.01)
