"""What a phase of ``raftlog bench perf`` counts while it runs (``Tally``: records, latencies, errors), the
progress line it shows meanwhile on stderr, and the ``PhaseResult`` the count becomes with the CPU the
phase used. Shared by the ordinary phases (``perf_phases.py``) and the transactions phases
(``perf_transactions.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from raftlog_bench.cluster_report import LatencySummary
from raftlog_bench.cpu import CpuUse
from raftlog_bench.perf_report import PhaseResult, cpu_percentages
from raftlog_bench.stats import MB, rate
from raftlog_bench.targets import Layout


@dataclass(slots=True)
class Tally:
    """What a phase counted so far (written by its load loop, read by its progress line)."""

    records: int = 0
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    per_partition: Counter[int] = field(default_factory=Counter)
    by_second: dict[int, list[float]] = field(default_factory=dict)  # single: latencies by scheduled second


def progress_line(label: str, elapsed_s: float, seconds: float, tally: Tally, width: int = 20) -> str:
    done = min(1.0, elapsed_s / seconds) if seconds > 0 else 1.0
    bar = "#" * round(done * width) + "-" * (width - round(done * width))
    recent = tally.latencies[-2000:]
    p99 = LatencySummary.of(recent).p99_ms if recent else 0.0
    return (
        f"{label} [{bar}] {min(elapsed_s, seconds):5.1f}/{seconds:g} s {tally.records:>10,} records"
        f" {rate(tally.records, elapsed_s):>10,.0f}/s p99 {p99:7.2f} ms errors {sum(tally.errors.values())}"
    )


async def show_progress(label: str, seconds: float, tally: Tally, stop: asyncio.Event) -> None:
    """A progress bar on a terminal (redrawn twice a second), else a line every 5 s, on stderr."""
    tty = sys.stderr.isatty()
    start = time.perf_counter()
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5 if tty else 5.0)
        line = progress_line(label, time.perf_counter() - start, seconds, tally)
        if tty:
            print("\r" + line, end="", file=sys.stderr, flush=True)
        elif not stop.is_set():
            print(line, file=sys.stderr, flush=True)
    line = progress_line(label, time.perf_counter() - start, seconds, tally)
    print(("\r" if tty else "") + line, file=sys.stderr, flush=True)


@contextlib.asynccontextmanager
async def showing(label: str, seconds: float, tally: Tally) -> AsyncIterator[None]:
    """``show_progress`` of ``tally`` while the block runs."""
    stop = asyncio.Event()
    shown = asyncio.create_task(show_progress(label, seconds, tally, stop))
    try:
        yield
    finally:
        stop.set()
        await shown


def phase_result(
    system: str, phase: str, layout: Layout, concurrency: int, tally: Tally, expected: int,
    seconds: float, nbytes: float, cpu: CpuUse,
) -> PhaseResult:  # fmt: skip
    """What ``tally`` counted over ``seconds``, with ``nbytes`` of payload, as the report's row."""
    servers, client, other = cpu_percentages(cpu)
    return PhaseResult(
        system=system,
        phase=phase,
        record_bytes=layout.record_bytes,
        batch_records=layout.batch_records,
        partitions=layout.partitions,
        concurrency=concurrency,
        records=tally.records,
        expected=expected,
        seconds=seconds,
        records_per_s=rate(tally.records, seconds),
        mb_per_s=rate(nbytes / MB, seconds),
        latency=LatencySummary.of(tally.latencies),
        errors=dict(tally.errors),
        server_cpu_pct=servers,
        client_cpu_pct=client,
        other_cpu_pct=other,
        p99_per_second_ms=tuple(
            LatencySummary.of(tally.by_second[second]).p99_ms for second in sorted(tally.by_second)
        ),
        server_rss_mib=dict(cpu.rss_mib),
    )
