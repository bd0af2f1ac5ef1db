"""The bytes of an answer being built or written, held in the same budget as its listener's requests
(``holds.RequestBytes``: the node's bound, and the holder's share of it): one rule for both doors
(``kafka_api.answers``, ``api.answers``).

An answer that may be large (a Kafka Fetch, an HTTP fetch, a consumer instance's records, a share acquire)
takes the most it may hold before anything of it is read, waiting for room as a request does; once read,
what it holds is kept and the rest given back at once (``settle``); the rest is given back once the answer
is written out to the client (``give_back``), or its connection closed (``close``: a read still to come for
it takes nothing, so nothing stays held for an answer that will not be sent). A client that does not read its
answers therefore holds at most its share of the budget, and the node at most the budget, whatever it asks.
The request asking for such an answer gives its own bytes back before the answer takes its room (a door
serves one large answer of a connection at a time), so a holder never waits for room it holds itself.
"""

from __future__ import annotations

from partitions.security.holds import RequestBytes


class AnswerHold:
    """One answer's bytes in ``budget`` for ``holder``: taken, settled to what the answer holds, given back
    once."""

    def __init__(self, budget: RequestBytes, holder: str) -> None:
        self.budget = budget
        self.holder = holder
        self.held = 0
        self.closed = False  # the answer will not be sent (its connection closed): it takes nothing more

    async def take(self, size: int) -> bool:
        """``size`` more bytes, waiting for room (the answer reads nothing meanwhile). False: the answer was
        closed (before or while it waited), nothing taken: it reads nothing more."""
        if self.closed:
            return False
        if size > 0:
            await self.budget.take(self.holder, size)
            if self.closed:
                self.budget.give_back(self.holder, size)
                return False
            self.held += size
        return True

    async def settle(self, size: int) -> None:
        """Hold ``size`` bytes, what the answer holds now: the rest given back. An answer that came to more
        than was taken (one of at least a batch may) gives back what it held and takes its size anew, so
        that its own bytes never keep it waiting: one larger than the holder's share goes in once the
        holder holds nothing else, as a request does."""
        if self.closed:
            return
        if size < self.held:
            self.budget.give_back(self.holder, self.held - size)
            self.held = size
        elif size > self.held:
            self.give_back()
            await self.take(size)

    def give_back(self) -> None:
        held, self.held = self.held, 0
        self.budget.give_back(self.holder, held)

    def close(self) -> None:
        """The answer will not be sent (its connection closed while it was read): what it holds back, and
        a read still to come takes nothing (``take`` answers False), so nothing is left held for good."""
        self.closed = True
        self.give_back()
