"""The rules for changing the controller group's members, pure: who may join or leave now and why not,
when a learner is promoted, and whom a leaving leader hands over to."""

from __future__ import annotations

from partitions.controller.members import (
    ControllerMembers,
    add_refusal,
    best_successor,
    learner_to_promote,
    remove_refusal,
)

ALL = ["n1", "n2", "n3", "n4", "n5"]


def members(voters: str, learners: str = "", pending: str | None = None) -> ControllerMembers:
    match = {f"n{c}": 100 for c in voters + learners if c != "1"}
    return ControllerMembers(
        "n1",
        3,
        tuple(f"n{c}" for c in voters),
        tuple(f"n{c}" for c in learners),
        100,
        match,
        pending,
    )


def test_a_live_node_that_is_no_member_may_join_when_nothing_else_changes() -> None:
    assert add_refusal(members("123"), "n4", ALL, []) is None
    assert "already a controller voter" in str(add_refusal(members("123"), "n2", ALL, []))
    assert "already joining" in str(add_refusal(members("123", "4"), "n4", ALL, []))
    assert "n4 is joining" in str(add_refusal(members("123", "4"), "n5", ALL, []))
    assert "not applied" in str(add_refusal(members("123", pending="not applied yet"), "n4", ALL, []))
    assert "not alive" in str(add_refusal(members("123"), "n4", ["n1", "n2", "n3"], []))
    assert "decommissioned" in str(add_refusal(members("123"), "n4", ALL, ["n4"]))


def test_a_voter_leaves_only_with_a_live_majority_left_and_never_the_last() -> None:
    assert remove_refusal(members("123"), "n3", ALL) is None
    assert remove_refusal(members("12"), "n2", ALL) is None  # one voter left, alive
    assert "last voter" in str(remove_refusal(members("1"), "n1", ALL))
    assert "not a member" in str(remove_refusal(members("123"), "n4", ALL))
    # n3 down: without n2, n1 and n3 are left with one alive of two
    assert "no majority" in str(remove_refusal(members("123"), "n2", ["n1", "n2"]))
    # five voters, two down: removing a live one leaves 2 of 4 alive
    assert "no majority" in str(remove_refusal(members("12345"), "n5", ["n1", "n2", "n5"]))
    assert remove_refusal(members("12345"), "n4", ["n1", "n2", "n3"]) is None  # a dead one may go
    assert "n4 is joining" in str(remove_refusal(members("123", "4"), "n3", ALL))
    assert remove_refusal(members("123", "4"), "n4", ALL) is None  # cancels the add


def test_a_learner_is_promoted_once_caught_up_to_the_goal() -> None:
    assert learner_to_promote(members("123"), None) is None
    joining = members("123", "4")
    behind = ControllerMembers(
        joining.leader, 3, joining.voters, joining.learners, 150, {**joining.match_index, "n4": 120}
    )
    assert learner_to_promote(behind, 130) is None  # match index 120 of 130
    assert learner_to_promote(behind, 120) == "n4"
    assert learner_to_promote(behind, 100) == "n4"
    assert learner_to_promote(behind, None) is None, "no goal yet: the commit index now (150)"


def test_a_leaving_leader_hands_over_to_the_most_caught_up_live_voter() -> None:
    group = ControllerMembers("n1", 3, ("n1", "n2", "n3"), (), 100, {"n2": 90, "n3": 100})
    assert best_successor(group, "n1", ALL) == "n3"
    assert best_successor(group, "n1", ["n1", "n2"]) == "n2"
    assert best_successor(group, "n1", ["n1"]) is None
