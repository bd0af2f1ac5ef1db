"""The cluster's feature levels as this node enforces them against other nodes' code (docs/upgrades.md,
"A node below the cluster's levels is kept out"): one rule (``features.kept_out``) judged on the levels
this node applied or kept from before a restart (``local_levels.FinalizedFloor``), for the Raft hub's gate,
the peer calls both ways and routing; and what a rise of the levels does here: the floor written, every
Raft connection judged again, and the partition logs fenced against release 0.1.0.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from partitions import features
from partitions.errors import NodeKeptOut
from partitions.metadata import local_levels
from raftlog.consensus.hub_gate import LevelGate
from raftlog.storage.manager import LogManager

log = logging.getLogger("raftlog.node")


class LevelGuard:
    """Create first with the node (the hub's gate and the logs' fence level come from it), then
    ``attach`` the hub's recheck and the log manager once they exist."""

    def __init__(self, node_id: str, data_dir: str, applied: Callable[[], Mapping[str, int]]) -> None:
        """``applied``: the finalized levels of the controller metadata this node applied."""
        self.node_id = node_id
        self.floor = local_levels.FinalizedFloor(data_dir)
        self._applied = applied
        self.gate = LevelGate(features.SUPPORTED, lambda peer, announced: self.kept_out(announced))
        self._recheck: Callable[[], None] = lambda: None
        self._logs: LogManager | None = None
        # (floor, applied) as last merged, and the merge: routing asks for every partition of a Metadata
        self._merged: tuple[Mapping[str, int], Mapping[str, int], dict[str, int]] | None = None
        # the last verdict on each announcement seen (a node's gossiped levels are one object until they
        # change), with the levels it was judged on
        self._verdicts: dict[int, tuple[Mapping[str, int] | None, Mapping[str, int], str | None]] = {}

    def attach(self, recheck: Callable[[], None], logs: LogManager) -> None:
        self._recheck = recheck
        self._logs = logs

    def levels(self) -> Mapping[str, int]:
        """The cluster's finalized levels as this node knows them: applied, or kept from before (merged
        again only when either changed: both are replaced whole on a change)."""
        floor, applied = self.floor.levels(), self._applied()
        merged = self._merged
        if merged is None or merged[0] is not floor or merged[1] is not applied:
            merged = self._merged = (floor, applied, local_levels.merged(floor, applied))
        return merged[2]

    def kept_out(self, announced: Mapping[str, int] | None) -> str | None:
        """Why a node whose code announces ``announced`` takes no part in the cluster now (None: it does)."""
        levels = self.levels()
        seen = self._verdicts.get(id(announced))
        if seen is not None and seen[0] is announced and seen[1] is levels:
            return seen[2]
        verdict = features.kept_out(levels, announced)
        if len(self._verdicts) > 64:  # announcements of nodes long gone
            self._verdicts.clear()
        self._verdicts[id(announced)] = (announced, levels, verdict)
        return verdict

    def check_peer(self, caller: str, announced: Mapping[str, int] | None) -> None:
        reason = self.kept_out(announced)
        if reason is not None:
            raise NodeKeptOut(caller, reason)

    def refused_at_handshake(self, node_id: str) -> str | None:
        return self.gate.refused(node_id)

    def finalized(self, levels: Mapping[str, int]) -> None:
        """On the thread that applied a change of the finalized levels: kept across restarts, every Raft
        connection judged again before the hub moves another message (a peer of an earlier release
        receives nothing written at the new levels), and the logs fenced on a thread of their own (a
        marker each, fsynced)."""
        if not self.floor.raise_to(levels):
            return
        self._recheck()
        if self.log_fence_level() > 1:
            threading.Thread(
                target=self.fence_logs, name=f"raftlog-fence-{self.node_id}", daemon=True
            ).start()

    def log_fence_level(self) -> int:
        """The level a partition log is fenced at (``log_format.fence``; 1: none)."""
        return features.finalized_level(self.floor.levels(), features.RAFTLOG_VERSION)

    def fence_logs(self) -> None:
        """Fence every partition log at the level (any thread; also at start: one a crash cut short)."""
        level = self.log_fence_level()
        if self._logs is None or level <= 1:
            return
        fenced = self._logs.fence_all(level)
        if fenced:
            log.info("node %s: %d partition logs fenced at raftlog.version %d", self.node_id, fenced, level)
