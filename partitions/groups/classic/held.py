"""The classic groups a coordinator holds and their metadata in the replicated group table: ``HeldGroups``,
the base of ``ClassicGroups`` (``coordinator.py``), and ``GroupRecords``, what it asks of the node's group
coordinator (``Unrecorded`` when nothing is kept).

``HeldGroups`` runs each group in the leader term of its ``__consumer_groups`` partition it loaded or created
it in. It loads a group this node took over from the table, as Kafka's new coordinator loads it (Stable with
its members, each member's session starting afresh; collecting their joins again when it was written so),
drops one whose partition another node leads now (not while a leader may not read its table for a moment),
writes a group's metadata when ``ClassicGroups`` asks (a failed write answered as Kafka answers it), and
shows its groups to the node's coordinator as ``LiveGroup``s (``live``, ``names``, ``forget``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from partitions.groups.assignors import TopicPartition
from partitions.groups.classic.members import (
    ClassicGroup,
    ClassicGroupMember,
    GroupCode,
    GroupRefusal,
    GroupState,
    fail,
)
from partitions.groups.consumer_protocol import NotAnAssignment, decode_assignment
from partitions.groups.group_commands import ClassicGroupMetadata
from partitions.groups.group_model import ClassicMember, Recorded
from partitions.groups.group_types import GroupType
from partitions.groups.held_map import HeldMap
from partitions.groups.live import LiveGroup, LiveMember
from raftlog.consensus.errors import GroupClosed, NoLeader, NotLeader
from raftlog.errors import RaftlogError
from raftlog.storage.errors import RecordTooLarge

log = logging.getLogger("partitions.groups.classic.coordinator")  # the classic groups' one logger

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

    async def record_classic(self, group: str, record: Callable[[int], ClassicGroupMetadata]) -> None:
        """Write the group's metadata: ``record``, given the leader's wall clock (ms)."""
        ...


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

    async def record_classic(self, group: str, record: Callable[[int], ClassicGroupMetadata]) -> None:
        return None


class HeldGroups:
    """The classic groups this node runs, each in the leader term of its partition it was loaded or
    created in, loaded from and written to the group table. Event loop only."""

    def __init__(self, records: GroupRecords | None = None, held: HeldMap | None = None) -> None:
        """``held``: the node's one map of the groups it runs in memory (a map of their own without)."""
        self.groups = (HeldMap() if held is None else held).view(GroupType.CLASSIC, ClassicGroup)
        self._records: GroupRecords = records or Unrecorded()
        self._recording: set[asyncio.Task[None]] = set()
        self._adopted_ms: int | None = None  # when a tick last looked for groups to load or drop
        self._held = asyncio.Event()  # set when a group is loaded or made here (``idle``)

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
        self._held.set()
        if group.members:
            log.info(
                "group %s: loaded at generation %d with %d member(s)%s",
                name,
                group.generation,
                len(group.members),
                ", collecting their joins again" if group.state is GroupState.PREPARING_REBALANCE else "",
            )
        return group

    def _known(self, name: str, now_ms: int) -> ClassicGroup:
        group = self._current(name, now_ms)
        if group is None:
            raise GroupRefusal(GroupCode.unknown_member_id, f"group {name!r} has no members here")
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
        members = tuple(
            ClassicMember(
                m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms, dict(m.protocols).get(protocol, b""), m.assignment,
            )
            for m in group.members.values()
        )  # fmt: skip

        def record(now_ms: int) -> ClassicGroupMetadata:
            return ClassicGroupMetadata(
                name, protocol_type, protocol, generation, leader, members, now_ms, rebalancing
            )

        async def write() -> None:
            refusal = None
            try:
                await self._records.record_classic(name, record)
            except RaftlogError as exc:
                log.info("group %s: generation %d not written: %s", name, generation, exc)
                refusal = _not_written(exc)
            if done is not None:
                done(refusal)

        task = asyncio.get_running_loop().create_task(write())
        self._recording.add(task)
        task.add_done_callback(self._recording.discard)

    # -- what the node's coordinator sees (``partitions.groups.live.LiveGroup``) ----------------------

    def live(self, name: str, recorded: bool = False) -> LiveGroup | None:
        """The group as this node runs it; with ``recorded``, one whose partition it leads but has not
        loaded in this term yet (a coordinator just elected, before its next tick) as the table holds it,
        members and all, as DescribeGroups answers it (``view``)."""
        group = self.groups.get(name)
        if recorded:
            with contextlib.suppress(GroupRefusal):  # not led here: what this node still holds
                group = self.view(name)
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

    def drop(self, name: str, refusal: GroupRefusal | None = None) -> None:
        """This node no longer runs the group: waiting members learn ``refusal``, NOT_COORDINATOR by
        default (another node coordinates it now)."""
        group = self.groups.pop(name, None)
        if group is None:
            return
        refusal = refusal or GroupRefusal(GroupCode.not_coordinator, f"no longer the coordinator of {name!r}")
        for member in group.members.values():
            fail(member, refusal)

    async def idle(self, now_ms: int) -> None:
        """With no group held here, a tick has one thing to do: the next look for groups to adopt. Wait
        for it, or until a group is loaded or made here, instead of ticking on."""
        self._held.clear()
        due_ms = 0 if self._adopted_ms is None else self._adopted_ms + ADOPT_INTERVAL_MS - now_ms
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0, due_ms) / 1000):  # keeps a cancel (tests/test_cancel_safety.py)
                await self._held.wait()

    def _adopt_due(self, now_ms: int) -> None:
        """Load the groups this node took over and drop those it no longer coordinates, at most every
        ``ADOPT_INTERVAL_MS`` (a tick's first step)."""
        if self._adopted_ms is None or now_ms - self._adopted_ms >= ADOPT_INTERVAL_MS:
            self._adopted_ms = now_ms
            try:
                self._adopt(now_ms)
            except RaftlogError as exc:  # the table not readable now: the next tick tries again
                log.info("groups not loaded: %s", exc)

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


def _partitions(group: ClassicGroup, assignment: bytes) -> tuple[TopicPartition, ...]:
    """The partitions a member's assignment names (consumers' groups only: another protocol's bytes are
    its own)."""
    if group.protocol_type != "consumer" or not assignment:
        return ()
    try:
        return decode_assignment(assignment)
    except NotAnAssignment:
        return ()
