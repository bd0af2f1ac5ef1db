"""How late this process's event loop runs what is due: a watcher sleeps ``INTERVAL_S`` again and again
and observes how much later than asked it woke. A callback that holds the loop (a long parse, a blocking
call) shows as lag, and so does a process that waits for a CPU; the HTTP edge exports the histogram as
``raftlog_event_loop_lag_seconds``.

``HELD_CPU_SECONDS`` (``raftlog_event_loop_held_cpu_seconds``) is the part of each lateness the process
spent on a CPU, any of its threads (a callback computing, a garbage collection, a thread holding the GIL):
what the node's own code held the loop for. Waiting for a CPU adds nothing to it, so a loaded machine
cannot move it, where it stretches the lag (a 0.2 s slice is 2 s of lag at ten runnable processes a
core); a lag spent blocked (a sleep, a disk wait on the loop) shows in the lag only."""

from __future__ import annotations

import asyncio
import time

from raftlog.histogram import Histogram

INTERVAL_S = 0.05  # 20 wakeups a second: lag of a few ms and up is seen, at no cost worth counting
LAG_SECONDS = Histogram()
HELD_CPU_SECONDS = Histogram()


async def watch(interval_s: float = INTERVAL_S) -> None:
    """Observe the loop's lateness, and the CPU the process spent in it, until cancelled."""
    while True:
        asked = time.perf_counter() + interval_s
        cpu_before = time.process_time()
        await asyncio.sleep(interval_s)
        late = max(0.0, time.perf_counter() - asked)
        LAG_SECONDS.observe(late)
        # the process's CPU past what the sleep itself may hold, and never more than the lateness (two
        # threads on two cores spend CPU twice as fast as the clock runs)
        HELD_CPU_SECONDS.observe(min(late, max(0.0, time.process_time() - cpu_before - interval_s)))
