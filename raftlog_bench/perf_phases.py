"""The load loops of ``raftlog bench perf``, each against a ``Target`` (raftlog, NATS JetStream, RabbitMQ
streams or Apache Kafka alike): produce (a closed loop of batches), consume (one reader per partition),
consumer groups (Kafka clients), single records (an open loop on a timetable), the slow waits raftlog's
nodes count over the single-record phase, and ``drive``, which runs them in order on fresh partitions,
ending with the end-to-end phase of Kafka clients (``perf_e2e.py``).
Starting and stopping the systems they run against is ``perf_systems.py``'s."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace

from prometheus_client.parser import text_string_to_metric_families

from raftlog_bench.cluster import send_on_timetable, slot_time
from raftlog_bench.cpu import CpuMeter, named_threads_cpu_s, wait_quiet
from raftlog_bench.perf_e2e import Follows, e2e_phase
from raftlog_bench.perf_report import SLOW_WAIT_S, PhaseResult, Workload
from raftlog_bench.raftlog_target import RaftlogTarget
from raftlog_bench.readers import consume_in_processes
from raftlog_bench.stats import size_label
from raftlog_bench.tally import Tally, phase_result, showing
from raftlog_bench.targets import Layout, SendFailed, Target
from raftlog_client.errors import ClientError
from raftlog_contract import METRICS_PATH

SINGLE_IN_FLIGHT_MAX = 64
TIMER_SLACK_S = 0.001  # single-record requests leave up to this long before their slot (timer resolution)
ERROR_BACKOFF_S = 0.02
DRAIN_TIMEOUT_S = 35.0


async def quiet(workload: Workload) -> None:
    """Before a phase, with ``--wait-quiet``: until the other processes of the machine calm down."""
    if workload.wait_quiet_s > 0:
        await asyncio.to_thread(wait_quiet, workload.wait_quiet_s)


async def produce_phase(
    target: Target, layout: Layout, concurrency: int, seconds: float, pids: dict[str, int]
) -> tuple[PhaseResult, Counter[int]]:
    """Closed loop: ``concurrency`` workers, each one batch at a time until ``seconds`` ran out."""
    tally = Tally()
    meter = CpuMeter(pids)
    start = time.perf_counter()
    deadline = start + seconds

    async def worker(j: int) -> None:
        partition = j % layout.partitions
        while time.perf_counter() < deadline:
            before = time.perf_counter()
            try:
                async with asyncio.timeout(DRAIN_TIMEOUT_S):  # no task per request, unlike wait_for
                    acked = await target.send_batch(j, partition)
            except SendFailed as exc:
                tally.errors[exc.key] += 1
                await asyncio.sleep(ERROR_BACKOFF_S)
            except TimeoutError:
                tally.errors[f"timeout > {DRAIN_TIMEOUT_S:g} s"] += 1
            else:
                tally.latencies.append(time.perf_counter() - before)
                tally.records += acked
                tally.per_partition[partition] += acked
            partition = (partition + 1) % layout.partitions

    label = f"{target.system} produce {size_label(layout.record_bytes)} x {layout.batch_records}"
    async with showing(label, seconds, tally):
        await asyncio.gather(*(worker(j) for j in range(concurrency)))
    elapsed = time.perf_counter() - start
    cpu = meter.stop()
    result = phase_result(
        target.system, "produce", layout, concurrency, tally, 0, elapsed,
        tally.records * layout.record_bytes, cpu,
    )  # fmt: skip
    return result, tally.per_partition


async def consume_phase(
    target: Target,
    layout: Layout,
    acked: Counter[int],
    seconds: float,
    pids: dict[str, int],
    readers: int = 1,
) -> PhaseResult:
    """One reader per partition from its first record until every acknowledged record was read; with
    ``readers`` > 1 (raftlog over HTTP) in that many processes (``readers.py``)."""
    if readers > 1:
        if not isinstance(target, RaftlogTarget):
            raise ValueError(f"reader processes read raftlog over HTTP, not {target.system}")
        return await consume_in_processes(target, layout, acked, seconds, pids, readers)
    tally = Tally()
    meter = CpuMeter(pids)
    start = time.perf_counter()
    deadline = start + seconds
    nbytes = 0

    async def reader(partition: int) -> None:
        nonlocal nbytes
        got, read_bytes = await target.consume(partition, acked[partition], deadline)
        tally.records += got
        nbytes += read_bytes

    async with showing(f"{target.system} consume {size_label(layout.record_bytes)}", seconds, tally):
        await asyncio.gather(*(reader(p) for p in range(layout.partitions)))
    elapsed = time.perf_counter() - start
    cpu = meter.stop()
    expected = sum(acked.values())
    if tally.records < expected:
        tally.errors[f"read {tally.records} of {expected}"] += 1
    return phase_result(
        target.system, "consume", layout, layout.partitions, tally, expected, elapsed, nbytes, cpu
    )


GROUP_SIZES = (1, 3)  # a consumer group of one member, then of three, on the same records
# new groups per size, the median kept: whether members starting together share the first generation
# depends on when each one's join reaches the coordinator (on Kafka too), and a late join moves
# partitions, read again from their start by their new owners, so one read alone is luck
GROUP_TRIES = 3


async def group_phase(
    target: Target, layout: Layout, acked: Counter[int], members: int, seconds: float, pids: dict[str, int]
) -> PhaseResult:
    """GROUP_TRIES new consumer groups of ``members`` each read every acknowledged record (Kafka clients
    only); the median read is the result, every read's rate is kept beside it."""
    tries = []
    for attempt in range(GROUP_TRIES):
        tries.append(await _group_read(target, layout, acked, members, seconds, pids, attempt))
    median = sorted(tries, key=lambda result: result.records_per_s)[len(tries) // 2]
    return replace(median, tries_per_s=tuple(result.records_per_s for result in tries))


async def _group_read(
    target: Target, layout: Layout, acked: Counter[int], members: int, seconds: float,
    pids: dict[str, int], attempt: int,
) -> PhaseResult:  # fmt: skip
    tally = Tally()
    meter = CpuMeter(pids)
    start = time.perf_counter()
    expected = sum(acked.values())
    label = (
        f"{target.system} group of {members} {size_label(layout.record_bytes)} ({attempt + 1}/{GROUP_TRIES})"
    )
    async with showing(label, seconds, tally):

        def progress(records: int) -> None:  # from the members' threads: one int, read by the progress line
            tally.records = records

        got, nbytes = await target.consume_group(members, expected, start + seconds, progress)  # type: ignore[attr-defined]
    tally.records = got
    elapsed = time.perf_counter() - start
    if got < expected:
        tally.errors[f"read {got} of {expected}"] += 1
    return phase_result(
        target.system, f"group{members}", layout, members, tally, expected, elapsed, nbytes, meter.stop()
    )


async def single_phase(
    target: Target, layout: Layout, per_s: float, seconds: float, pids: dict[str, int]
) -> PhaseResult:
    """Open loop: request k is due at k / per_s and goes to node k mod 3, partition k mod p; at most
    SINGLE_IN_FLIGHT_MAX in flight. Latency counts from the scheduled time, or from the send if that
    was earlier: the event loop's timers fire up to ~1.5 ms late (millisecond resolution), which counted
    as the server's latency, so a request is released up to TIMER_SLACK_S before its slot instead."""
    total = max(1, round(per_s * seconds))
    tally = Tally()
    places = asyncio.Semaphore(SINGLE_IN_FLIGHT_MAX)
    tasks: set[asyncio.Task[None]] = set()
    meter = CpuMeter(pids)

    async def one(slot: int, due: float) -> None:
        origin = min(due, time.perf_counter())  # released early: from the send; late: from the slot
        try:
            async with asyncio.timeout(DRAIN_TIMEOUT_S):  # no task per request, unlike wait_for
                await target.send_one(slot, slot % layout.partitions)
        except SendFailed as exc:
            tally.errors[exc.key] += 1
        except TimeoutError:
            tally.errors[f"timeout > {DRAIN_TIMEOUT_S:g} s"] += 1
        else:
            latency = time.perf_counter() - origin
            tally.latencies.append(latency)
            tally.by_second.setdefault(int(slot / per_s), []).append(latency)
            tally.records += 1
        finally:
            places.release()

    start = time.perf_counter() + 0.01
    spin = _LibrdkafkaSeconds(start)
    async with showing(f"{target.system} single {size_label(layout.record_bytes)}", seconds, tally):
        try:
            await send_on_timetable(start, per_s, total, TIMER_SLACK_S, places, one, tasks, spin.sample_now)
            if tasks:
                await asyncio.wait(set(tasks), timeout=DRAIN_TIMEOUT_S + 5)
        finally:
            for task in tasks:
                task.cancel()
    elapsed = max(time.perf_counter(), slot_time(start, total, per_s)) - start
    cpu = meter.stop()
    result = phase_result(
        target.system, "single", layout, SINGLE_IN_FLIGHT_MAX, tally, total, elapsed,
        tally.records * layout.record_bytes, cpu,
    )  # fmt: skip
    return replace(result, client_librdkafka_pct_per_second=tuple(spin.per_second))


class _LibrdkafkaSeconds:
    """The CPU of this process's librdkafka threads in each second of a timetable (100 = one core),
    sampled at the first send of each second: none without a confluent-kafka client."""

    def __init__(self, start: float) -> None:
        self._start = start
        self._second = 0
        self._cpu = named_threads_cpu_s("rdk:")
        self._at = start
        self.per_second: list[float] = []

    def sample_now(self) -> None:
        self.sample(time.perf_counter())

    def sample(self, now: float) -> None:
        if now - self._start < self._second + 1:
            return
        cpu = named_threads_cpu_s("rdk:")
        self.per_second.append(round(100 * (cpu - self._cpu) / max(now - self._at, 1e-3), 1))
        self._cpu, self._at = cpu, now
        self._second = int(now - self._start)


# histograms of raftlog's /metrics whose slow tail a phase reports: family -> what the report calls it
SLOW_WAIT_FAMILIES = {
    "raftlog_journal_sync_seconds": "journal fsyncs",
    "raftlog_gc_pause_seconds": "GC pauses",
    "raftlog_event_loop_lag_seconds": "event-loop delays",
    "raftlog_raft_driver_round_seconds": "Raft driver rounds",
}
SlowWaitProbe = Callable[[], Awaitable[Counter[str]]]


def slow_wait_probe(target: RaftlogTarget) -> SlowWaitProbe:
    """Counts, over every node, of the journal fsyncs and garbage collections that took longer than
    SLOW_WAIT_S so far (from each node's /metrics, through the connected target's session); a node that
    does not answer counts nothing."""

    async def probe() -> Counter[str]:
        counts: Counter[str] = Counter()
        for url in target.servers:
            try:
                answer = await target.http.session.exchange("GET", url + METRICS_PATH, timeout_s=2)
            except ClientError:
                continue
            if answer.status == 200:
                counts.update(slow_counts(answer.body.decode("utf-8", "replace")))
        return counts

    return probe


def slow_counts(text: str) -> Counter[str]:
    """From Prometheus text: per SLOW_WAIT_FAMILIES histogram, its observations above SLOW_WAIT_S."""
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        what = SLOW_WAIT_FAMILIES.get(family.name)
        if what is None:
            continue
        buckets = {s.labels.get("le"): s.value for s in family.samples if s.name.endswith("_bucket")}
        within = buckets.get(repr(SLOW_WAIT_S)) or buckets.get(str(SLOW_WAIT_S), 0.0)
        counts[what] += int(buckets.get("+Inf", 0.0) - within)
    return counts


async def drive(
    target: Target, workload: Workload, pids: dict[str, int], prefix: str, probe: SlowWaitProbe | None = None
) -> list[PhaseResult]:
    """Every phase of ``workload`` against one system, each on fresh partitions deleted afterwards;
    ``probe`` (raftlog's nodes) counts the slow waits of the single-record phase."""
    results: list[PhaseResult] = []
    await target.connect()
    try:
        for record_bytes in workload.record_sizes:
            layout = Layout(
                f"{prefix}_{record_bytes}", workload.partitions, record_bytes, workload.batch_records
            )
            await target.create(layout)
            try:
                await quiet(workload)
                produced, acked = await produce_phase(
                    target, layout, workload.concurrency, workload.seconds, pids
                )
                results.append(produced)
                if workload.consume:
                    await quiet(workload)
                    consumed = await consume_phase(
                        target, layout, acked, workload.consume_seconds, pids, workload.readers
                    )
                    results.append(consumed)
                    for members in GROUP_SIZES if hasattr(target, "consume_group") else ():
                        await quiet(workload)
                        results.append(
                            await group_phase(target, layout, acked, members, workload.consume_seconds, pids)
                        )
            finally:
                await target.delete()
        if workload.single_rate > 0:
            layout = Layout(f"{prefix}_single", workload.partitions, workload.single_record_bytes, 1)
            await target.create(layout)
            try:
                await quiet(workload)
                before = await probe() if probe is not None else None
                single = await single_phase(
                    target, layout, workload.single_rate, workload.single_seconds, pids
                )
                if probe is not None and before is not None:
                    after = await probe()
                    waits = {what: after[what] - before[what] for what in SLOW_WAIT_FAMILIES.values()}
                    single = replace(single, slow_waits=waits)
                results.append(single)
            finally:
                await target.delete()
        if workload.e2e_rate > 0 and isinstance(target, Follows):
            layout = Layout(f"{prefix}_e2e", 1, workload.e2e_record_bytes, 1)
            await target.create(layout)
            try:
                await quiet(workload)
                results.append(
                    await e2e_phase(target, layout, workload.e2e_rate, workload.single_seconds, pids)
                )
            finally:
                await target.delete()
    finally:
        await target.close()
    return results
