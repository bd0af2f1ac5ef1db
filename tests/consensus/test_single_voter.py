"""A group of one voter commits what its own tick made durable: the tick that appends and fsyncs a
proposal counts it committed and asks for the next round (``needs_tick``), which applies it. No
acknowledgement ever arrives to tick such a group again, so it used to wait for its next heartbeat: every
produce to a partition with one replica took ~400 ms on a node."""

from __future__ import annotations

import pytest
from sim_cluster import L, PatchedSimReplica, Script


@pytest.mark.parametrize("quiesce", [False, True])
def test_a_lone_voter_commits_in_the_tick_that_made_the_proposal_durable_and_applies_in_the_next(
    quiesce: bool,
) -> None:
    script = Script(PatchedSimReplica, peers={L: []}, options={L: {"quiesce": quiesce}})
    leader = script.nodes[L]
    script.elect(L, [])
    script.tick(L, L, L)  # the leader's own entry of its term, committed and applied
    answered: list[int] = []
    for sequence in range(3):
        leader.propose(sequence, lambda result, error: answered.append(result))
        script.tick(L)  # appends and fsyncs it
        last = leader._journal.last_index
        assert leader._SyncObj__raftCommitIndex == leader._journal.durable_index == last
        assert leader.needs_tick(), "the commit is to be applied in the next round, not at a heartbeat"
        script.tick(L)
        assert len(answered) == sequence + 1 and leader._SyncObj__raftLastApplied == last
        assert not leader.needs_tick()
