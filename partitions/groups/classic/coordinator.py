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
with the HTTP door's (as ``LiveGroup``s: ``HeldGroups.live``).

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

This module holds the protocol's calls and its clock (``ClassicGroups``). ``held.py`` holds the groups
per leader term, loads them from the table, writes them back and shows them to the node's coordinator
(``HeldGroups``, the base of ``ClassicGroups``); ``rebalance.py`` runs a group's rebalance; ``offsets.py``
fences its offset commits and deletions; ``members.py`` holds a group and its members.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

from partitions.groups.classic import offsets
from partitions.groups.classic.held import GroupRecords, HeldGroups
from partitions.groups.classic.members import (
    ClassicGroup,
    ClassicGroupMember,
    GroupCode,
    GroupRefusal,
    GroupState,
    Joined,
    MemberIdRequired,
    fail,
)
from partitions.groups.classic.rebalance import (
    answer_join,
    collect_joins,
    maybe_complete,
    prepare,
    rebalance_after_loss,
)
from partitions.groups.defaults import INITIAL_DELAY_MS_DEFAULT
from partitions.groups.group_types import GroupType
from partitions.groups.held_map import HeldMap

MEMBERS_MAX = 1000  # per group
SESSION_TIMEOUT_MIN_MS = 1_000
SESSION_TIMEOUT_MAX_MS = 300_000


class ClassicGroups(HeldGroups):
    """The groups this node coordinates: the protocol's calls and its clock. Event loop only."""

    def __init__(
        self,
        records: GroupRecords | None = None,
        initial_delay_ms: int = INITIAL_DELAY_MS_DEFAULT,
        held: HeldMap | None = None,
    ) -> None:
        if initial_delay_ms < 0:
            raise ValueError(f"initial rebalance delay {initial_delay_ms} ms: must be >= 0")
        super().__init__(records, held)
        self.initial_delay_ms = initial_delay_ms

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
        collect_joins(group, now_ms, self.initial_delay_ms, self._write)
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
        collect_joins(group, now_ms, self.initial_delay_ms, self._write)
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
            answer_join(group, member, replaced=old.member_id)
            return
        group.members = {
            (old.member_id if m is member else m.member_id): (old if m is member else m)
            for m in group.members.values()
        }
        if group.leader == member.member_id:
            group.leader = old.member_id
        fail(member, refusal)

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
            prepare(group, now_ms, self.initial_delay_ms)
            maybe_complete(group, now_ms, self.initial_delay_ms, self._write)

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
            rebalance_after_loss(group, now_ms, self.initial_delay_ms, self._write)
        return answers

    # -- offsets (``offsets.py``) ----------------------------------------------------------------------

    def check_commit(
        self, name: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> None:
        """Fence an OffsetCommit (``offsets.check_commit``), against the group as this coordinator runs
        it or, not loaded yet, as the table holds it."""
        offsets.check_commit(self._records, name, self.view(name), member_id, generation, instance_id)

    def check_txn_commit(
        self, name: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> None:
        """Fence a TxnOffsetCommit (``offsets.check_txn_commit``, KIP-447)."""
        offsets.check_txn_commit(name, self.view(name), member_id, generation, instance_id)

    def subscribed_topics(self, name: str) -> frozenset[str] | None:
        """What OffsetDelete may not touch (``offsets.subscribed_topics``) of a group with members here."""
        return offsets.subscribed_topics(name, self.groups.get(name))

    # -- time ----------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Load the groups this node took over and drop those it no longer coordinates (at most every
        ``held.ADOPT_INTERVAL_MS``), expire members whose session ran out (not those waiting in a join) and
        finish rebalances whose time is up."""
        self._adopt_due(now_ms)
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
                rebalance_after_loss(group, now_ms, self.initial_delay_ms, self._write)
            maybe_complete(group, now_ms, self.initial_delay_ms, self._write, ticked=True)
