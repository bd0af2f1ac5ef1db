"""CoreConfig.announce_commits on a scripted network: a leader that announces commits sends its followers
the new commit index in the tick that commits; one that does not leaves it for its next entries or
heartbeat (partition groups: a message per follower per commit is not worth it there)."""

from __future__ import annotations

import pytest
from sim_cluster import F, G, L, PatchedSimReplica, Script


@pytest.mark.parametrize("announce", [True, False])
def test_a_commit_reaches_the_followers_at_once_only_when_announced(announce: bool) -> None:
    script = Script(PatchedSimReplica, options={L: {"announce_commits": announce}})
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    leader, follower = script.nodes[L], script.nodes[F]
    leader.propose(7, None)
    script.tick(L)  # appends and sends the entry to both followers
    script.deliver(L, F)
    script.deliver(L, G)  # each appends, fsyncs and acknowledges in its tick
    assert script.deliver(F, L) == 1  # the leader commits in the tick that receives it
    commit = leader._SyncObj__raftCommitIndex
    assert commit == leader._SyncObj__raftLog[-1][1]
    assert follower._SyncObj__leaderCommitIndex < commit
    queued = script.network.pending(L, F)
    if not announce:
        assert queued == [], "no message until the next entries or heartbeat"
        return
    assert queued == ["append_entries"]
    script.deliver(L, F)
    assert follower._SyncObj__leaderCommitIndex == commit
    assert follower.applied[-1] == 7
