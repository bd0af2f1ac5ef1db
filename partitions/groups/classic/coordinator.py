"""Kafka's classic consumer group protocol on its coordinator: members join, the leader assigns (the
assignor runs in the client), everyone syncs, heartbeats keep sessions alive.

A group runs in this node's memory while the node leads the group's ``__consumer_groups`` partition
(the coordinator FindCoordinator names); committed offsets do not live here but on each partition's
leader, the same ones the HTTP API shows (``kafka_api.group_apis``). As Kafka writes a group's metadata
to ``__consumer_offsets``, the group is written to that partition's replicated group table
(``GroupRecords``, the node's group coordinator) when a rebalance completes (the leader's SyncGroup: the
members learn their assignments once it is written; a failed write answers them an error they rejoin on),
when the group empties, and when members leave or their sessions expire: protocol type, protocol,
generation, leader and every member with its subscription and assignment. A coordinator taking over (a
failover, a restart, the leader balancer) loads the group from there, for the leader term it now leads the
partition in: Stable with its members, each member's session starting afresh, so their heartbeats,
commits and syncs go on in their generation and a rejoin with a known member id is a normal rebalance.
A group written while it collected joins after losing members is loaded collecting them again: its
members' next heartbeat asks them to rejoin. Kafka writes neither the loss nor the rebalance, so its new
coordinator waits out the session of a member that left (45 s for many clients) before the others take
its partitions. The same coordinator lists, describes and deletes these groups
with the HTTP door's (``LiveGroups``).

Static members (KIP-345: a ``group.instance.id``) keep their place across a restart: one that joins again
with its instance id and no member id takes over its old member's id slot and assignment, and a Stable
group goes on without a rebalance when its protocols did not change; the member it replaced is fenced
(FENCED_INSTANCE_ID on its next call). A static leader back so is told the members but that it must skip
the assignment, which stands (KIP-814, JoinGroup v9; ``Joined.skip_assignment``). Static members do not
leave when they close; they leave when their session expires, or when an admin removes them by instance
id (LeaveGroup v3+).

States as Kafka's: Empty -> PreparingRebalance (joins collected until every member rejoined or the
rebalance timeout; a group's first rebalance, from Empty, collects joins for ``initial_delay_ms`` more
while new members keep coming, Kafka's ``group.initial.rebalance.delay.ms``, and only a tick ends it)
-> CompletingRebalance (waiting for the leader's SyncGroup) -> Stable. Generations
fence heartbeats, syncs and commits of members that missed a rebalance. Time comes from ``now_ms``
arguments and ``tick``, so the state machine is tested without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from partitions.groups.assignors import TopicPartition
from partitions.groups.classic.members import (
    ClassicGroup,
    ClassicGroupMember,
    GroupCode,
    GroupRefusal,
    GroupState,
    InitialDelay,
    Joined,
    MemberIdRequired,
    fail,
)
from partitions.groups.consumer_protocol import NotAnAssignment, decode_assignment, decode_subscription
from partitions.groups.defaults import INITIAL_DELAY_MS_DEFAULT
from partitions.groups.group_model import ClassicMember, Recorded
from partitions.groups.group_types import GroupType
from partitions.groups.live import LiveGroup, LiveMember
from raftlog.consensus.errors import GroupClosed, NoLeader, NotLeader
from raftlog.errors import RaftlogError
from raftlog.storage.errors import RecordTooLarge

log = logging.getLogger(__name__)

MEMBERS_MAX = 1000  # per group
SESSION_TIMEOUT_MIN_MS = 1_000
SESSION_TIMEOUT_MAX_MS = 300_000
ADOPT_INTERVAL_MS = 1_000  # how often a tick looks for groups to load (or drop) as leadership moved


class GroupRecords(Protocol):
    """What the node's group coordinator keeps of a Kafka group (``partitions.groups.coordinator``)."""

    def recorded(self, name: str) -> Recorded | None:
        """The group as the table holds it, with the term its partition is led here in; None when it
        is not led here."""
        ...

    def leader_term(self, name: str) -> int | None:
        """The term this node leads the group's partition in, even while it may not read it this
        moment (its read lease lapsed, its Raft thread stood still); None when another node leads it."""
        ...

    def recorded_classic(self) -> list[tuple[str, int]]:
        """(name, term) of every group with members recorded in a partition led here."""
        ...

    def check_type(self, group: str, asking: GroupType) -> None:
        """Refused when a protocol other than ``asking`` holds the group (``group_types``)."""
        ...

    async def record_classic(
        self,
        group: str,
        protocol_type: str,
        protocol: str,
        generation: int,
        leader: str | None,
        members: Sequence[ClassicMember],
        rebalancing: bool = False,
    ) -> None: ...


class Unrecorded:
    """No record kept (a door in a test): every group is new, led here in term 0."""

    def recorded(self, name: str) -> Recorded | None:
        return Recorded(0, None)

    def leader_term(self, name: str) -> int | None:
        return 0

    def recorded_classic(self) -> list[tuple[str, int]]:
        return []

    def check_type(self, group: str, asking: GroupType) -> None:
        return None

    async def record_classic(
        self,
        group: str,
        protocol_type: str,
        protocol: str,
        generation: int,
        leader: str | None,
        members: Sequence[ClassicMember],
        rebalancing: bool = False,
    ) -> None:
        return None


class ClassicGroups:
    """The groups this node coordinates. Event loop only."""

    def __init__(
        self, records: GroupRecords | None = None, initial_delay_ms: int = INITIAL_DELAY_MS_DEFAULT
    ) -> None:
        if initial_delay_ms < 0:
            raise ValueError(f"initial rebalance delay {initial_delay_ms} ms: must be >= 0")
        self.initial_delay_ms = initial_delay_ms
        self.groups: dict[str, ClassicGroup] = {}
        self._records: GroupRecords = records or Unrecorded()
        self._recording: set[asyncio.Task[None]] = set()
        self._adopted_ms: int | None = None  # when a tick last looked for groups to load or drop

    def group(self, name: str, now_ms: int) -> ClassicGroup:
        """The group this coordinator runs, a new one when the table has no record of it."""
        group = self._current(name, now_ms, create=True)
        assert group is not None
        return group

    def _current(self, name: str, now_ms: int, create: bool = False) -> ClassicGroup | None:
        """The group as this coordinator runs it now. One it does not hold for the term it leads the
        group's partition in (a failover, a restart, leadership lost and won back) is loaded from the
        table, as Kafka's new coordinator loads it: Stable with its members, each member's session
        starting afresh at ``now_ms`` (Empty without). None when there is no record and not ``create``;
        GroupRefusal(NOT_COORDINATOR) when this node does not lead that partition."""
        recorded = self._records.recorded(name)
        if recorded is None:
            self._drop_if_led_elsewhere(name)
            raise GroupRefusal(GroupCode.not_coordinator, f"this node does not coordinate group {name!r} now")
        group = self.groups.get(name)
        if group is not None and group.term == recorded.term:
            return group
        if group is not None:  # run here in an earlier term: the table holds what happened since
            self.drop(name)
        if recorded.group is None and not create:
            return None
        group = self.groups[name] = _loaded(name, recorded, now_ms)
        if group.members:
            log.info(
                "group %s: loaded at generation %d with %d member(s)%s",
                name,
                group.generation,
                len(group.members),
                ", collecting their joins again" if group.state is GroupState.PREPARING_REBALANCE else "",
            )
        return group

    def view(self, name: str) -> ClassicGroup | None:
        """The group to check a call against or describe without loading it: this coordinator's, or the
        table's (a commit or a DescribeGroups before its members' first heartbeat here, or before a tick
        loaded it); None when the table holds none; GroupRefusal(NOT_COORDINATOR) when its partition is
        not led here."""
        recorded = self._records.recorded(name)
        if recorded is None:
            raise GroupRefusal(GroupCode.not_coordinator, f"this node does not coordinate group {name!r}")
        group = self.groups.get(name)
        if group is not None and group.term == recorded.term:
            return group
        return None if recorded.group is None else _loaded(name, recorded, 0)

    def _write(self, group: ClassicGroup, done: Callable[[GroupRefusal | None], None] | None = None) -> None:
        """Write the group's metadata (its members with their assignments now) to the group table;
        ``done`` gets None once written, or the refusal its members are answered (Kafka's mapping of a
        failed append: NOT_COORDINATOR when leadership moved, COORDINATOR_NOT_AVAILABLE when it could not
        be written now, UNKNOWN_SERVER_ERROR when too large). Without ``done`` a failure is logged: the
        next rebalance writes again."""
        name, generation = group.name, group.generation
        protocol_type, protocol, leader = group.protocol_type or "", group.protocol or "", group.leader
        rebalancing = group.state is GroupState.PREPARING_REBALANCE and bool(group.members)
        members = [
            ClassicMember(
                m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms, dict(m.protocols).get(protocol, b""), m.assignment,
            )
            for m in group.members.values()
        ]  # fmt: skip

        async def write() -> None:
            refusal = None
            try:
                await self._records.record_classic(
                    name, protocol_type, protocol, generation, leader, members, rebalancing
                )
            except RaftlogError as exc:
                log.info("group %s: generation %d not written: %s", name, generation, exc)
                refusal = _not_written(exc)
            if done is not None:
                done(refusal)

        task = asyncio.get_running_loop().create_task(write())
        self._recording.add(task)
        task.add_done_callback(self._recording.discard)

    # -- what the node's coordinator sees (``partitions.groups.live.LiveGroups``) ---------------------

    def live(self, name: str) -> LiveGroup | None:
        group = self.groups.get(name)
        if group is None or not group.members:
            return None
        members = tuple(
            LiveMember(
                m.member_id, m.client_id, m.client_host, _partitions(group, m.assignment), m.instance_id
            )
            for m in group.members.values()
        )
        return LiveGroup(
            name,
            group.state.value,
            group.protocol_type or "",
            group.protocol or "",
            group.generation,
            members,
        )

    def names(self) -> Iterable[str]:
        return list(self.groups)

    def forget(self, name: str) -> None:
        group = self.groups.get(name)
        if group is not None and not group.members:
            del self.groups[name]

    def _drop_if_led_elsewhere(self, name: str) -> None:
        """Drop the group unless this node still leads its partition in the term it runs the group in.
        A leader that may not read its table for a moment (its read lease lapsed under load, or its Raft
        thread stood still) keeps the group: nothing of that term was written but by it, and dropping
        would lose what only memory holds (the rebalance under way, whose generation is written only
        when it completes), as a coordinator that reloaded it would answer ILLEGAL_GENERATION and
        UNKNOWN_MEMBER_ID to members that did nothing wrong."""
        group = self.groups.get(name)
        if group is not None and self._records.leader_term(name) != group.term:
            self.drop(name)

    def drop(self, name: str) -> None:
        """This node no longer coordinates the group: waiting members learn NOT_COORDINATOR."""
        group = self.groups.pop(name, None)
        if group is None:
            return
        for member in group.members.values():
            fail(member, GroupRefusal(GroupCode.not_coordinator, f"no longer the coordinator of {name!r}"))

    # -- JoinGroup -----------------------------------------------------------------------------------

    def join(
        self,
        name: str,
        member_id: str,
        *,
        client_id: str,
        client_host: str,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        require_known_id: bool,
        now_ms: int,
        instance_id: str | None = None,
    ) -> asyncio.Future[Joined]:
        """A member (re)joins; the future resolves when the rebalance completes (or raises GroupRefusal).
        ``require_known_id`` (JoinGroup v4+, KIP-394): a member without an id first gets one with
        MEMBER_ID_REQUIRED and joins again with it; a static member (``instance_id``) gets its id at
        once, as Kafka gives it. A group another protocol holds is refused INCONSISTENT_GROUP_PROTOCOL
        (``group_types``)."""
        self._records.check_type(name, GroupType.CLASSIC)  # one group, one protocol
        if not SESSION_TIMEOUT_MIN_MS <= session_timeout_ms <= SESSION_TIMEOUT_MAX_MS:
            raise GroupRefusal(
                GroupCode.invalid_session_timeout,
                f"session timeout {session_timeout_ms} ms: must be in "
                f"[{SESSION_TIMEOUT_MIN_MS}, {SESSION_TIMEOUT_MAX_MS}]",
            )
        if not protocols or not protocol_type:
            raise GroupRefusal(
                GroupCode.inconsistent_group_protocol, "a member needs a protocol type and protocols"
            )
        group = self.group(name, now_ms)
        if group.members and group.protocol_type != protocol_type:
            raise GroupRefusal(
                GroupCode.inconsistent_group_protocol,
                f"protocol type {protocol_type!r}: the group's is {group.protocol_type!r}",
            )
        names = {p for p, _ in protocols}
        others = [m for m in group.members.values() if m.member_id != member_id]
        if others and not any(all(p in {q for q, _ in m.protocols} for m in others) for p in names):
            raise GroupRefusal(
                GroupCode.inconsistent_group_protocol, "no protocol in common with the group's members"
            )
        replaced = None
        if instance_id is not None:
            replaced = group.static(instance_id)
            if member_id:  # a known static member rejoining: it must be the instance's member now
                if replaced is None:
                    raise GroupRefusal(
                        GroupCode.unknown_member_id, f"instance {instance_id!r} is not in group {name!r}"
                    )
                group.check_instance(member_id, instance_id)
                replaced = None
        if replaced is not None:  # a static member back from a restart: a new id in its old place
            return self._replace_static(group, replaced, client_id, client_host, protocols, now_ms)
        if not member_id:
            if len(group.members) + len(group.pending) >= MEMBERS_MAX:
                raise GroupRefusal(
                    GroupCode.group_max_size_reached, f"group {name!r} has {MEMBERS_MAX} members"
                )
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_id and instance_id is None:
                group.pending[member_id] = now_ms
                raise MemberIdRequired(member_id)
        elif member_id not in group.members and group.pending.pop(member_id, None) is None:
            raise GroupRefusal(GroupCode.unknown_member_id, f"member {member_id!r} is not in group {name!r}")
        member = group.members.get(member_id)
        if member is None:
            member = group.members[member_id] = ClassicGroupMember(
                member_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                tuple(protocols),
                now_ms,
                instance_id,
            )
            if group.initial is not None:  # the first rebalance waits another delay for more
                group.initial.new_member_added = True
        else:
            member.protocols = tuple(protocols)
            member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
            member.last_seen_ms = now_ms
            fail(member, GroupRefusal(GroupCode.rebalance_in_progress, "joined again"))
        group.protocol_type = protocol_type
        joining = member.joining = asyncio.get_running_loop().create_future()
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare(group, now_ms)
        self._maybe_complete(group, now_ms)
        return joining

    def _replace_static(
        self,
        group: ClassicGroup,
        old: ClassicGroupMember,
        client_id: str,
        client_host: str,
        protocols: Sequence[tuple[str, bytes]],
        now_ms: int,
    ) -> asyncio.Future[Joined]:
        """The new incarnation of a static member takes the old one's place, assignment and leadership;
        the old one is fenced. A Stable group whose chosen protocol's metadata is unchanged answers at
        once with its generation (no rebalance: the other members never notice); otherwise the group
        rebalances as for any join."""
        fail(old, GroupRefusal(GroupCode.fenced_instance_id, "a newer member has its instance id"))
        member = ClassicGroupMember(
            f"{old.instance_id}-{uuid.uuid4()}",
            client_id,
            client_host,
            old.session_timeout_ms,
            old.rebalance_timeout_ms,
            tuple(protocols),
            now_ms,
            old.instance_id,
            old.assignment,
        )
        group.members = {
            (member.member_id if m is old else m.member_id): (member if m is old else m)
            for m in group.members.values()
        }
        if group.leader == old.member_id:
            group.leader = member.member_id
        joining = member.joining = asyncio.get_running_loop().create_future()
        unchanged = group.protocol is not None and dict(protocols).get(group.protocol) == dict(
            old.protocols
        ).get(group.protocol)
        if group.state is GroupState.STABLE and unchanged:  # written before it is answered, as Kafka's
            self._write(group, lambda refusal: self._replaced(group, old, member, refusal))
            return joining
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare(group, now_ms)
        self._maybe_complete(group, now_ms)
        return joining

    def _replaced(
        self,
        group: ClassicGroup,
        old: ClassicGroupMember,
        member: ClassicGroupMember,
        refusal: GroupRefusal | None,
    ) -> None:
        """A static member's replacement was written (``refusal`` None): it is answered the group's
        generation; or not: the old member gets its place back and the new one the refusal, as Kafka
        reverts it. A rebalance begun meanwhile answers it instead."""
        current = group.members.get(member.member_id) is member and self.groups.get(group.name) is group
        waiting = member.joining is not None and not member.joining.done()
        if not current or not waiting or group.state is not GroupState.STABLE:
            return
        if refusal is None:
            _answer_join(group, member, replaced=old.member_id)
            return
        group.members = {
            (old.member_id if m is member else m.member_id): (old if m is member else m)
            for m in group.members.values()
        }
        if group.leader == member.member_id:
            group.leader = old.member_id
        fail(member, refusal)

    def _prepare(self, group: ClassicGroup, now_ms: int) -> None:
        longest = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.initial = None
        if group.state is GroupState.EMPTY:
            delay = self.initial_delay_ms
            group.initial = InitialDelay(now_ms + delay, max(longest - delay, 0))
        group.state = GroupState.PREPARING_REBALANCE
        group.rebalance_deadline_ms = now_ms + longest
        for member in group.members.values():  # a sync waiting on the old generation will not complete
            if member.syncing is not None and not member.syncing.done():
                member.syncing.set_exception(GroupRefusal(GroupCode.rebalance_in_progress))
            member.syncing = None

    def _maybe_complete(self, group: ClassicGroup, now_ms: int, ticked: bool = False) -> None:
        """End the join phase if every member joined or the rebalance timed out; a first rebalance
        ends only on a tick (``ticked``), once its initial delay passed with no new member."""
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        waiting = [m for m in group.members.values() if m.joining is not None and not m.joining.done()]
        if group.initial is not None:
            if not ticked or not self._initial_delay_over(group.initial, group, now_ms):
                return
        elif len(waiting) < len(group.members) and now_ms < group.rebalance_deadline_ms:
            return
        for member in [m for m in group.members.values() if m not in waiting]:
            del group.members[member.member_id]  # did not rejoin in time
        group.generation += 1
        if not group.members:
            group.protocol = None
            self._write(group)
            group.state, group.protocol, group.leader, group.protocol_type = (
                GroupState.EMPTY,
                None,
                None,
                None,
            )
            return
        group.protocol = _vote(list(group.members.values()))
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = GroupState.COMPLETING_REBALANCE
        for member in group.members.values():
            member.assignment = b""
            member.last_seen_ms = now_ms
            _answer_join(group, member)

    def _initial_delay_over(self, initial: InitialDelay, group: ClassicGroup, now_ms: int) -> bool:
        """Kafka's rule: when the delay is due and new members joined during it, wait
        ``min(delay, remaining)`` more, while the rebalance timeout lasts; else the first rebalance
        ends now."""
        if now_ms < initial.due_ms:
            return False
        delay = self.initial_delay_ms
        if initial.new_member_added and initial.remaining_ms > 0:
            group.initial = InitialDelay(
                now_ms + min(delay, initial.remaining_ms), max(initial.remaining_ms - delay, 0)
            )
            return False
        group.initial = None
        return True

    # -- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------------------

    def sync(
        self,
        name: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes],
        now_ms: int,
        instance_id: str | None = None,
    ) -> asyncio.Future[bytes]:
        """A member's SyncGroup; the leader's brings every member's assignment, which is written to the
        group table (with the members) before any member is answered, as Kafka's: the group is Stable
        once written; a failed write answers every waiting member its error and the group rebalances."""
        group = self._known(name, now_ms)
        group.check_instance(member_id, instance_id)
        member = group.check_member(member_id, generation)
        member.last_seen_ms = now_ms
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        if group.state is GroupState.PREPARING_REBALANCE:
            raise GroupRefusal(GroupCode.rebalance_in_progress)
        if group.state is GroupState.STABLE:
            future.set_result(member.assignment)
            return future
        member.syncing = future
        if member_id == group.leader:
            assigned = {m.member_id: assignments.get(m.member_id, b"") for m in group.members.values()}
            for each in group.members.values():  # as written; answered once the write is done
                each.assignment = assigned[each.member_id]
            self._write(group, lambda refusal: self._synced(group, generation, refusal, now_ms))
        return future

    def _synced(
        self, group: ClassicGroup, generation: int, refusal: GroupRefusal | None, now_ms: int
    ) -> None:
        """The leader's assignment was written (``refusal`` None) or not. Unless the group moved on
        meanwhile (a join began another rebalance, another coordinator took it), Stable and every
        waiting member answered its assignment; or each answered the refusal, and the group rebalances."""
        if (
            self.groups.get(group.name) is not group
            or group.state is not GroupState.COMPLETING_REBALANCE
            or group.generation != generation
        ):
            return
        if refusal is None:
            group.state = GroupState.STABLE
        for each in group.members.values():
            if refusal is not None:
                each.assignment = b""
            if each.syncing is not None and not each.syncing.done():
                if refusal is None:
                    each.syncing.set_result(each.assignment)
                else:
                    each.syncing.set_exception(refusal)
            each.syncing = None
        if refusal is not None:
            self._prepare(group, now_ms)
            self._maybe_complete(group, now_ms)

    def heartbeat(
        self, name: str, member_id: str, generation: int, now_ms: int, instance_id: str | None = None
    ) -> None:
        group = self._known(name, now_ms)
        group.check_instance(member_id, instance_id)
        member = group.members.get(member_id)
        if member is None:
            raise GroupRefusal(GroupCode.unknown_member_id)
        member.last_seen_ms = now_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            raise GroupRefusal(GroupCode.rebalance_in_progress)
        group.check_member(member_id, generation)

    def leave(self, name: str, leaving: Sequence[tuple[str, str | None]], now_ms: int) -> list[GroupCode]:
        """Each (member id, instance id) leaves; its answer, in order. A static member is named by its
        instance id (an admin's removal gives no member id); a member id given with it must be the
        instance's, else FENCED_INSTANCE_ID."""
        group = self._known(name, now_ms)
        answers = []
        for member_id, instance_id in leaving:
            holder = group.members.get(member_id) if instance_id is None else group.static(instance_id)
            if holder is not None and instance_id is not None and member_id and holder.member_id != member_id:
                answers.append(GroupCode.fenced_instance_id)
                continue
            if holder is None:
                answers.append(GroupCode.unknown_member_id)
                continue
            del group.members[holder.member_id]
            fail(holder, GroupRefusal(GroupCode.unknown_member_id, "left the group"))
            answers.append(GroupCode.none)
        if GroupCode.none in answers:
            self._rebalance_after_loss(group, now_ms)
        return answers

    def _rebalance_after_loss(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            if group.members:
                self._prepare(group, now_ms)
            else:
                group.state, group.leader, group.protocol = GroupState.EMPTY, None, None
                group.generation += 1
                self._write(group)
        if group.state is GroupState.PREPARING_REBALANCE and group.members and group.generation > 0:
            # Who is left, and that a rebalance is under way, outlive this coordinator: Kafka writes
            # neither, so a coordinator taking over there runs the old generation with the member that
            # left, and the others wait out its session before they rebalance.
            self._write(group)
        self._maybe_complete(group, now_ms)

    def check_commit(
        self, name: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> None:
        """Fence an OffsetCommit: a member of the current generation, or no member at all (generation
        -1, a consumer outside any group management, or an operator's reset), which Kafka accepts only
        while the group has no members (of this protocol, or HTTP instances): their next commit would undo
        it. A group this coordinator has
        not loaded yet (its members did not call since it took over) is checked as the table holds it."""
        group = self.view(name)
        if generation < 0 and not member_id:
            recorded = self._records.recorded(name)
            if recorded is not None and recorded.group is not None and recorded.group.members:
                raise GroupRefusal(GroupCode.unknown_member_id, "the group has members joined over HTTP")
            if group is not None and group.members:
                raise GroupRefusal(
                    GroupCode.unknown_member_id,
                    f"group {name!r} has {len(group.members)} member(s): only they may commit its offsets",
                )
            return
        if group is None:
            raise GroupRefusal(GroupCode.unknown_member_id, f"group {name!r} has no members here")
        if not group.members and group.protocol and member_id and 1 <= generation == group.generation:
            # a record of the release before, which wrote generations without members: the generation it
            # recorded vouches for its members until they join here, as then
            return
        group.check_instance(member_id, instance_id)
        group.check_member(member_id, generation)
        if group.state is GroupState.COMPLETING_REBALANCE:
            raise GroupRefusal(GroupCode.rebalance_in_progress)

    def check_txn_commit(
        self, name: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> None:
        """Fence a TxnOffsetCommit (KIP-447) as Kafka's coordinator does: a static member's instance id,
        the member id and the generation are each checked when given (FENCED_INSTANCE_ID,
        UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION); a producer outside the group's management (none given)
        commits whoever holds the group."""
        group = self.view(name)
        if group is not None:
            group.check_instance(member_id, instance_id)
        if member_id and (group is None or member_id not in group.members):
            raise GroupRefusal(GroupCode.unknown_member_id, f"member {member_id!r} is not in group {name!r}")
        current = group.generation if group is not None else 0
        if generation >= 0 and generation != current:
            raise GroupRefusal(
                GroupCode.illegal_generation, f"generation {generation}: the group is at {current}"
            )

    def subscribed_topics(self, name: str) -> frozenset[str] | None:
        """What OffsetDelete may not touch, as Kafka's coordinator decides: None when the group has no
        members here; for a consumers' group (protocol type ``consumer``), the topics its members
        subscribe to (their partitions' offsets answer GROUP_SUBSCRIBED_TO_TOPIC, the rest are deleted);
        a group of another protocol type with members (a Kafka Connect cluster's workers) is refused
        whole, GroupRefusal(NON_EMPTY_GROUP), as Kafka refuses it."""
        group = self.groups.get(name)
        if group is None or not group.members:
            return None
        if group.protocol_type != "consumer":
            raise GroupRefusal(
                GroupCode.non_empty_group,
                f"group {name!r} has {len(group.members)} member(s) of protocol type {group.protocol_type!r}",
            )
        topics: set[str] = set()
        for member in group.members.values():
            chosen = group.protocol or member.protocols[0][0]  # before the first choice: its preference
            with contextlib.suppress(NotAnAssignment):  # bytes that are no subscription hold nothing
                topics.update(decode_subscription(dict(member.protocols).get(chosen, b"")))
        return frozenset(topics)

    def _known(self, name: str, now_ms: int) -> ClassicGroup:
        group = self._current(name, now_ms)
        if group is None:
            raise GroupRefusal(GroupCode.unknown_member_id, f"group {name!r} has no members here")
        return group

    # -- time ----------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Load the groups this node took over and drop those it no longer coordinates (at most every
        ``ADOPT_INTERVAL_MS``), expire members whose session ran out (not those waiting in a join) and
        finish rebalances whose time is up."""
        if self._adopted_ms is None or now_ms - self._adopted_ms >= ADOPT_INTERVAL_MS:
            self._adopted_ms = now_ms
            try:
                self._adopt(now_ms)
            except RaftlogError as exc:  # the table not readable now: the next tick tries again
                log.info("groups not loaded: %s", exc)
        for group in list(self.groups.values()):
            expired = [
                m.member_id
                for m in group.members.values()
                if (m.joining is None or m.joining.done()) and now_ms - m.last_seen_ms > m.session_timeout_ms
            ]
            for member_id in expired:
                fail(
                    group.members.pop(member_id), GroupRefusal(GroupCode.unknown_member_id, "session expired")
                )
            stale = [i for i, at in group.pending.items() if now_ms - at > SESSION_TIMEOUT_MAX_MS]
            for member_id in stale:
                del group.pending[member_id]
            if expired:
                self._rebalance_after_loss(group, now_ms)
            self._maybe_complete(group, now_ms, ticked=True)

    def _adopt(self, now_ms: int) -> None:
        """A coordinator that took over loads its groups with members at once, as Kafka's loads its
        partition, so that the sessions of members that died meanwhile expire here too."""
        for name in list(self.groups):
            self._drop_if_led_elsewhere(name)
        for name, term in self._records.recorded_classic():
            group = self.groups.get(name)
            if group is None or group.term != term:
                with contextlib.suppress(GroupRefusal):  # led elsewhere since
                    self._current(name, now_ms)


def _loaded(name: str, recorded: Recorded, now_ms: int) -> ClassicGroup:
    """A group as the table holds it, run in ``recorded.term``: Stable with the members written at its
    last rebalance (each knowing only the protocol chosen, its sessions starting at ``now_ms``),
    PreparingRebalance with those left when it was written collecting joins after a loss, or Empty at
    its generation."""
    held = recorded.group
    if held is None:
        return ClassicGroup(name, term=recorded.term)
    if not held.classic_members:  # a protocol without members: a record of the release before
        protocol_type = held.protocol_type or None
        protocol = (held.assignor or None) if protocol_type else None
        return ClassicGroup(name, generation=held.generation, protocol_type=protocol_type, protocol=protocol,
                     term=recorded.term)  # fmt: skip
    members = {
        m.member_id: ClassicGroupMember(
            m.member_id, m.client_id, m.client_host, m.session_timeout_ms, m.rebalance_timeout_ms,
            ((held.assignor, m.subscription),), now_ms, m.instance_id, m.assignment,
        )
        for m in held.classic_members
    }  # fmt: skip
    leader = held.classic_leader if held.classic_leader in members else next(iter(members))
    group = ClassicGroup(
        name,
        GroupState.STABLE,
        held.generation,
        held.protocol_type,
        held.assignor,
        leader,
        members,
        term=recorded.term,
    )
    if held.classic_rebalancing:  # members had left: the members' next calls are asked to rejoin
        group.state = GroupState.PREPARING_REBALANCE
        group.rebalance_deadline_ms = now_ms + max(m.rebalance_timeout_ms for m in members.values())
    return group


def _not_written(exc: RaftlogError) -> GroupRefusal:
    """Kafka's answer to a group metadata write that failed (its appendGroupMetadataErrorToResponseError)."""
    if isinstance(exc, RecordTooLarge):
        return GroupRefusal(GroupCode.unknown_server_error, str(exc))
    if isinstance(exc, NotLeader | NoLeader | GroupClosed):
        return GroupRefusal(GroupCode.not_coordinator, str(exc))
    return GroupRefusal(GroupCode.coordinator_not_available, str(exc))


def _vote(members: list[ClassicGroupMember]) -> str:
    """The protocol every member supports that most members prefer (ties: the first member's order)."""
    common = set.intersection(*({p for p, _ in m.protocols} for m in members))
    votes = {name: 0 for name in common}
    for member in members:
        votes[next(p for p, _ in member.protocols if p in common)] += 1
    first = [p for p, _ in members[0].protocols if p in common]
    return max(first, key=lambda p: (votes[p], -first.index(p)))


def _partitions(group: ClassicGroup, assignment: bytes) -> tuple[TopicPartition, ...]:
    """The partitions a member's assignment names (consumers' groups only: another protocol's bytes are
    its own)."""
    if group.protocol_type != "consumer" or not assignment:
        return ()
    try:
        return decode_assignment(assignment)
    except NotAnAssignment:
        return ()


def _answer_join(group: ClassicGroup, member: ClassicGroupMember, replaced: str = "") -> None:
    """Resolve the member's join with the group's generation, protocol and leader; the leader also gets
    every member's metadata for the chosen protocol, to assign from. ``replaced``: the member is a static
    member that took the place of that member id in a Stable group without a rebalance; if it is the
    leader, it must not assign (``Joined.skip_assignment``, KIP-814), as the assignment stands."""
    assert group.protocol is not None and group.leader is not None and member.joining is not None
    protocol = group.protocol
    everyone = tuple((m.member_id, dict(m.protocols)[protocol]) for m in group.members.values())
    leads = member.member_id == group.leader
    member.joining.set_result(
        Joined(
            group.generation,
            group.protocol_type or "",
            protocol,
            group.leader,
            member.member_id,
            everyone if leads else (),
            skip_assignment=leads and bool(replaced),
            replaced_leader=replaced if leads else "",
        )
    )
    member.joining = None
