"""The consume phase of ``raftlog bench perf`` read by several processes (``--readers N``): raftlog's HTTP
reads, each process its share of the partitions (partition p to process p mod N), as an application that
reads faster than one Python process parses answers runs more of them.

One process reading Confluent v2 JSON read 94,000-103,000 rows of 1 KiB a second on a 2-core machine
(``orjson`` parsing the answer and ``pybase64`` decoding the values, 9-10 µs of CPU a row:
docs/performance.md), below what the nodes serve; librdkafka, the client of the Kafka rows, decodes in
its own threads outside the GIL. The processes are spawned and connected before the phase's clock starts
(a Python start is not a read), read from a common signal, count their records into shared counters for
the progress line, and hand back their records, bytes and CPU seconds, which the report counts as the
client's."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import queue
import time
from collections import Counter
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from typing import Any

from raftlog_bench.cpu import CpuMeter, own_cpu_s
from raftlog_bench.loop import install_event_loop
from raftlog_bench.perf_report import PhaseResult
from raftlog_bench.raftlog_target import RaftlogTarget, ReadSpec
from raftlog_bench.stats import size_label
from raftlog_bench.tally import Tally, phase_result, showing
from raftlog_bench.targets import Layout

READERS_MAX = 16
READY_TIMEOUT_S = 60.0  # a spawned reader imports the bench and connects: seconds, not minutes
RESULT_GRACE_S = 30.0  # after the phase's bound, a reader still finishing its last answer
PROGRESS_S = 0.25


@dataclass(frozen=True, slots=True)
class ReaderShare:
    """What one reader process reads: these partitions, each up to its acknowledged records."""

    spec: ReadSpec
    expected: dict[int, int]  # partition -> records acknowledged in it
    seconds: float


def shares(partitions: int, readers: int) -> list[list[int]]:
    """Partition p to reader p mod ``readers``; readers beyond the partitions get none (and are not
    started)."""
    return [share for share in (list(range(r, partitions, readers)) for r in range(readers)) if share]


def _reader(share: ReaderShare, go: Any, counted: Synchronized[int], results: Any) -> None:
    """A reader process: connect, say so, wait for ``go``, read, hand back (records, bytes, CPU s)."""
    install_event_loop()  # the same loop as the parent's
    try:
        results.put(("done", *asyncio.run(_read(share, go, counted, results))))
    except Exception as exc:  # handed to the parent, which fails the phase with it
        results.put(("failed", f"reader {os.getpid()}: {type(exc).__name__}: {exc}"))
        raise


async def _read(
    share: ReaderShare, go: Any, counted: Synchronized[int], results: Any
) -> tuple[int, int, float]:
    target = await RaftlogTarget.reader(share.spec)
    try:
        results.put(("ready", os.getpid()))
        if not await asyncio.to_thread(go.wait, READY_TIMEOUT_S + share.seconds):
            raise TimeoutError("no start signal from the bench")
        cpu_before = own_cpu_s()
        deadline = time.perf_counter() + share.seconds

        def count(records: int) -> None:
            counted.value += records

        reads = await asyncio.gather(
            *(target.consume(p, records, deadline, count) for p, records in share.expected.items())
        )
        return sum(got for got, _ in reads), sum(nbytes for _, nbytes in reads), own_cpu_s() - cpu_before
    finally:
        await target.close()


async def consume_in_processes(
    target: RaftlogTarget, layout: Layout, acked: Counter[int], seconds: float, pids: dict[str, int],
    readers: int,
) -> PhaseResult:  # fmt: skip
    """The consume phase with ``readers`` processes, every acknowledged record read once."""
    context = multiprocessing.get_context("spawn")
    go = context.Event()
    results = context.Queue()
    spec = target.read_spec()
    parts = shares(layout.partitions, readers)
    counters = [context.Value("q", 0, lock=False) for _ in parts]
    processes = [
        context.Process(
            target=_reader,
            args=(ReaderShare(spec, {p: acked[p] for p in share}, seconds), go, counter, results),
            name=f"bench-reader-{i}",
            daemon=True,
        )
        for i, (share, counter) in enumerate(zip(parts, counters, strict=True))
    ]
    for process in processes:
        process.start()
    try:
        await _gather(results, "ready", len(processes), time.monotonic() + READY_TIMEOUT_S)
        tally = Tally()
        label = (
            f"{target.system} consume {size_label(layout.record_bytes)}, {len(processes)} reader processes"
        )
        meter = CpuMeter(pids)
        start = time.perf_counter()
        go.set()
        async with showing(label, seconds, tally):
            done = asyncio.create_task(
                _gather(results, "done", len(processes), time.monotonic() + seconds + RESULT_GRACE_S)
            )
            while not done.done():
                tally.records = sum(int(counter.value) for counter in counters)
                await asyncio.wait({done}, timeout=PROGRESS_S)
            answers = done.result()
        elapsed = time.perf_counter() - start
        readers_cpu_s = sum(float(answer[3]) for answer in answers)
        cpu = meter.stop(children_s=readers_cpu_s)
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
            process.join(5)
    tally.records = sum(int(answer[1]) for answer in answers)
    nbytes = sum(int(answer[2]) for answer in answers)
    expected = sum(acked.values())
    if tally.records < expected:
        tally.errors[f"read {tally.records} of {expected}"] += 1
    return phase_result(
        target.system, "consume", layout, layout.partitions, tally, expected, elapsed, nbytes, cpu
    )


async def _gather(results: Any, kind: str, count: int, deadline: float) -> list[tuple[Any, ...]]:
    """``count`` messages of ``kind`` from the readers before ``deadline``; a reader's failure, or none
    in time, raises (the processes are stopped by the caller)."""
    got: list[tuple[Any, ...]] = []
    while len(got) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{count - len(got)} of {count} reader processes did not report {kind!r}")
        try:
            message = await asyncio.to_thread(results.get, True, min(left, 1.0))
        except queue.Empty:
            continue
        if message[0] == "failed":
            raise RuntimeError(message[1])
        if message[0] == kind:
            got.append(message)
    return got
