"""Resource configs in the controller's replicated metadata: the command round-trips (its rows versioned),
applies deterministically and whole with Kafka's checks, goes with a deleted topic, survives a snapshot,
and a snapshot or command of the previous formats still decodes."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import msgpack
import pytest
from leader_at_level import LeaderAtLevel

from partitions.controller.commands import CreateTopic, DeleteTopic, decode, encode
from partitions.controller.resource_configs import AlterResourceConfigs
from partitions.controller.state import ControllerStateMachine
from partitions.errors import (
    FeatureNotFinalized,
    InvalidCommand,
    InvalidConfigRequest,
    InvalidResourceConfig,
    UnknownTopic,
)
from partitions.metadata.topic_changes import TopicChanges

THROTTLED = "leader.replication.throttled.replicas"


def test_a_subscription_is_set_changed_and_deleted() -> None:
    command = AlterResourceConfigs(
        "client-metrics", "sub", (("interval.ms", "1000"), ("metrics", "org.apache."))
    )
    assert decode(encode(command)) == command
    assert msgpack.unpackb(encode(command)) == [
        1,
        19,
        [1, "client-metrics", "sub", [["interval.ms", "1000"], ["metrics", "org.apache."]]],
    ]
    machine = ControllerStateMachine()
    assert machine.apply(1, 1, encode(command)) == 2
    assert machine.metadata.resource_configs == {
        ("client-metrics", "sub"): {"interval.ms": "1000", "metrics": "org.apache."}
    }
    machine.apply(2, 1, encode(AlterResourceConfigs("client-metrics", "sub", (("interval.ms", None),))))
    assert machine.metadata.resource_configs[("client-metrics", "sub")] == {"metrics": "org.apache."}
    machine.apply(3, 1, encode(AlterResourceConfigs("client-metrics", "sub", (("metrics", None),))))
    assert machine.metadata.resource_configs == {}  # a subscription without configs is gone, as in Kafka


@pytest.mark.parametrize(
    ("command", "error"),
    [
        (AlterResourceConfigs("client-metrics", "sub", (("interval.ms", "10"),)), InvalidConfigRequest),
        (AlterResourceConfigs("group", "g", (("consumer.session.timeout.ms", "1"),)), InvalidResourceConfig),
        (AlterResourceConfigs("group", "g", (("share.isolation.level", "a"),) * 2), InvalidConfigRequest),
        (AlterResourceConfigs("topic", "absent", ((THROTTLED, "*"),)), UnknownTopic),
        (AlterResourceConfigs("cluster", "x", (("a", "b"),)), InvalidConfigRequest),
    ],
)  # fmt: skip
def test_a_refused_change_changes_nothing(command: AlterResourceConfigs, error: type[Exception]) -> None:
    machine = ControllerStateMachine()
    machine.apply(
        1, 1, encode(AlterResourceConfigs("group", "g", (("share.auto.offset.reset", "earliest"),)))
    )
    refused = machine.apply(2, 1, encode(command))
    assert isinstance(refused, error)
    assert machine.metadata.resource_configs == {("group", "g"): {"share.auto.offset.reset": "earliest"}}
    assert machine.metadata.applied_index == 2


def test_a_topics_throttled_replicas_go_with_it_and_the_snapshot_keeps_the_rest() -> None:
    machine = ControllerStateMachine()
    machine.apply(1, 1, encode(CreateTopic("t", [["n1", "n2"]], {})))
    machine.apply(
        2, 1, encode(AlterResourceConfigs("topic", "t", (("leader.replication.throttled.replicas", "0:1"),)))
    )
    machine.apply(
        3, 1, encode(AlterResourceConfigs("broker", "1", (("leader.replication.throttled.rate", "1024"),)))
    )
    assert ("topic", "t") in machine.metadata.resource_configs
    again = ControllerStateMachine()
    again.restore(machine.snapshot())
    assert again.metadata.resource_configs == machine.metadata.resource_configs
    machine.apply(4, 1, encode(DeleteTopic("t")))
    assert machine.metadata.resource_configs == {
        ("broker", "1"): {"leader.replication.throttled.rate": "1024"}
    }


def test_the_previous_formats_still_decode() -> None:
    # a snapshot written before resource configs: no "resource_configs" key
    old = msgpack.packb(
        {"v": 1, "applied_index": 7, "topics": [], "reassignments": [], "node_flags": {}, "users": [],
         "acls": [], "tokens": [], "producer_owners": [], "features": {"raftlog.version": 2},
         "quotas": [[[["user", "alice"]], {"producer_byte_rate": 1024.0}]]},
        use_bin_type=True,
    )  # fmt: skip
    restored = ControllerStateMachine()
    restored.restore(old)
    assert restored.metadata.resource_configs == {} and restored.metadata.applied_index == 7
    assert "resource_configs" not in msgpack.unpackb(restored.snapshot())  # the same bytes until one is set
    # the commands before it decode as they did (a client quota change of release 0.2.0, kind 18)
    quota = msgpack.packb([1, 18, [[[["user", "alice"]], [["producer_byte_rate", 1024.0]]]]])
    assert type(decode(quota)).__name__ == "AlterClientQuotas"
    with pytest.raises(InvalidCommand):  # a later row version is not guessed at
        decode(msgpack.packb([1, 19, [2, "group", "g", []]]))


def test_proposed_only_once_the_cluster_reads_it_and_checked_first() -> None:
    changes = TopicChanges(cast(Any, LeaderAtLevel(1)), 100)
    with pytest.raises(FeatureNotFinalized):
        asyncio.run(
            changes.alter_resource_configs("group", "g", {"share.auto.offset.reset": "earliest"}, False)
        )
    new = LeaderAtLevel(2)
    changes = TopicChanges(cast(Any, new), 100)
    with pytest.raises(InvalidResourceConfig):
        asyncio.run(changes.alter_resource_configs("group", "g", {"share.auto.offset.reset": "x"}, False))
    asyncio.run(changes.alter_resource_configs("group", "g", {"share.auto.offset.reset": "earliest"}, True))
    assert new.proposed == []  # validate only
    asyncio.run(changes.alter_resource_configs("group", "g", {"share.auto.offset.reset": "earliest"}, False))
    assert new.proposed == [AlterResourceConfigs("group", "g", (("share.auto.offset.reset", "earliest"),))]
