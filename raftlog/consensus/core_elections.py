"""Elections: standing for election, pre-vote, voting, check-quorum and counting a leader change.

``Elections``, one of ``RaftCore``'s jobs (a mixin over ``core_base.CoreBase``: an election reads and writes
the role, the term and vote, the leader, the election deadline, the quiet and the tallies). What to do is
``decisions``' (``campaign``, ``vote``, ``pre_vote``, ``in_lease``, ``vote_counts``, ``pre_vote_counts``,
``request_vote``, ``has_quorum``); this class gathers their inputs and carries their answers out: the
tick calls ``_start_election`` when the deadline passed and ``_step_down_without_quorum`` on a leader
(check-quorum), the message handler ``_on_request_vote`` and ``_on_pre_vote_granted``, and
``RaftCore``'s ``__onBecomeLeader`` override ``_on_became_leader``. ``campaign_if_new`` starts a new
group's early campaigns (see its docstring). A term and vote are persisted, durably, before any request
or grant leaves (``RaftCore``'s ``__setCurrentTerm``).

Pre-vote (Raft thesis 9.6, ``CoreConfig.pre_vote``): a follower whose election timeout passes asks its
peers ``request_vote`` with ``pre`` for the term after its own, changing and persisting nothing; a peer
grants it (``response_vote`` with ``pre``) when that term is above its own, the asker's log is at least
as up to date, and it has no leader it trusts: it heard from one within the shortest election timeout,
or is quiet with its leader's node connected, or started within the shortest election timeout (a replica
just opened knows no leader yet, and its grant would help a peer whose thread fell behind its leader's
heartbeats depose a leader the rest still hear). Only with a majority of grants does the asker raise its
term and hold the election. A node that restarts, or comes back from a partition, thus takes over no
group whose leader still works (without pre-vote its higher term deposed every such leader: thousands
of elections at once when a node with thousands of replicas came back). A leader that is asked answers
no and heartbeats at once (a follower that does not hear it); a quiet follower that is asked wakes and
asks its leader to heartbeat, and trusts it only for a fresh election timeout (the leader replica may
be gone while its node is not). Elections a leadership transfer asks for, and the early campaigns of a
new group (term 1), skip the pre-vote.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from raftlog.consensus import decisions
from raftlog.consensus.core_base import CANDIDATE, FOLLOWER, LEADER, CoreBase
from raftlog.consensus.core_quiet import Quiescence
from raftlog.consensus.messages import RequestVote, ResponseVote

logger = logging.getLogger("raftlog.consensus.core")  # RaftCore's lines, whichever of its jobs logs them


class Elections(Quiescence):
    """Elections, pre-vote, votes, check-quorum and leader changes (see the module docstring)."""

    def campaign_if_new(self, delay_s: float, attempts: int) -> bool:
        """Tick thread. A replica of a group that never held an election (term 0, no entry of a term) stands
        for election ``delay_s`` from now instead of after a random election timeout, and while it
        hears nothing from any peer of the group, again every two heartbeat intervals, up to
        ``attempts`` campaigns in all; then the usual random timeouts take over. The node calls it on
        the preferred replica of a new partition, so the partition is led where placement put its
        leader at once, with no leadership transfer later and no 1.5-3 s wait for a first election.

        Safe whenever called (an election always is), and it disturbs no leader: every early campaign
        asks for term 1 (a retry asks again in the term the first took), which a replica that has seen
        an election holds or has passed (it has voted in term 1, or ignores the stale term). A retry
        comes only after two heartbeat intervals with no message from the group. (A replica whose
        leader's heartbeats are all lost campaigns in a higher term at its election timeout, with
        pre-vote only if a majority has lost the leader too.) Returns whether the replica was new."""
        if attempts < 1 or delay_s < 0:
            raise ValueError(f"need attempts >= 1 and delay_s >= 0, got {attempts}, {delay_s}")
        if self._SyncObj__raftCurrentTerm != 0 or self._journal.last_term != 0:
            return False  # (a message from a peer of the group carries a term, so this covers "heard")
        self._early_campaigns = attempts
        self._SyncObj__raftElectionDeadline = self._clock() + delay_s
        self._notify_activity()  # the driver takes the new deadline from the tick that follows
        return True

    def _start_election(self, now: float) -> None:
        """The election deadline passed: take the step ``decisions.campaign`` chooses."""
        # An early campaign after the first (nothing heard from the group since: a message zeroes the
        # count) asks again in the term the first one took, term 1, never in a higher one: its requests
        # may have been lost while the connections were still opening, and a higher term would depose
        # a leader this replica has not heard from yet (seen in a loaded test run: term 1 -> 4).
        step = decisions.campaign(
            voting=self._voting,
            pre_vote_enabled=self._config.pre_vote,
            pre_vote_won=self._prevote_term == self._SyncObj__raftCurrentTerm + 1
            and self._has_majority(self._prevoters),
            early_campaigns=self._early_campaigns,
            transfer=self._SyncObj__transferInProgress,  # the leader asked for it (timeout_now)
            leader_lost=self._leader_lost,
            asked_this_term=self._SyncObj__raftCurrentTerm > 0
            and self._SyncObj__raftState == CANDIDATE
            and self._journal.getVotedForNodeId() == self.selfNode.id,
            heartbeat_interval_s=self._config.heartbeat_interval_ms / 1000,
        )
        if step.step == "wait":
            # (pre-votes asked while a voter may be granted after the configuration made it none)
            self._prevote_term = None
            self._SyncObj__raftElectionDeadline = now + self._election_timeout_s()
            return
        if step.step == "pre_vote":
            self._start_pre_vote(now)
            return
        self._prevote_term = None
        self._campaign_cause = cast(str, step.cause)
        if step.on_timeout:
            CoreBase.elections_on_timeout += 1
        self._early_campaigns = step.early_campaigns
        if step.retry_s is not None:
            self._SyncObj__raftElectionDeadline = now + step.retry_s
        else:
            self._SyncObj__raftElectionDeadline = now + self._election_timeout_s()
        if step.step == "ask_again":
            self._request_votes()
            return
        self._SyncObj__transferInProgress = False
        self._SyncObj__raftLeader = None
        self._SyncObj__setState(CANDIDATE)
        # setCurrentTerm persists term and vote with fsync before the request leaves.
        self._SyncObj__setCurrentTerm(self._SyncObj__raftCurrentTerm + 1, self.selfNode.id)
        self._voters = set()
        self._request_votes()
        self._SyncObj__onLeaderChanged()
        if self._has_majority(self._voters):
            self._SyncObj__onBecomeLeader()

    def _start_pre_vote(self, now: float) -> None:
        """Ask for pre-votes in the term after this one; nothing changes here but the deadline: the
        replica holds the election when a majority grants (or asks again after a fresh timeout)."""
        self._SyncObj__raftElectionDeadline = now + self._election_timeout_s()
        if self._SyncObj__raftLeader is not None:
            self._SyncObj__raftLeader = None  # it hears no leader (as a candidate would not)
            self._SyncObj__onLeaderChanged()
        self._prevote_term = self._SyncObj__raftCurrentTerm + 1
        self._prevoters = set()
        CoreBase.pre_vote_rounds += 1
        if self._has_majority(self._prevoters):
            self._start_election(now)  # a group of one
            return
        self._request_votes(self._prevote_term, pre=True)

    def _on_pre_vote(self, node: Any, message: RequestVote) -> None:
        term = message["term"]
        if term <= self._SyncObj__raftCurrentTerm:
            return
        now = self._clock()
        leader = self._SyncObj__raftLeader
        leading = self._SyncObj__raftState == LEADER
        journal = self._journal
        answer = decisions.pre_vote(
            term,
            self._SyncObj__raftCurrentTerm,
            leased=decisions.in_lease(
                now,
                leading=leading,
                leader_known=leader is not None,
                quiet=self._quiet,
                leader_connected=leader in self._SyncObj__connectedNodes,
                leader_seen_at=self._leader_seen_at,
                started_at=self._started_at,
                election_timeout_min_s=self._config.election_timeout_min_ms / 1000,
            ),
            leading=leading,
            quiet=self._quiet,
            up_to_date=decisions.log_up_to_date(
                message["last_log_term"], message["last_log_index"], journal.last_term, journal.last_index
            ),
        )
        if answer == "heartbeat":
            # a follower that does not hear this leader: heartbeat now (quiet or not)
            self._wake(now)
            self._SyncObj__newAppendEntriesTime = 0.0
        elif answer == "wake_leader":
            # the leader's node is connected, but its replica may be gone: trust it for one more
            # election timeout, in which a live leader answers this wake
            self._quiet = False
            self._leader_seen_at = now
            self._SyncObj__raftElectionDeadline = now + self._election_timeout_s()
            self._send(leader, {"type": "wake", "term": self._SyncObj__raftCurrentTerm})
        elif answer == "grant":
            CoreBase.pre_votes_granted += 1
            self._send(node, {"type": "response_vote", "term": term, "pre": True})
        elif answer == "trust_leader" and leader is None:
            CoreBase.pre_votes_refused_starting += 1  # (knowing no leader, only a start leases)

    def _on_pre_vote_granted(self, node: Any, message: ResponseVote) -> None:
        # (a learner's or a stranger's grant counts for nothing)
        if not decisions.pre_vote_counts(
            leading=self._SyncObj__raftState == LEADER,
            asking_term=self._prevote_term,
            reply_term=message["term"],
            current_term=self._SyncObj__raftCurrentTerm,
            from_voter=node in self._SyncObj__otherNodes,
        ):
            return
        self._prevoters.add(node.id)
        if self._has_majority(self._prevoters):
            self._start_election(self._clock())

    def _request_votes(self, term: int | None = None, pre: bool = False) -> None:
        journal = self._journal
        term = self._SyncObj__raftCurrentTerm if term is None else term
        message = decisions.request_vote(term, journal.last_index, journal.last_term, pre)
        for node in self._SyncObj__otherNodes:
            self._send(node, message)

    def _on_request_vote(self, node: Any, message: RequestVote) -> None:
        if message.get("pre") is True:
            self._on_pre_vote(node, message)
            return
        journal = self._journal
        answer = decisions.vote(
            message,
            node.id,
            current_term=self._SyncObj__raftCurrentTerm,
            leading=self._SyncObj__raftState == LEADER,
            voted_for=journal.getVotedForNodeId(),  # (the vote persisted is the vote held)
            own_last_term=journal.last_term,
            own_last_index=journal.last_index,
        )
        if answer.step_down:
            self._SyncObj__setState(FOLLOWER)
            self._SyncObj__raftLeader = None
        if answer.persist is not None:
            # the new term and the vote in one durable write (two, one after the other, cost an fsync
            # more for each vote of an election, thousands at once when a node with many leaders goes)
            self._SyncObj__setCurrentTerm(*answer.persist)  # durable before the reply
        if answer.reply is not None:
            self._SyncObj__raftElectionDeadline = self._clock() + self._election_timeout_s()
            self._send(node, answer.reply)

    def _step_down_without_quorum(self, now: float) -> None:
        heard = self._credited_heard_at
        if not decisions.has_quorum(
            now,
            [heard.get(node, 0) for node in self._SyncObj__otherNodes],
            len(self._SyncObj__otherNodes) + 1,
            self._config.leader_fallback_timeout_ms / 1000,
        ):
            logger.info(
                "group %s: leader %s heard from no majority for %d ms of its running time, stepping down "
                "in term %d (check_quorum)",
                self.group_id,
                self.node_id,
                self._config.leader_fallback_timeout_ms,
                self._SyncObj__raftCurrentTerm,
            )
            self._SyncObj__setState(FOLLOWER)
            self._SyncObj__raftLeader = None
            self._leader_lost = "check_quorum"

    def _on_became_leader(self) -> None:
        """Count and log the leader change (a new group's first leader is no change: logged at DEBUG).
        Counted by the winner, so each change counts once in the cluster (a dead leader counts nothing),
        with the cause it knows: "transfer" (asked by TimeoutNow: the leader balancer, a replica move, a
        full disk), "check_quorum" (it had led and stepped down for want of a majority), "leader_gone"
        (its leader said it stopped), "election" (its election timeout passed without a leader: a leader
        dead, cut off or too slow)."""
        old, cause = self._last_leader_id, self._campaign_cause
        self._last_leader_id = self.node_id
        self._leader_lost = None
        self._campaign_cause = "election"
        term = self._SyncObj__raftCurrentTerm
        if cause == "new_group":
            logger.debug("group %s: first leader %s in term %d", self.group_id, self.node_id, term)
            return
        CoreBase.leader_changes[cause] += 1
        # how long this replica had gone without its previous leader's word: what tells an election of a
        # stalled or dead leader's followers (about an election timeout or more) from one of a leader
        # still heard (a transfer's)
        silent = ""
        if old and old != self.node_id:
            silent = f", {old} last heard {self._clock() - self._leader_seen_at:.2f} s before"
        logger.info(
            "group %s: leader %s -> %s in term %d (%s%s)",
            self.group_id,
            old or "none",
            self.node_id,
            term,
            cause,
            silent,
        )
