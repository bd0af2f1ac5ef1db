"""The controller state machine: topics created, grown, altered and deleted deterministically."""

from __future__ import annotations

import msgpack

from partitions.controller import commands as ctl
from partitions.controller import state as controller
from partitions.controller.commands import (
    AddPartitions,
    AlterConfigs,
    CreateTopic,
    DeleteTopic,
    SetFeatureLevel,
)
from partitions.controller.producer_owners import RegisterProducerOwner
from partitions.controller.state import ControllerStateMachine, TopicMetadata
from partitions.errors import (
    FeatureUpdateRefused,
    InvalidCommand,
    InvalidName,
    InvalidTopic,
    TopicExists,
    TopicIdGone,
    UnknownTopic,
)
from raftlog.storage.config import LogConfig
from raftlog.storage.errors import InvalidConfig

R3 = [["n1", "n2", "n3"], ["n2", "n3", "n1"]]


def apply_all(machine: ControllerStateMachine, *commands: ctl.ControllerCommand) -> list[object]:
    start = machine.applied_index
    return [machine.apply(start + i + 1, 1, ctl.encode(c)) for i, c in enumerate(commands)]


def test_create_alter_delete_round_trip() -> None:
    machine = ControllerStateMachine()
    created, altered, deleted = apply_all(
        machine,
        CreateTopic("orders", R3, {"retention.ms": 1000}),
        AlterConfigs("orders", {"segment.bytes": 1 << 20}),
        DeleteTopic("orders"),
    )
    assert isinstance(created, TopicMetadata) and created.partitions == 2 and created.topic_id == 1
    assert isinstance(altered, TopicMetadata)
    assert altered.configs == {"retention.ms": 1000, "segment.bytes": 1 << 20}
    assert altered.log_config().segment_bytes == 1 << 20
    assert deleted == altered and machine.metadata.topics == {}


def test_a_deletion_naming_the_topic_s_id_never_deletes_another_topic_of_the_name() -> None:
    """DeleteTopics v6 by id (Kafka deletes exactly the topic of the id): a deletion that names the creation
    index of a topic deleted and created again meanwhile is refused, the new topic kept."""
    machine = ControllerStateMachine()
    first, _, second = apply_all(
        machine, CreateTopic("t", R3, {}), DeleteTopic("t"), CreateTopic("t", R3, {"retention.ms": 5})
    )
    assert isinstance(first, TopicMetadata) and isinstance(second, TopicMetadata)
    stale = DeleteTopic("t", first.topic_id)
    assert ctl.decode(ctl.encode(stale)) == stale
    assert ctl.decode(ctl.encode(DeleteTopic("t"))) == DeleteTopic("t")  # the previous release's form
    (refused,) = apply_all(machine, stale)
    assert isinstance(refused, TopicIdGone) and refused.topic_id == first.topic_id
    assert machine.metadata.topics["t"] == second, "the topic of the name now is kept"
    (deleted,) = apply_all(machine, DeleteTopic("t", second.topic_id))
    assert deleted == second and machine.metadata.topics == {}


def test_a_null_config_value_removes_the_property_so_its_default_applies() -> None:
    machine = ControllerStateMachine()
    _, removed = apply_all(
        machine,
        CreateTopic("t", R3, {"retention.ms": 1000, "segment.bytes": 1 << 20}),
        AlterConfigs("t", {"retention.ms": None, "no.such.property": None}),
    )
    assert isinstance(removed, TopicMetadata) and removed.configs == {"segment.bytes": 1 << 20}
    assert removed.log_config().retention_ms == LogConfig().retention_ms


def test_recreated_topic_gets_new_groups() -> None:
    machine = ControllerStateMachine()
    first, _, second = apply_all(machine, CreateTopic("t", R3), DeleteTopic("t"), CreateTopic("t", R3))
    assert isinstance(first, TopicMetadata) and isinstance(second, TopicMetadata)
    assert first.group_id(0) != second.group_id(0)


def test_a_topic_grows_by_new_partitions_and_keeps_its_groups_and_configs() -> None:
    machine = ControllerStateMachine()
    created, grown = apply_all(
        machine,
        CreateTopic("t", R3, {"retention.ms": 1000}),
        AddPartitions("t", 4, [["n3", "n1", "n2"], ["n1", "n2", "n3"]]),
    )
    assert isinstance(created, TopicMetadata) and isinstance(grown, TopicMetadata)
    assert grown.partitions == 4 and grown.replicas[:2] == created.replicas
    assert grown.replicas[2] == ("n3", "n1", "n2") and grown.configs == {"retention.ms": 1000}
    assert [grown.group_id(p) for p in range(2)] == [created.group_id(p) for p in range(2)]
    assert machine.metadata.topics["t"] == grown
    restored = ControllerStateMachine()
    restored.restore(machine.snapshot())
    assert restored.metadata.topics["t"] == grown


def test_growing_from_a_count_the_topic_no_longer_has_is_refused_and_changes_nothing() -> None:
    """Two proposers that counted the same partitions: the second to apply is refused, so a topic never
    grows twice by one request's worth."""
    machine = ControllerStateMachine()
    apply_all(machine, CreateTopic("t", R3))
    first, second, repeated, unknown, over = apply_all(
        machine,
        AddPartitions("t", 3, [["n1", "n2", "n3"]]),
        AddPartitions("t", 3, [["n2", "n3", "n1"]]),
        AddPartitions("t", 4, [["n1", "n1", "n3"]]),
        AddPartitions("nope", 3, [["n1", "n2", "n3"]]),
        AddPartitions("t", controller.PARTITIONS_MAX + 1, [["n1"]] * (controller.PARTITIONS_MAX - 2)),
    )
    assert isinstance(first, TopicMetadata) and first.partitions == 3
    assert isinstance(second, InvalidTopic) and "has 3 partitions" in str(second)
    assert isinstance(repeated, InvalidTopic) and "repeats a node" in str(repeated)
    assert isinstance(unknown, UnknownTopic) and isinstance(over, InvalidTopic)
    assert machine.metadata.topics["t"] == first


def test_bad_commands_are_refused_and_change_nothing() -> None:
    machine = ControllerStateMachine()
    apply_all(machine, CreateTopic("t", R3))
    before = dict(machine.metadata.topics)
    results = apply_all(
        machine,
        CreateTopic("t", R3),
        CreateTopic("bad/name", R3),
        CreateTopic("uneven", [["n1"], ["n1", "n2"]]),
        CreateTopic("twice", [["n1", "n1"]]),
        CreateTopic("conf", R3, {"segment.bytes": 1}),
        AlterConfigs("t", {"no.such.property": 1}),
        DeleteTopic("missing"),
    )
    kinds = [type(r) for r in results]
    assert kinds == [
        TopicExists,
        InvalidName,
        InvalidTopic,
        InvalidTopic,
        InvalidConfig,
        InvalidConfig,
        UnknownTopic,
    ]
    assert machine.metadata.topics == before
    assert isinstance(machine.apply(99, 1, b"\xc1"), InvalidCommand)


def test_snapshot_restores_the_same_state() -> None:
    machine = ControllerStateMachine()
    apply_all(machine, CreateTopic("a", R3, {"retention.ms": 5}), CreateTopic("b", [["n1"]]))
    copy = ControllerStateMachine()
    copy.restore(machine.snapshot())
    assert copy.metadata.topics == machine.metadata.topics and copy.applied_index == machine.applied_index


def test_apply_publishes_new_metadata_and_never_changes_what_a_reader_holds() -> None:
    """The event loop reads ``machine.metadata`` while the driver thread applies: a reference taken
    before an apply must stay as it was, down to a topic's configs, which cannot be changed in place."""
    machine = ControllerStateMachine()
    apply_all(machine, CreateTopic("t", R3, {"retention.ms": 1000}))
    held = machine.metadata
    held_topic = held.topics["t"]
    apply_all(
        machine,
        AlterConfigs("t", {"retention.ms": 2000, "segment.bytes": 1 << 20}),
        CreateTopic("u", R3),
        DeleteTopic("u"),
    )
    assert machine.metadata is not held
    assert held.topics["t"] is held_topic and dict(held_topic.configs) == {"retention.ms": 1000}
    assert set(held.topics) == {"t"}
    assert machine.metadata.topics["t"].configs == {"retention.ms": 2000, "segment.bytes": 1 << 20}
    for read_only in (held.topics, held_topic.configs, machine.metadata.topics["t"].configs):
        try:
            read_only["x"] = 1  # type: ignore[index]
        except TypeError:
            continue
        raise AssertionError(f"{read_only!r} can be changed in place")


def test_a_snapshot_under_level_1_has_the_keys_of_release_0_1_0() -> None:
    """Until producer owners are registered and a level finalized (raftlog.version 2), the snapshot holds
    only the keys release 0.1.0 wrote; each new key appears once it holds something."""
    machine = ControllerStateMachine()
    apply_all(machine, CreateTopic("a", R3))
    released = {"v", "applied_index", "topics", "reassignments", "node_flags", "users", "acls", "tokens"}
    assert set(msgpack.unpackb(machine.snapshot())) == released
    apply_all(machine, RegisterProducerOwner("User:alice"), SetFeatureLevel("raftlog.version", 2))
    assert set(msgpack.unpackb(machine.snapshot())) == released | {"producer_owners", "features"}
    copy = ControllerStateMachine()
    copy.restore(machine.snapshot())
    assert copy.metadata.producer_owners == machine.metadata.producer_owners
    assert copy.metadata.features == {"raftlog.version": 2}


def test_a_clusters_formation_applies_only_as_its_first_command() -> None:
    """``FormCluster`` finalizes a new cluster's levels as the controller log's first command, and is
    refused, nothing changed, after any other: a node's later start (re-provisioned on an empty volume, its
    command line the one that formed the cluster) finalizes nothing."""
    formed = ControllerStateMachine()
    [levels] = apply_all(formed, ctl.FormCluster({"raftlog.version": 1, "transaction.version": 1}))
    assert levels == formed.metadata.features == {"raftlog.version": 1, "transaction.version": 1}
    copy = ControllerStateMachine()
    copy.restore(formed.snapshot())
    assert copy.metadata.features == {"raftlog.version": 1, "transaction.version": 1}
    [again] = apply_all(formed, ctl.FormCluster({"raftlog.version": 2, "transaction.version": 2}))
    assert isinstance(again, FeatureUpdateRefused) and "formed before" in str(again)
    assert formed.metadata.features == {"raftlog.version": 1, "transaction.version": 1}

    used = ControllerStateMachine()  # a cluster whose log already holds a command (e.g. release 0.1.0's)
    _created, late = apply_all(
        used,
        CreateTopic("a", R3),
        ctl.FormCluster({"raftlog.version": 2, "transaction.version": 2}),
    )
    assert isinstance(late, FeatureUpdateRefused)
    assert used.metadata.features == {}  # level 1: the operator raises it

    encoded = ctl.encode(ctl.FormCluster({"transaction.version": 2, "raftlog.version": 2}))
    assert ctl.decode(encoded) == ctl.FormCluster({"raftlog.version": 2, "transaction.version": 2})
    for malformed in ([1, 20, {"raftlog.version": 0}], [1, 20, {"raftlog.version": "2"}], [1, 20, ["x"]]):
        try:
            ctl.decode(msgpack.packb(malformed))
        except InvalidCommand:
            continue
        raise AssertionError(f"{malformed} decoded")
