"""Apache Kafka as the benchmark's peer: its three KRaft nodes are configured as a production cluster of three
(loopback only, RF 3, min.insync.replicas 2, fsync per message only in the ``kafka-fsync`` setting), and
``raftlog bench perf --system kafka`` starts them from the jars the project installed, drives them with
the same confluent-kafka settings as raftlog's Kafka listeners, and leaves no process or file behind."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from raftlog_bench.kafka_peer import (
    HEAP,
    KAFKA_VERSION,
    PERFORMANCE,
    SHORT_LIVED,
    KafkaCluster,
    broker_jvm_options,
    kafka_libs,
    node_properties,
)
from raftlog_bench.perf_systems import preflight

ROOT = Path(__file__).resolve().parents[2]


def _properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_each_node_is_a_broker_and_controller_of_three_on_loopback_with_rf_3() -> None:
    config = _properties(node_properties(2, 9093, [19091, 19092, 19093], "/tmp/k2", False, 9193))
    assert config["process.roles"] == "broker,controller" and config["node.id"] == "2"
    assert config["controller.quorum.voters"] == "1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093"
    assert config["listeners"] == (
        "PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:19092,SASL_PLAINTEXT://127.0.0.1:9193"
    )
    assert config["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9093,SASL_PLAINTEXT://127.0.0.1:9193"
    assert config["sasl.enabled.mechanisms"] == "SCRAM-SHA-256,SCRAM-SHA-512"
    assert config["default.replication.factor"] == "3" and config["min.insync.replicas"] == "2"
    assert config["offsets.topic.replication.factor"] == "3"
    assert config["auto.create.topics.enable"] == "false"
    assert "log.flush.interval.messages" not in config  # Kafka's default: acknowledged before fsync
    fsync = _properties(node_properties(2, 9093, [19091, 19092, 19093], "/tmp/k2", True, 9193))
    assert fsync["log.flush.interval.messages"] == "1"


def test_a_brokers_jvm_options_are_ours_unless_kafkas_variables_say_otherwise() -> None:
    assert broker_jvm_options(environ={}) == [*HEAP, *PERFORMANCE]
    assert broker_jvm_options(environ={"KAFKA_HEAP_OPTS": "-Xmx2g", "KAFKA_JVM_PERFORMANCE_OPTS": " "}) == [
        "-Xmx2g",
        *PERFORMANCE,
    ]  # a blank variable is no choice, as in kafka-run-class.sh
    environ = {"KAFKA_JVM_PERFORMANCE_OPTS": "-XX:+UseZGC -Dx='a b'"}
    assert broker_jvm_options(environ=environ) == [*HEAP, "-XX:+UseZGC", "-Dx=a b"]
    assert broker_jvm_options(SHORT_LIVED, environ) == [*HEAP, *SHORT_LIVED]  # the caller's first
    with pytest.raises(ValueError, match=r"\$KAFKA_HEAP_OPTS cannot be read as JVM options .*'-Xmx2g \"'"):
        broker_jvm_options(environ={"KAFKA_HEAP_OPTS": '-Xmx2g "'})


def test_a_variable_that_cannot_be_read_stops_the_benchmark_before_it_starts_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kafka_libs()
    monkeypatch.setenv("KAFKA_JVM_PERFORMANCE_OPTS", "-XX:+UseZGC '")
    assert preflight(["raftlog", "kafka"]) == (
        '$KAFKA_JVM_PERFORMANCE_OPTS cannot be read as JVM options (No closing quotation): "-XX:+UseZGC \'"'
    )
    monkeypatch.setenv("KAFKA_JVM_PERFORMANCE_OPTS", "-XX:+UseZGC")
    assert preflight(["raftlog", "kafka"]) is None


@pytest.mark.slow
def test_perf_drives_apache_kafka_and_cleans_up(tmp_path: Path) -> None:
    kafka_libs()  # installed by make test (scripts/bootstrap.sh runs scripts/kafka/install.sh)
    out = tmp_path / "perf.json"
    argv = [
        sys.executable, "-m", "raftlog_cli", "bench", "perf", "--system", "kafka", "--dir", str(tmp_path),
        "--duration", "1.5", "--record-size", "100", "--batch-size", "100", "--concurrency", "4",
        "--single-rate", "100", "--single-seconds", "1", "--consume-seconds", "20", "--json", str(out),
    ]  # fmt: skip
    # brokers that live for this test: the JIT's first tier and the serial collector, said in the output
    env = {**os.environ, "KAFKA_JVM_PERFORMANCE_OPTS": shlex.join(SHORT_LIVED)}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False)
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"the brokers' JVM options are {shlex.join([*HEAP, *SHORT_LIVED])}" in done.stderr
    report = json.loads(out.read_text())
    phases = {p["phase"]: p for p in report["phases"]}
    # groups and e2e: Kafka's clients
    assert set(phases) == {"produce", "consume", "group1", "group3", "single", "e2e"}
    assert phases["group1"]["records"] == phases["group3"]["records"] == phases["produce"]["records"]
    assert "group of three over group of one, 100 B" in done.stdout
    assert {p["system"] for p in report["phases"]} == {"kafka"}
    assert phases["produce"]["records"] > 0 and phases["produce"]["errors"] == {}
    assert phases["consume"]["records"] == phases["consume"]["expected"] == phases["produce"]["records"]
    assert phases["single"]["records"] == phases["single"]["expected"] == 100
    assert phases["e2e"]["records"] == phases["e2e"]["expected"] == 100 and phases["e2e"]["errors"] == {}
    assert set(phases["produce"]["server_cpu_pct"]) == {"kafka1", "kafka2", "kafka3"}
    assert f"Apache Kafka {KAFKA_VERSION}, RF 3, min.insync.replicas 2" in done.stdout
    assert done.stderr.count("created and led in") == 3  # the produce phase's, single's and e2e's topics
    assert not [p for p in os.listdir(tmp_path) if p.startswith("raftlog-bench-kafka-")]  # cleaned up
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", "a Kafka JVM outlived the benchmark"


def test_a_broker_that_cannot_start_leaves_no_other_broker_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second broker cannot be started: start fails, and the first, already running, is stopped (a
    test fixture failing here leaves no JVM behind for the rest of the run)."""
    kafka_libs()
    cluster = KafkaCluster(str(tmp_path), performance=SHORT_LIVED)
    launch = cluster._launch

    def second_fails(index: int) -> subprocess.Popen[bytes]:
        if index == 1:
            raise OSError("kafka2: cannot start")
        return launch(index)

    monkeypatch.setattr(cluster, "_launch", second_fails)
    with pytest.raises(OSError, match="kafka2: cannot start"):
        cluster.start()
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", "a broker outlived the failed start"
