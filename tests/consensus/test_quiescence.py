"""Quiescence: an idle group stops heartbeating, and every way it must wake up does wake it.

Three RaftCore replicas on the scripted network (``sim_cluster``); time passing is played by putting a
leader's heartbeat time or a follower's election deadline in the past and ticking it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from sim_cluster import F, FakeClock, G, L, PatchedSimReplica, Script, connect, disconnect

from raftlog.consensus.config import CoreConfig
from raftlog.consensus.file_journal import FileJournal

NAMES = [L, F, G]
QUIET = {"quiesce": True, "pre_vote": True}  # as a node runs its groups (CoreConfig.for_node)


def quiet_script(tmp_path: Path) -> Script:
    """Three quiescing replicas on FileJournals under ``tmp_path``, L elected and one proposal committed
    everywhere, then idle until quiet."""
    journals = {name: FileJournal(journal_directory(tmp_path, name)) for name in NAMES}
    script = Script(PatchedSimReplica, dict(journals), {name: QUIET for name in NAMES})
    script.elect(L, [F, G])
    propose(script, L, 1)
    script.catch_up(L, [F, G])
    until_quiet(script)
    return script


def journal_directory(tmp_path: Path, name: str) -> str:
    return str(tmp_path / name.replace(":", "_"))


def propose(script: Script, leader: str, sequence: int) -> list[int]:
    acked: list[int] = []
    script.nodes[leader].propose(sequence, lambda result, error: acked.append(error))
    script.tick(leader)
    script.settle(NAMES)
    return acked


def until_quiet(script: Script, rounds: int = 5) -> None:
    for _ in range(rounds):
        script.force_send(L)
        script.settle(NAMES)
        if all(script.nodes[name].quiet for name in NAMES):
            return
    states = {name: script.nodes[name].quiet for name in NAMES}
    raise AssertionError(f"the idle group did not go quiet in {rounds} heartbeat rounds: {states}")


def time_passes(script: Script) -> None:
    """Every timed duty falls due: heartbeats and election deadlines in the past, every replica ticked."""
    leases_pass(script)
    for name in NAMES:
        node = script.nodes[name]
        node._SyncObj__newAppendEntriesTime = 0
        node._SyncObj__raftElectionDeadline = 0
    script.tick(*NAMES)


def leases_pass(script: Script) -> None:
    """No replica has heard from a leader for an election timeout (pre-vote: none trusts a leader on
    that ground; a quiet one still does while its leader's node is connected)."""
    for node in script.nodes.values():
        node._leader_seen_at = 0.0


def terms(script: Script) -> dict[str, int]:
    return {name: script.nodes[name].term for name in NAMES}


def test_an_idle_group_goes_quiet_and_then_sends_nothing(tmp_path: Path) -> None:
    script = quiet_script(tmp_path)
    before = terms(script)
    for _ in range(3):
        time_passes(script)  # heartbeats due, election deadlines passed
        assert script.network.queued() == 0, "a quiet group still sends messages"
    assert terms(script) == before, "a quiet follower held an election"
    assert script.nodes[L]._isLeader()
    assert all(script.nodes[name].leader_id == script.nodes[L].node_id for name in (F, G))


def test_without_quiesce_the_same_idle_group_keeps_heartbeating() -> None:
    script = Script(PatchedSimReplica)
    script.elect(L, [F, G])
    propose(script, L, 1)
    script.catch_up(L, [F, G])
    script.force_send(L)
    script.settle(NAMES)
    assert not any(script.nodes[name].quiet for name in NAMES)
    script.force_send(L)
    assert script.network.pending(L, F) == ["append_entries"]


def test_a_proposal_wakes_a_quiet_group_and_it_goes_quiet_again(tmp_path: Path) -> None:
    script = quiet_script(tmp_path)
    assert propose(script, L, 2) == [0]
    assert not script.nodes[L].quiet, "the leader stayed quiet with an entry to replicate"
    script.catch_up(L, [F, G])
    assert all(script.nodes[name].applied == [1, 2] for name in NAMES)
    until_quiet(script)


def test_a_quiet_group_closes_its_journal_files_once_it_stayed_quiet_a_while(tmp_path: Path) -> None:
    """An idle group holds no open files, but a group quiet only between its records keeps them: each
    replica closes its journal's files once quiet for ``journal_handles_idle_ms`` (a timer of its own,
    ``next_timer``), and a record in between starts that wait again. The files open again on the next
    record, which commits on every replica."""
    clock = FakeClock()
    journals = {name: FileJournal(journal_directory(tmp_path, name)) for name in NAMES}
    script = Script(PatchedSimReplica, dict(journals), {name: {**QUIET, "clock": clock} for name in NAMES})
    script.elect(L, [F, G])
    propose(script, L, 1)
    script.catch_up(L, [F, G])
    until_quiet(script)
    idle_s = CoreConfig().journal_handles_idle_ms / 1000
    tick_replicas(script)  # quiet ticks before the wait is over: nothing closed
    assert open_journal_files(tmp_path) == set(NAMES), "a group just gone quiet closed its files"
    for name in NAMES:
        assert script.nodes[name].next_timer()[0] <= clock.now + idle_s
    clock.now += idle_s / 2
    assert propose(script, L, 2) == [0]  # a record halfway: the wait starts again
    until_quiet(script)
    tick_replicas(script)
    clock.now += idle_s * 3 / 4
    tick_replicas(script)
    assert open_journal_files(tmp_path) == set(NAMES), "the files closed within the wait after a record"
    clock.now += idle_s
    tick_replicas(script)
    assert open_journal_files(tmp_path) == set(), "a group quiet for the whole wait kept its files open"
    assert all(script.nodes[name].next_timer()[0] > clock.now + idle_s for name in NAMES), "woken for naught"
    assert propose(script, L, 3) == [0]
    script.catch_up(L, [F, G])
    assert all(script.nodes[name].applied[-1] == 3 for name in NAMES)
    assert open_journal_files(tmp_path) == set(NAMES)


def tick_replicas(script: Script) -> None:
    """Every replica ticked, without ``Script.tick``'s check of the commit (which reads entries back from
    the journal's files, opening them)."""
    for name in NAMES:
        script.nodes[name].doTick(0.0)


def open_journal_files(tmp_path: Path) -> set[str]:
    """The replicas (of ``NAMES``) whose journal directory holds an open file of this process."""
    holding = set()
    for descriptor in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{descriptor}")
        except OSError:
            continue  # the listing's own descriptor, closed meanwhile
        holding |= {name for name in NAMES if target.startswith(journal_directory(tmp_path, name) + "/")}
    return holding


def test_followers_elect_a_new_leader_once_the_quiet_leaders_node_is_gone(tmp_path: Path) -> None:
    script = quiet_script(tmp_path)
    disconnect(script, L, F)
    disconnect(script, L, G)
    assert not script.nodes[F].quiet and not script.nodes[G].quiet
    leases_pass(script)  # (a quiet group heard its leader long ago)
    script.nodes[F]._SyncObj__raftElectionDeadline = 0  # F's fresh election deadline passes first
    script.tick(F)
    script.settle([F, G])
    assert script.nodes[F]._isLeader(), f"no new leader after the quiet leader's node went: {terms(script)}"
    assert script.nodes[F].term == script.nodes[L].term + 1


def test_a_quiet_leader_that_loses_its_followers_steps_down(tmp_path: Path) -> None:
    script = quiet_script(tmp_path)
    leader = script.nodes[L]
    # quiet for long: the last replies it had are old
    leader._credited_heard_at = dict.fromkeys(leader._credited_heard_at, 0.0)
    disconnect(script, L, F)
    disconnect(script, L, G)
    script.tick(L)
    assert not leader.quiet
    assert not leader._isLeader(), "a quiet leader that can reach no follower went on leading"


def test_a_quiet_leader_stays_quiet_when_one_followers_node_goes_and_comes_back(tmp_path: Path) -> None:
    """A node coming back does not wake every group it is in (with thousands, the heartbeats of all of
    them at once overloaded the cluster): its replicas ask their leaders with ``wake``, one by one."""
    script = quiet_script(tmp_path)
    leader = script.nodes[L]
    disconnect(script, L, G)
    disconnect(script, F, G)
    script.network.crash(G)  # G's node is gone: it sends nothing and hears nothing
    script.tick(L)  # F, connected, acknowledged the quiet: with the leader a majority
    assert leader._isLeader() and leader.quiet
    time_passes(script)
    assert script.network.queued() == 0, "a group with one node gone kept heartbeating"
    script.network.crashed.discard(G)
    connect(script, L, G)
    script.tick(L)
    assert leader.quiet, "the quiet leader woke for a follower's reconnection alone"
    assert script.network.pending(G, L) == ["wake"], "the follower whose leader came back did not ask for it"
    script.deliver(G, L)
    script.tick(L)
    assert not leader.quiet
    assert "append_entries" in script.network.pending(L, G), "the returning follower got no heartbeat"
    script.settle(NAMES)
    until_quiet(script)
    assert terms(script) == {name: leader.term for name in NAMES}


def test_a_follower_that_missed_entries_wakes_the_quiet_leader_when_it_reconnects(tmp_path: Path) -> None:
    script = quiet_script(tmp_path)
    disconnect(script, L, G)
    disconnect(script, F, G)
    assert propose(script, L, 2) == [0]  # committed by L and F while G is away
    until_quiet_without(script, G)
    # G's replica restarted meanwhile and lost its wake: the leader still knows G never held entry 2
    connect(script, L, G)
    script.network.links.pop((G, L), None)
    script.tick(L)
    assert not script.nodes[L].quiet, "a follower that lacks committed entries was left behind"
    script.catch_up(L, [F, G])
    assert script.nodes[G].applied == [1, 2]
    connect(script, F, G)
    until_quiet(script)


def until_quiet_without(script: Script, gone: str) -> None:
    names = [name for name in NAMES if name != gone]
    for _ in range(3):
        script.force_send(L)
        script.settle(names)
    assert all(script.nodes[name].quiet for name in names)


def test_a_group_goes_quiet_with_one_followers_node_gone(tmp_path: Path) -> None:
    script = quiet_script(tmp_path)
    disconnect(script, L, G)
    script.network.crash(G)
    assert propose(script, L, 2) == [0]  # committed by L and F
    for _ in range(3):
        script.force_send(L)
        script.settle([L, F])
    assert script.nodes[L].quiet and script.nodes[F].quiet


def test_a_replica_reopened_under_a_quiet_leader_wakes_it_instead_of_holding_an_election(
    tmp_path: Path,
) -> None:
    script = quiet_script(tmp_path)
    term = script.nodes[L].term
    network = script.network
    script.nodes[G].journal.close()
    network.crash(G)
    network.crashed.discard(G)
    journal = FileJournal(journal_directory(tmp_path, G))
    script.nodes[G] = PatchedSimReplica(G, [L, F], network, journal=journal, quiesce=True)  # restarted
    connect(script, G, L)  # the reopened replica hears of its connections: it asks for a heartbeat
    connect(script, G, F)
    assert "wake" in network.pending(G, L)
    script.settle(NAMES)
    assert script.nodes[G].leader_id == script.nodes[L].node_id
    assert terms(script) == dict.fromkeys(NAMES, term), "the reopened replica disturbed the group"
    script.catch_up(L, [F, G])
    assert script.nodes[G].applied == [1]
    until_quiet(script)


def test_a_leader_replica_that_stops_lets_its_quiet_followers_elect(tmp_path: Path) -> None:
    script = quiet_script(tmp_path)
    script.nodes[L].farewell()
    script.network.deliver(L, F)
    script.network.deliver(L, G)
    for name in (F, G):
        assert not script.nodes[name].quiet
        assert script.nodes[name].leader_id is None
    script.network.crash(L)
    script.nodes[G]._SyncObj__raftElectionDeadline = 0
    script.tick(G)
    script.settle([F, G])
    assert script.nodes[G]._isLeader()


@pytest.mark.parametrize("message", ["request_vote", "timeout_now"])
def test_election_traffic_wakes_a_quiet_follower(message: str, tmp_path: Path) -> None:
    script = quiet_script(tmp_path)
    follower = script.nodes[F]
    term = follower.term
    sender: Any = script.network.transports[F].nodes[G if message == "request_vote" else L]
    if message == "request_vote":
        follower._SyncObj__onMessageReceived(
            sender, {"type": message, "term": term + 1, "last_log_index": 1000, "last_log_term": term}
        )
    else:
        follower._SyncObj__onMessageReceived(sender, {"type": message, "term": term})
    assert not follower.quiet
