"""The leader balancer's plan (pure): drains first, then evens out, never onto an ineligible node."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from partitions.controller.balancer import Hysteresis, Led, Move, gap_min_for, is_drain, plan


def led(partition: int, replicas: str, leader: str | None) -> Led:
    return Led("t", partition, tuple(replicas.split(",")), leader)


def test_a_node_that_kept_every_leadership_after_restarts_gives_some_away() -> None:
    partitions = [led(p, "n1,n2,n3", "n1") for p in range(6)]
    moves = plan(partitions, ["n1", "n2", "n3"], moves_max=10)
    after = Counter(m.target for m in moves)
    assert len(moves) == 4 and after == {"n2": 2, "n3": 2}
    assert all(m.source == "n1" for m in moves)


def test_a_balanced_cluster_needs_nothing_and_moves_max_bounds_the_plan() -> None:
    balanced = [led(p, "n1,n2,n3", ["n1", "n2", "n3"][p % 3]) for p in range(7)]
    assert plan(balanced, ["n1", "n2", "n3"], moves_max=5) == []
    skewed = [led(p, "n1,n2,n3", "n1") for p in range(6)]
    assert len(plan(skewed, ["n1", "n2", "n3"], moves_max=1)) == 1


def test_maintenance_nodes_are_drained_first_and_never_receive_leadership() -> None:
    partitions = [led(0, "n1,n2,n3", "n3"), led(1, "n3,n1", "n3"), led(2, "n1,n2", "n1"), led(3, "n3", "n3")]
    moves = plan(partitions, ["n1", "n2"], moves_max=10)
    assert moves[:2] == [Move("t", 0, "n3", "n2"), Move("t", 1, "n3", "n1")]
    assert all(m.target != "n3" for m in moves)  # partition 3 has no other replica: it stays


def test_leaderless_partitions_are_left_alone() -> None:
    assert plan([led(0, "n1,n2", None), led(1, "n1,n2", None)], ["n1", "n2"], moves_max=5) == []


@pytest.mark.parametrize("seed", range(30))
def test_random_plans_end_within_one_of_even_where_replicas_allow(seed: int) -> None:
    rng = random.Random(seed)
    nodes = ["n1", "n2", "n3", "n4"]
    partitions = []
    for p in range(rng.randint(1, 30)):
        replicas = rng.sample(nodes, 3)
        partitions.append(Led("t", p, tuple(replicas), rng.choice(replicas)))
    moves = plan(partitions, nodes, moves_max=1000)
    leaders = {(p.topic, p.partition): p.leader for p in partitions}
    for move in moves:
        assert leaders[(move.topic, move.partition)] == move.source
        leaders[(move.topic, move.partition)] = move.target
    counts = Counter({n: 0 for n in nodes}) + Counter(leaders.values())
    for p in partitions:  # no partition could still move from a node leading 2+ more than a replica
        leader = leaders[(p.topic, p.partition)]
        assert leader is not None
        assert all(counts[leader] - counts[r] < 2 for r in p.replicas)
    assert plan([replace_leader(p, leaders) for p in partitions], nodes, moves_max=10) == []


def replace_leader(item: Led, leaders: dict[tuple[str, int], str | None]) -> Led:
    return Led(item.topic, item.partition, item.replicas, leaders[(item.topic, item.partition)])


def test_a_partition_whose_leader_just_changed_counts_where_it_is_led_but_is_not_moved() -> None:
    partitions = [led(p, "n1,n2,n3", "n1") for p in range(4)] + [led(4, "n1,n2,n3", "n2")]
    settling = {("t", p) for p in range(4)}
    assert plan(partitions, ["n1", "n2", "n3"], moves_max=5, settling=settling) == []
    moves = plan(partitions, ["n1", "n2", "n3"], moves_max=5, settling=settling - {("t", 3)})
    assert moves == [Move("t", 3, "n1", "n3")]


def test_a_drain_is_a_drain() -> None:
    assert is_drain(Move("t", 0, "n3", "n1"), ["n1", "n2"])
    assert not is_drain(Move("t", 0, "n1", "n2"), ["n1", "n2"])


def test_hysteresis_acts_only_on_an_imbalance_seen_in_a_row() -> None:
    gate = Hysteresis(observations=3, settle_s=10.0, window_s=60.0, moves_per_window=10)
    assert [gate.allows(True, t) for t in (0.0, 3.0)] == [False, False]
    assert not gate.allows(False, 6.0)  # it passed: the count starts over
    assert [gate.allows(True, t) for t in (9.0, 12.0, 15.0)] == [False, False, True]
    assert gate.allows(True, 18.0), "a lasting imbalance: one transfer a round"
    assert not gate.allows(False, 21.0)
    assert not gate.allows(True, 24.0), "an imbalance back after a balanced round waits three rounds again"


def test_hysteresis_bounds_transfers_per_window() -> None:
    gate = Hysteresis(observations=1, settle_s=0.0, window_s=60.0, moves_per_window=2)
    allowed = [t for t in range(0, 120, 3) if gate.allows(True, float(t))]
    assert allowed == [0, 3, 60, 63]


def test_hysteresis_holds_a_partition_whose_leader_changed_within_the_settling_time() -> None:
    gate = Hysteresis(observations=1, settle_s=10.0)
    gate.observe([led(0, "n1,n2", "n1"), led(1, "n1,n2", None)], 0.0)
    assert gate.settling(5.0) == {("t", 0), ("t", 1)}  # new to it, and leaderless
    gate.observe([led(0, "n1,n2", "n1"), led(1, "n1,n2", "n2")], 6.0)
    assert gate.settling(10.5) == {("t", 1)}  # partition 0 has kept n1 for 10.5 s
    gate.observe([led(0, "n1,n2", "n2"), led(1, "n1,n2", "n2")], 12.0)  # 0 changed leader
    assert gate.settling(17.0) == {("t", 0)}
    assert gate.settling(22.0) == set()


def test_a_gap_under_a_tenth_of_a_node_s_share_is_left_alone() -> None:
    nodes = ["n1", "n2", "n3"]
    partitions = [led(p, "n1,n2,n3", nodes[p % 3]) for p in range(60)]  # 20 each
    partitions[1] = led(1, "n1,n2,n3", "n1")  # n1 22... n2 19
    partitions[4] = led(4, "n1,n2,n3", "n1")  # n1 22, n2 18, n3 20: a gap of 4
    assert gap_min_for(partitions, nodes) == 2
    assert len(plan(partitions, nodes, moves_max=5)) == 2
    many = [led(p, "n1,n2,n3", nodes[p % 3]) for p in range(600)]  # 200 each
    for p in range(1, 16, 3):  # five of n2's to n1: 205, 195, 200
        many[p] = led(p, "n1,n2,n3", "n1")
    assert gap_min_for(many, nodes) == 20
    assert plan(many, nodes, moves_max=5, gap_min=20) == []
    assert plan(many, nodes, moves_max=5, gap_min=2) != []
