"""A background task of a node (the metadata follower, the operator)."""

from __future__ import annotations

import abc
import asyncio
import logging

log = logging.getLogger("raftlog.node")


class Worker(abc.ABC):
    """``start()`` on the node's event loop runs :meth:`_run` as a task; ``await close()`` cancels it."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            (outcome,) = await asyncio.gather(self._task, return_exceptions=True)
            if isinstance(outcome, Exception):  # the task had died before: say so instead of dropping it
                log.error("%s had stopped on an error: %r", type(self).__name__, outcome, exc_info=outcome)

    @abc.abstractmethod
    async def _run(self) -> None:
        """The task's loop; runs until cancelled."""
