"""Time in which a replica's own thread did not run is not held against its peers (RaftCore, "Starved
thread"), on a clock of the test's: a leader whose thread was starved past its check-quorum timeout does
not step down, a follower ticked late after its election deadline waits for the leader's heartbeat
before it stands; yet a leader whose followers are really silent still steps down, and a follower whose
leader is really gone still stands. Every leader change is counted and logged with its cause.

The simulated replicas' timing (``PatchedSimReplica``): heartbeats every 1 s, election timeouts 20-30 s,
check-quorum after 30 s."""

from __future__ import annotations

import logging

import pytest
from sim_cluster import F, FakeClock, G, L, PatchedSimReplica, Script

from raftlog.consensus.core import RaftCore

FALLBACK_S = 30.0
ELECTION_TIMEOUT_MAX_S = 30.0


def _script(clock: FakeClock) -> Script:
    script = Script(PatchedSimReplica, options={name: {"clock": clock} for name in (L, F, G)})
    script.elect(L, [F, G])
    script.settle([L, F, G])
    return script


def _term(script: Script, name: str) -> int:
    return int(script.nodes[name]._SyncObj__raftCurrentTerm)


def test_a_leader_whose_thread_was_starved_past_the_check_quorum_timeout_keeps_leading() -> None:
    clock = FakeClock()
    script = _script(clock)
    term = _term(script, L)
    clock.now += FALLBACK_S + 10  # no replica of the group ran meanwhile (a loaded machine)
    script.tick(L)
    assert script.nodes[L]._isLeader(), "stepped down for the followers' silence while it did not run"
    script.settle([L, F, G])
    assert script.nodes[L]._isLeader()
    assert {_term(script, name) for name in (L, F, G)} == {term}


def test_a_follower_ticked_late_after_its_deadline_waits_for_the_leader_instead_of_standing() -> None:
    clock = FakeClock()
    script = _script(clock)
    term = _term(script, L)
    clock.now += ELECTION_TIMEOUT_MAX_S + 10  # every replica starved: no heartbeat went or came
    script.tick(F, G)  # the followers happen to run first
    assert not script.nodes[F]._SyncObj__raftState and not script.nodes[G]._SyncObj__raftState, (
        "a follower stood for election on its first tick after a stall"
    )
    script.tick(L)  # the leader runs: its heartbeat is due
    script.settle([L, F, G])
    assert script.nodes[L]._isLeader()
    assert {_term(script, name) for name in (L, F, G)} == {term}


def test_a_follower_ticked_late_still_stands_when_no_leader_is_heard_after_all() -> None:
    clock = FakeClock()
    script = _script(clock)
    term = _term(script, L)
    script.network.crash(L)
    clock.now += ELECTION_TIMEOUT_MAX_S + 10
    script.tick(F, G)  # late: both put their deadline off by two heartbeat intervals
    assert _term(script, F) == term and _term(script, G) == term
    clock.now += 2.5  # past the deadline put off, ticked on time now
    script.tick(F)
    assert _term(script, F) == term + 1, "a late follower never stood although its leader was gone"
    script.settle([F, G])
    assert script.nodes[F]._isLeader()


def test_a_follower_ticked_on_time_stands_at_its_deadline() -> None:
    clock = FakeClock()
    script = _script(clock)
    term = _term(script, L)
    script.network.crash(L)
    clock.now = script.nodes[F]._SyncObj__raftElectionDeadline + 0.01
    script.tick(F)
    assert _term(script, F) == term + 1


def test_a_leader_ticked_on_time_whose_followers_are_silent_steps_down(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    script = _script(clock)
    leader = script.nodes[L]
    before = dict(RaftCore.leader_changes)
    with caplog.at_level(logging.INFO, logger="raftlog.consensus.core"):
        for _ in range(int(FALLBACK_S) + 2):  # ticked every second; nothing of F and G reaches it
            clock.now += 1.0
            script.tick(L)
        assert not leader._isLeader(), "a leader that ran all along kept leading with no follower heard"
        assert "(check_quorum)" in caplog.text
        # it stood again and won: the change is counted with why the group lost its leader
        leader._SyncObj__raftElectionDeadline = 0
        script.tick(L)
        script.settle([L, F, G])
    assert leader._isLeader()
    assert RaftCore.leader_changes["check_quorum"] == before["check_quorum"] + 1
    assert f"leader {L} -> {L} in term {_term(script, L)} (check_quorum)" in caplog.text


def test_a_leader_change_is_counted_once_by_the_new_leader_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    script = _script(clock)
    before = dict(RaftCore.leader_changes)
    clock.now += 2.5  # F last heard L as the script settled
    with caplog.at_level(logging.INFO, logger="raftlog.consensus.core"):
        script.elect(F, [L, G])
    assert RaftCore.leader_changes["election"] == before["election"] + 1
    assert sum(RaftCore.leader_changes.values()) == sum(before.values()) + 1
    # with how long the winner had not heard the leader it replaced
    assert (
        f"leader {L} -> {F} in term {_term(script, F)} (election, {L} last heard 2.50 s before)"
        in caplog.text
    )
