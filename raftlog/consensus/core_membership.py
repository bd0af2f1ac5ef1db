"""Membership: the configuration in effect on a replica, and whether a change may start.

``Memberships``, one of ``RaftCore``'s jobs (a mixin over ``core_base.CoreBase``: putting a configuration in
effect rewrites pysyncobj's voters, the transport's nodes and the leader's progress of each member).
Learners (Raft thesis 4.2.1, ``raftlog.consensus.membership``): a member that receives the log but counts
in no quorum. pysyncobj knows only voters (``__otherNodes``: the other voters); the learners are
``_learner_nodes`` beside them, sent to like followers and tracked in ``nextIndex``/``matchIndex``, but
never counted by ``_advance_commit_index``, ``_step_down_without_quorum``, ``_has_majority`` or a
candidate's tally, and never asked for a vote. A replica that is not a voter in its own configuration
(a learner, or removed) never stands for election nor accepts TimeoutNow. It still answers a vote
request: a candidate asks only the voters of its own configuration, so the request means this replica
was promoted in the candidate's log though it has not heard yet (etcd does the same; refusing could
leave a group that needs its vote without a leader). The configuration in effect is the latest in the
log (``MembershipLog``), applied when an entry is appended, undone when it is truncated, rebuilt on
restart from the snapshot's and the journal's entries after it; a snapshot records the configuration
at its index (voters under ``cluster``, as before, and ``learners``). One change at a time: a leader
denies a change until the previous one it appended and its own no-op are applied.
"""

from __future__ import annotations

from raftlog.consensus.core_base import LEADER, MEMBERSHIP_TYPE_BYTE, CoreBase
from raftlog.consensus.membership import Membership, MembershipLog, decode_change
from raftlog.errors import InvariantViolation


class Memberships(CoreBase):
    """The configurations of a replica's log and the one in effect (see the module docstring)."""

    def membership_refusal(self, change: str, node_id: str) -> str | None:
        """Why this replica would deny a membership change now (None: it would append it): see
        :meth:`membership_pending` and ``Membership.refusal``. Any thread (an answer a tick old); the tick
        decides again."""
        return self.membership_pending() or self._memberships.current.refusal(change, node_id, self.node_id)

    def membership_pending(self) -> str | None:
        """Why no membership change may start now, whatever it is (None: one may). One change at a time:
        none until the previous one this leader appended and its own no-op (which covers those of
        earlier leaders) are applied; none but on the leader. Any thread."""
        if self._SyncObj__raftState != LEADER:
            return "not the leader"
        applied = self._SyncObj__raftLastApplied
        noop_index = self._SyncObj__noopIDx
        if noop_index is None or applied < noop_index:
            return "the leader has not applied its own first entry yet"
        if self._membership_index > applied:
            return f"the membership change at index {self._membership_index} is not applied yet"
        return None

    def _membership_change(self, command: bytes, index: int | None) -> tuple[str, str]:
        """(change, node id) of a membership entry (at ``index``, None: a proposal); a malformed one is a
        broken invariant (only a leader of this group writes them)."""
        try:
            return decode_change(memoryview(command)[1:])
        except ValueError as error:
            raise InvariantViolation(f"{self.node_id}: membership entry at index {index}: {error}") from None

    def _replayed_memberships(self, base_index: int, base: Membership) -> MembershipLog:
        """The configurations of ``base`` (in effect at ``base_index``) and of every membership entry the
        journal holds after it. At a restart every entry is still in memory: one pass over their first
        bytes, far less than replaying them."""
        memberships = MembershipLog(base_index, base)
        journal = self._journal
        if not len(journal):
            return memberships
        start = max(0, base_index + 1 - journal.first_index)
        for command, index, _ in journal[start:]:
            if command[:1] == MEMBERSHIP_TYPE_BYTE:
                memberships.append(index, *self._membership_change(command, index))
        return memberships

    def _install_membership(self) -> None:
        """Put the latest configuration of the log in effect: pysyncobj's voters (``__otherNodes``: the
        other voters), the learners, and the progress a leader keeps of each (kept for a member that
        stays, such as a learner promoted). The transport keeps hearing every member of a configuration
        the log still holds (``MembershipLog.members_held``: one an uncommitted change removed may lead
        the entry away) and the leader (a snapshot's configuration may predate its joining); it drops
        the others."""
        config = self._memberships.current
        me = self.node_id
        transport = self._SyncObj__transport
        nexts, match = self._SyncObj__raftNextIndex, self._SyncObj__raftMatchIndex
        heard = self._credited_heard_at
        leader = self._SyncObj__raftLeader
        known = {str(n.id): n for n in self._SyncObj__otherNodes | self._learner_nodes | self._outside_nodes}
        wanted = config.members - {me}
        heard_from = self._memberships.members_held - {me}
        outside = set()
        for node_id, node in known.items():
            if node_id in wanted:
                continue
            for progress in (nexts, match, heard, self._quiet_acks):
                progress.pop(node, None)
            if node_id in heard_from or node == leader:
                outside.add(node)
            else:
                transport.dropNode(node)
                self._SyncObj__connectedNodes.discard(node)
        node_class = self._SyncObj__nodeClass
        for node_id in sorted((wanted | heard_from) - known.keys()):
            node = node_class(node_id)
            known[node_id] = node
            transport.addNode(node)
            if node_id not in wanted:
                outside.add(node)
        leading = self._SyncObj__raftState == LEADER
        for node_id in wanted:
            node = known[node_id]
            if node not in nexts:
                nexts[node] = self._journal.last_index + 1
                match[node] = 0
                if leading:
                    heard[node] = self._clock()
        self._SyncObj__otherNodes = {known[n] for n in config.voters if n != me}
        self._learner_nodes = {known[n] for n in config.learners if n != me}
        self._outside_nodes = outside
        self._voting = me in config.voters
