"""Moving a partition's replicas, one Raft membership change at a time (pure: no I/O, no clock).

A move is recorded in the controller (``controller.Reassignment``: original, target, the node joining
now). The controller leader drives it by looking at the partition leader's Raft view (``MemberView``) and
at the joining nodes' own accounts of their partition logs (``ReplicaLog``), and asking :func:`next_step`
what to do next. Every step is idempotent and is chosen again from fresh state after any failure, so a
crash or a leader change between steps only repeats a step:

1. ``Record(adding=X)``: the controller names X, the first target node not yet a voter; X opens its
   replica as a learner (voters: the recorded replicas; learner: itself).
2. ``Change("learner", X)``: the partition leader commits the Raft membership change that makes X a
   learner: it receives the log but counts in no quorum, so the group commits as before however slow X
   is (a 3-voter group still needs 2, with or without X).
3. wait until X's match index reaches the commit index the leader had when X was first seen a learner
   (``catch_up_goal``) and X itself says that it applied up to that index and that its partition log holds
   every record below its high watermark (``ReplicaLog.complete``), then ``Change("promote", X)``: the
   leader commits the change that makes X a voter. The match index alone is not enough: a learner that
   installed the leader's snapshot (the leader compacted its journal, always under a replication
   throttle) holds the entries' metadata only, and copies the records from its peers' logs afterwards
   (``partitions.replicas.recovery``), for as long as that takes.
4. ``Record(replicas + X)``: the controller counts X as a replica, now that it is a voter.
5. for a voter Y outside the target, once every voter that joined in this move says its log is complete:
   ``Change("transfer", Z)`` of leadership to a staying voter first if Y leads, then
   ``Change("remove", Y)``, then ``Record(replicas - Y)``: Y sees it no longer holds the partition and
   deletes its replica.
   Joins and removals alternate, so a group never has more than one voter beyond the larger of its
   original and target sizes (a 3-node group replaced entirely peaks at 4 voters, not 6).
6. ``Record(target)`` with nobody joining ends the move, once every voter that joined says its log is
   complete: until then the move is in progress (``kafka-reassign-partitions --verify`` says so, and
   ``--cancel`` finds it), as Kafka keeps a reassignment in progress until its new replicas are in sync.

A learner the move no longer wants (cancelled while it caught up) is removed again, without waiting.

Cancelling sets the target back to the original set; the same steps then walk back (nothing waits for a
log then: the nodes that joined leave, and the original replicas never stopped holding theirs).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from partitions.controller.commands import check_replica_set
from partitions.controller.state import Reassignment
from partitions.errors import InvalidReassignment, UnknownNode


@dataclass(frozen=True, slots=True)
class MemberView:
    """The partition leader's Raft view of its group."""

    leader: str
    voters: frozenset[str]  # the leader included
    commit_index: int
    match_index: Mapping[str, int]  # per other member (voters and learners)
    learners: frozenset[str] = frozenset()  # (a default: a node of an older version sends none)


@dataclass(frozen=True, slots=True)
class ReplicaLog:
    """A replica's own account of its partition log (``PeerService.replica_log``, asked of each node that
    joins in a move), read between two applies: the Raft index its state machine applied through (a
    snapshot it installed included), its log's end offset, and the high watermark that index reaches.
    The leader knows which Raft entries a member holds (its match index), not whether the member's log
    holds their records: one that installed a snapshot holds the metadata only until its recovery copied
    the records from its peers."""

    applied_index: int
    end_offset: int
    high_watermark: int

    @property
    def complete(self) -> bool:
        """The log holds every record of the entries applied (none is still to be copied from a peer)."""
        return self.end_offset >= self.high_watermark


@dataclass(frozen=True, slots=True)
class Record:
    """Propose ``StepMove(replicas, adding)`` to the controller."""

    replicas: tuple[str, ...]
    adding: str | None


@dataclass(frozen=True, slots=True)
class Change:
    """One Raft membership change the partition leader commits, ``kind`` as
    ``PeerService.change_membership`` names it: "learner" (make ``node`` a learner: it receives the log and
    counts in no quorum), "promote" (the learner ``node``, caught up, becomes a voter), "remove" (``node``
    leaves the group) or "transfer" (leadership moves to ``node``, a voter that stays, before the current
    leader is removed)."""

    kind: Literal["learner", "promote", "remove", "transfer"]
    node: str


@dataclass(frozen=True, slots=True)
class Wait:
    reason: str


Step = Record | Change | Wait


@dataclass(frozen=True, slots=True)
class MoveProgress:
    """A move as reported by ``GET /v1/partitions/{topic}/{partition}``."""

    original: list[str]
    target: list[str]
    replicas: list[str]  # the voters the controller counts now
    adding: str | None
    cancelled: bool

    @classmethod
    def of(cls, move: Reassignment, replicas: tuple[str, ...]) -> MoveProgress:
        return cls(list(move.original), list(move.target), list(replicas), move.adding, move.cancelled)


def joined(move: Reassignment, view: MemberView) -> list[str]:
    """The group's members that joined in this move and stay: the target's learners (an original replica
    that a cancelled move brings back is one too: it deleted its replica when it was removed) and its
    voters outside the original set. :func:`next_step` needs each one's own ``ReplicaLog``."""
    return sorted(
        n for n in set(move.target) if n in view.learners or (n in view.voters and n not in move.original)
    )


def next_step(
    move: Reassignment,
    recorded: Sequence[str],
    view: MemberView,
    catch_up_goal: int | None,
    logs: Mapping[str, ReplicaLog] | None = None,
) -> Step:
    """The next thing to do for ``move`` given the controller's recorded replicas and the leader's view.

    ``catch_up_goal``: the commit index when the learner joining now was first seen (None: not seen
    before; the caller remembers ``view.commit_index`` as its goal). ``logs``: the accounts the members
    :func:`joined` gave of their logs just now, by node; one missing (not asked, no answer) is a log not
    known to be complete, so nothing that needs it happens."""
    logs = logs or {}
    step = _step(move, recorded, view, catch_up_goal, logs)
    ends = isinstance(step, Record) and step.adding is None and set(step.replicas) == set(move.target)
    if ends:  # whichever record ends it: every joiner holds its whole log first
        return _joined_complete(move, view, logs) or step
    return step


def _step(
    move: Reassignment,
    recorded: Sequence[str],
    view: MemberView,
    catch_up_goal: int | None,
    logs: Mapping[str, ReplicaLog],
) -> Step:
    voters = view.voters
    recorded_set = set(recorded)
    target = set(move.target)
    for node in sorted(view.learners):
        if node not in target:
            return Change("remove", node)  # joining, then the move was cancelled: take it out again
    for node in sorted(view.learners):
        goal = view.commit_index if catch_up_goal is None else catch_up_goal
        match = view.match_index.get(node, 0)
        if match < goal:
            return Wait(f"{node} is catching up as a learner: match index {match} of {goal}")
        own = logs.get(node)
        if own is not None and own.applied_index < goal:
            return Wait(f"{node} is catching up as a learner: applied index {own.applied_index} of {goal}")
        incomplete = _incomplete(node, logs)
        if incomplete is not None:
            return incomplete
        return Change("promote", node)
    unrecorded = sorted(voters - recorded_set)
    for node in unrecorded:
        if node not in target:
            return _remove(node, move, view)  # promoted, then the move was cancelled: take it out again
    if unrecorded:
        return Record(_ordered(voters, move.target), None)  # a voter now, caught up: count it
    if recorded_set - voters:
        return Record(_ordered(voters, move.target), move.adding)  # a removal committed, not yet recorded
    if move.adding is not None and move.adding not in target:
        return Record(tuple(recorded), None)  # cancelled before it joined: it closes its replica
    joining = [n for n in move.target if n not in voters]
    leaving = sorted(voters - target, key=lambda n: (n == view.leader, n))
    # Alternate: once a joined node is counted, a leaving one goes before the next joins, so the group
    # never holds more than one voter beyond the larger of its original and target sizes.
    if leaving and (not joining or len(voters) > len(target)):
        return _joined_complete(move, view, logs) or _remove(leaving[0], move, view)
    if joining:
        node = joining[0]
        if move.adding != node:
            return Record(tuple(recorded), node)
        return Change("learner", node)
    if move.adding is not None:
        return Record(tuple(recorded), None)
    return Record(move.target, None)


def _incomplete(node: str, logs: Mapping[str, ReplicaLog]) -> Wait | None:
    own = logs.get(node)
    if own is None:
        return Wait(f"{node} has not said whether its partition log holds every record it applied")
    if not own.complete:
        return Wait(
            f"{node} is copying its partition log from its peers: offset {own.end_offset} "
            f"of {own.high_watermark}"
        )
    return None


def _joined_complete(move: Reassignment, view: MemberView, logs: Mapping[str, ReplicaLog]) -> Wait | None:
    """Before an old voter goes and before the move ends: every member that joined holds its whole log
    (a Wait naming the first that does not say so), so the partition never holds fewer full copies than
    its replica list says."""
    for node in joined(move, view):
        incomplete = _incomplete(node, logs)
        if incomplete is not None:
            return incomplete
    return None


def _remove(node: str, move: Reassignment, view: MemberView) -> Step:
    if node != view.leader:
        return Change("remove", node)
    staying = [n for n in view.voters if n in move.target and n != node]
    if not staying:
        return Wait(f"no voter of the target {list(move.target)} can take over from {node}")
    best = max(staying, key=lambda n: (view.match_index.get(n, 0), n == move.target[0], n))
    return Change("transfer", best)


def _ordered(voters: Collection[str], target: Sequence[str]) -> tuple[str, ...]:
    """Voters in target order first (the first is the preferred leader), the others after, sorted."""
    first = [n for n in target if n in voters]
    return tuple(first + sorted(n for n in voters if n not in target))


def validate_move(
    current: Sequence[str],
    target: object,
    known: Collection[str],
    alive: Collection[str],
    decommissioning: Collection[str],
) -> list[str]:
    """The target replica set of a move request, or ``UnknownNode`` / ``InvalidReassignment``.

    Refused: not a list of node ids; empty or repeating a node; a node nobody knows; a new replica on a
    node gossip does not report alive or that is being decommissioned; fewer replicas than a majority of
    the current set (a move may shrink a partition, but never below the quorum it has now); a current
    set without a live majority (no membership change could commit)."""
    if not isinstance(target, list) or not all(isinstance(n, str) and n for n in target):
        raise InvalidReassignment("replicas must be a list of node ids")
    check_replica_set(target)
    if tuple(target) == tuple(current):
        raise InvalidReassignment(f"the partition already has replicas {list(current)}")
    for node in target:
        if node not in known:
            raise UnknownNode(node)
    for node in target:
        if node in current:
            continue
        if node not in alive:
            raise InvalidReassignment(f"node {node} is not alive: a new replica needs a live node")
        if node in decommissioning:
            raise InvalidReassignment(f"node {node} is being decommissioned: it takes no new replicas")
    quorum = len(current) // 2 + 1
    if len(target) < quorum:
        raise InvalidReassignment(
            f"{len(target)} replica(s) is fewer than the quorum ({quorum}) of the current {len(current)}"
        )
    live_voters = sum(1 for n in current if n in alive)
    if live_voters < quorum:
        raise InvalidReassignment(
            f"only {live_voters} of the current replicas {list(current)} are alive: "
            "no membership change can commit"
        )
    return list(target)


def replacement_for(
    leaving: str,
    replicas: Sequence[str],
    candidates: Collection[str],
    load: Mapping[str, int],
) -> list[str] | None:
    """The replica set of a partition once ``leaving`` is swapped for the least loaded candidate that does
    not hold it already (ties by node id), keeping its position; None when no candidate is left."""
    free = sorted(
        (n for n in candidates if n not in replicas and n != leaving), key=lambda n: (load.get(n, 0), n)
    )
    if not free:
        return None
    return [free[0] if n == leaving else n for n in replicas]
