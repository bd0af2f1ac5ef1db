"""What the group table records besides HTTP members (``partitions.groups.state``): the topics a group
committed, a Kafka group's generations, a group's deletion; their refusals while HTTP members hold the
group; snapshots old and new; and the data partitions' ``DeleteOffset``."""

from __future__ import annotations

from partitions import commands
from partitions.groups.errors import GroupNotEmpty
from partitions.groups.state import (
    EMPTY_GROUP_RETENTION_MS,
    Committed,
    Expire,
    Forget,
    GroupChanged,
    GroupTable,
    Join,
    KafkaGeneration,
    Leave,
    Member,
    Refresh,
    Subscribe,
    decode,
    encode,
)
from partitions.replicas.state_machine import OffsetCommitted, OffsetDeleted, PartitionStateMachine
from raftlog.storage.log import Log


def _apply(table: GroupTable, command: object) -> object:
    return table.apply(encode(command))  # type: ignore[arg-type]


def _member(name: str, host: str = "10.0.0.7") -> Member:
    return Member(name, "json", "earliest", 10_000, 1, client_host=host)


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
