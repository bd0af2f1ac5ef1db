"""``raftlog bench scale``: what a 3-node cluster costs per partition, from 100 to 10,000 partitions.

    raftlog bench scale [--partitions 100,1000,2500,5000,10000] [--idle-seconds 20] [--timeout-s 600]
                        [--dir DIR] [--json OUT]

One fresh ``raftlog dev`` cluster per size (3 node processes on 127.0.0.1, RF 3, data in a fresh
directory under ``--dir``), so that no size inherits another's files or memory. Phases, in order:

1. create: topic ``probe`` (1 partition), then ``big`` (N partitions); the seconds until the API answered
   and until every node reports all its replicas open (``raftlog_partition_replicas``), and so the
   replicas each node opened per second;
2. idle: after a short quiet wait, the nodes' CPU over ``--idle-seconds`` (cluster total, 100% = one
   core), the largest node's RSS and open file descriptors;
3. restart: ``raftlog dev stop n3`` (SIGTERM) then ``raftlog dev start n3``; the seconds until n3 holds
   every replica again, until the cluster's CPU over a 5 s window is back under twice the idle figure
   (plus 2% of a core), and the elections n3's replicas held on timeout
   (``raftlog_raft_elections_on_timeout_total``);
4. delete: ``DELETE /v1/topics/big``; the seconds until every node holds only the probe replica, and
   whether the controller held an election meanwhile (``raftlog_controller_term`` on every node).

Throughout, one single-record produce to ``probe`` every 100 ms, round-robin over the nodes that are
up (10 s timeout); each phase reports its p50 / p99 / max latency and failed / sent. A phase that passes
``--timeout-s`` is reported as such with what was measured up to then. Numbers, never assertions about
speed; the cluster is reached only through its HTTP API and the ``raftlog dev`` command.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from raftlog_bench.arguments import add_json_argument, refused, standalone_parser
from raftlog_bench.cluster import node_log_problems
from raftlog_bench.cluster_report import REPLICATION_FACTOR
from raftlog_bench.cpu import CpuMeter
from raftlog_bench.output import STDOUT, emit, say
from raftlog_bench.scale_report import (
    ProbeSummary,
    Row,
    format_table,
    metric_values,
    number,
    parse_sizes,
    recovered,
    rss_mib,
)
from raftlog_bench.stats import rate
from raftlog_client.client import RaftlogClient
from raftlog_client.errors import ClientError
from raftlog_client.local_cluster import LocalCluster
from raftlog_client.session import Session
from raftlog_contract import METRICS_PATH, PLAIN_JSON, partition_path

DESCRIPTION = (
    "idle CPU, memory, open files, open/restart/delete times and produce next to 100-10,000 partitions"
)
PARTITIONS_DEFAULT = "100,1000,2500,5000,10000"
PROBE_INTERVAL_S = 0.1
PROBE_TIMEOUT_S = 10.0
POLL_S = 1.0
QUIET_WAIT_S = 5.0
RECOVERY_WINDOW_S = 5.0
VICTIM = "n3"
REPLICAS_METRIC = "raftlog_partition_replicas"
CONTROLLER_TERM_METRIC = "raftlog_controller_term"
ELECTIONS_METRIC = "raftlog_raft_elections_on_timeout_total"


# -- the cluster -----------------------------------------------------------------------------------------


def _fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def _rss(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            return rss_mib(f.read())
    except OSError:
        return None


PROBE_BODY = json.dumps({"records": [{"value": "probe"}]}).encode()
PROBE_HEADERS = {"Content-Type": PLAIN_JSON}
PROBE_TOPIC = "probe"  # one partition, written to all along
PROBE_PATH = partition_path(PROBE_TOPIC, 0)


class Probe:
    """Single-record produce to ``probe``/0 every 100 ms; samples are filed under the current phase."""

    def __init__(self, session: Session, urls: dict[str, str]) -> None:
        self.session = session
        self.urls = urls
        self.down: set[str] = set()
        self.phase = "create"
        self.samples: dict[str, list[tuple[float, bool]]] = {}
        self.stopped = asyncio.Event()

    async def run(self) -> None:
        sent = 0
        while not self.stopped.is_set():
            live = [url for node, url in sorted(self.urls.items()) if node not in self.down]
            url = live[sent % len(live)] + PROBE_PATH
            sent += 1
            started = time.monotonic()
            try:
                answer = await self.session.exchange(
                    "POST", url, body=PROBE_BODY, headers=PROBE_HEADERS, timeout_s=PROBE_TIMEOUT_S
                )
                ok = answer.status == 200
            except ClientError:
                ok = False
            self.samples.setdefault(self.phase, []).append((time.monotonic() - started, ok))
            await asyncio.sleep(PROBE_INTERVAL_S)


async def _metrics(session: Session, url: str) -> dict[str, float] | None:
    try:
        answer = await session.exchange("GET", url + METRICS_PATH, timeout_s=10)
    except ClientError:
        return None
    return metric_values(answer.body.decode("utf-8", "replace")) if answer.status == 200 else None


async def _metric_per_node(session: Session, urls: dict[str, str], metric: str) -> dict[str, float | None]:
    """``metric`` as each node reports it; None where its page could not be read or lacks it."""
    values = {}
    for node, url in sorted(urls.items()):
        page = await _metrics(session, url)
        values[node] = None if page is None else page.get(metric)
    return values


async def _replicas(session: Session, urls: dict[str, str]) -> dict[str, float | None]:
    return await _metric_per_node(session, urls, REPLICAS_METRIC)


async def _until_replicas(
    session: Session, urls: dict[str, str], count: int, timeout_s: float, what: str
) -> float | None:
    """Seconds until every node in ``urls`` reports ``count`` replicas (progress every ~5 s); None at
    the timeout."""
    start = time.monotonic()
    said = start
    while True:
        values = await _replicas(session, urls)
        if all(value == count for value in values.values()):
            return time.monotonic() - start
        now = time.monotonic()
        if now - start > timeout_s:
            say(f"  {what}: not done after {timeout_s:g} s: {values}")
            return None
        if now - said >= 5:
            said = now
            say(f"  {what}: " + ", ".join(f"{n} {number(v)}/{count}" for n, v in values.items()))
        await asyncio.sleep(POLL_S)


async def measure_size(partitions: int, directory: str, idle_s: float, timeout_s: float) -> Row:
    row = Row(partitions)
    cluster = LocalCluster(tempfile.mkdtemp(prefix=f"scale-{partitions}-", dir=directory))
    try:
        await asyncio.to_thread(cluster.start)
        admin = RaftlogClient(
            [cluster.urls["n1"]], timeout_s=timeout_s, retries=None, retry_for_s=timeout_s, backoff_max_s=0.5
        )
        try:
            await _phases(row, cluster, admin, Probe(admin.session, dict(cluster.urls)), idle_s, timeout_s)
        finally:
            await admin.close()
    finally:
        await asyncio.to_thread(cluster.stop)
        row.log_problems = sum(len(lines) for lines in node_log_problems(cluster).values())
    return row


async def _phases(
    row: Row,
    cluster: LocalCluster,
    admin: RaftlogClient,
    probe: Probe,
    idle_s: float,
    timeout_s: float,
) -> None:
    run = _Run(row, cluster, admin, probe, timeout_s)
    await admin.create_topic(PROBE_TOPIC, partitions=1, replication_factor=REPLICATION_FACTOR)
    task = asyncio.create_task(probe.run())
    try:
        if await run.create():
            await run.idle(idle_s)
            if await run.restart():
                await run.delete()
            await asyncio.sleep(2)  # the probe's view just after
    finally:
        probe.stopped.set()
        await task
        row.probe = {phase: ProbeSummary.of(samples) for phase, samples in probe.samples.items()}


@dataclass(slots=True)
class _Run:
    """The phases of one size, each filling its cells of ``row``; a phase that times out says so there
    and returns False."""

    row: Row
    cluster: LocalCluster
    admin: RaftlogClient  # asks n1; retries 503 and unreachable for up to timeout_s
    probe: Probe
    timeout_s: float

    @property
    def session(self) -> Session:
        return self.admin.session

    @property
    def urls(self) -> dict[str, str]:
        return dict(self.cluster.urls)

    def _phase(self, name: str, what: str = "") -> None:
        self.probe.phase = name
        say(f"{self.row.partitions:,} partitions: {name}{what}")

    async def create(self) -> bool:
        row = self.row
        self._phase("create")
        start = time.monotonic()
        await self.admin.create_topic("big", partitions=row.partitions, replication_factor=REPLICATION_FACTOR)
        row.create_answer_s = time.monotonic() - start
        count = row.partitions + 1
        if await _until_replicas(self.session, self.urls, count, self.timeout_s, "replicas open") is None:
            row.timeouts.append("create")
            return False
        row.create_open_s = time.monotonic() - start
        return True

    async def idle(self, idle_s: float) -> None:
        row = self.row
        self._phase("idle")
        await asyncio.sleep(QUIET_WAIT_S)
        pids = dict(self.cluster.pids)
        meter = CpuMeter(pids)
        await asyncio.sleep(idle_s)
        use = meter.stop()
        row.idle_cpu_pct = 100 * rate(use.nodes_total_s, use.seconds)
        rss = [value for value in (_rss(pid) for pid in pids.values()) if value is not None]
        fds = [value for value in (_fds(pid) for pid in pids.values()) if value is not None]
        row.rss_mib_max = max(rss, default=None)
        row.fds_max = max(fds, default=None)

    async def restart(self) -> bool:
        row = self.row
        self._phase("restart", f" {VICTIM}")
        self.probe.down.add(VICTIM)
        await asyncio.to_thread(self.cluster.control, "stop", VICTIM)
        start = time.monotonic()
        await asyncio.to_thread(self.cluster.control, "start", VICTIM)
        self.probe.down.discard(VICTIM)
        victim = {VICTIM: self.urls[VICTIM]}
        what = f"{VICTIM} replicas open"
        if await _until_replicas(self.session, victim, row.partitions + 1, self.timeout_s, what) is None:
            row.timeouts.append("restart")
            return False
        row.restart_open_s = time.monotonic() - start
        page = await _metrics(self.session, victim[VICTIM])
        row.restart_elections = None if page is None else page.get(ELECTIONS_METRIC)
        row.restart_quiet_s = await _until_quiet(self.cluster, row.idle_cpu_pct, start, self.timeout_s)
        if row.restart_quiet_s is None:
            row.timeouts.append("restart quiet")
        return True

    async def delete(self) -> None:
        row = self.row
        self._phase("delete")
        urls = self.urls
        terms = {t for t in (await _controller_terms(self.session, urls)).values() if t is not None}
        start = time.monotonic()
        await self.admin.delete_topic("big")
        while True:
            values = await _replicas(self.session, urls)
            terms |= {t for t in (await _controller_terms(self.session, urls)).values() if t is not None}
            if all(value == 1 for value in values.values()):
                row.delete_s = time.monotonic() - start
                break
            if time.monotonic() - start > self.timeout_s:
                row.timeouts.append("delete")
                break
            await asyncio.sleep(POLL_S)
        row.controller_elections = len(terms) - 1 if terms else None


async def _until_quiet(
    cluster: LocalCluster, idle_pct: float | None, start: float, timeout_s: float
) -> float | None:
    """Seconds from ``start`` to the end of the first 5 s window whose cluster CPU is back to idle."""
    if idle_pct is None:
        return None
    while time.monotonic() - start < timeout_s:
        meter = CpuMeter(dict(cluster.pids))
        await asyncio.sleep(RECOVERY_WINDOW_S)
        use = meter.stop()
        if recovered(100 * rate(use.nodes_total_s, use.seconds), idle_pct):
            return time.monotonic() - start
    return None


async def _controller_terms(session: Session, urls: dict[str, str]) -> dict[str, float | None]:
    return await _metric_per_node(session, urls, CONTROLLER_TERM_METRIC)


# -- command line ----------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--partitions", type=parse_sizes, default=parse_sizes(PARTITIONS_DEFAULT),
        help=f"sizes of the big topic, one fresh cluster each (default {PARTITIONS_DEFAULT})",
    )  # fmt: skip
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="idle CPU window (default 20)")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="bound of each phase (default 600)")
    parser.add_argument("--dir", default=None, help="where the clusters' data directories go (default: /tmp)")
    add_json_argument(parser, "the rows")


def run_from_args(args: argparse.Namespace) -> int:
    if args.idle_seconds <= 0 or args.timeout_s <= 0:
        return refused("scale", "--idle-seconds and --timeout-s must be > 0")
    directory = args.dir or tempfile.gettempdir()
    os.makedirs(directory, exist_ok=True)
    rows: list[Row] = []
    for size in args.partitions:
        try:
            rows.append(asyncio.run(measure_size(size, directory, args.idle_seconds, args.timeout_s)))
        except RuntimeError as error:
            say(f"{size:,} partitions: {error}")
            failed = Row(size)
            failed.timeouts.append(f"run ({error})")
            rows.append(failed)
        print(format_table(rows[-1:]), file=sys.stderr if args.json == STDOUT else sys.stdout, flush=True)
    emit(args.json, "\n" + format_table(rows), [asdict(row) for row in rows])
    return 1 if any(row.timeouts for row in rows) else 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_from_args(standalone_parser("scale", DESCRIPTION, add_arguments).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
