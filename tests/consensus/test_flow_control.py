"""Per-follower send budget: every follower gets its share of a backlog in the same round, the entries in
flight to each follower are bounded, and an acknowledgement lets the leader send that follower more at
once (without waiting for the next heartbeat)."""

from __future__ import annotations

from typing import Any

from sim_cluster import F, G, L, PatchedSimReplica, Script


def entries_in_flight(script: Script, destination: str) -> list[int]:
    link = script.network.links.get((L, destination), [])
    return [entry[1] for message in link for entry in message.get("entries") or []]


def test_backlog_is_shared_and_bounded_per_follower() -> None:
    options: dict[str, dict[str, Any]] = {name: {"in_flight_entries_max": 20} for name in (L, F, G)}
    script = Script(PatchedSimReplica, options=options)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    leader = script.nodes[L]
    first = leader._SyncObj__raftLog[-1][1] + 1
    for sequence in range(100):
        leader.propose(sequence, None)
    script.tick(L)  # appends the 100 proposals and sends in the same tick

    assert entries_in_flight(script, F) == list(range(first, first + 20))
    assert entries_in_flight(script, G) == list(range(first, first + 20))

    script.deliver(L, F)
    script.deliver(F, L)  # F acknowledges 20: the leader owes F more, G is still full
    script.tick(L)
    assert entries_in_flight(script, F) == list(range(first + 20, first + 40))
    assert entries_in_flight(script, G) == list(range(first, first + 20))

    script.settle([L, F, G])
    script.catch_up(L, [F, G])
    assert len(script.nodes[G].applied) == len(script.nodes[F].applied) == 100
