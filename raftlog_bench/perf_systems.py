"""The systems ``raftlog bench perf`` measures, each started, driven through the phases and stopped: raftlog
(3 nodes started here, or ``--servers``), NATS JetStream, Apache Kafka (``kafka``, ``kafka-fsync``) and
RabbitMQ streams, whose load runs as a child of the command inside RabbitMQ's network namespace
(``load_child``); the check that a peer's software is installed (``preflight``); the event loop the load
runs on, and SIGTERM and SIGINT, which stop every server started here."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import asdict
from typing import Any, Protocol, TypeVar

from raftlog_bench.loop import install_event_loop
from raftlog_bench.output import say
from raftlog_bench.peers import NatsCluster, NatsTarget, RabbitCluster, RabbitTarget
from raftlog_bench.perf_phases import DRAIN_TIMEOUT_S, drive, quiet, slow_wait_probe
from raftlog_bench.perf_raftlog_phases import idle_phase, restart_phase
from raftlog_bench.perf_report import Report, Workload, phase_from_dict, workload_from_dict
from raftlog_bench.processes import PeerMissing
from raftlog_bench.raftlog_target import RaftlogTarget
from raftlog_bench.targets import Layout
from raftlog_client.local_cluster import LocalCluster

T = TypeVar("T")


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
                    await quiet(workload)
                    report.idle = await idle_phase(extra, idle_partitions, idle_seconds, pids)
                    say(f"idle: {report.idle.total_pct:.1f}% of one core for {idle_partitions} partitions")
                if restart_mib > 0 and cluster is not None:
                    await quiet(workload)
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


NATS_CREATE_ATTEMPTS = 3  # a phase's streams asked for again after nats-py's timeout (30 s each)


class _PatientNatsTarget(NatsTarget):
    """A JetStream cluster just up sometimes leaves a stream's creation unanswered (nats-py's timeout
    after 30 s: two runs of seven on 2026-11-30): the phase's streams are asked for again, as creating a
    stream that exists with the same settings answers it as it is."""

    async def create(self, layout: Layout) -> None:
        from nats.errors import TimeoutError as NatsTimeout

        for attempt in range(1, NATS_CREATE_ATTEMPTS + 1):
            try:
                await super().create(layout)
                return
            except NatsTimeout:
                if attempt == NATS_CREATE_ATTEMPTS:
                    raise
                say(f"nats: no answer creating the streams of {layout.name}; asking again")


def run_nats(workload: Workload, parent: str, report: Report) -> None:
    with peer_cluster(parent, "nats", NatsCluster) as cluster:
        say(f"nats: 3 JetStream nodes up: {', '.join(cluster.servers)}")
        report.phases += run_async(
            drive(_PatientNatsTarget(cluster.servers), workload, cluster.pids, f"perf{os.getpid()}")
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
    e2e = workload.single_seconds + DRAIN_TIMEOUT_S if workload.e2e_rate > 0 else 0
    return len(workload.record_sizes) * per_size + workload.single_seconds + DRAIN_TIMEOUT_S + 60 + e2e


def load_child(handoff: str) -> int:
    """Inside RabbitMQ's namespace: drive the workload, write the phases to ``handoff + ".out"``."""
    with open(handoff, encoding="utf-8") as f:
        job = json.load(f)
    install_event_loop()
    workload = workload_from_dict(job["workload"])
    target = RabbitTarget(list(job["servers"]))
    pids = {str(k): int(v) for k, v in job["pids"].items()}
    stop_on_signals()
    phases = run_async(drive(target, workload, pids, f"perf{os.getpid()}"))
    with open(handoff + ".out", "w", encoding="utf-8") as f:
        json.dump([asdict(p) for p in phases], f)
    return 0


def stop_on_signals() -> None:
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
            stop_on_signals()  # remove_signal_handler restored the default action

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


def preflight(systems: Sequence[str]) -> str | None:
    """Refuse early, naming the set-up command, when a peer's software is missing (or naming the
    variable, when what it says cannot be read)."""
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
            except (PeerMissing, ValueError) as exc:
                return str(exc)
    return None
