"""JSON bodies worked off the event loop: a body larger than ``INLINE_BYTES_MAX`` is parsed, checked and
(a produce) encoded in the node's JSON worker process, never on the event loop, and comes back small: a
produce's batches, or a document of at most ``schemas.JSON_VALUES_MAX`` values.

Python's JSON parser holds the interpreter for the whole of a parse (about 2 s for 16 MiB of ``[0,0,...]``
on a loaded core), so a thread would not free the event loop: a process does. One process per node
(``WORKERS``), started at the first large body, and at most ``IN_FLIGHT_MAX`` bodies given to it at once;
later ones wait their turn, their connections still bounded by the door's (``api.http_limits``). A body
up to ``INLINE_BYTES_MAX`` is worked where it arrived: the hop to the process would cost more. (A produce
body up to ``api.produce_encoding.FAST_INLINE_BYTES_MAX`` is parsed with orjson on the event loop before it
gets here, since orjson's parse is that much faster.)
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from api.errors import Overloaded

INLINE_BYTES_MAX = 64 * 1024  # a body up to this is parsed on the event loop (~10 ms at worst)
WORKERS = 1  # processes parsing large JSON bodies, per node
IN_FLIGHT_MAX = 2  # large bodies given to the workers at once, per node (others wait)

T = TypeVar("T")


class JsonWork:
    """The node's JSON worker process, started when first needed; ``run(work, body, ...)`` calls
    ``work`` (a module-level function: it is sent to the process by name) on ``body``."""

    def __init__(self, workers: int = WORKERS, in_flight_max: int = IN_FLIGHT_MAX) -> None:
        if workers < 1 or in_flight_max < 1:
            raise ValueError(f"workers {workers}, in_flight_max {in_flight_max}: each must be at least 1")
        self._workers = workers
        self._in_flight = asyncio.Semaphore(in_flight_max)
        self._pool: ProcessPoolExecutor | None = None

    async def run(self, work: Callable[..., T], body: bytes, *args: Any) -> T:
        if len(body) <= INLINE_BYTES_MAX:
            return work(body, *args)
        async with self._in_flight:
            if self._pool is None:
                # spawned, not forked: the node runs threads (Raft, readers) a fork would copy mid-step
                context = multiprocessing.get_context("spawn")
                self._pool = ProcessPoolExecutor(self._workers, mp_context=context)
            pool = self._pool
            try:
                return await asyncio.get_running_loop().run_in_executor(pool, work, body, *args)
            except BrokenProcessPool:
                if self._pool is pool:  # the process died (killed, out of memory): a new one next time
                    self._pool = None
                    pool.shutdown(wait=False, cancel_futures=True)
                raise Overloaded("JSON body (its worker process ended)", self._workers) from None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
