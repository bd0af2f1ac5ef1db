"""raftlog.histogram (and the garbage collector's pauses timed into one): a value lands in the first
bucket whose bound is >= it (Prometheus's ``le``), and
threads observing at once lose nothing."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable

from waiting import wait_until

from raftlog import gc_pauses, loop_lag
from raftlog.histogram import Histogram


def test_buckets_are_less_or_equal_and_the_last_is_above_every_bound() -> None:
    histogram = Histogram((0.001, 0.01))
    for value in (0.0005, 0.001, 0.002, 0.01, 5.0):
        histogram.observe(value)
    snapshot = histogram.snapshot()
    assert snapshot.counts == (2, 2, 1) and snapshot.count == 5
    assert abs(snapshot.sum - 5.0135) < 1e-9


def test_threads_observing_at_once_lose_nothing() -> None:
    histogram = Histogram()
    workers = [
        threading.Thread(target=lambda: [histogram.observe(0.002) for _ in range(20_000)]) for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert histogram.snapshot().count == 80_000


def test_every_garbage_collection_is_timed_once_watched() -> None:
    gc_pauses.watch()
    gc_pauses.watch()  # idempotent: one callback, one observation per collection
    before = gc_pauses.PAUSE_SECONDS.snapshot()
    gc.collect()
    gc.collect(0)
    after = gc_pauses.PAUSE_SECONDS.snapshot()
    assert after.count - before.count >= 2  # ours, and any a thread of this process set off meanwhile
    assert gc.callbacks.count(gc_pauses._on_collection) == 1
    assert after.sum > before.sum


def test_a_callback_holding_the_event_loop_shows_as_its_lag() -> None:
    async def scenario() -> None:
        started = loop_lag.LAG_SECONDS.snapshot().count
        watcher = asyncio.ensure_future(loop_lag.watch(interval_s=0.01))

        async def watching() -> bool:
            return loop_lag.LAG_SECONDS.snapshot().count > started

        await wait_until(watching, "the watcher's first observation", every_s=0.01)  # now it sleeps again
        before = loop_lag.LAG_SECONDS.snapshot()
        time.sleep(0.08)  # a callback that blocks the loop
        deadline = time.monotonic() + 30
        while loop_lag.LAG_SECONDS.snapshot().count == before.count and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        watcher.cancel()
        after = loop_lag.LAG_SECONDS.snapshot()
        # the first observation after the block is at least as late as the block's rest (>= 0.05 s)
        above = [a - b for a, b in zip(after.counts, before.counts, strict=True)]
        slow_from = after.bounds.index(0.05) + 1  # buckets past 50 ms
        assert sum(above[slow_from:]) >= 1

    asyncio.run(scenario())


def test_a_callback_computing_shows_as_held_cpu_and_one_blocked_does_not() -> None:
    async def observed_after(hold: Callable[[], None]) -> tuple[int, int]:
        """Held CPU observations past 50 ms, and lag observations past 50 ms, after ``hold`` ran."""
        watcher = asyncio.ensure_future(loop_lag.watch(interval_s=0.01))
        started = loop_lag.LAG_SECONDS.snapshot().count

        async def watching() -> bool:
            return loop_lag.LAG_SECONDS.snapshot().count > started

        await wait_until(watching, "the watcher's first observation", every_s=0.01)
        lag, held = loop_lag.LAG_SECONDS.snapshot(), loop_lag.HELD_CPU_SECONDS.snapshot()
        hold()
        deadline = time.monotonic() + 30
        while loop_lag.LAG_SECONDS.snapshot().count == lag.count and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        watcher.cancel()
        slow_from = lag.bounds.index(0.05) + 1
        lag_after, held_after = loop_lag.LAG_SECONDS.snapshot(), loop_lag.HELD_CPU_SECONDS.snapshot()
        late = sum(a - b for a, b in zip(lag_after.counts[slow_from:], lag.counts[slow_from:], strict=True))
        spent = sum(
            a - b for a, b in zip(held_after.counts[slow_from:], held.counts[slow_from:], strict=True)
        )
        return spent, late

    def compute() -> None:  # a callback computing for 0.3 s of CPU (whatever the wall time it takes)
        cpu_until = time.process_time() + 0.3
        while time.process_time() < cpu_until:
            pass

    assert asyncio.run(observed_after(compute)) == (1, 1)
    # blocked, not computing: late, but no CPU held (as a process waiting for a CPU on a loaded machine)
    assert asyncio.run(observed_after(lambda: time.sleep(0.3))) == (0, 1)
