"""Kafka's own tools, step by step, against raftlog and against Apache Kafka (the session's ``systems``):
``kafka-configs`` setting, describing, refusing and removing a client id's quotas, and ``kafka-topics
--describe --at-min-isr-partitions``. Each step's outcome (its exit status and what it printed that a
user reads) must be the same on both."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from raftlog_bench.kafka_peer import kafka_libs

pytestmark = pytest.mark.slow


def _tool(main: str, bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{kafka_libs()}/*", main, "--bootstrap-server", bootstrap, *args],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def _configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return _tool("kafka.admin.ConfigCommand", bootstrap, *args)


def _steps(bootstrap: str) -> list[tuple[str, bool, str]]:
    """(step, exit status 0, what a user reads of its output) for each step."""
    client = ("--entity-type", "clients", "--entity-name", "diff-quota-client")
    outcomes: list[tuple[str, bool, str]] = []

    def step(name: str, done: subprocess.CompletedProcess[str], reads: str = "") -> None:
        outcomes.append((name, done.returncode == 0, reads))

    quotas = "producer_byte_rate=1048576,request_percentage=50.5"
    step("set", _configs(bootstrap, "--alter", *client, "--add-config", quotas))
    described = _configs(bootstrap, "--describe", *client)
    shown = (
        "producer_byte_rate=1048576.0" in described.stdout and "request_percentage=50.5" in described.stdout
    )
    step("describe", described, "both quotas" if shown else described.stdout)
    refused = _configs(bootstrap, "--alter", *client, "--add-config", "producer_byte_rate=10.5")
    words = refused.stdout + refused.stderr
    step("fractional", refused, "fractional" if "fractional" in words else words[-300:])
    removed = _configs(
        bootstrap, "--alter", *client, "--delete-config", "producer_byte_rate,request_percentage"
    )
    step("remove", removed)
    gone = _configs(bootstrap, "--describe", *client)
    step("describe removed", gone, "quota left" if "producer_byte_rate" in gone.stdout else "")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("diff-min-isr", 1, 3)])["diff-min-isr"].result(60)
    at_min = _tool(
        "org.apache.kafka.tools.TopicCommand", bootstrap,
        "--describe", "--topic", "diff-min-isr", "--at-min-isr-partitions",
    )  # fmt: skip
    step("at min isr", at_min, at_min.stdout.strip() or ("error" if "Exception" in at_min.stderr else ""))
    return outcomes


@pytest.mark.timeout(1200)  # a JVM per step on each system, and the session's Kafka started first
def test_kafka_configs_quotas_and_kafka_topics_min_isr_answer_as_kafka(servers: dict[str, str]) -> None:
    kafka = _steps(servers["kafka"])
    assert all(ok == (name != "fractional") for name, ok, _ in kafka), kafka  # Kafka's own outcomes
    assert _steps(servers["raftlog"]) == kafka
