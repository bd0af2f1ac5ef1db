"""A core's timed decisions read the clock it is given, and nothing else: on a clock of the test's, no
election starts and no heartbeat goes however much real time passes, and each comes as soon as that clock
passes its time (elections after the election timeout, heartbeats after the heartbeat period)."""

from __future__ import annotations

from sim_cluster import F, FakeClock, G, L, PatchedSimReplica, Script

ELECTION_TIMEOUT_MAX_S = 30.0  # PatchedSimReplica's
HEARTBEAT_PERIOD_S = 1.0


def _script(clock: FakeClock) -> Script:
    return Script(PatchedSimReplica, options={name: {"clock": clock} for name in (L, F, G)})


def _leaders(script: Script) -> list[str]:
    return [name for name, node in script.nodes.items() if node._isLeader()]


def test_an_election_starts_when_the_core_s_clock_passes_the_timeout_not_the_wall_clock() -> None:
    clock = FakeClock()
    script = _script(clock)
    for _ in range(20):  # real time passes; the cores' clock stands
        script.settle([L, F, G])
    assert _leaders(script) == []
    assert all(node._SyncObj__raftCurrentTerm == 0 for node in script.nodes.values())
    # just past the earliest deadline (a replica first ticked long after its deadline waits a little
    # more for a leader: test_starved_thread.py)
    clock.now = min(node._SyncObj__raftElectionDeadline for node in script.nodes.values()) + 0.001
    assert clock.now <= 1000.0 + ELECTION_TIMEOUT_MAX_S + 0.001
    script.tick(L, F, G)
    script.settle([L, F, G])
    assert len(_leaders(script)) == 1


def test_a_leader_heartbeats_on_its_clock() -> None:
    clock = FakeClock()
    script = _script(clock)
    script.elect(L, [F, G])
    script.settle([L, F, G])
    for _ in range(10):
        script.tick(L)
        assert script.network.deliver(L, F) == 0, "a heartbeat before the period passed on the clock"
    clock.now += HEARTBEAT_PERIOD_S + 0.001
    script.tick(L)
    assert script.network.deliver(L, F) >= 1
    assert script.network.deliver(L, G) >= 1


def test_a_follower_that_hears_its_leader_on_time_never_campaigns() -> None:
    clock = FakeClock()
    script = _script(clock)
    script.elect(L, [F, G])
    term = script.nodes[L]._SyncObj__raftCurrentTerm
    for _ in range(100):  # 100 heartbeat periods, far past any election timeout
        clock.now += HEARTBEAT_PERIOD_S
        script.tick(L)
        script.settle([L, F, G])
    assert _leaders(script) == [L]
    assert all(node._SyncObj__raftCurrentTerm == term for node in script.nodes.values())
