"""Learners: a replica that joins a group receives the log but counts in no quorum until it is promoted.

Four RaftCore replicas on the scripted network (``sim_cluster``): L, F and G are the group's voters and X
joins it. X is opened as a replica joining a partition is (voters L, F, G; itself a learner) and the
leader L makes it a learner with a membership entry, later a voter with another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pysyncobj.config import FAIL_REASON
from sim_cluster import F, G, L, PatchedSimReplica, Script, X, connect, disconnect

from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.membership import Membership
from raftlog.consensus.snapshot import decode_snapshot, snapshot_membership

VOTERS = [L, F, G]
ALL = [L, F, G, X]
SUCCESS = 0


def directory(tmp_path: Path, name: str) -> Path:
    return tmp_path / name.replace(":", "_").replace(".", "_")


def started_script(
    tmp_path: Path, snapshots: bool = False, x_learners: tuple[str, ...] = (X,)
) -> tuple[Script, dict[str, FileJournal]]:
    """The four replicas on their journals under ``tmp_path`` (reopened: a restart), as their nodes open
    them: L, F and G with the three voters, X with the voters and itself a learner (``x_learners``).
    ``snapshots``: each compacts its journal past 10 entries."""
    journals = {name: FileJournal(str(directory(tmp_path, name))) for name in ALL}
    peers = {name: [other for other in VOTERS if other != name] for name in VOTERS}
    peers[X] = list(VOTERS)
    extra: dict[str, dict[str, Any]] = {name: {} for name in ALL}
    if snapshots:
        for name in ALL:
            extra[name] = {
                "snapshot_path": f"{directory(tmp_path, name)}.snapshot",
                "compaction_min_entries": 10,
            }
    extra[X]["learners"] = x_learners
    return Script(PatchedSimReplica, dict(journals), extra, peers=peers), journals


def joined_script(tmp_path: Path, snapshots: bool = False) -> Script:
    """L leads the three voters; X exists (a learner in its own configuration) but is no member yet."""
    script, _ = started_script(tmp_path, snapshots)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    return script


def change(script: Script, kind: str, node: str, among: list[str]) -> list[int]:
    """The leader L proposes a membership change; messages flow among ``among``; its outcome (if any)."""
    outcome: list[int] = []
    script.nodes[L].submit_membership(kind, node, lambda result, error: outcome.append(error))
    script.tick(L)
    if kind in ("learner", "add") and node not in script.network.crashed:
        connect(script, L, node)  # the leader's transport dials the new member
    script.settle(among)
    return outcome


def propose(script: Script, sequences: range) -> list[int]:
    acked: list[int] = []
    for sequence in sequences:
        script.nodes[L].propose(
            sequence, lambda result, error, s=sequence: acked.append(s) if error == 0 else None
        )
    script.tick(L)
    return acked


def roles(script: Script, name: str) -> tuple[list[str], list[str]]:
    membership = script.nodes[name].membership
    return sorted(membership.voters), sorted(membership.learners)


JOIN = "learner"  # "add" (a voter at once, as every join was before learners) makes the test below fail


def test_a_slow_joiner_does_not_stall_the_commits_of_the_group(tmp_path: Path) -> None:
    """G is down and X, joining, never answers (slow, or cut off). As a learner X counts in no quorum: L and
    F are 2 of the 3 voters and commit. Had X joined as a voter, L and F would be 2 of 4: nothing more
    would commit until X caught up or G came back."""
    script = joined_script(tmp_path)
    script.network.crash(G)
    script.nodes[L].submit_membership(JOIN, X, None)
    script.tick(L)
    connect(script, L, X)  # connected, but nothing sent to X is ever delivered
    acked = propose(script, range(1, 21))
    for _ in range(5):
        script.force_send(L)
        script.settle([L, F])
    assert acked == list(range(1, 21)), f"commits stalled behind the joiner: acknowledged {acked}"
    assert script.nodes[F].applied == list(range(1, 21))
    assert roles(script, L) == (sorted(VOTERS), [X])


def test_a_voter_join_stalls_the_same_commits(tmp_path: Path) -> None:
    """What learners avoid, shown: the same schedule with X joining as a voter commits nothing."""
    script = joined_script(tmp_path)
    script.network.crash(G)
    script.nodes[L].submit_membership("add", X, None)
    script.tick(L)
    connect(script, L, X)
    acked = propose(script, range(1, 21))
    for _ in range(5):
        script.force_send(L)
        script.settle([L, F])
    assert acked == []
    assert roles(script, L) == (sorted([*VOTERS, X]), [])


def test_a_learner_receives_the_log_and_never_stands_for_election(tmp_path: Path) -> None:
    script = joined_script(tmp_path)
    assert change(script, "learner", X, ALL) == [SUCCESS]
    propose(script, range(1, 11))
    script.catch_up(L, [F, G, X])
    assert script.nodes[X].applied == list(range(1, 11))
    assert roles(script, X) == (sorted(VOTERS), [X]), "X learned its role from the log"
    assert not script.nodes[X].voting
    assert script.nodes[L].match_indexes()[X] == script.nodes[L].commit_index

    # L goes: X's election deadline passes again and again, and X never stands (nor asks for pre-votes)
    script.network.crash(L)
    for _ in range(3):
        script.nodes[X]._SyncObj__raftElectionDeadline = 0
        script.tick(X)
    assert script.nodes[X].role.value == "follower"
    assert script.nodes[X].leader_id is None, "a learner that hears no leader knows none"
    assert script.nodes[X].term == script.nodes[F].term
    assert not any(script.network.pending(X, other) for other in (F, G))

    # F stands; a vote from X (it would answer a candidate that counted it a voter) counts for nothing
    script.nodes[F]._SyncObj__raftElectionDeadline = 0
    script.tick(F)
    assert "request_vote" not in script.network.pending(F, X), "a candidate asks only voters"
    script.network.links.pop((F, G), None)  # G hears nothing of it: F needs 2 votes of 3, has 1
    script.network.enqueue(X, F, {"type": "response_vote", "term": script.nodes[F].term})
    script.deliver(X, F)
    assert script.nodes[F].role.value == "candidate", "a learner's vote was counted"


def test_promotion_counts_the_learner_and_lets_it_lead(tmp_path: Path) -> None:
    script = joined_script(tmp_path)
    assert change(script, "learner", X, ALL) == [SUCCESS]
    assert change(script, "promote", F, ALL) == [FAIL_REASON.REQUEST_DENIED], "F is no learner"
    propose(script, range(1, 6))
    script.catch_up(L, [F, G, X])
    assert change(script, "promote", X, ALL) == [SUCCESS]
    for name in ALL:
        assert roles(script, name) == (sorted(ALL), []), name
    assert script.nodes[X].voting
    assert change(script, "rem", G, ALL) == [SUCCESS]
    assert roles(script, L) == (sorted([L, F, X]), [])

    # X counts now: with F down, L and X are 2 of the 3 voters
    script.network.crash(F)
    acked = propose(script, range(6, 11))
    script.catch_up(L, [X])
    assert acked == list(range(6, 11))

    # and X may lead: L goes, F is back, X stands and F votes for it
    script.network.crashed.discard(F)
    script.catch_up(L, [F, X])
    script.network.crash(L)
    script.elect(X, [F])
    acked = []
    script.nodes[X].propose(11, lambda result, error: acked.append(error))
    script.tick(X)
    script.settle([X, F])
    script.force_send(X)
    script.settle([X, F])
    assert acked == [SUCCESS]
    assert script.nodes[F].applied == list(range(1, 12))


def test_one_membership_change_at_a_time_and_no_change_that_changes_nothing(tmp_path: Path) -> None:
    script = joined_script(tmp_path)
    outcomes: list[int] = []
    leader = script.nodes[L]
    leader.submit_membership("learner", X, lambda result, error: outcomes.append(error))
    leader.submit_membership("promote", X, lambda result, error: outcomes.append(error))
    script.tick(L)  # both looked at in one tick: the first is not applied when the second comes
    assert outcomes == [FAIL_REASON.REQUEST_DENIED]
    assert "is not applied yet" in str(leader.membership_refusal("promote", X))
    connect(script, L, X)
    script.settle(ALL)
    script.force_send(L)
    script.settle(ALL)
    assert outcomes == [FAIL_REASON.REQUEST_DENIED, SUCCESS]
    assert "already a learner" in str(leader.membership_refusal("learner", X))
    assert "cannot remove itself" in str(leader.membership_refusal("rem", L))
    assert leader.membership_refusal("rem", X) is None


def test_a_truncated_learner_entry_is_undone(tmp_path: Path) -> None:
    """L appends "learner X" (in effect there at once) but nobody gets it: F and G elect G, whose log
    overwrites the entry on L, and L's configuration goes back to the three voters."""
    script = joined_script(tmp_path)
    script.nodes[L].submit_membership("learner", X, None)
    script.tick(L)
    assert roles(script, L) == (sorted(VOTERS), [X]), "in effect on append"
    for link in ((L, F), (L, G)):
        script.network.links.pop(link, None)  # lost
    script.nodes[G]._SyncObj__raftElectionDeadline = 0
    script.tick(G)
    script.settle([G, F])
    assert script.nodes[G]._isLeader()
    script.force_send(G)
    script.settle([G, F, L])
    assert not script.nodes[L]._isLeader()
    assert roles(script, L) == (sorted(VOTERS), [])
    assert X not in {str(node.id) for node in script.nodes[L]._learner_nodes}


def test_a_leader_that_hears_only_a_learner_steps_down(tmp_path: Path) -> None:
    """Check-quorum counts voters: X answering keeps no leader in office once F and G are silent."""
    script = joined_script(tmp_path)
    assert change(script, "learner", X, ALL) == [SUCCESS]
    script.catch_up(L, [F, G, X])
    leader = script.nodes[L]
    heard = leader._credited_heard_at
    for _ in range(3):
        script.force_send(L)
        script.settle([L, X])  # only X answers
    learner = next(node for node in heard if str(node.id) == X)
    assert heard[learner] > 0, "X answered"
    for node in list(heard):
        if node != learner:
            heard[node] = 0.0  # F's and G's last answers are older than the fallback timeout
    script.tick(L)
    assert not leader._isLeader()


def test_roles_survive_a_restart_from_the_journal(tmp_path: Path) -> None:
    """Restarted replicas take their configuration from their journals, whatever they are opened with: X
    reopened as if its owner thought it a voter is still a learner, and once promoted, reopened as a
    learner (as a node opens a replica the controller does not count yet), it is a voter."""
    script = joined_script(tmp_path)
    assert change(script, "learner", X, ALL) == [SUCCESS]
    propose(script, range(1, 6))
    script.catch_up(L, [F, G, X])
    for journal in (node.journal for node in script.nodes.values()):
        journal.close()

    restarted, _ = started_script(tmp_path, x_learners=())
    for name in ALL:
        assert roles(restarted, name) == (sorted(VOTERS), [X]), name
    assert not restarted.nodes[X].voting
    restarted.elect(L, [F, G])
    assert change(restarted, "promote", X, ALL) == [SUCCESS]
    restarted.catch_up(L, [F, G, X])
    for journal in (node.journal for node in restarted.nodes.values()):
        journal.close()

    again, _ = started_script(tmp_path, x_learners=(X,))
    for name in ALL:
        assert roles(again, name) == (sorted(ALL), []), name
    assert again.nodes[X].voting


def test_roles_survive_compaction_and_restart(tmp_path: Path) -> None:
    """The snapshot records the configuration at its index: the entry that made X a learner is compacted
    away, and a restart still knows X a learner."""
    script = joined_script(tmp_path, snapshots=True)
    assert change(script, "learner", X, ALL) == [SUCCESS]
    propose(script, range(1, 41))
    script.catch_up(L, [F, G, X])
    for name in ALL:
        script.tick(name)  # compaction runs in the tick
        journal = script.nodes[name].journal
        assert journal.first_index > 10, f"{name}: journal starts at {journal.first_index}"
    with open(f"{directory(tmp_path, L)}.snapshot", "rb") as file:
        snapshot = decode_snapshot("snapshot", file.read())
    assert snapshot_membership(snapshot) == Membership(frozenset(VOTERS), frozenset([X]))
    for journal in (node.journal for node in script.nodes.values()):
        journal.close()

    restarted, _ = started_script(tmp_path, snapshots=True, x_learners=())
    restarted.tick(*ALL)  # loads the snapshots
    for name in ALL:
        assert roles(restarted, name) == (sorted(VOTERS), [X]), name
        assert restarted.nodes[name].applied[:40] == list(range(1, 41)), name


def test_a_learner_behind_a_compaction_catches_up_through_the_snapshot_then_is_promoted(
    tmp_path: Path,
) -> None:
    """X is made a learner while cut off; the group commits on and compacts past everything X lacks; when
    X is back it installs L's snapshot (which names it a learner), takes the entries after it, reaches
    the commit index and is promoted."""
    script = joined_script(tmp_path, snapshots=True)
    assert change(script, "learner", X, [L, F, G]) == [SUCCESS]
    goal = script.nodes[L].commit_index
    disconnect(script, L, X)
    acked = propose(script, range(1, 41))
    script.catch_up(L, [F, G])
    script.tick(L)  # compaction
    assert acked == list(range(1, 41))
    assert script.nodes[L].journal.first_index > goal, "the leader compacted past what X lacks"
    assert script.nodes[X].applied == []

    connect(script, L, X)
    script.catch_up(L, [F, G, X])
    assert script.nodes[X].applied == list(range(1, 41))
    assert roles(script, X) == (sorted(VOTERS), [X])
    assert script.nodes[L].match_indexes()[X] >= goal
    assert change(script, "promote", X, ALL) == [SUCCESS]
    assert roles(script, X) == (sorted(ALL), [])
