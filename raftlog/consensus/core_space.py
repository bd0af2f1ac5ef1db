"""Disk full (``raftlog.storage.space``, docs/decisions/0014): how a replica with no room gives way.

``SpaceGiveWay``, one of ``RaftCore``'s jobs (a mixin over ``core_base.CoreBase``: it reads the role, the
election deadline, the journal and the proposals waiting for their commit). A replica whose file system is
full stands for no election and hands a leadership it holds to the follower holding its whole log
(``_give_way_for_space``, from the tick); an apply the state machine refused for want of room is retried
at a backoff (``_apply_refused``, from the apply). A term or vote that cannot be persisted fails closed
in ``RaftCore`` itself (``_Unpersisted``), and a compaction with no room for its file is put off in
``core_snapshots``.
"""

from __future__ import annotations

import logging

from pysyncobj.config import FAIL_REASON

from raftlog.consensus.core_base import LEADER, CoreBase
from raftlog.storage.errors import DiskFull
from raftlog.storage.space import next_retry_s

logger = logging.getLogger("raftlog.consensus.core")  # RaftCore's lines, whichever of its jobs logs them

# A hand-over that found no follower holding the whole log is asked again after this.
SPACE_HANDOVER_RETRY_S = 1.0
SPACE_TELL_INTERVAL_S = 60.0  # a replica's hand-overs are logged as warnings at most this often


class SpaceGiveWay(CoreBase):
    """What a replica does while its disk is full (see the module docstring)."""

    def _give_way_for_space(self, now: float) -> None:
        """This replica's file system is full (``journal.disk_full``: its journal's last sync was refused
        for want of room, or another writer of the node's was and nothing got through since). Such a
        replica must not lead: a follower never stands for election meanwhile, and a leader hands its
        leadership to the follower holding its whole log (``request_transfer``: that follower could
        write the log, it acknowledged it), again every ``SPACE_HANDOVER_RETRY_S`` while none does;
        until one does it stays leader, serving reads, its proposals refused before they are queued
        (``ReplicaGroup.propose``). The rest needs nothing of this method: the journal keeps the
        records it could not sync in memory, not durable, and retries them, so a follower acknowledges
        nothing and a leader counts only what it fsynced itself; a refused apply waits for its retry."""
        if self._SyncObj__raftState != LEADER:
            if self._SyncObj__raftElectionDeadline < now:
                self._SyncObj__raftElectionDeadline = now + self._election_timeout_s()
            return
        if self._space_handover or now < self._space_handover_at:
            return
        self._space_handover = True
        told = now - self._space_told_at >= SPACE_TELL_INTERVAL_S  # a lone replica asks every second
        if told:
            self._space_told_at = now
        logger.log(
            logging.WARNING if told else logging.DEBUG,
            "%s: no room on this node's disk (%s): handing leadership of term %d over",
            self.node_id, self._journal.disk_full, self._SyncObj__raftCurrentTerm,
        )  # fmt: skip

        def handed(result: object, fail_reason: int) -> None:
            # TimeoutNow sent (the target's election deposes this leader), or no follower held the whole
            # log in time: either way, asked again only after a pause while this replica still leads
            self._space_handover = False
            self._space_handover_at = self._clock() + SPACE_HANDOVER_RETRY_S
            if fail_reason == FAIL_REASON.SUCCESS:
                # What this leader appended and could not sync is the next leader's to commit or not; it
                # applies here only once there is room: its proposers hear "outcome unknown" now rather
                # than at their timeouts (a retry of an idempotent produce finds its original offsets).
                waiting = self._SyncObj__commandsWaitingCommit
                for index in sorted(waiting):
                    for _, callback in waiting.pop(index):
                        callback(None, FAIL_REASON.LEADER_CHANGED)

        self.request_transfer(None, handed)

    def _apply_refused(self, index: int, full: DiskFull) -> None:
        """The state machine found no room to apply the entry at ``index`` and applied nothing: the same
        entry is applied again from ``_apply_retry_at`` on (50 ms doubling to 1 s)."""
        if self._apply_space_error is None:
            logger.warning("%s: no room to apply index %d, retrying until there is: %s", self.node_id, index,
                           full)  # fmt: skip
        self._apply_space_error = full
        self._apply_retry_delay_s = next_retry_s(self._apply_retry_delay_s)
        self._apply_retry_at = self._clock() + self._apply_retry_delay_s
