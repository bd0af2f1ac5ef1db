"""A node's Raft machinery: the one consensus driver thread, the mux hub all groups talk over, and where
each group keeps its journal and snapshot. The controller and every partition replica open their groups
here; nothing else of ``partitions/`` holds the driver or the hub.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import replace
from typing import TypeVar

from raftlog.consensus.cluster import open_mux_group
from raftlog.consensus.config import CoreConfig
from raftlog.consensus.driver import Driver
from raftlog.consensus.group import ReplicaGroup
from raftlog.consensus.hub import MuxHub
from raftlog.consensus.hub_gate import LevelGate
from raftlog.consensus.interface import StateMachine
from raftlog.storage.space import DiskSpace

T = TypeVar("T")
RAFT_DIR = "raft"  # under a node's data directory: each Raft group's journal


class RaftHost:
    """Create with the node, ``start()`` on its event loop, ``stop()`` after every group is closed."""

    def __init__(
        self,
        node_id: str,
        data_dir: str,
        raft_address: str,
        cluster_secret: bytes,
        peers: dict[str, str],
        core: CoreConfig,
        sync_threads: int,
        sync_thread_min_bytes: int,
        discard: Callable[[str], None],
        space: DiskSpace | None = None,
        gate: LevelGate | None = None,
    ) -> None:
        """``peers``: node id -> Raft address of every other node known at start (gossip adds more).
        ``space``: the node's knowledge of room on its disk, which every journal shares (its own if None).
        ``gate``: the levels the hub announces and the peers it lets in by theirs (``hub_gate``)."""
        self.node_id = node_id
        self._root = os.path.join(data_dir, RAFT_DIR)
        self._core = core
        self._discard = discard
        self.space = space if space is not None else DiskSpace()
        self.driver = Driver(
            name=f"raft-{node_id}",
            timer_grid_ms=core.timer_grid_ms,
            sync_threads=sync_threads,
            sync_thread_min_bytes=sync_thread_min_bytes,
        )
        self.hub = MuxHub(node_id, raft_address, cluster_secret, peers=peers, gate=gate)

    @property
    def root(self) -> str:
        return self._root

    def start(self) -> None:
        # tick a group as soon as the hub queues a message for it; sleep in the poller otherwise, and run
        # the hub's socket I/O on the driver thread too: no thread hand-off per message
        self.driver.watch_inbound(self.hub.inbox.take_ready, wake_fd=self.hub.inbound_fd())
        self.driver.drive_hub(self.hub)
        self.driver.start()

    def stop(self) -> None:
        self.driver.stop()
        self.hub.close()

    def group_dir(self, group_id: str) -> str:
        return os.path.join(self._root, group_id)

    async def open(
        self,
        group_id: str,
        voters: Sequence[str],
        machine: StateMachine,
        announce_commits: bool = False,
        ticked_first: bool = False,
        learners: Sequence[str] = (),
        opener: Executor | None = None,
    ) -> ReplicaGroup:
        """This node's replica of ``group_id``; ``voters`` and ``learners`` (this node among them when it
        joins as a learner) are the configuration a new group starts from: a group reopened takes the
        one its snapshot and journal hold. ``opener``: where its journal's files are opened (the event
        loop's default executor when None)."""
        directory = self.group_dir(group_id)
        os.makedirs(directory, exist_ok=True)
        core = replace(
            self._core,
            snapshot_path=os.path.join(directory, "snapshot"),
            announce_commits=announce_commits,
            ticked_first=ticked_first,
        )
        return await open_mux_group(
            group_id,
            self.node_id,
            voters,
            machine,
            self.driver,
            self.hub,
            core,
            os.path.join(directory, "journal"),
            self._discard,
            learners,
            space=self.space,
            opener=opener,
        )

    async def run(self, function: Callable[[], T]) -> T:
        """Run ``function`` on the driver thread, between two applies, and wait for its result."""
        return await asyncio.wrap_future(self.driver.submit(function))

    async def barrier(self) -> None:
        """Wait until the driver thread has run everything queued before this call."""
        await self.run(lambda: None)

    def discard(self, path: str) -> None:
        """Take away a group's directory this node no longer needs (the node's trash removes it later)."""
        self._discard(path)

    def learn_peer(self, node_id: str, raft_address: str) -> None:
        if self.hub.peers.addresses().get(node_id) != raft_address:
            self.hub.peers.set(node_id, raft_address)

    def is_connected(self, node_id: str) -> bool:
        return self.hub.peers.is_connected(node_id)

    def stats(self) -> dict[str, int]:
        return self.hub.stats()
