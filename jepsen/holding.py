"""Keeping the workers writing while the nemesis waits: for a heal that restarts nodes, for the nodes to
report ready, for the cluster to acknowledge a write again, for a span without faults. Each moves the
workers' ``Deadline`` a second ahead as long as it waits, so a loaded machine makes the run longer, never
the measured recovery shorter (``jepsen.nemesis``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from jepsen.workload import Deadline

POLL_S = 0.1  # how often the deadline is moved on and the condition asked


async def hold(stop: asyncio.Event, deadline: Deadline | None, done: Callable[[], bool]) -> bool:
    """Wait until ``done()``, keeping ``deadline`` a second ahead meanwhile so the workers write on; True
    when ``stop`` was set first."""
    loop = asyncio.get_running_loop()
    while not done():
        if stop.is_set():
            return True
        if deadline is not None:
            deadline.extend(loop.time() + 1.0)
        await asyncio.sleep(POLL_S)
    return stop.is_set()


async def keep_ahead(deadline: Deadline | None, work: Awaitable[None]) -> None:
    """Run ``work`` (a heal) keeping ``deadline`` a second ahead meanwhile: restarting nodes takes seconds
    on a loaded machine, and workers stopped by a deadline that passed during the heal would end the run
    before the nodes it brought back were ready (no recovery measured, no span without faults)."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            if deadline is not None:
                deadline.extend(loop.time() + 1.0)
            await asyncio.wait({task}, timeout=POLL_S)
    finally:  # cancelled meanwhile: the heal with it, as when it was awaited directly
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    await task
