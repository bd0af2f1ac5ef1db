"""The controller's record of replica moves and node flags: deterministic, refusals change nothing, and a
snapshot carries all of it."""

from __future__ import annotations

import msgpack

from partitions.controller import commands as ctl
from partitions.controller.commands import (
    CancelMove,
    CreateTopic,
    DeleteTopic,
    MoveReplicas,
    SetNodeFlag,
    StepMove,
)
from partitions.controller.state import ControllerStateMachine, Reassignment, TopicMetadata
from partitions.errors import InvalidCommand, InvalidReassignment, NoReassignment, ReassignmentInProgress

R3 = [["n1", "n2", "n3"]]


def apply_all(machine: ControllerStateMachine, *commands: ctl.ControllerCommand) -> list[object]:
    start = machine.applied_index
    return [machine.apply(start + i + 1, 1, ctl.encode(c)) for i, c in enumerate(commands)]


def test_a_move_records_each_step_and_ends_in_the_target_order() -> None:
    machine = ControllerStateMachine()
    _, started, joining, counted, removed = apply_all(
        machine,
        CreateTopic("t", R3),
        MoveReplicas("t", 0, ["n4", "n2", "n3"]),
        StepMove("t", 0, ["n1", "n2", "n3"], "n4"),
        StepMove("t", 0, ["n2", "n3", "n4", "n1"], None),
        StepMove("t", 0, ["n2", "n3", "n4"], None),
    )
    assert started == Reassignment(("n1", "n2", "n3"), ("n4", "n2", "n3"))
    assert isinstance(joining, TopicMetadata) and joining.replicas == (("n1", "n2", "n3"),)
    assert isinstance(counted, TopicMetadata) and counted.replicas == (("n2", "n3", "n4", "n1"),)
    assert isinstance(removed, TopicMetadata) and removed.replicas == (("n4", "n2", "n3"),)
    assert machine.metadata.reassignments == {}


def test_refusals_change_nothing() -> None:
    machine = ControllerStateMachine()
    apply_all(machine, CreateTopic("t", R3), MoveReplicas("t", 0, ["n1", "n2", "n4"]))
    before = machine.snapshot()
    results = apply_all(
        machine,
        MoveReplicas("t", 0, ["n1", "n2", "n5"]),
        MoveReplicas("t", 9, ["n1"]),
        StepMove("t", 0, [], None),
        StepMove("t", 0, ["n1", "n1"], None),
    )
    assert isinstance(results[0], ReassignmentInProgress)
    assert all(isinstance(r, Exception) for r in results)
    assert isinstance(apply_all(machine, CancelMove("nope", 0))[0], Exception)
    after = ControllerStateMachine()
    after.restore(before)
    assert (
        after.metadata.reassignments == machine.metadata.reassignments
        and after.metadata.topics == machine.metadata.topics
    )
    fresh = ControllerStateMachine()
    apply_all(fresh, CreateTopic("t", R3))
    assert isinstance(apply_all(fresh, StepMove("t", 0, ["n1"], None))[0], NoReassignment)
    assert isinstance(apply_all(fresh, MoveReplicas("t", 0, ["n1", "n2", "n3"]))[0], InvalidReassignment)


def test_cancel_turns_the_move_around_and_delete_forgets_it() -> None:
    machine = ControllerStateMachine()
    apply_all(machine, CreateTopic("t", R3), MoveReplicas("t", 0, ["n1", "n2", "n4"]))
    [cancelled] = apply_all(machine, CancelMove("t", 0))
    assert cancelled == Reassignment(("n1", "n2", "n3"), ("n1", "n2", "n3"), None, True)
    apply_all(machine, DeleteTopic("t"))
    assert machine.metadata.reassignments == {}


def test_node_flags_and_snapshot_round_trip() -> None:
    machine = ControllerStateMachine()
    apply_all(
        machine,
        CreateTopic("t", R3),
        MoveReplicas("t", 0, ["n1", "n2", "n4"]),
        SetNodeFlag("n3", "decommissioning", True),
        SetNodeFlag("n2", "maintenance", True),
        SetNodeFlag("n2", "maintenance", False),
        SetNodeFlag("n1", "maintenance", True),
    )
    assert machine.metadata.node_flags == {"decommissioning": {"n3"}, "maintenance": {"n1"}}
    restored = ControllerStateMachine()
    restored.restore(machine.snapshot())
    assert restored.metadata.node_flags == machine.metadata.node_flags
    assert restored.metadata.reassignments == machine.metadata.reassignments
    assert restored.metadata.topics == machine.metadata.topics


def test_malformed_commands_are_refused() -> None:
    machine = ControllerStateMachine()
    for fields in ([1, 4, "t", "0", ["n1"]], [1, 6, "t", 0, ["n1"], 5], [1, 7, "n1", "asleep", True]):
        result = machine.apply(machine.applied_index + 1, 1, msgpack.packb(fields))
        assert isinstance(result, InvalidCommand)
