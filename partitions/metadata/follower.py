"""Controller metadata for a node outside the controller group (a node that joined by gossip).

A node outside the controller group (one started with ``--join`` and not added to the group, or one
removed from it) holds partition replicas like any other but no controller replica, so it copies the
controller's applied state instead: every ``POLL_S`` it asks the controller
leader (learned from the previous answer; any live node at first, which names the leader) for its
snapshot through the peer client, and, when the applied index moved forward, restores it into its local
``ControllerStateMachine`` and reconciles its replicas. Writes to the controller from this node go to the
controller leader, as from any controller follower.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from partitions.controller.state import ControllerStateMachine
from partitions.metadata.service import ControllerSnapshot
from partitions.worker import Worker
from raftlog.consensus.errors import NotLeader
from raftlog.errors import RaftlogError

log = logging.getLogger("raftlog.metadata_follower")

POLL_S = 0.25
FetchSnapshot = Callable[[str, int | None], Awaitable[ControllerSnapshot]]  # (node id, known index)


@dataclass(eq=False)
class MetadataFollower(Worker):
    """Create with the machine to fill, ``start()`` on the event loop, ``await close()``."""

    node_id: str
    _machine: ControllerStateMachine
    _fetch: FetchSnapshot
    _sources: Callable[[], list[str]]  # ids of live nodes to ask (any controller voter knows the leader)
    _on_change: Callable[[], None]
    leader: str | None = field(default=None, init=False)  # the controller leader named by the last answer
    synced: bool = field(default=False, init=False)  # a snapshot has been applied at least once

    def __post_init__(self) -> None:
        super().__init__()

    async def _run(self) -> None:
        turn = 0
        while True:
            candidates = ([self.leader] if self.leader else []) + self._sources()
            if candidates:
                node = candidates[0] if self.leader else candidates[turn % len(candidates)]
                try:
                    await self._follow(node)
                except NotLeader as refusal:  # a node without a controller replica, or a stale leader
                    self.leader = refusal.leader_hint
                    turn += 1
                except RaftlogError as exc:
                    log.info("node %s: controller metadata from %s failed: %s", self.node_id, node, exc)
                    self.leader = None
                    turn += 1
            await asyncio.sleep(POLL_S)

    async def _follow(self, node: str) -> None:
        known = self._machine.applied_index if self.synced else None
        answer = await self._fetch(node, known)
        self.leader = answer.leader
        snapshot = answer.snapshot
        if snapshot is not None and (answer.applied_index > self._machine.applied_index or not self.synced):
            self._machine.restore(snapshot)
            self.synced = True
            self._on_change()
