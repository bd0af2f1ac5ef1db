"""The group table's commands and their encoding: each a msgpack list led by its kind; a reader takes
the fields a later release appends, and a record written before a field was added applies without it.
What each command does to the table is ``state.GroupTable.apply``'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgpack

from partitions.errors import InvalidCommand
from partitions.groups.consumer.group import ConsumerGroup
from partitions.groups.errors import InvalidConsumerConfig
from partitions.groups.group_model import (
    CLASSIC_GROUP_BYTES_MAX,
    CLASSIC_MEMBER_BYTES_MAX,
    CLASSIC_METADATA_VERSION,
    DEFAULT_READS,
    GROUP_MEMBERS_MAX,
    ClassicMember,
    ConsumerInstance,
    ReadConfig,
)
from partitions.groups.share.group import ShareMember
from partitions.groups.streams.group import StreamsGroup

_JOIN, _LEAVE, _SUBSCRIBE, _EXPIRE, _REFRESH, _COMMITTED, _KAFKA_GENERATION, _FORGET = 1, 2, 3, 4, 5, 6, 7, 8
_CLASSIC_METADATA = 9
_CLASSIC_CONVERTS_VERSION = 1  # a classic group's metadata converting a consumer group: its eleventh field
_CONSUMER_GROUP = 10  # a consumer protocol group (KIP-848), whole: [kind, group, ConsumerGroup row, now_ms]
# a share group (KIP-932): [kind, group, group epoch, now_ms, share groups max, members, partition counts]
_SHARE_GROUP = 11
_STREAMS_GROUP = 12  # a streams group (KIP-1071), whole: [kind, group, StreamsGroup row, now_ms]


@dataclass(frozen=True, slots=True)
class Join:
    group: str
    member: ConsumerInstance
    assignor: str  # used when this member creates the group; later members follow the group's
    # the group's most members, counted when the join is applied: joins proposed at once cannot pass it
    # (the leader stamps it, so every replica applies the same bound); None in joins written before it
    members_max: int | None = GROUP_MEMBERS_MAX


@dataclass(frozen=True, slots=True)
class Leave:
    group: str
    instance_id: str
    now_ms: int


@dataclass(frozen=True, slots=True)
class Subscribe:
    group: str
    instance_id: str
    topics: tuple[str, ...]  # empty: unsubscribe
    partition_counts: Mapping[str, int]
    now_ms: int


@dataclass(frozen=True, slots=True)
class Expire:
    group: str
    instance_ids: tuple[str, ...]  # members whose session the leader saw time out
    now_ms: int
    # an empty group is forgotten after EMPTY_UNCOMMITTED_RETENTION_MS if it never committed an offset
    # (a fifth field, written only from raftlog.version 2: features.EXPIRE_UNCOMMITTED)
    uncommitted: bool = False


@dataclass(frozen=True, slots=True)
class Refresh:
    """The subscribed topics' partition counts changed (a topic was created or deleted): reassign."""

    group: str
    partition_counts: Mapping[str, int]
    now_ms: int


@dataclass(frozen=True, slots=True)
class Committed:
    """The group committed offsets of ``topics`` (through either door): an unknown group is recorded,
    empty, so that it is listed and can be described, reset and deleted."""

    group: str
    topics: tuple[str, ...]
    now_ms: int


@dataclass(frozen=True, slots=True)
class KafkaGeneration:
    """A group of Kafka clients finished a rebalance (or lost its last member): its protocol type,
    protocol (the assignor its members chose) and generation. Refused while HTTP members hold it."""

    group: str
    protocol_type: str
    protocol: str
    generation: int
    now_ms: int


@dataclass(frozen=True, slots=True)
class ClassicGroupMetadata:
    """A group of Kafka clients as its coordinator writes it when a rebalance completes (the leader's
    SyncGroup: every member with its assignment), when the group empties (no members), and when members
    leave or expire (``rebalancing``): Kafka's group metadata record, and more. Applied unless an HTTP
    member holds the group or a later generation was written; refused past ``CLASSIC_MEMBER_BYTES_MAX``,
    ``CLASSIC_GROUP_BYTES_MAX`` or ``GROUP_MEMBERS_MAX``."""

    group: str
    protocol_type: str
    protocol: str  # the protocol (assignor) its members chose; "" when empty
    generation: int
    leader: str | None
    members: tuple[ClassicMember, ...]
    now_ms: int
    # written when members left (or their sessions expired) and the coordinator collects joins again: the
    # members still in the group, their assignments of ``generation``; a coordinator taking over goes on
    # with the rebalance instead of waiting out the sessions of members that are gone. Not in records
    # written before it (a tenth field: a reader of version 0 takes the first nine)
    rebalancing: bool = False
    # the consumer protocol group it replaces (Kafka's online downgrade, ``consumer/to_classic.py``): the
    # group epoch the table held when its coordinator read it; applied over the consumer group only while
    # the table still holds that epoch. An eleventh field, written only for a downgrade (never at level 1:
    # a group of the consumer protocol is written only from level 2), in a record of version 1
    converts: int | None = None

    def excess(self) -> tuple[int, int] | None:
        """(bytes, bound) of the first bytes bound its members pass; None within them."""
        total = 0
        for m in self.members:
            largest = max(len(m.subscription), len(m.assignment))
            if largest > CLASSIC_MEMBER_BYTES_MAX:
                return largest, CLASSIC_MEMBER_BYTES_MAX
            total += len(m.subscription) + len(m.assignment)
        return (total, CLASSIC_GROUP_BYTES_MAX) if total > CLASSIC_GROUP_BYTES_MAX else None


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    """A consumer protocol group (KIP-848) as its coordinator writes it at each change: its epochs, every
    member with its epoch, subscription and assignment, the target assignment. Refused while HTTP or
    classic Kafka members hold the group; a later write replaces it whole."""

    group: str
    state: ConsumerGroup
    now_ms: int
    # the classic group it replaces (Kafka's online upgrade, ``consumer/from_classic.py``): the generation
    # the table held when its coordinator read it; applied over the classic members only while the table
    # still holds that generation. A fifth field, written only for a conversion (the records of 0.2.0
    # before it have four; release 0.1.0 reads no kind 10)
    converts: int | None = None


@dataclass(frozen=True, slots=True)
class StreamsGroupRecord:
    """A streams group (KIP-1071) as its coordinator writes it at each change: its epochs, topology, every
    member with its epoch and tasks, the target assignment. Refused while members of another protocol
    hold the group; a later write replaces it whole."""

    group: str
    state: StreamsGroup
    now_ms: int


@dataclass(frozen=True, slots=True)
class ShareGroupRecord:
    """A share group (KIP-932), its group epoch, its members and the partition counts of their topics,
    written by its coordinator when the epoch changes: after a failover the group goes on from there with
    the same members, and its epoch never goes back. Kept as a Kafka group of protocol type ``share``;
    refused while members of another protocol hold the group."""

    group: str
    epoch: int
    now_ms: int
    # the most share groups this table may hold, counted when a record creating one is applied: creates
    # proposed at once cannot pass it (the leader stamps it, so every replica applies the same bound);
    # None in records written before it
    groups_max: int | None = None
    members: tuple[ShareMember, ...] = ()  # none in records written before members were
    counts: Mapping[str, int] = field(default_factory=dict)  # the subscribed topics' partitions


@dataclass(frozen=True, slots=True)
class Forget:
    """Delete an empty group (Kafka's DeleteGroups); refused while HTTP members hold it. Its committed
    offsets are deleted on their partitions before this is proposed."""

    group: str


RecordCommand = (
    Committed
    | KafkaGeneration
    | ClassicGroupMetadata
    | ConsumerGroupRecord
    | StreamsGroupRecord
    | ShareGroupRecord
    | Forget
)
GroupCommand = Join | Leave | Subscribe | Expire | Refresh | RecordCommand


def encode(command: GroupCommand) -> bytes:
    if isinstance(command, Join):
        m = command.member
        fields: list[Any] = [
            _JOIN, command.group, m.instance_id, m.format, m.offset_reset, m.session_timeout_ms,
            m.joined_ms, command.assignor, m.reads.to_row(), command.members_max, m.client_host,
        ]  # fmt: skip
    elif isinstance(command, Leave):
        fields = [_LEAVE, command.group, command.instance_id, command.now_ms]
    elif isinstance(command, Subscribe):
        fields = [
            _SUBSCRIBE, command.group, command.instance_id, list(command.topics),
            dict(command.partition_counts), command.now_ms,
        ]  # fmt: skip
    elif isinstance(command, Expire):
        fields = [_EXPIRE, command.group, list(command.instance_ids), command.now_ms]
        if command.uncommitted:
            fields.append(True)
    elif isinstance(command, Refresh):
        fields = [_REFRESH, command.group, dict(command.partition_counts), command.now_ms]
    elif isinstance(command, Committed):
        fields = [_COMMITTED, command.group, list(command.topics), command.now_ms]
    elif isinstance(command, KafkaGeneration):
        fields = [
            _KAFKA_GENERATION, command.group, command.protocol_type, command.protocol, command.generation,
            command.now_ms,
        ]  # fmt: skip
    elif isinstance(command, ClassicGroupMetadata):
        version = CLASSIC_METADATA_VERSION if command.converts is None else _CLASSIC_CONVERTS_VERSION
        fields = [
            _CLASSIC_METADATA, version, command.group, command.protocol_type,
            command.protocol, command.generation, command.leader, [m.to_row() for m in command.members],
            command.now_ms, command.rebalancing,
        ]  # fmt: skip
        if command.converts is not None:
            fields.append(command.converts)
    elif isinstance(command, ConsumerGroupRecord):
        fields = [_CONSUMER_GROUP, command.group, command.state.to_row(), command.now_ms]
        if command.converts is not None:
            fields.append(command.converts)
    elif isinstance(command, StreamsGroupRecord):
        fields = [_STREAMS_GROUP, command.group, command.state.to_row(), command.now_ms]
    elif isinstance(command, ShareGroupRecord):
        fields = [
            _SHARE_GROUP, command.group, command.epoch, command.now_ms, command.groups_max,
            [m.to_row() for m in command.members], dict(command.counts),
        ]  # fmt: skip
    else:
        fields = [_FORGET, command.group]
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed


def decode(data: bytes) -> GroupCommand:
    try:
        fields = msgpack.unpackb(data, raw=False)
        kind = fields[0]
        if kind == _JOIN:
            _, group, instance_id, format_, reset, timeout_ms, now_ms, assignor, *rest = fields
            reads = ReadConfig.from_row(rest[0]) if rest else DEFAULT_READS  # joins written before it: none
            members_max = int(rest[1]) if len(rest) > 1 and rest[1] is not None else None
            host = str(rest[2]) if len(rest) > 2 else ""
            member = ConsumerInstance(
                instance_id, format_, reset, int(timeout_ms), int(now_ms), (), reads, host
            )
            return Join(group, member, assignor, members_max)
        if kind == _LEAVE:
            _, group, instance_id, now_ms = fields
            return Leave(group, instance_id, int(now_ms))
        if kind == _SUBSCRIBE:
            _, group, instance_id, topics, counts, now_ms = fields
            return Subscribe(group, instance_id, tuple(topics), dict(counts), int(now_ms))
        if kind == _EXPIRE:
            _, group, instance_ids, now_ms = fields[:4]
            return Expire(group, tuple(instance_ids), int(now_ms), len(fields) > 4 and fields[4] is True)
        if kind == _REFRESH:
            _, group, counts, now_ms = fields
            return Refresh(group, dict(counts), int(now_ms))
        if kind == _COMMITTED:
            _, group, topics, now_ms = fields
            return Committed(group, tuple(str(t) for t in topics), int(now_ms))
        if kind == _KAFKA_GENERATION:
            _, group, protocol_type, protocol, generation, now_ms = fields
            return KafkaGeneration(group, str(protocol_type), str(protocol), int(generation), int(now_ms))
        if (
            kind == _CLASSIC_METADATA
        ):  # version 0's fields (and 1's); a later version's extra ones are not ours
            _, version, group, protocol_type, protocol, generation, leader, members, now_ms = fields[:9]
            rebalancing = bool(fields[9]) if len(fields) > 9 else False  # records before it: nine fields
            converted = int(version) >= _CLASSIC_CONVERTS_VERSION and len(fields) > 10
            converts = int(fields[10]) if converted else None
            return ClassicGroupMetadata(
                str(group), str(protocol_type), str(protocol), int(generation),
                None if leader is None else str(leader), tuple(ClassicMember.from_row(m) for m in members),
                int(now_ms), rebalancing, converts,
            )  # fmt: skip
        if kind == _CONSUMER_GROUP:
            _, group, row, now_ms = fields[:4]
            converts = int(fields[4]) if len(fields) > 4 and fields[4] is not None else None
            state = ConsumerGroup.from_row(str(group), row)
            return ConsumerGroupRecord(str(group), state, int(now_ms), converts)
        if kind == _STREAMS_GROUP:
            _, group, row, now_ms = fields[:4]
            return StreamsGroupRecord(str(group), StreamsGroup.from_row(str(group), row), int(now_ms))
        if kind == _SHARE_GROUP:
            _, group, epoch, now_ms = fields[:4]
            bound = fields[4] if len(fields) > 4 else None  # records written before it: no bound
            groups_max = None if bound is None else int(bound)
            members = tuple(ShareMember.from_row(m) for m in fields[5]) if len(fields) > 5 else ()
            counts = {str(t): int(c) for t, c in fields[6].items()} if len(fields) > 6 else {}
            return ShareGroupRecord(str(group), int(epoch), int(now_ms), groups_max, members, counts)
        if kind == _FORGET:
            _, group = fields
            return Forget(str(group))
    except (ValueError, TypeError, IndexError, InvalidConsumerConfig, msgpack.ExtraData) as exc:
        raise InvalidCommand(f"malformed group command: {exc}") from None
    except (msgpack.FormatError, msgpack.StackError) as exc:
        raise InvalidCommand(f"group command is not msgpack: {exc}") from None
    raise InvalidCommand(f"unknown group command kind {str(fields)[:80]!r}")
