"""A latency histogram any thread may observe into (pure: no I/O, no exporter); the HTTP edge turns a
``snapshot`` into a Prometheus histogram family. Cheap on the hot path: a bisect and three additions
under a lock held for nothing else."""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

# Fine below 10 ms, where fsyncs and commits on a quiet disk land, coarse above
LATENCY_BUCKETS_S = (
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    bounds: tuple[float, ...]  # upper bounds, without +Inf
    counts: tuple[int, ...]  # per bucket (not cumulative), one more than bounds: the last is +Inf's
    sum: float

    @property
    def count(self) -> int:
        return sum(self.counts)


class Histogram:
    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS_S) -> None:
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        index = bisect.bisect_left(self._bounds, value)
        with self._lock:
            self._counts[index] += 1
            self._sum += value

    def snapshot(self) -> HistogramSnapshot:
        with self._lock:
            return HistogramSnapshot(self._bounds, tuple(self._counts), self._sum)
