"""Kafka's own tools against one real cluster: ``kafka-features.sh describe`` (Kafka 4.1's FeatureCommand,
which reads ApiVersions v3's supported and finalized features, KIP-584) shows raftlog.version, the levels
this code supports and the level the cluster finalized, and ``upgrade`` raises it; ``kafka-configs``
sets, describes and removes client quotas, which both doors enforce (a producer past its client id's
quota is throttled, the node counts it; an HTTP caller past its user's quota is answered 429 with
Retry-After; rates are not timed here: ``python -m raftlog_bench.quotas`` measures them,
docs/performance.md); ``kafka-topics --describe --at-min-isr-partitions`` reads min.insync.replicas."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from waiting import wait_for

from partitions.features import KAFKA_FEATURES, RAFTLOG_VERSION, SUPPORTED, TRANSACTION_VERSION
from raftlog_client.local_cluster import LocalCluster
from tests.kafka_reference.kafka_tools import KafkaTools, Outcome


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTools]:
    runner = KafkaTools(tmp_path_factory.mktemp("tools"))  # one JVM runs every step, each under a second
    try:
        yield runner
    finally:
        runner.close()


def test_kafka_features_describe_shows_the_finalized_level(
    kafka_cluster: LocalCluster, tools: KafkaTools
) -> None:
    described = tools.run("kafka-features", "--bootstrap-server", kafka_cluster.bootstrap_servers, "describe")
    assert described.status == 0, described.output
    found = {}
    for line in described.lines():
        if line.startswith("Feature: "):
            # "Feature: f<TAB>SupportedMinVersion: 1..." (Kafka 4.1's tool); 4.4's aligns the fields in spaces
            fields = dict(re.findall(r"(\w+): (\S+)", line))
            found[fields["Feature"]] = fields
    # raftlog's own; Kafka's transaction.version, whose level 2 Kafka's Java client reads (KIP-890); and
    # Kafka's features that follow raftlog.version, shown as Kafka's tool shows them (metadata.version as
    # the release it names)
    assert sorted(found) == sorted([RAFTLOG_VERSION, TRANSACTION_VERSION, *KAFKA_FEATURES]), described.output
    for feature in (RAFTLOG_VERSION, TRANSACTION_VERSION):
        fields = found[feature]
        assert (fields["SupportedMinVersion"], fields["SupportedMaxVersion"]) == (
            "1",
            str(SUPPORTED[feature]),
        )
        assert fields["FinalizedVersionLevel"] == str(SUPPORTED[feature])  # a new cluster: the newest
        assert int(fields["Epoch"]) > 0
    shown = {
        feature: (
            fields["SupportedMinVersion"],
            fields["SupportedMaxVersion"],
            fields["FinalizedVersionLevel"],
        )
        for feature, fields in found.items()
        if feature in KAFKA_FEATURES
    }
    assert shown == {
        "metadata.version": ("4.1-IV1", "4.4-IV2", "4.4-IV2"),
        "group.version": ("0", "1", "1"),
        "share.version": ("0", "1", "1"),
        "streams.version": ("0", "1", "1"),  # streams groups (KIP-1071)
    }, described.output


def test_kafka_features_that_follow_raftlog_version_upgrade_to_where_they_are_and_no_further(
    kafka_cluster: LocalCluster, tools: KafkaTools
) -> None:
    """Kafka's tool names Kafka's features: asking the level the cluster is at succeeds and changes
    nothing; a release's whole set (``--release-version``) is refused for the features raftlog has no
    level of, each with its reason, and nothing changes."""

    def features(*args: str) -> Outcome:
        return tools.run("kafka-features", "--bootstrap-server", kafka_cluster.bootstrap_servers, *args)

    def levels() -> list[str]:
        described = features("describe")
        assert described.status == 0, described.output
        return [re.sub(r"Epoch: \S+", "", line) for line in described.lines() if line.startswith("Feature: ")]

    before = levels()
    there = features(
        "upgrade", "--feature", "group.version=1", "--feature", "share.version=1",
        "--feature", "streams.version=1", "--metadata", "4.4-IV2",
    )  # fmt: skip
    assert there.status == 0, there.output
    assert "group.version was upgraded to 1." in there.output, there.output
    assert "streams.version was upgraded to 1." in there.output, there.output
    down = features("downgrade", "--feature", "group.version=0")
    assert down.status != 0 and "downgrade is refused" in down.output, down.output
    release = features("upgrade", "--release-version", "4.4")
    assert release.status != 0, release.output
    for reason in ("KIP-966", "not KRaft"):  # streams.version is no longer among them: raftlog is at 1
        assert reason in release.output, release.output
    dead_letters = features("upgrade", "--feature", "share.version=2")
    assert dead_letters.status != 0 and "dead-letter" in dead_letters.output, dead_letters.output
    assert levels() == before


def test_kafka_features_upgrade_raises_to_what_every_node_supports_and_refuses_a_downgrade(
    kafka_cluster: LocalCluster, tools: KafkaTools
) -> None:
    def features(*args: str) -> Outcome:
        return tools.run("kafka-features", "--bootstrap-server", kafka_cluster.bootstrap_servers, *args)

    top = SUPPORTED[RAFTLOG_VERSION]
    same = features("upgrade", "--feature", f"{RAFTLOG_VERSION}={top}")
    assert same.status == 0, same.output
    down = features("downgrade", "--feature", f"{RAFTLOG_VERSION}=1")
    assert down.status != 0 and "downgrade is refused" in down.output, down.output
    beyond = features("upgrade", "--feature", f"{RAFTLOG_VERSION}={top + 1}")
    assert beyond.status != 0 and f"supports levels 1..{top}" in beyond.output


def _configs(tools: KafkaTools, cluster: LocalCluster, *args: str) -> Outcome:
    return tools.run("kafka-configs", "--bootstrap-server", cluster.bootstrap_servers, *args)


def _create(cluster: LocalCluster, topic: str, replication_factor: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, replication_factor)])[topic].result(30)


def _throttled(cluster: LocalCluster, quota: str) -> float:
    total = 0.0
    for url in cluster.servers:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith(f'raftlog_client_quota_throttled_requests_total{{quota="{quota}"}}'):
                    total += float(line.rsplit(" ", 1)[1])
    return total


def test_kafka_configs_sets_describes_and_removes_a_client_quota(
    kafka_cluster: LocalCluster, tools: KafkaTools
) -> None:
    altered = _configs(
        tools, kafka_cluster, "--alter", "--entity-type", "clients", "--entity-name", "quota-describe",
        "--add-config", "producer_byte_rate=1048576,request_percentage=50.5",
    )  # fmt: skip
    assert altered.status == 0, altered.output
    described = _configs(
        tools, kafka_cluster, "--describe", "--entity-type", "clients", "--entity-name", "quota-describe"
    )
    assert described.status == 0, described.output
    assert (
        "producer_byte_rate=1048576.0" in described.output and "request_percentage=50.5" in described.output
    )
    refused = _configs(
        tools, kafka_cluster, "--alter", "--entity-type", "clients", "--entity-name", "quota-describe",
        "--add-config", "producer_byte_rate=10.5",
    )  # fmt: skip
    assert refused.status != 0 and "fractional" in refused.output
    removed = _configs(
        tools, kafka_cluster, "--alter", "--entity-type", "clients", "--entity-name", "quota-describe",
        "--delete-config", "producer_byte_rate,request_percentage",
    )  # fmt: skip
    assert removed.status == 0, removed.output
    gone = _configs(
        tools, kafka_cluster, "--describe", "--entity-type", "clients", "--entity-name", "quota-describe"
    )
    assert "producer_byte_rate" not in gone.output, gone.output


def test_a_producer_past_its_quota_is_throttled(kafka_cluster: LocalCluster, tools: KafkaTools) -> None:
    topic = "quota-throttled"
    _create(kafka_cluster, topic)
    altered = _configs(
        tools, kafka_cluster, "--alter", "--entity-type", "clients", "--entity-name", "quota-producer",
        "--add-config", "producer_byte_rate=10240",
    )  # fmt: skip
    assert altered.status == 0, altered.output
    before = _throttled(kafka_cluster, "producer_byte_rate")
    producer = Producer(
        {"bootstrap.servers": kafka_cluster.bootstrap_servers, "client.id": "quota-producer", "linger.ms": 5}
    )
    try:
        for _ in range(40):  # 400 KiB: forty times what the quota allows a second
            producer.produce(topic, b"x" * 10240)
            producer.poll(0)
        wait_for(
            lambda: (
                producer.poll(0.1) is not None and _throttled(kafka_cluster, "producer_byte_rate") > before
            ),
            "the node to throttle the producer past its quota",
            timeout_s=60,
        )
    finally:
        producer.purge()
        producer.flush(0)
        _configs(
            tools, kafka_cluster, "--alter", "--entity-type", "clients", "--entity-name", "quota-producer",
            "--delete-config", "producer_byte_rate",
        )  # fmt: skip


def test_an_http_caller_past_its_quota_is_answered_429_with_retry_after(
    kafka_cluster: LocalCluster, tools: KafkaTools
) -> None:
    topic = "quota-http"
    base = kafka_cluster.servers[0]
    _create(kafka_cluster, topic)
    altered = _configs(
        tools, kafka_cluster, "--alter", "--entity-type", "users", "--entity-name", "ANONYMOUS",
        "--add-config", "producer_byte_rate=100",
    )  # fmt: skip
    assert altered.status == 0, altered.output
    body = json.dumps({"records": [{"value": "v" * 4000}]}).encode()

    def produce() -> tuple[int, str | None]:
        request = urllib.request.Request(
            base + f"/topics/{topic}/partitions/0", data=body,
            headers={"Content-Type": "application/json"}, method="POST",
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, None
        except urllib.error.HTTPError as error:
            return error.code, error.headers.get("Retry-After")

    try:
        first = produce()
        assert first[0] == 200, first
        wait_for(lambda: produce()[0] == 429, "the node to refuse the caller past its quota", timeout_s=60)
        status, retry_after = produce()
        assert status == 429 and retry_after is not None and int(retry_after) >= 1
    finally:
        removed = _configs(
            tools, kafka_cluster, "--alter", "--entity-type", "users", "--entity-name", "ANONYMOUS",
            "--delete-config", "producer_byte_rate",
        )  # fmt: skip
        assert removed.status == 0, removed.output


def test_kafka_topics_lists_no_partition_at_its_minimum_in_sync_replicas(
    kafka_cluster: LocalCluster, tools: KafkaTools
) -> None:
    _create(kafka_cluster, "min-isr", replication_factor=3)
    described = tools.run(
        "kafka-topics", "--bootstrap-server", kafka_cluster.bootstrap_servers, "--describe", "--topic",
        "min-isr", "--at-min-isr-partitions",
    )  # fmt: skip
    # every replica in sync (3) is above the Raft majority (2): no partition listed, and no error
    assert described.status == 0 and "Exception" not in described.output, described.output
    assert not [line for line in described.lines() if "min-isr" in line], described.output


def _produced(cluster: LocalCluster, topic: str, size: int) -> str | None:
    """One record of ``size`` bytes, acks=all: None once written, else the error's name."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "retries": 0})
    outcome: list[str | None] = []
    producer.produce(topic, b"x" * size, on_delivery=lambda error, _: outcome.append(error and error.name()))
    producer.flush(30)
    assert outcome, f"no delivery report for {topic}"
    return outcome[0]


def test_a_cluster_default_log_config_applies_to_every_topic_that_sets_none_of_its_own(
    kafka_cluster: LocalCluster, tools: KafkaTools
) -> None:
    """``kafka-configs --entity-type brokers --entity-default`` sets the cluster's default of a topic's
    log config (Kafka's dynamic broker default): every replica of a topic without its own takes it at
    once, a topic with its own keeps it, removing it brings raftlog's default back; a single broker may
    not differ (a partition's replicas keep the same records)."""
    plain, own = "cluster-default-plain", "cluster-default-own"
    _create(kafka_cluster, plain, replication_factor=3)
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(own, 1, 3, config={"max.message.bytes": "100000"})])[own].result(30)
    assert _produced(kafka_cluster, plain, 5000) is None
    default = ("--entity-type", "brokers", "--entity-default")
    altered = _configs(tools, kafka_cluster, "--alter", *default, "--add-config", "message.max.bytes=2000")
    assert altered.status == 0, altered.output
    wait_for(
        lambda: _produced(kafka_cluster, plain, 5000) == "MSG_SIZE_TOO_LARGE",
        "the default refusing a 5,000-byte record on the topic's leader",
        60,
    )
    assert _produced(kafka_cluster, own, 5000) is None  # its own max.message.bytes
    assert _produced(kafka_cluster, plain, 1000) is None
    described = _configs(
        tools, kafka_cluster, "--describe", "--entity-type", "topics", "--entity-name", plain, "--all"
    )
    shown = "max.message.bytes=2000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:message.max"
    assert shown + ".bytes=2000" in described.output, described.output
    broker = _configs(tools, kafka_cluster, "--alter", "--entity-type", "brokers", "--entity-name", "1",
                      "--add-config", "log.retention.ms=60000")  # fmt: skip
    assert broker.status != 0 and "is the cluster's, not broker 1's" in broker.output, broker.output
    removed = _configs(tools, kafka_cluster, "--alter", *default, "--delete-config", "message.max.bytes")
    assert removed.status == 0, removed.output
    wait_for(lambda: _produced(kafka_cluster, plain, 5000) is None, "raftlog's default back", 60)
