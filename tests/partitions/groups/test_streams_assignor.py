"""A streams group's sticky task assignor (Kafka's StickyTaskAssignor): every task active on exactly one
member, balanced, sticky; standbys of stateful tasks on other processes only; the same answer for the
same group on every replica."""

from __future__ import annotations

import random

from partitions.groups.streams.assignor import MemberSpec, TaskAssignment, assign
from partitions.groups.streams.topology import Task


def all_tasks(tasks: dict[str, int]) -> list[Task]:
    return sorted((s, p) for s, n in tasks.items() for p in range(n))


def random_group(seed: int) -> tuple[dict[str, MemberSpec], dict[str, int], frozenset[str], int]:
    """Up to 7 members on up to as many processes, each with an arbitrary (even conflicting) previous
    assignment, up to 4 subtopologies of up to 9 tasks."""
    rng = random.Random(seed)
    tasks = {f"s{i}": rng.randint(0, 9) for i in range(rng.randint(1, 4))}
    every = all_tasks(tasks)
    processes = [f"p{i}" for i in range(rng.randint(1, 7))]
    members = {
        f"m{i}": MemberSpec(
            rng.choice(processes),
            frozenset(t for t in every if rng.random() < 0.3),
            frozenset(t for t in every if rng.random() < 0.2),
        )
        for i in range(rng.randint(1, 7))
    }
    stateful = frozenset(s for s in tasks if rng.random() < 0.5)
    return members, tasks, stateful, rng.randint(0, 3)


def active_owner(result: dict[str, TaskAssignment]) -> dict[Task, str]:
    return {t: m for m, a in result.items() for t in a.active}


def test_no_members_no_assignment() -> None:
    assert assign({}, {"0": 4}, frozenset({"0"}), 1) == {}


def test_every_task_is_active_on_exactly_one_member_and_every_member_answered() -> None:
    for seed in range(200):
        members, tasks, stateful, replicas = random_group(seed)
        result = assign(members, tasks, stateful, replicas)
        assert set(result) == set(members), seed
        given = sorted(t for a in result.values() for t in a.active)
        assert given == all_tasks(tasks), seed
        assert all(a.warmup == frozenset() for a in result.values())


def test_members_hold_within_one_active_task_of_each_other() -> None:
    for seed in range(200):
        members, tasks, stateful, replicas = random_group(seed)
        held = [len(a.active) for a in assign(members, tasks, stateful, replicas).values()]
        assert max(held) - min(held) <= 1, (seed, held)


def test_a_fresh_group_spreads_over_processes_then_their_members() -> None:
    members = {"a1": MemberSpec("A"), "a2": MemberSpec("A"), "b1": MemberSpec("B")}
    result = assign(members, {"0": 6}, frozenset(), 0)
    assert sorted(len(a.active) for a in result.values()) == [2, 2, 2]
    assert assign(members, {"0": 6}, frozenset(), 0) == result


def test_a_member_joining_takes_only_what_balance_needs() -> None:
    tasks = {"0": 6, "1": 6}
    first = assign({"a": MemberSpec("A"), "b": MemberSpec("B")}, tasks, frozenset(), 0)
    assert sorted(len(x.active) for x in first.values()) == [6, 6]
    members = {m: MemberSpec(p, first[m].active) for m, p in (("a", "A"), ("b", "B"))}
    second = assign({**members, "c": MemberSpec("C")}, tasks, frozenset(), 0)
    assert len(second["c"].active) == 4
    moved = [t for t, m in active_owner(second).items() if active_owner(first).get(t) != m]
    assert len(moved) == 4  # exactly those the new member took
    for m in ("a", "b"):
        assert second[m].active <= first[m].active


def test_a_balanced_assignment_given_back_stays_as_it_is() -> None:
    for seed in range(50):
        members, tasks, stateful, replicas = random_group(seed)
        result = assign(members, tasks, stateful, replicas)
        again = {m: MemberSpec(s.process_id, result[m].active, result[m].standby) for m, s in members.items()}
        assert active_owner(assign(again, tasks, stateful, replicas)) == active_owner(result), seed


def test_a_task_whose_owner_left_goes_to_its_standby() -> None:
    # without its standby, task 0 would go to "c" (its process's id sorts first)
    members = {"b": MemberSpec("B", standby=frozenset({("0", 0)})), "c": MemberSpec("A")}
    result = assign(members, {"0": 2}, frozenset({"0"}), 0)
    assert result["b"].active == {("0", 0)} and result["c"].active == {("0", 1)}
    fresh = assign({"b": MemberSpec("B"), "c": MemberSpec("A")}, {"0": 2}, frozenset({"0"}), 0)
    assert fresh["c"].active == {("0", 0)}


def test_standbys_only_of_stateful_tasks_never_beside_a_copy_of_the_task() -> None:
    for seed in range(200):
        members, tasks, stateful, replicas = random_group(seed)
        result = assign(members, tasks, stateful, replicas)
        process = {m: s.process_id for m, s in members.items()}
        others = len(set(process.values())) - 1
        for task in all_tasks(tasks):
            holders = [process[m] for m, a in result.items() if task in a.active | a.standby]
            assert len(holders) == len(set(holders)), (seed, task, holders)
            standbys = sum(task in a.standby for a in result.values())
            wanted = min(replicas, others) if task[0] in stateful else 0
            assert standbys == wanted, (seed, task, standbys, wanted)


def test_standbys_go_to_another_process_not_a_second_thread_of_the_same() -> None:
    members = {"a1": MemberSpec("A"), "a2": MemberSpec("A"), "b1": MemberSpec("B")}
    result = assign(members, {"0": 3}, frozenset({"0"}), 2)
    process = {"a1": "A", "a2": "A", "b1": "B"}
    for task in all_tasks({"0": 3}):
        (owner,) = [m for m, a in result.items() if task in a.active]
        standby = [m for m, a in result.items() if task in a.standby]
        assert len(standby) == 1 and process[standby[0]] != process[owner]


def test_standbys_stay_where_they_were() -> None:
    members = {m: MemberSpec(m.upper()) for m in ("a", "b", "c")}
    first = assign(members, {"0": 6}, frozenset({"0"}), 1)
    again = {m: MemberSpec(m.upper(), first[m].active, first[m].standby) for m in members}
    assert assign(again, {"0": 6}, frozenset({"0"}), 1) == first


def test_the_same_group_in_any_order_gets_the_same_assignment() -> None:
    for seed in range(100):
        members, tasks, stateful, replicas = random_group(seed)
        result = assign(members, tasks, stateful, replicas)
        reordered = dict(reversed(list(members.items())))
        assert assign(reordered, dict(reversed(list(tasks.items()))), stateful, replicas) == result, seed
