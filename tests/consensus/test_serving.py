"""``RaftCore.serving``, which a busy driver ticks among the first of a round (``RoundOrder``): a
leader, a follower connected to its leader, and a follower that voted for another in this term (its
next message is most likely its new leader's first append); a candidate is not. ``RaftCore.urgent``,
which it ticks ahead of those: a write waits on the replica's next tick."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pysyncobj.node import Node
from sim_cluster import F, G, L, PatchedSimReplica, Script, disconnect

from raftlog.consensus.transport import MuxTransport


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


def test_a_leader_is_urgent_from_a_proposal_to_its_answer_and_an_idle_one_is_not() -> None:
    script = Script(PatchedSimReplica)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    leader = script.nodes[L]
    assert not leader.urgent, "an idle leader is urgent"
    answers: list[Any] = []
    leader.propose(1, lambda result, error: answers.append(error))
    assert leader.urgent, "a leader with a proposal queued is not urgent"
    script.tick(L)  # appended and sent: uncommitted
    assert leader.urgent and not answers
    script.deliver(L, F)
    script.deliver(F, L)  # a majority holds it: committed, applied, answered
    assert answers == [0] and not leader.urgent, "an answered leader stays urgent"
    assert not script.nodes[G].urgent


class _Hub:
    node_id = "n1"
    peers = SimpleNamespace(knows=lambda node_id: True)

    def register_group(self, group: str, transport: Any) -> None: ...

    def replay_connection_state(self, transport: Any, node_id: str) -> None: ...


def test_entries_arrived_make_a_follower_urgent_until_they_are_delivered_a_heartbeat_does_not() -> None:
    ticked: list[Any] = []
    sync_obj = SimpleNamespace(conf=SimpleNamespace(autoTick=False), addOnTickCallback=ticked.append)
    transport = MuxTransport(sync_obj, Node("n1"), [Node("n2")], hub=_Hub(), group="t-0.1")  # type: ignore[arg-type]
    delivered: list[Any] = []
    transport.setOnMessageReceivedCallback(lambda node, message: delivered.append(message))
    heartbeat = {"type": "append_entries", "term": 1, "commit_index": 3, "prevLogIdx": 3, "prevLogTerm": 1}
    transport.push_messages("n2", [heartbeat], 100)  # type: ignore[list-item]
    assert not transport.entries_waiting, "a heartbeat made the follower urgent"
    entries = {**heartbeat, "entries": [(b"x", 4, 1)]}
    transport.push_messages("n2", [entries, heartbeat], 100)  # type: ignore[list-item]
    assert transport.entries_waiting
    transport.receive()
    assert not transport.entries_waiting and len(delivered) == 3
