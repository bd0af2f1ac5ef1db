"""Kafka's own tools, step by step, against raftlog and against Apache Kafka (the session's ``systems``):
``kafka-configs`` setting, describing, refusing and removing a client id's quotas, and ``kafka-topics
--describe --at-min-isr-partitions``. Each step's outcome (its exit status and what it printed that a
user reads) must be the same on both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka_tools import KafkaTools, Outcome

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTools]:
    runner = KafkaTools(tmp_path_factory.mktemp("quota-tools"))  # one JVM for every step (kafka_tools.py)
    try:
        yield runner
    finally:
        runner.close()


def _steps(tools: KafkaTools, bootstrap: str) -> list[tuple[str, bool, str]]:
    """(step, exit status 0, what a user reads of its output) for each step."""
    client = ("--entity-type", "clients", "--entity-name", "diff-quota-client")
    outcomes: list[tuple[str, bool, str]] = []

    def _configs(bootstrap: str, *args: str) -> Outcome:
        return tools.run("kafka-configs", "--bootstrap-server", bootstrap, *args)

    def step(name: str, done: Outcome, reads: str = "") -> None:
        outcomes.append((name, done.status == 0, reads))

    quotas = "producer_byte_rate=1048576,request_percentage=50.5"
    step("set", _configs(bootstrap, "--alter", *client, "--add-config", quotas))
    described = _configs(bootstrap, "--describe", *client)
    shown = (
        "producer_byte_rate=1048576.0" in described.output and "request_percentage=50.5" in described.output
    )
    step("describe", described, "both quotas" if shown else described.output)
    refused = _configs(bootstrap, "--alter", *client, "--add-config", "producer_byte_rate=10.5")
    words = refused.output
    step("fractional", refused, "fractional" if "fractional" in words else words[-300:])
    removed = _configs(
        bootstrap, "--alter", *client, "--delete-config", "producer_byte_rate,request_percentage"
    )
    step("remove", removed)
    gone = _configs(bootstrap, "--describe", *client)
    step("describe removed", gone, "quota left" if "producer_byte_rate" in gone.output else "")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("diff-min-isr", 1, 3)])["diff-min-isr"].result(60)
    at_min = tools.run(
        "kafka-topics", "--bootstrap-server", bootstrap,
        "--describe", "--topic", "diff-min-isr", "--at-min-isr-partitions",
    )  # fmt: skip
    lines = at_min.lines()
    step("at min isr", at_min, "error" if "Exception" in at_min.output else "\n".join(lines))
    return outcomes


def test_kafka_configs_quotas_and_kafka_topics_min_isr_answer_as_kafka(
    servers: dict[str, str], tools: KafkaTools
) -> None:
    kafka = _steps(tools, servers["kafka"])
    assert all(ok == (name != "fractional") for name, ok, _ in kafka), kafka  # Kafka's own outcomes
    assert _steps(tools, servers["raftlog"]) == kafka
