"""raftlog.histogram (and the garbage collector's pauses timed into one): a value lands in the first
bucket whose bound is >= it (Prometheus's ``le``), and
threads observing at once lose nothing."""

from __future__ import annotations

import gc
import threading

from raftlog import gc_pauses
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
