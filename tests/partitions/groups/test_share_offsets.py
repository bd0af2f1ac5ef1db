"""Share groups' offset admin (KIP-932) without I/O, as Kafka's coordinator answers it: a group's start
offsets described (every partition holding its state, or those asked, uninitialized ones without an
offset), moved and deleted only while it has no member (NON_EMPTY_GROUP), a group that does not exist
refused (GROUP_ID_NOT_FOUND) but made by an alteration (as Kafka 4.4), and a share group deleted with its
state in every partition. The partitions apply the replicated share commands themselves
(``share_partition.ShareTable``)."""

from __future__ import annotations

import asyncio

import pytest

from partitions.errors import UnknownTopic
from partitions.groups.assignors import TopicPartition as TP
from partitions.groups.errors import GroupNotEmpty, UnknownGroup
from partitions.groups.share import partition as share_partition
from partitions.groups.share.coordinator import ShareGroupCoordinator
from partitions.groups.share.group import ShareHeartbeat
from partitions.groups.share.offsets import ShareOffsets
from partitions.groups.share.partition import ShareOffset
from tests.partitions.groups.share_table import ShareTable
from tests.partitions.groups.test_share_coordinator import Clock

TOPICS = {"t": 2, "u": 1, "__consumer_groups": 4}


class Partitions:
    """Each partition's share table, high watermark 10, applying the commands the leader would."""

    def __init__(self) -> None:
        self.tables = {TP(t, p): share_partition.ShareTable() for t, n in TOPICS.items() for p in range(n)}

    def _table(self, topic: str, partition: int) -> share_partition.ShareTable:
        if TP(topic, partition) not in self.tables:
            raise UnknownTopic(topic)
        return self.tables[TP(topic, partition)]

    async def share_offset(self, group: str, topic: str, partition: int) -> ShareOffset | None:
        state = self._table(topic, partition).groups.get(group)
        return None if state is None else ShareOffset(state.start, 10 - state.start)

    async def alter_share_offset(
        self, group: str, topic: str, partition: int, offset: int, timeout_ms: int
    ) -> None:
        self._table(topic, partition).apply(
            share_partition.encode(share_partition.ResetOffset(group, offset))
        )

    async def delete_share_state(self, group: str, topic: str, partition: int, timeout_ms: int) -> bool:
        result = self._table(topic, partition).apply(
            share_partition.encode(share_partition.DeleteState(group))
        )
        return isinstance(result, share_partition.ShareApplied) and result.existed


def _offsets() -> tuple[ShareOffsets, ShareGroupCoordinator, Partitions]:
    share = ShareGroupCoordinator(ShareTable({"t": 2, "u": 1}), Clock())
    partitions = Partitions()
    return ShareOffsets(share, partitions, lambda: TOPICS), share, partitions


def test_offsets_move_and_go_only_while_the_group_has_no_member() -> None:
    offsets, share, partitions = _offsets()

    async def scenario() -> None:
        with pytest.raises(UnknownGroup):  # GROUP_ID_NOT_FOUND
            await offsets.describe("g", None)
        with pytest.raises(UnknownGroup):
            await offsets.delete("g", ["t"])
        await share.heartbeat("g", ShareHeartbeat("a", 0, ("t",)))
        with pytest.raises(GroupNotEmpty):  # NON_EMPTY_GROUP: its members are consuming
            await offsets.alter("g", {TP("t", 0): 3})
        with pytest.raises(GroupNotEmpty):
            await offsets.delete("g", ["t"])
        with pytest.raises(GroupNotEmpty):
            await offsets.forget_group("g")
        assert await offsets.describe("g", None) == {}  # nothing initialized yet
        await share.heartbeat("g", ShareHeartbeat("a", -1))  # left: the group is empty, and still listed
        assert await offsets.alter("g", {TP("t", 0): 3, TP("u", 0): 0}) == {
            TP("t", 0): None,
            TP("u", 0): None,
        }
        assert await offsets.describe("g", None) == {
            TP("t", 0): ShareOffset(3, 7), TP("u", 0): ShareOffset(0, 10)
        }  # fmt: skip
        asked = await offsets.describe("g", [TP("t", 0), TP("t", 1), TP("gone", 0)])
        assert asked[TP("t", 0)] == ShareOffset(3, 7) and asked[TP("t", 1)] is None  # uninitialized
        assert isinstance(asked[TP("gone", 0)], UnknownTopic)
        deleted = await offsets.delete("g", ["t", "gone"])
        assert deleted["t"] is None and isinstance(deleted["gone"], UnknownTopic)
        assert await offsets.describe("g", None) == {TP("u", 0): ShareOffset(0, 10)}
        await offsets.forget_group("g")  # DeleteGroups: the state goes from every partition
        assert all("g" not in table.groups for table in partitions.tables.values())

    asyncio.run(scenario())


def test_an_alteration_makes_the_group_it_sets_offsets_for_as_kafka_4_4() -> None:
    offsets, share, _ = _offsets()

    async def scenario() -> None:
        assert await offsets.alter("new", {TP("t", 0): 8}) == {TP("t", 0): None}
        assert share.describe("new").members == {}  # made, empty: GROUP_ID_NOT_FOUND no more
        assert await offsets.describe("new", None) == {TP("t", 0): ShareOffset(8, 2)}
        assert await offsets.delete("new", ["t"]) == {"t": None}
        await offsets.forget_group("new")

    asyncio.run(scenario())


def test_a_deleted_share_group_is_gone_from_its_coordinator() -> None:
    table = ShareTable({"t": 2, "u": 1})
    share = ShareGroupCoordinator(table, Clock())

    async def scenario() -> None:
        await share.heartbeat("g", ShareHeartbeat("a", 0, ("t",)))
        await share.heartbeat("g", ShareHeartbeat("a", -1))
        assert share.describe("g").members == {}
        table.table.groups = {}  # DeleteGroups forgot its record
        with pytest.raises(UnknownGroup):
            share.describe("g")

    asyncio.run(scenario())
