"""Replica moves as pure decisions: each step, a whole move against a model of the Raft group (with
cancels at random points), and the validation of move requests. A node joins as a learner, is promoted
once caught up, and only then counted."""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import replace

import pytest

from partitions.controller.reconfigure import (
    Change,
    MemberView,
    Record,
    Wait,
    next_step,
    replacement_for,
    validate_move,
)
from partitions.controller.state import Reassignment
from partitions.errors import InvalidReassignment, UnknownNode

NODES = ["n1", "n2", "n3", "n4", "n5", "n6"]


def view(
    leader: str,
    voters: set[str],
    commit: int = 10,
    match: dict[str, int] | None = None,
    learners: Collection[str] = (),
) -> MemberView:
    others = {n: commit for n in voters | set(learners) if n != leader} if match is None else match
    return MemberView(leader, frozenset(voters), commit, others, frozenset(learners))


def test_the_first_step_names_the_joining_node_then_adds_it() -> None:
    move = Reassignment(("n1", "n2", "n3"), ("n1", "n2", "n4"))
    assert next_step(move, ["n1", "n2", "n3"], view("n1", {"n1", "n2", "n3"}), None) == Record(
        ("n1", "n2", "n3"), "n4"
    )
    joining = replace(move, adding="n4")
    assert next_step(joining, ["n1", "n2", "n3"], view("n1", {"n1", "n2", "n3"}), None) == Change(
        "learner", "n4"
    )


def test_a_learner_is_promoted_once_caught_up_and_counted_once_a_voter() -> None:
    move = Reassignment(("n1", "n2", "n3"), ("n1", "n2", "n4"), adding="n4")
    voters = {"n1", "n2", "n3"}
    behind = view("n1", voters, commit=100, match={"n2": 100, "n3": 100, "n4": 40}, learners={"n4"})
    step = next_step(move, ["n1", "n2", "n3"], behind, catch_up_goal=90)
    assert isinstance(step, Wait) and "n4" in step.reason
    caught_up = view("n1", voters, commit=120, match={"n2": 120, "n3": 120, "n4": 95}, learners={"n4"})
    assert next_step(move, ["n1", "n2", "n3"], caught_up, catch_up_goal=90) == Change("promote", "n4")
    promoted = view("n1", {"n1", "n2", "n3", "n4"}, commit=121)
    assert next_step(move, ["n1", "n2", "n3"], promoted, None) == Record(("n1", "n2", "n4", "n3"), None)


def test_a_voter_the_controller_does_not_count_yet_is_counted_at_once() -> None:
    """A voter joined before learners (an older leader added it as a voter) or promoted and elected
    leader before the record: it is a voter, so it is counted."""
    move = Reassignment(("n1", "n2", "n3"), ("n1", "n2", "n4"), adding="n4")
    group = view("n4", {"n1", "n2", "n3", "n4"}, commit=50, match={"n1": 50, "n2": 50, "n3": 10})
    assert next_step(move, ["n1", "n2", "n3"], group, catch_up_goal=40) == Record(
        ("n1", "n2", "n4", "n3"), None
    )


def test_a_leaving_leader_hands_over_first_to_the_most_caught_up_staying_voter() -> None:
    move = Reassignment(("n1", "n2", "n3"), ("n2", "n3", "n4"))
    voters = {"n1", "n2", "n3", "n4"}
    group = view("n1", voters, match={"n2": 8, "n3": 10, "n4": 10})
    assert next_step(move, ["n2", "n3", "n4", "n1"], group, None) == Change("transfer", "n4")
    after = view("n4", voters)
    assert next_step(move, ["n2", "n3", "n4", "n1"], after, None) == Change("remove", "n1")
    removed = view("n4", {"n2", "n3", "n4"})
    assert next_step(move, ["n2", "n3", "n4", "n1"], removed, None) == Record(("n2", "n3", "n4"), None)


def test_a_full_replacement_alternates_joins_and_removals() -> None:
    move = Reassignment(("n1", "n2", "n3"), ("n4", "n5", "n6"))
    four = view("n1", {"n1", "n2", "n3", "n4"})
    assert next_step(move, ["n4", "n1", "n2", "n3"], four, None) == Change("remove", "n2")
    three = view("n1", {"n1", "n3", "n4"})
    assert next_step(move, ["n4", "n1", "n3"], three, None) == Record(("n4", "n1", "n3"), "n5")


def test_a_node_that_joined_before_a_cancel_is_removed_without_waiting() -> None:
    move = Reassignment(("n1", "n2", "n3"), ("n1", "n2", "n3"), adding="n4", cancelled=True)
    learner = view("n1", {"n1", "n2", "n3"}, match={"n2": 10, "n3": 10, "n4": 0}, learners={"n4"})
    assert next_step(move, ["n1", "n2", "n3"], learner, None) == Change("remove", "n4")
    promoted = view("n1", {"n1", "n2", "n3", "n4"}, match={"n2": 10, "n3": 10, "n4": 10})
    assert next_step(move, ["n1", "n2", "n3"], promoted, None) == Change("remove", "n4")


class Group:
    """A model of one partition's Raft group and the controller's record of it."""

    def __init__(self, original: list[str], rng: random.Random) -> None:
        self.voters = set(original)
        self.learners: set[str] = set()
        self.recorded = list(original)
        self.leader = original[0]
        self.match = {n: 0 for n in original}
        self.commit = 0
        self.rng = rng

    def tick(self) -> None:
        """Some writes commit; every voter catches up part of the way; now and then an election makes
        another caught-up voter the leader (a newly joined one included)."""
        self.commit += self.rng.randint(0, 5)
        for node in self.voters | self.learners:
            self.match[node] = min(self.commit, self.match[node] + self.rng.randint(0, 20))
        if self.rng.random() < 0.05:
            self.leader = self.rng.choice(
                sorted(n for n in self.voters if self.match[n] == self.commit) or [self.leader]
            )

    def view(self) -> MemberView:
        return MemberView(
            self.leader,
            frozenset(self.voters),
            self.commit,
            {n: self.match[n] for n in self.voters | self.learners if n != self.leader},
            frozenset(self.learners),
        )


def run_move(
    original: list[str], target: list[str], cancel_at: int | None, seed: int
) -> tuple[list[str], bool, list[tuple[set[str], set[str]]]]:
    """Drive a move to its end; returns the final replicas, whether it was cancelled before it ended, and
    each round's voters before and after (a learner promoted counts as a voter joining then)."""
    rng = random.Random(seed)
    group = Group(original, rng)
    move = Reassignment(tuple(original), tuple(target))
    goal: int | None = None
    history = []
    for round_number in range(500):
        group.tick()
        if round_number == cancel_at:
            move = replace(move, target=move.original, cancelled=True)
        if rng.random() < 0.2:
            continue  # a failed call: the same state is looked at again next round
        step = next_step(move, group.recorded, group.view(), goal)
        goal = (goal if goal is not None else group.commit) if group.learners else None
        before = set(group.voters)
        if isinstance(step, Record):
            goal = None
            group.recorded = list(step.replicas)
            if set(step.replicas) == set(move.target) and step.adding is None:
                return group.recorded, move.cancelled, history
            move = replace(move, adding=step.adding)
        elif isinstance(step, Change) and step.kind == "learner":
            assert step.node == move.adding, "only the recorded joining node is added"
            assert not group.learners, "one learner at a time"
            group.learners.add(step.node)
            group.match[step.node] = 0
        elif isinstance(step, Change) and step.kind == "promote":
            assert step.node in group.learners
            assert group.match[step.node] >= (goal or 0), "promoted before it caught up"
            group.learners.discard(step.node)
            group.voters.add(step.node)
        elif isinstance(step, Change) and step.kind == "remove":
            assert step.node != group.leader, "a leader is never removed"
            group.voters.discard(step.node)
            group.learners.discard(step.node)
        elif isinstance(step, Change) and step.kind == "transfer":
            assert step.node in group.voters
            group.leader = step.node
        history.append((before, set(group.voters)))
    raise AssertionError(f"move {original} -> {target} did not end in 500 rounds")


@pytest.mark.parametrize("seed", range(60))
def test_random_moves_end_at_their_target_one_voter_change_at_a_time(seed: int) -> None:
    rng = random.Random(seed)
    original = rng.sample(NODES, rng.randint(1, 5))
    size = rng.randint(len(original) // 2 + 1, 5)
    target = rng.sample(NODES, size)
    if target == original:
        target = target[::-1] if len(target) > 1 else [n for n in NODES if n not in original][:1]
    cancel_at = rng.choice([None, None, rng.randint(0, 30)])
    final, cancelled, history = run_move(original, target, cancel_at, seed)
    expected = original if cancelled else target
    assert set(final) == set(expected)  # the controller then stores it in the target's order
    peak = max(len(original), len(target)) + 1
    for before, after in history:
        assert len(before ^ after) <= 1, f"more than one voter changed at once: {before} -> {after}"
        assert len(after) <= peak, f"{len(after)} voters, more than {peak}: {original} -> {target}"


def test_validation_refuses_bad_sets_and_accepts_good_ones() -> None:
    known, alive = NODES, ["n1", "n2", "n3", "n4"]
    current = ["n1", "n2", "n3"]
    assert validate_move(current, ["n1", "n2", "n4"], known, alive, ()) == ["n1", "n2", "n4"]
    assert validate_move(current, ["n2", "n3"], known, alive, ()) == ["n2", "n3"]  # shrink to the quorum
    with pytest.raises(UnknownNode):
        validate_move(current, ["n1", "n2", "n9"], known, alive, ())
    for bad in ([], ["n1", "n1", "n2"], ["n1"], ["n1", "n2", "n5"], "n1", [3], ["n1", "n2", "n3"]):
        with pytest.raises(InvalidReassignment):
            validate_move(current, bad, known, alive, ())
    with pytest.raises(InvalidReassignment, match="decommissioned"):
        validate_move(current, ["n1", "n2", "n4"], known, alive, ["n4"])
    with pytest.raises(InvalidReassignment, match="alive"):
        validate_move(current, ["n1", "n2", "n4"], known, ["n1", "n4"], ())


def test_replacement_takes_the_least_loaded_free_node_in_the_same_position() -> None:
    load = {"n3": 5, "n4": 1, "n5": 1}
    assert replacement_for("n2", ["n1", "n2", "n3"], ["n1", "n3", "n4", "n5"], load) == ["n1", "n4", "n3"]
    assert replacement_for("n2", ["n1", "n2"], ["n1"], load) is None
