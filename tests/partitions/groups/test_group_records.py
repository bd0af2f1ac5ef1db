"""What the group table records besides HTTP members (``partitions.groups.state``): the topics a group
committed, a Kafka group's metadata (members, assignments; generations as the release before wrote
them), a group's deletion; their refusals while HTTP members hold the
group; snapshots old and new; and the data partitions' ``DeleteOffset``."""

from __future__ import annotations

import msgpack
import pytest

from partitions import commands
from partitions.errors import InvalidCommand
from partitions.groups.errors import GroupNotEmpty
from partitions.groups.group_commands import (
    ClassicGroupMetadata,
    Committed,
    Expire,
    Forget,
    Join,
    KafkaGeneration,
    Leave,
    Refresh,
    Subscribe,
    decode,
    encode,
)
from partitions.groups.group_model import (
    CLASSIC_GROUP_BYTES_MAX,
    CLASSIC_MEMBER_BYTES_MAX,
    EMPTY_GROUP_RETENTION_MS,
    ClassicMember,
    ConsumerInstance,
)
from partitions.groups.state import GroupChanged, GroupTable
from partitions.replicas.state_machine import OffsetCommitted, OffsetDeleted, PartitionStateMachine
from raftlog.storage.log import Log


def _apply(table: GroupTable, command: object) -> object:
    return table.apply(encode(command))  # type: ignore[arg-type]


def _member(name: str, host: str = "10.0.0.7") -> ConsumerInstance:
    return ConsumerInstance(name, "json", "earliest", 10_000, 1, client_host=host)


def test_each_record_command_survives_its_codec() -> None:
    for command in (
        Committed("g", ("a", "b"), 5),
        KafkaGeneration("g", "consumer", "range", 7, 9),
        Forget("g"),
        Join("g", _member("m"), "range"),
    ):
        assert decode(encode(command)) == command  # type: ignore[arg-type]


def test_a_commit_records_an_empty_group_that_a_kafka_generation_and_http_members_go_on_from() -> None:
    table = GroupTable()
    _apply(table, Committed("g", ("orders",), 100))
    group = table.groups["g"]
    assert (group.members, group.protocol_type, group.committed_topics, group.generation) == (
        {},
        "",
        ("orders",),
        0,
    )
    _apply(table, KafkaGeneration("g", "consumer", "cooperative-sticky", 3, 200))
    _apply(table, KafkaGeneration("g", "consumer", "range", 2, 210))  # applied late: never backwards
    group = table.groups["g"]
    assert (group.protocol_type, group.assignor, group.generation) == ("consumer", "range", 3)
    assert group.committed_topics == ("orders",)
    # the Kafka members gone, HTTP members may take the group over: its generations and topics go on
    _apply(table, Join("g", _member("m"), "range"))
    _apply(table, Subscribe("g", "m", ("orders",), {"orders": 2}, 300))
    group = table.groups["g"]
    assert (group.protocol_type, group.generation, group.committed_topics) == (None, 5, ("orders",))
    assert group.members["m"].client_host == "10.0.0.7"


def test_kafka_records_and_deletion_are_refused_while_http_members_hold_the_group() -> None:
    table = GroupTable()
    _apply(table, Join("g", _member("m"), "range"))
    refused = _apply(table, KafkaGeneration("g", "consumer", "range", 1, 5))
    assert isinstance(refused, GroupNotEmpty) and refused.members == 1
    assert isinstance(_apply(table, Forget("g")), GroupNotEmpty)
    changed = _apply(table, Committed("g", ("t",), 6))  # a commit is recorded whoever holds the group
    assert isinstance(changed, GroupChanged) and table.groups["g"].committed_topics == ("t",)
    _apply(table, Leave("g", "m", 7))
    assert isinstance(_apply(table, Forget("g")), GroupChanged) and "g" not in table.groups


def test_a_kafka_groups_record_is_kept_by_sweeps_and_forgotten_after_the_retention() -> None:
    table = GroupTable()
    _apply(table, KafkaGeneration("g", "consumer", "range", 4, 1_000))
    _apply(table, Refresh("g", {"t": 3}, 2_000))  # no assignment of ours to redo
    assert table.groups["g"].generation == 4 and table.groups["g"].partition_counts == {}
    _apply(table, Expire("g", (), 1_000 + EMPTY_GROUP_RETENTION_MS - 1))
    assert "g" in table.groups
    _apply(table, Expire("g", (), 1_000 + EMPTY_GROUP_RETENTION_MS))
    assert "g" not in table.groups


def test_snapshots_keep_the_records_and_read_the_rows_written_before_them() -> None:
    table = GroupTable()
    _apply(table, KafkaGeneration("k", "connect", "sessioned", 2, 10))
    _apply(table, Committed("k", ("a",), 11))
    _apply(table, Join("h", _member("m"), "range"))
    again = GroupTable.from_rows(table.to_rows())
    assert again.groups == table.groups
    old = [row[:7] for row in table.to_rows()]  # a snapshot of the release before: seven fields
    for row in old:
        for member in row[3]:
            del member[7:]  # and members without their host
    restored = GroupTable.from_rows(old)
    assert restored.groups["k"].protocol_type is None and restored.groups["k"].committed_topics == ()
    assert restored.groups["h"].members["m"].client_host == ""


def test_a_deleted_groups_offset_is_gone_on_every_replica_alike(tmp_path: object) -> None:
    machines = [PartitionStateMachine(Log.open(f"{tmp_path}/{i}")) for i in range(2)]
    entries = [
        commands.encode(commands.CommitOffset("g", 5)),
        commands.encode(commands.CommitOffset("other", 9)),
        commands.encode(commands.DeleteOffset("g")),
        commands.encode(commands.DeleteOffset("g")),
    ]
    for machine in machines:
        results = [machine.apply(index, 1, entry) for index, entry in enumerate(entries, start=1)]
        assert results[0] == OffsetCommitted("g", 5)
        assert results[2:] == [OffsetDeleted("g", True), OffsetDeleted("g", False)]
        assert dict(machine.consumer_offsets) == {"other": 9}
    assert commands.decode(commands.encode(commands.DeleteOffset("g"))) == commands.DeleteOffset("g")


def _classic(generation: int, *members: ClassicMember, leader: str | None = "a") -> ClassicGroupMetadata:
    return ClassicGroupMetadata("g", "consumer", "range", generation, leader, members, 50)


A = ClassicMember("a", None, "client-a", "10.0.0.1", 60_000, 45_000, b"sub-a", b"assigned-a")
B = ClassicMember("b", "static-b", "client-b", "10.0.0.2", 60_000, 45_000, b"sub-b", b"")


def test_a_classic_groups_metadata_survives_its_codec_and_snapshots_and_older_snapshots_still_load() -> None:
    command = _classic(3, A, B)
    assert decode(encode(command)) == command
    # version 0's fields with more after them (a later version's): read as version 0
    fields = msgpack.unpackb(encode(command), raw=False)
    assert decode(msgpack.packb([*fields, "later"], use_bin_type=True)) == command
    table = GroupTable()
    _apply(table, Committed("g", ("t",), 40))
    _apply(table, command)
    group = table.groups["g"]
    assert (group.generation, group.assignor, group.classic_leader, group.classic_members) == (
        3,
        "range",
        "a",
        (A, B),
    )
    assert group.committed_topics == ("t",) and group.members == {}
    packed = msgpack.packb(table.to_rows(), use_bin_type=True)  # as the partition's snapshot packs it
    again = GroupTable.from_rows(msgpack.unpackb(packed, raw=False))
    assert again.groups == table.groups
    before = [row[:9] for row in table.to_rows()]  # the release before: nine fields, no members
    assert GroupTable.from_rows(before).groups["g"].classic_members == ()
    with pytest.raises(InvalidCommand):
        decode(msgpack.packb([9, 0, "g", "consumer"], use_bin_type=True))


def test_a_classic_groups_rebalance_under_way_survives_its_codec_and_snapshots() -> None:
    """``rebalancing``: the tenth field of the record and the fourth of the snapshot's classic row;
    records and rows written before it read as not rebalancing."""
    command = ClassicGroupMetadata("g", "consumer", "range", 3, "a", (A,), 50, rebalancing=True)
    assert decode(encode(command)) == command
    nine = msgpack.unpackb(encode(command), raw=False)[:9]  # a record written before it
    assert decode(msgpack.packb(nine, use_bin_type=True)).rebalancing is False
    table = GroupTable()
    _apply(table, _classic(3, A, B))
    _apply(table, command)  # b left: the same generation, written again
    group = table.groups["g"]
    assert (group.generation, group.classic_members, group.classic_rebalancing) == (3, (A,), True)
    again = GroupTable.from_rows(msgpack.unpackb(msgpack.packb(table.to_rows(), use_bin_type=True)))
    assert again.groups == table.groups
    rows = table.to_rows()
    rows[0][9] = rows[0][9][:3]  # the classic row as written before it
    assert GroupTable.from_rows(rows).groups["g"].classic_rebalancing is False
    _apply(table, _classic(4, A))  # the rebalance completed
    assert table.groups["g"].classic_rebalancing is False
    emptied = ClassicGroupMetadata("g", "consumer", "", 5, None, (), 60, rebalancing=True)
    _apply(table, emptied)
    assert table.groups["g"].classic_rebalancing is False  # nobody left to rebalance


def test_the_previous_releases_kafka_generation_bytes_still_decode_and_apply() -> None:
    old = msgpack.packb([7, "g", "consumer", "range", 4, 1_000], use_bin_type=True)
    assert decode(old) == KafkaGeneration("g", "consumer", "range", 4, 1_000)
    table = GroupTable()
    _apply(table, _classic(3, A, B))
    table.apply(old)  # a node of the release before wrote it: the generation, its members unknown
    group = table.groups["g"]
    assert (group.generation, group.classic_members, group.classic_leader) == (4, (), None)


def test_classic_metadata_never_goes_back_and_is_bounded_and_refused_while_http_members_hold_the_group() -> (
    None
):
    table = GroupTable()
    _apply(table, _classic(5, A))
    late = _apply(table, _classic(4, A, B))  # an older generation applied late
    assert isinstance(late, GroupChanged) and table.groups["g"].classic_members == (A,)
    emptied = _apply(table, _classic(6, leader=None))
    assert isinstance(emptied, GroupChanged) and table.groups["g"].classic_members == ()
    huge = ClassicMember("h", None, "c", "", 1, 1_000, b"", b"x" * (CLASSIC_MEMBER_BYTES_MAX + 1))
    assert _classic(7, huge).excess() == (CLASSIC_MEMBER_BYTES_MAX + 1, CLASSIC_MEMBER_BYTES_MAX)
    assert isinstance(_apply(table, _classic(7, huge)), InvalidCommand)
    many = [
        ClassicMember(str(i), None, "c", "", 1, 1_000, b"", b"y" * CLASSIC_MEMBER_BYTES_MAX) for i in range(9)
    ]
    assert _classic(7, *many).excess() == (9 * CLASSIC_MEMBER_BYTES_MAX, CLASSIC_GROUP_BYTES_MAX)
    assert isinstance(_apply(table, _classic(7, *many)), InvalidCommand)
    assert table.groups["g"].generation == 6
    http = GroupTable()
    _apply(http, Join("g", _member("m"), "range"))
    assert isinstance(_apply(http, _classic(1, A)), GroupNotEmpty)


def test_a_classic_group_with_members_is_never_forgotten_by_the_empty_groups_sweep() -> None:
    table = GroupTable()
    _apply(table, _classic(2, A))
    _apply(table, Expire("g", (), 50 + EMPTY_GROUP_RETENTION_MS))
    assert table.groups["g"].classic_members == (A,)
    _apply(table, _classic(3, leader=None))
    _apply(table, Expire("g", (), 50 + 2 * EMPTY_GROUP_RETENTION_MS))
    assert "g" not in table.groups
