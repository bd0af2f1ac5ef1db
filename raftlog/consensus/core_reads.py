"""What a replica shows: its read-only accessors, and whether it may answer a read from its own state.

``Reads``, one of ``RaftCore``'s jobs (a mixin over ``core_base.CoreBase``: it reads most of the state).
The accessors are read from any thread and may be a tick apart: the role, leader, term, indexes and
configuration, whether the group serves or a write waits on this replica (``serving``, ``urgent``: the
driver's round order), a leader's progress of each member (``match_indexes``, ``member_ages``). A read's
lease (``read_refusal``, ``confirm_leadership``) follows.

Reads (ours): a leader answers a read from its own state (``read_refusal`` is None) only while it can
show that no other leader has been elected: it leads and has applied its term's no-op (everything
committed before it is in its state); a majority of its voters answered it within ``read_lease_s``
(half the shortest election timeout) of its clock, counting only replies as they arrived (what
``_credit_stall`` forgives check-quorum is not forgiven here), or, quiet, their node connections are up
(a quiet follower stands for no election while it is connected); the thread driving it is not standing
still now (``liveness``: a process stopped by SIGSTOP and not yet run again, read by the event loop
first); and its leadership was confirmed since that thread last stood still (``Liveness.stalls``) and
since it last sent a TimeoutNow: a no-op of its term appended after that and committed
(``confirm_leadership``; the term's first no-op confirms a new leader). A thread that stood still may
have been deposed meanwhile, and the replies to its old heartbeats, read from its sockets when it runs
again, look fresh: only a no-op appended after the stall can be acknowledged by replies sent after it.
A follower stands no sooner than the shortest election timeout after it last heard its leader, so a
leader that ran and heard a majority within half of it was not deposed; the leader's own clock
measures all of it, paused time included. Safety of the log does not depend on any of this; what
depends on it is that a read answered by a leader holds everything acknowledged before the read began.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pysyncobj.config import FAIL_REASON

from raftlog.consensus import decisions
from raftlog.consensus.core_base import CANDIDATE, FOLLOWER, LEADER, NO_OP_ENTRY, CoreBase
from raftlog.consensus.interface import (
    READ_NO_QUORUM,
    READ_NOT_LEADER,
    READ_NOT_READY,
    READ_STANDING_STILL,
    READ_UNCONFIRMED,
    Role,
)
from raftlog.consensus.journal import RaftJournal
from raftlog.consensus.membership import Membership

_ROLE_BY_STATE = {FOLLOWER: Role.FOLLOWER, CANDIDATE: Role.CANDIDATE, LEADER: Role.LEADER}


class Reads(CoreBase):
    """A replica's read-only accessors and its reads' lease (see the module docstring)."""

    @property
    def quiet(self) -> bool:
        """The group is idle and this replica has stopped its timed duties (see core_quiet)."""
        return self._quiet

    @property
    def role(self) -> Role:
        return _ROLE_BY_STATE[self._SyncObj__raftState]

    @property
    def leader_id(self) -> str | None:
        leader = self._SyncObj__raftLeader
        return None if leader is None else str(leader.id)

    @property
    def serving(self) -> bool:
        """Leader, or a follower whose leader's node is connected, or a follower that voted for another in
        this term: a group that takes writes now or is about to, which a busy driver ticks among the
        first of a round (``driver.RoundOrder``). The voter's next message is most likely its
        new leader's first append: queued behind the rest of an election storm, its acknowledgement came
        so late that the new leader, hearing no majority for 3 s, stepped down again."""
        state = self._SyncObj__raftState
        if state == LEADER:
            return True
        leader = self._SyncObj__raftLeader
        if leader is not None:
            return leader in self._SyncObj__connectedNodes
        voted_for = self._journal.getVotedForNodeId()
        return state == FOLLOWER and voted_for is not None and voted_for != self.node_id

    @property
    def urgent(self) -> bool:
        """A write waits on this replica's next tick: entries arrived for it to append and acknowledge, or
        acknowledgements it holds; or, leading, proposals queued, entries not yet committed or committed
        and not applied (the proposals' answers). A busy driver ticks these ahead of everything but the
        controller (``driver.RoundOrder``): a node came back under thousands of partitions, every group
        leading a replica there woke to catch it up, all of them serving, and a produce on a partition
        whose leader never changed waited for its turn among them, on its leader and again on its
        follower, past its 10 s (CI, stop 84). Cheap: the driver asks it of every ready core each round."""
        if getattr(self._SyncObj__transport, "entries_waiting", False) or self._held_replies:
            return True
        if self._SyncObj__raftState != LEADER:
            return False
        commit = self._SyncObj__raftCommitIndex
        return bool(
            self._SyncObj__commandsQueue._FastQueue__queue
            or commit < self._journal.last_index
            or self._SyncObj__raftLastApplied < commit
        )

    @property
    def leader_ready(self) -> bool:
        """Leader, and the no-op it appended on election is applied (see GroupStatus.leader_ready)."""
        noop_index = self._SyncObj__noopIDx
        return bool(
            self._SyncObj__raftState == LEADER
            and noop_index is not None
            and self._SyncObj__raftLastApplied >= noop_index
        )

    @property
    def term(self) -> int:
        return int(self._SyncObj__raftCurrentTerm)

    @property
    def commit_index(self) -> int:
        return int(self._SyncObj__raftCommitIndex)

    @property
    def last_applied(self) -> int:
        return int(self._SyncObj__raftLastApplied)

    @property
    def journal(self) -> RaftJournal:
        return self._journal

    @property
    def membership(self) -> Membership:
        """The configuration in effect here (the latest in this replica's log)."""
        return self._memberships.current

    @property
    def voting(self) -> bool:
        """This replica is a voter in its configuration (a learner or a removed replica is not)."""
        return self._voting

    def match_indexes(self) -> dict[str, int]:
        """Leader only: each other member's (voters' and learners') highest index known durable there."""
        if self._SyncObj__raftState != LEADER:
            return {}
        return {str(node.id): int(index) for node, index in dict(self._SyncObj__raftMatchIndex).items()}

    def member_ages(self, now: float) -> dict[str, tuple[float | None, float | None]]:
        """Leader only: for each other member (voters and learners), how long before ``now`` (this
        core's clock) it was last heard from in this leadership and last caught up with this leader's log,
        in seconds (None: not since it leads). A quiet leader sends nothing and hears nothing (see
        core_quiet): its connected followers are heard from now, and those that acknowledged its whole
        log to let it go quiet are caught up now. Any thread (reads copies of the tick thread's maps)."""
        if self._SyncObj__raftState != LEADER:
            return {}
        heard, caught_up = dict(self._heard_at), dict(self._caught_up_at)
        quiet = self._quiet
        connected = frozenset(self._SyncObj__connectedNodes) if quiet else frozenset()
        acks = dict(self._quiet_acks) if quiet else {}
        last_index = self._journal.last_index
        ages: dict[str, tuple[float | None, float | None]] = {}
        for node in list(self._SyncObj__raftMatchIndex):
            heard_at, caught_up_at = heard.get(node), caught_up.get(node)
            if node in connected:
                heard_at = now
                if acks.get(node, -1) >= last_index:
                    caught_up_at = now
            ages[str(node.id)] = (
                None if heard_at is None else max(0.0, now - heard_at),
                None if caught_up_at is None else max(0.0, now - caught_up_at),
            )
        return ages

    @property
    def clock(self) -> Callable[[], float]:
        """The monotonic seconds this core's timed decisions read."""
        return self._clock

    @property
    def stopped_error(self) -> BaseException | None:
        return self._stopped_error

    @property
    def ticked_first(self) -> bool:
        """The driver ticks this replica ahead of the others in a round (``CoreConfig.ticked_first``)."""
        return self._config.ticked_first

    @property
    def read_stall_s(self) -> float:
        """How long the thread driving this replica may stand still before its reads wait for a new
        confirmation (``CoreConfig.read_stall_s``)."""
        return self._config.read_stall_s

    def read_refusal(self, now: float) -> str | None:
        """Why this replica may not answer a read from its own state at ``now`` (this core's clock), one
        of the ``READ_*`` reasons; None when it may. Cheap (a few attribute reads): asked by every read.
        The reasons are checked in this order, so one that a confirmation cures (``READ_UNCONFIRMED``,
        see :meth:`confirm_leadership`) is given only to a leader whose thread runs."""
        if self._SyncObj__raftState != LEADER:
            return READ_NOT_LEADER
        if not self.leader_ready:
            return READ_NOT_READY
        liveness = self.liveness
        if liveness is not None and liveness.standing_still(now):  # (reads due_at before stalls)
            return READ_STANDING_STILL
        if self._read_confirmed != self._read_token():
            return READ_UNCONFIRMED
        if self._quorum_heard_at(now) < now - self._config.read_lease_s:
            return READ_NO_QUORUM
        return None

    def confirm_leadership(self) -> None:
        """Any thread: a leader whose reads wait for a confirmation (``READ_UNCONFIRMED``) appends a no-op
        of its term; once it is committed (a majority acknowledged entries sent after this call), its
        reads may go on, unless its thread stood still again meanwhile. One no-op in flight at a time;
        none while it hands its leadership over (appended after, if it still leads)."""
        term = self._SyncObj__raftCurrentTerm
        if self._SyncObj__raftState != LEADER or self._read_barrier_term == term:
            return
        self._read_barrier_term = term
        token = self._read_token()

        def confirmed(result: object, fail_reason: int) -> None:  # tick thread, once applied or refused
            if self._read_barrier_term == term:
                self._read_barrier_term = None
            if (
                fail_reason == FAIL_REASON.SUCCESS
                and self._SyncObj__raftState == LEADER
                and self._SyncObj__raftCurrentTerm == term
            ):
                self._read_confirmed = token

        self._applyCommand(NO_OP_ENTRY, confirmed)
        self._notify_activity()

    def _read_token(self) -> tuple[int, int]:
        """What a confirmation of leadership is good for: the stalls of the thread and the TimeoutNows this
        replica sent so far (a new one of either needs a new confirmation)."""
        liveness = self.liveness
        return (0 if liveness is None else liveness.stalls), self._timeouts_now_sent

    def _quorum_heard_at(self, now: float) -> float:
        """Leader: when the voters that, with itself, make a majority were last heard (their replies of
        this term as they arrived; a quiet leader's connected followers: now). ``now`` for a lone voter."""
        voters = self._SyncObj__otherNodes
        heard = self._heard_at
        if self._quiet:
            connected = self._SyncObj__connectedNodes
            times = [now if node in connected else heard.get(node, -math.inf) for node in voters]
        else:
            times = [heard.get(node, -math.inf) for node in voters]
        return decisions.quorum_heard_at(now, times)
