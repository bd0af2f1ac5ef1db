"""``raftlog bench perf --transactions``: what a failed round does to the count (a client that fails as
told), the read_committed reader's verdict, the slowdown table and its goal, the option checks, and one
tiny run against raftlog and Apache Kafka in the same run. Numbers are printed, never asserted on."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from raftlog_bench import perf, perf_transactions
from raftlog_bench.arguments import standalone_parser
from raftlog_bench.cluster_report import LatencySummary
from raftlog_bench.kafka_peer import SHORT_LIVED, kafka_libs
from raftlog_bench.perf_report import (
    PhaseResult,
    Report,
    Workload,
    format_report,
    goals,
    phase_from_dict,
    transaction_rows,
)
from raftlog_bench.perf_transactions import _Counts, _RoundProducer, read_verdict
from raftlog_bench.targets import Layout

ROOT = Path(__file__).resolve().parents[2]


# -- a round's failures ----------------------------------------------------------------------------------


class _ScriptedProducer:
    """confluent-kafka's Producer as the rounds use it: every record delivered at once; each commit takes
    the next error of ``commit_errors`` (a class attribute the test sets) to raise, while there is one."""

    commit_errors: list[KafkaError] = []

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.calls: list[str] = []
        self.partitions: list[int] = []

    def init_transactions(self, timeout: float) -> None:
        self.calls.append("init_transactions")

    def begin_transaction(self) -> None:
        self.calls.append("begin_transaction")

    def produce(self, topic: str, value: bytes, partition: int, on_delivery: Any) -> None:
        self.partitions.append(partition)
        on_delivery(None, None)

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit_transaction")
        if self.commit_errors:
            raise KafkaException(self.commit_errors.pop(0))

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort_transaction")

    def flush(self, timeout: float) -> int:
        return 0

    def poll(self, timeout: float) -> int:
        return 0

    def close(self) -> None:
        self.calls.append("close")


def _producer(monkeypatch: pytest.MonkeyPatch, errors: list[KafkaError], txn_id: str | None = "t-1"):
    monkeypatch.setattr(perf_transactions, "Producer", _ScriptedProducer)
    monkeypatch.setattr(_ScriptedProducer, "commit_errors", errors)
    round_producer = _RoundProducer("raftlog", 1, Layout("t", 3, 100, 10), "127.0.0.1:1", txn_id)
    return round_producer, round_producer.producer


def test_a_round_spreads_its_records_over_the_partitions_and_the_transactional_id_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rounds, client = _producer(monkeypatch, [])
    counts = _Counts()
    assert rounds.prepare(counts)
    assert client.settings["transactional.id"] == "t-1" and client.settings["enable.idempotence"]
    assert client.calls == ["init_transactions", "begin_transaction", "commit_transaction"]
    assert client.partitions == [1, 2, 0, 1, 2, 0, 1, 2, 0, 1]  # producer 1 starts at partition 1
    assert counts.tally.records == 10 and len(counts.commit_waits) == 1
    plain, plain_client = _producer(monkeypatch, [], txn_id=None)
    assert "transactional.id" not in plain_client.settings
    assert plain.prepare(counts) and plain_client.calls == []  # no transaction: produce, flush


def test_an_abortable_commit_is_aborted_counted_by_name_and_the_producer_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    abortable = KafkaError(KafkaError.TRANSACTION_ABORTABLE, "marker refused", txn_requires_abort=True)
    rounds, client = _producer(monkeypatch, [abortable])
    counts = _Counts()
    rounds.run(time.perf_counter() + 0.05, counts)
    assert counts.tally.errors == {"commit_transaction TRANSACTION_ABORTABLE": 1}
    assert client.calls.count("abort_transaction") == 1
    committed = client.calls.count("commit_transaction") - 1
    assert committed >= 1 and counts.tally.records == 10 * committed  # the aborted round is not counted
    assert counts.unknown == 0  # an aborted transaction's records are known not to be there


def test_a_retriable_commit_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, "loading", retriable=True)
    rounds, client = _producer(monkeypatch, [busy])
    counts = _Counts()
    assert rounds.prepare(counts)
    assert client.calls == [
        "init_transactions",
        "begin_transaction",
        "commit_transaction",
        "commit_transaction",
    ]
    assert counts.tally.errors == {"commit_transaction COORDINATOR_LOAD_IN_PROGRESS": 1}
    assert counts.tally.records == 10


def test_a_fatal_commit_stops_the_producer_and_leaves_its_round_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fenced = KafkaError(KafkaError._FENCED, "producer fenced", fatal=True)
    rounds, client = _producer(monkeypatch, [fenced])
    counts = _Counts()
    started = time.perf_counter()
    rounds.run(started + 30, counts)  # returns at the error, long before its deadline
    assert time.perf_counter() - started < 5
    assert counts.tally.errors == {"commit_transaction _FENCED": 1}
    assert "abort_transaction" not in client.calls
    assert counts.tally.records == 0 and counts.unknown == 10


def test_the_reader_must_read_every_committed_record_and_nothing_more() -> None:
    assert read_verdict(500, 500, 0) is None
    assert read_verdict(550, 500, 100) is None  # a round without an answer may have committed
    assert "missing" in str(read_verdict(499, 500, 0))
    assert "aborted or open transactions" in str(read_verdict(501, 500, 0))
    assert "500 to 600" in str(read_verdict(601, 500, 100))


# -- the report ------------------------------------------------------------------------------------------


def _workload() -> Workload:
    return Workload(
        (100,), 1000, 3, 8, 10.0, "all", True, 30.0, 1000.0, 10.0, 100, 4 << 20, 0.0, client="kafka",
        transaction_records=100,
    )  # fmt: skip


def _phase(system: str, phase: str, per_s: float, p50_ms: float = 10.0) -> PhaseResult:
    latency = LatencySummary(100, p50_ms, 2 * p50_ms, 2 * p50_ms, 2 * p50_ms)
    return PhaseResult(
        system, phase, 100, 100, 3, 8, int(per_s * 10), 0, 10.0, per_s, per_s * 100 / 1e6, latency, {},
        {"n1": 50.0}, 5.0, 3.0, commit_latency=LatencySummary(100, p50_ms / 2, p50_ms, p50_ms, p50_ms),
    )  # fmt: skip


def _report() -> Report:
    report = Report(_workload(), ["raftlog", "kafka", "kafka-fsync"], {"cpus": 2, "python": "3", "loop": "x"})
    report.phases = [
        _phase("raftlog", "plain", 40_000), _phase("raftlog", "plain-rc", 400_000),
        _phase("raftlog", "txn", 10_000, p50_ms=80.0), _phase("raftlog", "txn-rc", 200_000),
        _phase("kafka", "plain", 30_000), _phase("kafka", "txn", 6_000),  # 5x: raftlog's 4x is better
        _phase("kafka-fsync", "plain", 20_000), _phase("kafka-fsync", "txn", 10_000),  # 2x: raftlog worse
    ]  # fmt: skip
    return report


def test_the_slowdown_is_plain_over_transactional_and_its_goal_is_kafkas_own() -> None:
    report = _report()
    rows = {row.system: row for row in transaction_rows(report.phases)}
    assert rows["raftlog"].slowdown == pytest.approx(4.0)
    assert rows["raftlog"].read_slowdown == pytest.approx(2.0)
    assert rows["kafka"].read_slowdown is None  # not read back: no read slowdown
    found = {goal.name: goal for goal in goals(report)}
    against_kafka = found["transactions of 100, 100 B: raftlog's slowdown / kafka's <= 1"]
    assert against_kafka.met and against_kafka.value == pytest.approx(0.8)
    against_fsync = found["transactions of 100, 100 B: raftlog's slowdown / kafka-fsync's <= 1"]
    assert not against_fsync.met and against_fsync.value == pytest.approx(2.0)


def test_the_report_shows_the_transactions_table() -> None:
    text = format_report(_report())
    assert "transactions of 100 records of 100 B" in text and "commit_transaction returned" in text
    line = next(line for line in text.splitlines() if line.startswith("  raftlog "))
    # plain/s, txn/s, slowdown, then p50/p99 of a transaction, its commit, a plain round, its flush
    assert line.split()[3:9] == ["40,000", "10,000", "4.00x", "80.0/160.0", "40.0/80.0", "10.0/20.0"]
    assert "400,000" in line and "200,000" in line and "2.00x" in line


def test_a_phase_keeps_its_commit_latency_through_json() -> None:
    phase = _phase("raftlog", "txn", 10_000)
    assert phase_from_dict(json.loads(json.dumps(dataclasses.asdict(phase)))) == phase


def _args(*argv: str) -> argparse.Namespace:
    return standalone_parser("perf", perf.DESCRIPTION, perf.add_arguments).parse_args(list(argv))


def test_option_checks() -> None:
    workload = perf.workload_of(_args("--transactions"))
    assert workload.transaction_records == 100 and workload.client == "kafka"
    assert perf.workload_of(_args("--transactions", "10", "--compare", "kafka")).transaction_records == 10
    assert perf.workload_of(_args()).transaction_records == 0  # the ordinary phases
    assert perf.problem(_args("--transactions", "--compare", "kafka,kafka-fsync")) is None
    assert "Apache Kafka only" in str(perf.problem(_args("--transactions", "--compare", "nats")))
    assert "--client kafka" in str(perf.problem(_args("--transactions", "--client", "http")))
    assert "no --servers" in str(perf.problem(_args("--transactions", "--servers", "http://h:1")))
    assert "--restart-mib" in str(perf.problem(_args("--transactions", "--restart-mib", "10")))
    assert "[1, 10000]" in str(perf.problem(_args("--transactions", "0")))


# -- one tiny run ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_transactions_run_on_raftlog_and_apache_kafka_in_one_run(tmp_path: Path) -> None:
    kafka_libs()  # installed by make test (scripts/bootstrap.sh runs scripts/kafka/install.sh)
    out = tmp_path / "perf.json"
    argv = [
        sys.executable, "-m", "raftlog_cli", "bench", "perf", "--transactions", "20", "--compare", "kafka",
        "--dir", str(tmp_path), "--duration", "1", "--concurrency", "2", "--consume-seconds", "20",
        "--settle-seconds", "0.5", "--json", str(out),
    ]  # fmt: skip
    env = {**os.environ, "KAFKA_JVM_PERFORMANCE_OPTS": shlex.join(SHORT_LIVED)}  # brokers for this test
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    for system in ("raftlog", "kafka"):
        phases = {p["phase"]: p for p in report["phases"] if p["system"] == system}
        assert set(phases) == {"plain", "plain-rc", "txn", "txn-rc"}, system
        assert all(p["errors"] == {} for p in phases.values()), system
        for kind in ("plain", "txn"):
            produced, read = phases[kind], phases[kind + "-rc"]
            assert produced["records"] > 0 and produced["commit_latency"]["count"] > 0
            # every committed record read back, the producers' first (uncounted) rounds included
            assert read["records"] == read["expected"] == produced["records"] + 2 * 20
    assert "transactions against plain produce" in done.stdout
    assert any(goal["name"].startswith("transactions of 20, 100 B") for goal in report["goals"])
    assert not [p for p in os.listdir(tmp_path) if p.startswith("raftlog-bench-")]  # cleaned up
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", "a server outlived the benchmark"
