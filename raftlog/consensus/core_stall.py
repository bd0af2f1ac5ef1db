"""A starved thread: time in which this replica's own thread did not run is not held against its peers.

``StarvedThread``, one of ``RaftCore``'s jobs (a mixin over ``core_base.CoreBase``): the tick asks it, first
thing, to credit a leader's late start to its followers (``_credit_stall``), and before a follower or
candidate stands, whether its deadline is put off once for a late tick (``_late_for_deadline``). The
arithmetic is ``decisions``' (``stall_s``, ``credit_stall``, ``late_deadline``); the tick records when it
ran (``_ticked_at``, ``_led_when_ticked``).

Starved thread (ours): time in which this replica's own thread did not run is not held against its
peers. A leader ticked later than twice its heartbeat interval after its previous tick could neither
send heartbeats nor read replies meanwhile: the excess is added to each follower's last-heard time
before the check-quorum test (``_credit_stall``), so a leader steps down only when its followers were
silent for ``leader_fallback_timeout_ms`` of time it ran (what arrived while it was not scheduled is
read before it judges). A follower or candidate first ticked more than ``LATE_TICK_TOLERANCE_S``
after its election deadline was itself not scheduled (and its leader, on a loaded machine, likely
neither): it waits one more deadline of two heartbeat intervals, in which a live leader's heartbeat
reaches it, and stands only if none came (once per deadline, so a follower that is always late still
stands). Raft's safety does not rest on either (check-quorum and election timing are liveness).
"""

from __future__ import annotations

from raftlog.consensus import decisions
from raftlog.consensus.core_base import LEADER, CoreBase

# A follower ticked this much after its election deadline was not run on time, and looks again a little
# later before it stands.
LATE_TICK_TOLERANCE_S = 0.1


class StarvedThread(CoreBase):
    """A leader's late tick credited, a late follower's deadline put off once (see the module docstring)."""

    def _credit_stall(self, now: float) -> None:
        """Leader, start of a tick: the time past twice the heartbeat interval since its previous tick
        (as a leader, not quiet) is time it did not run; it is added to each follower's last-heard time,
        so the check-quorum test counts only time it ran (see "Starved thread")."""
        stall = decisions.stall_s(
            now,
            self._ticked_at,
            led_when_ticked=self._led_when_ticked,
            leading=self._SyncObj__raftState == LEADER,
            heartbeat_interval_s=self._config.heartbeat_interval_ms / 1000,
        )
        if stall <= 0:
            return
        CoreBase.stalls_credited += 1
        self._credited_heard_at = decisions.credit_stall(self._credited_heard_at, now, stall)

    def _late_for_deadline(self, now: float) -> bool:
        """Follower or candidate whose election deadline passed: True (and the deadline put off by two
        heartbeat intervals) when this is its first tick since the deadline and it came more than
        ``LATE_TICK_TOLERANCE_S`` late, unless this deadline was put off already."""
        deferred = decisions.late_deadline(
            now,
            self._SyncObj__raftElectionDeadline,
            ticked_at=self._ticked_at,
            deferred_deadline=self._deferred_deadline,
            tolerance_s=LATE_TICK_TOLERANCE_S,
            heartbeat_interval_s=self._config.heartbeat_interval_ms / 1000,
        )
        if deferred is None:
            return False
        CoreBase.late_deadlines += 1
        self._deferred_deadline = deferred
        self._SyncObj__raftElectionDeadline = deferred
        return True
