"""Proposals and apply: how a replica's queued proposals enter its log and its committed entries reach the
state machine.

``Proposals``, one of ``RaftCore``'s jobs (a mixin over ``core_base.CoreBase``: it reads pysyncobj's
proposal queue and the callbacks waiting for a commit, the role, the journal, the configuration and the
state machine). Commands are opaque bytes handed to a :class:`~raftlog.consensus.interface.StateMachine`
with their index and term; a leader appends queued proposals (up to ``proposals_per_tick_max`` a tick,
none while it hands its leadership over), a membership change only when ``membership_refusal`` allows it;
a non-leader rejects a proposal (NOT_LEADER / MISSING_LEADER) instead of forwarding it. Only what is
committed and durable in this replica's own journal is applied (up to ``applies_per_tick_max`` a tick),
and a proposal of another term at its index is answered DISCARDED. ``RaftCore``'s overrides
``_checkCommandsToApply`` and ``__applyLogEntries`` delegate here.
"""

from __future__ import annotations

import logging
import math
import queue

from pysyncobj.config import FAIL_REASON

from raftlog.consensus.core_base import COMMAND_MEMBERSHIP, COMMAND_NO_OP, COMMAND_USER, LEADER
from raftlog.consensus.core_membership import Memberships
from raftlog.consensus.core_space import SpaceGiveWay
from raftlog.errors import InvariantViolation
from raftlog.storage.errors import DiskFull

logger = logging.getLogger("raftlog.consensus.core")  # RaftCore's lines, whichever of its jobs logs them


class Proposals(SpaceGiveWay, Memberships):
    """Proposals into the log, committed entries into the state machine (see the module docstring)."""

    def _append_proposals(self) -> bool:
        """Move queued proposals into the log (leader) or fail them (others). True if any appended."""
        commands = self._SyncObj__commandsQueue
        waiting = self._SyncObj__commandsWaitingCommit
        appended = False
        if self._SyncObj__raftState == LEADER and self._clock() < self._transfer_until:
            return False  # handing leadership over: the target must stay caught up
        for _ in range(self._config.proposals_per_tick_max):
            try:
                command, callback = commands.get_nowait()
            except queue.Empty:
                break
            if self._SyncObj__raftState != LEADER:
                if callback is not None:
                    leader = self._SyncObj__raftLeader
                    callback(None, FAIL_REASON.MISSING_LEADER if leader is None else FAIL_REASON.NOT_LEADER)
                continue
            change = None
            if command[0] == COMMAND_MEMBERSHIP:
                change = self._membership_change(command, None)
                refusal = self.membership_refusal(*change)
                if refusal is not None:
                    logger.info("%s: membership change %s %s denied: %s", self.node_id, *change, refusal)
                    if callback is not None:
                        callback(None, FAIL_REASON.REQUEST_DENIED)
                    continue
            index, term = self._journal.last_index + 1, self._SyncObj__raftCurrentTerm
            self._journal.add(command, index, term)
            if change is not None:
                self._membership_index = index
                self._memberships.append(index, *change)
                self._install_membership()
            if callback is not None:
                waiting[index].append((term, callback))
            appended = True
        return appended

    def _apply_committed(self) -> bool:
        """pysyncobj's ``__applyLogEntries``: apply what is committed and durable here, in order, and answer
        the proposals waiting for it."""
        # Only what this replica's own journal holds durably: a follower that learns the commit index in
        # the tick that appends the entries applies them after the tick's fsync, in its next tick.
        commit = min(self._SyncObj__raftCommitIndex, self._journal.durable_index)
        last_applied = self._SyncObj__raftLastApplied
        if commit <= last_applied:
            return False
        if self._apply_space_error is not None and self._clock() < self._apply_retry_at:
            return False  # refused for want of room: tried again at _apply_retry_at
        count = min(commit - last_applied, self._config.applies_per_tick_max)
        entries = self._SyncObj__getEntries(last_applied + 1, count)
        if not entries or entries[0][1] != last_applied + 1:
            raise InvariantViolation(
                f"{self.node_id}: entries to apply from {last_applied + 1} missing (commit {commit}, journal "
                f"{self._journal.first_index}..{self._journal.last_index})"
            )
        waiting = self._SyncObj__commandsWaitingCommit
        for command, index, term in entries:
            subscribers = waiting.pop(index, None)
            try:
                result = self._apply_entry(command, index, term)
            except DiskFull as full:  # nothing applied (StateMachine.apply): the same entry comes again
                if subscribers:
                    waiting[index] = subscribers
                self._apply_refused(index, full)
                return False
            self._SyncObj__raftLastApplied = index
            if subscribers:
                for subscribed_term, callback in subscribers:
                    if subscribed_term == term:
                        callback(result, FAIL_REASON.SUCCESS)
                    else:
                        callback(None, FAIL_REASON.DISCARDED)
        if self._apply_space_error is not None:
            logger.info("%s: room again, applying from index %d on", self.node_id, entries[0][1])
            self._apply_space_error, self._apply_retry_at, self._apply_retry_delay_s = None, math.inf, 0.0
        return False

    def _apply_entry(self, command: bytes, index: int, term: int) -> object:
        kind = command[0]
        if kind == COMMAND_USER:
            return self._state_machine.apply(index, term, memoryview(command)[1:])  # no copy of a batch
        if kind == COMMAND_NO_OP:
            return None
        if kind == COMMAND_MEMBERSHIP:
            # In effect since it was appended (Raft 4.1; a restart rebuilds it from the journal): applying
            # only lets the configurations before it go.
            self._membership_change(command, index)
            self._memberships.applied(index)
            self._install_membership()  # a member removed for good is heard no more
            return None
        raise InvariantViolation(
            f"{self.node_id}: unsupported command type {kind} at index {index} term {term}"
        )
