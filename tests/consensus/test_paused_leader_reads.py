"""A leader answers reads from its own state only while it can show that no other leader was elected
(RaftCore, "Reads"), on a clock of the test's and a scripted network: a leader whose process was paused
past the election timeout, while the others elected a new leader and committed more, refuses every read on
waking, although the replies to its old heartbeats (read from its sockets first) look fresh, until a no-op
of its term is acknowledged by a majority; the newer term that answers that no-op deposes it. A leader
paused less than that confirms and reads again; one whose followers fall silent stops reading long before
any of them may stand; a quiet one reads while its followers' connections last; one that sent TimeoutNow
waits too.

Each round of a replica's driver thread is what ``raftlog.consensus.driver.Driver`` does to its
``Liveness`` around a tick. The simulated replicas' timing (``PatchedSimReplica``): heartbeats every 1 s,
election timeouts 20-30 s (read lease 10 s, stall 5 s), check-quorum after 30 s."""

from __future__ import annotations

from sim_cluster import F, FakeClock, G, L, PatchedSimReplica, Script, disconnect

from raftlog.consensus.core import RaftCore
from raftlog.consensus.interface import (
    READ_NO_QUORUM,
    READ_NOT_LEADER,
    READ_STANDING_STILL,
    READ_UNCONFIRMED,
)
from raftlog.consensus.liveness import Liveness

NAMES = (L, F, G)
ELECTION_TIMEOUT_MIN_S = 20.0
ELECTION_TIMEOUT_MAX_S = 30.0
READ_LEASE_S = ELECTION_TIMEOUT_MIN_S / 2
STEP_S = 1.0  # one heartbeat interval


class Cluster:
    """Three replicas on a scripted network, each driven by rounds of a driver thread of its own."""

    def __init__(self, quiesce: bool = False) -> None:
        self.clock = FakeClock()
        options = {name: {"clock": self.clock, "quiesce": quiesce} for name in NAMES}
        self.script = Script(PatchedSimReplica, options=options)
        self.nodes: dict[str, RaftCore] = self.script.nodes
        for node in self.nodes.values():
            node.liveness = Liveness(self.clock.now, node.read_stall_s)

    def round(self, *names: str) -> None:
        """A round of each named replica's driver thread, now: it runs, ticks its core, sleeps."""
        for name in names:
            liveness = self.nodes[name].liveness
            assert liveness is not None
            liveness.running(self.clock.now)
            self.script.tick(name)
            liveness.waiting(self.clock.now, 0.0)

    def idle(self, seconds: float) -> None:
        """Time passes while every driver thread runs (a round each heartbeat interval), ticking no core
        (a quiet one is ticked only at its rare timer)."""
        end = self.clock.now + seconds
        while self.clock.now < end:
            self.clock.now = min(end, self.clock.now + STEP_S)
            for node in self.nodes.values():
                assert node.liveness is not None
                node.liveness.running(self.clock.now)
                node.liveness.waiting(self.clock.now, STEP_S)

    def refusal(self, name: str) -> str | None:
        return self.nodes[name].read_refusal(self.clock.now)

    def term(self, name: str) -> int:
        return int(self.nodes[name]._SyncObj__raftCurrentTerm)

    def elected(self) -> Cluster:
        self.script.elect(L, [F, G])
        self.script.settle(list(NAMES))
        self.round(*NAMES)
        return self

    def propose(self, name: str, value: int) -> None:
        self.nodes[name].propose(value, None)


def test_a_leader_paused_past_the_election_timeout_reads_nothing_on_waking_until_deposed() -> None:
    cluster = Cluster().elected()
    script, nodes = cluster.script, cluster.nodes
    cluster.propose(L, 1)
    cluster.round(L)
    script.settle(list(NAMES))
    assert cluster.refusal(L) is None, "a leader heard by its followers does not read"
    # A last entry goes out just before the pause: the followers' replies wait in the leader's sockets.
    cluster.propose(L, 2)
    cluster.round(L)
    for follower in (F, G):
        script.network.deliver(L, follower)
        cluster.round(follower)
    assert script.network.pending(F, L) and script.network.pending(G, L)
    paused_at = cluster.clock.now

    # L is stopped (SIGSTOP); the others run on, time passes, one of them is elected and commits more.
    while not any(nodes[n]._isLeader() for n in (F, G)):
        cluster.clock.now += STEP_S
        cluster.round(F, G)
        script.settle([F, G])
        assert cluster.clock.now - paused_at < 3 * ELECTION_TIMEOUT_MAX_S, "nobody was elected"
    new = F if nodes[F]._isLeader() else G
    cluster.propose(new, 3)
    cluster.round(new)
    script.settle([F, G])
    assert nodes[new]._SyncObj__raftCommitIndex > nodes[L]._SyncObj__raftCommitIndex
    assert nodes[L]._isLeader() and cluster.term(L) < cluster.term(new)
    assert cluster.clock.now - paused_at > ELECTION_TIMEOUT_MIN_S  # paused past the election timeout

    # L runs again. Before its driver thread does, a read (on the event loop) sees it standing still.
    assert cluster.refusal(L) == READ_STANDING_STILL
    # Its driver's first round counts the stall; it reads the old replies first (term 1, fresh to it).
    stalls = nodes[L].liveness.stalls if nodes[L].liveness is not None else -1
    script.network.deliver(F, L, 1)
    script.network.deliver(G, L, 1)
    cluster.round(L)
    assert nodes[L].liveness is not None and nodes[L].liveness.stalls == stalls + 1
    assert nodes[L]._isLeader(), "deposed before it heard the new term"
    assert nodes[L]._quorum_heard_at(cluster.clock.now) == cluster.clock.now, "the old replies look fresh"
    assert cluster.refusal(L) == READ_UNCONFIRMED
    # A read asks for a confirmation: a no-op of its term, which the new term answers.
    nodes[L].confirm_leadership()
    cluster.round(L)
    assert cluster.refusal(L) == READ_UNCONFIRMED
    for _ in range(10):
        if not nodes[L]._isLeader():
            break
        script.settle(list(NAMES))
        cluster.round(L)
        assert cluster.refusal(L) is not None, "the deposed leader read before it heard the new term"
    assert cluster.refusal(L) == READ_NOT_LEADER
    assert cluster.term(L) == cluster.term(new)


def test_a_leader_paused_shorter_than_the_election_timeout_reads_again_once_confirmed() -> None:
    cluster = Cluster().elected()
    script, nodes = cluster.script, cluster.nodes
    term = cluster.term(L)
    cluster.clock.now += nodes[L].read_stall_s + STEP_S  # a stall, far from any election timeout
    assert cluster.refusal(L) == READ_STANDING_STILL
    cluster.round(L)
    assert cluster.refusal(L) == READ_UNCONFIRMED
    nodes[L].confirm_leadership()
    cluster.round(L)
    script.settle(list(NAMES))
    cluster.round(L)
    assert cluster.refusal(L) is None
    assert nodes[L]._isLeader() and {cluster.term(n) for n in NAMES} == {term}


def test_a_leader_whose_followers_fall_silent_stops_reading_before_any_may_stand() -> None:
    cluster = Cluster().elected()
    script, nodes = cluster.script, cluster.nodes
    heard_at = cluster.clock.now  # the followers' last replies (and their last append from L)
    refused_at = None
    while refused_at is None:
        cluster.clock.now += STEP_S / 4
        cluster.round(L)  # L runs and heartbeats; nothing reaches it any more (a partition)
        script.network.links.clear()
        if cluster.refusal(L) is not None:
            refused_at = cluster.clock.now
    assert cluster.refusal(L) == READ_NO_QUORUM
    assert refused_at - heard_at <= READ_LEASE_S + STEP_S / 4
    assert refused_at < heard_at + ELECTION_TIMEOUT_MIN_S, "it read while a follower could be elected"
    assert nodes[L]._isLeader(), "check-quorum (30 s) has not stepped it down yet: only its reads stopped"


def test_a_quiet_leader_reads_while_its_followers_stay_connected_and_not_once_they_are_gone() -> None:
    cluster = Cluster(quiesce=True).elected()
    script, nodes = cluster.script, cluster.nodes
    for _ in range(5):
        if all(node.quiet for node in nodes.values()):
            break
        script.force_send(L)
        script.settle(list(NAMES))
    assert all(node.quiet for node in nodes.values()), "the idle group did not go quiet"
    cluster.idle(3 * READ_LEASE_S)  # no reply for long: a quiet follower stands for no election
    cluster.round(L)
    assert cluster.refusal(L) is None, "a quiet leader with its followers connected refused a read"
    disconnect(script, L, F)  # their node connections close: they may stand a timeout from now
    disconnect(script, L, G)
    assert cluster.refusal(L) == READ_NO_QUORUM
    cluster.round(L)  # it wakes, and check-quorum (30 s, idle as long) steps it down too
    assert cluster.refusal(L) in (READ_NO_QUORUM, READ_NOT_LEADER)


def test_a_leader_that_sent_timeout_now_reads_nothing_until_confirmed() -> None:
    cluster = Cluster().elected()
    nodes = cluster.nodes
    answers: list[int] = []
    nodes[L].request_transfer(F, lambda result, reason: answers.append(reason))
    cluster.round(L)
    assert answers == [0] and cluster.script.network.pending(L, F)[-1] == "timeout_now"
    assert nodes[L]._isLeader()
    assert cluster.refusal(L) == READ_UNCONFIRMED, "its target may win without asking it"


def test_liveness_counts_a_round_that_came_or_lasted_past_its_bound() -> None:
    liveness = Liveness(0.0, stall_s=1.0)
    liveness.running(0.0)
    liveness.waiting(0.2, 5.0)  # sleeps up to 5 s: woken at 4 s it is on time
    liveness.running(4.0)
    assert liveness.stalls == 0 and not liveness.standing_still(4.5)
    liveness.waiting(4.1, 0.0)
    assert liveness.standing_still(5.2)  # overdue, seen from another thread before it runs
    liveness.running(5.2)
    assert liveness.stalls == 1 and liveness.stalled_at == 5.2
    liveness.waiting(6.3, 0.0)  # the round itself ran 1.1 s
    assert liveness.stalls == 2
    liveness.lower_stall_s(0.5)
    liveness.lower_stall_s(3.0)
    assert liveness.stall_s == 0.5
