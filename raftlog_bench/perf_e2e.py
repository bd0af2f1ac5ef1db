"""The end-to-end phase of ``raftlog bench perf``: one producer sends single records on a fixed timetable
(``--e2e-rate`` a second, linger 0, acks=all) and one consumer in the same process reads them; a record's
latency runs from its send (its scheduled time, or the send if that was earlier, as the single-record
phase counts) to the consumer's poll returning it: Kafka's ``EndToEndLatency`` tool on a timetable, what
an application waiting on a record's effect sees. Kafka clients only (``--client kafka``, and so with
``--compare kafka``): the consumer is confluent-kafka's with its defaults for the wait (``fetch.wait.max.ms``
500, ``fetch.min.bytes`` 1), on a thread of its own (``KafkaTarget.follow``); the records carry their slot
as their key."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from raftlog_bench.cluster import send_on_timetable, slot_time
from raftlog_bench.cpu import CpuMeter
from raftlog_bench.perf_report import PhaseResult
from raftlog_bench.stats import size_label
from raftlog_bench.tally import Tally, phase_result, showing
from raftlog_bench.targets import Layout, SendFailed

E2E_IN_FLIGHT_MAX = 64
TIMER_SLACK_S = 0.001  # as the single-record phase: a send leaves up to this long before its slot
FIRST_RECORD_S = 30.0  # a first record (not counted) must reach the consumer within this: it is reading
DRAIN_S = 10.0  # after the last send, records not received within this count as lost


@runtime_checkable
class Follows(Protocol):
    """A target whose records can be followed as they come (``kafka_target.KafkaTarget``)."""

    system: str

    async def send_one(self, worker: int, partition: int, key: bytes | None = None) -> None: ...

    def follow(self, partition: int, received: Callable[[bytes, float], None]) -> Callable[[], None]: ...


async def e2e_phase(
    target: Follows, layout: Layout, per_s: float, seconds: float, pids: dict[str, int]
) -> PhaseResult:
    """Open loop of ``per_s`` single records to partition 0 for ``seconds``, read back by one consumer
    that was reading the partition before the first (a record sent and received first, not counted)."""
    send_one = target.send_one
    received: dict[int, float] = {}  # slot -> perf_counter when polled (the consumer's thread writes)
    stop = target.follow(0, lambda key, at: received.__setitem__(int(key), at))
    tally = Tally()
    total = max(1, round(per_s * seconds))
    try:
        await send_one(0, 0, b"-1")  # its consumer reads: the first record came back
        deadline = time.perf_counter() + FIRST_RECORD_S
        while -1 not in received and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
        places = asyncio.Semaphore(E2E_IN_FLIGHT_MAX)
        origins: dict[int, float] = {}
        tasks: set[asyncio.Task[None]] = set()

        async def one(slot: int, due: float) -> None:
            origins[slot] = min(due, time.perf_counter())
            try:
                await send_one(slot, 0, str(slot).encode())
            except SendFailed as exc:
                tally.errors[exc.key] += 1
                origins.pop(slot, None)
            finally:
                places.release()

        meter = CpuMeter(pids)
        start = time.perf_counter() + 0.01
        async with showing(f"{target.system} e2e {size_label(layout.record_bytes)}", seconds, tally):
            await send_on_timetable(
                start, per_s, total, TIMER_SLACK_S, places, one, tasks,
                lambda: _count(tally, origins, received, per_s),
            )  # fmt: skip
            if tasks:
                await asyncio.wait(set(tasks), timeout=DRAIN_S + 30)
            drained = time.perf_counter() + DRAIN_S
            while any(slot not in received for slot in origins) and time.perf_counter() < drained:
                await asyncio.sleep(0.01)
            _count(tally, origins, received, per_s)
        elapsed = max(time.perf_counter(), slot_time(start, total, per_s)) - start
        cpu = meter.stop()
    finally:
        await asyncio.to_thread(stop)
    _count(tally, origins, received, per_s)
    if origins:  # acknowledged or not, never received
        tally.errors[f"not received within {DRAIN_S:g} s"] += len(origins)
    return phase_result(
        target.system, "e2e", layout, 1, tally, total, elapsed,
        tally.records * layout.record_bytes, cpu,
    )  # fmt: skip


def _count(tally: Tally, origins: dict[int, float], received: dict[int, float], per_s: float) -> None:
    """Into ``tally``, the latency of each record received since the last count (taken out of
    ``origins``, what is left there is still on its way)."""
    for slot in [slot for slot in origins if slot in received]:
        latency = received[slot] - origins.pop(slot)
        tally.latencies.append(latency)
        tally.by_second.setdefault(int(slot / per_s), []).append(latency)
        tally.records += 1
