"""The replicated group table as each protocol's coordinator asks for it, through the node's group
coordinator: ``ConsumerTable`` (the consumer, streams and share coordinators' ``ConsumerRecords``,
``StreamsRecords`` and ``ShareRecords``) and ``ClassicTable`` (the classic groups' ``GroupRecords``).

Both stand over ``TableHost``, what they use of ``coordinator.GroupCoordinator`` (which builds them and
satisfies it): the routing to a group's partition led here, its table, the proposals to it, the classic
groups the node runs and the feature gate. This module does not import the coordinator, which imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Protocol

from partitions.features import (
    CLASSIC_GROUP_METADATA,
    CONSUMER_GROUP,
    SHARE_GROUPS,
    STREAMS_GROUPS,
    Features,
    Format,
)
from partitions.groups.classic.coordinator import ClassicGroups
from partitions.groups.classic.members import ClassicGroup, GroupCode, GroupRefusal
from partitions.groups.consumer.group import ConsumerGroup
from partitions.groups.consumer.to_classic import Downgraded
from partitions.groups.errors import (
    ConsumerProtocolNotFinalized,
    GroupError,
    ShareGroupsNotFinalized,
    StreamsGroupsNotFinalized,
)
from partitions.groups.group_commands import (
    ClassicGroupMetadata,
    ConsumerGroupRecord,
    GroupCommand,
    StreamsGroupRecord,
)
from partitions.groups.group_model import Group, Recorded
from partitions.groups.group_types import GroupType, Holders, held_by
from partitions.groups.live import LiveGroup
from partitions.groups.share.coordinator import ShareGroup
from partitions.groups.state import GroupTable
from partitions.groups.streams.group import StreamsGroup
from raftlog.storage.errors import RecordTooLarge


class PartitionSession(Protocol):
    """A coordinator partition's soft state, as far as the adapters read it."""

    @property
    def term(self) -> int:
        """The leader term this node leads the partition in."""
        ...


class TableHost(Protocol):
    """What the adapters use of the node's group coordinator (``coordinator.GroupCoordinator``)."""

    @property
    def classic(self) -> ClassicGroups:
        """The classic groups this node runs (one a consumer protocol group converts: viewed, dropped)."""
        ...

    @property
    def features(self) -> Features | None:
        """The gate before a format the previous release cannot read (None: every one)."""
        ...

    def topics(self) -> Collection[str]:
        """Every topic there is: an object replaced whole when they change."""
        ...

    def wall(self) -> int:
        """The wall clock (ms) a proposed command is stamped with."""
        ...

    def recorded(self, group: str) -> Recorded | None:
        """The group as the table holds it and the term its partition is led here in; None when not."""
        ...

    def leader_term(self, group: str) -> int | None:
        """The term this node leads the group's partition in, even while it may not read it this moment;
        None when it does not lead it."""
        ...

    async def readable(self, group: str) -> None:
        """Once this node may read the group's table, when it leads its partition (a moment's wait)."""
        ...

    def live(self, group: str) -> LiveGroup | None:
        """The group's classic members as the classic groups hold them; None without."""
        ...

    def partition_count(self, topic: str) -> int:
        """Partitions of a data topic; 0 when it does not exist."""
        ...

    def check_type(self, group: str, asking: GroupType) -> None:
        """Refused when a protocol other than ``asking`` holds the group (``group_types``)."""
        ...

    def read(self, group: str) -> tuple[int, GroupTable, PartitionSession]:
        """The group's coordinator partition, its table and soft state (NotLeader unless led here)."""
        ...

    async def propose(self, partition: int, command: GroupCommand) -> Group | None:
        """The command proposed to the partition and applied: the group as it leaves it."""
        ...

    def led_groups(self) -> Iterator[tuple[int, PartitionSession, str, Group]]:
        """Every group of every coordinator partition led here, with the partition's soft state."""
        ...


class ConsumerTable:
    """The group table as the consumer group protocol's coordinator uses it (``ConsumerRecords``)."""

    def __init__(self, groups: TableHost) -> None:
        self._groups = groups

    def recorded_group(self, group: str) -> tuple[int, Group | None] | None:
        recorded = self._groups.recorded(group)
        return None if recorded is None else (recorded.term, recorded.group)

    def leader_term(self, group: str) -> int | None:
        return self._groups.leader_term(group)

    async def readable(self, group: str) -> None:
        await self._groups.readable(group)

    def live(self, group: str) -> LiveGroup | None:
        return self._groups.live(group)

    def partition_count(self, topic: str) -> int:
        return self._groups.partition_count(topic)

    def topics(self) -> Collection[str]:
        return self._groups.topics()

    def led_share_groups(self) -> list[tuple[str, int, Group]]:
        return [
            (name, session.term, group)
            for _, session, name, group in self._groups.led_groups()
            if group.share_members
        ]

    def led_consumer_groups(self) -> list[tuple[str, int, ConsumerGroup]]:
        return [
            (name, session.term, group.consumer)
            for _, session, name, group in self._groups.led_groups()
            if group.consumer is not None
        ]

    def led_streams_groups(self) -> list[tuple[str, int, StreamsGroup]]:
        return [
            (name, session.term, group.streams)
            for _, session, name, group in self._groups.led_groups()
            if group.streams is not None
        ]

    async def record_streams(self, group: str, state: StreamsGroup) -> None:
        """Written whole before the member is answered; refused (StreamsGroupsNotFinalized) while the
        cluster's feature level predates kind 12."""
        await self._write(
            group,
            STREAMS_GROUPS,
            StreamsGroupsNotFinalized(group),
            lambda now_ms: StreamsGroupRecord(group, state, now_ms),
        )

    def share_groups(self, group: str) -> int:
        _, table, _ = self._groups.read(group)
        return table.share_groups()

    async def record_share(self, group: ShareGroup, groups_max: int) -> None:
        """Refused (ShareGroupsNotFinalized) while the cluster's feature level predates kind 11."""
        await self._write(
            group.name,
            SHARE_GROUPS,
            ShareGroupsNotFinalized(group.name),
            lambda now_ms: group.record(now_ms, groups_max),
        )

    async def record_consumer(self, group: str, state: ConsumerGroup, converts: int | None = None) -> None:
        """Written whole before the member is answered; refused (ConsumerProtocolNotFinalized) while the
        cluster's feature level predates kind 10. ``converts``: it replaces the classic group the table
        held at that generation (``ConsumerGroupRecord.converts``)."""
        await self._write(
            group,
            CONSUMER_GROUP,
            ConsumerProtocolNotFinalized(group),
            lambda now_ms: ConsumerGroupRecord(group, state, now_ms, converts),
        )

    def classic_to_convert(self, group: str) -> tuple[int, int, ClassicGroup] | None:
        """When classic members hold the group against a consumer protocol member: the term its partition
        is led here in, the generation the table holds (0: no record) and the classic group as its
        coordinator runs it (or as the table holds it, when it runs none here now); None otherwise."""
        recorded = self._groups.recorded(group)
        if recorded is None:
            return None
        held = held_by(Holders.of(recorded.group, self.live(group)), GroupType.CONSUMER)
        if held is None or held[0] is not GroupType.CLASSIC:
            return None
        classic = self._groups.classic.view(group)
        if classic is None or not classic.members:
            return None
        return recorded.term, (0 if recorded.group is None else recorded.group.generation), classic

    async def record_downgrade(self, group: str, classic: Downgraded, converts: int) -> None:
        """The classic group a consumer protocol group at epoch ``converts`` becomes (Kafka's online
        downgrade), written in its place collecting joins, as a classic coordinator writes a group that
        lost members: the classic coordinator loads it from here."""
        command = ClassicGroupMetadata(
            group, "consumer", classic.protocol, classic.generation, classic.leader, classic.members,
            self._groups.wall(), rebalancing=True, converts=converts,
        )  # fmt: skip
        partition, _, _ = self._groups.read(group)
        await self._groups.propose(partition, command)

    def drop_classic(self, group: str) -> None:
        """The classic coordinator lets the group go (it became a consumer protocol group): a member
        waiting on its join or sync is answered REBALANCE_IN_PROGRESS and joins again."""
        refusal = GroupRefusal(
            GroupCode.rebalance_in_progress, f"group {group!r} became a consumer protocol group: join again"
        )
        self._groups.classic.drop(group, refusal)

    async def _write(
        self, group: str, needs: Format, refusal: GroupError, record: Callable[[int], GroupCommand]
    ) -> None:
        """``record`` (given the leader's wall clock, ms) proposed to the group's partition; ``refusal``
        raised instead while the cluster's feature level predates ``needs``."""
        gate = self._groups.features
        if gate is not None and not gate.allows(needs):
            raise refusal
        partition, _, _ = self._groups.read(group)
        await self._groups.propose(partition, record(self._groups.wall()))


class ClassicTable:
    """The group table as Kafka's classic groups use it (``ClassicGroups``' ``GroupRecords``): their
    metadata written and read back, and whether this node still leads a group's partition."""

    def __init__(self, groups: TableHost) -> None:
        self._groups = groups

    def recorded(self, group: str) -> Recorded | None:
        return self._groups.recorded(group)

    def leader_term(self, group: str) -> int | None:
        return self._groups.leader_term(group)

    def check_type(self, group: str, asking: GroupType) -> None:
        self._groups.check_type(group, asking)

    def recorded_classic(self) -> list[tuple[str, int]]:
        """Every group of Kafka clients with members recorded in a partition led here, with the term
        it is led in: what a coordinator taking over loads."""
        return [
            (name, session.term)
            for _, session, name, group in self._groups.led_groups()
            if group.classic_members
        ]

    async def record_classic(self, group: str, record: Callable[[int], ClassicGroupMetadata]) -> None:
        """A group of Kafka clients completed a rebalance (or emptied), or lost members and collects
        joins again (``rebalancing``): its metadata, members and assignments (``record``, stamped with
        the leader's wall clock) outlive its coordinator. RecordTooLarge past the table's bounds;
        NotLeader, no quorum... when not written. Not written while the cluster's feature level predates
        kind 9 (release 0.1.0 cannot read it): a coordinator failover then loses the members, as in
        0.1.0."""
        groups = self._groups
        if groups.features is not None and not groups.features.allows(CLASSIC_GROUP_METADATA):
            return
        partition, _, _ = groups.read(group)
        command = record(groups.wall())
        excess = command.excess()
        if excess is not None:
            raise RecordTooLarge(*excess)
        await groups.propose(partition, command)
