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
7 days), through an ``Expire`` the coordinator proposes. Its committed offsets live with the data
partitions either way.

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
consensus thread applies (a read sees the group before or after a command, never half of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import msgpack

from partitions.errors import InvalidCommand
from partitions.groups.assignors import ASSIGNORS, TopicPartition
from partitions.groups.consumer_group import ConsumerGroup
from partitions.groups.errors import (
    ConsumerInstanceExists,
    GroupFull,
    GroupNotEmpty,
    InvalidConsumerConfig,
    ShareGroupLimitReached,
    UnknownConsumerInstance,
)
from partitions.groups.share_group import SHARE_MEMBERS_MAX, ShareMember
from raftlog.errors import check

FORMATS = ("json", "binary")
OFFSET_RESETS = ("earliest", "latest")
SESSION_TIMEOUT_MS_MIN = 1_000
SESSION_TIMEOUT_MS_MAX = 300_000
SESSION_TIMEOUT_MS_DEFAULT = 30_000
FETCH_MIN_BYTES_MAX = 10_000_000  # Confluent's bound of fetch.min.bytes
REQUEST_TIMEOUT_MS_MAX = 60_000  # the longest a records read waits
AUTO_COMMIT_INTERVAL_MS_MAX = 3_600_000
EMPTY_GROUP_RETENTION_MS = 7 * 24 * 3600 * 1000  # Kafka's offsets.retention.minutes: 7 days
GROUP_MEMBERS_MAX = 1_000  # Kafka's group.max.size: a Join past it is refused when applied
# What a classic group's metadata may make the table hold: at most ``GROUP_MEMBERS_MAX`` members, each
# member's subscription and assignment at most 1 MiB, all of them together at most 8 MiB. Kafka bounds a
# member's only by the request carrying it (socket.request.max.bytes) and the group's whole record by the
# offsets topic's max.message.bytes (1 MiB by default); a SyncGroup past these bounds is answered
# UNKNOWN_SERVER_ERROR, as Kafka answers a group record too large.
CLASSIC_MEMBER_BYTES_MAX = 1024 * 1024
CLASSIC_GROUP_BYTES_MAX = 8 * 1024 * 1024
_JOIN, _LEAVE, _SUBSCRIBE, _EXPIRE, _REFRESH, _COMMITTED, _KAFKA_GENERATION, _FORGET = 1, 2, 3, 4, 5, 6, 7, 8
_CLASSIC_METADATA = 9
_CONSUMER_GROUP = 10  # a consumer protocol group (KIP-848), whole: [kind, group, ConsumerGroup row, now_ms]
# a share group (KIP-932): [kind, group, group epoch, now_ms, share groups max, members, partition counts]
_SHARE_GROUP = 11
SHARE_PROTOCOL_TYPE = "share"  # a share group's ``protocol_type`` in the table
CLASSIC_METADATA_VERSION = 0  # of the command's and the snapshot row's layout; a reader takes extra fields


@dataclass(frozen=True, slots=True)
class ReadConfig:
    """How a member's records reads behave (Confluent's instance configs and Kafka's auto commit)."""

    fetch_min_bytes: int = 1  # a read answers once this much came; -1: at max_bytes or the timeout only
    request_timeout_ms: int = 1_000  # how long a read without ``timeout`` waits (consumer.request.timeout.ms)
    auto_commit: bool = False  # commit the positions of what earlier reads returned, at a later read
    auto_commit_interval_ms: int = 5_000  # at most this often; 0: at every read
    read_committed: bool = False  # isolation.level read_committed: below the LSO, aborted records left out

    def __post_init__(self) -> None:
        bounds = (
            ("fetch.min.bytes", self.fetch_min_bytes, -1, FETCH_MIN_BYTES_MAX),
            ("consumer.request.timeout.ms", self.request_timeout_ms, 0, REQUEST_TIMEOUT_MS_MAX),
            ("auto.commit.interval.ms", self.auto_commit_interval_ms, 0, AUTO_COMMIT_INTERVAL_MS_MAX),
        )
        for name, value, low, high in bounds:
            if type(value) is not int or not low <= value <= high:
                raise InvalidConsumerConfig(f"{name} {value!r}: use an integer from {low} to {high}")
        if type(self.auto_commit) is not bool:
            raise InvalidConsumerConfig(f"auto.commit.enable {self.auto_commit!r}: use true or false")
        if type(self.read_committed) is not bool:
            raise InvalidConsumerConfig(f"read_committed {self.read_committed!r}: use true or false")

    def to_row(self) -> list[Any]:
        row = [self.fetch_min_bytes, self.request_timeout_ms, self.auto_commit, self.auto_commit_interval_ms]
        return [*row, True] if self.read_committed else row  # a row as before transactions when it can be

    @classmethod
    def from_row(cls, row: list[Any]) -> ReadConfig:
        min_bytes, timeout_ms, auto_commit, interval_ms, *rest = row
        committed = bool(rest[0]) if rest else False  # absent: a row from before isolation levels
        return cls(int(min_bytes), int(timeout_ms), bool(auto_commit), int(interval_ms), committed)


DEFAULT_READS = ReadConfig()


@dataclass(frozen=True, slots=True)
class InstanceConfig:
    """What a consumer instance is created with (Confluent's instance configs, and the group's assignor
    should its creation make the group); its member checks the rest (``Member``)."""

    format: str = "json"  # "json" | "binary": how its records are rendered
    offset_reset: str = "latest"  # "earliest" | "latest": where to start a partition with no committed offset
    session_timeout_ms: int = SESSION_TIMEOUT_MS_DEFAULT
    assignor: str = "range"
    reads: ReadConfig = DEFAULT_READS

    def __post_init__(self) -> None:
        if self.assignor not in ASSIGNORS:
            raise InvalidConsumerConfig(f"assignor {self.assignor!r}: use one of {sorted(ASSIGNORS)}")


DEFAULT_INSTANCE = InstanceConfig()


@dataclass(frozen=True, slots=True)
class Member:
    instance_id: str
    format: str  # "json" | "binary": how its records are rendered
    offset_reset: str  # "earliest" | "latest": where to start a partition with no committed offset
    session_timeout_ms: int
    joined_ms: int
    topics: tuple[str, ...] = ()
    reads: ReadConfig = DEFAULT_READS
    client_host: str = ""  # the address its creating request came from

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise InvalidConsumerConfig(f"format {self.format!r}: use one of {list(FORMATS)}")
        if self.offset_reset not in OFFSET_RESETS:
            raise InvalidConsumerConfig(f"auto.offset.reset {self.offset_reset!r}: use {list(OFFSET_RESETS)}")
        if not SESSION_TIMEOUT_MS_MIN <= self.session_timeout_ms <= SESSION_TIMEOUT_MS_MAX:
            raise InvalidConsumerConfig(
                f"session.timeout.ms {self.session_timeout_ms}: use {SESSION_TIMEOUT_MS_MIN} to "
                f"{SESSION_TIMEOUT_MS_MAX}"
            )

    @classmethod
    def created(cls, instance_id: str, config: InstanceConfig, joined_ms: int, client_host: str) -> Member:
        """A consumer instance as it joins, with no topics yet."""
        c = config
        return cls(
            instance_id, c.format, c.offset_reset, c.session_timeout_ms, joined_ms, (), c.reads, client_host
        )


@dataclass(frozen=True, slots=True)
class ClassicMember:
    """A classic group's member as its coordinator writes it (Kafka's ``GroupMetadataValue``'s member)."""

    member_id: str
    instance_id: str | None  # a static member's group.instance.id (KIP-345)
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # its metadata of the group's protocol
    assignment: bytes

    def to_row(self) -> list[Any]:
        return [
            self.member_id, self.instance_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
            self.session_timeout_ms, self.subscription, self.assignment,
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: list[Any]) -> ClassicMember:
        member_id, instance_id, client_id, host, rebalance_ms, session_ms, subscription, assignment = row[:8]
        return cls(
            str(member_id), None if instance_id is None else str(instance_id), str(client_id), str(host),
            int(rebalance_ms), int(session_ms), bytes(subscription), bytes(assignment),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    assignor: str
    generation: int
    members: Mapping[str, Member]
    assignment: Mapping[str, tuple[TopicPartition, ...]]
    partition_counts: Mapping[str, int]  # of the subscribed topics, as of the last rebalance
    changed_ms: int
    # None: members join over HTTP (held above); a string: a group of Kafka clients (its members live in
    # the coordinator's memory), the protocol type they use ("consumer", "connect"...), "" for a group
    # that only committed offsets
    protocol_type: str | None = None
    committed_topics: tuple[str, ...] = ()  # every topic it committed an offset of (sorted)
    # a group of Kafka clients as its coordinator last wrote it (``ClassicGroupMetadata``): the leader
    # and the members of ``generation`` with their assignments; none when it is empty or was written by
    # ``KafkaGeneration``
    classic_leader: str | None = None
    classic_members: tuple[ClassicMember, ...] = ()
    # a consumer protocol group (KIP-848) as its coordinator last wrote it (``ConsumerGroupRecord``)
    consumer: ConsumerGroup | None = None
    # the classic members were written while their coordinator collected joins again (members had left
    # or their sessions expired): a coordinator taking over goes on with that rebalance
    classic_rebalancing: bool = False
    # a share group's members (KIP-932) as its coordinator last wrote them (``ShareGroupRecord``)
    share_members: tuple[ShareMember, ...] = ()

    def owner(self, tp: TopicPartition) -> str | None:
        for member, tps in self.assignment.items():
            if tp in tps:
                return member
        return None

    def topics(self) -> list[str]:
        return sorted({t for m in self.members.values() for t in m.topics})

    def offset_topics(self) -> list[str]:
        """The topics whose partitions may hold the group's committed offsets: those it read (subscribed
        to as of its last rebalance) or committed an offset of. Every commit, at either door, records its
        topics before it stores an offset (``GroupCoordinator.record_commit``)."""
        return sorted(set(self.partition_counts) | set(self.committed_topics))


# -- commands ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Join:
    group: str
    member: Member
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
    Committed | KafkaGeneration | ClassicGroupMetadata | ConsumerGroupRecord | ShareGroupRecord | Forget
)
GroupCommand = (
    Join
    | Leave
    | Subscribe
    | Expire
    | Refresh
    | Committed
    | KafkaGeneration
    | ClassicGroupMetadata
    | ConsumerGroupRecord
    | ShareGroupRecord
    | Forget
)


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
        fields = [
            _CLASSIC_METADATA, CLASSIC_METADATA_VERSION, command.group, command.protocol_type,
            command.protocol, command.generation, command.leader, [m.to_row() for m in command.members],
            command.now_ms, command.rebalancing,
        ]  # fmt: skip
    elif isinstance(command, ConsumerGroupRecord):
        fields = [_CONSUMER_GROUP, command.group, command.state.to_row(), command.now_ms]
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
            member = Member(instance_id, format_, reset, int(timeout_ms), int(now_ms), (), reads, host)
            return Join(group, member, assignor, members_max)
        if kind == _LEAVE:
            _, group, instance_id, now_ms = fields
            return Leave(group, instance_id, int(now_ms))
        if kind == _SUBSCRIBE:
            _, group, instance_id, topics, counts, now_ms = fields
            return Subscribe(group, instance_id, tuple(topics), dict(counts), int(now_ms))
        if kind == _EXPIRE:
            _, group, instance_ids, now_ms = fields
            return Expire(group, tuple(instance_ids), int(now_ms))
        if kind == _REFRESH:
            _, group, counts, now_ms = fields
            return Refresh(group, dict(counts), int(now_ms))
        if kind == _COMMITTED:
            _, group, topics, now_ms = fields
            return Committed(group, tuple(str(t) for t in topics), int(now_ms))
        if kind == _KAFKA_GENERATION:
            _, group, protocol_type, protocol, generation, now_ms = fields
            return KafkaGeneration(group, str(protocol_type), str(protocol), int(generation), int(now_ms))
        if kind == _CLASSIC_METADATA:  # version 0's fields; a later version's extra ones are not ours
            _, _version, group, protocol_type, protocol, generation, leader, members, now_ms = fields[:9]
            rebalancing = bool(fields[9]) if len(fields) > 9 else False  # records before it: nine fields
            return ClassicGroupMetadata(
                str(group), str(protocol_type), str(protocol), int(generation),
                None if leader is None else str(leader), tuple(ClassicMember.from_row(m) for m in members),
                int(now_ms), rebalancing,
            )  # fmt: skip
        if kind == _CONSUMER_GROUP:
            _, group, row, now_ms = fields[:4]
            return ConsumerGroupRecord(str(group), ConsumerGroup.from_row(str(group), row), int(now_ms))
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
    members: Mapping[str, Member],
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
                and command.now_ms - existing.changed_ms >= EMPTY_GROUP_RETENTION_MS
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
                due = command.now_ms - existing.changed_ms >= EMPTY_GROUP_RETENTION_MS
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
        if isinstance(command, ConsumerGroupRecord):
            if existing is not None and existing.classic_members:
                return GroupNotEmpty(name, len(existing.classic_members), "the classic Kafka protocol")
            return self._store(name, _consumer_group(command, existing))
        held = _consumer_members(existing)
        if held:  # a consumer protocol group with members: no classic metadata over it, no deletion
            return GroupNotEmpty(name, held, "the consumer group protocol")
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
            return self._store(
                name,
                Group(
                    name,
                    "simple",
                    command.epoch,
                    {},
                    {},
                    dict(command.counts),
                    command.now_ms,
                    SHARE_PROTOCOL_TYPE,
                    existing.committed_topics if existing is not None else (),
                    share_members=command.members,
                ),
            )
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
            return self._store(
                name,
                Group(
                    name,
                    command.protocol,
                    command.generation,
                    {},
                    {},
                    dict(existing.partition_counts) if existing is not None else {},
                    command.now_ms,
                    command.protocol_type,
                    existing.committed_topics if existing is not None else (),
                    command.leader if command.members else None,
                    command.members,
                    classic_rebalancing=command.rebalancing and bool(command.members),
                ),
            )
        return self._store(
            name,
            Group(
                name,
                command.protocol,
                max(command.generation, existing.generation if existing is not None else 0),
                {},
                {},
                dict(existing.partition_counts) if existing is not None else {},
                command.now_ms,
                command.protocol_type,
                existing.committed_topics if existing is not None else (),
            ),
        )

    def share_groups(self) -> int:
        """How many share groups the table holds (``--group-share-max-groups`` bounds them)."""
        return sum(1 for g in self.groups.values() if g.protocol_type == SHARE_PROTOCOL_TYPE)

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
            )
        return cls(MappingProxyType(groups))


def _consumer_members(group: Group | None) -> int:
    """How many consumer protocol members hold the group."""
    return 0 if group is None or group.consumer is None else len(group.consumer.members)


def _consumer_group(command: ConsumerGroupRecord, existing: Group | None) -> Group:
    """The table's group holding a consumer protocol group: its epoch as the generation, its assignor."""
    state = command.state
    return Group(
        command.group,
        state.assignor,
        state.group_epoch,
        {},
        {},
        dict(existing.partition_counts) if existing is not None else {},
        command.now_ms,
        "consumer",
        existing.committed_topics if existing is not None else (),
        None,
        (),
        state,
    )


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


def _member_row(m: Member) -> list[Any]:
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


def _member_from_row(row: list[Any]) -> Member:
    """A snapshot's member row; rows written before ``ReadConfig`` have six fields, before the client's
    address seven."""
    reads = ReadConfig.from_row(row[6]) if len(row) > 6 else DEFAULT_READS
    host = str(row[7]) if len(row) > 7 else ""
    return Member(row[0], row[1], row[2], int(row[3]), int(row[4]), tuple(row[5]), reads, host)
