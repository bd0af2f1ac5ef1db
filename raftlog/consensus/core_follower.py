"""The follower's side of replication: an AppendEntries received, checked, appended and acknowledged.

``FollowerSide``, one of ``RaftCore``'s jobs (a mixin over ``core_base.CoreBase``: an append reads and writes
the term, the leader, the election deadline, the journal, the commit index, the configurations and the
quiet). The acknowledged-write-loss fix lives here: a follower truncates only at a real term conflict,
never on a heartbeat or a duplicate batch, and never at or below its commit index (a broken invariant);
it acknowledges ``prevLogIdx + len(entries)`` (what it verified to match the leader), not the end of its
log; its commit index is bounded by that verified index. Every reply carries the term and is held
(``_held_replies``) until the fsync covering its entries (``_release_replies``, after the tick's sync or
a sync job's): an acknowledged entry is durable here. A snapshot sent in place of entries is made
durable before it is loaded. ``RaftCore._on_message`` dispatches ``append_entries`` here.
"""

from __future__ import annotations

import logging
from typing import Any

from raftlog.consensus.core_base import FOLLOWER, LEADER, MEMBERSHIP_TYPE_BYTE
from raftlog.consensus.core_log import as_entry
from raftlog.consensus.core_membership import Memberships
from raftlog.consensus.core_quiet import Quiescence
from raftlog.consensus.core_snapshots import Snapshots
from raftlog.consensus.messages import AppendEntries, NextNodeIdx
from raftlog.errors import InvariantViolation

logger = logging.getLogger("raftlog.consensus.core")  # RaftCore's lines, whichever of its jobs logs them


class FollowerSide(Quiescence, Snapshots, Memberships):
    """AppendEntries on a follower, and its acknowledgements held until durable (see the module docstring)."""

    def _hold_reply(self, node: Any, next_index: int, success: bool, quiet: bool = False) -> None:
        reply: NextNodeIdx = {
            "type": "next_node_idx",
            "next_node_idx": next_index,
            "reset": not success,
            "success": success,
            "term": self._SyncObj__raftCurrentTerm,
        }
        if quiet:
            reply["quiet"] = True
        self._held_replies.append((node, reply))

    def _on_append_entries(self, node: Any, message: AppendEntries) -> None:
        term = message["term"]
        current = self._SyncObj__raftCurrentTerm
        if term < current:
            # Tell the stale leader about the newer term so it steps down now, not at fallback timeout.
            self._hold_reply(node, self._journal.last_index + 1, success=False)
            return
        if term > current:
            self._SyncObj__transferInProgress = False
            self._SyncObj__setCurrentTerm(term, None)
        if self._SyncObj__raftState == LEADER and term == current:
            raise InvariantViolation(f"{self.node_id}: two leaders in term {term}: self and {node.id}")
        if not self._SyncObj__transferInProgress:
            self._SyncObj__raftElectionDeadline = self._clock() + self._election_timeout_s()
        if self._SyncObj__raftLeader != node:
            self._SyncObj__onLeaderChanged()
            self._last_leader_id = str(node.id)
            self._leader_lost = None
        self._SyncObj__raftLeader = node
        self._leader_seen_at = self._clock()
        self._prevote_term = None
        self._SyncObj__setState(FOLLOWER)
        leader_commit = message["commit_index"]
        self._SyncObj__leaderCommitIndex = leader_commit

        if "transmission" in message:
            logger.warning("%s: ignoring chunked (pickled) entry from %s", self.node_id, node)
            return
        if "prevLogIdx" in message:
            verified = self._append_from_leader(node, message)
        elif message.get("serialized") is not None:
            if not self._SyncObj__serializer.setTransmissionData(message["serialized"]):
                return
            self._make_received_snapshot_durable()
            self._load_snapshot(clear_journal=True)
            verified = self._journal.last_index
        else:
            return
        if verified is None:
            self._quiet = False
            return
        commit = self._SyncObj__raftCommitIndex
        new_commit = min(leader_commit, verified)
        if new_commit > commit:
            self._SyncObj__raftCommitIndex = new_commit
        # Quiet on a quiescing heartbeat that leaves nothing to learn: this replica holds exactly the
        # leader's log and knows it all committed. Any other append ends the quiet.
        quiet = (
            self._config.quiesce
            and message.get("quiesce") is True
            and verified == self._journal.last_index == leader_commit == self._SyncObj__raftCommitIndex
        )
        self._hold_reply(node, verified + 1, success=True, quiet=quiet)
        if quiet and not self._quiet:
            self._go_quiet(self._clock())
        elif not quiet:
            self._quiet = False

    def _append_from_leader(self, node: Any, message: AppendEntries) -> int | None:
        """Raft AppendEntries receiver rules 2-4. Returns the index verified to match the leader (the caller
        acknowledges it), or None after holding a rejection."""
        journal = self._journal
        prev_index = int(message["prevLogIdx"])
        prev_term = message["prevLogTerm"]
        commit = self._SyncObj__raftCommitIndex
        first_index = journal.first_index
        last_index = journal.last_index
        if prev_index > last_index:
            self._hold_reply(node, last_index + 1, success=False)
            return None
        if prev_index < first_index:
            # Compacted here: everything up to first_index is committed; ask to resume after our commit.
            self._hold_reply(node, commit + 1, success=False)
            return None
        local_prev_term = self._term_at(prev_index)
        if local_prev_term != prev_term:
            if prev_index <= commit:
                raise InvariantViolation(
                    f"{self.node_id}: leader {node.id} disagrees at committed index {prev_index} "
                    f"(local term {local_prev_term}, leader term {prev_term}, commit {commit})"
                )
            # Entries up to our commit index match any current leader (Leader Completeness).
            self._hold_reply(node, min(prev_index, commit + 1), success=False)
            return None

        entries = message.get("entries") or []
        index = prev_index
        for position, raw in enumerate(entries):
            command, index, term = as_entry(raw)
            if index != prev_index + 1 + position:
                raise InvariantViolation(
                    f"{self.node_id}: non-contiguous entries from {node.id}: index {index} "
                    f"at position {position} after prevLogIdx {prev_index}"
                )
            local_term = self._term_at(index)
            if local_term == term:
                continue  # already held: a duplicate, never a reason to truncate
            if local_term is not None:
                if index <= commit:
                    raise InvariantViolation(
                        f"{self.node_id}: leader {node.id} overwrites committed index {index} "
                        f"(local term {local_term}, leader term {term}, commit {commit})"
                    )
                self._truncate_from(index)
            for raw_rest in entries[position:]:
                command, index, term = as_entry(raw_rest)
                journal.add(command, index, term)
                if command[:1] == MEMBERSHIP_TYPE_BYTE:
                    self._memberships.append(index, *self._membership_change(command, index))
                    self._install_membership()
            break
        return prev_index + len(entries)

    def _truncate_from(self, index: int) -> None:
        journal = self._journal
        if index <= self._SyncObj__raftLastApplied:
            raise InvariantViolation(
                f"{self.node_id}: truncating applied index {index} "
                f"(last applied {self._SyncObj__raftLastApplied})"
            )
        if index <= self._memberships.last_change_index:
            self._memberships.truncate_from(index)  # its changes are undone
            self._install_membership()
        journal.deleteEntriesFrom(index - journal.first_index)

    def _release_replies(self) -> None:
        """Send the held acknowledgements whose entries are durable, in order; the rest wait."""
        journal = self._journal
        durable = journal.durable_index
        term = self._SyncObj__raftCurrentTerm
        replies = self._held_replies
        for position, (node, message) in enumerate(replies):
            if message["term"] != term:
                continue  # the term moved on: an older leader must not count this reply
            if message["success"] and message["next_node_idx"] - 1 > durable:
                if not journal.sync_in_flight and journal.space_retry_at is None:
                    raise InvariantViolation(
                        f"{self.node_id}: acknowledging index {message['next_node_idx'] - 1} above durable "
                        f"index {durable} with no sync running"
                    )
                self._held_replies = replies[position:]
                return
            self._send(node, message)
        self._held_replies = []
