"""One lock per group name, so that a group's heartbeats (and the sweep fencing its members) run one at a
time and those of different groups concurrently: the epoch protocols' ``member_timers`` and the share
groups' coordinator hold them. A name's lock is dropped once no one holds or waits for it and its owner
keeps nothing else of the name (``kept``), so names asked at random leave nothing behind. Event loop
only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator


class NameLocks:
    """``kept``: whether the owner still keeps something of a name (its lock is then kept too)."""

    def __init__(self, kept: Callable[[str], bool]) -> None:
        self._kept = kept
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}  # name -> holding or waiting for its lock

    def __iter__(self) -> Iterator[str]:
        """The names with a lock."""
        return iter(self._locks)

    def busy(self, name: str) -> bool:
        """Whether someone holds or waits for the name's lock."""
        return name in self._users

    def drop(self, name: str) -> None:
        """The owner keeps nothing of ``name`` now: its lock goes, unless someone holds or waits for it."""
        if name not in self._users:
            self._locks.pop(name, None)

    @contextlib.asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        """Held while one piece of work on ``name`` runs."""
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        self._users[name] = self._users.get(name, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[name] -= 1
            if not self._users[name]:
                del self._users[name]
                if not self._kept(name):
                    self._locks.pop(name, None)
