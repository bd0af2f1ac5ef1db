"""A classic group's rebalance as Kafka's coordinator runs it, on a ``ClassicGroup`` and an explicit clock:
a rebalance begun (``prepare``: PreparingRebalance, waiting syncs refused), its join phase ended once every
member rejoined or its time is up (``maybe_complete``: a new generation, the protocol most members prefer,
a leader, every member answered its join; a first rebalance waits out its initial delay), a group that
lost members rebalancing or emptying (``rebalance_after_loss``), and a join answered (``answer_join``).
``ClassicGroups`` (``coordinator.py``) calls these with its initial rebalance delay and how it writes a
group's metadata to the table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from partitions.groups.classic.members import (
    ClassicGroup,
    ClassicGroupMember,
    GroupCode,
    GroupRefusal,
    GroupState,
    InitialDelay,
    Joined,
)

Write = Callable[[ClassicGroup], None]  # writes the group's metadata to the table (``HeldGroups._write``)


def prepare(group: ClassicGroup, now_ms: int, initial_delay_ms: int) -> None:
    """The group collects joins (PreparingRebalance) until the longest rebalance timeout of its members;
    from Empty, its first rebalance waits ``initial_delay_ms`` for more (``InitialDelay``). A sync waiting
    on the old generation is answered REBALANCE_IN_PROGRESS."""
    longest = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
    group.initial = None
    if group.state is GroupState.EMPTY:
        delay = initial_delay_ms
        group.initial = InitialDelay(now_ms + delay, max(longest - delay, 0))
    group.state = GroupState.PREPARING_REBALANCE
    group.rebalance_deadline_ms = now_ms + longest
    for member in group.members.values():  # a sync waiting on the old generation will not complete
        if member.syncing is not None and not member.syncing.done():
            member.syncing.set_exception(GroupRefusal(GroupCode.rebalance_in_progress))
        member.syncing = None


def collect_joins(group: ClassicGroup, now_ms: int, initial_delay_ms: int, write: Write) -> None:
    """A member joined: the group collects joins (``prepare``) unless it is already, and ends the join
    phase if it can (``maybe_complete``)."""
    if group.state is not GroupState.PREPARING_REBALANCE:
        prepare(group, now_ms, initial_delay_ms)
    maybe_complete(group, now_ms, initial_delay_ms, write)


def maybe_complete(
    group: ClassicGroup, now_ms: int, initial_delay_ms: int, write: Write, ticked: bool = False
) -> None:
    """End the join phase if every member joined or the rebalance timed out; a first rebalance
    ends only on a tick (``ticked``), once its initial delay passed with no new member. A group left
    without members is written and empties."""
    if group.state is not GroupState.PREPARING_REBALANCE:
        return
    waiting = [m for m in group.members.values() if m.joining is not None and not m.joining.done()]
    if group.initial is not None:
        if not ticked or not _initial_delay_over(group.initial, group, now_ms, initial_delay_ms):
            return
    elif len(waiting) < len(group.members) and now_ms < group.rebalance_deadline_ms:
        return
    for member in [m for m in group.members.values() if m not in waiting]:
        del group.members[member.member_id]  # did not rejoin in time
    group.generation += 1
    if not group.members:
        group.protocol = None
        write(group)
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
        answer_join(group, member)


def _initial_delay_over(initial: InitialDelay, group: ClassicGroup, now_ms: int, delay: int) -> bool:
    """Kafka's rule: when the delay is due and new members joined during it, wait
    ``min(delay, remaining)`` more, while the rebalance timeout lasts; else the first rebalance
    ends now."""
    if now_ms < initial.due_ms:
        return False
    if initial.new_member_added and initial.remaining_ms > 0:
        group.initial = InitialDelay(
            now_ms + min(delay, initial.remaining_ms), max(initial.remaining_ms - delay, 0)
        )
        return False
    group.initial = None
    return True


def rebalance_after_loss(group: ClassicGroup, now_ms: int, initial_delay_ms: int, write: Write) -> None:
    """Members left or their sessions expired: a group with members left rebalances, one without empties
    at a new generation; either is written."""
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        if group.members:
            prepare(group, now_ms, initial_delay_ms)
        else:
            group.state, group.leader, group.protocol = GroupState.EMPTY, None, None
            group.generation += 1
            write(group)
    if group.state is GroupState.PREPARING_REBALANCE and group.members and group.generation > 0:
        # Who is left, and that a rebalance is under way, outlive this coordinator: Kafka writes
        # neither, so a coordinator taking over there runs the old generation with the member that
        # left, and the others wait out its session before they rebalance.
        write(group)
    maybe_complete(group, now_ms, initial_delay_ms, write)


def _vote(members: list[ClassicGroupMember]) -> str:
    return vote([m.protocols for m in members])


def vote(preferences: Sequence[Sequence[tuple[str, bytes]]]) -> str:
    """The protocol every member supports that most members prefer (ties: the first member's order), of
    each member's protocols (name, metadata) in its order of preference."""
    common = set.intersection(*({p for p, _ in protocols} for protocols in preferences))
    votes = {name: 0 for name in common}
    for protocols in preferences:
        votes[next(p for p, _ in protocols if p in common)] += 1
    first = [p for p, _ in preferences[0] if p in common]
    return max(first, key=lambda p: (votes[p], -first.index(p)))


def answer_join(group: ClassicGroup, member: ClassicGroupMember, replaced: str = "") -> None:
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
