"""A leadership transfer attempt (Raft thesis 3.10): ``TransferAttempt``, the tick callback that
``RaftCore.request_transfer`` installs.

Each tick until it is done, a leader that hands its leadership over appends nothing new
(``_transfer_until``), waits until the target (None: the most caught-up connected voter) holds its whole
log, then sends TimeoutNow through pysyncobj's ``transferLeadership`` and keeps appending nothing for an
election timeout; it gives up (REQUEST_DENIED) when the target is not a voter or is not caught up within
an election timeout, and answers NOT_LEADER once it no longer leads. A small class over the core, not a
mixin: it reads the leader's progress of its voters and writes only the two fields of a transfer.
"""

from __future__ import annotations

from pysyncobj.config import FAIL_REASON

from raftlog.consensus.core_base import LEADER, Callback, CoreBase


class TransferAttempt:
    """A tick callback driving one leadership transfer until TimeoutNow is sent or it is given up."""

    def __init__(self, core: CoreBase, node_id: str | None, callback: Callback) -> None:
        self._core = core
        self._node_id = node_id
        self._callback = callback
        self._deadline: float | None = None

    def __call__(self) -> None:
        core = self._core
        now = core._clock()
        pause_s = core._config.election_timeout_max_ms / 1000
        if self._deadline is None:
            self._deadline = now + pause_s
        if core._SyncObj__raftState != LEADER:
            self._finish(FAIL_REASON.NOT_LEADER)
            return
        others = {str(node.id): node for node in core._SyncObj__otherNodes}
        match = core._SyncObj__raftMatchIndex
        target = self._node_id
        if target is None:
            connected = [n for n in others.values() if n in core._SyncObj__connectedNodes]
            target = str(max(connected, key=lambda n: match.get(n, 0)).id) if connected else None
        if target is None or target not in others:
            self._finish(FAIL_REASON.REQUEST_DENIED)
            return
        core._transfer_until = max(core._transfer_until, now + 0.05)  # no new appends while we wait
        if match.get(others[target], 0) == core._journal.last_index:
            core.removeOnTickCallback(self)
            core._timeouts_now_sent += 1  # its target may win without a pre-vote: reads wait (core_reads)
            core.transferLeadership(target, self._sent)
        elif now > self._deadline:
            core._transfer_until = 0.0
            self._finish(FAIL_REASON.REQUEST_DENIED)
        # else: look again next tick (acknowledgements from the target wake the driver)

    def _sent(self, result: object, fail_reason: int) -> None:
        if fail_reason == FAIL_REASON.SUCCESS:
            core = self._core
            core._transfer_until = core._clock() + core._config.election_timeout_max_ms / 1000
        else:
            self._core._transfer_until = 0.0
        self._callback(result, fail_reason)

    def _finish(self, fail_reason: int) -> None:
        self._core.removeOnTickCallback(self)
        self._callback(None, fail_reason)
