"""A background task of a node that talks HTTP to other nodes (the metadata follower, the operator)."""

from __future__ import annotations

import abc
import asyncio
import logging

import aiohttp

log = logging.getLogger("raftlog.node")


class HttpWorker(abc.ABC):
    """``start()`` on the node's event loop runs :meth:`_run` as a task; ``await close()`` cancels it and
    closes the one HTTP session it opened (lazily, on the loop, at first use of :attr:`http`)."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            (outcome,) = await asyncio.gather(self._task, return_exceptions=True)
            if isinstance(outcome, Exception):  # the task had died before: say so instead of dropping it
                log.error("%s had stopped on an error: %r", type(self).__name__, outcome, exc_info=outcome)
        if self._session is not None:
            await self._session.close()

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout_s))
        return self._session

    @abc.abstractmethod
    async def _run(self) -> None:
        """The task's loop; runs until cancelled."""
