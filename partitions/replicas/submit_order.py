"""Proposals of one partition submitted in the order their produce calls began.

A produce may wait before it proposes (its batch compressed or recompressed on a reader thread), so two
produces to one partition could otherwise reach Raft in the other order. A producer that pipelines (a
Kafka producer keeps up to five requests in flight per partition) relies on the log keeping the order it
sent in: a later batch applied first would make the earlier one's sequence look old. Each call takes a
turn when it begins, synchronously; it proposes only once every earlier turn has proposed or given up.
Raft submits a proposal synchronously when ``propose`` starts, so a turn ends right before it and the
next turn cannot run before that submit. Event loop only.
"""

from __future__ import annotations

import asyncio


class Turn:
    def __init__(self, previous: asyncio.Future[None] | None, mine: asyncio.Future[None]) -> None:
        self._previous = previous
        self._mine = mine

    async def wait(self) -> None:
        """Until every earlier turn has ended (proposed or given up). Cancelling this ends the turn."""
        if self._previous is not None and not self._previous.done():
            try:
                await asyncio.shield(self._previous)
            except BaseException:
                self.end()
                raise

    def end(self) -> None:
        """Let the next turn go (idempotent): call right before proposing, and on every way out."""
        if not self._mine.done():
            self._mine.set_result(None)


class SubmitOrder:
    def __init__(self) -> None:
        self._tail: asyncio.Future[None] | None = None

    def take(self) -> Turn:
        """A turn after every turn taken before: take it before the call's first ``await``."""
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        previous, self._tail = self._tail, mine
        return Turn(previous, mine)
