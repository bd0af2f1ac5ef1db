"""A long poll's wait without its read (``DataPlane.wait_any``): one wait over every partition a request
names, woken by the replicas' appliers (``Replica.watchers``), until one has a committed record at the
offset asked, would not be read as it was, or the time is up. The read then answers, whichever it was."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence

from partitions.replicas.manager import Replica
from raftlog.errors import RaftlogError
from raftlog.storage.log import last_stable_offset


async def wait_any(
    ready_leader: Callable[[str, int], Replica],
    reads: Sequence[tuple[str, int, int]],
    timeout_ms: int,
    stable: bool = False,
    step: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """``DataPlane.wait_any``'s wait; ``ready_leader``: the leader replica here that may answer a read now
    (raising the project's errors when none may)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, timeout_ms) / 1000
    woke: list[tuple[Replica, str, int, int]] = []
    woken: asyncio.Future[None] = loop.create_future()

    def wake(replica: Replica, topic: str, partition: int, offset: int) -> None:
        woke.append((replica, topic, partition, offset))
        if not woken.done():
            woken.set_result(None)

    watched: list[tuple[Replica, Callable[[], None]]] = []
    try:
        for topic, partition, offset in reads:
            try:
                replica = ready_leader(topic, partition)
            except RaftlogError:  # its read answers the error
                return
            replica.waiters += 1  # before the high watermark is read: see replicas.Notifying
            watcher = functools.partial(wake, replica, topic, partition, offset)
            replica.watchers.add(watcher)
            watched.append((replica, watcher))
            if not _waits(replica, offset, stable):
                return
            if step is not None:
                await step()
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            try:
                async with asyncio.timeout(remaining):
                    await woken
            except TimeoutError:
                return
            for replica, topic, partition, offset in woke:
                try:
                    if ready_leader(topic, partition) is not replica:
                        return  # opened anew: its read finds the one now there
                except RaftlogError:  # its read answers the error
                    return
                if not _waits(replica, offset, stable):
                    return
            woke.clear()
            woken = loop.create_future()
    finally:
        for replica, watching in watched:
            replica.waiters -= 1
            replica.watchers.discard(watching)


def _waits(replica: Replica, offset: int, stable: bool) -> bool:
    """Whether a long poll at ``offset`` still waits on the replica: nothing committed there yet (below
    the last stable offset with ``stable``), and the offset within [log start, high watermark] (outside
    it, the read answers OffsetOutOfRange at once)."""
    high_watermark = replica.machine.high_watermark
    if not replica.log.log_start_offset <= offset <= high_watermark:
        return False
    end = min(last_stable_offset(replica.log), high_watermark) if stable else high_watermark
    return offset >= end
