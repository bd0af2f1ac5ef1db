"""Quiescence: an idle group stops heartbeating (``CoreConfig.quiesce``, on for nodes).

``Quiescence``, one of ``RaftCore``'s jobs (a mixin over ``core_base.CoreBase``: whether a group may be quiet
reads the journal, the proposals, the commit and apply indexes, the connected nodes and the leader's
progress of each; waking rewrites a leader's times of its followers or a follower's election deadline).
The leader's tick asks ``_may_quiesce`` and ``_settle_quiet``; a node's connection and disconnection
(``RaftCore``'s overrides of ``__onNodeConnected`` / ``__onNodeDisconnected`` delegate here) send a
``wake`` or end a follower's quiet; ``farewell`` tells the followers a leader replica stops.

Quiescence (ours, after CockroachDB's): an idle group stops heartbeating. A leader with nothing in flight
whose connected followers all hold its whole log marks its heartbeats ``quiesce``; a follower that holds
that log and commit index answers ``quiet`` and stops counting down to an election; once every follower
has, the leader goes quiet too and sends nothing. The group's safety is Raft's as ever (no rule of
voting, appending or committing changes); what a quiet follower relies on for liveness is its leader's
node connection, which carries pings and is closed by a silence (MuxHub): a disconnect, a ``leader_gone``
from a leader replica that stops, a new term, or any ordinary append ends the quiet, and the follower
holds an election after a fresh election timeout. A quiet leader counts a follower as heard from when
its node's connection last was; any proposal, transfer, membership change, disconnect, or a ``wake``
from a replica that knows no leader (a restarted or reopened one, or one whose leader's node
reconnects) ends the leader's quiet. So does the loss of a majority; a follower gone alone does not, nor
its reconnection (a follower that needs the leader sends ``wake``; one that committed entries were not
sent to never acknowledged the last index): a group goes quiet with its connected majority, or every
node down would keep thousands of groups heartbeating, and a node coming back would wake them all.
"""

from __future__ import annotations

import math
from typing import Any

from raftlog.consensus import decisions
from raftlog.consensus.core_base import LEADER, CoreBase
from raftlog.consensus.messages import LeaderGone


class Quiescence(CoreBase):
    """When a group may go quiet, going quiet and waking (see the module docstring)."""

    def _may_quiesce(self, now: float) -> bool:
        """A leader may stop heartbeating: nothing is in flight (no proposal queued or uncommitted, no
        transfer, no sync), a majority of the group is connected, and every connected follower holds the
        whole log, which is committed and applied here, so the commit index its heartbeat carries is the
        last index. A follower whose node is gone does not keep the group awake (with a node down, every
        group it was part of would otherwise heartbeat until it came back): its reconnection wakes the
        leader (or its ``wake``), which then brings it up to date."""
        if not self._config.quiesce or self._SyncObj__raftState != LEADER:
            return False
        journal = self._journal
        last = journal.last_index
        if (
            self._SyncObj__raftCommitIndex != last
            or self._SyncObj__raftLastApplied != last
            or journal.durable_index != last
            or journal.sync_pending
            or journal.sync_in_flight
            or self._held_replies
            or now < self._transfer_until
            # (a callback above the last index is a proposal of an earlier leadership whose entry was
            # truncated: it is answered when the log next reaches that index, which wakes the group anyway)
            or any(index <= last for index in self._SyncObj__commandsWaitingCommit)
            or self._SyncObj__commandsQueue._FastQueue__queue
            or self._SyncObj__onTickCallbacks
        ):
            return False
        connected = [node for node in self._SyncObj__otherNodes if node in self._SyncObj__connectedNodes]
        if not decisions.majority(len(connected) + 1, len(self._SyncObj__otherNodes) + 1):
            return False
        # (a connected learner must hold the whole log too: a quiet leader would send it nothing more)
        connected += [node for node in self._learner_nodes if node in self._SyncObj__connectedNodes]
        match = self._SyncObj__raftMatchIndex
        return all(match.get(node) == last for node in connected)

    def _quiet_holds(self, now: float) -> bool:
        """The group may be quiet now: the leader may quiesce and every connected follower acknowledged a
        quiescing heartbeat at the last index (a follower that connected since has not)."""
        if not self._may_quiesce(now):
            return False
        last = self._journal.last_index
        acks = self._quiet_acks
        connected = self._SyncObj__connectedNodes
        followers = self._SyncObj__otherNodes | self._learner_nodes
        return all(acks.get(node) == last for node in followers if node in connected)

    def _settle_quiet(self, now: float) -> None:
        """Leader, end of a tick: go quiet once every connected follower acknowledged a quiescing
        heartbeat at the last index; forget the acknowledgements (and wake) as soon as the group is not
        idle."""
        if not self._quiescing:
            self._quiet_acks.clear()
            if self._quiet:
                self._wake(now)
        elif not self._quiet and self._quiet_holds(now):
            self._go_quiet(now)

    def _go_quiet(self, now: float) -> None:
        self._quiet = True
        self._quiet_tick_at = now + self._config.quiet_tick_ms / 1000

    def _wake(self, now: float) -> None:
        """End this replica's quiet. A leader heartbeats at once and counts each connected follower as
        heard from when its node's connection last received (a quiet leader gets no replies, and a
        follower whose connection is gone keeps its old time: without a majority it steps down). A
        follower or candidate holds an election if it hears no leader within a fresh election timeout."""
        if not self._quiet:
            return
        self._quiet = False
        if self._SyncObj__raftState == LEADER:
            heard = self._credited_heard_at
            connected = self._SyncObj__connectedNodes
            last_heard = getattr(self._SyncObj__transport, "last_heard", None)
            last_index = self._journal.last_index
            for node in self._SyncObj__otherNodes:
                if node in connected:
                    at = now if last_heard is None else last_heard(node)
                    if at is not None and at > heard.get(node, 0.0):
                        heard[node] = at
                    if at is not None and at > self._heard_at.get(node, -math.inf):
                        self._heard_at[node] = at  # its quiet held while connected (see core_reads)
                    if self._quiet_acks.get(node, -1) >= last_index:
                        self._caught_up_at[node] = now  # it held the whole log through the quiet
            self._SyncObj__newAppendEntriesTime = 0.0
        else:
            self._SyncObj__raftElectionDeadline = now + self._election_timeout_s()
        self._quiet_acks.clear()

    def farewell(self) -> None:
        """Tick thread, when this replica stops while its node goes on (its group is closed, or it
        failed): a leader tells its followers, so that quiet ones do not wait for it."""
        if self._SyncObj__raftState != LEADER:
            return
        message: LeaderGone = {"type": "leader_gone", "term": self._SyncObj__raftCurrentTerm}
        for node in self._SyncObj__otherNodes | self._learner_nodes:
            self._send(node, message)

    def _on_node_connected(self, node: Any) -> None:
        self._SyncObj__connectedNodes.add(node)
        if (
            self._config.quiesce
            and self._SyncObj__raftState != LEADER
            and self._SyncObj__raftLeader in (None, node)
        ):
            # A replica that knows no leader (just opened, restarted) or whose leader's node is back: a
            # quiet leader there would otherwise stay silent (it does not wake for a reconnection).
            self._send(node, {"type": "wake", "term": self._SyncObj__raftCurrentTerm})

    def _on_node_disconnected(self, node: Any) -> None:
        # (A quiet leader keeps the follower's quiet acknowledgement: if the follower comes back
        # restarted, its replica asks for the leader with ``wake``; if entries committed meanwhile, the
        # acknowledgement is not of the last index and the leader wakes to send them.)
        self._SyncObj__connectedNodes.discard(node)
        if self._quiet and self._SyncObj__raftState != LEADER and node == self._SyncObj__raftLeader:
            self._wake(self._clock())  # (a quiet leader wakes in its tick: a follower is not connected)
