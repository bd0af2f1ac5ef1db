"""Configs of client metrics subscriptions, groups, brokers' throttles and topics' throttled replicas
(``partitions.resource_configs``): Kafka's checks with Kafka's words and codes, and how they are described."""

from __future__ import annotations

import re

import pytest

from partitions import resource_configs as rc
from partitions.errors import InvalidConfigRequest, InvalidResourceConfig


@pytest.mark.parametrize(
    ("configs", "error", "words"),
    [
        ({"interval.ms": "99"}, InvalidConfigRequest, "Invalid value 99 for interval.ms, interval must be"),
        ({"interval.ms": "3600001"}, InvalidConfigRequest, "between 100 and 3600000 (1 hour)"),
        (
            {"interval.ms": "soon"},
            InvalidResourceConfig,
            "value soon for configuration interval.ms: Not a number",
        ),
        ({"interval.ms": "3000000000"}, InvalidResourceConfig, "Not a number of type INT"),
        ({"bogus": "1"}, InvalidConfigRequest, "Unknown client metrics configuration: bogus"),
        ({"match": "client_id"}, InvalidResourceConfig, "Illegal client matching pattern: client_id"),
        (
            {"match": "client_color=red"},
            InvalidResourceConfig,
            "Illegal client matching pattern: client_color=",
        ),
        ({"match": "client_id=(("}, InvalidResourceConfig, "pattern `client_id=((` is not a valid regular"),
        ({"metrics": "org.apache.,org.apache."}, InvalidResourceConfig, "values must not be duplicated"),
    ],
)
def test_client_metrics_are_refused_as_kafka_refuses_them(
    configs: dict[str, str], error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as refused:
        rc.validate(rc.CLIENT_METRICS, "sub", configs, {})
    assert words in str(refused.value)


def test_client_metrics_kafka_accepts_are_accepted() -> None:
    rc.validate(
        rc.CLIENT_METRICS,
        "sub",
        {
            "interval.ms": "100",
            "metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.fetch",
            "match": "client_software_name=apache-kafka-java,client_software_version=4\\.1\\..*",
        },
        {},
    )
    rc.validate(rc.CLIENT_METRICS, "sub", {"interval.ms": "3600000", "metrics": "*"}, {})
    with pytest.raises(InvalidConfigRequest, match="Subscription name can't be empty"):
        rc.validate(rc.CLIENT_METRICS, "", {}, {})
    # a match pattern already stored is not compiled again (Kafka checks new or changed ones only)
    rc.validate(rc.CLIENT_METRICS, "sub", {"match": "client_id=(("}, {"match": "client_id=(("})


@pytest.mark.parametrize(
    ("configs", "words"),
    [  # Kafka 4.4.0's GroupConfig.validate answers each, word for word (its ConfigException's words
        # first: the type and the validator's least, then the broker's bounds)
        (
            {"consumer.session.timeout.ms": "44999"},
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
        ),
        (
            {"consumer.session.timeout.ms": "60001"},
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
        ),
        (
            {"consumer.session.timeout.ms": "0"},
            "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1",
        ),
        (
            {"consumer.heartbeat.interval.ms": "4999"},
            "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive.",
        ),
        (
            {"share.record.lock.duration.ms": "60001"},
            "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.",
        ),
        (
            {"share.record.lock.duration.ms": "999"},
            "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000",
        ),
        (
            {"share.delivery.count.limit": "11"},
            "share.delivery.count.limit must be in the range 2 to 10 inclusive.",
        ),
        (
            {"share.delivery.count.limit": "1"},
            "Value must be at least 2",
        ),
        (
            {"share.partition.max.record.locks": "10000"},
            "must be in the range 100 to 4000 inclusive.",
        ),
        (
            {"consumer.assignment.interval.ms": "-1"},
            "Value must be at least 0",
        ),
        (
            {"streams.assignment.interval.ms": "999999999"},
            "must be in the range 0 to 15000 inclusive.",
        ),
        (
            {"share.auto.offset.reset": "middle"},
            "The value must be either 'earliest', 'latest'",
        ),
        (
            {"share.auto.offset.reset": "by_duration:-PT1H"},
            "of the format 'by_duration:<PnDTnHnMn.nS>'",
        ),
        (
            {"share.auto.offset.reset": "by_duration"},
            "Invalid value `by_duration` for configuration",
        ),
        (
            {"share.isolation.level": "dirty"},
            "String must be one of: read_committed",
        ),
        (
            {"share.renew.acknowledge.enable": "maybe"},
            "Expected value to be either true or false",
        ),
        (
            {"streams.num.standby.replicas": "3"},
            "streams.num.standby.replicas must be less than or equal to 2",
        ),
        (
            {"streams.assignor.name": "nope"},
            "streams.assignor.name 'nope' is not a registered task assignor. "
            "Registered assignors are: [sticky].",
        ),
        (
            {"streams.rack.aware.assignment.tags": "a,,b"},
            "Configuration 'streams.rack.aware.assignment.tags' values must not be empty.",
        ),
        (
            {"foobar": "abc"},
            "Unknown group config name: foobar",
        ),
        (
            {"share.session.timeout.ms": "x"},
            "Not a number of type INT",
        ),
    ],
)
def test_group_configs_are_bounded_as_kafka_bounds_them(configs: dict[str, str], words: str) -> None:
    with pytest.raises(InvalidResourceConfig) as refused:
        rc.validate(rc.GROUP, "g", configs, {})
    assert words in str(refused.value)


def test_group_configs_kafka_accepts_and_what_a_share_group_uses() -> None:
    configs = {
        "share.auto.offset.reset": "earliest",
        "consumer.session.timeout.ms": "50000",
        "consumer.heartbeat.interval.ms": "6000",
        "share.record.lock.duration.ms": "15000",
    }
    rc.validate(rc.GROUP, "g", configs, {})
    rc.validate(
        rc.GROUP,
        "g",
        {"streams.initial.rebalance.delay.ms": "999999999", "streams.assignor.name": "sticky"},
        {},
    )
    assert rc.group_settings(configs) == ("earliest", 15000)
    assert rc.group_settings({}) == ("latest", 30000)  # Kafka's defaults
    with pytest.raises(InvalidConfigRequest, match="Group name must not be empty"):
        rc.validate(rc.GROUP, "", configs, {})


@pytest.mark.parametrize(
    ("value", "duration_ms"),
    [
        ("by_duration:PT1H", 3_600_000),
        ("by_duration:P1DT2H3M4.5S", 93_784_500),
        ("by_duration:pt0.001s", 1),
        ("by_duration:PT1H-10M", 3_000_000),  # each part signed, as Java's Duration.parse
        ("by_duration:-PT-1M", 60_000),
        ("by_duration:P0D", 0),
    ],
)
def test_a_share_reset_by_duration_is_read_as_kafka_reads_it(value: str, duration_ms: int) -> None:
    rc.validate(rc.GROUP, "g", {"share.auto.offset.reset": value}, {})
    assert rc.share_reset(value) == ("by_duration", duration_ms)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("by_duration", "<:duration> part is missing"),
        ("by_duration:", "Unable to parse duration"),
        ("by_duration:PT", "Unable to parse duration"),  # a T without a time section
        ("by_duration:P", "Unable to parse duration"),
        ("by_duration:1H", "Unable to parse duration"),
        ("by_duration:PT1.0000000001S", "Unable to parse duration"),  # past nanoseconds
        (f"by_duration:PT{2**63}S", "Unable to parse duration"),  # past a long's seconds
        ("by_duration:-PT1H", "Negative duration is not supported"),
        ("BY_DURATION:PT1H", "Unknown auto offset reset strategy"),
        ("none", "Unknown auto offset reset strategy"),
    ],
)
def test_a_share_reset_kafka_refuses_is_refused_with_its_reason(value: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        rc.share_reset(value)
    with pytest.raises(InvalidResourceConfig, match=r"The value must be either 'earliest', 'latest' or"):
        rc.validate(rc.GROUP, "g", {"share.auto.offset.reset": value}, {})


def test_a_consumer_groups_own_timeouts_when_set_else_the_nodes() -> None:
    assert rc.consumer_timeouts({}, 3_000, 1_000) == (3_000, 1_000)
    assert rc.consumer_timeouts({"consumer.session.timeout.ms": "50000"}, 3_000, 1_000) == (50_000, 1_000)
    both = {"consumer.session.timeout.ms": " 60000", "consumer.heartbeat.interval.ms": "15000"}
    assert rc.consumer_timeouts(both, 3_000, 1_000) == (60_000, 15_000)


def test_throttles_are_checked_as_kafka_checks_them() -> None:
    rc.validate(rc.BROKER, "1", {"leader.replication.throttled.rate": "1048576"}, {})
    with pytest.raises(InvalidResourceConfig, match="Value must be at least 0"):
        rc.validate(rc.BROKER, "1", {"follower.replication.throttled.rate": "-1"}, {})
    with pytest.raises(InvalidResourceConfig, match=r"backoff\.ms: not a dynamic broker config"):
        rc.validate(rc.BROKER, "1", {"log.cleaner.backoff.ms": "2"}, {})
    rc.validate(rc.TOPIC, "t", {"leader.replication.throttled.replicas": "0:1,1:2"}, {})
    rc.validate(rc.TOPIC, "t", {"follower.replication.throttled.replicas": "*"}, {})
    with pytest.raises(InvalidResourceConfig, match=r"must be the literal '\*' or a list of replicas"):
        rc.validate(rc.TOPIC, "t", {"leader.replication.throttled.replicas": "0-1"}, {})


def test_the_cleaners_threads_change_as_kafkas_log_cleaner_allows() -> None:
    threads = rc.CLEANER_THREADS

    def change(value: str, before: str | None = None, default: str | None = None, name: str = "1") -> None:
        rc.validate(rc.BROKER, name, {threads: value}, {} if before is None else {threads: before},
                    None if default is None else {threads: default})  # fmt: skip

    change("2")  # from Kafka's 1: up to double
    change("1", before="2")
    change("8", before="4")
    change("2", before="4")  # down to half
    change("8", default="4")  # a broker of none of its own has the cluster's default
    change("2", name="")  # the cluster's default itself
    change("4", before="4")  # unchanged: nothing to reconfigure
    rc.validate(rc.BROKER, "1", {}, {threads: "2"})  # removed: back to Kafka's 1, half of 2
    with pytest.raises(InvalidConfigRequest, match="less than half the current value 8"):
        rc.validate(rc.BROKER, "1", {}, {threads: "8"})  # as Kafka, which checks the value it falls back to
    rc.validate(rc.BROKER, "1", {}, {threads: "8"}, {threads: "4"})
    refusals = {
        ("3", None, None): "cannot be increased to more than double the current value 1",
        ("9", None, "4"): "cannot be increased to more than double the current value 4",
        ("1", "4", None): "cannot be reduced to less than half the current value 4",
        ("0", None, None): "Log cleaner threads should be at least 1",
        (
            "-1",
            None,
            None,
        ): "-1 for configuration log.cleaner.threads: Value must be at least 0",
        ("two", None, None): "Not a number of type INT",
        ("17", "16", None): "raftlog runs at most 16 cleaner threads a node",
    }
    for (value, before, default), words in refusals.items():
        reconfiguring = words.startswith(("cannot", "Log cleaner"))  # Kafka's LogCleaner: INVALID_REQUEST
        refusal = InvalidConfigRequest if reconfiguring else InvalidResourceConfig
        with pytest.raises(refusal, match=re.escape(words)):
            change(value, before, default)


def test_a_nodes_cleaner_threads_are_its_own_else_the_clusters_else_one() -> None:
    assert rc.cleaner_threads({}, "n1") == 1
    configs = {(rc.BROKER, ""): {rc.CLEANER_THREADS: "4"}, (rc.BROKER, "2"): {rc.CLEANER_THREADS: "2"}}
    assert [rc.cleaner_threads(configs, node) for node in ("n1", "n2")] == [4, 2]
    assert rc.cleaner_threads_of("99") == rc.CLEANER_THREADS_MAX and rc.cleaner_threads_of(" 3 ") == 3


def test_described_with_sources_and_synonyms() -> None:
    described = {d.name: d for d in rc.describe(rc.GROUP, {"share.auto.offset.reset": "earliest"})}
    assert set(described) == set(rc.KEYS[rc.GROUP])
    reset = described["share.auto.offset.reset"]
    assert (reset.value, reset.source, reset.is_default) == ("earliest", "GROUP_CONFIG", False)
    session = described["consumer.session.timeout.ms"]
    assert (session.value, session.source) == ("45000", "DEFAULT_CONFIG")
    # as Kafka 4.4 lists them: the group's own value, then the broker config the default comes from
    assert session.synonyms == (("group.consumer.session.timeout.ms", "45000", "DEFAULT_CONFIG"),)
    assert reset.synonyms == (
        ("share.auto.offset.reset", "earliest", "GROUP_CONFIG"),
        ("share.auto.offset.reset", "latest", "DEFAULT_CONFIG"),
    )
    assignor = described["streams.assignor.name"]
    assert assignor.synonyms == (("group.streams.assignors", "sticky", "DEFAULT_CONFIG"),)
    metrics = {
        d.name: d for d in rc.describe(rc.CLIENT_METRICS, {"metrics": "a., b.", "interval.ms": "1000"})
    }
    assert (metrics["metrics"].value, metrics["metrics"].source) == ("a.,b.", "CLIENT_METRICS_CONFIG")
    assert (metrics["match"].value, metrics["match"].source) == ("", "DEFAULT_CONFIG")
    broker = {
        d.name: d
        for d in rc.describe(
            rc.BROKER,
            {"leader.replication.throttled.rate": "10"},
            None,
            {"follower.replication.throttled.rate": "20"},
        )
    }
    assert (
        broker["leader.replication.throttled.rate"].source,
        broker["leader.replication.throttled.rate"].value,
    ) == (
        "DYNAMIC_BROKER_CONFIG",
        "10",
    )
    assert broker["follower.replication.throttled.rate"].source == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    assert broker["leader.replication.throttled.rate"].synonyms == (
        ("leader.replication.throttled.rate", "10", "DYNAMIC_BROKER_CONFIG"),
    )
    assert broker["replica.alter.log.dirs.io.max.bytes.per.second"].value == str(2**63 - 1)


def test_the_clusters_default_of_a_log_config_is_the_default_brokers_checked_as_the_log_checks_it() -> None:
    rc.validate(rc.BROKER, "", {"log.retention.ms": "60000", "message.max.bytes": "2000"}, {})
    with pytest.raises(InvalidResourceConfig, match="is the cluster's, not broker 1's"):
        rc.validate(rc.BROKER, "1", {"log.retention.ms": "60000"}, {})  # replicas keep the same records
    with pytest.raises(
        InvalidResourceConfig, match=r"Invalid value 10 for configuration message\.max\.bytes"
    ):
        rc.validate(rc.BROKER, "", {"message.max.bytes": "10"}, {})  # below a batch's header
    with pytest.raises(InvalidResourceConfig, match="Not a number of type LONG"):
        rc.validate(rc.BROKER, "", {"log.retention.bytes": "lots"}, {})
    defaults = rc.topic_log_defaults({"message.max.bytes": "2000", "leader.replication.throttled.rate": "1"})
    assert defaults == {"max.message.bytes": "2000"}
    described = {d.name: d for d in rc.describe(rc.BROKER, {}, None, {"log.retention.ms": "60000"})}
    assert (described["log.retention.ms"].value, described["log.retention.ms"].source) == (
        "60000",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
    )
    assert (described["message.max.bytes"].value, described["message.max.bytes"].source) == (
        "1048576",
        "DEFAULT_CONFIG",
    )
