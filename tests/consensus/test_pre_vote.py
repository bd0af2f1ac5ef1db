"""Pre-vote: a replica that stops hearing its leader raises its term only if a majority would vote for it.

Three RaftCore replicas on the scripted network (``sim_cluster``), as a node runs them (quiescing, with
pre-vote); "time passing" is played by putting deadlines in the past and forgetting when a leader was
last heard. Each property is also shown failing without pre-vote where that is the point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sim_cluster import F, FakeClock, G, L, PatchedSimReplica, Script, connect, disconnect

from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.group import election_counts

NAMES = [L, F, G]


def journal_path(tmp_path: Path, name: str) -> str:
    return str(tmp_path / name.replace(":", "_"))


def replica_options(pre_vote: bool, quiesce: bool, clock: FakeClock | None) -> dict[str, Any]:
    return {"quiesce": quiesce, "pre_vote": pre_vote} | ({} if clock is None else {"clock": clock})


def elected_script(
    tmp_path: Path, pre_vote: bool = True, quiesce: bool = True, clock: FakeClock | None = None
) -> Script:
    """L elected by F and G, each on a FileJournal under ``tmp_path``, and one entry committed."""
    journals = {name: FileJournal(journal_path(tmp_path, name)) for name in NAMES}
    options = {name: replica_options(pre_vote, quiesce, clock) for name in NAMES}
    script = Script(PatchedSimReplica, dict(journals), options)
    script.elect(L, [F, G])
    acked: list[int] = []
    script.nodes[L].propose(1, lambda result, error: acked.append(error))
    script.tick(L)
    script.catch_up(L, [F, G])
    assert acked == [0]
    return script


def campaign(script: Script, name: str) -> None:
    """``name``'s election deadline passes."""
    script.nodes[name]._SyncObj__raftElectionDeadline = 0
    script.tick(name)


def terms(script: Script) -> dict[str, int]:
    return {name: script.nodes[name].term for name in NAMES}


@pytest.mark.parametrize("pre_vote", [True, False])
def test_a_replica_cut_off_and_back_does_not_depose_the_working_leader(
    pre_vote: bool, tmp_path: Path
) -> None:
    """G, cut off from both peers, times out again and again; when it is back, the leader still leads in
    its term. (Without pre-vote G comes back with a higher term, and the leader steps down for it.)"""
    script = elected_script(tmp_path, pre_vote=pre_vote, quiesce=False)
    term = script.nodes[L].term
    disconnect(script, L, G)
    disconnect(script, F, G)
    for _ in range(5):
        campaign(script, G)
    script.network.links.clear()  # what G sent while cut off is lost with the connections
    connect(script, L, G)
    connect(script, F, G)
    script.settle(NAMES)
    script.force_send(L)
    script.settle(NAMES)
    if pre_vote:
        assert script.nodes[G].term == term, "a cut-off replica raised its term alone"
        assert script.nodes[L]._isLeader() and terms(script) == dict.fromkeys(NAMES, term)
        assert script.nodes[G].leader_id == script.nodes[L].node_id
    else:
        assert script.nodes[G].term > term  # what pre-vote prevents
        assert not script.nodes[L]._isLeader() or script.nodes[L].term > term


def test_a_pre_vote_changes_no_term_and_casts_no_vote(tmp_path: Path) -> None:
    script = elected_script(tmp_path)
    disconnect(script, L, F)
    disconnect(script, L, G)
    for node in script.nodes.values():
        node._leader_seen_at = 0.0  # the leader was last heard an election timeout ago
    before = terms(script)
    voted = script.nodes[G].journal.getVotedForNodeId()
    campaign(script, F)
    assert script.network.pending(F, G) == ["request_vote"]
    assert terms(script) == before, "asking for a pre-vote raised a term"
    script.deliver(F, G)
    assert script.network.pending(G, F) == ["response_vote"]
    assert script.nodes[G].term == before[G] and script.nodes[G].journal.getVotedForNodeId() == voted
    script.deliver(G, F)  # granted: F now holds the election, in the next term
    assert script.nodes[F].term == before[F] + 1
    script.settle([F, G])
    assert script.nodes[F]._isLeader()


def test_a_replica_that_heard_its_leader_recently_grants_no_pre_vote(tmp_path: Path) -> None:
    script = elected_script(tmp_path, quiesce=False)
    disconnect(script, L, G)  # G no longer hears L; F still does
    campaign(script, G)
    script.settle([F, G])
    assert script.nodes[G].term == script.nodes[L].term
    assert script.nodes[F].leader_id == script.nodes[L].node_id
    script.nodes[F]._leader_seen_at = 0.0  # ... until F too has not heard from L for an election timeout
    campaign(script, G)
    script.settle([F, G])
    assert script.nodes[G]._isLeader() and script.nodes[G].term == script.nodes[L].term + 1


def test_a_pre_vote_for_a_stale_log_is_refused(tmp_path: Path) -> None:
    script = elected_script(tmp_path, quiesce=False)
    disconnect(script, L, G)
    disconnect(script, F, G)
    acked: list[int] = []
    script.nodes[L].propose(2, lambda result, error: acked.append(error))
    script.tick(L)
    script.catch_up(L, [F])
    assert acked == [0]
    disconnect(script, L, F)  # the leader goes; G lacks entry 2, F holds it
    connect(script, F, G)
    for node in script.nodes.values():
        node._leader_seen_at = 0.0
    campaign(script, G)
    script.settle([F, G])
    assert not script.nodes[G]._isLeader(), "a replica missing a committed entry was elected"
    campaign(script, F)
    script.settle([F, G])
    assert script.nodes[F]._isLeader()
    script.catch_up(F, [G])
    assert script.nodes[G].applied == [1, 2]


def test_a_leader_asked_for_a_pre_vote_heartbeats_at_once(tmp_path: Path) -> None:
    """A follower that did not hear its quiet leader (say its ``wake`` was lost) asks for a pre-vote:
    the leader refuses and heartbeats, and the follower is led again, in the same term."""
    script = elected_script(tmp_path)
    for _ in range(3):
        script.force_send(L)
        script.settle(NAMES)
    assert all(script.nodes[name].quiet for name in NAMES)
    term = script.nodes[L].term
    follower = script.nodes[G]
    follower._quiet = False  # (as after a restart that lost its wake)
    follower._SyncObj__raftLeader = None
    campaign(script, G)
    script.deliver(G, F)
    script.deliver(G, L)
    assert "append_entries" in script.network.pending(L, G)
    script.settle(NAMES)
    assert terms(script) == dict.fromkeys(NAMES, term)
    assert follower.leader_id == script.nodes[L].node_id


def test_a_quiet_follower_whose_leader_replica_is_gone_grants_after_an_election_timeout(
    tmp_path: Path,
) -> None:
    """The leader's node is connected, its replica silent (closed without a word): a quiet follower
    asked for a pre-vote asks its leader to heartbeat and trusts it one more election timeout only."""
    script = elected_script(tmp_path)
    for _ in range(3):
        script.force_send(L)
        script.settle(NAMES)
    assert all(script.nodes[name].quiet for name in NAMES)
    script.network.crash(L)  # L hears and answers nothing, yet neither follower sees a disconnect
    script.nodes[G]._quiet = False  # G restarted, say: it knows no leader
    script.nodes[G]._SyncObj__raftLeader = None
    campaign(script, G)
    script.settle([F, G])
    follower = script.nodes[F]
    assert not follower.quiet, "a quiet follower asked for a pre-vote stayed quiet"
    assert not script.nodes[G]._isLeader(), "the quiet follower granted at once"
    follower._leader_seen_at = 0.0  # an election timeout passes with no heartbeat from L
    campaign(script, G)
    script.settle([F, G])
    assert script.nodes[G]._isLeader()


def test_a_transfer_skips_the_pre_vote(tmp_path: Path) -> None:
    """timeout_now: the target holds the election at once, though its peers heard the leader just now."""
    script = elected_script(tmp_path, quiesce=False)
    done: list[Any] = []
    script.nodes[L].request_transfer(script.nodes[F].node_id, lambda result, error: done.append(error))
    for _ in range(5):
        script.force_send(L)
        script.settle(NAMES)
        if script.nodes[F]._isLeader():
            break
    assert script.nodes[F]._isLeader(), f"the transfer target was not elected: {terms(script)}"
    assert script.nodes[F].term == script.nodes[L].term


@pytest.mark.parametrize("started_s_ago", [0.0, 25.0])
def test_a_replica_just_restarted_helps_no_follower_depose_the_leader_the_others_hear(
    started_s_ago: float, tmp_path: Path
) -> None:
    """G restarts and knows no leader yet; F's thread fell behind its leader's heartbeats past its election
    deadline, and asks for pre-votes. L refuses (it leads); G, within the shortest election timeout of
    its start (20 s here), refuses too, so L leads on in its term. (The control: a G that started longer
    ago and still heard no leader grants, and F deposes L: what the grace keeps a node's restart from
    lending a hand to.)"""
    clock = FakeClock()
    script = elected_script(tmp_path, quiesce=False, clock=clock)
    term = script.nodes[L].term

    script.network.crash(G)  # G stops; it starts again on its journal, knowing no leader
    journal = FileJournal(journal_path(tmp_path, G))
    options = replica_options(pre_vote=True, quiesce=False, clock=clock)
    restarted = PatchedSimReplica(G, [L, F], script.network, journal=journal, **options)
    restarted._started_at = clock.now - started_s_ago
    script.nodes[G] = restarted
    script.network.crashed.discard(G)
    connect(script, L, G)
    connect(script, F, G)
    assert restarted.term == term and restarted.leader_id is None

    script.nodes[F]._leader_seen_at = 0.0  # F has not heard L for an election timeout
    campaign(script, F)
    assert script.network.pending(F, G) == ["request_vote"]
    counted = election_counts()
    script.deliver(F, G)
    grew = {name: n - counted[name] for name, n in election_counts().items()}
    if started_s_ago < 20.0:
        assert script.network.pending(G, F) == [], "a replica just started granted a pre-vote"
        assert (grew["pre_votes_refused_starting"], grew["pre_votes_granted"]) == (1, 0)
        script.settle(NAMES)
        assert script.nodes[L]._isLeader() and terms(script) == dict.fromkeys(NAMES, term)
        assert script.nodes[F].leader_id == script.nodes[L].node_id
    else:
        assert script.network.pending(G, F) == ["response_vote"]
        assert (grew["pre_votes_refused_starting"], grew["pre_votes_granted"]) == (0, 1)
        script.deliver(G, F)  # granted: F holds the election, and L steps down for its term
        script.settle(NAMES)
        assert script.nodes[F]._isLeader() and terms(script) == dict.fromkeys(NAMES, term + 1)
