"""Which replication throttle applies to a replica (``partitions.replication_throttles``), as Kafka's
``ConfigHandler`` applies the configs to its quota managers: a topic's throttled-replica lists (``*`` or the
``partition:broker`` pairs naming this broker), the rate set on the broker, else on the cluster's default,
else none (Kafka's Long.MAX_VALUE)."""

from __future__ import annotations

import pytest

from partitions.names import broker_id
from partitions.replication_throttles import follower_rate, joining_throttled, leader_rate, rate, throttled
from partitions.resource_configs import (
    BROKER,
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    LONG_MAX,
    TOPIC,
)


@pytest.mark.parametrize(
    ("value", "broker", "partition", "expected"),
    [
        ("*", 7, 3, True),  # every partition on every broker
        (" * ", 1, 0, True),
        ("0:1,1:2", 1, 0, True),
        ("0:1,1:2", 2, 1, True),
        ("0:1,1:2", 2, 0, False),  # partition 0 is listed on broker 1 only
        ("0:1,1:2", 3, 1, False),  # another broker's
        ("0:1 , 1:2", 2, 1, True),  # items trimmed, as Kafka's list parsing does
        ("10:1", 1, 1, False),  # a partition number, not a prefix
        ("", 1, 0, False),
        ("  ", 1, 0, False),
    ],
)
def test_a_throttled_replica_list_names_a_partition_on_a_broker(
    value: str, broker: int, partition: int, expected: bool
) -> None:
    assert throttled(value, broker, partition) is expected


def test_the_rate_is_the_brokers_own_else_the_clusters_default_else_none() -> None:
    configs = {(BROKER, ""): {LEADER_RATE: "1000", FOLLOWER_RATE: "2000"}, (BROKER, "2"): {LEADER_RATE: "50"}}
    assert rate(configs, LEADER_RATE, 2) == 50
    assert rate(configs, FOLLOWER_RATE, 2) == 2000, "not set on broker 2: the cluster's default"
    assert rate(configs, LEADER_RATE, 3) == 1000
    assert rate({}, LEADER_RATE, 1) is None, "Kafka's default, Long.MAX_VALUE: unlimited"
    assert rate({(BROKER, "1"): {LEADER_RATE: str(LONG_MAX)}}, LEADER_RATE, 1) is None
    assert rate({(BROKER, "1"): {LEADER_RATE: " 0 "}}, LEADER_RATE, 1) == 0


def test_a_replica_is_throttled_where_its_topic_lists_it_at_its_brokers_rate() -> None:
    """What ``kafka-reassign-partitions --throttle`` sets for a move of t-0 from brokers 1, 2 to 2, 3:
    the leader throttle on the replicas the move starts from, the follower throttle on the one it adds."""
    configs = {
        (BROKER, ""): {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"},
        (TOPIC, "t"): {LEADER_REPLICAS: "0:1,0:2", FOLLOWER_REPLICAS: "0:3"},
    }
    assert follower_rate(configs, "t", 0, "n3") == 1000
    assert follower_rate(configs, "t", 0, "n2") is None
    assert leader_rate(configs, "t", 0, "n1") == leader_rate(configs, "t", 0, "n2") == 1000
    assert leader_rate(configs, "t", 0, "n3") is None
    assert follower_rate(configs, "t", 1, "n3") is None, "another partition"
    assert follower_rate(configs, "u", 0, "n3") is None, "another topic"
    # listed, but no rate set anywhere: Kafka's unlimited default
    assert follower_rate({(TOPIC, "t"): {FOLLOWER_REPLICAS: "*"}}, "t", 0, "n3") is None
    # the rate set without a list limits nothing
    assert follower_rate({(BROKER, ""): {FOLLOWER_RATE: "1"}}, "t", 0, "n3") is None


def test_removing_the_configs_lifts_the_throttle() -> None:
    """``--verify`` removes the lists and the rates (Kafka's ``removeThrottle``): either suffices."""
    throttles = {(BROKER, "3"): {FOLLOWER_RATE: "500"}, (TOPIC, "t"): {FOLLOWER_REPLICAS: "*"}}
    assert follower_rate(throttles, "t", 4, "n3") == 500
    assert follower_rate({(BROKER, "3"): {FOLLOWER_RATE: "500"}}, "t", 4, "n3") is None
    assert follower_rate({(TOPIC, "t"): {FOLLOWER_REPLICAS: "*"}}, "t", 4, "n3") is None
    assert follower_rate({(TOPIC, "t"): {FOLLOWER_REPLICAS: ""}, **throttles}, "t", 4, "n3") == 500
    assert follower_rate({**throttles, (TOPIC, "t"): {FOLLOWER_REPLICAS: ""}}, "t", 4, "n3") is None


def test_a_node_id_without_a_number_is_matched_by_its_kafka_broker_id() -> None:
    listed = f"0:{broker_id('alpha')}"
    configs = {(BROKER, ""): {FOLLOWER_RATE: "9"}, (TOPIC, "t"): {FOLLOWER_REPLICAS: listed}}
    assert follower_rate(configs, "t", 0, "alpha") == 9
    assert follower_rate(configs, "t", 0, "beta") is None


def test_a_joining_replica_is_throttled_by_its_own_follower_throttle_or_a_members_leader_throttle() -> None:
    """The move's leader compacts its journal before adding such a replica (``joining_throttled``)."""
    rates = {(BROKER, ""): {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}}
    follower = {**rates, (TOPIC, "t"): {FOLLOWER_REPLICAS: "0:3"}}
    leader = {**rates, (TOPIC, "t"): {LEADER_REPLICAS: "0:2"}}
    assert joining_throttled(follower, "t", 0, "n3", {"n1", "n2"})
    assert joining_throttled(leader, "t", 0, "n3", {"n1", "n2"}), "n2 may serve its recovery"
    assert not joining_throttled(leader, "t", 0, "n3", {"n1"}), "n2 is no member"
    assert not joining_throttled(follower, "t", 1, "n3", {"n1", "n2"}), "another partition"
    assert not joining_throttled({(TOPIC, "t"): {FOLLOWER_REPLICAS: "*"}}, "t", 0, "n3", {"n1"}), "no rate"
