"""Kafka's own ``kafka-configs`` and ``kafka-topics``, step by step, against raftlog and against Apache Kafka
(the session's ``systems``): a topic's configs set, described (every config Kafka describes, with
``--all``), removed; a broker's and its loggers' configs described; a user's SCRAM credential set and
described. Each step's outcome (its exit status and what it printed that a user reads) must be the same on
both. Where they differ on purpose (docs/kafka-compatibility.md), the step reads only what both share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka_tools import KafkaTools, Outcome

from partitions.topic_configs import KAFKA_TOPIC_CONFIGS

pytestmark = pytest.mark.slow

TOPIC = "diff-configs"


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTools]:
    runner = KafkaTools(tmp_path_factory.mktemp("config-tools"))  # one JVM for every step (kafka_tools.py)
    try:
        yield runner
    finally:
        runner.close()


def _names(outcome: Outcome) -> set[str]:
    """The config names a ``kafka-configs --describe`` printed (``  name=value sensitive=...``)."""
    return {line.strip().split("=", 1)[0] for line in outcome.lines() if line.startswith("  ")}


def _steps(tools: KafkaTools, bootstrap: str) -> list[tuple[str, bool, str]]:
    """(step, exit status 0, what a user reads of its output) for each step."""
    topic = ("--entity-type", "topics", "--entity-name", TOPIC)
    outcomes: list[tuple[str, bool, str]] = []

    def configs(*args: str) -> Outcome:
        return tools.run("kafka-configs", "--bootstrap-server", bootstrap, *args)

    def step(name: str, done: Outcome, reads: str = "") -> None:
        outcomes.append((name, done.status == 0, reads))

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(60)
    step("set", configs("--alter", *topic, "--add-config", "retention.ms=3600000,cleanup.policy=compact"))
    described = configs("--describe", *topic)
    step("describe", described, " ".join(sorted(_names(described))))
    shown = "retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000"
    step("describe synonyms", described, "shown" if shown in described.output else described.output)
    every = configs("--describe", "--all", *topic)
    missing = set(KAFKA_TOPIC_CONFIGS) - _names(every)  # raftlog adds its own flush.policy, flush.bytes
    step("describe all", every, " ".join(sorted(missing)))
    removed = configs("--alter", *topic, "--delete-config", "retention.ms,cleanup.policy")
    step("remove", removed)
    step(
        "describe removed",
        configs("--describe", *topic),
        " ".join(sorted(_names(configs("--describe", *topic)))),
    )
    broker = configs("--describe", "--entity-type", "brokers", "--entity-name", "1")
    step("describe broker", broker, "\n".join(broker.lines()))
    loggers = configs("--describe", "--entity-type", "broker-loggers", "--entity-name", "1")
    step("describe broker loggers", loggers, "root" if "root=" in loggers.output else loggers.output)
    user = ("--entity-type", "users", "--entity-name", "diff-configs-user")
    scram = "SCRAM-SHA-256=[iterations=8192,password=diff-secret]"
    step("set scram", configs("--alter", *user, "--add-config", scram))
    credentials = configs("--describe", *user)
    step("describe scram", credentials, "\n".join(credentials.lines()))
    return outcomes


def test_kafka_configs_describes_topics_brokers_loggers_and_users_as_kafka(
    servers: dict[str, str], tools: KafkaTools
) -> None:
    kafka = _steps(tools, servers["kafka"])
    assert all(ok for _, ok, _ in kafka), kafka  # Kafka's own outcomes
    raftlog = _steps(tools, servers["raftlog"])
    assert raftlog == kafka
