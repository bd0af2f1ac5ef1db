"""Kafka's own ``kafka-configs`` and ``kafka-topics``, step by step, against raftlog and against Apache Kafka
(the session's ``systems``): a topic's configs set, described (every config Kafka describes, with
``--all``), removed; a broker's and its loggers' configs described; a broker's log cleaner threads set,
described, refused past double and removed; a user's SCRAM credential set and described; a client
metrics subscription (``kafka-client-metrics``) set, described, listed, refused and deleted; a group's
configs set, described and refused, and a share group of ``share.auto.offset.reset=earliest`` reading
what was produced before it (``kafka-console-share-consumer``). Each step's outcome (its exit status and
what it printed that a user reads) must be the same on both. Where they differ on purpose
(docs/kafka-compatibility.md), the step reads only what both share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka_answers import as_recorded, kafka_outcome
from kafka_tools import KafkaTools, Outcome

from partitions.topic_configs import KAFKA_TOPIC_CONFIGS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the session's clusters may start here

TOPIC = "diff-configs"
SHARED = "diff-configs-shared"  # the share group's topic


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
        outcomes.append((name, done.status == 0, reads.replace(bootstrap, "BOOTSTRAP")))  # a tool echoes it

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
    _cleaner_steps(configs, step)
    user = ("--entity-type", "users", "--entity-name", "diff-configs-user")
    scram = "SCRAM-SHA-256=[iterations=8192,password=diff-secret]"
    step("set scram", configs("--alter", *user, "--add-config", scram))
    credentials = configs("--describe", *user)
    step("describe scram", credentials, "\n".join(credentials.lines()))
    _client_metrics_steps(tools, bootstrap, step)
    _group_steps(tools, bootstrap, admin, step)
    return outcomes


def _exceptions(outcome: Outcome) -> str:
    """A refusal as a user reads it: the tool's lines, the exception's name and Kafka's words."""
    return "\n".join(outcome.lines())


def _cleaner_steps(configs: Any, step: Any) -> None:
    """A broker's log cleaner threads changed while it runs (Kafka's reconfigurable log.cleaner.threads):
    set, described, refused past double, removed."""
    broker = ("--entity-type", "brokers", "--entity-name", "1")
    altered = configs("--alter", *broker, "--add-config", "log.cleaner.threads=2")
    step("cleaner threads set", altered, "\n".join(altered.lines()))
    described = configs("--describe", *broker)
    step("cleaner threads describe", described, "\n".join(described.lines()))
    too_many = configs("--alter", *broker, "--add-config", "log.cleaner.threads=5")
    step("cleaner threads past double refused", too_many, _exceptions(too_many))
    removed = configs("--alter", *broker, "--delete-config", "log.cleaner.threads")
    step("cleaner threads remove", removed, "\n".join(removed.lines()))
    after = configs("--describe", *broker)
    step("cleaner threads describe removed", after, "\n".join(after.lines()))


def _client_metrics_steps(tools: KafkaTools, bootstrap: str, step: Any) -> None:
    def metrics(*args: str) -> Outcome:
        return tools.run("kafka-client-metrics", "--bootstrap-server", bootstrap, *args)

    name = ("--name", "diff-metrics")
    subscribe = (
        "--metrics",
        "org.apache.kafka.producer.,org.apache.kafka.consumer.fetch",
        "--interval",
        "1000",
    )
    altered = metrics("--alter", *name, *subscribe, "--match", "client_software_name=apache-kafka-java")
    step("metrics alter", altered, "\n".join(altered.lines()))
    described = metrics("--describe", *name)
    step("metrics describe", described, "\n".join(described.lines()))
    listed = metrics("--list")
    step("metrics list", listed, "\n".join(listed.lines()))
    shown = tools.run(
        "kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "client-metrics",
        "--entity-name", "diff-metrics",
    )  # fmt: skip
    step("metrics kafka-configs describe", shown, "\n".join(shown.lines()))
    too_often = metrics("--alter", *name, "--interval", "10")
    step("metrics interval refused", too_often, _exceptions(too_often))
    no_param = metrics("--alter", *name, "--match", "client_color=red")
    step("metrics match refused", no_param, _exceptions(no_param))
    deleted = metrics("--delete", *name)
    step("metrics delete", deleted, "\n".join(deleted.lines()))
    gone = metrics("--describe", *name)
    step("metrics describe deleted", gone, "\n".join(gone.lines()))


def _group_steps(tools: KafkaTools, bootstrap: str, admin: AdminClient, step: Any) -> None:
    def configs(*args: str) -> Outcome:
        return tools.run("kafka-configs", "--bootstrap-server", bootstrap, *args)

    group = ("--entity-type", "groups", "--entity-name", "diff-share")
    settings = "share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000"
    altered = configs("--alter", *group, "--add-config", settings)
    step("group alter", altered, "\n".join(altered.lines()))
    described = configs("--describe", *group)
    step("group describe", described, "\n".join(described.lines()))
    every = configs("--describe", "--all", *group)
    step("group describe all", every, "\n".join(every.lines()))
    short = configs("--alter", *group, "--add-config", "consumer.session.timeout.ms=1000")
    step("group bound refused", short, _exceptions(short))
    unknown = configs("--alter", *group, "--add-config", "share.colour=blue")
    step("group unknown refused", unknown, _exceptions(unknown))
    admin.create_topics([NewTopic(SHARED, 1, 3)])[SHARED].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(3):  # produced before the share group exists: 'earliest' reads them, 'latest' would not
        producer.produce(SHARED, f"v{i}".encode())
    producer.flush(30)
    read = tools.run(
        "kafka-console-share-consumer", "--bootstrap-server", bootstrap, "--topic", SHARED,
        "--group", "diff-share", "--max-messages", "3", "--timeout-ms", "60000",
    )  # fmt: skip
    step("share group reads from earliest", read, "\n".join(read.lines()))
    removed = configs("--alter", *group, "--delete-config", "share.auto.offset.reset")
    step("group remove", removed, "\n".join(removed.lines()))
    after = configs("--describe", *group)
    step("group describe removed", after, "\n".join(after.lines()))


@pytest.mark.kafka_answer
def test_kafka_configs_describes_topics_brokers_loggers_and_users_as_kafka(
    servers: dict[str, str], tools: KafkaTools, request: pytest.FixtureRequest
) -> None:
    def on_kafka() -> list[tuple[str, bool, str]]:
        kafka = _steps(tools, servers["kafka"])
        assert all(ok != ("refused" in step) for step, ok, _ in kafka), kafka  # Kafka's own outcomes
        read = dict((step, reads) for step, _, reads in kafka)["share group reads from earliest"]
        assert read.splitlines() == ["v0", "v1", "v2", "Processed a total of 3 messages"]
        return kafka

    kafka = kafka_outcome(request, "steps", on_kafka)  # replayed while this module is as Kafka ran it
    raftlog = as_recorded(_steps(tools, servers["raftlog"]))
    assert raftlog == kafka
