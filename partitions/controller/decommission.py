"""What keeps a decommission from moving a node's replicas, and why (pure: no I/O, no clock).

A decommission moves each replica of the leaving node to a live node that is not being decommissioned
and holds no replica of that partition yet (``reconfigure.replacement_for``, started by the controller
leader's ``Operator``). :func:`blockers` names every partition of the node that cannot move now:

- ``no_target``: no such node exists (with replication factor 3 on a 3-node cluster, every other node
  already holds a replica). A decommission is refused up front while any partition is in this state:
  it could never finish.
- ``target_down``: a move off the node is under way, but a node it is moving to is not alive.
- ``no_quorum``: fewer than a majority of the partition's replicas are alive: no membership change can
  commit.
- ``waiting``: another move of the partition keeps a replica on the node; it moves once that one ends.

The decommission progress (``GET /v1/nodes/{id}/decommission``, ``raftlog node status``) lists them, so
a decommission that cannot go on says why instead of waiting in silence.

:func:`finished` is the one rule of when a decommission is done: its node is flagged and holds no replica
any more. The progress says "done" by it, ``/v1/nodes`` says "decommissioned" by it, and the cluster's
health counts such a node neither as decommissioning nor, once stopped, as down.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from partitions.controller.state import Reassignment

REFUSAL_PARTITIONS_NAMED_MAX = 10  # partitions named in a refusal's message (the body lists them all)


@dataclass(frozen=True, slots=True)
class Blocked:
    topic: str
    partition: int
    kind: str  # "no_target" | "target_down" | "no_quorum" | "waiting"
    reason: str


def blockers(
    node: str,
    assignments: Mapping[str, Sequence[Sequence[str]]],
    moves: Mapping[tuple[str, int], Reassignment],
    alive: Collection[str],
    leaving: Collection[str],
) -> list[Blocked]:
    """Every partition with a replica on ``node`` that a decommission of it cannot move now, in topic and
    partition order. ``assignments``: topic -> replica set per partition; ``moves``: the moves recorded
    in the controller; ``alive``: the nodes gossip reports alive; ``leaving``: the nodes being
    decommissioned (``node`` counts as leaving whether or not it is listed)."""
    found = []
    for topic in sorted(assignments):
        for partition, replicas in enumerate(assignments[topic]):
            if node not in replicas:
                continue
            blocked = _blocked(node, list(replicas), moves.get((topic, partition)), alive, leaving)
            if blocked is not None:
                found.append(Blocked(topic, partition, *blocked))
    return found


def _blocked(
    node: str,
    replicas: list[str],
    move: Reassignment | None,
    alive: Collection[str],
    leaving: Collection[str],
) -> tuple[str, str] | None:
    live = [n for n in replicas if n in alive]
    quorum = len(replicas) // 2 + 1
    if move is not None and node in move.target:
        return "waiting", f"a move to {list(move.target)} keeps a replica on {node}; it moves once that ends"
    if move is not None:
        down = [n for n in move.target if n not in replicas and n not in alive]
        if down:
            return (
                "target_down",
                f"moving to {','.join(move.target)}, but {_names(down)} {_is(down)} not alive",
            )
    else:
        targets = [n for n in alive if n != node and n not in leaving and n not in replicas]
        if not targets:
            return "no_target", _no_target(node, replicas, alive, leaving)
    if len(live) < quorum:
        return "no_quorum", (
            f"only {len(live)} of its replicas {replicas} {_is(live)} alive: no membership change can commit"
        )
    return None


def _no_target(node: str, replicas: Sequence[str], alive: Collection[str], leaving: Collection[str]) -> str:
    holders = sorted(n for n in replicas if n != node and n in alive and n not in leaving)
    others_leaving = sorted(n for n in leaving if n != node and n in alive and n not in replicas)
    reason = "no node to go to: "
    if holders:
        reason += f"every other live node ({_names(holders)}) already holds a replica of it"
    else:
        reason += "no other node is alive"
    if others_leaving:
        reason += f"; {_names(others_leaving)} {_is(others_leaving)} being decommissioned"
    return reason


def refusal(node: str, found: Sequence[Blocked], alive: Collection[str], leaving: Collection[str]) -> str:
    """Why a decommission of ``node`` is refused: the partitions with no node to go to."""
    named = ", ".join(f"{b.topic}/{b.partition}" for b in found[:REFUSAL_PARTITIONS_NAMED_MAX])
    if len(found) > REFUSAL_PARTITIONS_NAMED_MAX:
        named += f" and {len(found) - REFUSAL_PARTITIONS_NAMED_MAX} more"
    if any(n != node and n not in leaving for n in alive):
        why = (
            "each of their partitions already has a replica on every other live node that is not being "
            "decommissioned; add a node or lower the replication factor"
        )
    else:
        why = "no other node is alive and not being decommissioned; add a node or bring one back"
    return f"cannot decommission {node}: {len(found)} replica(s) have no node to go to ({named}): {why}"


def _names(nodes: Sequence[str]) -> str:
    return ", ".join(nodes)


def _is(nodes: Sequence[str]) -> str:
    return "is" if len(nodes) == 1 else "are"


def finished(node: str, leaving: Collection[str], assignments: Mapping[str, Sequence[Sequence[str]]]) -> bool:
    """Whether ``node``'s decommission is finished: it is being decommissioned (in ``leaving``) and no
    partition of ``assignments`` (topic -> replica set per partition) has a replica on it."""
    if node not in leaving:
        return False
    return not any(node in replicas for assignment in assignments.values() for replicas in assignment)


def moves_off(node_id: str, moves: Mapping[tuple[str, int], Reassignment]) -> list[tuple[str, int]]:
    """The moves taking a replica off ``node_id`` that are not cancelled yet: what recommissioning it
    turns around, in (topic, partition) order."""
    return [
        key
        for key, move in sorted(moves.items())
        if node_id in move.original and node_id not in move.target and not move.cancelled
    ]
