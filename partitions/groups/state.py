"""The replicated state of consumer groups: members, subscriptions, generations and assignments.

One ``GroupTable`` lives in each partition of the internal ``__consumer_groups`` topic, inside that
partition's ``PartitionStateMachine``; a group belongs to the partition its name hashes to (its
coordinator). Commands are proposed by the coordinator partition's leader and applied on every replica.

``apply`` is deterministic: time comes in the command (``now_ms``, stamped by the leader), the assignment
is a pure function of the committed membership (``assignors``), and refusals are returned, not raised.
Every membership or subscription change bumps the group's generation (Kafka's rule) and reassigns.
A group whose last member left stays, empty (Kafka's Empty state: its generation bumped, no assignment,
the partition counts of the topics it read kept so that describe and reset still know them), and is
forgotten once it stayed empty for ``EMPTY_GROUP_RETENTION_MS`` (Kafka's ``offsets.retention.minutes``:
7 days), through an ``Expire`` the coordinator proposes; one that never committed an offset once it
stayed empty for ``EMPTY_UNCOMMITTED_RETENTION_MS`` (10 minutes), as Kafka's cleanup deletes an empty group
without offsets at its next run (a share group only after the retention). Its committed offsets live with
the data partitions either way.

One table, both front doors. A group's members join either over HTTP (consumer instances: the table
holds them, their subscriptions and assignments) or over the Kafka protocol (classic groups: the
coordinator runs them in its memory, and writes the group's metadata here as Kafka writes it to
``__consumer_offsets``: ``ClassicGroupMetadata``, its protocol type, protocol, generation, leader and
every member with its subscription and assignment, when a rebalance completes and when the group
empties; a new coordinator loads it, so the members, their generation and assignments outlive a
failover or a restart. ``KafkaGeneration``, what releases before wrote instead, still applies: the
generation without members). ``Group.protocol_type`` tells which: None for HTTP members, the Kafka
protocol type (``consumer``, ``connect``...) otherwise, "" for a group that only committed offsets.
Every group also keeps the topics it committed offsets of (``Committed``), so that describe, reset and
delete find its offsets once its members are gone; ``Forget`` deletes an empty group (its offsets are
deleted first, on their partitions).

Groups are immutable values replaced whole on change, so the event loop may read the table while the
consensus thread applies (a read sees the group before or after a command, never half of it). The values
are ``group_model``'s; the commands and their encoding ``group_commands``'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from partitions.errors import InvalidCommand
from partitions.groups.assignors import ASSIGNORS, TopicPartition
from partitions.groups.consumer.group import ConsumerGroup
from partitions.groups.errors import (
    ConsumerInstanceExists,
    GroupFull,
    GroupNotEmpty,
    ShareGroupLimitReached,
    UnknownConsumerInstance,
)
from partitions.groups.group_commands import (
    ClassicGroupMetadata,
    Committed,
    ConsumerGroupRecord,
    Expire,
    Forget,
    Join,
    Leave,
    RecordCommand,
    Refresh,
    ShareGroupRecord,
    StreamsGroupRecord,
    Subscribe,
    decode,
)
from partitions.groups.group_model import (
    CLASSIC_METADATA_VERSION,
    DEFAULT_READS,
    EMPTY_GROUP_RETENTION_MS,
    EMPTY_UNCOMMITTED_RETENTION_MS,
    GROUP_MEMBERS_MAX,
    SHARE_PROTOCOL_TYPE,
    STREAMS_PROTOCOL_TYPE,
    ClassicMember,
    ConsumerInstance,
    Group,
    ReadConfig,
)
from partitions.groups.share.group import SHARE_MEMBERS_MAX, ShareMember
from partitions.groups.streams.group import StreamsGroup
from raftlog.errors import check

# -- apply ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupChanged:
    """The group after the command; None when its last member left (the group is forgotten)."""

    name: str
    group: Group | None
    removed: tuple[str, ...] = ()  # members that left or were expired by this command


GroupResult = (
    GroupChanged
    | UnknownConsumerInstance
    | ConsumerInstanceExists
    | GroupFull
    | GroupNotEmpty
    | ShareGroupLimitReached
    | InvalidCommand
)


def _rebalance(
    previous: Group | None,
    name: str,
    assignor: str,
    members: Mapping[str, ConsumerInstance],
    counts: Mapping[str, int],
    now_ms: int,
) -> Group:
    committed = previous.committed_topics if previous is not None else ()
    if not members:  # Kafka's Empty state: the group and the topics it read stay, for describe and reset
        generation = (previous.generation if previous is not None else 0) + 1
        kept = {t: int(c) for t, c in counts.items()}
        return Group(name, assignor, generation, {}, {}, kept, now_ms, None, committed)
    subscriptions = {m.instance_id: m.topics for m in members.values()}
    wanted = {t for m in members.values() for t in m.topics}
    kept_counts = {t: int(c) for t, c in counts.items() if t in wanted}
    assignment = ASSIGNORS[assignor](subscriptions, kept_counts)
    covered = [tp for tps in assignment.values() for tp in tps]
    expected = sum(kept_counts.values())
    check(
        len(covered) == len(set(covered)) == expected,
        f"group {name}: assignor {assignor} assigned {len(covered)} partitions ({len(set(covered))} "
        f"distinct) of {expected}",
    )
    generation = (previous.generation if previous is not None else 0) + 1
    return Group(name, assignor, generation, dict(members), assignment, kept_counts, now_ms, None, committed)


@dataclass
class GroupTable:
    """Every group coordinated by one partition of ``__consumer_groups`` (deterministic apply). ``groups``
    is replaced whole by each change (on the driver thread), never changed in place: the coordinator reads
    it on the event loop."""

    groups: Mapping[str, Group] = field(default_factory=lambda: MappingProxyType({}))

    def apply(self, data: bytes) -> GroupResult:
        try:
            command = decode(data)
        except InvalidCommand as exc:
            return exc
        existing = self.groups.get(command.group)
        if isinstance(command, RecordCommand):
            return self._record(command, existing)
        if isinstance(command, Join):
            member = command.member
            if existing is not None and member.instance_id in existing.members:
                return ConsumerInstanceExists(command.group, member.instance_id)
            limit = command.members_max
            if existing is not None and limit is not None and len(existing.members) >= limit:
                return GroupFull(command.group, limit)
            if command.assignor not in ASSIGNORS:
                return InvalidCommand(f"unknown assignor {command.assignor!r}")
            # a group with members keeps its assignor; an empty one takes the joiner's, as Kafka's does
            assignor = existing.assignor if existing is not None and existing.members else command.assignor
            members = dict(existing.members) if existing is not None else {}
            members[member.instance_id] = member
            counts = existing.partition_counts if existing is not None else {}
            return self._store(
                command.group,
                _rebalance(existing, command.group, assignor, members, counts, member.joined_ms),
            )
        if existing is None:
            if isinstance(command, Leave | Subscribe):
                return UnknownConsumerInstance(command.group, command.instance_id)
            return GroupChanged(command.group, None)
        if existing.protocol_type is not None and isinstance(command, Expire | Refresh):
            # a group of Kafka clients: its coordinator expires its members, no assignment of ours to
            # redo; forgotten once it stayed empty for the retention
            due = (
                isinstance(command, Expire)
                and not existing.classic_members
                and not _consumer_members(existing)
                and not _streams_members(existing)
                and _forgotten(existing, command)
            )
            return self._store(command.group, None) if due else GroupChanged(command.group, existing)
        members = dict(existing.members)
        counts = dict(existing.partition_counts)
        removed: tuple[str, ...] = ()
        if isinstance(command, Leave | Subscribe) and command.instance_id not in members:
            return UnknownConsumerInstance(command.group, command.instance_id)
        if isinstance(command, Leave):
            del members[command.instance_id]
            removed = (command.instance_id,)
        elif isinstance(command, Subscribe):
            old = members[command.instance_id]
            members[command.instance_id] = replace(old, topics=tuple(sorted(set(command.topics))))
            counts.update({t: int(c) for t, c in command.partition_counts.items()})
        elif isinstance(command, Expire):
            if not members:  # an empty group is forgotten once it stayed empty for the retention
                due = _forgotten(existing, command)
                return self._store(command.group, None) if due else GroupChanged(command.group, existing)
            removed = tuple(sorted(i for i in set(command.instance_ids) if i in members))
            if not removed:
                return GroupChanged(command.group, existing)
            for instance_id in removed:
                del members[instance_id]
        else:
            counts.update({t: int(c) for t, c in command.partition_counts.items()})
            if counts == dict(existing.partition_counts):
                return GroupChanged(command.group, existing)
        group = _rebalance(existing, command.group, existing.assignor, members, counts, command.now_ms)
        return self._store(command.group, group, removed)

    def _record(
        self,
        command: RecordCommand,
        existing: Group | None,
    ) -> GroupResult:
        """What either door records of a group besides HTTP members: its committed topics, a Kafka
        group's metadata (or, written by releases before, its generation), its deletion (the last two
        refused while HTTP members hold the group)."""
        name = command.group
        if isinstance(command, Committed):
            if existing is None:
                topics = tuple(sorted(set(command.topics)))
                return self._store(name, Group(name, "", 0, {}, {}, {}, command.now_ms, "", topics))
            topics = tuple(sorted(set(existing.committed_topics) | set(command.topics)))
            changed = existing.changed_ms if existing.members else command.now_ms  # retention: last use
            return self._store(name, replace(existing, committed_topics=topics, changed_ms=changed))
        if existing is not None and existing.members:
            return GroupNotEmpty(name, len(existing.members), "HTTP")
        if isinstance(command, ConsumerGroupRecord) and command.converts is not None:
            return self._converted(command, existing)
        if isinstance(command, ConsumerGroupRecord | StreamsGroupRecord):
            if existing is not None and existing.classic_members:
                return GroupNotEmpty(name, len(existing.classic_members), "the classic Kafka protocol")
            if isinstance(command, ConsumerGroupRecord):
                if existing is not None and existing.streams is not None:  # one even empty
                    return GroupNotEmpty(name, _streams_members(existing), "the streams group protocol")
                return self._store(name, _consumer_group(command, existing))
            if existing is not None and existing.consumer is not None:  # one even empty, to a streams group
                return GroupNotEmpty(name, _consumer_members(existing), "the consumer group protocol")
            return self._store(name, _streams_group(command, existing))
        if isinstance(command, ClassicGroupMetadata) and command.converts is not None:
            return self._downgraded(command, existing)
        held = _consumer_members(existing)
        if held:  # a consumer protocol group with members: no classic metadata over it, no deletion
            return GroupNotEmpty(name, held, "the consumer group protocol")
        if _streams_members(existing) or (
            existing is not None and existing.streams is not None and isinstance(command, ShareGroupRecord)
        ):  # a streams group's members; and, as Kafka's, a share group never over one even empty (an empty
            # one Kafka converts to a classic group, and deletes)
            return GroupNotEmpty(name, _streams_members(existing), "the streams group protocol")
        if isinstance(command, ShareGroupRecord):
            if existing is not None and existing.classic_members:
                return GroupNotEmpty(name, len(existing.classic_members), "the classic Kafka protocol")
            shared = existing is not None and existing.protocol_type == SHARE_PROTOCOL_TYPE
            if existing is not None and shared and command.epoch <= existing.generation:
                return GroupChanged(name, existing)  # never backwards
            if not shared and command.groups_max is not None and self.share_groups() >= command.groups_max:
                return ShareGroupLimitReached(name, command.groups_max)
            if len(command.members) > SHARE_MEMBERS_MAX:
                return InvalidCommand(f"share group {name!r}: {len(command.members)} members")
            shares = _kafka_group(
                name, "simple", command.epoch, command.now_ms, SHARE_PROTOCOL_TYPE, existing
            )
            counts = dict(command.counts)
            return self._store(name, replace(shares, partition_counts=counts, share_members=command.members))
        if isinstance(command, Forget):
            if existing is not None and existing.share_members:
                return GroupNotEmpty(name, len(existing.share_members), "the share group protocol (KIP-932)")
            return self._store(name, None)
        if isinstance(command, ClassicGroupMetadata):
            excess = command.excess()
            if len(command.members) > GROUP_MEMBERS_MAX or excess is not None:
                return InvalidCommand(
                    f"group {name!r}: {len(command.members)} members (at most {GROUP_MEMBERS_MAX}), "
                    f"metadata past its bound: {excess} (bytes, bound)"
                )
            if existing is not None and command.generation < existing.generation:
                return GroupChanged(name, existing)  # a later generation is written: never backwards
            return self._store(name, _classic_group(command, existing))
        generation = max(command.generation, existing.generation if existing is not None else 0)
        kafka = _kafka_group(
            name, command.protocol, generation, command.now_ms, command.protocol_type, existing
        )
        return self._store(name, kafka)

    def share_groups(self) -> int:
        """How many share groups the table holds (``--group-share-max-groups`` bounds them)."""
        return sum(1 for g in self.groups.values() if g.protocol_type == SHARE_PROTOCOL_TYPE)

    def _converted(self, command: ConsumerGroupRecord, existing: Group | None) -> GroupResult:
        """A classic group becoming a consumer protocol group (``ConsumerGroupRecord.converts``): applied
        while the table holds the generation its coordinator read (0: no record of the group) and no
        other protocol's group; else refused GroupNotEmpty (the classic members wrote a rebalance
        meanwhile: the coordinator reads the group again)."""
        name = command.group
        generation = 0 if existing is None else existing.generation
        other = existing is not None and (
            _consumer_members(existing) > 0
            or existing.streams is not None
            or existing.protocol_type == SHARE_PROTOCOL_TYPE
        )
        if generation != command.converts or other:
            members = 0 if existing is None else len(existing.classic_members)
            return GroupNotEmpty(name, members, "the classic Kafka protocol")
        return self._store(name, _consumer_group(command, existing))

    def _downgraded(self, command: ClassicGroupMetadata, existing: Group | None) -> GroupResult:
        """A consumer protocol group becoming a classic group (``ClassicGroupMetadata.converts``): applied
        while the table holds the consumer group at the epoch its coordinator read, with its bounds
        checked as any classic group's; else refused GroupNotEmpty."""
        name = command.group
        if existing is None or existing.consumer is None or existing.consumer.group_epoch != command.converts:
            return GroupNotEmpty(name, _consumer_members(existing), "the consumer group protocol")
        excess = command.excess()
        if len(command.members) > GROUP_MEMBERS_MAX or excess is not None:
            return InvalidCommand(
                f"group {name!r}: {len(command.members)} members, past its bounds: {excess}"
            )
        return self._store(name, _classic_group(command, existing))

    def _store(self, name: str, group: Group | None, removed: tuple[str, ...] = ()) -> GroupChanged:
        groups = dict(self.groups)
        if group is None:
            groups.pop(name, None)
        else:
            groups[name] = group
        self.groups = MappingProxyType(groups)
        return GroupChanged(name, group, removed)

    # -- snapshots -------------------------------------------------------------------------------------

    def to_rows(self) -> list[list[Any]]:
        rows: list[list[Any]] = []
        for g in self.groups.values():
            members = [_member_row(m) for m in g.members.values()]
            assignment = {member: [list(tp) for tp in tps] for member, tps in g.assignment.items()}
            rows.append(
                [
                    g.name,
                    g.assignor,
                    g.generation,
                    members,
                    assignment,
                    dict(g.partition_counts),
                    g.changed_ms,
                    g.protocol_type,
                    list(g.committed_topics),
                    _classic_row(g),
                    None if g.consumer is None else g.consumer.to_row(),
                    [m.to_row() for m in g.share_members],
                    None if g.streams is None else g.streams.to_row(),
                ]
            )
        return rows

    @classmethod
    def from_rows(cls, rows: list[list[Any]]) -> GroupTable:
        groups = {}
        for row in rows:  # rows written before Kafka groups were recorded have seven fields, before their
            # members nine
            name, assignor, generation, members, assignment, counts, changed_ms = row[:7]
            protocol_type = row[7] if len(row) > 7 else None
            committed = tuple(row[8]) if len(row) > 8 else ()
            leader, classic, rebalancing = _classic_from_row(row[9] if len(row) > 9 else None)
            consumer_row = row[10] if len(row) > 10 else None  # rows before consumer groups: ten fields
            consumer = None if consumer_row is None else ConsumerGroup.from_row(name, consumer_row)
            share = tuple(ShareMember.from_row(m) for m in row[11]) if len(row) > 11 else ()  # before: 11
            streams_row = row[12] if len(row) > 12 else None  # rows before streams groups: twelve fields
            streams = None if streams_row is None else StreamsGroup.from_row(name, streams_row)
            group_members = {row[0]: _member_from_row(row) for row in members}
            group_assignment = {
                member: tuple(TopicPartition(t, int(p)) for t, p in tps) for member, tps in assignment.items()
            }
            groups[name] = Group(
                name,
                assignor,
                int(generation),
                group_members,
                group_assignment,
                dict(counts),
                int(changed_ms),
                protocol_type,
                committed,
                leader,
                classic,
                consumer,
                rebalancing,
                share,
                streams,
            )
        return cls(MappingProxyType(groups))


def _forgotten(existing: Group, command: Expire) -> bool:
    """Whether an Expire forgets ``existing``, a group without members: once it stayed empty for
    ``EMPTY_GROUP_RETENTION_MS``; one that never committed an offset (``uncommitted``, Kafka's cleanup of
    a group without offsets) after ``EMPTY_UNCOMMITTED_RETENTION_MS``, but a share group, which Kafka never
    expires so."""
    empty_for = command.now_ms - existing.changed_ms
    if empty_for >= EMPTY_GROUP_RETENTION_MS:
        return True
    return (
        command.uncommitted
        and not existing.committed_topics
        and existing.protocol_type != SHARE_PROTOCOL_TYPE
        and empty_for >= EMPTY_UNCOMMITTED_RETENTION_MS
    )


def _consumer_members(group: Group | None) -> int:
    """How many consumer protocol members hold the group."""
    return 0 if group is None or group.consumer is None else len(group.consumer.members)


def _streams_members(group: Group | None) -> int:
    """How many streams group protocol members hold the group."""
    return 0 if group is None or group.streams is None else len(group.streams.members)


def _kafka_group(
    name: str, assignor: str, generation: int, now_ms: int, protocol_type: str, existing: Group | None
) -> Group:
    """A group of Kafka clients as the table holds it, before its protocol's own fields: no HTTP member,
    the partition counts and the topics it committed offsets of as ``existing`` had them."""
    counts = dict(existing.partition_counts) if existing is not None else {}
    committed = existing.committed_topics if existing is not None else ()
    return Group(name, assignor, generation, {}, {}, counts, now_ms, protocol_type, committed)


def _streams_group(command: StreamsGroupRecord, existing: Group | None) -> Group:
    """The table's group holding a streams group: its epoch as the generation, protocol type
    ``streams``; the topics it committed offsets of kept."""
    state = command.state
    held = _kafka_group(
        command.group, "sticky", state.group_epoch, command.now_ms, STREAMS_PROTOCOL_TYPE, existing
    )
    return replace(held, partition_counts={}, streams=state)


def _classic_group(command: ClassicGroupMetadata, existing: Group | None) -> Group:
    """The table's group holding a classic group as its coordinator wrote it."""
    c = command
    held = _kafka_group(c.group, c.protocol, c.generation, c.now_ms, c.protocol_type, existing)
    leader = c.leader if c.members else None
    return replace(
        held,
        classic_leader=leader,
        classic_members=c.members,
        classic_rebalancing=c.rebalancing and bool(c.members),
    )


def _consumer_group(command: ConsumerGroupRecord, existing: Group | None) -> Group:
    """The table's group holding a consumer protocol group: its epoch as the generation, its assignor."""
    state = command.state
    held = _kafka_group(
        command.group, state.assignor, state.group_epoch, command.now_ms, "consumer", existing
    )
    return replace(held, consumer=state)


def _classic_row(g: Group) -> list[Any] | None:
    """A group's classic members in a snapshot row: [version, leader, members, rebalancing], None
    without members."""
    if not g.classic_members:
        return None
    members = [m.to_row() for m in g.classic_members]
    return [CLASSIC_METADATA_VERSION, g.classic_leader, members, g.classic_rebalancing]


def _classic_from_row(row: list[Any] | None) -> tuple[str | None, tuple[ClassicMember, ...], bool]:
    """(leader, members, rebalancing) of a snapshot's classic row; rows written before ``rebalancing``
    have three fields."""
    if not row:
        return None, (), False
    _version, leader, members = row[:3]
    rebalancing = bool(row[3]) if len(row) > 3 else False
    classic = tuple(ClassicMember.from_row(m) for m in members)
    return (None if leader is None else str(leader)), classic, rebalancing


def _member_row(m: ConsumerInstance) -> list[Any]:
    return [
        m.instance_id,
        m.format,
        m.offset_reset,
        m.session_timeout_ms,
        m.joined_ms,
        list(m.topics),
        m.reads.to_row(),
        m.client_host,
    ]


def _member_from_row(row: list[Any]) -> ConsumerInstance:
    """A snapshot's member row; rows written before ``ReadConfig`` have six fields, before the client's
    address seven."""
    reads = ReadConfig.from_row(row[6]) if len(row) > 6 else DEFAULT_READS
    host = str(row[7]) if len(row) > 7 else ""
    return ConsumerInstance(row[0], row[1], row[2], int(row[3]), int(row[4]), tuple(row[5]), reads, host)
