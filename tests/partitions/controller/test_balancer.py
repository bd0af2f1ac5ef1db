"""The leader balancer's plan (pure): drains first, then evens out, never onto an ineligible node."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from partitions.controller.balancer import Led, Move, plan


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
