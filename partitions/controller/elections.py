"""Kafka's leader elections (``ElectLeaders``, ``kafka-leader-election``) over Raft groups (pure: no I/O).

- Preferred: the first replica of a partition's list is its preferred leader (placement puts it first,
  a move's target order names it). When another replica leads and the preferred one is alive, leadership
  is transferred to it (a Raft leadership transfer: the leader brings it up to date, then it stands for
  election at once). Already leading: nothing to do (Kafka's ``ELECTION_NOT_NEEDED``); not alive:
  ``PREFERRED_LEADER_NOT_AVAILABLE``, as Kafka answers for a preferred replica out of its ISR.
- Unclean: Kafka may make an out-of-sync replica leader and lose what only the others had. A Raft group
  never does: a leader is elected by a majority of its voters, and only one holding every committed
  entry. A partition that has a leader is answered ``ELECTION_NOT_NEEDED`` (as Kafka answers a partition
  with a leader); one without a leader has no live majority (or is electing one now) and nothing can be
  done without losing acknowledged writes: ``ELIGIBLE_LEADERS_NOT_AVAILABLE``, Kafka's answer when no
  replica may take over. It gets a leader by itself once a majority of its replicas is back.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum


class ElectionType(Enum):
    PREFERRED = 0
    UNCLEAN = 1


class Outcome(Enum):
    TRANSFER = "transfer"  # move leadership to ``Decision.target``
    NOT_NEEDED = "not needed"
    PREFERRED_NOT_AVAILABLE = "preferred leader not available"
    NO_ELIGIBLE_LEADER = "no eligible leader"


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: Outcome
    target: str | None = None
    reason: str = ""


def unfit_to_lead(node_id: str, doors_missing: Sequence[str]) -> str | None:
    """Why a node lacking ``doors_missing`` (doors the other nodes serve, ``Routing.doors_missing``) may
    not lead a partition; None when it lacks none."""
    if not doors_missing:
        return None
    return (
        f"node {node_id} has no {' or '.join(doors_missing)} listener while other nodes serve one, so "
        "those clients could not reach it as a leader: start it with --kafka"
    )


def decide(
    election: ElectionType,
    replicas: Sequence[str],
    leader: str | None,
    alive: Collection[str],
    unfit: Mapping[str, str] | None = None,
) -> Decision:
    """What an election of ``election`` type does for a partition of ``replicas`` (the preferred leader
    first) led by ``leader`` (None: no leader known), ``alive``: the nodes gossip reports alive,
    ``unfit``: nodes that may not lead, and why (``Routing.may_lead``)."""
    if election is ElectionType.UNCLEAN:
        if leader is not None:
            return Decision(Outcome.NOT_NEEDED)
        return Decision(
            Outcome.NO_ELIGIBLE_LEADER,
            reason=(
                "no leader: a majority of the partition's replicas is out of reach, and a Raft group elects "
                "only with a majority (an unclean election would lose acknowledged writes)"
            ),
        )
    if not replicas:
        return Decision(Outcome.PREFERRED_NOT_AVAILABLE, reason="the partition has no replicas")
    preferred = replicas[0]
    if leader == preferred:
        return Decision(Outcome.NOT_NEEDED)
    if preferred not in alive:
        return Decision(
            Outcome.PREFERRED_NOT_AVAILABLE, reason=f"the preferred leader {preferred} is not alive"
        )
    why = (unfit or {}).get(preferred)
    if why is not None:
        return Decision(Outcome.PREFERRED_NOT_AVAILABLE, reason=f"the preferred leader may not lead: {why}")
    if leader is None:
        return Decision(
            Outcome.PREFERRED_NOT_AVAILABLE,
            reason="the partition has no leader now: it is electing one, or a majority is out of reach",
        )
    return Decision(Outcome.TRANSFER, preferred)
