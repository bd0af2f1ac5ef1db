"""Kafka's own tools, step by step, against raftlog and against Apache Kafka (the session's ``systems``):
``kafka-configs`` setting, describing, refusing and removing a client id's quotas and an address's
connection creation rate (KIP-612, ``--entity-type ips``: one address and the default), and ``kafka-topics
--describe --at-min-isr-partitions``. Each step's outcome (its exit status and what it printed that a
user reads) must be the same on both."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka_answers import as_recorded, kafka_outcome
from kafka_tools import KafkaTools, Outcome

pytestmark = pytest.mark.slow

PATIENCE_S = 30.0  # a quota set or removed reaches every broker of either cluster within it


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

    def until(shows: Callable[[str], bool], *args: str) -> Outcome:
        """The step's outcome once its output ``shows`` what was changed (a Kafka broker learns a quota
        from the metadata log a moment after the change was answered), or the last one past PATIENCE_S."""
        deadline = time.monotonic() + PATIENCE_S
        while not shows((done := _configs(bootstrap, *args)).output) and time.monotonic() < deadline:
            time.sleep(0.5)
        return done

    def both(output: str) -> bool:
        return "producer_byte_rate=1048576.0" in output and "request_percentage=50.5" in output

    quotas = "producer_byte_rate=1048576,request_percentage=50.5"
    step("set", _configs(bootstrap, "--alter", *client, "--add-config", quotas))
    described = until(both, "--describe", *client)
    step("describe", described, "both quotas" if both(described.output) else described.output)
    refused = _configs(bootstrap, "--alter", *client, "--add-config", "producer_byte_rate=10.5")
    words = refused.output
    step("fractional", refused, "fractional" if "fractional" in words else words[-300:])
    removed = _configs(
        bootstrap, "--alter", *client, "--delete-config", "producer_byte_rate,request_percentage"
    )
    step("remove", removed)
    gone = until(lambda output: "producer_byte_rate" not in output, "--describe", *client)
    step("describe removed", gone, "quota left" if "producer_byte_rate" in gone.output else "")
    _ip_steps(step, until, _configs, bootstrap)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("diff-min-isr", 1, 3)])["diff-min-isr"].result(60)
    at_min = tools.run(
        "kafka-topics", "--bootstrap-server", bootstrap,
        "--describe", "--topic", "diff-min-isr", "--at-min-isr-partitions",
    )  # fmt: skip
    lines = at_min.lines()
    step("at min isr", at_min, "error" if "Exception" in at_min.output else "\n".join(lines))
    return outcomes


def _ip_steps(
    step: Callable[..., None], until: Callable[..., Outcome], configs: Callable[..., Outcome], bootstrap: str
) -> None:
    """An address's and the default address's ``connection_creation_rate`` (the addresses are none the
    tests connect from; the default is far above what they open), and what Kafka refuses of them."""
    for name, ip, rate in (
        ("ip", ("--entity-name", "127.0.0.9"), "5"),
        ("default ip", ("--entity-default",), "5000"),
    ):
        entity = ("--entity-type", "ips", *ip)
        step(
            f"{name} set",
            configs(bootstrap, "--alter", *entity, "--add-config", f"connection_creation_rate={rate}"),
        )
        shows = f"connection_creation_rate={rate}.0"
        described = until(lambda output, shows=shows: shows in output, "--describe", *entity)
        step(f"{name} describe", described, "set" if shows in described.output else described.output[-300:])
        refused = configs(bootstrap, "--alter", *entity, "--add-config", "connection_creation_rate=2.5")
        step(
            f"{name} fractional",
            refused,
            "fractional" if "fractional" in refused.output else refused.output[-300:],
        )
        step(
            f"{name} remove",
            configs(bootstrap, "--alter", *entity, "--delete-config", "connection_creation_rate"),
        )
        gone = until(lambda output: "connection_creation_rate" not in output, "--describe", *entity)
        step(f"{name} describe removed", gone, "left" if "connection_creation_rate" in gone.output else "")
    wrong = configs(bootstrap, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.9",
                    "--add-config", "producer_byte_rate=1024")  # fmt: skip
    step("ip wrong key", wrong, "refused" if wrong.status else wrong.output[-300:])
    host = configs(bootstrap, "--alter", "--entity-type", "ips", "--entity-name", "no-such-host.invalid",
                   "--add-config", "connection_creation_rate=5")  # fmt: skip
    step("ip not an address", host, "not valid" if "not a valid IP" in host.output else host.output[-300:])


@pytest.mark.kafka_answer
def test_kafka_configs_quotas_and_kafka_topics_min_isr_answer_as_kafka(
    servers: dict[str, str], tools: KafkaTools, request: pytest.FixtureRequest
) -> None:
    def on_kafka() -> list[tuple[str, bool, str]]:
        kafka = _steps(tools, servers["kafka"])
        refusals = ("fractional", "ip wrong key", "ip not an address")
        assert all(ok == (not name.endswith(refusals)) for name, ok, _ in kafka), kafka  # Kafka's own
        reads = {name: read for name, _, read in kafka}
        assert (reads["describe"], reads["describe removed"]) == ("both quotas", ""), kafka
        return kafka

    kafka = kafka_outcome(request, "steps", on_kafka)  # replayed while this module is as Kafka ran it
    assert as_recorded(_steps(tools, servers["raftlog"])) == kafka
