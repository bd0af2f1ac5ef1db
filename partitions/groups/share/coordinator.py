"""Share groups' membership (KIP-932) on the node leading a group's ``__consumer_groups`` partition:
ShareGroupHeartbeat and ShareGroupDescribe as Kafka's ``GroupMetadataManager.shareGroupHeartbeat``.

A member joins with the member id it made (epoch 0), heartbeats in the epoch it was last given, and
leaves with epoch -1; a changed membership or subscription, or a subscribed topic's new partitions, bumps
the group epoch, and each member is given the group's epoch with its assignment at its next heartbeat.
Share groups have no partition ownership to hand over (records, not partitions, are locked), so nothing
is revoked first: at each new group epoch the group's assignment is made again (``share.group.assign``,
Kafka's ``SimpleAssignor``: each topic's partitions shared among its members, a partition to several only
when members outnumber partitions, what each held kept where that allows), and each member takes its part
at its next heartbeat.

Every record's acquisition, lock and acknowledgement is below, in the data partitions (``share.partition``,
replicated by the partition's Raft group). The group, its epoch, its members and the partition counts of
their topics are written to the group table (``ShareGroupRecord``) at each new epoch, before a member is
answered, as Kafka writes a share group's member and assignment records: a coordinator taking over (a
leadership move, a failover, a restart) goes on with the same members and epoch. A member's epoch that
moved up to the group's without a new group epoch is not written; so a member restored from the table
is taken at any epoch from its recorded one up to the group's, once, and then held to it. Sessions are
the coordinator's soft state, per leader term of the group's partition (as the consumer group protocol's
timers): they start afresh in a new term, and time out after ``session_timeout_ms`` (Kafka's
``group.share.session.timeout.ms``, 45 s) without a heartbeat. One group, one protocol (``group_types``): a
group held by classic, consumer protocol or HTTP members is not a share group.

Each coordinator partition holds at most ``groups_max`` share groups (``--group-share-max-groups``, the
name of Kafka 4.0's ``group.share.max.groups``, which Kafka never enforced and removed in 4.1): a join
that would create one more is refused ``ShareGroupLimitReached``, checked here and again when the
group's record is applied (``group_commands.ShareGroupRecord.groups_max``), so joins of new groups sent
at once cannot pass it, and every replica applies the same bound.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol

from partitions.groups.assignors import TopicPartition
from partitions.groups.defaults import SHARE_GROUPS_MAX_DEFAULT
from partitions.groups.errors import (
    FencedMemberEpoch,
    GroupFull,
    InvalidGroupRequest,
    NotConsumerGroup,
    NotCoordinator,
    ShareGroupLimitReached,
    UnknownGroup,
    UnknownMember,
)
from partitions.groups.group_commands import ShareGroupRecord
from partitions.groups.group_model import SHARE_PROTOCOL_TYPE, Group
from partitions.groups.group_types import GroupType, Holders, check_type
from partitions.groups.held_map import HeldMap
from partitions.groups.live import LiveGroup
from partitions.groups.name_locks import NameLocks
from partitions.groups.share.group import SHARE_MEMBERS_MAX, ShareHeartbeat, ShareMember, assign
from raftlog.errors import InvariantViolation

SESSION_TIMEOUT_MS_DEFAULT = 45_000  # Kafka's group.share.session.timeout.ms
HEARTBEAT_INTERVAL_MS_DEFAULT = 5_000  # Kafka's group.share.heartbeat.interval.ms
JOIN_EPOCH, LEAVE_EPOCH = 0, -1
ASSIGNOR = "simple"
EMPTY, STABLE = "Empty", "Stable"


class ShareRecords(Protocol):
    """What this coordinator needs of the node's group coordinator (``coordinator.GroupCoordinator``)."""

    def recorded_group(self, name: str) -> tuple[int, Group | None] | None:
        """(term, the table's group) when the group's partition is led here; None otherwise."""
        ...

    def leader_term(self, name: str) -> int | None:
        """The term the group's partition is led here in, even while its leader may not read this
        moment; None when another node leads it."""
        ...

    async def readable(self, name: str) -> None:
        """Once the group's table may be read here, when this node leads its partition (a moment's
        wait); at once otherwise."""
        ...

    def live(self, group: str) -> LiveGroup | None: ...

    def partition_count(self, topic: str) -> int: ...

    def share_groups(self, group: str) -> int:
        """How many share groups the table of the group's coordinator partition holds."""
        ...

    def led_share_groups(self) -> Iterable[tuple[str, int, Group]]:
        """(name, term, the table's group) of every share group with members in a partition led here."""
        ...

    async def record_share(self, group: ShareGroup, groups_max: int) -> None:
        """``group.record`` written to the group table; a group it would create past ``groups_max`` share
        groups is refused (``ShareGroupLimitReached``)."""
        ...


@dataclass
class ShareGroup:
    name: str
    term: int
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    last_seen_ms: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # the subscribed topics' partitions, as assigned
    # every member's part of the assignment made for the group epoch ``target_epoch`` (-1: none yet)
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    target_epoch: int = -1
    recorded: int = -1  # the group epoch the group table holds (-1: none)
    # members restored from the table, whose epoch may have moved up to the group's since it was written
    loose: set[str] = field(default_factory=set)

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def assigned(self, member_id: str) -> frozenset[TopicPartition]:
        """The member's part of the assignment of the group's epoch, made now if the epoch is new (from
        the members, their topics' partition counts and the parts each was given before)."""
        if self.target_epoch != self.group_epoch:
            subscriptions = {m.member_id: m.subscribed for m in self.members.values()}
            self.target = assign(subscriptions, self.counts, self.target)
            self.target_epoch = self.group_epoch
        return self.target.get(member_id, frozenset())

    def record(self, now_ms: int, groups_max: int) -> ShareGroupRecord:
        """The group as the table records it: its epoch, members and their topics' partition counts."""
        members = tuple(self.members.values())
        return ShareGroupRecord(self.name, self.group_epoch, now_ms, groups_max, members, dict(self.counts))


@dataclass(frozen=True, slots=True)
class ShareAnswer:
    member_id: str
    member_epoch: int
    assignment: frozenset[TopicPartition] | None  # None: unchanged since the member's last heartbeat


class ShareGroupCoordinator:
    """Event loop only. ``monotonic`` (ms) times sessions."""

    def __init__(
        self,
        records: ShareRecords,
        monotonic: Callable[[], int],
        session_timeout_ms: int = SESSION_TIMEOUT_MS_DEFAULT,
        heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS_DEFAULT,
        groups_max: int = SHARE_GROUPS_MAX_DEFAULT,
        held: HeldMap | None = None,
    ) -> None:
        """``held``: the node's one map of the groups it runs in memory (a map of their own without)."""
        self._records = records
        self._monotonic = monotonic
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.groups_max = groups_max  # share groups per coordinator partition
        self._groups = (HeldMap() if held is None else held).view(GroupType.SHARE, ShareGroup)
        # the group's heartbeats one at a time; its lock dropped once none waits and the group is not
        # held, so names of groups refused or gone leave nothing behind
        self._locks = NameLocks(lambda name: name in self._groups)

    def _term(self, name: str) -> tuple[int, int, Group | None]:
        """(the term the group's partition is led here in, the group epoch the table recorded, the
        table's share group)."""
        found = self._records.recorded_group(name)
        if found is None:
            raise NotCoordinator(name)
        term, group = found
        check_type(name, GroupType.SHARE, Holders.of(group, self._records.live(name)))
        if group is None or group.protocol_type != SHARE_PROTOCOL_TYPE:
            return term, -1, None
        return term, group.generation, group

    def _group(self, name: str, create: bool) -> ShareGroup | None:
        term, recorded, table = self._term(name)
        group = self._groups.get(name)
        if group is not None and (
            group.term != term  # led here again after another coordinator
            or (recorded < 0 <= group.recorded and not group.members)  # deleted (DeleteGroups)
        ):
            group = None
            del self._groups[name]
        if group is None and recorded < 0 and create and self._records.share_groups(name) >= self.groups_max:
            raise ShareGroupLimitReached(name, self.groups_max)  # counted again when its record applies
        if group is None and (create or recorded >= 0):  # recorded: the group goes on as the table holds it
            group = self._groups[name] = ShareGroup(name, term, max(recorded, 0), max(recorded, 0))
            group.recorded = recorded
            if table is not None:
                self._restore(group, table)
        return group

    def _restore(self, group: ShareGroup, table: Group) -> None:
        """The members the table recorded, their sessions started now (a new term's timers)."""
        now = self._monotonic()
        group.counts = dict(table.partition_counts)
        for member in table.share_members:
            group.members[member.member_id] = member
            group.last_seen_ms[member.member_id] = now
            group.loose.add(member.member_id)
        for member in table.share_members:  # the recorded members assigned afresh
            group.members[member.member_id] = replace(member, assigned=group.assigned(member.member_id))

    async def heartbeat(self, name: str, hb: ShareHeartbeat) -> ShareAnswer:
        """A ShareGroupHeartbeat: the group's new epoch written to the table, then answered. Heartbeats
        of one group one at a time. ``hb.member_epoch`` None: in the epoch the member was last given (an
        HTTP member's, whose every request is a heartbeat; UnknownMember when it is not a member)."""
        await self._records.readable(name)
        async with self._locks.hold(name):
            answer = self._step(name, hb)
            await self._record(name)
            return answer

    async def _record(self, name: str) -> None:
        group = self._groups.get(name)
        if group is not None and group.group_epoch > group.recorded:
            try:
                await self._records.record_share(group, self.groups_max)
            except ShareGroupLimitReached:
                del self._groups[name]  # never created: nothing of it is held
                raise
            group.recorded = group.group_epoch

    def _step(self, name: str, hb: ShareHeartbeat) -> ShareAnswer:
        member_id, epoch, subscribed = hb.member_id, hb.member_epoch, hb.subscribed
        if not member_id:
            raise InvalidGroupRequest("MemberId can't be empty.")
        if epoch is None:
            current = self._group(name, create=False)
            known = None if current is None else current.members.get(member_id)
            if known is None:
                raise UnknownMember(name, member_id)
            epoch = known.epoch
        if epoch < LEAVE_EPOCH:
            raise InvalidGroupRequest(f"MemberEpoch is invalid: {epoch}")
        if epoch == JOIN_EPOCH and not subscribed:
            raise InvalidGroupRequest("SubscribedTopicNames must be set in first request.")
        group = self._group(name, create=epoch == JOIN_EPOCH)
        if group is None:
            if epoch == LEAVE_EPOCH:
                return ShareAnswer(member_id, LEAVE_EPOCH, None)
            raise UnknownMember(name, member_id)
        member = group.members.get(member_id)
        if member is not None and member_id in group.loose and member.epoch <= epoch <= group.group_epoch:
            member = group.members[member_id] = replace(
                member, epoch=epoch
            )  # restored: the epoch given since
        if epoch == LEAVE_EPOCH:
            if member is not None:
                self._remove(group, member_id)
            return ShareAnswer(member_id, LEAVE_EPOCH, None)
        if member is None:
            if epoch != JOIN_EPOCH:
                raise UnknownMember(name, member_id)
            if len(group.members) >= SHARE_MEMBERS_MAX:
                raise GroupFull(name, SHARE_MEMBERS_MAX)
            member = ShareMember(
                member_id, 0, hb.rack_id, hb.client_id, hb.client_host, tuple(subscribed or ()), door=hb.door
            )
            group.members[member_id] = member
            group.group_epoch += 1
        elif epoch not in (JOIN_EPOCH, member.epoch):
            raise FencedMemberEpoch(name, member_id, epoch, member.epoch)
        elif subscribed is not None and tuple(subscribed) != member.subscribed:
            group.members[member_id] = member = ShareMember(
                member_id, member.epoch, hb.rack_id, hb.client_id, hb.client_host, tuple(subscribed),
                member.assigned, member.door,
            )  # fmt: skip
            group.group_epoch += 1
        group.loose.discard(member_id)
        group.last_seen_ms[member_id] = self._monotonic()
        counts = {t: self._records.partition_count(t) for t in sorted(group.subscribed_topics())}
        if any(group.counts.get(t, c) != c for t, c in counts.items()):
            group.group_epoch += 1  # a subscribed topic's partitions changed: a new assignment
        group.counts = counts
        group.assignment_epoch = group.group_epoch
        assigned = group.assigned(member_id)
        changed = epoch == JOIN_EPOCH or assigned != member.assigned or member.epoch != group.group_epoch
        group.members[member_id] = ShareMember(
            member_id, group.group_epoch, member.rack_id, member.client_id, member.client_host,
            member.subscribed, assigned, member.door,
        )  # fmt: skip
        return ShareAnswer(member_id, group.group_epoch, assigned if changed else None)

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        group.members.pop(member_id, None)
        group.last_seen_ms.pop(member_id, None)
        group.loose.discard(member_id)
        group.group_epoch += 1
        group.assignment_epoch = group.group_epoch

    async def expire_due(self, led: Iterable[tuple[str, int]] | None = None) -> list[tuple[str, str]]:
        """Remove every member whose session passed (in groups still led here); the members of a group
        recorded with members but not held here yet (led here in a new term) start their sessions.
        ``led``: (name, term) of the share groups with members led here, as the node's one sweep read them
        (None: read here)."""
        if led is None:
            led = [(name, term) for name, term, _ in self._records.led_share_groups()]
        for name, term in list(led):
            held = self._groups.get(name)
            if held is None or held.term != term:
                with contextlib.suppress(NotCoordinator, NotConsumerGroup):
                    self._group(name, create=False)
        now, gone = self._monotonic(), []
        for name, group in list(self._groups.items()):
            if self._records.leader_term(name) != group.term:
                del self._groups[name]  # no longer coordinated here (in this term)
                self._locks.drop(name)
                continue
            if self._records.recorded_group(name) is None:
                continue  # led here, unable to read for a moment (read lease lapsed): kept, swept next time
            due = [m for m, seen in group.last_seen_ms.items() if now - seen > self.session_timeout_ms]
            if not due:
                continue
            async with self._locks.hold(name):
                for member_id in due:
                    self._remove(group, member_id)
                    gone.append((name, member_id))
                await self._record(name)
        return gone

    async def ensure(self, name: str) -> ShareGroup:
        """The group, made empty and written to the table (at epoch 0) when there is none: Kafka 4.4's
        AlterShareGroupOffsets makes the share group it sets offsets for (``getOrMaybeCreateShareGroup``).
        ``ShareGroupLimitReached`` past the bound of share groups, as a join."""
        async with self._locks.hold(name):
            group = self._group(name, create=True)
            if group is None:
                raise InvariantViolation(f"share group {name} neither found nor made")
            await self._record(name)
            return group

    def describe(self, name: str) -> ShareGroup:
        """UnknownGroup when there is none here; NotCoordinator when not led here."""
        group = self._group(name, create=False)
        if group is None:
            raise UnknownGroup(name)
        return group

    def check_member(self, name: str, member_id: str) -> None:
        """``UnknownMember`` unless ``member_id`` is a member of the group whose session is alive (joined
        with a heartbeat and heard from within ``session_timeout_ms``): what a share session, and with it
        a node's soft state, is opened for (``kafka_api.share_sessions``). NotCoordinator when not led
        here."""
        group = self._group(name, create=False)
        seen = None if group is None else group.last_seen_ms.get(member_id)
        if seen is None or self._monotonic() - seen > self.session_timeout_ms:
            raise UnknownMember(name, member_id)

    def members_of(self, name: str) -> ShareGroup | None:
        """The group's members as this coordinator holds them now, those the table recorded when it has
        not held the group yet in this term (None: not a share group led here)."""
        try:
            return self._group(name, create=False)
        except (NotCoordinator, NotConsumerGroup):
            return None
