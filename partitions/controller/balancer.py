"""Which partition leaderships to move so leaders spread evenly (pure: no I/O, no clock).

After restarts Raft leaves leadership wherever elections happened to end, often piling it on the nodes
that stayed up. The controller leader periodically asks :func:`plan` for a few transfers and performs
them one at a time. Nodes in maintenance must lead nothing: their partitions are moved first, and they
never receive leadership.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Led:
    """One partition as the balancer sees it."""

    topic: str
    partition: int
    replicas: tuple[str, ...]
    leader: str | None  # None: no leader known; the balancer leaves it alone


@dataclass(frozen=True, slots=True)
class Move:
    topic: str
    partition: int
    source: str
    target: str


def plan(partitions: Sequence[Led], eligible: Collection[str], moves_max: int) -> list[Move]:
    """Up to ``moves_max`` leadership transfers, drains first.

    Drain: a partition led by a node outside ``eligible`` (in maintenance, or not alive) moves to its
    eligible replica leading the fewest partitions. Balance: while some eligible node leads at least two
    more partitions than another eligible node that holds a replica of one of them, one such partition
    moves from the busiest node to the idlest replica. Deterministic; ties break by node id, then topic
    and partition. Each transfer lowers the spread, so the plan ends."""
    allowed = set(eligible)
    counts: Counter[str] = Counter({node: 0 for node in allowed})
    leaders: dict[tuple[str, int], str] = {}
    for item in partitions:
        if item.leader is not None:
            leaders[(item.topic, item.partition)] = item.leader
            counts[item.leader] += 1
    by_key = {(item.topic, item.partition): item for item in partitions}
    moves: list[Move] = []

    def transfer(key: tuple[str, int], target: str) -> None:
        source = leaders[key]
        moves.append(Move(key[0], key[1], source, target))
        counts[source] -= 1
        counts[target] += 1
        leaders[key] = target

    for key in sorted(k for k, leader in leaders.items() if leader not in allowed):
        if len(moves) >= moves_max:
            return moves
        candidates = [n for n in by_key[key].replicas if n in allowed]
        if candidates:
            transfer(key, min(candidates, key=lambda n: (counts[n], n)))
    while len(moves) < moves_max:
        best: tuple[int, str, tuple[str, int], str] | None = None
        for key in sorted(leaders):
            source = leaders[key]
            if source not in allowed:
                continue
            for target in by_key[key].replicas:
                if target == source or target not in allowed:
                    continue
                gap = counts[source] - counts[target]
                if gap >= 2 and (best is None or gap > best[0]):
                    best = (gap, source, key, target)
        if best is None:
            return moves
        transfer(best[2], best[3])
    return moves
