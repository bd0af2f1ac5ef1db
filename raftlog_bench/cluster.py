"""Cluster benchmark: produce, produce latency, consume and idle CPU of a 3-node cluster over HTTP.

Usage: ``python -m raftlog_bench.cluster [--seconds S] [--dir DIR] [--json OUT] [--server URL,...]``

Without ``--server`` it starts its own cluster: ``raftlog dev`` (3 node processes on 127.0.0.1, free
ports, a fresh ``mkdtemp`` data directory under ``--dir``), and always stops it at the end. Topics use the
default ``flush.policy`` (``always``: fsync per append) and 3 replicas. The load generator is this
process (one asyncio loop, one keep-alive ``aiohttp`` session), so client and nodes share the machine's
CPUs. Cells:

1. produce: closed loop, ``--concurrency`` requests in flight; task j sends to node j mod 3 and walks the
   partitions round-robin; binary content type, random values; batches of 100 and 1000 records of
   100 B and 1 KiB; a topic of 3 partitions and one of 1 partition per size and batch; ``--seconds``
   per cell. Records/s count only records acknowledged with ``error_code`` null;
2. single-record produce latency at an offered ``--rate`` requests/s on a fixed timetable (open loop:
   a request's latency counts from its scheduled time, so a slow answer is not hidden by the client
   waiting), at most ``--latency-in-flight`` in flight, ``--latency-seconds`` long; "late" = sent more
   than 1 ms after its slot. The later performance target is p99 <= 5 ms;
3. consume: every produced topic read back from offset 0 to its end offset, one task per partition,
   with each ``--fetch-mib`` as ``max_bytes`` (within ``--consume-seconds``), checking that offsets are
   dense and values are the ones written (lost or altered records are reported, never hidden);
4. idle CPU of the nodes while they hold a topic of ``--idle-partitions`` partitions x 3 replicas.

For every cell the nodes' CPU seconds (user+sys of each process, from /proc/PID/stat), this process's
CPU seconds and the CPU other processes used are recorded. Errors (HTTP status and error_code, timeouts,
connection errors) are counted per cell; node logs are scanned for ERROR lines and tracebacks at the end.
Numbers, never assertions about speed. This module talks to the cluster only through its HTTP API
(``cluster_http.py``) and the ``raftlog dev`` command (no imports of api/: imports point inward).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from raftlog.errors import check
from raftlog_bench.arguments import (
    add_dir_argument,
    add_grid_arguments,
    add_json_argument,
    add_wait_quiet_argument,
    positive_ints,
    refused,
    standalone_parser,
)
from raftlog_bench.cluster_http import Http, parse_servers
from raftlog_bench.cluster_report import (
    LATE_AFTER_S,
    NODE_COUNT,
    REPLICATION_FACTOR,
    ConsumeCell,
    IdleCell,
    LatencyCell,
    LatencySummary,
    Options,
    ProduceCell,
    Results,
    any_problem,
    errors_text,
    format_table,
    goals_of,
)
from raftlog_bench.cpu import CpuMeter, wait_quiet
from raftlog_bench.output import emit, say
from raftlog_bench.stats import MB, rate, size_label
from raftlog_client.errors import ClientError
from raftlog_client.local_cluster import LocalCluster
from raftlog_client.session import NoAnswer, NotSent
from raftlog_contract import BINARY_V2, LEADER_HEADER, partition_path, records_path

KiB = 1024
MiB = 1024 * 1024
PRODUCE_HEADERS = {"Content-Type": BINARY_V2}
FETCH_HEADERS = {"Accept": BINARY_V2}
RECORD_SIZES = (100, 1 * KiB)
BATCH_SIZES = (100, 1000)
PARTITION_COUNTS = (3, 1)
REQUEST_TIMEOUT_S = 30.0
ERROR_BACKOFF_S = 0.02
LOG_PROBLEM_LINES_MAX = 20


# -- pure helpers ----------------------------------------------------------------------------------------


def slots_due(elapsed_s: float, per_s: float, total: int) -> int:
    """How many slots of a fixed timetable (slot k at k / per_s seconds, k = 0..total-1) are due after
    ``elapsed_s`` seconds."""
    check(per_s > 0 and total >= 0, f"timetable of {total} slots at {per_s}/s")
    if elapsed_s < 0:
        return 0
    return min(total, math.floor(elapsed_s * per_s + 1e-9) + 1)


def slot_time(start_s: float, slot: int, per_s: float) -> float:
    return start_s + slot / per_s


async def send_on_timetable(
    start_s: float,
    per_s: float,
    total: int,
    slack_s: float,
    places: asyncio.Semaphore,
    send: Callable[[int, float], Coroutine[Any, Any, None]],
    tasks: set[asyncio.Task[None]],
    each_turn: Callable[[], None] = lambda: None,
) -> None:
    """An open loop: slot k's ``send(k, due)`` started as a task at its time on the timetable (up to
    ``slack_s`` early: the timers' resolution), once ``places`` has room (``send`` releases it; a slot
    waiting for room is late); each task is in ``tasks`` until it is done. ``each_turn`` runs at every
    wake-up, before the slots due are sent."""
    sent = 0
    while sent < total:
        each_turn()
        due_count = slots_due(time.perf_counter() + slack_s - start_s, per_s, total)
        while sent < due_count:
            await places.acquire()
            task = asyncio.create_task(send(sent, slot_time(start_s, sent, per_s)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            sent += 1
        if sent < total:
            await asyncio.sleep(max(0.0, slot_time(start_s, sent, per_s) - slack_s - time.perf_counter()))


def error_key(status: int, error_code: int | None) -> str:
    """How an error is counted: "HTTP 503/50301", "HTTP 502/-" or, for records, "record/50401"."""
    return f"HTTP {status}/{'-' if error_code is None else error_code}"


def produce_body(record_bytes: int, batch_records: int, value: bytes) -> tuple[bytes, str]:
    """The JSON body of a binary-flavour produce of ``batch_records`` copies of ``value`` (one random
    value per cell: the client spends its CPU on sending, not on encoding), and the value's base64."""
    check(len(value) == record_bytes, f"value of {len(value)} bytes, expected {record_bytes}")
    encoded = base64.b64encode(value).decode("ascii")
    body = json.dumps({"records": [{"value": encoded}] * batch_records}).encode("ascii")
    return body, encoded


# -- a local cluster (raftlog_client.local_cluster: raftlog dev in a child process) ------------------------


def node_log_problems(cluster: LocalCluster) -> dict[str, list[str]]:
    """ERROR / CRITICAL lines and traceback heads of each node's node.log (at most a few each)."""
    problems: dict[str, list[str]] = {}
    for node in sorted(cluster.urls):
        path = os.path.join(cluster.directory, node, "node.log")
        found: list[str] = []
        count = 0
        try:
            with open(path, encoding="utf-8", errors="replace") as log:
                for line in log:
                    if " ERROR " in line or " CRITICAL " in line or line.startswith("Traceback"):
                        count += 1
                        if len(found) < LOG_PROBLEM_LINES_MAX:
                            found.append(line.rstrip()[:300])
        except OSError as exc:
            found.append(f"cannot read {path}: {exc}")
        if count:
            found.append(f"({count} such lines in {path})")
        if found:
            problems[node] = found
    return problems


# -- HTTP ------------------------------------------------------------------------------------------------


def _error_code(data: bytes) -> int | None:
    try:
        body = json.loads(data)
    except ValueError:
        return None
    code = body.get("error_code") if isinstance(body, dict) else None
    return code if isinstance(code, int) else None


def _failure(exc: NotSent | NoAnswer, timeout_s: float) -> str:
    """How a request without an answer is counted."""
    if isinstance(exc, NoAnswer) and exc.timed_out:
        return f"timeout > {timeout_s:g} s"
    return f"connection: {'not sent' if isinstance(exc, NotSent) else 'lost'}"


@dataclass(slots=True)
class _Tally:
    errors: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    requests: int = 0
    records: int = 0
    forwarded: int = 0
    end_offsets: dict[int, int] = field(default_factory=dict)  # partition -> highest acked offset + 1

    def acked(self, entries: list[dict[str, Any]]) -> int:
        good = 0
        for entry in entries:
            code = entry.get("error_code")
            if code is None:
                good += 1
                partition, offset = int(entry["partition"]), int(entry["offset"])
                if offset + 1 > self.end_offsets.get(partition, 0):
                    self.end_offsets[partition] = offset + 1
            else:
                self.errors[f"record/{code}"] += 1
        self.records += good
        return good


def _produce_urls(http: Http, topic: str, partitions: int) -> list[list[str]]:
    """``[server][partition]`` -> the URL a produce to that partition through that server posts to, made
    before a cell's loop (the loop only picks one)."""
    return [[url + partition_path(topic, p) for p in range(partitions)] for url in http.servers]


async def _post_produce(
    http: Http, url: str, target: str, body: bytes, tally: _Tally, timeout_s: float
) -> tuple[bool, bool]:
    """One produce request to ``target`` through server ``url``; (every record acknowledged, forwarded).
    Errors go into ``tally``."""
    try:
        answer = await http.session.exchange(
            "POST", target, body=body, headers=PRODUCE_HEADERS, timeout_s=timeout_s
        )
    except (NotSent, NoAnswer) as exc:
        tally.errors[_failure(exc, timeout_s)] += 1
        return False, False
    forwarded = http.forwarded(url, answer.header(LEADER_HEADER))
    if answer.status != 200:
        tally.errors[error_key(answer.status, _error_code(answer.body))] += 1
        return False, forwarded
    entries = json.loads(answer.body)["offsets"]
    return tally.acked(entries) == len(entries), forwarded


# -- cells -----------------------------------------------------------------------------------------------


async def measure_produce(
    http: Http,
    pids: dict[str, int],
    topic: str,
    partitions: int,
    record_bytes: int,
    batch_records: int,
    concurrency: int,
    seconds: float,
) -> tuple[ProduceCell, dict[int, int], str]:
    """Closed loop: ``concurrency`` tasks, each one request at a time until ``seconds`` ran out; task j
    asks node j mod n and walks the partitions round-robin from j. Returns the cell, each partition's
    highest acknowledged offset + 1, and the value's base64 (every record of the cell has that value)."""
    body, encoded = produce_body(record_bytes, batch_records, os.urandom(record_bytes))
    tally = _Tally()
    meter = CpuMeter(pids)
    start = time.perf_counter()
    deadline = start + seconds

    targets = _produce_urls(http, topic, partitions)

    async def worker(j: int) -> None:
        url = http.servers[j % len(http.servers)]
        mine = targets[j % len(http.servers)]
        partition = j % partitions
        while time.perf_counter() < deadline:
            before = time.perf_counter()
            ok, forwarded = await _post_produce(http, url, mine[partition], body, tally, REQUEST_TIMEOUT_S)
            if ok:
                tally.latencies.append(time.perf_counter() - before)
                tally.requests += 1
                tally.forwarded += forwarded
            else:
                await asyncio.sleep(ERROR_BACKOFF_S)
            partition = (partition + 1) % partitions

    await asyncio.gather(*(worker(j) for j in range(concurrency)))
    elapsed = time.perf_counter() - start
    cpu = meter.stop()
    cell = ProduceCell(
        topic=topic,
        partitions=partitions,
        record_bytes=record_bytes,
        batch_records=batch_records,
        concurrency=concurrency,
        requests=tally.requests,
        records=tally.records,
        seconds=elapsed,
        records_per_s=rate(tally.records, elapsed),
        payload_mb_s=rate(tally.records * record_bytes / MB, elapsed),
        latency=LatencySummary.of(tally.latencies),
        forwarded_pct=100 * rate(tally.forwarded, tally.requests),
        errors=dict(tally.errors),
        cpu=cpu,
    )
    return cell, dict(tally.end_offsets), encoded


async def measure_latency(
    http: Http,
    pids: dict[str, int],
    topic: str,
    partitions: int,
    record_bytes: int,
    per_s: float,
    seconds: float,
    in_flight_max: int,
) -> tuple[LatencyCell, _Tally, str]:
    """Open loop: slot k is due at k / per_s; request k goes to node k mod n, partition k mod p. A
    request waits for a free in-flight place (then it is late); its latency counts from its slot."""
    body, encoded = produce_body(record_bytes, 1, os.urandom(record_bytes))
    total = max(1, round(per_s * seconds))
    tally = _Tally()
    from_schedule: list[float] = []
    from_send: list[float] = []
    direct: list[float] = []
    forwarded_list: list[float] = []
    places = asyncio.Semaphore(in_flight_max)
    tasks: set[asyncio.Task[None]] = set()
    late = 0
    sent = 0
    meter = CpuMeter(pids)
    targets = _produce_urls(http, topic, partitions)

    async def one(slot: int, due: float, sent_at: float) -> None:
        try:
            server = slot % len(http.servers)
            ok, forwarded = await _post_produce(
                http, http.servers[server], targets[server][slot % partitions], body, tally, REQUEST_TIMEOUT_S
            )
            if ok:
                done = time.perf_counter()
                from_schedule.append(done - due)
                from_send.append(done - sent_at)
                (forwarded_list if forwarded else direct).append(done - due)
        finally:
            places.release()

    start = time.perf_counter() + 0.01
    while sent < total:
        now = time.perf_counter()
        due_count = slots_due(now - start, per_s, total)
        while sent < due_count:
            due = slot_time(start, sent, per_s)
            await places.acquire()  # bounded in flight: waiting here makes the request late
            sent_at = time.perf_counter()
            if sent_at - due > LATE_AFTER_S:
                late += 1
            task = asyncio.create_task(one(sent, due, sent_at))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            sent += 1
        if sent < total:
            await asyncio.sleep(max(0.0, slot_time(start, sent, per_s) - time.perf_counter()))
    end_of_timetable = slot_time(start, total, per_s)
    if tasks:
        await asyncio.wait(set(tasks), timeout=REQUEST_TIMEOUT_S + 5)
    cpu = meter.stop()
    for task in tasks:  # none unless a request outlived its own timeout
        task.cancel()
    check(sent == total, f"latency cell sent {sent} of {total} scheduled requests")
    cell = LatencyCell(
        topic=topic,
        partitions=partitions,
        record_bytes=record_bytes,
        offered_per_s=per_s,
        scheduled=total,
        sent=sent,
        acknowledged=len(from_schedule),
        achieved_per_s=rate(len(from_schedule), max(end_of_timetable, time.perf_counter()) - start),
        late=late,
        in_flight_max=in_flight_max,
        from_schedule=LatencySummary.of(from_schedule),
        from_send=LatencySummary.of(from_send),
        direct=LatencySummary.of(direct),
        forwarded=LatencySummary.of(forwarded_list),
        errors=dict(tally.errors),
        cpu=cpu,
    )
    return cell, tally, encoded


@dataclass(frozen=True, slots=True)
class Produced:
    """What a produce cell left in a topic, for the read-back."""

    topic: str
    partitions: int
    record_bytes: int
    batch_records: int
    records: int  # acknowledged
    end_offsets: dict[int, int]  # partition -> highest acknowledged offset + 1
    value_base64: str


async def measure_consume(
    http: Http, pids: dict[str, int], produced: Produced, max_bytes: int, seconds: float
) -> ConsumeCell:
    """Read every partition from offset 0 to its end offset (one task per partition, partition p asked
    of node p mod n) with binary fetches of ``max_bytes``, checking offsets and values."""
    tally = _Tally()
    problems: list[str] = []
    complete = True
    fetches = 0
    read = 0
    end_total = 0
    meter = CpuMeter(pids)
    start = time.perf_counter()
    deadline = start + seconds

    async def reader(partition: int) -> None:
        nonlocal complete, fetches, read, end_total
        url = http.servers[partition % len(http.servers)]
        records_url = url + records_path(produced.topic, partition)
        try:
            begin, end = await http.admin.offsets(produced.topic, partition)
        except ClientError as exc:
            problems.append(f"partition {partition}: offsets: {exc}")
            complete = False
            return
        end_total += end
        acked_end = produced.end_offsets.get(partition, 0)
        if end < acked_end:
            problems.append(
                f"partition {partition}: end offset {end} < {acked_end} acknowledged (lost records)"
            )
        if begin != 0:
            problems.append(f"partition {partition}: beginning offset {begin}, expected 0")
        offset = begin
        while offset < end:
            if time.perf_counter() >= deadline:
                complete = False
                return
            before = time.perf_counter()
            try:
                answer = await http.session.exchange(
                    "GET", records_url, params={"offset": offset, "max_bytes": max_bytes},
                    headers=FETCH_HEADERS, timeout_s=REQUEST_TIMEOUT_S,
                )  # fmt: skip
            except (NotSent, NoAnswer) as exc:
                tally.errors[_failure(exc, REQUEST_TIMEOUT_S)] += 1
                if not (isinstance(exc, NoAnswer) and exc.timed_out):
                    await asyncio.sleep(ERROR_BACKOFF_S)
                continue
            if answer.status != 200:
                tally.errors[error_key(answer.status, _error_code(answer.body))] += 1
                await asyncio.sleep(ERROR_BACKOFF_S)
                continue
            rows = json.loads(answer.body)
            tally.latencies.append(time.perf_counter() - before)
            fetches += 1
            if not rows:
                problems.append(f"partition {partition}: fetch at {offset} below end {end} returned nothing")
                complete = False
                return
            for row in rows:
                if row["offset"] != offset:
                    problems.append(
                        f"partition {partition}: record at offset {row['offset']}, expected {offset}"
                    )
                    complete = False
                    return
                if row["value"] != produced.value_base64:
                    problems.append(f"partition {partition}: offset {offset} holds a different value")
                offset += 1
            read += len(rows)

    await asyncio.gather(*(reader(p) for p in range(produced.partitions)))
    elapsed = time.perf_counter() - start
    cpu = meter.stop()
    if complete and read < produced.records:
        problems.append(f"read {read} records, {produced.records} were acknowledged (lost records)")
    elif complete and read > produced.records:
        problems.append(
            f"read {read} records, {produced.records} were acknowledged: {read - produced.records} from"
            " requests that failed or timed out were committed anyway (outcome unknown, not a loss)"
        )
    return ConsumeCell(
        topic=produced.topic,
        partitions=produced.partitions,
        record_bytes=produced.record_bytes,
        batch_records=produced.batch_records,
        max_bytes=max_bytes,
        fetches=fetches,
        records=read,
        expected=produced.records,
        end_offsets=end_total,
        seconds=elapsed,
        records_per_s=rate(read, elapsed),
        payload_mb_s=rate(read * produced.record_bytes / MB, elapsed),
        latency=LatencySummary.of(tally.latencies),
        complete=complete,
        problems=problems[:LOG_PROBLEM_LINES_MAX],
        errors=dict(tally.errors),
        cpu=cpu,
    )


async def measure_idle(
    http: Http, pids: dict[str, int], topic: str, partitions: int, settle_s: float, seconds: float
) -> IdleCell:
    """Create a topic of ``partitions`` x RF 3, wait until each has a leader and ``settle_s`` more, then
    measure the nodes' CPU over ``seconds`` of doing nothing."""
    created_s = await http.create_topic(topic, partitions)
    await asyncio.sleep(settle_s)
    meter = CpuMeter(pids)
    await asyncio.sleep(seconds)
    return IdleCell(partitions, REPLICATION_FACTOR, created_s, meter.stop())


# -- the run ---------------------------------------------------------------------------------------------


async def run_cells(
    options: Options, servers: list[str], pids: dict[str, int], admin_token: str | None, results: Results
) -> None:
    prefix = f"bench-{os.getpid()}-{int(time.time())}"
    connections = max(64, 2 * options.concurrency, 2 * options.latency_in_flight)

    async def quiet() -> None:
        if options.wait_quiet_s > 0:
            await asyncio.to_thread(wait_quiet, options.wait_quiet_s)

    http = Http(servers, admin_token, connections)
    try:
        with contextlib.suppress(ClientError):
            await http.learn_nodes()
        produced: list[Produced] = []
        created: list[str] = []
        try:
            if "produce" in options.cells:
                for partitions in options.partition_counts:
                    for record_bytes in options.record_sizes:
                        for batch_records in options.batch_sizes:
                            topic = f"{prefix}-p{partitions}-{record_bytes}-{batch_records}"
                            await http.create_topic(topic, partitions)
                            created.append(topic)
                            await quiet()
                            cell, acked_ends, encoded = await measure_produce(
                                http, pids, topic, partitions, record_bytes, batch_records,
                                options.concurrency, options.seconds,
                            )  # fmt: skip
                            results.produce.append(cell)
                            produced.append(
                                Produced(topic, partitions, record_bytes, batch_records, cell.records,
                                         acked_ends, encoded)
                            )  # fmt: skip
                            say(
                                f"produce p{partitions} {size_label(record_bytes):>6} x {batch_records:4d}:"
                                f" {cell.records_per_s:8.0f} records/s {cell.payload_mb_s:6.1f} MB/s"
                                f" p99 {cell.latency.p99_ms:7.1f} ms,"
                                f" nodes CPU {cell.cpu.nodes_total_s:5.1f} s,"
                                f" errors {errors_text(cell.errors)}"
                            )
            if "latency" in options.cells:
                topic = f"{prefix}-latency"
                await http.create_topic(topic, 3)
                created.append(topic)
                await quiet()
                lat, tally, encoded = await measure_latency(
                    http, pids, topic, 3, options.latency_record_bytes, options.latency_rate,
                    options.latency_seconds, options.latency_in_flight,
                )  # fmt: skip
                results.latency.append(lat)
                produced.append(
                    Produced(topic, 3, options.latency_record_bytes, 1, lat.acknowledged,
                             dict(tally.end_offsets), encoded)
                )  # fmt: skip
                say(
                    f"latency {lat.offered_per_s:g}/s offered: {lat.achieved_per_s:.0f}/s achieved,"
                    f" p50 {lat.from_schedule.p50_ms:.2f} p99 {lat.from_schedule.p99_ms:.2f}"
                    f" max {lat.from_schedule.max_ms:.1f} ms, late {lat.late},"
                    f" errors {errors_text(lat.errors)}"
                )
            if "consume" in options.cells:
                for item in produced:
                    for max_bytes in options.fetch_bytes:
                        await quiet()
                        cell_c = await measure_consume(http, pids, item, max_bytes, options.consume_seconds)
                        results.consume.append(cell_c)
                        say(
                            f"consume p{item.partitions} {size_label(item.record_bytes):>6}"
                            f" x {item.batch_records:4d}"
                            f" max_bytes {max_bytes // MiB} MiB: {cell_c.records_per_s:8.0f} records/s"
                            f" {cell_c.payload_mb_s:6.1f} MB/s, {cell_c.records}/{cell_c.expected} read,"
                            f" problems {len(cell_c.problems)}, errors {errors_text(cell_c.errors)}"
                        )
            for topic in created:  # the idle cell measures a cluster holding only its own topic
                await http.delete_topic(topic)
            created.clear()
            if "idle" in options.cells:
                topic = f"{prefix}-idle"
                created.append(topic)
                await quiet()
                idle = await measure_idle(
                    http, pids, topic, options.idle_partitions, options.idle_settle_seconds,
                    options.idle_seconds,
                )  # fmt: skip
                results.idle.append(idle)
                say(
                    f"idle, {idle.partitions} partitions x RF {idle.replication_factor}:"
                    f" nodes {100 * rate(idle.cpu.nodes_total_s, idle.cpu.seconds):.1f}% of one core"
                    f" (created in {idle.create_seconds:.1f} s)"
                )
        finally:
            for topic in created:
                await http.delete_topic(topic)
    finally:
        await http.close()


def run(
    options: Options,
    parent: str,
    servers: list[str] | None,
    admin_token: str | None,
    keep: bool,
) -> Results:
    """Run every cell against ``servers``, or against a cluster started here in a fresh directory under
    ``parent`` (stopped, always, and removed unless ``keep`` or a problem was seen)."""
    machine: dict[str, str | int] = {"cpus": os.cpu_count() or 0, "python": sys.version.split()[0]}
    if servers is not None:
        results = Results(servers, False, None, machine, options)
        asyncio.run(run_cells(options, servers, {}, admin_token, results))
        results.goals = goals_of(results)
        return results
    directory = tempfile.mkdtemp(prefix="raftlog-bench-cluster-", dir=parent)
    cluster = LocalCluster(directory, NODE_COUNT)
    problem_seen = True
    results = Results([], True, directory, machine, options)
    try:
        cluster.start()
        results.servers = cluster.servers
        say(f"cluster of {NODE_COUNT} up in {directory}: {', '.join(results.servers)}")
        asyncio.run(run_cells(options, results.servers, cluster.pids, admin_token, results))
        problem_seen = any_problem(results)
    finally:
        cluster.stop()
        results.node_log_problems = node_log_problems(cluster)
        problem_seen = problem_seen or bool(results.node_log_problems)
        if keep or problem_seen:
            say(f"kept the cluster's data and node logs in {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)
    results.goals = goals_of(results)
    return results


# -- command line ----------------------------------------------------------------------------------------


CELLS = ("produce", "latency", "consume", "idle")


def _cells(text: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [cell for cell in chosen if cell not in CELLS]
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: choose from {','.join(CELLS)}")
    return chosen


DESCRIPTION = "Produce, produce latency, consume and idle CPU of a 3-node cluster over the HTTP API."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options (also registered by ``raftlog bench cluster``)."""
    parser.add_argument("--seconds", type=float, default=5.0, help="each produce cell (default 5)")
    parser.add_argument(
        "--server",
        default=None,
        metavar="URL[,URL...]",
        help="benchmark this running cluster instead of starting one (node CPU is then not measured)",
    )
    # the admin token (with --server): $RAFTLOG_ADMIN_TOKEN only; never in argv, which every local user reads
    parser.add_argument("--token", help=argparse.SUPPRESS)
    add_dir_argument(parser, "the cluster's data directory")
    add_wait_quiet_argument(parser, "before each cell")
    parser.add_argument("--keep", action="store_true", help="keep the data directory and node logs")
    add_json_argument(parser, "every result")
    parser.add_argument(
        "--cells", type=_cells, default=CELLS, help=f"which cells (default {','.join(CELLS)})"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="produce requests in flight (default 8)")
    add_grid_arguments(parser, RECORD_SIZES, BATCH_SIZES, "request")
    parser.add_argument(
        "--partitions",
        type=positive_ints,
        default=PARTITION_COUNTS,
        help="produce topics' partitions (default 3,1)",
    )
    parser.add_argument("--rate", type=float, default=1000.0, help="latency cell: requests/s offered (1000)")
    parser.add_argument(
        "--latency-seconds", type=float, default=10.0, help="latency cell length (default 10)"
    )
    parser.add_argument("--latency-in-flight", type=int, default=64, help="latency cell in-flight cap (64)")
    parser.add_argument("--latency-record", type=int, default=100, help="latency cell value bytes (100)")
    parser.add_argument(
        "--consume-seconds", type=float, default=30.0, help="time budget of each consume cell (default 30)"
    )
    parser.add_argument(
        "--fetch-mib", type=positive_ints, default=(1, 4), help="consume max_bytes, MiB (default 1,4)"
    )
    parser.add_argument("--idle-partitions", type=int, default=100, help="idle cell partitions (default 100)")
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="idle cell window (default 10)")
    parser.add_argument(
        "--idle-settle", type=float, default=5.0, help="seconds between creating and measuring (5)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    return run_from_args(standalone_parser("cluster", DESCRIPTION, add_arguments).parse_args(argv))


def _problem(args: argparse.Namespace) -> str | None:
    checks: list[tuple[bool, str]] = [
        (
            args.token is None,
            "--token would show the admin token to every local user (ps): set $RAFTLOG_ADMIN_TOKEN",
        ),
        (0 < args.seconds <= 600, "--seconds must be in (0, 600]"),
        (0 <= args.wait_quiet <= 3600, "--wait-quiet must be in [0, 3600]"),
        (0 < args.consume_seconds <= 600, "--consume-seconds must be in (0, 600]"),
        (0 < args.latency_seconds <= 600, "--latency-seconds must be in (0, 600]"),
        (
            0 < args.idle_seconds <= 600 and 0 <= args.idle_settle <= 600,
            "--idle-seconds/--idle-settle in (0, 600]",
        ),
        (1 <= args.concurrency <= 1024, "--concurrency must be in [1, 1024]"),
        (0 < args.rate <= 100_000, "--rate must be in (0, 100000]"),
        (1 <= args.latency_in_flight <= 4096, "--latency-in-flight must be in [1, 4096]"),
        (1 <= args.latency_record <= MiB, "--latency-record must be in [1, 1 MiB]"),
        (1 <= args.idle_partitions <= 1000, "--idle-partitions must be in [1, 1000]"),
        (all(m <= 64 for m in args.fetch_mib), "--fetch-mib values must be <= 64"),
    ]
    return next((message for ok, message in checks if not ok), None)


def run_from_args(args: argparse.Namespace) -> int:
    problem = _problem(args)
    servers = None
    if problem is None and args.server is not None:
        try:
            servers = parse_servers(args.server)
        except ValueError as exc:
            problem = str(exc)
    if problem is not None:
        return refused("cluster", problem)
    options = Options(
        seconds=args.seconds,
        consume_seconds=args.consume_seconds,
        concurrency=args.concurrency,
        record_sizes=args.record_sizes,
        batch_sizes=args.batch_sizes,
        partition_counts=args.partitions,
        latency_rate=args.rate,
        latency_seconds=args.latency_seconds,
        latency_in_flight=args.latency_in_flight,
        latency_record_bytes=args.latency_record,
        fetch_bytes=tuple(m * MiB for m in args.fetch_mib),
        idle_partitions=args.idle_partitions,
        idle_seconds=args.idle_seconds,
        idle_settle_seconds=args.idle_settle,
        cells=args.cells,
        wait_quiet_s=args.wait_quiet,
    )
    results = run(options, args.dir, servers, os.environ.get("RAFTLOG_ADMIN_TOKEN"), args.keep)
    emit(args.json, format_table(results), asdict(results))
    return 1 if any_problem(results) or results.node_log_problems else 0


if __name__ == "__main__":
    sys.exit(main())
