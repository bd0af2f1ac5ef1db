"""The work of one request, paced: a handler that goes through a request's partitions or topics hands
the event loop back after every ``ITEMS_PER_TURN`` of them, so one request naming 100,000 partitions
(a frame of a few MiB) delays the node's other clients by a few milliseconds at a time, not for seconds.

Kafka sets no bound on the partitions or topics of one request, and a consumer of many partitions may
list thousands in a Fetch: every one is still served, in turns.

What a request keeps of each entry until it is answered is small too: an error that is a partition's answer
is kept as its code and words (``errors.Caught``). Kept with its traceback, each error held the frames it
was raised through, and 100,000 refused partitions (a topic of one partition named with 100,000 indexes)
left millions of objects for the garbage collector to scan: one collection held the node, its event loop
and its Raft thread alike, for 4 s.
"""

from __future__ import annotations

import asyncio

ITEMS_PER_TURN = 500  # partitions or topics handled between two yields to the event loop (a few ms)


class Pacer:
    """Counts a request's items as a handler goes; ``step`` yields to the event loop once
    ``ITEMS_PER_TURN`` were counted since the last yield. One per request, event loop only."""

    def __init__(self, items_per_turn: int = ITEMS_PER_TURN) -> None:
        if items_per_turn < 1:
            raise ValueError(f"items_per_turn {items_per_turn}: must be at least 1")
        self._items_per_turn = items_per_turn
        self._since = 0

    async def step(self, items: int = 1) -> None:
        self._since += items
        if self._since >= self._items_per_turn:
            self._since = 0
            await asyncio.sleep(0)
