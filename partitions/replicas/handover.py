"""Controlled shutdown (Kafka's ``controlled.shutdown.enable``): a node told to stop first hands the
leadership of every Raft group it leads (the controller's, each partition's) to another voter that may
lead, then closes. Each group then changes leader by a transfer (the target holds the whole log and is
asked to stand at once) instead of its followers waiting out an election timeout (1.5 to 3 s without a
leader), and its clients find the new leader at their next metadata refresh.

The node's gossip LEFT goes out before the pass (``Node.hand_over``), so nodes stopped at the same time (a
whole cluster stopped at once) hand nothing to each other: each sees the others leave and keeps what it
leads. ``target`` chooses (pure); ``hand_over`` runs one pass, bounded in time and in transfers at once,
and never raises for a group it could not hand over: the stop goes on, and that group elects as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from raftlog.consensus.interface import GroupStatus, Role
from raftlog.errors import RaftlogError

log = logging.getLogger("raftlog.node")

TRANSFERS_AT_ONCE = 32  # each is a TimeoutNow and an election on its target: a burst, not a storm
PROGRESS_EVERY_S = 2.0  # a long pass (thousands of groups on a loaded node) says how far it got


class Led(Protocol):
    """What the pass needs of a replica's group (``raftlog.consensus.interface.Led``)."""

    group_id: str

    def status(self) -> GroupStatus: ...

    async def transfer_leadership(self, target_node_id: str | None, timeout_ms: int) -> None: ...


@dataclass(frozen=True, slots=True)
class HandOver:
    """What one pass did: of the ``led`` groups, ``handed`` now have another leader; ``kept`` counts the
    others by why (no other voter may lead; the error a transfer ended with; out of time)."""

    led: int
    handed: int
    kept: Mapping[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def describe(self) -> str:
        why = ", ".join(f"{count} {reason}" for reason, count in sorted(self.kept.items()))
        kept = f" ({why})" if why else ""
        return f"handed over {self.handed} of {self.led} leaderships in {self.seconds:.2f} s{kept}"


NO_TARGET = "kept: no other voter may lead"
OFF = "kept: controlled shutdown off"
OUT_OF_TIME = "kept: out of time"


def target(status: GroupStatus, may_lead: Callable[[str], bool], given: Mapping[str, int]) -> str | None:
    """The voter to hand ``status``'s group to: of the other voters that may lead, one that holds the
    leader's whole log if any does (the transfer waits for no catch-up), then the one given fewest groups
    so far in this pass (the leaderships spread over the others), then the smallest id. None when no other
    voter may lead (all stopping, dead, in maintenance, or none: a group of one)."""
    others = sorted(n for n in status.voters if n != status.node_id and may_lead(n))
    if not others:
        return None
    return min(others, key=lambda n: (status.match_index.get(n, 0) < status.last_index, given.get(n, 0), n))


async def hand_over(
    groups: Sequence[Led],
    may_lead: Callable[[str], bool],
    timeout_s: float,
    node_id: str = "",
    clock: Callable[[], float] = time.monotonic,
) -> HandOver:
    """Hand over the leadership of each of ``groups`` this replica leads, at most ``TRANSFERS_AT_ONCE`` at
    a time, all within ``timeout_s`` (0: none, each kept as ``OFF``); logs its progress every
    ``PROGRESS_EVERY_S``."""
    started = clock()
    deadline = started + timeout_s
    led = [(group, status) for group in groups if (status := group.status()).role is Role.LEADER]
    if timeout_s <= 0:
        return HandOver(len(led), 0, {OFF: len(led)} if led else {})
    given: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    plan: list[tuple[Led, str]] = []
    for group, status in led:
        chosen = target(status, may_lead, given)
        if chosen is None:
            kept[NO_TARGET] += 1
        else:
            given[chosen] += 1
            plan.append((group, chosen))
    handed = 0
    gate = asyncio.Semaphore(TRANSFERS_AT_ONCE)

    async def transfer(group: Led, to: str) -> None:
        nonlocal handed
        async with gate:
            left_ms = int((deadline - clock()) * 1000)
            if left_ms <= 0:
                kept[OUT_OF_TIME] += 1
                return
            try:
                await group.transfer_leadership(to, left_ms)
            except RaftlogError as exc:
                kept[f"kept: {type(exc).__name__}"] += 1
                log.info("node %s: leadership of %s not handed to %s: %s", node_id, group.group_id, to, exc)
            else:
                handed += 1

    if plan:
        log.info(
            "node %s stopping: handing over %d leaderships to %s (at most %.1f s)",
            node_id, len(plan), dict(sorted(given.items())), timeout_s,
        )  # fmt: skip
    tasks = [asyncio.ensure_future(transfer(group, to)) for group, to in plan]
    pending = set(tasks)
    while pending:
        _, pending = await asyncio.wait(pending, timeout=PROGRESS_EVERY_S)
        if pending:
            log.info("node %s stopping: %d of %d leaderships handed over", node_id, handed, len(plan))
    for task in tasks:
        task.result()  # anything but a typed refusal is a bug: raised, not left in a task unread
    return HandOver(len(led), handed, dict(kept), clock() - started)
