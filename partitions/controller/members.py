"""Who holds the controller group: its voters and learners, and the rules for changing them (pure: no I/O,
no clock).

The controller group starts with the first five nodes of the static peer list as voters. An operator
adds a node (``POST /v1/controller/voters``) or removes one (``DELETE /v1/controller/voters/{node}``)
one Raft membership change at a time, as a partition's replicas move:

1. adding N: the controller leader commits "learner N" (N receives the controller's log, counts in no
   quorum), then asks N to open its controller replica (``peer.join_controller``, repeated by the
   leader's ``Operator`` until N answers); once N's match index reaches the commit index the leader had
   when it first saw N a learner, the operator commits "promote N" (:func:`learner_to_promote`). A
   leader change meanwhile only repeats a step: the learner in the group's configuration is the record
   of the add.
2. removing N: a leader that is N hands leadership to the most caught-up other voter first; the new
   leader commits "rem N". N, no longer sent anything, sees no leader, asks the others who the
   controller's members are, finds itself outside, closes its replica and follows the controller's
   metadata from then on, as a node started with ``--join`` does (``MetadataFrontend``). Removing a
   learner cancels its add.

Refused, nothing changed (``ControllerChangeRefused``, 409): a change while another is in progress (a
learner joining, or a membership entry not yet applied), adding a member again or a node gossip does not
report alive or that is being decommissioned, removing a node that is not a member, the last voter, or
a voter whose removal leaves the remaining voters without a live majority (the removal itself could not
commit, nor anything after it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ControllerMembers:
    """The controller group as its leader sees it (``GET /v1/controller``)."""

    leader: str
    term: int
    voters: tuple[str, ...]
    learners: tuple[str, ...]
    commit_index: int
    match_index: Mapping[str, int] = field(default_factory=dict)  # per other member
    pending: str | None = None  # why no change may start now (a membership entry not yet applied)
    # Per member, the leader itself included, in wall-clock ms (Kafka's DescribeQuorum LastFetchTimestamp
    # and LastCaughtUpTimestamp): when the leader last heard from it, when it last held the leader's whole
    # log; a member not heard from since this leader leads is absent. Pairs (node, ms) sorted by node, so
    # that an empty one is the default and is not sent: a node of release 0.1.0 lacks these fields, and
    # the leader fills them only once the cluster's level allows it (``features.CONTROLLER_MEMBER_TIMES``).
    heard_at_ms: tuple[tuple[str, int], ...] = ()
    caught_up_at_ms: tuple[tuple[str, int], ...] = ()


def add_refusal(
    members: ControllerMembers, node: str, alive: Collection[str], decommissioning: Collection[str]
) -> str | None:
    """Why ``node`` may not join the controller group now (None: it may)."""
    if node in members.voters:
        return f"{node} is already a controller voter"
    if node in members.learners:
        return f"{node} is already joining the controller group"
    busy = _busy(members)
    if busy is not None:
        return busy
    if node not in alive:
        return f"{node} is not alive: a new controller voter needs a live node"
    if node in decommissioning:
        return f"{node} is being decommissioned"
    return None


def remove_refusal(members: ControllerMembers, node: str, alive: Collection[str]) -> str | None:
    """Why ``node`` may not leave the controller group now (None: it may; a leader hands over first)."""
    if node not in members.voters and node not in members.learners:
        return f"{node} is not a member of the controller group (voters {list(members.voters)})"
    if node in members.learners:
        return members.pending  # removing the learner cancels its add
    busy = _busy(members)
    if busy is not None:
        return busy
    remaining = [voter for voter in members.voters if voter != node]
    if not remaining:
        return f"{node} is the controller's last voter"
    live = [voter for voter in remaining if voter in alive]
    if len(live) * 2 <= len(remaining):
        return (
            f"without {node} the controller's voters {remaining} would have {len(live)} alive "
            f"({live}): no majority, so neither the removal nor any later change could commit"
        )
    return None


def _busy(members: ControllerMembers) -> str | None:
    if members.learners:
        return (
            f"{members.learners[0]} is joining the controller group: one change at a time (remove it to "
            "cancel)"
        )
    return members.pending


def learner_to_promote(members: ControllerMembers, goal: int | None) -> str | None:
    """The learner joining the controller group, once its match index reached ``goal``, the commit index
    when it was first seen (None: now, ``members.commit_index``); None while nobody joins or it catches up."""
    if not members.learners:
        return None
    node = members.learners[0]
    target = members.commit_index if goal is None else goal
    return node if members.match_index.get(node, 0) >= target else None


def best_successor(members: ControllerMembers, leaving: str, alive: Collection[str]) -> str | None:
    """The voter to hand the controller's leadership to before ``leaving`` (its leader) goes: the most
    caught-up live voter that stays (ties by node id); None when there is none."""
    staying = [v for v in members.voters if v != leaving and v in alive]
    if not staying:
        return None
    return max(staying, key=lambda v: (members.match_index.get(v, 0), v))
