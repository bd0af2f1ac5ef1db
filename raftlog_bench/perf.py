"""``raftlog bench perf``: producers and consumers against a cluster, in the manner of
kafka-producer-perf-test and the OpenMessaging benchmark, optionally side by side with Apache Kafka (its
default, and ``kafka-fsync``: ``flush.messages=1``), NATS JetStream and RabbitMQ streams running the same
workload in the same run on the same machine; beside Kafka, raftlog and Kafka are driven by the same
confluent-kafka producer and consumer.

Usage::

    raftlog bench perf [--servers URL,...] [--record-size 100,1024] [--batch-size 1000] [--partitions 3]
                       [--concurrency 8] [--duration 10] [--acks all] [--single-rate 1000]
                       [--compare kafka,kafka-fsync,nats,rabbitmq] [--idle-partitions 100]
                       [--restart-mib 1024]
                       [--json FILE]
    raftlog bench perf --transactions [N] [--compare kafka,kafka-fsync] [--concurrency 8] [--duration 10]

Per system (raftlog first, then each peer of ``--compare``), per record size:

1. produce: a closed loop of ``--concurrency`` batches in flight for ``--duration`` seconds; worker j
   asks node j mod 3 and walks the partitions round-robin from j. A batch is ``--batch-size`` records
   of ``--record-size`` random bytes; it counts when the system acknowledged every record of it (raftlog:
   a majority has it fsynced; NATS: ``sync_interval: always``; RabbitMQ streams: a quorum wrote it, no
   fsync). Latency is per batch, from send to the last acknowledgement;
2. consume: every partition read back from its start until all acknowledged records were read (one
   reader per partition, bounded by ``--consume-seconds``);
3. with Kafka clients, groups: a new consumer group of one member, then of three, reads every
   acknowledged record; each size is read by ``GROUP_TRIES`` new groups and the median one is kept, all
   of them printed (whether members starting together share the first generation is a matter of when
   each join arrives, on Kafka too).

Then single-record produce at ``--single-rate`` requests/s offered on a fixed timetable (open loop:
latency counts from the scheduled time, or from the send where the request left up to 1 ms before it),
``--single-seconds`` long. For raftlog started here, also: the
idle CPU of the nodes holding ``--idle-partitions`` partitions, and the time a node holding a partition
of ``--restart-mib`` MiB takes to serve again after a crash (SIGKILL, restart with the same argv).

``--transactions [N]`` measures instead what Kafka's transactions cost a producer: plain idempotent
rounds of N records (default 100) against the same rounds as transactions, each topic read back at
read_committed, on raftlog and on each Kafka peer through the same confluent-kafka settings
(``perf_transactions.py``); the report adds each system's slowdown and the goal that raftlog's be no
worse than Kafka's.

CPU is read from /proc/PID/stat for each server process, for this process (the load generator) and for
the whole machine; "other" is what other processes used during the phase (the machine is shared: a
noisy neighbour lowers every number). Every loop is bounded by its duration. Numbers, never assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import asdict, replace
from typing import Any, Protocol, TypeVar

from prometheus_client.parser import text_string_to_metric_families

from raftlog_bench.arguments import (
    add_dir_argument,
    add_json_argument,
    add_wait_quiet_argument,
    config_of,
    positive_ints,
    standalone_parser,
)
from raftlog_bench.cluster import parse_servers, slot_time, slots_due
from raftlog_bench.cpu import CpuMeter, named_threads_cpu_s, wait_quiet
from raftlog_bench.output import emit, say
from raftlog_bench.peers import PEERS, NatsCluster, NatsTarget, PeerMissing, RabbitCluster, RabbitTarget
from raftlog_bench.perf_report import (
    SLOW_WAIT_S,
    IdleResult,
    PhaseResult,
    Report,
    RestartResult,
    Workload,
    cpu_percentages,
    format_report,
    goals,
    phase_from_dict,
    workload_from_dict,
)
from raftlog_bench.stats import size_label
from raftlog_bench.tally import Tally, phase_result, showing
from raftlog_bench.targets import (
    COMPRESSIONS,
    FETCH_FORMATS,
    LEADERS_SETTLE_S,
    PRODUCE_FORMATS,
    ROUTES,
    Layout,
    RaftlogTarget,
    SendFailed,
    Target,
)
from raftlog_client.errors import ClientError
from raftlog_client.local_cluster import LocalCluster, alive
from raftlog_client.session import Session
from raftlog_contract import METRICS_PATH, READY_PATH, partitions_path, records_path

KiB = 1024
MiB = 1024 * 1024
T = TypeVar("T")
SYSTEMS = ("raftlog", *PEERS)
ACKS = ("all",)
SINGLE_IN_FLIGHT_MAX = 64
TIMER_SLACK_S = 0.001  # single-record requests leave up to this long before their slot (timer resolution)
ERROR_BACKOFF_S = 0.02
DRAIN_TIMEOUT_S = 35.0
RESTART_TIMEOUT_S = 120.0
RESTART_FILL_TIMEOUT_S = 900.0
IDLE_SETTLE_S = 5.0


# -- load loops ------------------------------------------------------------------------------------------


async def _quiet(workload: Workload) -> None:
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
    target: Target, layout: Layout, acked: Counter[int], seconds: float, pids: dict[str, int]
) -> PhaseResult:
    """One reader per partition from its first record until every acknowledged record was read."""
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
    sent = 0
    spin = _LibrdkafkaSeconds(start)
    async with showing(f"{target.system} single {size_label(layout.record_bytes)}", seconds, tally):
        try:
            while sent < total:
                spin.sample(time.perf_counter())
                due_count = slots_due(time.perf_counter() + TIMER_SLACK_S - start, per_s, total)
                while sent < due_count:
                    await places.acquire()
                    task = asyncio.create_task(one(sent, slot_time(start, sent, per_s)))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    sent += 1
                if sent < total:
                    wake = slot_time(start, sent, per_s) - TIMER_SLACK_S
                    await asyncio.sleep(max(0.0, wake - time.perf_counter()))
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
                await _quiet(workload)
                produced, acked = await produce_phase(
                    target, layout, workload.concurrency, workload.seconds, pids
                )
                results.append(produced)
                if workload.consume:
                    await _quiet(workload)
                    results.append(await consume_phase(target, layout, acked, workload.consume_seconds, pids))
                    for members in GROUP_SIZES if hasattr(target, "consume_group") else ():
                        await _quiet(workload)
                        results.append(
                            await group_phase(target, layout, acked, members, workload.consume_seconds, pids)
                        )
            finally:
                await target.delete()
        if workload.single_rate > 0:
            layout = Layout(f"{prefix}_single", workload.partitions, workload.single_record_bytes, 1)
            await target.create(layout)
            try:
                await _quiet(workload)
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
    finally:
        await target.close()
    return results


# -- raftlog-only phases: idle CPU and restart ----------------------------------------------------------


async def idle_phase(
    target: RaftlogTarget, partitions: int, seconds: float, pids: dict[str, int]
) -> IdleResult:
    name = f"perf_idle_{os.getpid()}"
    created_s = await target.http.create_topic(name, partitions)
    try:
        await asyncio.sleep(IDLE_SETTLE_S)
        meter = CpuMeter(pids)
        await asyncio.sleep(seconds)
        cpu = meter.stop()
    finally:
        await target.http.delete_topic(name)
    servers, _, other = cpu_percentages(cpu)
    return IdleResult(partitions, cpu.seconds, servers, other, created_s)


async def _get_json(session: Session, url: str, **params: Any) -> tuple[int, Any]:
    """One GET, its status and decoded body; (0, None) when it got no answer or no JSON."""
    try:
        answer = await session.exchange("GET", url, params=params, timeout_s=2)
        return answer.status, (json.loads(answer.body) if answer.body else None)
    except (ClientError, ValueError):
        return 0, None


async def restart_phase(
    target: RaftlogTarget, cluster: LocalCluster, mib: int, pids: dict[str, int]
) -> RestartResult:
    """Fill one partition (RF 3) with ``mib`` MiB, SIGKILL its leader's node, start it again with the
    same argv, and time until it is ready and until it answers a fetch of the last record."""
    name = f"perf_restart_{os.getpid()}"
    layout = Layout(name, 1, KiB, 1000)
    await target.create(layout)
    tally = Tally()
    fill_bytes = mib * MiB
    start = time.perf_counter()
    deadline = start + RESTART_FILL_TIMEOUT_S

    async def writer(j: int) -> None:
        while tally.records * KiB < fill_bytes and time.perf_counter() < deadline:
            # Not `tally.records += await ...`: that reads the count before the await and so loses
            # what the other writers added meanwhile.
            try:
                acked = await target.send_batch(j, 0)
            except SendFailed as exc:
                tally.errors[exc.key] += 1
                await asyncio.sleep(ERROR_BACKOFF_S)
            else:
                tally.records += acked

    async with showing(f"restart: filling {mib} MiB", 0.0, tally):
        await asyncio.gather(*(writer(j) for j in range(4)))
    fill_s = time.perf_counter() - start
    session = target.http.session
    status, views = await _get_json(session, target.servers[0] + partitions_path(name))
    leader = views[0].get("leader") if status == 200 and views else None
    node = leader if leader in cluster.pids else sorted(cluster.pids)[0]
    url = cluster.urls[node]
    with open(os.path.join(cluster.directory, "cluster.json"), encoding="utf-8") as f:
        argv = next(n["argv"] for n in json.load(f)["nodes"] if n["id"] == node)
    meter = CpuMeter(dict(pids))  # the restarted node's CPU counts as "other" (it has a new pid)
    last = tally.records - 1
    os.kill(cluster.pids[node], signal.SIGKILL)
    killed_at = time.perf_counter()
    while alive(cluster.pids[node]) and time.perf_counter() - killed_at < 10:
        await asyncio.sleep(0.01)
    with open(os.path.join(cluster.directory, node, "node.log"), "ab") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    cluster.pids[node] = process.pid
    pids[node] = process.pid
    restarted = time.perf_counter()
    ready_s = serving_s = RESTART_TIMEOUT_S
    while time.perf_counter() - restarted < RESTART_TIMEOUT_S:
        status, _ = await _get_json(session, url + READY_PATH)
        if status == 200 and ready_s == RESTART_TIMEOUT_S:
            ready_s = time.perf_counter() - restarted
        if status == 200:
            status, rows = await _get_json(
                session, url + records_path(name, 0), offset=last, max_bytes=4 * KiB
            )
            if status == 200 and rows and rows[0].get("offset") == last:
                serving_s = time.perf_counter() - restarted
                break
        await asyncio.sleep(0.02)
    cpu = meter.stop()
    await target.delete()
    return RestartResult(
        partition_mib=tally.records * KiB / MiB,
        node=node,
        was_leader=node == leader,
        fill_seconds=fill_s,
        ready_seconds=ready_s,
        serving_seconds=serving_s,
        other_cpu_pct=cpu.other_pct,
    )


# -- running systems -------------------------------------------------------------------------------------


def install_event_loop() -> str:
    """uvloop for the load generator when installed (the ``bench`` extra), the same for every system."""
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def run_raftlog(
    workload: Workload, parent: str, servers: list[str] | None, token: str | None, keep: bool,
    idle_partitions: int, idle_seconds: float, restart_mib: int, report: Report,
) -> None:  # fmt: skip
    prefix = f"perf_{os.getpid()}"

    async def against(urls: list[str], pids: dict[str, int], cluster: LocalCluster | None) -> None:
        fetch = workload.fetch_bytes
        formats = (workload.produce_format, workload.fetch_format)
        target = RaftlogTarget(
            urls, token, fetch, workload.route, *formats, settle_s=workload.settle_s,
            compression=workload.compression,
        )  # fmt: skip
        if workload.transaction_records:
            from raftlog_bench.perf_transactions import drive_transactions  # confluent-kafka: only here

            assert cluster is not None  # problem() refuses --transactions with --servers
            report.phases += await drive_transactions(
                target, cluster.bootstrap_servers, "raftlog", workload, pids, prefix
            )
        elif workload.client == "kafka":
            from raftlog_bench.kafka_target import KafkaTarget  # confluent-kafka: only for this client

            assert cluster is not None  # problem() refuses --client kafka with --servers
            # the HTTP target makes and removes the topics (with the --compression codec as their
            # compression.type, the one the Kafka producer uses: stored as sent)
            kafka = KafkaTarget(target, cluster.bootstrap_servers, workload.compression)
            report.phases += await drive(kafka, workload, pids, prefix, slow_wait_probe(target))
        else:
            report.phases += await drive(target, workload, pids, prefix, slow_wait_probe(target))
            report.stored_ratios.update(target.stored_ratios)
        if (idle_partitions > 0 or restart_mib > 0) and pids:
            extra = RaftlogTarget(urls, token, fetch, settle_s=0)  # idle, restart: measured as before
            await extra.connect()
            try:
                if idle_partitions > 0:
                    await _quiet(workload)
                    report.idle = await idle_phase(extra, idle_partitions, idle_seconds, pids)
                    say(f"idle: {report.idle.total_pct:.1f}% of one core for {idle_partitions} partitions")
                if restart_mib > 0 and cluster is not None:
                    await _quiet(workload)
                    report.restart = await restart_phase(extra, cluster, restart_mib, pids)
                    say(f"restart: serving after {report.restart.serving_seconds:.2f} s")
            finally:
                await extra.close()

    if servers is not None:
        run_async(against(servers, {}, None))
        return
    directory = tempfile.mkdtemp(prefix="raftlog-bench-perf-", dir=parent)
    cluster = LocalCluster(directory)
    try:
        cluster.start()
        urls = cluster.servers
        say(f"raftlog: 3 nodes up in {directory}: {', '.join(urls)}")
        run_async(against(urls, dict(cluster.pids), cluster))
    finally:
        cluster.stop()
        if keep:
            say(f"kept raftlog's data and node logs in {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


class PeerCluster(Protocol):
    """What ``NatsCluster``, ``KafkaCluster`` and ``RabbitCluster`` have in common."""

    directory: str

    def start(self) -> None: ...

    def stop(self) -> None: ...


PeerClusterT = TypeVar("PeerClusterT", bound=PeerCluster)


@contextlib.contextmanager
def peer_cluster(parent: str, system: str, make: Callable[[str], PeerClusterT]) -> Iterator[PeerClusterT]:
    """``make``'s cluster in a new directory under ``parent``, started; stopped and removed on leaving."""
    directory = tempfile.mkdtemp(prefix=f"raftlog-bench-{system}-", dir=parent)
    try:
        cluster = make(directory)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run_nats(workload: Workload, parent: str, report: Report) -> None:
    with peer_cluster(parent, "nats", NatsCluster) as cluster:
        say(f"nats: 3 JetStream nodes up: {', '.join(cluster.servers)}")
        report.phases += run_async(
            drive(NatsTarget(cluster.servers), workload, cluster.pids, f"perf{os.getpid()}")
        )


def run_kafka(workload: Workload, parent: str, report: Report, flush_each: bool) -> None:
    """Apache Kafka, driven by the same confluent-kafka producer and consumer settings as raftlog's Kafka
    listeners (``--client kafka``)."""
    from raftlog_bench.kafka_peer import KafkaAdmin, KafkaCluster
    from raftlog_bench.kafka_target import KafkaTarget  # confluent-kafka: only for this peer

    system = "kafka-fsync" if flush_each else "kafka"
    with peer_cluster(
        parent, system, lambda directory: KafkaCluster(directory, flush_each=flush_each)
    ) as cluster:
        say(f"{system}: 3 KRaft brokers up: {cluster.bootstrap_servers}")
        admin = KafkaAdmin(cluster.bootstrap_servers, workload.fetch_bytes)
        prefix = f"perf{os.getpid()}"
        if workload.transaction_records:
            from raftlog_bench.perf_transactions import drive_transactions

            work = drive_transactions(
                admin, cluster.bootstrap_servers, system, workload, cluster.pids, prefix
            )
            report.phases += run_async(work)
            return
        target = KafkaTarget(admin, cluster.bootstrap_servers, system=system)
        report.phases += run_async(drive(target, workload, cluster.pids, prefix))


def run_rabbitmq(workload: Workload, parent: str, report: Report) -> None:
    """RabbitMQ lives in a network namespace; the load runs as a child of this command inside it and
    hands its phases back through a JSON file."""
    with peer_cluster(parent, "rabbitmq", RabbitCluster) as cluster:
        say(f"rabbitmq: 3 stream nodes up in namespace: {', '.join(cluster.servers)}")
        handoff = os.path.join(cluster.directory, "load.json")
        with open(handoff, "w", encoding="utf-8") as f:
            json.dump({"workload": asdict(workload), "servers": cluster.servers, "pids": cluster.pids}, f)
        argv = [sys.executable, "-m", "raftlog_bench.perf", "--load-child", handoff]
        done = subprocess.run(cluster.load_argv(argv), check=False, timeout=_child_timeout(workload))
        if done.returncode != 0:
            raise RuntimeError(f"the RabbitMQ load exited with {done.returncode}")
        with open(handoff + ".out", encoding="utf-8") as f:
            report.phases += [phase_from_dict(p) for p in json.load(f)]


def _child_timeout(workload: Workload) -> float:
    per_size = workload.seconds + workload.consume_seconds + 2 * DRAIN_TIMEOUT_S + 30
    return len(workload.record_sizes) * per_size + workload.single_seconds + DRAIN_TIMEOUT_S + 60


def load_child(handoff: str) -> int:
    """Inside RabbitMQ's namespace: drive the workload, write the phases to ``handoff + ".out"``."""
    with open(handoff, encoding="utf-8") as f:
        job = json.load(f)
    install_event_loop()
    workload = workload_from_dict(job["workload"])
    target = RabbitTarget(list(job["servers"]))
    pids = {str(k): int(v) for k, v in job["pids"].items()}
    _stop_on_signals()
    phases = run_async(drive(target, workload, pids, f"perf{os.getpid()}"))
    with open(handoff + ".out", "w", encoding="utf-8") as f:
        json.dump([asdict(p) for p in phases], f)
    return 0


def _stop_on_signals() -> None:
    """Outside the event loop, SIGTERM and SIGINT (Ctrl-C, even when started in the background, which
    ignores SIGINT) raise KeyboardInterrupt, so every ``finally`` stops its servers."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)


def run_async(work: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(work)``, with SIGTERM and SIGINT cancelling it (the load loops' ``finally`` blocks
    close their connections) and then raising KeyboardInterrupt for the callers' ``finally`` blocks.
    A signal handler that raises inside a running loop would not reliably reach the main task."""

    async def main() -> T:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("run_async outside a task")
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, task.cancel)
        try:
            return await work
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            _stop_on_signals()  # remove_signal_handler restored the default action

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


def run(args: argparse.Namespace, workload: Workload, peers: list[str]) -> Report:
    loop_name = install_event_loop()
    machine = {"cpus": os.cpu_count() or 0, "python": sys.version.split()[0], "loop": loop_name}
    systems = ["raftlog", *peers] if args.system == "raftlog" else [args.system]
    report = Report(workload, systems, machine)
    servers = parse_servers(args.servers) if args.servers else None
    for system in systems:
        started = time.perf_counter()
        try:
            if system == "raftlog":
                run_raftlog(
                    workload, args.dir, servers, os.environ.get("RAFTLOG_ADMIN_TOKEN"), args.keep,
                    args.idle_partitions, args.idle_seconds, args.restart_mib, report,
                )  # fmt: skip
            elif system == "nats":
                run_nats(workload, args.dir, report)
            elif system in ("kafka", "kafka-fsync"):
                run_kafka(workload, args.dir, report, flush_each=system == "kafka-fsync")
            else:
                run_rabbitmq(workload, args.dir, report)
        except PeerMissing as exc:
            report.failures[system] = str(exc)
            say(f"{system}: {exc}")
        say(f"{system}: done in {time.perf_counter() - started:.0f} s")
    return report


# -- command line ----------------------------------------------------------------------------------------


def parse_peers(text: str) -> list[str]:
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [peer for peer in chosen if peer not in PEERS]
    if unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: peers are {','.join(PEERS)}")
    return list(dict.fromkeys(chosen))


DESCRIPTION = (
    "Producers and consumers against a 3-node cluster (records/s, MB/s, latency percentiles, CPU),"
    " optionally side by side with NATS JetStream and RabbitMQ streams."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--servers", default=None, metavar="URL[,URL...]",
                        help="an existing raftlog cluster (default: start 3 nodes on 127.0.0.1)")  # fmt: skip
    # the admin token: $RAFTLOG_ADMIN_TOKEN only; never in argv, which every local user reads (ps)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument(
        "--record-size", type=positive_ints, default=(100,), help="bytes per record, a list (100)"
    )
    parser.add_argument("--batch-size", type=int, default=1000, help="records per batch (1000)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions, 3 replicas each (3)")
    parser.add_argument("--concurrency", type=int, default=8, help="batches in flight (8)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per produce phase (10)")
    parser.add_argument("--acks", choices=ACKS, default="all",
                        help="all: acknowledged once a majority has the record (the only mode)")  # fmt: skip
    parser.add_argument("--no-consume", action="store_true", help="skip reading back")
    parser.add_argument("--consume-seconds", type=float, default=30.0, help="read-back time bound (30)")
    parser.add_argument("--fetch-mib", type=int, default=4, help="raftlog fetch max_bytes, MiB (4)")
    parser.add_argument("--route", choices=ROUTES, default="leader",
                        help="raftlog requests go to the partition's leader, or to any node, which "
                        "forwards (leader)")  # fmt: skip
    parser.add_argument("--produce-format", choices=PRODUCE_FORMATS, default="batch",
                        help="raftlog produce body: a record batch encoded by the client per request, "
                        "as a Kafka producer sends, or JSON in the binary flavour (batch)")  # fmt: skip
    parser.add_argument("--fetch-format", choices=FETCH_FORMATS, default="batch",
                        help="raftlog reads: the stored batches, decoded and CRC-checked by the client, or "
                        "columnar msgpack pages (batch)")  # fmt: skip
    parser.add_argument("--client", choices=CLIENTS, default=None,
                        help="raftlog through its HTTP API, or through Kafka's protocol with "
                        "confluent-kafka (librdkafka: idempotent, acks=all, linger 5 ms; single records "
                        "with linger 0), the client Kafka's peers are driven with (default: kafka when "
                        "--compare names Kafka, else http)")  # fmt: skip
    parser.add_argument("--compression", choices=tuple(COMPRESSIONS), default="none",
                        help="raftlog: the topic's compression.type, used by the batch producer too, on "
                        "varied log-line records; prints the stored size ratio (none)")  # fmt: skip
    parser.add_argument("--transactions", dest="transaction_records", type=int, nargs="?", const=100,
                        default=None, metavar="N",
                        help="instead of the phases above: --concurrency producers in rounds of N records"
                        " (default 100) spread over the partitions, plain (idempotent, each round"
                        " flushed) and then each round one transaction (begin, N records, commit), each"
                        " topic read back at read_committed; through confluent-kafka, on raftlog and each"
                        " Kafka peer of --compare; prints the slowdown of each")  # fmt: skip
    parser.add_argument("--single-rate", type=float, default=1000.0,
                        help="single-record requests/s offered; 0 skips the phase (1000)")  # fmt: skip
    parser.add_argument("--single-seconds", type=float, default=10.0, help="single-record phase (10)")
    parser.add_argument("--single-record-size", type=int, default=100, help="single-record bytes (100)")
    parser.add_argument("--compare", type=parse_peers, default=[], metavar="kafka,kafka-fsync,nats,rabbitmq",
                        help="also run the same workload against these peers, then print ratios")  # fmt: skip
    parser.add_argument("--system", choices=SYSTEMS, default="raftlog",
                        help="measure only this system (default raftlog, plus --compare)")  # fmt: skip
    parser.add_argument("--idle-partitions", type=int, default=0,
                        help="idle CPU of raftlog holding N partitions (0 = skip)")  # fmt: skip
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="idle window (10)")
    parser.add_argument("--restart-mib", type=int, default=0,
                        help="restart a raftlog node holding N MiB (0 = skip)")  # fmt: skip
    add_wait_quiet_argument(parser, "before each phase")
    parser.add_argument("--settle-seconds", type=float, default=LEADERS_SETTLE_S, metavar="S",
                        help="raftlog: after creating a phase's topic, wait until its partition leaders "
                             "stood still S s (longer than a round of the leader balancer), and after "
                             "deleting it until every node removed its files "
                             f"(default {LEADERS_SETTLE_S:g}; 0 = neither wait)")  # fmt: skip
    add_dir_argument(parser, "the data directories")
    parser.add_argument("--keep", action="store_true", help="keep raftlog's data directory")
    add_json_argument(parser, "the results")
    parser.add_argument("--load-child", default=None, help=argparse.SUPPRESS)


def client_of(args: argparse.Namespace) -> str:
    """raftlog's client: the one asked for, else Kafka's beside a Kafka peer (the same client on both,
    so the ratio compares the servers), else HTTP."""
    if args.client is not None:
        return str(args.client)
    if args.transaction_records:
        return "kafka"
    return "kafka" if any(peer.startswith("kafka") for peer in args.compare) else "http"


def problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the options, or None."""
    client = client_of(args)
    checks: list[tuple[bool, str]] = [
        (
            args.token is None,
            "--token would show the admin token to every local user (ps): set $RAFTLOG_ADMIN_TOKEN",
        ),
        (0 < args.duration <= 600, "--duration must be in (0, 600]"),
        (
            args.transaction_records is None or 1 <= args.transaction_records <= 10_000,
            "--transactions N must be in [1, 10000]",
        ),
        (1 <= args.batch_size <= 100_000, "--batch-size must be in [1, 100000]"),
        (1 <= args.partitions <= 1000, "--partitions must be in [1, 1000]"),
        (1 <= args.concurrency <= 1024, "--concurrency must be in [1, 1024]"),
        (all(size <= MiB for size in args.record_size), "--record-size values must be <= 1 MiB"),
        (0 < args.consume_seconds <= 600, "--consume-seconds must be in (0, 600]"),
        (1 <= args.fetch_mib <= 64, "--fetch-mib must be in [1, 64]"),
        (0 <= args.single_rate <= 100_000, "--single-rate must be in [0, 100000]"),
        (0 < args.single_seconds <= 600, "--single-seconds must be in (0, 600]"),
        (1 <= args.single_record_size <= MiB, "--single-record-size must be in [1, 1 MiB]"),
        (0 <= args.idle_partitions <= 1000, "--idle-partitions must be in [0, 1000]"),
        (0 < args.idle_seconds <= 600, "--idle-seconds must be in (0, 600]"),
        (0 <= args.restart_mib <= 16 * KiB, "--restart-mib must be in [0, 16384]"),
        (0 <= args.wait_quiet <= 3600, "--wait-quiet must be in [0, 3600]"),
        (0 <= args.settle_seconds <= 60, "--settle-seconds must be in [0, 60]"),
        (args.system == "raftlog" or not args.compare, "--compare goes with --system raftlog"),
        (
            args.compression == "none" or not args.compare,
            "--compression measures raftlog alone: no --compare",
        ),
        (args.servers is None or args.system == "raftlog", "--servers is a raftlog cluster"),
        (
            client == "kafka" or not any(peer.startswith("kafka") for peer in args.compare),
            "--compare kafka drives raftlog through the same Kafka client: --client kafka (the default "
            "beside Kafka)",
        ),
        (
            client == "http" or args.servers is None,
            "--client kafka needs the cluster started here (it knows the Kafka listeners): no --servers",
        ),
        (
            args.servers is None or args.restart_mib == 0,
            "--restart-mib needs a cluster started here (not --servers)",
        ),
    ]
    if args.transaction_records:
        checks += [
            (
                all(peer.startswith("kafka") for peer in args.compare)
                and (args.system == "raftlog" or args.system.startswith("kafka")),
                "--transactions compares raftlog with Apache Kafka only: --compare kafka,kafka-fsync",
            ),
            (client == "kafka", "--transactions drives raftlog through Kafka's protocol: --client kafka"),
            (
                args.idle_partitions == 0 and args.restart_mib == 0 and args.compression == "none",
                "--transactions measures transactions alone: no --idle-partitions, --restart-mib or"
                " --compression",
            ),
        ]  # fmt: skip
    elif args.record_size and args.batch_size * max(args.record_size) > 8 * MiB:
        checks.append((False, "--batch-size x --record-size must stay <= 8 MiB per request"))
    return next((message for ok, message in checks if not ok), None)


def workload_of(args: argparse.Namespace) -> Workload:
    return config_of(
        Workload,
        args,
        record_sizes=tuple(args.record_size),
        batch_records=args.batch_size,
        seconds=args.duration,
        consume=not args.no_consume,
        single_record_bytes=args.single_record_size,
        fetch_bytes=args.fetch_mib * MiB,
        wait_quiet_s=args.wait_quiet,
        settle_s=args.settle_seconds,
        client=client_of(args),
        transaction_records=args.transaction_records or 0,
    )


def run_from_args(args: argparse.Namespace) -> int:
    if args.load_child is not None:
        return load_child(args.load_child)
    why = problem(args)
    if why is None and args.servers:
        try:
            parse_servers(args.servers)
        except ValueError as exc:
            why = str(exc)
    if why is not None:
        print(f"raftlog bench perf: {why}", file=sys.stderr)
        return 2
    peers = list(args.compare)
    missing = preflight(peers if args.system == "raftlog" else [args.system])
    if missing:
        print(f"raftlog bench perf: {missing}", file=sys.stderr)
        return 2
    _stop_on_signals()
    try:
        report = run(args, workload_of(args), peers)
    except KeyboardInterrupt:
        print("raftlog bench perf: interrupted; every server it started is stopped", file=sys.stderr)
        return 130
    out = asdict(report)
    out["goals"] = [asdict(goal) for goal in goals(report)]
    emit(args.json, format_report(report), out)
    return 1 if report.failures or any(p.errors for p in report.phases) else 0


CLIENTS = ("http", "kafka")


def preflight(systems: Sequence[str]) -> str | None:
    """Refuse early, naming the set-up command, when a peer's software is missing."""
    checks: dict[str, Callable[[], object]] = {}
    from raftlog_bench import peers as peer_module

    checks["nats"] = peer_module.nats_server_binary
    checks["rabbitmq"] = peer_module.rabbit_check
    from raftlog_bench import kafka_peer

    checks["kafka"] = checks["kafka-fsync"] = kafka_peer.kafka_check
    for system in systems:
        if system in checks:
            try:
                checks[system]()
            except PeerMissing as exc:
                return str(exc)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    return run_from_args(standalone_parser("perf", DESCRIPTION, add_arguments).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
