"""The configs a topic and a broker describe (``partitions.topic_configs``), as Kafka 4.1's DescribeConfigs
lists them: every name, its source, its synonyms, and which raftlog lets change."""

from __future__ import annotations

import pytest

from partitions.topic_configs import (
    KAFKA_TOPIC_CONFIGS,
    alterable,
    check_changeable,
    creation_configs,
    describe_broker,
    describe_topic,
    settable,
)
from raftlog.storage.config import PROPERTY_FIELDS, LogConfig
from raftlog.storage.errors import InvalidConfig


def test_a_topic_describes_every_config_kafka_describes_and_raftlogs_own() -> None:
    entries = {entry.name: entry for entry in describe_topic({}, 3)}
    assert set(KAFKA_TOPIC_CONFIGS) <= set(entries)
    assert set(entries) == set(KAFKA_TOPIC_CONFIGS) | set(PROPERTY_FIELDS)
    assert len(KAFKA_TOPIC_CONFIGS) == 33  # Kafka 4.1's LogConfig.nonInternalConfigNames()
    assert list(entries) == sorted(entries)
    assert all(entry.source == "DEFAULT_CONFIG" and entry.is_default for entry in entries.values())


def test_min_insync_replicas_is_the_raft_majority_and_read_only() -> None:
    for factor, majority in ((1, 1), (2, 2), (3, 2), (5, 3)):
        (entry,) = describe_topic({}, factor, ("min.insync.replicas",))
        assert (entry.value, entry.read_only, entry.kind) == (str(majority), True, "INT")


def test_a_config_set_on_the_topic_is_dynamic_with_its_broker_default_as_synonym() -> None:
    (entry,) = describe_topic({"retention.ms": 3600000}, 3, ("retention.ms",))
    assert (entry.value, entry.source, entry.read_only, entry.kind) == (
        "3600000", "DYNAMIC_TOPIC_CONFIG", False, "LONG",
    )  # fmt: skip
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"),
        ("log.retention.ms", "604800000", "DEFAULT_CONFIG"),
    ]


def test_what_raftlog_cannot_honour_is_read_only_as_kafka_prints_it() -> None:
    entries = {entry.name: entry for entry in describe_topic({"cleanup.policy": "compact"}, 3)}
    unclean = entries["unclean.leader.election.enable"]
    assert (unclean.value, unclean.read_only, unclean.kind) == ("false", True, "BOOLEAN")
    assert entries["remote.storage.enable"].read_only and not entries["remote.storage.enable"].synonyms
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].kind) == ("compact", "LIST")
    assert not any(entries[name].read_only for name in PROPERTY_FIELDS)


@pytest.mark.parametrize("name", ["unclean.leader.election.enable", "min.insync.replicas", "preallocate"])
def test_a_change_to_a_read_only_config_is_refused_by_name(name: str) -> None:
    with pytest.raises(InvalidConfig, match=name):
        check_changeable(["retention.ms", name])
    check_changeable(["retention.ms", "cleanup.policy"])


def test_an_alteration_refuses_a_read_only_config_by_name_and_keeps_settables_rules() -> None:
    """``alterable``, the one rule of an alteration whichever door asked: read-only refused even at the value
    raftlog behaves as (a creation takes that one: ``creation_configs``), the segment floor and
    ``internal.segment.bytes`` as ``settable`` has them."""
    for name, value in (("min.insync.replicas", 1), ("unclean.leader.election.enable", "false")):
        with pytest.raises(InvalidConfig, match=f"{name}.*read-only under raftlog"):
            alterable({"retention.ms": 1000, name: value})
    with pytest.raises(InvalidConfig, match="at least 1048576"):
        alterable({"segment.bytes": 65536})
    assert alterable({"internal.segment.bytes": 4096, "retention.ms": 5}) == {
        "segment.bytes": 4096,
        "retention.ms": 5,
    }


def test_a_broker_describes_its_topics_defaults_read_only() -> None:
    entries = {entry.name: entry for entry in describe_broker()}
    assert entries["log.segment.bytes"].value == str(LogConfig().segment_bytes)
    assert entries["min.insync.replicas"].value == "1"
    # the cluster's defaults a broker takes at run time are described with its dynamic configs
    assert not {"log.retention.ms", "log.retention.bytes", "message.max.bytes"} & set(entries)
    assert all(entry.read_only and entry.source == "DEFAULT_CONFIG" for entry in entries.values())
    assert [entry.name for entry in describe_broker(("log.segment.bytes",))] == ["log.segment.bytes"]


def test_a_read_only_config_sent_at_creation_is_accepted_when_raftlog_already_behaves_so() -> None:
    asked = {"min.insync.replicas": "2", "preallocate": "false", "retention.ms": 1000}
    assert creation_configs(asked, 3) == {"retention.ms": 1000}
    assert creation_configs({"min.insync.replicas": 1}, 5) == {}
    with pytest.raises(InvalidConfig, match="at most 2"):
        creation_configs({"min.insync.replicas": "3"}, 3)
    with pytest.raises(InvalidConfig, match="behaves as false"):
        creation_configs({"unclean.leader.election.enable": "true"}, 3)
    with pytest.raises(InvalidConfig, match="an integer"):
        creation_configs({"min.insync.replicas": "two"}, 3)


def test_a_segment_below_kafkas_floor_is_refused_where_it_is_set_and_kept_where_it_was() -> None:
    with pytest.raises(InvalidConfig) as refused:
        settable({"segment.bytes": "65536", "retention.ms": 1000})
    assert refused.value.key == "segment.bytes" and "at least 1048576" in refused.value.reason
    assert settable({"segment.bytes": 1 << 20}) == {"segment.bytes": 1 << 20}
    # a topic that has a smaller one keeps it through other changes, and every node still reads it
    assert settable({"retention.ms": 1000}) == {"retention.ms": 1000}
    assert LogConfig.from_properties({"segment.bytes": 4096}).segment_bytes == 4096
    # Kafka's internal.segment.bytes, for tests: below the floor, stored as segment.bytes, winning over it
    assert settable({"internal.segment.bytes": 4096}) == {"segment.bytes": 4096}
    assert settable({"segment.bytes": 1 << 20, "internal.segment.bytes": "4096"}) == {"segment.bytes": "4096"}
    assert settable({"internal.segment.bytes": None}) == {"segment.bytes": None}  # removed: the default


def test_a_config_the_cluster_defaults_is_a_dynamic_default_broker_config_unless_the_topic_sets_its_own() -> (
    None
):
    defaults = {"retention.ms": "60000", "max.message.bytes": "2000"}
    described = {e.name: e for e in describe_topic({"max.message.bytes": 5000}, 3, cluster_defaults=defaults)}
    retention = described["retention.ms"]
    assert (retention.value, retention.source) == ("60000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", "60000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.retention.ms", str(LogConfig().retention_ms), "DEFAULT_CONFIG"),
    ]
    own = described["max.message.bytes"]
    assert (own.value, own.source) == ("5000", "DYNAMIC_TOPIC_CONFIG")
    assert [s.source for s in own.synonyms] == [
        "DYNAMIC_TOPIC_CONFIG",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
        "DEFAULT_CONFIG",
    ]
    assert described["segment.bytes"].source == "DEFAULT_CONFIG"
