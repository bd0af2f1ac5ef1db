"""The arithmetic the benchmarks report with (pure, no I/O): nearest-rank percentiles and rates."""

from __future__ import annotations

from collections.abc import Sequence

MB = 1_000_000  # the megabyte of every MB/s column: 10^6 bytes


def percentile_ms(latencies_s: Sequence[float], percent: float) -> float:
    """Nearest-rank percentile (index round(p/100 * (n - 1)) of the sorted values), in ms; 0 when empty."""
    if not latencies_s:
        return 0.0
    ordered = sorted(latencies_s)
    index = min(len(ordered) - 1, round(percent / 100 * (len(ordered) - 1)))
    return ordered[index] * 1e3


def rate(amount: float, seconds: float) -> float:
    return amount / seconds if seconds > 0 else 0.0
