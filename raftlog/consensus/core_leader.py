"""The leader's side of replication: sending entries and snapshots, hearing the replies, committing.

``Replication``, one of ``RaftCore``'s jobs (a mixin over ``core_base.CoreBase``: it reads and writes the
leader's progress of every follower, the times it heard them, the journal and the commit index). The
acknowledged-write-loss fix's leader half lives here: the commit index is what a majority of the voters
holds durably, the leader's own entries counted only up to what it fsynced, and only an entry of the
current term (``decisions.commit_index``; learners count for nothing); an acknowledgement of another
term is ignored and one of a higher term deposes the leader; a stale success never moves ``nextIndex``
or ``matchIndex`` back (``decisions.progress``). Each follower gets a send budget, an equal slice of
one heartbeat period in a rotating order and a bound on entries in flight, so that one follower cannot
starve the others; no pickled "transmission" chunks. ``_release_journal`` says how far the journal may
let commands leave memory (applied here and, on a leader, held by every follower; the tick asks it on
every replica). ``RaftCore``'s ``__sendAppendEntries`` override calls ``_send_to_followers``;
``RaftCore._on_message`` dispatches ``next_node_idx`` here.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from raftlog.consensus import decisions
from raftlog.consensus.core_base import FOLLOWER, LEADER
from raftlog.consensus.core_reads import Reads
from raftlog.consensus.messages import AppendEntries, NextNodeIdx
from raftlog.errors import InvariantViolation

logger = logging.getLogger("raftlog.consensus.core")  # RaftCore's lines, whichever of its jobs logs them


class Replication(Reads):
    """A leader's sends, the replies it hears and its commit index (see the module docstring)."""

    def _send_to_followers(self, nodes: set[Any], heartbeat: bool = False) -> None:
        """Each follower gets an equal slice of one heartbeat period, in a rotating order."""
        connected = self._SyncObj__connectedNodes
        serializer = self._SyncObj__serializer
        known = self._SyncObj__raftNextIndex
        followers = sorted((node for node in nodes if node in known), key=lambda n: n.id)
        live = []
        for node in followers:
            if node in connected:
                live.append(node)
            else:
                serializer.cancelTransmisstion(node)
        if not live:
            return
        self._send_rotation = (self._send_rotation + 1) % len(live)
        live = live[self._send_rotation :] + live[: self._send_rotation]
        budget = self._config.heartbeat_period_ms / 1000 / len(live)
        for node in live:
            self._send_to_follower(node, budget, heartbeat)

    def _send_to_follower(self, node: Any, budget_s: float, heartbeat: bool) -> None:
        """Batches until the time slice or the in-flight bound is used up; with ``heartbeat`` at least one
        message (an empty AppendEntries if nothing else)."""
        journal = self._journal
        nexts = self._SyncObj__raftNextIndex
        match = self._SyncObj__raftMatchIndex
        start = time.perf_counter()  # a time slice of work, not a timed decision
        term = self._SyncObj__raftCurrentTerm
        in_flight_max = self._config.in_flight_entries_max
        sent = not heartbeat
        while True:
            next_index = nexts[node]
            if next_index <= journal.first_index:
                if self._config.snapshot_path is None:
                    raise InvariantViolation(
                        f"{self.node_id}: {node.id} needs index {next_index} but the "
                        f"journal starts at {journal.first_index} and there is no snapshot"
                    )
                if not self._send_snapshot_chunk(node):
                    return
            else:
                prev_term = self._term_at(next_index - 1)
                if prev_term is None:
                    raise InvariantViolation(
                        f"{self.node_id}: no entry at {next_index - 1} for {node.id} "
                        f"(journal {journal.first_index}..{journal.last_index})"
                    )
                can_send = next_index <= journal.last_index and next_index - 1 - match[node] < in_flight_max
                if sent and not can_send:
                    return
                entries: list[tuple[bytes, int, int]] = []
                if can_send:
                    entries = self._SyncObj__getEntries(next_index, None, self._config.message_bytes_max)
                    nexts[node] = entries[-1][1] + 1
                message: AppendEntries = {
                    "type": "append_entries",
                    "term": term,
                    "commit_index": self._SyncObj__raftCommitIndex,
                    "entries": entries,
                    "prevLogIdx": next_index - 1,
                    "prevLogTerm": prev_term,
                }
                if self._quiescing and not entries and next_index - 1 == journal.last_index:
                    message["quiesce"] = True
                self._send(node, message)
                sent = True
                if not entries:
                    return
            if node not in self._SyncObj__connectedNodes or time.perf_counter() - start > budget_s:
                return

    def _send_snapshot_chunk(self, node: Any) -> bool:
        """Send the next chunk of the snapshot file; True while more chunks follow."""
        data = self._SyncObj__serializer.getTransmissionData(node)
        self._send(
            node,
            {
                "type": "append_entries",
                "term": self._SyncObj__raftCurrentTerm,
                "commit_index": self._SyncObj__raftCommitIndex,
                "serialized": data,
            },
        )
        if not data:
            return False
        is_last = data[2]
        if is_last:
            self._SyncObj__raftNextIndex[node] = self._journal.index_term(1)[0] + 1
        return not is_last

    def _on_append_reply(self, node: Any, message: NextNodeIdx) -> None:
        term = message.get("term")
        if term is None:
            logger.warning(
                "%s: ignoring termless append reply from %s (stock pysyncobj peer?)", self.node_id, node
            )
            return
        if term > self._SyncObj__raftCurrentTerm:
            self._SyncObj__setCurrentTerm(term, None)
            self._SyncObj__setState(FOLLOWER)
            self._SyncObj__raftLeader = None
            return
        if self._SyncObj__raftState != LEADER or term != self._SyncObj__raftCurrentTerm:
            return  # a reply to an earlier term's leader: says nothing about this term's log
        if node not in self._SyncObj__raftNextIndex:
            return  # removed from the cluster meanwhile
        now = self._clock()
        self._credited_heard_at[node] = now
        self._heard_at[node] = now  # as it arrived: reads forgive no stall (core_reads)
        next_index = message["next_node_idx"]
        match = self._SyncObj__raftMatchIndex
        nexts = self._SyncObj__raftNextIndex
        self._followers_to_send.add(node)  # more to send, or a resend after a rejection: next tick
        success = message["success"]
        acknowledged = next_index - 1
        if success and acknowledged > self._journal.last_index:
            raise InvariantViolation(
                f"{self.node_id}: {node.id} acknowledged index {acknowledged} beyond "
                f"leader last index {self._journal.last_index} in term {term}"
            )
        if success or message["reset"]:
            match[node], nexts[node] = decisions.progress(
                match[node], nexts[node], reply_next_index=next_index, success=success, reset=message["reset"]
            )
        if success:
            last = self._journal.last_index
            previous, before = self._last_reply.get(node), self._caught_up_at.get(node)
            at = decisions.caught_up_at(match[node], last, now, previous, before)
            if at is not None:
                self._caught_up_at[node] = at
            self._last_reply[node] = (now, last)
            if message.get("quiet") is True:
                self._quiet_acks[node] = acknowledged
            else:
                self._quiet_acks.pop(node, None)
        elif message["reset"]:
            self._quiet_acks.pop(node, None)

    def _advance_commit_index(self) -> None:
        """Commit = the highest index a majority of the voters holds durably, if it is from the current
        term (``decisions.commit_index``). Learners count for nothing."""
        if not self._voting:
            raise InvariantViolation(f"{self.node_id}: leading term {self.term} but not a voter")
        journal = self._journal
        last_index = journal.last_index
        match = self._SyncObj__raftMatchIndex
        commit = self._SyncObj__raftCommitIndex
        new_commit = decisions.commit_index(
            commit,
            current_term=self._SyncObj__raftCurrentTerm,
            own_index=min(journal.durable_index, last_index),
            match_indexes=[match.get(node, 0) for node in self._SyncObj__otherNodes],
            last_index=last_index,
            term_at=self._term_at,
        )
        if new_commit != commit:
            self._SyncObj__raftCommitIndex = new_commit
            self._SyncObj__leaderCommitIndex = new_commit

    def _release_journal(self) -> None:
        """Commands applied here (and, on a leader, held by every follower) may leave memory: a
        FileJournal reads one back from disk if it is ever needed again."""
        bound = self._SyncObj__raftLastApplied
        if self._SyncObj__raftState == LEADER:
            match = self._SyncObj__raftMatchIndex
            for nodes in (self._SyncObj__otherNodes, self._SyncObj__readonlyNodes, self._learner_nodes):
                for node in nodes:
                    bound = min(bound, match.get(node, 0))
        self._journal.release_through(bound)
