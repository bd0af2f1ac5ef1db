"""The arithmetic the benchmarks report with (pure, no I/O): nearest-rank percentiles, rates, a record
size's label and a goal (a measured value judged against its target)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MB = 1_000_000  # the megabyte of every MB/s column: 10^6 bytes
KiB = 1024


def percentile_ms(latencies_s: Sequence[float], percent: float) -> float:
    """Nearest-rank percentile (index round(p/100 * (n - 1)) of the sorted values), in ms; 0 when empty."""
    if not latencies_s:
        return 0.0
    ordered = sorted(latencies_s)
    index = min(len(ordered) - 1, round(percent / 100 * (len(ordered) - 1)))
    return ordered[index] * 1e3


def rate(amount: float, seconds: float) -> float:
    return amount / seconds if seconds > 0 else 0.0


def size_label(record_bytes: int) -> str:
    """``1024`` -> "1 KiB", ``100`` -> "100 B"."""
    return f"{record_bytes // KiB} KiB" if record_bytes % KiB == 0 else f"{record_bytes} B"


@dataclass(frozen=True, slots=True)
class Goal:
    """A measured ``value`` in ``unit`` against its ``target``: ``met`` or missed."""

    name: str
    value: float
    target: float
    unit: str
    met: bool
