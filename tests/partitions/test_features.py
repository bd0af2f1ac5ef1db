"""Feature levels: the controller command and snapshot, the upgrade checks naming nodes, the gate, and the
version every node gossips (decoded by the previous release's rules)."""

from __future__ import annotations

import msgpack
import pytest

import raftlog
from partitions import features
from partitions.controller.commands import SetFeatureLevel, decode, encode
from partitions.controller.state import ControllerStateMachine
from partitions.errors import FeatureUpdateRefused
from partitions.features import CLASSIC_GROUP_METADATA, RAFTLOG_VERSION, TRANSACTION_VERSION, Features
from partitions.replicas.cluster_view import decode_meta, encode_meta


def test_the_version_is_pyprojects() -> None:
    with open("pyproject.toml") as project:
        assert f'version = "{raftlog.version()}"' in project.read()


def test_set_feature_level_round_trips_and_applies() -> None:
    command = SetFeatureLevel(RAFTLOG_VERSION, 2)
    assert decode(encode(command)) == command
    machine = ControllerStateMachine()
    assert machine.metadata.features == {}
    assert machine.apply(1, 1, encode(command)) == {RAFTLOG_VERSION: 2}
    assert machine.metadata.features == {RAFTLOG_VERSION: 2}
    refused = machine.apply(2, 1, encode(SetFeatureLevel(RAFTLOG_VERSION, 1)))
    assert isinstance(refused, FeatureUpdateRefused)  # never lowered
    assert machine.metadata.features == {RAFTLOG_VERSION: 2}
    again = ControllerStateMachine()
    again.restore(machine.snapshot())
    assert again.metadata.features == {RAFTLOG_VERSION: 2}


def test_a_snapshot_of_release_0_1_0_decodes_at_level_1() -> None:
    old = msgpack.packb(  # the keys release 0.1.0 writes, and no "features"
        {"v": 1, "applied_index": 7, "topics": [], "reassignments": [], "node_flags": {}, "users": [],
         "acls": [], "tokens": []},
        use_bin_type=True,
    )  # fmt: skip
    machine = ControllerStateMachine()
    machine.restore(old)
    assert machine.metadata.applied_index == 7
    assert Features(lambda: machine.metadata.features).levels() == {
        RAFTLOG_VERSION: 1,
        TRANSACTION_VERSION: 1,
    }
    assert not Features(lambda: machine.metadata.features).allows(CLASSIC_GROUP_METADATA)
    assert "features" not in msgpack.unpackb(machine.snapshot())  # unchanged until a level is finalized


def test_upgrade_refused_naming_the_nodes_that_do_not_support_it() -> None:
    nodes = {"n1": {RAFTLOG_VERSION: 2}, "n2": {}, "n3": None}
    with pytest.raises(FeatureUpdateRefused) as refused:
        features.check_upgrade(RAFTLOG_VERSION, 2, {}, nodes)
    assert "n2 (supports 1)" in str(refused.value) and "n3 (not heard from" in str(refused.value)
    assert "n1" not in str(refused.value)
    assert features.check_upgrade(RAFTLOG_VERSION, 2, {}, {"n1": {RAFTLOG_VERSION: 2}}) is True
    assert features.check_upgrade(RAFTLOG_VERSION, 2, {RAFTLOG_VERSION: 2}, nodes) is False  # already there


@pytest.mark.parametrize(
    ("feature", "level", "words"),
    [(RAFTLOG_VERSION, 1, "downgrade"), (RAFTLOG_VERSION, 3, "supports levels 1..2"), ("nope", 2, "unknown")],
)
def test_downgrades_unknown_features_and_levels_are_refused(feature: str, level: int, words: str) -> None:
    with pytest.raises(FeatureUpdateRefused, match=words):
        features.check_upgrade(feature, level, {RAFTLOG_VERSION: 2}, {"n1": {RAFTLOG_VERSION: 9}})


def test_a_node_refuses_a_cluster_above_what_it_supports() -> None:
    assert features.unsupported({}) is None
    assert features.unsupported({RAFTLOG_VERSION: 2}) is None
    why = features.unsupported({RAFTLOG_VERSION: 3})
    assert why is not None and "finalized at level 3" in why and "supports at most 2" in why


def test_the_gate_follows_the_finalized_level() -> None:
    finalized: dict[str, int] = {}
    gate = Features(lambda: finalized)
    assert not gate.allows(CLASSIC_GROUP_METADATA)
    finalized[RAFTLOG_VERSION] = 2
    assert gate.allows(CLASSIC_GROUP_METADATA)


def _decode_as_0_1_0(blob: bytes) -> tuple[object, ...]:
    """What release 0.1.0's decode_meta reads of a blob: its first nine fields, the ninth a bool."""
    fields = msgpack.unpackb(blob, raw=False)
    disk_full = fields[8] if len(fields) > 8 else False
    assert isinstance(disk_full, bool)  # 0.1.0 refuses the whole blob otherwise
    return tuple(fields[:9])


def test_the_gossiped_version_and_levels_and_the_previous_releases_reading() -> None:
    blob = encode_meta("http://h:1", "h:2", 3, {}, 1400, release=("0.2.0", {RAFTLOG_VERSION: 2}))
    meta = decode_meta(blob)
    assert (meta.release, meta.supported, meta.disk_full, meta.kafka) == (
        "0.2.0",
        {RAFTLOG_VERSION: 2},
        False,
        None,
    )
    assert _decode_as_0_1_0(blob)[:5] == (1, "http://h:1", "h:2", 3, [])
    old = encode_meta("http://h:1", "h:2", 3, {}, 1400)  # a node of 0.1.0 gossips no release
    assert decode_meta(old).release is None and decode_meta(old).supported is None


@pytest.mark.parametrize("level", [1, 2])
def test_kafkas_features_follow_raftlog_version_and_the_gates_they_name(level: int) -> None:
    finalized = {RAFTLOG_VERSION: level}
    gate = Features(lambda: finalized)
    shown = features.kafka_levels(finalized)
    assert shown.get("group.version", 0) == int(gate.allows(features.CONSUMER_GROUP))
    assert shown.get("share.version", 0) == int(gate.allows(features.SHARE_GROUPS))
    assert shown.get("streams.version", 0) == int(gate.allows(features.STREAMS_GROUPS))
    assert shown["metadata.version"] == {1: 27, 2: 33}[level]  # Kafka's 4.1-IV1 and 4.4-IV2
    supported, advertised = gate.advertised()
    assert supported["group.version"] == (0, 1) and supported["metadata.version"] == (27, 33)
    assert supported[RAFTLOG_VERSION] == (1, features.SUPPORTED[RAFTLOG_VERSION])
    assert advertised == {**gate.levels(), **shown}


@pytest.mark.parametrize(
    ("feature", "level", "words"),
    [
        ("group.version", 1, "comes with raftlog.version 2"),
        ("metadata.version", 33, "comes with raftlog.version 2"),
        ("metadata.version", 30, "the levels 27, 33"),
        ("share.version", 2, "dead-letter"),
        ("eligible.leader.replicas.version", 1, "KIP-966"),
        ("kraft.version", 1, "not KRaft"),
        ("streams.version", 1, "comes with raftlog.version 2"),
        ("streams.version", 2, "the levels 0, 1"),
    ],
)
def test_an_update_of_kafkas_features_is_refused_unless_the_cluster_is_there(
    feature: str, level: int, words: str
) -> None:
    at_0_1_0 = {RAFTLOG_VERSION: 1}
    with pytest.raises(FeatureUpdateRefused, match=words):
        features.check_kafka_update(feature, level, at_0_1_0)


def test_an_update_of_kafkas_features_to_where_the_cluster_is_is_a_no_op_and_a_downgrade_refused() -> None:
    at_0_2_0 = {RAFTLOG_VERSION: 2}
    for feature, level in features.kafka_levels(at_0_2_0).items():
        features.check_kafka_update(feature, level, at_0_2_0)  # no refusal: a no-op
    with pytest.raises(FeatureUpdateRefused, match="downgrade is refused"):
        features.check_kafka_update("group.version", 0, at_0_2_0)
    assert "group.version" not in features.kafka_levels({RAFTLOG_VERSION: 1})  # level 0: left out


def test_each_of_kafkas_features_has_a_level_for_every_raftlog_version_this_code_supports() -> None:
    every = set(range(features.BASE_LEVEL, features.SUPPORTED[RAFTLOG_VERSION] + 1))
    for kafka in features.KAFKA_FEATURES.values():
        assert set(kafka.by_level) == every, kafka.name  # a new raftlog.version names them all
        assert list(kafka.by_level.values()) == sorted(kafka.by_level.values()), kafka.name  # never lower
