"""A leader's account of each member's progress in time, as Kafka's leader gives it in DescribeQuorum
(``LastFetchTimestamp``, ``LastCaughtUpTimestamp``): when it last heard from each, and when each last
held its whole log. Three RaftCore replicas on the scripted network, on a clock of the test's."""

from __future__ import annotations

import time
from typing import Any

from sim_cluster import F, FakeClock, G, L, PatchedSimReplica, Script, connect, disconnect

from raftlog.consensus.group import _member_times

ID = {L: "127.0.0.1:1", F: "127.0.0.1:2", G: "127.0.0.1:3"}


def _script(clock: FakeClock) -> Script:
    script = Script(PatchedSimReplica, options={name: {"clock": clock} for name in (L, F, G)})
    script.elect(L, [F, G])
    return script


def _propose(script: Script, sequence: int) -> None:
    script.nodes[L].propose(sequence, lambda result, error: None)
    script.tick(L)


def _last_index(node: Any) -> int:
    return int(node.journal.last_index)


def test_each_follower_heard_and_caught_up_when_its_reply_came_on_the_leader_s_clock() -> None:
    clock = FakeClock()
    script = _script(clock)
    leader = script.nodes[L]
    assert leader.member_ages(clock.now) == {ID[F]: (0.0, 0.0), ID[G]: (0.0, 0.0)}
    clock.now += 5
    assert leader.member_ages(clock.now) == {ID[F]: (5.0, 5.0), ID[G]: (5.0, 5.0)}
    # G cut off: F keeps replying and holding the log, G's times stand where they were
    disconnect(script, L, G)
    _propose(script, 1)
    script.settle([L, F])
    clock.now += 2
    script.force_send(L)
    script.settle([L, F])
    assert leader.member_ages(clock.now) == {ID[F]: (0.0, 0.0), ID[G]: (7.0, 7.0)}
    # followers answer only the leader: they report no times of their own
    assert script.nodes[F].member_ages(clock.now) == {}


def test_a_follower_heard_while_behind_is_not_caught_up_now() -> None:
    clock = FakeClock()
    script = _script(clock)
    leader = script.nodes[L]
    disconnect(script, L, G)
    clock.now += 3
    _propose(script, 1)  # sent to F
    script.deliver(L, F)  # F appends it and replies
    _propose(script, 2)  # the leader's log grows before F's reply comes
    script.deliver(F, L)
    heard, caught_up = leader.member_ages(clock.now)[ID[F]]
    assert heard == 0.0
    assert caught_up == 3.0, "caught up as of the election, not when it replied behind the leader's log"


def test_a_follower_always_a_little_behind_is_caught_up_as_of_its_previous_reply() -> None:
    """Kafka's rule (LeaderState.ReplicaState.updateFollowerState): a reply that holds the leader's last
    index of the follower's previous reply makes it caught up as of that previous reply, so a follower of a
    leader that keeps appending is not reported as falling behind for good."""
    clock = FakeClock()
    script = _script(clock)
    leader = script.nodes[L]
    disconnect(script, L, G)
    clock.now += 1
    _propose(script, 1)  # X, sent to F
    script.deliver(L, F)  # F holds X and replies
    _propose(script, 2)  # Y appended (and sent) before that reply comes
    clock.now += 1  # t1 = 1002: F's reply to X arrives while the leader's last index is Y's
    script.network.deliver(F, L)
    script.tick(L)
    last_at_t1 = _last_index(leader)
    assert leader.member_ages(clock.now)[ID[F]] == (0.0, 2.0)
    script.deliver(L, F)  # F holds Y and replies
    _propose(script, 3)  # Z appended before that reply comes
    clock.now += 1  # t2 = 1003: F's reply holds Y (the last index at t1) but not Z
    script.network.deliver(F, L)
    script.tick(L)
    assert _last_index(leader) > last_at_t1
    assert leader.member_ages(clock.now)[ID[F]] == (0.0, 1.0), "caught up as of its previous reply (t1)"
    connect(script, L, G)


def test_the_status_gives_wall_clock_ms_the_leader_itself_now() -> None:
    clock = FakeClock()
    script = _script(clock)
    clock.now += 4
    before_ms = time.time() * 1000
    heard, caught_up = _member_times(script.nodes[L])
    after_ms = time.time() * 1000
    assert set(heard) == set(caught_up) == {ID[L], ID[F], ID[G]}
    assert before_ms - 1 <= heard[ID[L]] <= after_ms and caught_up[ID[L]] == heard[ID[L]]
    for node in (ID[F], ID[G]):
        assert before_ms - 4000 - 1 <= heard[node] <= after_ms - 4000
        assert before_ms - 4000 - 1 <= caught_up[node] <= after_ms - 4000
    assert _member_times(script.nodes[F]) == ({}, {})


def test_a_quiet_leader_counts_its_connected_followers_heard_and_caught_up_now() -> None:
    """A quiet group sends nothing (see RaftCore, "Quiescence"): its followers, which acknowledged the
    leader's whole log to go quiet, hold it while their node stays connected; one cut off does not."""
    clock = FakeClock()
    options = {"clock": clock, "quiesce": True, "pre_vote": True}
    script = Script(PatchedSimReplica, options={name: options for name in (L, F, G)})
    script.elect(L, [F, G])
    for _ in range(5):
        script.force_send(L)
        script.settle([L, F, G])
    assert script.nodes[L].quiet
    clock.now += 60
    disconnect(script, L, G)
    assert script.nodes[L].member_ages(clock.now) == {ID[F]: (0.0, 0.0), ID[G]: (60.0, 60.0)}
    # a proposal wakes it: F held the whole log through the quiet, so it was caught up until now
    _propose(script, 1)
    assert not script.nodes[L].quiet
    assert script.nodes[L].member_ages(clock.now)[ID[F]][1] == 0.0  # caught up


def test_a_follower_back_while_its_group_is_quiet_is_heard_but_not_caught_up() -> None:
    """The group went quiet without G (cut off, entries committed meanwhile): G's node back is heard from,
    but G never acknowledged the leader's whole log, so it is caught up only as of its last reply."""
    clock = FakeClock()
    options = {"clock": clock, "quiesce": True, "pre_vote": True}
    script = Script(PatchedSimReplica, options={name: options for name in (L, F, G)})
    script.elect(L, [F, G])
    disconnect(script, L, G)
    _propose(script, 1)
    for _ in range(5):
        script.force_send(L)
        script.settle([L, F])
    assert script.nodes[L].quiet
    clock.now += 30
    connect(script, L, G)  # what G sends on connecting (a wake) is not delivered yet
    assert script.nodes[L].quiet
    assert script.nodes[L].member_ages(clock.now) == {ID[F]: (0.0, 0.0), ID[G]: (0.0, 30.0)}


def test_the_caught_up_rule_is_kafkas_and_pure() -> None:
    """``decisions.caught_up_at``: now when the reply holds the leader's last index; else as of the previous
    reply when it now holds what the leader had then (a clock at 0.0 included); else unchanged."""
    from raftlog.consensus.decisions import caught_up_at

    assert caught_up_at(10, 10, 5.0, None, None) == 5.0
    assert caught_up_at(9, 10, 5.0, (0.0, 9), None) == 0.0  # the previous reply's time, even at 0.0
    assert caught_up_at(9, 10, 5.0, (4.0, 9), 4.5) is None  # already caught up since
    assert caught_up_at(8, 10, 5.0, (4.0, 9), None) is None  # still behind what the leader had then
    assert caught_up_at(9, 10, 5.0, None, 1.0) is None
