"""How late this process's event loop runs what is due: a watcher sleeps ``INTERVAL_S`` again and again
and observes how much later than asked it woke. A callback that holds the loop (a long parse, a blocking
call) shows as lag, and so does a process that waits for a CPU; the HTTP edge exports the histogram as
``raftlog_event_loop_lag_seconds``."""

from __future__ import annotations

import asyncio
import time

from raftlog.histogram import Histogram

INTERVAL_S = 0.05  # 20 wakeups a second: lag of a few ms and up is seen, at no cost worth counting
LAG_SECONDS = Histogram()


async def watch(interval_s: float = INTERVAL_S) -> None:
    """Observe the loop's lateness until cancelled."""
    while True:
        asked = time.perf_counter() + interval_s
        await asyncio.sleep(interval_s)
        LAG_SECONDS.observe(max(0.0, time.perf_counter() - asked))
