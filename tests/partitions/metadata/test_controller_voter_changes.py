"""``partitions.metadata.controller_voters`` on the controller leader, over a recording controller group:
a refused change changes nothing; an added node is a learner; the leader that is asked to leave hands
over to the most caught-up live voter first and sends the caller there; a removed voter is told to leave,
and when it cannot be told the removal stands (it finds out by itself)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from partitions.errors import ControllerChangeRefused
from partitions.metadata.controller_voters import ControllerVoters
from raftlog.consensus.errors import NotLeader
from raftlog.errors import RaftlogError


@dataclass
class Group:
    """The controller group as its leader n1 holds it; every membership change is recorded."""

    voters: set[str] = field(default_factory=lambda: {"n1", "n2", "n3"})
    learners: set[str] = field(default_factory=set)
    match_index: dict[str, int] = field(default_factory=lambda: {"n2": 40, "n3": 42})
    done: list[tuple[str, str]] = field(default_factory=list)

    def status(self) -> Any:
        return SimpleNamespace(
            term=5, voters=self.voters, learners=self.learners, commit_index=42, match_index=self.match_index
        )

    def membership_pending(self) -> str | None:
        return None

    async def add_learner(self, node: str, timeout_ms: int) -> None:
        self.done.append(("add learner", node))
        self.learners.add(node)

    async def transfer_leadership(self, node: str, timeout_ms: int) -> None:
        self.done.append(("transfer", node))

    async def remove_replica(self, node: str, timeout_ms: int) -> None:
        self.done.append(("remove", node))
        self.voters.discard(node)


@dataclass
class Frontend:
    group: Group
    alive: list[str]
    decommissioning: set[str] = field(default_factory=set)
    told: list[str] = field(default_factory=list)
    deaf: bool = False  # a removed voter that cannot be told
    node_id: str = "n1"

    def leader_group(self) -> Group:
        return self.group

    def known_node(self, node: str) -> None:
        return None

    def members(self) -> Any:
        return SimpleNamespace(alive_nodes=lambda: list(self.alive))

    def metadata(self) -> Any:
        return SimpleNamespace(node_flags={"decommissioning": self.decommissioning})

    async def tell_leave(self, node: str, why: str) -> None:
        if self.deaf:
            raise RaftlogError(f"{node} unreachable")
        self.told.append(node)


def voters(frontend: Frontend) -> ControllerVoters:
    return ControllerVoters(frontend)  # type: ignore[arg-type]


async def test_an_added_node_is_a_learner_and_a_refused_add_changes_nothing() -> None:
    frontend = Frontend(Group(), alive=["n2", "n3", "n4"], decommissioning={"n5"})
    members = await voters(frontend).add_controller_voter("n4")
    assert members.learners == ("n4",) and members.voters == ("n1", "n2", "n3")
    with pytest.raises(ControllerChangeRefused, match="one change at a time"):
        await voters(frontend).add_controller_voter("n6")
    frontend.group.learners.clear()
    with pytest.raises(ControllerChangeRefused, match="not alive"):
        await voters(frontend).add_controller_voter("n6")
    with pytest.raises(ControllerChangeRefused, match="decommissioned"):
        frontend.alive.append("n5")
        await voters(frontend).add_controller_voter("n5")
    assert frontend.group.done == [("add learner", "n4")]


async def test_the_leader_asked_to_leave_hands_over_to_the_most_caught_up_live_voter_first() -> None:
    frontend = Frontend(Group(), alive=["n2", "n3"])
    with pytest.raises(NotLeader) as moved:
        await voters(frontend).remove_controller_voter("n1")
    assert moved.value.leader_hint == "n3"  # the call runs again there
    assert frontend.group.done == [("transfer", "n3")] and "n1" in frontend.group.voters


async def test_a_removed_voter_is_told_to_leave_and_the_removal_stands_when_it_cannot_be_told() -> None:
    frontend = Frontend(Group(), alive=["n2", "n3"])
    members = await voters(frontend).remove_controller_voter("n3")
    assert members.voters == ("n1", "n2") and frontend.told == ["n3"]
    frontend = Frontend(Group(), alive=["n2", "n3"], deaf=True)
    members = await voters(frontend).remove_controller_voter("n3")
    assert members.voters == ("n1", "n2") and frontend.told == []


async def test_a_removal_that_would_leave_no_live_majority_changes_nothing() -> None:
    frontend = Frontend(Group(), alive=[])  # n2 and n3 down: without n2, n1 alone of n1 and n3
    with pytest.raises(ControllerChangeRefused, match="no majority"):
        await voters(frontend).remove_controller_voter("n2")
    assert frontend.group.done == []
