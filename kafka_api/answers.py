"""A connection's large answers (Fetch, ShareFetch): one at a time, their bytes held in the listener's
budget (``partitions.security.answer_holds``) from before they are read until they are written out.

Kafka's broker mutes a connection from a request's arrival until its answer is sent (``SocketServer``'s
``Processor``: one request of a connection in process at a time). raftlog serves a connection's requests
concurrently (a producer's pipelined batches commit together), but a request asking for a large answer
is served only once the connection's previous large answer was written out (``turn``), and nothing more
of the connection is read meanwhile: a client pipelining fetches it does not read holds one answer of
the node, not 64. That answer's bytes count in the same budget as requests, per user (an anonymous
connection: its address) and per node, so many connections hold no more; the request gives its own bytes
back before its turn (one such request of a connection waits at a time), so that an answer never waits
for room its holder's requests of the same connection hold.
"""

from __future__ import annotations

import asyncio

from partitions.security.answer_holds import AnswerHold
from partitions.security.holds import RequestBytes

FETCH_KEY, SHARE_FETCH_KEY = 1, 78
LARGE_ANSWER_KEYS = frozenset((FETCH_KEY, SHARE_FETCH_KEY))


class Answers:
    """One connection's large answers: the turn each waits for, and the bytes of the one in process."""

    def __init__(self, budget: RequestBytes | None = None, address: str = "") -> None:
        self._budget = budget  # None: counted nowhere (the listener's own door; a door in a unit test)
        self._address = address
        self._last: asyncio.Future[None] | None = None  # written out once the last large answer is
        self._pending: list[asyncio.Future[None]] = []  # of the large answers not yet written out
        self._hold: AnswerHold | None = None
        self._closed = False

    def turn(self) -> tuple[asyncio.Future[None], asyncio.Future[None]]:
        """For a large answer about to be served: the future to wait for first (the previous one's written
        out; done when none is in process), and its own, which ``written_out`` settles."""
        loop = asyncio.get_running_loop()
        previous = self._last
        if previous is None:
            previous = loop.create_future()
            previous.set_result(None)
        self._last = loop.create_future()
        if self._closed:
            self._last.cancel()
        self._pending = [future for future in self._pending if not future.done()]
        self._pending.append(self._last)
        return previous, self._last

    def hold(self, principal: str | None) -> AnswerHold | None:
        """The bytes of the large answer in process (one at a time: its turn came), None when they count
        nowhere. Its holder: ``principal``, else the connection's address."""
        if self._budget is None:
            return None
        if self._hold is None:
            self._hold = AnswerHold(self._budget, principal or f"address:{self._address}")
            if self._closed:  # the connection ended first: the answer takes (and reads) nothing
                self._hold.close()
        return self._hold

    def written_out(self, written: asyncio.Future[None]) -> None:
        """A large answer left for the client (or will not be sent): its bytes back, the next one's turn."""
        if self._hold is not None:
            self._hold.give_back()
            self._hold = None
        if not written.done():
            written.set_result(None)

    def close(self) -> None:
        """The connection ended: what it holds back, and no large answer of it waits for its turn."""
        self._closed = True
        if self._hold is not None:
            self._hold.close()  # a handler still reading for it takes nothing more (AnswerHold.take)
            self._hold = None
        for future in self._pending:
            future.cancel()  # a large request waiting for its turn is not served
        self._pending.clear()
