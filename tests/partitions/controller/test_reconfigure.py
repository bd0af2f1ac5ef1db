"""Replica moves as pure decisions: each step, a whole move against a model of the Raft group (with
cancels at random points, and joiners that copy their partition logs from their peers after installing a
snapshot), and the validation of move requests. A node joins as a learner, is promoted once caught up and
its log holds every record, and only then counted; an old replica goes, and the move ends, only once
every joiner's log is complete."""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import replace

import pytest

from partitions.controller.reconfigure import (
    Change,
    MemberView,
    Record,
    ReplicaLog,
    Wait,
    joined,
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
    logs = {"n4": ReplicaLog(applied_index=92, end_offset=700, high_watermark=700)}
    assert next_step(move, ["n1", "n2", "n3"], caught_up, 90, logs) == Change("promote", "n4")
    promoted = view("n1", {"n1", "n2", "n3", "n4"}, commit=121)
    assert next_step(move, ["n1", "n2", "n3"], promoted, None) == Record(("n1", "n2", "n4", "n3"), None)


def test_a_learner_that_installed_a_snapshot_is_promoted_only_once_its_log_holds_every_record() -> None:
    """Its match index reached the goal with the snapshot (the entries' metadata), while its partition
    log still lacks the records it copies from its peers: it stays a learner, the old voters stay, until
    it says its log reached its high watermark."""
    move = Reassignment(("n1", "n2", "n3"), ("n1", "n2", "n4"), adding="n4")
    voters = {"n1", "n2", "n3"}
    caught_up = view("n1", voters, commit=120, match={"n2": 120, "n3": 120, "n4": 120}, learners={"n4"})
    copying = {"n4": ReplicaLog(applied_index=120, end_offset=3_000, high_watermark=90_000)}
    step = next_step(move, ["n1", "n2", "n3"], caught_up, 90, copying)
    assert isinstance(step, Wait) and "n4" in step.reason and "3000 of 90000" in step.reason
    unheard = next_step(move, ["n1", "n2", "n3"], caught_up, 90, {})
    assert isinstance(unheard, Wait) and "n4" in unheard.reason, "a log not heard of is not complete"
    assert isinstance(next_step(move, ["n1", "n2", "n3"], caught_up, 90), Wait)
    not_applied = {"n4": ReplicaLog(applied_index=80, end_offset=5_000, high_watermark=5_000)}
    step = next_step(move, ["n1", "n2", "n3"], caught_up, 90, not_applied)
    assert isinstance(step, Wait) and "applied index 80 of 90" in step.reason
    complete = {"n4": ReplicaLog(applied_index=120, end_offset=90_000, high_watermark=90_000)}
    assert next_step(move, ["n1", "n2", "n3"], caught_up, 90, complete) == Change("promote", "n4")


def test_an_old_voter_goes_and_the_move_ends_only_while_every_joiner_holds_its_whole_log() -> None:
    """A joiner promoted complete that is behind again (it installed a newer snapshot) holds up the
    removal of an old voter and the end of the move; a cancelled move takes the joiners out without
    waiting for anything."""
    move = Reassignment(("n1", "n2", "n3"), ("n2", "n3", "n4"))
    four = view("n2", {"n1", "n2", "n3", "n4"})
    recorded = ["n2", "n3", "n4", "n1"]
    assert joined(move, four) == ["n4"]
    behind = {"n4": ReplicaLog(200, 10, 500)}
    step = next_step(move, recorded, four, None, behind)
    assert isinstance(step, Wait) and "n4" in step.reason
    assert isinstance(next_step(move, recorded, four, None, {}), Wait)
    complete = {"n4": ReplicaLog(200, 500, 500)}
    assert next_step(move, recorded, four, None, complete) == Change("remove", "n1")
    led_by_leaving = view("n1", {"n1", "n2", "n3", "n4"})
    assert isinstance(next_step(move, recorded, led_by_leaving, None, behind), Wait), "no transfer either"
    three = view("n2", {"n2", "n3", "n4"})
    assert isinstance(next_step(move, ["n2", "n3", "n4"], three, None, behind), Wait), "the move goes on"
    assert next_step(move, ["n2", "n3", "n4"], three, None, complete) == Record(("n2", "n3", "n4"), None)
    # the removal committed, not yet recorded: recording it would end the move
    assert isinstance(next_step(move, recorded, three, None, behind), Wait)
    assert next_step(move, recorded, three, None, complete) == Record(("n2", "n3", "n4"), None)
    grown = Reassignment(("n1", "n2"), ("n1", "n2", "n3"))
    assert isinstance(next_step(grown, ["n1", "n2", "n3"], view("n1", {"n1", "n2", "n3"}), None), Wait)
    cancelled = Reassignment(("n1", "n2", "n3"), ("n1", "n2", "n3"), cancelled=True)
    assert joined(cancelled, four) == []
    assert next_step(cancelled, recorded, four, None) == Change("remove", "n4")


def test_a_voter_the_controller_does_not_count_yet_is_counted_at_once() -> None:
    """A voter joined before learners (an older leader added it as a voter) or promoted and elected
    leader before the record: it is a voter, so it is counted."""
    move = Reassignment(("n1", "n2", "n3"), ("n1", "n2", "n4"), adding="n4")
    group = view("n4", {"n1", "n2", "n3", "n4"}, commit=50, match={"n1": 50, "n2": 50, "n3": 10})
    assert next_step(move, ["n1", "n2", "n3"], group, catch_up_goal=40) == Record(
        ("n1", "n2", "n4", "n3"), None
    )


COMPLETE = ReplicaLog(10, 100, 100)


def test_a_leaving_leader_hands_over_first_to_the_most_caught_up_staying_voter() -> None:
    move = Reassignment(("n1", "n2", "n3"), ("n2", "n3", "n4"))
    voters = {"n1", "n2", "n3", "n4"}
    logs = {"n4": COMPLETE}
    group = view("n1", voters, match={"n2": 8, "n3": 10, "n4": 10})
    assert next_step(move, ["n2", "n3", "n4", "n1"], group, None, logs) == Change("transfer", "n4")
    after = view("n4", voters)
    assert next_step(move, ["n2", "n3", "n4", "n1"], after, None, logs) == Change("remove", "n1")
    removed = view("n4", {"n2", "n3", "n4"})
    assert next_step(move, ["n2", "n3", "n4", "n1"], removed, None, logs) == Record(("n2", "n3", "n4"), None)


def test_a_full_replacement_alternates_joins_and_removals() -> None:
    move = Reassignment(("n1", "n2", "n3"), ("n4", "n5", "n6"))
    four = view("n1", {"n1", "n2", "n3", "n4"})
    assert next_step(move, ["n4", "n1", "n2", "n3"], four, None, {"n4": COMPLETE}) == Change("remove", "n2")
    three = view("n1", {"n1", "n3", "n4"})
    assert next_step(move, ["n4", "n1", "n3"], three, None) == Record(("n4", "n1", "n3"), "n5")


def test_a_node_that_joined_before_a_cancel_is_removed_without_waiting() -> None:
    move = Reassignment(("n1", "n2", "n3"), ("n1", "n2", "n3"), adding="n4", cancelled=True)
    learner = view("n1", {"n1", "n2", "n3"}, match={"n2": 10, "n3": 10, "n4": 0}, learners={"n4"})
    assert next_step(move, ["n1", "n2", "n3"], learner, None) == Change("remove", "n4")
    promoted = view("n1", {"n1", "n2", "n3", "n4"}, match={"n2": 10, "n3": 10, "n4": 10})
    assert next_step(move, ["n1", "n2", "n3"], promoted, None) == Change("remove", "n4")


class Group:
    """A model of one partition's Raft group and the controller's record of it, with each member's
    partition log: one that installed a snapshot copies its records from its peers for some rounds."""

    def __init__(self, original: list[str], rng: random.Random) -> None:
        self.voters = set(original)
        self.learners: set[str] = set()
        self.recorded = list(original)
        self.leader = original[0]
        self.match = {n: 0 for n in original}
        self.commit = 0
        self.copying: dict[str, int] = {}  # member -> rounds its log copy still takes (absent: complete)
        self.rng = rng

    def tick(self) -> None:
        """Some writes commit; every voter catches up part of the way; now and then an election makes
        another caught-up voter the leader (a newly joined one included); copies go on, and now and then
        a member installs a snapshot again and has records to copy."""
        self.commit += self.rng.randint(0, 5)
        for node in self.voters | self.learners:
            self.match[node] = min(self.commit, self.match[node] + self.rng.randint(0, 20))
        for node in list(self.copying):
            self.copying[node] -= 1
            if self.copying[node] <= 0:
                del self.copying[node]
        if self.rng.random() < 0.02:
            self.copying[self.rng.choice(sorted(self.voters | self.learners))] = self.rng.randint(1, 10)
        if self.rng.random() < 0.05:
            self.leader = self.rng.choice(
                sorted(n for n in self.voters if self.match[n] == self.commit) or [self.leader]
            )

    def join(self, node: str) -> None:
        self.learners.add(node)
        self.match[node] = 0
        if self.rng.random() < 0.5:  # the leader's journal was compacted: a snapshot, then a copy
            self.copying[node] = self.rng.randint(1, 40)

    def complete(self, node: str) -> bool:
        return node not in self.copying

    def logs(self, nodes: list[str]) -> dict[str, ReplicaLog]:
        """The accounts the nodes give of their logs (now and then one does not answer)."""
        answered = [n for n in nodes if self.rng.random() < 0.9]
        high_watermark = self.commit + 1  # records in offsets 0..commit, one an entry
        end = {n: 0 if n in self.copying else high_watermark for n in answered}
        return {n: ReplicaLog(self.match[n], end[n], high_watermark) for n in answered}

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
        joiners = joined(move, group.view())
        step = next_step(move, group.recorded, group.view(), goal, group.logs(joiners))
        goal = (goal if goal is not None else group.commit) if group.learners else None
        before = set(group.voters)
        all_complete = all(group.complete(n) for n in joiners)
        if isinstance(step, Record):
            goal = None
            group.recorded = list(step.replicas)
            if set(step.replicas) == set(move.target) and step.adding is None:
                assert all_complete, f"the move ended while a joiner copies: {group.copying}"
                return group.recorded, move.cancelled, history
            move = replace(move, adding=step.adding)
        elif isinstance(step, Change) and step.kind == "learner":
            assert step.node == move.adding, "only the recorded joining node is added"
            assert not group.learners, "one learner at a time"
            group.join(step.node)
        elif isinstance(step, Change) and step.kind == "promote":
            assert step.node in group.learners
            assert group.match[step.node] >= (goal or 0), "promoted before it caught up"
            assert group.complete(step.node), "promoted while its log copy goes on"
            group.learners.discard(step.node)
            group.voters.add(step.node)
        elif isinstance(step, Change) and step.kind == "remove":
            assert step.node != group.leader, "a leader is never removed"
            if step.node in original:
                assert all_complete, f"an old replica removed while a joiner copies: {group.copying}"
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
