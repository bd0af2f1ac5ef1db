"""Which partition leaderships to move so leaders spread evenly (pure: no I/O, no clock).

After restarts Raft leaves leadership wherever elections happened to end, often piling it on the nodes
that stayed up. The controller leader periodically asks :func:`plan` for a few transfers and performs
them one at a time. Nodes in maintenance must lead nothing: their partitions are moved first, and they
never receive leadership.

Evening out waits for a lasting imbalance (:class:`Hysteresis`, given the time by its caller): a
transfer is an election, so chasing every passing skew (an election on a loaded machine, a node back for
a moment) would move leaders every few seconds. The same imbalance must be seen ``observations`` times
in a row, a partition whose leader changed within ``settle_s`` is not moved, and at most
``moves_per_window`` transfers are made in any ``window_s``. Drains are not held back.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field


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


def plan(
    partitions: Sequence[Led],
    eligible: Collection[str],
    moves_max: int,
    settling: Collection[tuple[str, int]] = (),
    gap_min: int = 2,
) -> list[Move]:
    """Up to ``moves_max`` leadership transfers, drains first.

    Drain: a partition led by a node outside ``eligible`` (in maintenance, or not alive) moves to its
    eligible replica leading the fewest partitions. Balance: while some eligible node leads at least
    ``gap_min`` (at least 2) more partitions than another eligible node that holds a replica of one of
    them, one such partition
    moves from the busiest node to the idlest replica; a partition in ``settling`` (topic, partition:
    its leader just changed) counts where it is led but is not moved to even out. Deterministic; ties
    break by node id, then topic and partition. Each transfer lowers the spread, so the plan ends."""
    held = set(settling)
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
            if source not in allowed or key in held:
                continue
            for target in by_key[key].replicas:
                if target == source or target not in allowed:
                    continue
                gap = counts[source] - counts[target]
                if gap >= max(2, gap_min) and (best is None or gap > best[0]):
                    best = (gap, source, key, target)
        if best is None:
            return moves
        transfer(best[2], best[3])
    return moves


def gap_min_for(partitions: Sequence[Led], eligible: Collection[str], share: float = 0.1) -> int:
    """The smallest gap worth evening out: 2, or ``share`` of an eligible node's fair share of the
    leaderships if that is more (Kafka's ``leader.imbalance.per.broker.percentage``, 10%)."""
    led = sum(1 for item in partitions if item.leader is not None)
    return max(2, math.ceil(share * led / max(1, len(eligible))))


def is_drain(move: Move, eligible: Collection[str]) -> bool:
    """The move takes leadership off a node that must not lead (see :func:`plan`)."""
    return move.source not in eligible


@dataclass
class Hysteresis:
    """When the balancer evens leaders out (see the module docstring). The caller observes the
    partitions at each balancing round with the time (:meth:`observe`), plans with the partitions still
    :meth:`settling`, and asks :meth:`allows` before a transfer that evens out (never before a drain)."""

    observations: int = 3
    settle_s: float = 10.0
    window_s: float = 60.0
    moves_per_window: int = 10
    # (topic, partition) -> (its leader, when this leader was first seen)
    _leaders: dict[tuple[str, int], tuple[str | None, float]] = field(default_factory=dict, init=False)
    _streak: int = field(default=0, init=False)
    _moves: deque[float] = field(default_factory=deque, init=False)

    def observe(self, partitions: Sequence[Led], now: float) -> None:
        """Record each partition's leader; a new one (or none) starts its settling time."""
        seen: dict[tuple[str, int], tuple[str | None, float]] = {}
        for item in partitions:
            key = (item.topic, item.partition)
            previous = self._leaders.get(key)
            seen[key] = (
                previous if previous is not None and previous[0] == item.leader else (item.leader, now)
            )
        self._leaders = seen  # (partitions gone are forgotten)

    def settling(self, now: float) -> set[tuple[str, int]]:
        """Partitions whose leader changed within ``settle_s`` (or that have none)."""
        return {
            key
            for key, (leader, since) in self._leaders.items()
            if leader is None or now - since < self.settle_s
        }

    def allows(self, wanted: bool, now: float) -> bool:
        """Called once per round with whether the plan wanted to even out: True when it has wanted to in
        the last ``observations`` rounds in a row and fewer than ``moves_per_window`` transfers were made
        within ``window_s``; a True is taken as a transfer made now."""
        if not wanted:
            self._streak = 0
            return False
        self._streak += 1
        while self._moves and now - self._moves[0] >= self.window_s:
            self._moves.popleft()
        if self._streak < self.observations or len(self._moves) >= self.moves_per_window:
            return False
        self._moves.append(now)  # (the imbalance has lasted: while it stays, one transfer a round)
        return True
