"""``RaftCore.serving``, which a busy driver ticks among the first of a round (``RoundOrder``): a
leader, a follower connected to its leader, and a follower that voted for another in this term (its
next message is most likely its new leader's first append); a candidate is not."""

from __future__ import annotations

from sim_cluster import F, G, L, PatchedSimReplica, Script, disconnect


def test_a_voter_awaiting_its_new_leader_serves_and_a_candidate_does_not() -> None:
    script = Script(PatchedSimReplica)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    nodes = script.nodes
    assert nodes[L].serving and nodes[F].serving and nodes[G].serving
    script.network.crash(L)
    disconnect(script, L, F)
    disconnect(script, L, G)
    assert not nodes[G].serving, "a follower whose leader's node is gone serves"
    nodes[F]._SyncObj__raftElectionDeadline = 0
    script.tick(F)  # F stands: a candidate, asking G for its vote
    assert not nodes[F].serving, "a candidate serves"
    script.deliver(F, G)  # G votes for F and awaits its first append
    assert nodes[G]._journal.getVotedForNodeId() == F
    assert nodes[G].serving, "a voter awaiting its new leader's first append is queued with the elections"
    script.deliver(G, F)  # F wins
    assert nodes[F].serving
    script.deliver(F, G)  # its first append: G follows F
    assert nodes[G].serving
