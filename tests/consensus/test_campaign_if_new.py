"""RaftCore.campaign_if_new on a scripted network: a new group's preferred replica stands for election at
once, asks again in the same term at a heartbeat's pace while it hears nothing, and falls back to random
election timeouts after its attempts or for good once any peer of the group has spoken; a late replica's
early campaigns never depose a leader."""

from __future__ import annotations

import time

from sim_cluster import F, G, L, PatchedSimReplica, Script

HEARTBEAT_INTERVAL_S = 1.0  # PatchedSimReplica: 1000 ms period on the default 100 ms grid
ELECTION_TIMEOUT_MIN_S = 20.0


def next_campaign_in(script: Script, name: str) -> float:
    return float(script.nodes[name]._SyncObj__raftElectionDeadline) - time.monotonic()


def campaign_now(script: Script, name: str) -> None:
    script.nodes[name]._SyncObj__raftElectionDeadline = 0
    script.tick(name)


def test_a_deaf_new_replica_asks_again_in_term_1_at_a_heartbeats_pace_then_at_random() -> None:
    script = Script(PatchedSimReplica)
    replica = script.nodes[G]
    assert replica.campaign_if_new(0.0, attempts=3)
    script.tick(G)  # the first campaign; its vote requests are not delivered (yet)
    assert replica._SyncObj__raftCurrentTerm == 1
    assert HEARTBEAT_INTERVAL_S * 1.5 < next_campaign_in(script, G) <= HEARTBEAT_INTERVAL_S * 2
    campaign_now(script, G)  # asks again, in the same term: never a higher one early
    assert replica._SyncObj__raftCurrentTerm == 1
    assert next_campaign_in(script, G) <= HEARTBEAT_INTERVAL_S * 2
    campaign_now(script, G)  # the third and last early campaign
    assert replica._SyncObj__raftCurrentTerm == 1
    assert next_campaign_in(script, G) > ELECTION_TIMEOUT_MIN_S - 1
    assert script.deliver(G, F) == 3  # the three requests arrive at last; F grants term 1 to G (again)
    assert script.deliver(F, G) >= 1
    assert replica._isLeader() and replica._SyncObj__raftCurrentTerm == 1


def test_a_late_replicas_early_campaigns_never_depose_the_leader() -> None:
    """Its node was down when the group elected: it asks for term 1 (stale for the others, who voted
    in it) however often it asks, so the leader keeps its term."""
    script = Script(PatchedSimReplica)
    script.elect(L, [F])
    term = script.nodes[L]._SyncObj__raftCurrentTerm
    late = script.nodes[G]
    assert late.campaign_if_new(0.0, attempts=3)
    script.tick(G)
    campaign_now(script, G)
    campaign_now(script, G)
    assert script.deliver(G, L) == 3 and script.deliver(G, F) == 3
    assert script.nodes[L]._isLeader() and script.nodes[L]._SyncObj__raftCurrentTerm == term
    assert script.nodes[F]._SyncObj__raftCurrentTerm == term


def test_once_a_peer_of_the_group_spoke_early_campaigns_stop_for_good() -> None:
    script = Script(PatchedSimReplica)
    replica = script.nodes[G]
    assert replica.campaign_if_new(0.0, attempts=5)
    script.tick(G)  # campaigns in term 1, unheard
    campaign_now(script, F)  # F stands in term 1 too; G, a candidate of term 1, denies its vote
    assert script.deliver(F, G) == 1
    campaign_now(script, G)
    assert replica._SyncObj__raftCurrentTerm == 2
    assert next_campaign_in(script, G) > ELECTION_TIMEOUT_MIN_S - 1
    assert not replica.campaign_if_new(0.0, attempts=5), "a replica that has seen an election ignores it"


def test_only_a_replica_that_never_saw_an_election_campaigns_early() -> None:
    script = Script(PatchedSimReplica)
    script.elect(F, [G])
    assert not script.nodes[G].campaign_if_new(0.0, attempts=3)
    assert next_campaign_in(script, G) > ELECTION_TIMEOUT_MIN_S - 1
