"""The consumer group protocol (KIP-848) as a pure state machine: a group is an immutable value, and each
operation (a member's heartbeat, its leave, its fencing when its session or rebalance timeout passed)
returns the next value with the answer, or raises the protocol's typed refusal
(``partitions.groups.errors``). No clock, no I/O: the coordinator (``consumer/coordinator.py``) keeps
the timers, writes each changed group to the replicated group table before answering, and passes in the
topics' partition counts.

As Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``:

1. the member is created (epoch 0), found (its epoch checked: a greater one, or a smaller one other than
   its previous epoch with partitions outside its assignment, is FENCED_MEMBER_EPOCH), or, for a static
   member (an instance id) rejoining, its old member is replaced by the new member id, once the old one
   left with epoch -2 (else UNRELEASED_INSTANCE_ID);
2. a changed subscription, a new member or a change of the subscribed topics' partitions bumps the
   group epoch;
3. a group epoch past the target assignment's epoch computes a new target (the group's assignor:
   the one most of its members ask for, ``uniform`` by default);
4. the member is reconciled towards its target (``consumer.assignment.reconcile``), and its assigned
   partitions are sent when they changed or the request was a full one.

Leaving (epoch -1) removes the member and bumps the group epoch; a static member leaving with -2 stays,
epoch -2, keeping its target until it rejoins or its session times out. Topic names throughout: the
Kafka door translates topic ids.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from partitions.groups.assignors import TopicPartition
from partitions.groups.consumer.assignment import (
    DEFAULT_ASSIGNOR,
    EMPTY,
    MEMBER_STATES,
    SERVER_ASSIGNORS,
    STABLE,
    UNREVOKED,
    Partitions,
    reconcile,
)
from partitions.groups.consumer.topic_regex import check_length
from partitions.groups.epoch_members import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    leaving,
    member_of,
    put_member,
    static_member,
)
from partitions.groups.errors import GroupFull, InvalidGroupRequest, UnsupportedAssignor
from raftlog.errors import check

CONSUMER_MEMBERS_MAX = 1_000  # as the classic groups' (group.consumer.max.size is unbounded in Kafka)
ROW_VERSION = 0  # of ``ConsumerGroup.to_row``; a reader takes extra fields


def _tps(rows: Any) -> Partitions:
    return frozenset(TopicPartition(str(t), int(p)) for t, p in rows)


def _rows(tps: Partitions) -> list[list[Any]]:
    return [[tp.topic, tp.partition] for tp in sorted(tps)]


@dataclass(frozen=True, slots=True)
class ClassicProtocols:
    """What a member joining with Kafka's classic protocol (JoinGroup) keeps beside a consumer protocol
    member's state (Kafka's ``ClassicMemberMetadata``): its session timeout and its protocols (name,
    metadata), in its order of preference (``consumer/classic_members.py``)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol(self) -> str:
        """The protocol it is answered with: its first."""
        return self.protocols[0][0]

    def to_row(self) -> list[Any]:
        return [self.session_timeout_ms, [[name, metadata] for name, metadata in self.protocols]]

    @classmethod
    def from_row(cls, row: list[Any]) -> ClassicProtocols:
        session_ms, protocols = row[:2]
        return cls(int(session_ms), tuple((str(name), bytes(metadata)) for name, metadata in protocols))


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    epoch: int
    previous_epoch: int
    state: str  # consumer.assignment.MEMBER_STATES
    rebalance_timeout_ms: int
    subscribed: tuple[str, ...]
    server_assignor: str | None
    assigned: Partitions = EMPTY
    revoking: Partitions = EMPTY  # assigned before, to be revoked by the member before others get them
    regex: str | None = None  # a regular expression subscription (KIP-848: topics whose whole name matches)
    regex_topics: tuple[str, ...] = ()  # the topics it matched when the group last looked
    classic: ClassicProtocols | None = None  # a member that joined with the classic protocol

    def topics(self) -> tuple[str, ...]:
        """Every topic it subscribes to: by name and by its regular expression."""
        return tuple(sorted(set(self.subscribed) | set(self.regex_topics)))

    def to_row(self) -> list[Any]:
        return [
            self.member_id, self.instance_id, self.rack_id, self.client_id, self.client_host, self.epoch,
            self.previous_epoch, self.state, self.rebalance_timeout_ms, list(self.subscribed),
            self.server_assignor, _rows(self.assigned), _rows(self.revoking), self.regex,
            list(self.regex_topics), None if self.classic is None else self.classic.to_row(),
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: list[Any]) -> ConsumerMember:
        member_id, instance_id, rack, client_id, host, epoch, previous, state, rebalance_ms = row[:9]
        subscribed, assignor, assigned, revoking = row[9:13]
        regex, regex_topics = (row[13], row[14]) if len(row) > 14 else (None, [])
        classic = ClassicProtocols.from_row(row[15]) if len(row) > 15 and row[15] is not None else None
        if state not in MEMBER_STATES:
            raise ValueError(f"member state {state!r}")
        return cls(
            str(member_id), None if instance_id is None else str(instance_id),
            None if rack is None else str(rack), str(client_id), str(host), int(epoch), int(previous),
            str(state), int(rebalance_ms),
            tuple(str(t) for t in subscribed), None if assignor is None else str(assignor), _tps(assigned),
            _tps(revoking), None if regex is None else str(regex), tuple(str(t) for t in regex_topics),
            classic,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ConsumerGroup:
    name: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: Mapping[str, ConsumerMember] = field(default_factory=lambda: MappingProxyType({}))
    target: Mapping[str, Partitions] = field(default_factory=lambda: MappingProxyType({}))
    partition_counts: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def assignor(self) -> str:
        """The assignor most of its members ask for (ties: by name), else the default."""
        asked = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if not asked:
            return DEFAULT_ASSIGNOR
        return min(asked, key=lambda name: (-asked[name], name))

    @property
    def state(self) -> str:
        """Kafka's: Empty, Assigning (a target to compute), Reconciling (a member not at it), Stable."""
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def subscribed_topics(self) -> list[str]:
        return sorted({t for m in self.members.values() for t in m.topics()})

    def regexes(self) -> list[str]:
        return sorted({m.regex for m in self.members.values() if m.regex})

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        return static_member(self.members, instance_id)

    def holder(self, tp: TopicPartition, other_than: str) -> str | None:
        """The member (other than ``other_than``) holding ``tp``, assigned or pending revocation."""
        for m in self.members.values():
            if m.member_id != other_than and (tp in m.assigned or tp in m.revoking):
                return m.member_id
        return None

    def to_row(self) -> list[Any]:
        return [
            ROW_VERSION,
            self.group_epoch,
            self.assignment_epoch,
            dict(self.partition_counts),
            [m.to_row() for m in self.members.values()],
            {member: _rows(tps) for member, tps in self.target.items()},
        ]

    @classmethod
    def from_row(cls, name: str, row: list[Any]) -> ConsumerGroup:
        _version, group_epoch, assignment_epoch, counts, members, target = row[:6]
        parsed = [ConsumerMember.from_row(m) for m in members]
        return cls(
            name,
            int(group_epoch),
            int(assignment_epoch),
            MappingProxyType({m.member_id: m for m in parsed}),
            MappingProxyType({str(k): _tps(v) for k, v in target.items()}),
            MappingProxyType({str(t): int(c) for t, c in counts.items()}),
        )


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A ConsumerGroupHeartbeat, topic ids already turned into names. None: unchanged since the last."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed: tuple[str, ...] | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_regex: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """The next group and what the member is told (``assignment`` None: not sent)."""

    group: ConsumerGroup
    member_id: str
    member_epoch: int
    assignment: Partitions | None
    left: ConsumerMember | None = None  # the member that left or was replaced by this operation


def validate(hb: Heartbeat) -> None:
    """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid`` (InvalidGroupRequest)."""
    if hb.instance_id == "":
        raise InvalidGroupRequest("InstanceId can't be empty.")
    if hb.rack_id == "":
        raise InvalidGroupRequest("RackId can't be empty.")
    if hb.member_epoch > 0 or hb.member_epoch == LEAVE_EPOCH:
        if not hb.member_id:
            raise InvalidGroupRequest("MemberId can't be empty.")
    elif hb.member_epoch == JOIN_EPOCH:
        if hb.rebalance_timeout_ms == -1:
            raise InvalidGroupRequest("RebalanceTimeoutMs must be provided in first request.")
        if hb.owned is None or hb.owned:
            raise InvalidGroupRequest("TopicPartitions must be empty when (re-)joining.")
        if not hb.subscribed and not hb.subscribed_regex:
            raise InvalidGroupRequest(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif hb.member_epoch == STATIC_LEAVE_EPOCH:
        if not hb.member_id:
            raise InvalidGroupRequest("MemberId can't be empty.")
        if hb.instance_id is None:
            raise InvalidGroupRequest("InstanceId can't be null.")
    else:
        raise InvalidGroupRequest("MemberEpoch is invalid.")
    if hb.server_assignor is not None and hb.server_assignor not in SERVER_ASSIGNORS:
        raise UnsupportedAssignor(hb.server_assignor)
    if hb.subscribed_regex:
        check_length(hb.subscribed_regex)  # its syntax: RE2's, when it is resolved (``topic_regex``)


def regex_after(group: ConsumerGroup, hb: Heartbeat) -> str | None:
    """The regex the heartbeat's member subscribes with once it is applied: the one it sends (empty:
    none), else the one it had (a static member rejoining: its old member's)."""
    if hb.subscribed_regex is not None:
        return hb.subscribed_regex or None
    member = group.members.get(hb.member_id) if hb.member_id else None
    if member is None and hb.instance_id is not None:
        member = group.static_member(hb.instance_id)
    return None if member is None else member.regex


def _new_member(hb: Heartbeat, member_id: str) -> ConsumerMember:
    return ConsumerMember(
        member_id, hb.instance_id, hb.rack_id, hb.client_id, hb.client_host, 0, 0, STABLE, 0, (), None
    )


def _member_of(
    group: ConsumerGroup, hb: Heartbeat, new_member_id: str
) -> tuple[ConsumerMember, ConsumerMember | None]:
    """The member the heartbeat is from (created when joining) and the static member it replaces
    (``epoch_members``)."""
    member_id = hb.member_id or new_member_id
    owned = hb.owned
    return member_of(
        group.name, group.members, member_id, hb.member_epoch, hb.instance_id,
        lambda m: owned is not None and owned <= m.assigned,
        lambda: _new_member(hb, member_id),
        lambda static: replace(static, member_id=member_id, epoch=0, previous_epoch=0),
    )  # fmt: skip


def heartbeat(
    group: ConsumerGroup,
    hb: Heartbeat,
    partition_counts: Mapping[str, int],
    new_member_id: str,
    members_max: int = CONSUMER_MEMBERS_MAX,
    regex_topics: tuple[str, ...] | None = None,
    checked: bool = False,
) -> Answer:
    """A heartbeat with epoch >= 0 (joining, or in the group). ``partition_counts``: of the group's
    topics and the heartbeat's (0 or absent: no such topic). ``regex_topics``: the topics the member's
    regex (``regex_after``) resolves to for its principal now (``topic_regex``); None: those it resolved
    to before (its regex unchanged). Other members' regexes are resolved at their own heartbeats.
    ``checked``: the request was checked by its own protocol's rules (a classic member's JoinGroup,
    ``classic_members.join``), not a ConsumerGroupHeartbeat's."""
    if not checked:
        validate(hb)
    if hb.member_epoch < 0:
        return leave(group, hb)
    known = (hb.member_id and hb.member_id in group.members) or (
        hb.instance_id is not None and group.static_member(hb.instance_id) is not None
    )
    if not known and len(group.members) >= members_max:
        raise GroupFull(group.name, members_max)
    member, replaced = _member_of(group, hb, new_member_id)
    updated = replace(
        member,
        instance_id=hb.instance_id if hb.instance_id is not None else member.instance_id,
        rack_id=hb.rack_id if hb.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            hb.rebalance_timeout_ms if hb.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
        ),
        server_assignor=hb.server_assignor if hb.server_assignor is not None else member.server_assignor,
        subscribed=tuple(sorted(set(hb.subscribed))) if hb.subscribed is not None else member.subscribed,
        regex=(hb.subscribed_regex or None) if hb.subscribed_regex is not None else member.regex,
        client_id=hb.client_id,
        client_host=hb.client_host,
    )
    joined = member.member_id not in group.members and replaced is None
    bump = updated.subscribed != member.subscribed or updated.regex != member.regex or joined
    if updated.regex is None:
        regex_topics = ()
    elif regex_topics is None:
        check(updated.regex == member.regex, f"regex {updated.regex!r} of {updated.member_id} not resolved")
        regex_topics = member.regex_topics
    if regex_topics != member.regex_topics:  # topics come and go, and so do the ACLs that show them
        updated = replace(updated, regex_topics=tuple(regex_topics))
        bump = True
    members, target = put_member(group.members, group.target, updated, replaced, EMPTY)
    topics = sorted({t for m in members.values() for t in m.topics()})
    counts = {t: int(partition_counts.get(t, 0)) for t in topics}
    counts = {t: c for t, c in counts.items() if c > 0}
    group_epoch = group.group_epoch + (1 if bump or counts != dict(group.partition_counts) else 0)
    next_group = replace(
        group,
        group_epoch=group_epoch,
        members=MappingProxyType(members),
        target=MappingProxyType(target),
        partition_counts=MappingProxyType(counts),
    )
    if group_epoch > next_group.assignment_epoch:
        next_group = _assign(next_group)
    reconciled = _reconcile(next_group, next_group.members[updated.member_id], hb.owned)
    next_group = with_member(next_group, reconciled)
    full = hb.member_epoch == JOIN_EPOCH or (
        hb.rebalance_timeout_ms != -1 and hb.subscribed is not None and hb.owned is not None
    )
    changed = reconciled.assigned != member.assigned or replaced is not None
    return Answer(
        next_group,
        reconciled.member_id,
        reconciled.epoch,
        reconciled.assigned if full or changed else None,
        replaced,
    )


def _assign(group: ConsumerGroup) -> ConsumerGroup:
    """A new target assignment at the group epoch."""
    subscriptions = {m.member_id: m.topics() for m in group.members.values()}
    target = SERVER_ASSIGNORS[group.assignor](subscriptions, group.partition_counts, group.target)
    return replace(group, assignment_epoch=group.group_epoch, target=MappingProxyType(target))


def _reconcile(group: ConsumerGroup, member: ConsumerMember, owned: Partitions | None) -> ConsumerMember:
    if member.epoch == group.assignment_epoch and member.state == STABLE:
        return member
    step = reconcile(
        member.state,
        member.epoch,
        member.assigned,
        member.revoking,
        group.assignment_epoch,
        group.target.get(member.member_id, EMPTY),
        lambda tp: group.holder(tp, member.member_id) is not None,
        owned,
    )
    previous = member.epoch if step.epoch != member.epoch else member.previous_epoch
    return replace(
        member,
        state=step.state,
        epoch=step.epoch,
        previous_epoch=previous,
        assigned=step.assigned,
        revoking=step.revoking,
    )


def with_member(group: ConsumerGroup, member: ConsumerMember) -> ConsumerGroup:
    members = dict(group.members)
    members[member.member_id] = member
    return replace(group, members=MappingProxyType(members))


def leave(group: ConsumerGroup, hb: Heartbeat) -> Answer:
    """Epoch -1 (leave) or -2 (a static member leaving for a while)."""
    member = leaving(group.name, group.members, hb.member_id, hb.instance_id)
    if hb.instance_id is not None and hb.member_epoch == STATIC_LEAVE_EPOCH:
        gone = replace(member, epoch=STATIC_LEAVE_EPOCH, revoking=EMPTY)
        return Answer(with_member(group, gone), member.member_id, STATIC_LEAVE_EPOCH, None)
    return Answer(fence(group, member.member_id), hb.member_id, hb.member_epoch, None, member)


def fence(group: ConsumerGroup, member_id: str) -> ConsumerGroup:
    """The member is removed (it left, or its session or rebalance timeout passed): the group epoch is
    bumped, so the next heartbeat computes a target without it; its partitions are free at once. The
    last member gone, the (empty) target is at the new epoch, as Kafka writes its target assignment
    metadata then (``consumerGroupFenceMembers``)."""
    if member_id not in group.members:
        return group
    members = {k: m for k, m in group.members.items() if k != member_id}
    target = {k: t for k, t in group.target.items() if k != member_id}
    topics = {t for m in members.values() for t in m.topics()}
    counts = {t: c for t, c in group.partition_counts.items() if t in topics}
    epoch = group.group_epoch + 1
    return replace(
        group,
        group_epoch=epoch,
        assignment_epoch=group.assignment_epoch if members else epoch,
        members=MappingProxyType(members),
        target=MappingProxyType(target),
        partition_counts=MappingProxyType(counts),
    )


def revocation_overdue(member: ConsumerMember) -> bool:
    """Whether the member is waiting to revoke (its rebalance timeout runs while it is)."""
    return member.state == UNREVOKED
