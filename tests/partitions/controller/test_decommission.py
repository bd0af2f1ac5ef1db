"""What keeps a decommission from moving a node's replicas, and the refusal of one that could never
finish (pure)."""

from __future__ import annotations

from partitions.controller import decommission
from partitions.controller.decommission import Blocked, blockers, refusal
from partitions.controller.state import Reassignment

RF3 = {"orders": [["n1", "n2", "n3"], ["n2", "n3", "n1"]], "audit": [["n3", "n1", "n2"]]}


def test_replication_factor_3_on_3_nodes_leaves_no_node_to_go_to() -> None:
    found = blockers("n3", RF3, {}, ["n1", "n2", "n3"], {"n3"})
    assert [(b.topic, b.partition, b.kind) for b in found] == [
        ("audit", 0, "no_target"),
        ("orders", 0, "no_target"),
        ("orders", 1, "no_target"),
    ]
    assert found[1].reason == "no node to go to: every other live node (n1, n2) already holds a replica of it"
    assert refusal("n3", found, ["n1", "n2", "n3"], {"n3"}) == (
        "cannot decommission n3: 3 replica(s) have no node to go to (audit/0, orders/0, orders/1): each of "
        "their partitions already has a replica on every other live node that is not being decommissioned; "
        "add a node or lower the replication factor"
    )


def test_a_fourth_live_node_is_somewhere_to_go() -> None:
    assert blockers("n3", RF3, {}, ["n1", "n2", "n3", "n4"], set()) == []
    assert blockers("n9", RF3, {}, ["n1"], set()) == [], "a node that holds nothing has nothing to move"


def test_a_dead_or_leaving_fourth_node_is_not() -> None:
    [dead, *_] = blockers("n3", RF3, {}, ["n1", "n2", "n3"], {"n3"})
    assert dead.kind == "no_target"
    [leaving, *_] = blockers("n3", RF3, {}, ["n1", "n2", "n3", "n4"], {"n4"})
    assert leaving.reason == (
        "no node to go to: every other live node (n1, n2) already holds a replica of it; n4 is being "
        "decommissioned"
    )


def test_a_move_to_a_node_that_died_is_blocked_and_says_so() -> None:
    moves = {("orders", 0): Reassignment(("n1", "n2", "n3"), ("n1", "n2", "n4"), adding="n4")}
    found = blockers("n3", {"orders": [["n1", "n2", "n3"]]}, moves, ["n1", "n2", "n3"], {"n3"})
    assert found == [
        Blocked("orders", 0, "target_down", "moving to n1,n2,n4, but n4 is not alive"),
    ]
    assert blockers("n3", {"orders": [["n1", "n2", "n3"]]}, moves, ["n1", "n2", "n3", "n4"], {"n3"}) == []


def test_a_partition_without_a_live_majority_cannot_change_its_members() -> None:
    found = blockers("n3", {"t": [["n1", "n2", "n3"]]}, {}, ["n3", "n4", "n5"], {"n3"})
    assert found == [
        Blocked(
            "t",
            0,
            "no_quorum",
            "only 1 of its replicas ['n1', 'n2', 'n3'] is alive: no membership change can commit",
        )
    ]


def test_a_partition_another_move_keeps_on_the_node_waits_for_it() -> None:
    moves = {("t", 0): Reassignment(("n1", "n2", "n3"), ("n3", "n1", "n4"))}
    [waiting] = blockers("n3", {"t": [["n1", "n2", "n3"]]}, moves, ["n1", "n2", "n3", "n4"], {"n3"})
    assert waiting.kind == "waiting" and "keeps a replica on n3" in waiting.reason


def test_a_refusal_names_ten_partitions_and_counts_the_rest() -> None:
    many = {"t": [["n1", "n2"] for _ in range(25)]}
    found = blockers("n2", many, {}, ["n1", "n2"], set())
    message = refusal("n2", found, ["n1", "n2"], {"n2"})
    assert "25 replica(s)" in message and "t/9 and 15 more" in message and "t/10" not in message
    alone = refusal("n2", blockers("n2", {"t": [["n2"]]}, {}, ["n2"], set()), ["n2"], {"n2"})
    assert alone.endswith("no other node is alive and not being decommissioned; add a node or bring one back")


def test_a_decommission_is_finished_once_its_node_holds_no_replica() -> None:
    assignments = {"a": [["n1", "n2"], ["n2", "n3"]], "b": [["n1", "n3"]]}
    assert not decommission.finished("n3", {"n3"}, assignments)  # still holds a/1 and b/0
    assert decommission.finished("n4", {"n4"}, assignments)
    assert not decommission.finished("n4", set(), assignments)  # not decommissioned: just empty
    assert decommission.finished("n3", {"n3"}, {"a": [["n1", "n2"]]})
