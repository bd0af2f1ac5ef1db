"""``raftlog bench kafka-tools``: Apache Kafka's own perf tools against raftlog and against Apache Kafka.

One run starts a 3-node raftlog cluster (``raftlog dev``, Kafka listeners), drives it, stops it, then
does the same with a 3-node Apache Kafka (the version of scripts/kafka/pom.xml; KRaft, RF 3,
``min.insync.replicas=2``, its default: acknowledged before fsync; ``kafka_peer.KafkaCluster``), and runs
on each, from the jars
``scripts/kafka/install.sh`` installs (the classes ``bin/kafka-*-perf-test.sh`` run):

- ``ProducerPerformance`` (``kafka-producer-perf-test.sh``): ``--records`` records of each size into a
  topic of ``--partitions`` partitions, acks=all, unthrottled, by ``--producers`` processes at once (each
  its share of the records);
- ``ConsumerPerformance`` (``kafka-consumer-perf-test.sh``): that topic read by one consumer, then by a
  group of ``--group-members`` consumer processes (each reads its share; the group's rate is every
  record read over the span from the first one's start to the last one's end);
- ``EndToEndLatency``: ``--e2e-records`` records of 1 KiB, acks=all, one at a time, each sent and then
  polled for (its p50, p99 and p99.9 in whole ms).

Around each tool the servers' CPU seconds (all three nodes, from /proc as ``cpu.CpuMeter``) are read and
printed per million records the tool moved. The table sets each row's two values side by side with the
ratio raftlog/Kafka. Each tool is bounded by ``--tool-timeout``; nothing is asserted on speed.

    raftlog bench kafka-tools [--record-sizes 1024,100] [--records 1000000,3000000] [--partitions 3]
        [--producers 1] [--group-members 3] [--e2e-records 5000] [--systems raftlog,kafka] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from raftlog_bench import arguments
from raftlog_bench.cpu import CpuMeter, wait_quiet
from raftlog_bench.kafka_peer import KAFKA_VERSION, kafka_libs, log_config
from raftlog_bench.kafka_tools_output import (
    CONSUMER_TIMEOUT_MS,
    CpuOfRun,
    ToolRun,
    consumer_runs,
    end_to_end_runs,
    parse_consumer,
    parse_end_to_end,
    parse_producer,
    producer_runs,
    table,
)
from raftlog_bench.output import emit, say
from raftlog_bench.processes import PeerMissing
from raftlog_bench.targets import Layout

DESCRIPTION = "Apache Kafka's perf tools (producer, consumer, end-to-end latency) against raftlog and Kafka"
SYSTEMS = ("raftlog", "kafka")
TOOLS = "org.apache.kafka.tools."
# As kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh: a heap of 512 MiB, and the collector
# options kafka-run-class.sh gives every tool.
TOOL_JVM = (
    "-Xmx512m", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
)  # fmt: skip
E2E_BYTES = 1024


@dataclass(frozen=True)  # no slots: its class attributes are the options' defaults
class Config:
    record_sizes: tuple[int, ...] = (1024, 100)
    records: tuple[int, ...] = (1_000_000, 3_000_000)  # per size, in the order of record_sizes
    partitions: int = 3
    group_members: int = 3
    e2e_records: int = 5_000
    systems: tuple[str, ...] = SYSTEMS
    tool_timeout: float = 600.0
    wait_quiet: float = 0.0
    dir: str = os.curdir
    keep: bool = False  # the clusters' data and the tools' outputs kept in --dir
    producers: int = 1


class Tools:
    """Runs the perf tools' classes against one cluster (``bootstrap``), each a JVM of its own, its
    output and log kept under ``directory``; ``pids`` are the servers' processes whose CPU is read."""

    def __init__(
        self, system: str, bootstrap: str, pids: dict[str, int], directory: str, config: Config
    ) -> None:
        self.system, self.bootstrap, self.pids, self.config = system, bootstrap, pids, config
        self.directory = directory
        self.libs = str(kafka_libs())
        self.logs = os.path.join(directory, "tools-log4j2.properties")
        with open(self.logs, "w", encoding="utf-8") as f:
            f.write(log_config(os.path.join(directory, "tools.log")))
        self._count = 0

    def argv(self, tool: str, *args: str) -> list[str]:
        return [
            "java", *TOOL_JVM, f"-Dlog4j2.configurationFile={self.logs}", "-cp", f"{self.libs}/*",
            TOOLS + tool, *args,
        ]  # fmt: skip

    def run(self, label: str, commands: Sequence[list[str]]) -> tuple[list[str], CpuOfRun, float]:
        """Run ``commands`` at once, wait for all (each bounded by the tool timeout); their outputs, the
        servers' CPU over the run and the tools' own CPU seconds."""
        if self.config.wait_quiet > 0:
            wait_quiet(self.config.wait_quiet)
        say(f"{self.system}: {label}")
        children_before = _children_cpu_s()
        meter = CpuMeter(self.pids)
        processes, outputs = [], []
        for command in commands:
            self._count += 1
            path = os.path.join(
                self.directory,
                f"{self._count:02d}-{command[command.index('-cp') + 2].removeprefix(TOOLS)}.out",
            )
            out = open(path, "w+", encoding="utf-8")  # noqa: SIM115 (closed below)
            processes.append(
                subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            )
            outputs.append(out)
        deadline = time.monotonic() + self.config.tool_timeout
        try:
            for process in processes:
                try:
                    process.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise RuntimeError(
                        f"{self.system}: {label} did not end within {self.config.tool_timeout:.0f} s "
                        f"(--tool-timeout); its output is in {self.directory}"
                    ) from None
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        use = meter.stop()
        texts = []
        for out, process in zip(outputs, processes, strict=True):
            out.seek(0)
            texts.append(out.read())
            out.close()
            if process.returncode != 0:
                raise RuntimeError(
                    f"{self.system}: {label} exited with {process.returncode}: {texts[-1].strip()[-2000:]}"
                )
        tool_cpu_s = _children_cpu_s() - children_before
        other = None  # CpuMeter counts the tools' JVMs (our children) as others: they are the load
        if use.other_pct is not None and use.seconds > 0:
            other = max(0.0, use.other_pct - 100 * tool_cpu_s / use.seconds)
        return texts, CpuOfRun(use.nodes_total_s, use.seconds, other), tool_cpu_s

    def produce(self, topic: str, size: int, records: int, producers: int) -> list[ToolRun]:
        share = math.ceil(records / producers)
        command = self.argv(
            "ProducerPerformance", "--topic", topic, "--num-records", str(share),
            "--record-size", str(size), "--throughput", "-1",
            "--producer-props", "acks=all", f"bootstrap.servers={self.bootstrap}",
        )  # fmt: skip
        commands = [command] * producers
        who = "" if producers == 1 else f"{producers} producers, "
        texts, cpu, tool_cpu = self.run(
            f"ProducerPerformance, {who}{share * producers:,} records of {size} B", commands
        )
        runs = producer_runs(self.system, size, [parse_producer(text) for text in texts], cpu)
        return _with_tool_cpu(runs, tool_cpu)

    def consume(self, topic: str, size: int, records: int, members: int) -> list[ToolRun]:
        group = f"kafka-tools-{uuid.uuid4().hex[:8]}"
        share = math.ceil(records / members)
        commands = [
            self.argv(
                "ConsumerPerformance",
                "--bootstrap-server",
                self.bootstrap,
                "--topic",
                topic,
                "--messages",
                str(share),
                "--group",
                group,
                "--timeout",
                str(CONSUMER_TIMEOUT_MS),
            )
            for _ in range(members)
        ]
        who = "one consumer" if members == 1 else f"a group of {members} consumers"
        texts, cpu, tool_cpu = self.run(
            f"ConsumerPerformance, {who}, {records:,} records of {size} B", commands
        )
        runs = consumer_runs(self.system, size, members, [parse_consumer(t) for t in texts], cpu)
        return _with_tool_cpu(runs, tool_cpu)

    def end_to_end(self, topic: str, records: int) -> list[ToolRun]:
        command = self.argv("EndToEndLatency", self.bootstrap, topic, str(records), "all", str(E2E_BYTES))
        (text,), cpu, tool_cpu = self.run(f"EndToEndLatency, {records:,} records of {E2E_BYTES} B", [command])
        return _with_tool_cpu(
            end_to_end_runs(self.system, E2E_BYTES, parse_end_to_end(text, records), cpu), tool_cpu
        )


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # the tools' JVMs, once reaped
    return usage.ru_utime + usage.ru_stime


def _with_tool_cpu(runs: list[ToolRun], tool_cpu_s: float) -> list[ToolRun]:
    """The tools' own CPU seconds (the load generator's) beside each run's numbers."""
    return [dataclasses.replace(r, detail={**r.detail, "tool_cpu_s": round(tool_cpu_s, 2)}) for r in runs]


def measure(tools: Tools, create: Callable[[str, int], None], config: Config) -> list[ToolRun]:
    """Every tool against one system: produce each size, read it back with one consumer and a group,
    then the end-to-end latency on a topic of one partition."""
    runs: list[ToolRun] = []
    prefix = f"kt{os.getpid()}"
    for size, records in zip(config.record_sizes, config.records, strict=True):
        topic = f"{prefix}-{size}"
        create(topic, config.partitions)
        runs += tools.produce(topic, size, records, config.producers)
        runs += tools.consume(topic, size, records, 1)
        if config.group_members > 1:
            runs += tools.consume(topic, size, records, config.group_members)
        say(table([r for r in runs if r.system == tools.system]))
    if config.e2e_records > 0:
        topic = f"{prefix}-e2e"
        create(topic, 1)
        runs += tools.end_to_end(topic, config.e2e_records)
    return runs


def topic_creator(system: str, bootstrap: str) -> Callable[[str, int], None]:
    """Topics made with replication factor 3 through the AdminClient, waiting until each partition has a
    leader and three in-sync replicas (``KafkaAdmin``, the same call on both systems, each named)."""
    from raftlog_bench.kafka_peer import KafkaAdmin

    def create(topic: str, partitions: int) -> None:
        async def made() -> None:
            admin = KafkaAdmin(bootstrap, 1 << 20, system)
            await admin.connect()
            await admin.create(Layout(topic, partitions, 0, 1))

        asyncio.run(made())

    return create


def run_raftlog(config: Config, parent: str) -> list[ToolRun]:
    from raftlog_client.local_cluster import LocalCluster

    directory = tempfile.mkdtemp(prefix="raftlog-bench-kafka-tools-raftlog-", dir=parent)
    try:
        with LocalCluster(os.path.join(directory, "cluster")) as cluster:
            say(f"raftlog: 3 nodes up, Kafka listeners {cluster.bootstrap_servers}, pids {cluster.pids}")
            tools = Tools("raftlog", cluster.bootstrap_servers, dict(cluster.pids), directory, config)
            return measure(tools, topic_creator("raftlog", cluster.bootstrap_servers), config)
    finally:
        _remove(directory, config)


def run_kafka(config: Config, parent: str) -> list[ToolRun]:
    from raftlog_bench.kafka_peer import KafkaCluster

    directory = tempfile.mkdtemp(prefix="raftlog-bench-kafka-tools-kafka-", dir=parent)
    cluster = KafkaCluster(os.path.join(directory, "cluster"))
    try:
        cluster.start()
        say(f"kafka: 3 KRaft brokers up: {cluster.bootstrap_servers}, pids {cluster.pids}")
        tools = Tools("kafka", cluster.bootstrap_servers, cluster.pids, directory, config)
        return measure(tools, topic_creator("kafka", cluster.bootstrap_servers), config)
    finally:
        cluster.stop()
        _remove(directory, config)


def _remove(directory: str, config: Config) -> None:
    if config.keep:
        say(f"kept the cluster's data and the tools' outputs in {directory}")
    else:
        shutil.rmtree(directory, ignore_errors=True)


def problem(config: Config) -> str | None:
    """What stops the run before anything starts: bad options, Kafka's jars (its tools) or java missing."""
    if not 1 <= config.producers <= 64:
        return f"--producers takes 1 to 64 processes, not {config.producers}"
    if len(config.records) != len(config.record_sizes):
        return f"--records gives {len(config.records)} counts for {len(config.record_sizes)} --record-sizes"
    unknown = set(config.systems) - set(SYSTEMS)
    if unknown or not config.systems:
        return f"--systems takes {', '.join(SYSTEMS)}; not {', '.join(sorted(unknown)) or 'none'}"
    try:
        kafka_libs()
    except PeerMissing as exc:
        return str(exc)
    if shutil.which("java") is None:
        return "java is not installed: run scripts/kafka/install.sh (it installs Debian's Java 17)"
    return None


def run(config: Config) -> list[ToolRun]:
    os.makedirs(config.dir, exist_ok=True)
    runs: list[ToolRun] = []
    for system in config.systems:  # one after the other: never both on the machine at once
        runs += (run_raftlog if system == "raftlog" else run_kafka)(config, config.dir)
    return runs


# Each option sets Config's field of its name and defaults to it: (option, type, help).
OPTIONS: tuple[tuple[str, Callable[[str], Any], str], ...] = (
    ("--record-sizes", arguments.positive_ints,
     "bytes per record of the producer and consumer runs (default 1024,100)"),
    ("--records", arguments.positive_ints,
     "records produced and read of each size, in --record-sizes' order (default 1000000,3000000)"),
    ("--partitions", int, "of each topic (default 3)"),
    ("--producers", int, "ProducerPerformance processes at once, each its share of --records (default 1)"),
    ("--group-members", int, "consumer processes of the group read (default 3; 1: no group read)"),
    ("--e2e-records", int, "EndToEndLatency's records of 1 KiB (default 5000; 0: not run)"),
    ("--systems", lambda text: tuple(text.split(",")), "which systems, in order (default raftlog,kafka)"),
    ("--tool-timeout", float,
     "seconds each tool run may take before the benchmark stops with an error (default 600)"),
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for option, kind, text in OPTIONS:
        default = getattr(Config, option.removeprefix("--").replace("-", "_"))
        parser.add_argument(option, type=kind, default=default, help=text)
    parser.add_argument(
        "--keep", action="store_true", help="keep the clusters' data and the tools' outputs in --dir"
    )
    arguments.add_wait_quiet_argument(parser, "before each tool run,")
    arguments.add_dir_argument(parser, "the clusters' directories")
    arguments.add_json_argument(parser, "every run")


def run_from_args(args: argparse.Namespace) -> int:
    config = arguments.config_of(
        Config, args, partitions=max(1, args.partitions), group_members=max(1, args.group_members),
        e2e_records=max(0, args.e2e_records),
    )  # fmt: skip
    trouble = problem(config)
    if trouble is not None:
        return arguments.refused("kafka-tools", trouble)
    say(f"kafka-tools: Apache Kafka {KAFKA_VERSION}'s perf tools; load average {os.getloadavg()}")
    runs = run(config)
    results: dict[str, Any] = {
        "config": asdict(config),
        "load_average": os.getloadavg(),
        "runs": [asdict(r) for r in runs],
    }
    emit(args.json, table(runs), results)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments.standalone_parser("kafka-tools", DESCRIPTION, add_arguments)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
