"""``raftlog bench perf``: its pure parts (statistics, ratios, goals, the table, option checks, the peers'
configuration), and one short run against a raftlog cluster it starts itself. Numbers are printed,
never asserted on."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from raftlog_bench import cluster as bench_cluster
from raftlog_bench import perf, perf_phases, perf_report, perf_systems, readers
from raftlog_bench.arguments import standalone_parser
from raftlog_bench.cluster_report import LatencySummary
from raftlog_bench.cpu import CpuMeter, CpuUse
from raftlog_bench.peers import nats_config, rabbit_node_config
from raftlog_bench.perf import parse_peers
from raftlog_bench.perf_report import (
    IdleResult,
    PhaseResult,
    Report,
    RestartResult,
    Workload,
    cpu_percentages,
    format_report,
    goals,
    phase_ratios,
    ratio,
)
from raftlog_bench.processes import PeerMissing
from raftlog_bench.tally import Tally, progress_line
from raftlog_bench.targets import Layout

ROOT = Path(__file__).resolve().parents[2]


def _workload() -> Workload:
    return Workload((100, 1024), 1000, 3, 8, 10.0, "all", True, 30.0, 1000.0, 10.0, 100, 4 << 20, 0.0)


def _phase(system: str, phase: str, size: int, per_s: float, p99_ms: float = 5.0) -> PhaseResult:
    latency = LatencySummary(100, p99_ms / 2, p99_ms, p99_ms, p99_ms)
    return PhaseResult(
        system, phase, size, 1000, 3, 8, int(per_s * 10), 10_000 if phase == "single" else 0, 10.0,
        per_s, per_s * size / 1e6, latency, {}, {"n1": 50.0}, 20.0, 3.0,
    )  # fmt: skip


def test_ratio_is_ours_over_theirs_and_none_without_data() -> None:
    assert ratio(200.0, 100.0) == pytest.approx(2.0)
    assert ratio(0.0, 100.0) is None
    assert ratio(100.0, 0.0) is None


def test_phase_ratios_pair_the_same_phase_and_size() -> None:
    phases = [
        _phase("raftlog", "produce", 100, 90_000),
        _phase("raftlog", "produce", 1024, 40_000),
        _phase("nats", "produce", 100, 30_000),
        _phase("rabbitmq", "produce", 100, 180_000),
        _phase("raftlog", "single", 100, 1000, p99_ms=4.0),
        _phase("nats", "single", 100, 1000, p99_ms=2.0),
    ]
    assert phase_ratios(phases, "nats") == [("produce", 100, pytest.approx(3.0)), ("single", 100, 0.5)]
    assert phase_ratios(phases, "rabbitmq") == [("produce", 100, pytest.approx(0.5))]


def test_goals_speak_only_to_measured_numbers() -> None:
    report = Report(_workload(), ["raftlog", "nats"], {"cpus": 2})
    report.phases = [
        _phase("raftlog", "produce", 100, 90_000),
        _phase("nats", "produce", 100, 30_000),
        _phase("raftlog", "single", 100, 1000, p99_ms=7.0),
    ]
    report.idle = IdleResult(100, 10.0, {"n1": 3.0, "n2": 2.0, "n3": 2.5}, 1.0, 0.84)
    report.restart = RestartResult(1024.0, "n1", True, 30.0, 1.5, 2.5, 4.0)
    found = {goal.name: goal for goal in goals(report)}
    assert found["produce 100 B: raftlog / nats >= 2"].met
    assert not any(name.startswith("single-record") for name in found)  # a goal against kafka-fsync only
    assert found["idle CPU % of one core, 100 partitions <= 10"].value == pytest.approx(7.5)
    assert any(name.startswith("restart") and goal.met for name, goal in found.items())
    assert not any("rabbitmq" in name for name in found)
    text = format_report(report)
    assert "idle: 100 partitions" in text and "created and led in 0.84 s" in text


def test_goals_against_kafka_are_the_ratios_of_one_run() -> None:
    report = Report(_workload(), ["raftlog", "kafka", "kafka-fsync"], {"cpus": 2})
    report.phases = [
        _phase("raftlog", "produce", 100, 90_000),
        _phase("kafka", "produce", 100, 150_000),  # 0.6x: met against the default (>= 0.5)
        _phase("kafka-fsync", "produce", 100, 100_000),  # 0.9x: missed against fsync (>= 1)
        _phase("raftlog", "single", 100, 1000, p99_ms=12.0),
        _phase("kafka-fsync", "single", 100, 1000, p99_ms=300.0),
        _phase("raftlog", "group1", 100, 1_000_000),
        _phase("raftlog", "group3", 100, 900_000),  # 0.9x
        _phase("kafka", "group1", 100, 1_000_000),
        _phase("kafka", "group3", 100, 600_000),  # 0.6x: ours scales 1.5x as well
        _phase("kafka-fsync", "consume", 100, 1),  # no raftlog consume: no goal
    ]
    # CPU: raftlog's servers 50% of a core for 10 s in every phase; Kafka's 50% too, but over more
    # records in its produce phase (0.6x the CPU per record of ours: 1.67x, missed)
    found = {goal.name: goal for goal in goals(report)}
    assert found["produce 100 B: raftlog / kafka >= 0.5"].met
    assert not found["produce 100 B: raftlog / kafka-fsync >= 1"].met
    assert found["single-record p99: kafka-fsync's / raftlog's >= 1"].value == pytest.approx(25.0)
    group = found["group of three over one, 100 B: raftlog's / kafka's >= 1"]
    assert group.met and group.value == pytest.approx(1.5)
    cpu = {name: goal for name, goal in found.items() if name.startswith("servers' CPU")}
    assert cpu["servers' CPU per record / kafka's <= 1.5 (worst: produce 100 B)"].value == pytest.approx(
        150_000 / 90_000
    )
    assert not cpu["servers' CPU per record / kafka's <= 1.5 (worst: produce 100 B)"].met
    assert not any("consume" in name for name in found)


def test_report_table_shows_rows_ratios_and_failures() -> None:
    report = Report(_workload(), ["raftlog", "nats", "rabbitmq"], {"cpus": 2, "python": "3.11", "loop": "x"})
    report.phases = [_phase("raftlog", "produce", 100, 90_000), _phase("nats", "produce", 100, 30_000)]
    report.failures["rabbitmq"] = "rabbitmq-server is not installed; run: scripts/bench_peers_setup.sh"
    text = format_report(report)
    assert "90,000" in text and "30,000" in text
    assert "3.00x" in text
    assert "rabbitmq  not measured: rabbitmq-server is not installed" in text


def test_cpu_percentages_are_of_one_core() -> None:
    servers, client, other = cpu_percentages(CpuUse(2.0, {"n2": 1.0, "n1": 0.5}, 0.2, 12.0))
    assert servers == {"n1": 25.0, "n2": 50.0}
    assert client == pytest.approx(10.0)
    assert other == 12.0


def test_progress_line_shows_bar_rate_and_errors() -> None:
    tally = Tally(
        records=5000, latencies=[0.001] * 10, errors=Counter({"HTTP 503": 2}), per_partition=Counter()
    )
    line = progress_line("raftlog produce", 2.5, 5.0, tally, width=10)
    assert "[#####-----]" in line
    assert "2,000/s" in line
    assert "errors 2" in line


def _args(*argv: str) -> argparse.Namespace:
    return standalone_parser("perf", perf.DESCRIPTION, perf.add_arguments).parse_args(list(argv))


def test_option_checks() -> None:
    assert perf.problem(_args()) is None
    assert "--duration" in str(perf.problem(_args("--duration", "0")))
    assert "$RAFTLOG_ADMIN_TOKEN" in str(perf.problem(_args("--token", "t0k")))  # never in argv (ps)
    assert "--settle-seconds" in str(perf.problem(_args("--settle-seconds", "-1")))
    assert perf.workload_of(_args("--settle-seconds", "0")).settle_s == 0
    assert "per request" in str(perf.problem(_args("--record-size", "65536", "--batch-size", "1000")))
    assert "--compare" in str(perf.problem(_args("--system", "nats", "--compare", "rabbitmq")))
    assert "--client kafka" in str(perf.problem(_args("--client", "kafka", "--servers", "http://h:1")))
    # beside Kafka, raftlog is driven through the same Kafka client
    assert perf.workload_of(_args("--compare", "kafka,nats")).client == "kafka"
    assert perf.workload_of(_args("--compare", "nats,rabbitmq")).client == "http"
    assert "same Kafka client" in str(perf.problem(_args("--client", "http", "--compare", "kafka-fsync")))
    assert "--client kafka" in str(perf.problem(_args("--compare", "kafka", "--servers", "http://h:1")))
    assert "--restart-mib" in str(
        perf.problem(_args("--servers", "http://127.0.0.1:1", "--restart-mib", "10"))
    )
    assert "--readers must be in [1, 16]" in str(perf.problem(_args("--readers", "0")))
    for other in (["--compare", "nats"], ["--client", "kafka"], ["--system", "kafka"]):
        assert "--readers reads raftlog over HTTP" in str(perf.problem(_args("--readers", "2", *other)))
    assert perf.workload_of(_args("--readers", "3")).readers == 3
    assert parse_peers("nats, rabbitmq,nats") == ["nats", "rabbitmq"]
    assert parse_peers("kafka,kafka-fsync") == ["kafka", "kafka-fsync"]
    with pytest.raises(Exception, match="peers are"):
        parse_peers("redpanda")


def test_workload_round_trips_through_the_child_handoff() -> None:
    workload = _workload()
    data = json.loads(json.dumps(asdict(workload)))
    assert perf_report.workload_from_dict(data) == workload
    phase = _phase("rabbitmq", "produce", 100, 1000)
    assert perf_report.phase_from_dict(json.loads(json.dumps(asdict(phase)))) == phase


def test_peer_configs_bind_loopback_and_fsync_nats() -> None:
    text = nats_config("nats1", 4222, 8222, 6222, [6223, 6224], "/tmp/store")
    assert "listen: 127.0.0.1:4222" in text and "http: 127.0.0.1:8222" in text
    assert "sync_interval: always" in text
    assert "routes: [ nats://127.0.0.1:6223, nats://127.0.0.1:6224 ]" in text
    rabbit = rabbit_node_config(1, 15671, 15551)
    assert (
        "listeners.tcp.1 = 127.0.0.1:15671" in rabbit and "stream.listeners.tcp.1 = 127.0.0.1:15551" in rabbit
    )


def test_missing_peer_names_the_setup_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise PeerMissing("rabbitmq-server is not installed; run: scripts/bench_peers_setup.sh")

    monkeypatch.setattr("raftlog_bench.peers.rabbit_check", missing)
    assert "scripts/bench_peers_setup.sh" in str(perf_systems.preflight(["rabbitmq"]))
    assert perf_systems.preflight([]) is None


@pytest.mark.slow
@pytest.mark.parametrize("client", ["http", "kafka"])
def test_perf_runs_against_a_cluster_it_starts(tmp_path: Path, client: str) -> None:
    out = tmp_path / "perf.json"
    argv = [
        sys.executable, "-m", "raftlog_cli", "bench", "perf", "--dir", str(tmp_path),
        "--duration", "1.5", "--record-size", "100", "--batch-size", "100", "--concurrency", "4",
        "--single-rate", "100", "--single-seconds", "1", "--consume-seconds", "10", "--json", str(out),
        "--settle-seconds", "0.5", "--client", client, "--e2e-rate", "100",
    ]  # fmt: skip
    if client == "http":  # the reads in two processes of their own (readers.py), partitions 0 and 2, 1
        argv += ["--readers", "2"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=150, check=False)
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    phases = {p["phase"]: p for p in report["phases"]}
    kafka_only = {"group1", "group3", "e2e"} if client == "kafka" else set()  # Kafka's clients only
    groups = kafka_only - {"e2e"}
    assert set(phases) == {"produce", "consume", "single"} | kafka_only
    if client == "kafka":  # 100 records a second for --single-seconds, each received by the consumer
        assert phases["e2e"]["records"] == phases["e2e"]["expected"] == 100
        assert phases["e2e"]["errors"] == {}
    for group in groups:
        assert phases[group]["records"] == phases[group]["expected"] == phases["produce"]["records"]
    assert phases["produce"]["records"] > 0 and phases["produce"]["errors"] == {}
    assert phases["consume"]["records"] == phases["consume"]["expected"] == phases["produce"]["records"]
    if client == "http":
        assert "2 reader processes" in done.stderr
        assert phases["consume"]["client_cpu_pct"] > 0  # the readers' CPU, counted as the client's
    assert phases["single"]["records"] == phases["single"]["expected"] == 100
    assert set(phases["produce"]["server_cpu_pct"]) == {"n1", "n2", "n3"}
    assert "records/s" in done.stdout
    topics = 3 if client == "kafka" else 2  # the produce topic, the single-record one, the end-to-end one
    assert done.stderr.count("to settle") == topics
    assert done.stderr.count("created and led in") == topics
    assert not [p for p in os.listdir(tmp_path) if p.startswith("raftlog-bench-perf-")]  # cleaned up


class _SlowTarget:
    """Answers every request after ``service_s`` and records when each one left."""

    system = "fake"

    def __init__(self, service_s: float) -> None:
        self.service_s = service_s
        self.sent_at: dict[int, float] = {}

    async def send_one(self, worker: int, partition: int) -> None:
        self.sent_at[worker] = time.perf_counter()
        await asyncio.sleep(self.service_s)


async def test_single_phase_leaves_near_each_slot_and_never_counts_an_early_send_as_speed() -> None:
    """Requests leave at most TIMER_SLACK_S before their slot; one that left early counts from its send,
    so every latency is at least the service time."""
    target = _SlowTarget(service_s=0.004)
    layout = Layout("t", 3, 100, 1)
    before = time.perf_counter()
    result = await perf_phases.single_phase(target, layout, 200.0, 0.5, {})  # type: ignore[arg-type]
    assert result.records == result.expected == 100
    start = before + 0.01  # single_phase's timetable starts 10 ms after it is called, or later
    for slot, sent in target.sent_at.items():
        assert sent >= start + slot / 200.0 - perf_phases.TIMER_SLACK_S, slot
    assert result.latency.p50_ms >= 4.0
    assert len(result.p99_per_second_ms) == 1 and result.p99_per_second_ms[0] >= 4.0  # 100 slots: 0.5 s


class _VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when nothing is ready to run, by as much as the loop would
    have waited: every timing is the program's own, none the machine's load (a loaded six-worker run ran
    1 ms requests 530 ms late, more than 1 % of them, past the stall below)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        real_select = self._selector.select  # type: ignore[attr-defined]

        def select(timeout: float | None = None) -> list[Any]:
            events = real_select(None if timeout is None else 0)
            if not events and timeout is not None and timeout > 0:
                self.now += timeout  # the wait passes at once
            return events

        self._selector.select = select  # type: ignore[attr-defined]

    def time(self) -> float:
        return self.now


def test_single_phase_shows_a_stall_in_its_second_that_the_windows_p99_hides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 400 ms stall of 10 requests in 2,000 over 4 s: the window's p99 stays below it, its second's does
    not. On the phase's own clock (``_VirtualClockLoop``, the phase's ``time.perf_counter`` read from it),
    so that what is measured is how the report folds latencies, not how late a loaded machine ran the
    other requests."""
    stall_ms = 400.0
    target = _SlowTarget(service_s=0.001)
    stalled = set(range(1200, 1210))

    async def send_one(worker: int, partition: int) -> None:
        await asyncio.sleep(stall_ms / 1000 if worker in stalled else 0.001)

    target.send_one = send_one  # type: ignore[method-assign]
    loop = _VirtualClockLoop()
    clock = types.SimpleNamespace(
        **{name: getattr(time, name) for name in dir(time) if not name.startswith("_")}
    )
    clock.perf_counter = loop.time
    monkeypatch.setattr(perf_phases, "time", clock)
    monkeypatch.setattr(bench_cluster, "time", clock)
    try:
        phase = perf_phases.single_phase(target, Layout("t", 3, 100, 1), 500.0, 4.0, {})  # type: ignore[arg-type]
        result = loop.run_until_complete(phase)
    finally:
        loop.close()
    assert result.records == 2000 and len(result.p99_per_second_ms) == 4
    shown = stall_ms - 1e-6  # the virtual clock sums float seconds: within a nanosecond of the stall
    assert result.latency.p99_ms < shown <= result.p99_per_second_ms[2]
    assert max(result.p99_per_second_ms[i] for i in (0, 1, 3)) < shown
    lines = perf_report.format_seconds([result])
    assert "worst" in lines[1] and f"window {result.latency.p99_ms:.2f} ms" in lines[1]


async def test_single_phase_shows_the_load_generators_librdkafka_cpu_second_by_second() -> None:
    """A thread named as librdkafka names its own, busy through the second second of the timetable (as an
    idempotent producer's broker thread spins while its partition has five requests in flight), shows in
    that second's figure and in the report; a second without it shows nothing of it."""
    busy, done = threading.Event(), threading.Event()

    def spin() -> None:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as comm:
            comm.write("rdk:broker1")
        busy.wait()
        end = time.perf_counter() + 0.8
        block = b"x" * 1_000_000
        while time.perf_counter() < end:
            hashlib.sha256(block).digest()  # CPU without the GIL: the timetable goes on meanwhile
        done.wait()  # a thread's CPU is read while it lives, as librdkafka's live as long as their client

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    target = _SlowTarget(service_s=0.001)

    async def send_one(worker: int, partition: int) -> None:
        if worker == 510:  # 1.02 s into the timetable at 500/s
            busy.set()
        await asyncio.sleep(0.001)

    target.send_one = send_one  # type: ignore[method-assign]
    try:
        result = await perf_phases.single_phase(target, Layout("t", 3, 100, 1), 500.0, 3.0, {})  # type: ignore[arg-type]
    finally:
        done.set()
        spinner.join()
    spin_pct = result.client_librdkafka_pct_per_second
    # 0.8 s of spinning is 80 % of a quiet core; a loaded one gives it a share (24 % seen beside a whole run,
    # 5 % beside four CPU burners and four test workers): the second it ran in shows the most, the others
    # (a loop late past the timetable's end samples once more: a third figure) next to nothing
    others = [pct for second, pct in enumerate(spin_pct) if second != 1]
    assert len(spin_pct) in (2, 3) and spin_pct[1] >= 1, spin_pct
    assert all(pct < min(5, spin_pct[1]) for pct in others), spin_pct
    lines = perf_report.format_seconds([result])
    assert "librdkafka threads, % of a core" in lines[2] and f"most {max(spin_pct):.0f}" in lines[2]


def test_servers_rss_is_read_at_each_phases_end_and_the_largest_reported() -> None:
    use = CpuMeter({"me": os.getpid(), "gone": 2**22 + 7}).stop()
    assert set(use.rss_mib) == {"me"} and use.rss_mib["me"] > 1, "a live process's RSS; a gone one left out"
    first = replace(_phase("raftlog", "produce", 100, 90_000), server_rss_mib={"n1": 100.0, "n2": 80.0})
    second = replace(_phase("raftlog", "consume", 100, 90_000), server_rss_mib={"n1": 90.0, "n2": 120.0})
    lines = perf_report.format_rss([first, second])
    assert lines[1] == "raftlog   servers' RSS, the largest at a phase's end: 100/120 MiB (220 MiB in all)"


def test_group_scaling_is_reported_per_system_and_size() -> None:
    one = replace(_phase("raftlog", "group1", 100, 400_000))
    three = replace(_phase("raftlog", "group3", 100, 600_000))
    kafka_one = replace(_phase("kafka", "group1", 100, 300_000))
    lines = perf_report.format_groups([one, three, kafka_one])
    assert lines[1:] == [
        "raftlog   group of three over group of one, 100 B: 1.50x (600,000 vs 400,000 records/s)"
    ]


def test_each_group_size_reads_with_several_new_groups_and_keeps_the_median() -> None:
    class Groups:
        system = "raftlog"

        def __init__(self) -> None:
            self.groups = 0
            self.read_s = [0.6, 0.0, 0.2]  # the second group reads fastest, the third is the median

        async def consume_group(
            self, members: int, records: int, deadline: float, progress: Callable[[int], None]
        ) -> tuple[int, int]:
            progress(records // 2)
            await asyncio.sleep(self.read_s[self.groups])
            self.groups += 1
            return records, records * 100

    target = Groups()
    layout = Layout("t", 3, 100, 1000)
    result = asyncio.run(
        perf_phases.group_phase(target, layout, Counter({0: 500, 1: 500}), 3, 30.0, {})  # type: ignore[arg-type]
    )
    assert target.groups == perf_phases.GROUP_TRIES == 3
    assert result.phase == "group3" and result.records == 1000
    slowest, fastest, median = result.tries_per_s
    assert slowest < median < fastest
    assert result.records_per_s == median
    lines = perf_report.format_groups([result])
    assert lines[1].startswith("raftlog   group3 100 B, each new group's records/s (median kept): ")


def test_slow_waits_are_the_histograms_observations_past_fifty_milliseconds() -> None:
    text = "\n".join([
        "# TYPE raftlog_journal_sync_seconds histogram",
        'raftlog_journal_sync_seconds_bucket{le="0.025"} 90.0',
        'raftlog_journal_sync_seconds_bucket{le="0.05"} 97.0',
        'raftlog_journal_sync_seconds_bucket{le="0.1"} 99.0',
        'raftlog_journal_sync_seconds_bucket{le="+Inf"} 100.0',
        "raftlog_journal_sync_seconds_count 100.0",
        "raftlog_journal_sync_seconds_sum 1.5",
        "# TYPE raftlog_gc_pause_seconds histogram",
        'raftlog_gc_pause_seconds_bucket{le="0.05"} 4.0',
        'raftlog_gc_pause_seconds_bucket{le="+Inf"} 4.0',
        "raftlog_gc_pause_seconds_count 4.0",
        "raftlog_gc_pause_seconds_sum 0.01",
        "# TYPE raftlog_produce_commit_seconds histogram",
        'raftlog_produce_commit_seconds_bucket{le="0.05"} 1.0',
        'raftlog_produce_commit_seconds_bucket{le="+Inf"} 9.0',
        "",
    ])  # fmt: skip
    assert perf_phases.slow_counts(text) == {"journal fsyncs": 3, "GC pauses": 0}  # the others absent: none
    single = replace(_phase("raftlog", "single", 100, 1000), slow_waits={"journal fsyncs": 3, "GC pauses": 0})
    assert perf_report.format_slow_waits([single])[1] == (
        "raftlog   single phase, waits over 50 ms on the nodes: journal fsyncs 3, GC pauses 0"
    )


def test_reader_processes_share_the_partitions_round_robin() -> None:
    assert readers.shares(3, 2) == [[0, 2], [1]]
    assert readers.shares(8, 3) == [[0, 3, 6], [1, 4, 7], [2, 5]]
    assert readers.shares(2, 4) == [[0], [1]]  # no process without a partition
