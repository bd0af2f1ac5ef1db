"""Raft's decisions as ``RaftCore`` makes them, pure: election, vote, pre-vote, check-quorum and commit.

No sockets, threads, clock or pysyncobj: time comes in as ``now`` (seconds on the core's monotonic clock),
randomness as an object with a ``random()`` method (a seeded ``random.Random`` in a test; the ``random``
module itself in ``RaftCore``, the stream pysyncobj drew from), and each function answers what to do: the
new commit index, a follower's progress, a :class:`Vote` (what to persist, whether to step down, the
reply), a pre-vote answer, whether a leader still has a quorum, a :class:`Campaign` step. ``RaftCore``
(``core.py``) gathers the inputs from its state and pysyncobj's, and carries the answers out, in the order
the docstrings give.
Scripted tests: ``tests/consensus/test_decision_scripts.py`` over ``tests/consensus/testdata/*.txt``.

Counts are of voters only: a learner counts in no quorum (see ``core_membership.py``). ``voters`` is the
size of the voter set, this replica included.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from raftlog.consensus.messages import RequestVote, ResponseVote
from raftlog.errors import InvariantViolation

Node = TypeVar("Node")


class RandomSource(Protocol):
    """What an election timeout is drawn from: ``random.Random`` or the ``random`` module."""

    def random(self) -> float: ...


def majority(count: int, voters: int) -> bool:
    """``count`` of the ``voters`` (each vote or reply counted once, this replica's own included) are more
    than half of them."""
    return count > voters / 2


def election_timeout_s(minimum_s: float, maximum_s: float, rng: RandomSource) -> float:
    """A random election timeout in [``minimum_s``, ``maximum_s``): the spread that makes split votes rare
    (pysyncobj's ``__generateRaftTimeout``, the same arithmetic on the same draw)."""
    return minimum_s + (maximum_s - minimum_s) * rng.random()


# -- votes ---------------------------------------------------------------------------------------------
def log_up_to_date(last_log_term: int, last_log_index: int, own_last_term: int, own_last_index: int) -> bool:
    """A candidate's log (its last entry's term and index) is at least as up to date as this replica's
    (Raft 5.4.1): a later last term, or the same one and at least as long."""
    return last_log_term > own_last_term or (
        last_log_term == own_last_term and last_log_index >= own_last_index
    )


@dataclass(frozen=True, slots=True)
class Vote:
    """The answer to a vote request, carried out in this order: ``step_down`` (a newer term: become a
    follower that knows no leader), ``persist`` (term and vote, durable before anything leaves; a write
    that fails abandons the rest), then, if ``reply`` is set, a restarted election timer and the reply."""

    step_down: bool
    persist: tuple[int, str | None] | None
    reply: ResponseVote | None


IGNORED = Vote(step_down=False, persist=None, reply=None)


def vote(
    request: RequestVote,
    candidate: str,
    *,
    current_term: int,
    leading: bool,
    voted_for: str | None,
    own_last_term: int,
    own_last_index: int,
) -> Vote:
    """Raft's RequestVote receiver (5.2, 5.4.1): a request of an older term, or of its own term to a
    leader, is ignored; a newer term is adopted (the vote of the old one forgotten); the vote is granted
    once per term, to a candidate whose log is at least as up to date. The new term and the vote go in one
    durable write."""
    term = request["term"]
    newer = term > current_term
    if not newer and (leading or term < current_term):
        return IGNORED
    up_to_date = log_up_to_date(
        request["last_log_term"], request["last_log_index"], own_last_term, own_last_index
    )
    held = None if newer else voted_for
    grant = up_to_date and held in (None, candidate)
    persist = (term, candidate if grant else None) if newer or grant else None
    reply: ResponseVote | None = {"type": "response_vote", "term": term} if grant else None
    return Vote(step_down=newer, persist=persist, reply=reply)


def vote_counts(candidate: bool, reply_term: int, current_term: int, from_voter: bool) -> bool:
    """A vote a candidate counts: a reply of its own term, from a voter (once per node: the caller keeps a
    set)."""
    return candidate and reply_term == current_term and from_voter


# -- pre-vote (Raft thesis 9.6) ---------------------------------------------------------------------------
def in_lease(
    now: float,
    *,
    leading: bool,
    leader_known: bool,
    quiet: bool,
    leader_connected: bool,
    leader_seen_at: float,
    started_at: float,
    election_timeout_min_s: float,
) -> bool:
    """This replica trusts a leader and grants no pre-vote: it leads, or it heard its leader within the
    shortest election timeout, or, quiet, its leader's node is connected, or it knows no leader but
    started (was opened) within the shortest election timeout. A replica just started has had no time to
    hear a leader that works: as its own first election deadline is that far off, so is its first grant
    (else a node restarting under many groups helped any peer whose thread fell behind its leader's
    heartbeats depose a leader the rest still heard)."""
    if leading:
        return True
    if not leader_known:
        return now - started_at < election_timeout_min_s
    if quiet:
        return leader_connected
    return now - leader_seen_at < election_timeout_min_s


PreVoteAnswer = Literal["ignore", "heartbeat", "wake_leader", "trust_leader", "grant", "refuse"]


def pre_vote(
    term: int, current_term: int, *, leased: bool, leading: bool, quiet: bool, up_to_date: bool
) -> PreVoteAnswer:
    """The answer to a pre-vote request for ``term``, changing no term and no vote: "ignore" (not above
    this replica's term); within a lease (``in_lease``), "heartbeat" (a leader: heartbeat now, its asker
    does not hear it), "wake_leader" (a quiet follower: wake, ask the leader to heartbeat and trust it one
    more election timeout), "trust_leader" (a follower hearing its leader, or one just started, which may
    not have heard it yet: no answer); else "grant" for a log at least as up to date, "refuse" (no answer)
    for a stale one."""
    if term <= current_term:
        return "ignore"
    if leased:
        if leading:
            return "heartbeat"
        return "wake_leader" if quiet else "trust_leader"
    return "grant" if up_to_date else "refuse"


def pre_vote_counts(
    *, leading: bool, asking_term: int | None, reply_term: int, current_term: int, from_voter: bool
) -> bool:
    """A pre-vote grant the asker counts: it asks (not leading) for the term after its own, the grant is
    for that term, from a voter."""
    return (
        not leading
        and asking_term is not None
        and reply_term == asking_term
        and asking_term == current_term + 1
        and from_voter
    )


# -- elections --------------------------------------------------------------------------------------------
CampaignStep = Literal["wait", "pre_vote", "elect", "ask_again"]


@dataclass(frozen=True, slots=True)
class Campaign:
    """What a follower or candidate whose election deadline passed does: "wait" (not a voter: it never
    stands; its deadline moves on), "pre_vote" (ask for pre-votes in the term after its own, changing
    nothing), "elect" (raise its term, vote for itself, ask for votes), "ask_again" (a new group's early
    campaign retried: ask again in the term it already took). ``cause`` (elect, ask_again) is why it
    stands (``core_base.LEADER_CHANGE_CAUSES`` or "new_group"); ``early_campaigns`` the early campaigns
    left; ``retry_s``: the next deadline is this far off (an early campaign follows), None: a random
    election timeout."""

    step: CampaignStep
    cause: str | None = None
    early_campaigns: int = 0
    retry_s: float | None = None

    @property
    def on_timeout(self) -> bool:
        """An election held because no leader was heard (not a transfer's, not a new group's)."""
        return self.cause not in (None, "transfer", "new_group")


def campaign(
    *,
    voting: bool,
    pre_vote_enabled: bool,
    pre_vote_won: bool,
    early_campaigns: int,
    transfer: bool,
    leader_lost: str | None,
    asked_this_term: bool,
    heartbeat_interval_s: float,
) -> Campaign:
    """The step a replica whose election deadline passed takes. A learner waits. With pre-vote on, it
    first asks for pre-votes, unless a majority granted them already (``pre_vote_won``), or the leader
    asked it to stand (``transfer``, TimeoutNow), or it is a new group's early campaign (term 1 disturbs no
    leader). An early campaign after the first (``asked_this_term``: a candidate that voted for itself
    in a term above 0) asks again in the same term; early campaigns come two heartbeat intervals apart (a
    leader that reaches this replica has sent it a heartbeat by then)."""
    if not voting:
        return Campaign("wait")
    if not (pre_vote_won or not pre_vote_enabled or early_campaigns > 0 or transfer):
        return Campaign("pre_vote", early_campaigns=early_campaigns)
    if transfer:
        cause = "transfer"
    elif early_campaigns > 0:
        cause = "new_group"
    else:
        cause = leader_lost or "election"
    repeat = early_campaigns > 0 and asked_this_term
    left = max(0, early_campaigns - 1)
    retry_s = heartbeat_interval_s * 2 if left else None
    return Campaign("ask_again" if repeat else "elect", cause, left, retry_s)


def request_vote(term: int, last_index: int, last_term: int, pre: bool = False) -> RequestVote:
    """The request a candidate (or a pre-vote asker, ``pre``) sends every other voter."""
    message: RequestVote = {
        "type": "request_vote",
        "term": term,
        "last_log_index": last_index,
        "last_log_term": last_term,
    }
    if pre:
        message["pre"] = True
    return message


def late_deadline(
    now: float,
    deadline: float,
    *,
    ticked_at: float | None,
    deferred_deadline: float | None,
    tolerance_s: float,
    heartbeat_interval_s: float,
) -> float | None:
    """A starved thread: a follower or candidate whose election deadline passed, first ticked since more
    than ``tolerance_s`` after it, was itself not run on time; its deadline is put off (the new one
    returned) by two heartbeat intervals, once, in which a live leader's heartbeat reaches it. None: the
    deadline stands."""
    if (
        deadline == deferred_deadline
        or ticked_at is None
        or ticked_at >= deadline
        or now - deadline <= tolerance_s
    ):
        return None
    return now + 2 * heartbeat_interval_s


# -- check-quorum and reads ---------------------------------------------------------------------------------
def has_quorum(now: float, heard_at: Iterable[float], voters: int, fallback_s: float) -> bool:
    """Check-quorum: a leader still leads while it and the other voters it heard from within
    ``fallback_s`` (``heard_at``: each other voter's last reply, 0 for none) are a majority."""
    deadline = now - fallback_s
    heard = 1 + sum(1 for at in heard_at if at > deadline)
    return majority(heard, voters)


def stall_s(
    now: float, ticked_at: float | None, *, led_when_ticked: bool, leading: bool, heartbeat_interval_s: float
) -> float:
    """A starved thread: the time past twice the heartbeat interval since a leader's previous tick (as a
    leader, not quiet), which it did not run; 0 for none."""
    if ticked_at is None or not led_when_ticked or not leading:
        return 0.0
    return max(0.0, now - ticked_at - 2 * heartbeat_interval_s)


def credit_stall(heard_at: Mapping[Node, float], now: float, stall: float) -> dict[Node, float]:
    """Each follower's last-heard time with a leader's ``stall`` added (never past ``now``), so that
    check-quorum counts only time the leader ran."""
    return {node: min(now, at + stall) for node, at in heard_at.items()}


def quorum_heard_at(now: float, heard_at: Collection[float]) -> float:
    """Reads: when the other voters that, with the leader, make a majority were last heard (``heard_at``:
    each other voter's time, as it arrived; -inf for none); ``now`` for a lone voter."""
    if not heard_at:
        return now
    if len(heard_at) <= 2:
        return max(heard_at)  # (a group of three: itself and one of the two)
    times = sorted(heard_at, reverse=True)
    return times[(len(times) + 1) // 2 - 1]


# -- replication and commit ----------------------------------------------------------------------------------
def commit_index(
    commit: int,
    *,
    current_term: int,
    own_index: int,
    match_indexes: Iterable[int],
    last_index: int,
    term_at: Callable[[int], int | None],
) -> int:
    """A leader's commit index: the highest index a majority of the voters holds (``own_index``: what the
    leader holds durably; ``match_indexes``: each other voter's acknowledged index), if that entry is of
    the current term (Raft 5.4.2: an earlier term's entry commits only under one of this term); else
    ``commit`` unchanged. It never moves back. A majority above the leader's own log is a broken
    invariant."""
    indexes = sorted([own_index, *match_indexes], reverse=True)
    quorum_index = indexes[len(indexes) // 2]
    if quorum_index <= commit:
        return commit
    if quorum_index > last_index:
        raise InvariantViolation(
            f"majority match index {quorum_index} above leader last index {last_index} (match {indexes})"
        )
    if term_at(quorum_index) != current_term:
        return commit  # only entries of the current term commit by counting (Raft 5.4.2)
    return quorum_index


def progress(
    match: int, next_index: int, *, reply_next_index: int, success: bool, reset: bool
) -> tuple[int, int]:
    """A leader's progress of one follower, (match index, next index to send), after the follower's reply
    to an append (half of the acknowledged-write-loss fix: replies arrive out of order). A success
    acknowledges ``reply_next_index - 1`` and moves neither index back (a stale success is older than
    what is known); a rejection with ``reset`` resends from the follower's hint, but never from below
    what it acknowledged (``match + 1``) nor from beyond where sending stood; any other reply changes
    nothing. (An acknowledgement beyond the leader's log is the caller's broken invariant to check.)"""
    if success:
        return max(match, reply_next_index - 1), max(next_index, reply_next_index)
    if reset:
        return match, max(match + 1, min(reply_next_index, next_index))
    return match, next_index


def caught_up_at(
    matched: int, last_index: int, now: float, previous: tuple[float, int] | None, caught_up: float | None
) -> float | None:
    """When a follower whose reply holding up to ``matched`` came at ``now`` was last caught up with the
    leader, as Kafka's ``LeaderState.ReplicaState.updateFollowerState`` says it (DescribeQuorum's
    LastCaughtUpTimestamp): now if it holds ``last_index``, the leader's last index; else as of its
    ``previous`` reply (when, the leader's last index then) if it now holds what the leader had then (a
    follower always a little behind a leader that keeps appending); None: unchanged from ``caught_up``."""
    if matched >= last_index:
        return now
    since = -math.inf if caught_up is None else caught_up
    if previous is not None and 0 < previous[1] <= matched and previous[0] > since:
        return previous[0]
    return None
