"""``partitions.metadata.follower``: a node outside the controller group copies the controller's applied
metadata. It asks any live node first, follows the leader a refusal names, restores a snapshot only when
the leader's applied index moved past its own (and says so once per restore), tells the leader what it
holds so an unchanged answer carries no snapshot, and goes back to the live nodes when the leader it knew
fails."""

from __future__ import annotations

import pytest

from partitions.controller.commands import SetFeatureLevel, encode
from partitions.controller.state import ControllerStateMachine
from partitions.features import RAFTLOG_VERSION
from partitions.metadata import follower
from partitions.metadata.follower import MetadataFollower
from partitions.metadata.service import ControllerSnapshot
from raftlog.consensus.errors import NotLeader
from raftlog.errors import RaftlogError
from tests.waiting import wait_until


class Controller:
    """The controller leader ``n1`` and a node without a controller replica, ``n4``."""

    def __init__(self) -> None:
        self.machine = ControllerStateMachine()
        self.asked: list[tuple[str, int | None]] = []
        self.down = False

    def apply_level(self, level: int) -> None:
        self.machine.apply(self.machine.applied_index + 1, 1, encode(SetFeatureLevel(RAFTLOG_VERSION, level)))

    async def fetch(self, node: str, known: int | None) -> ControllerSnapshot:
        self.asked.append((node, known))
        if node == "n4":
            raise NotLeader("controller", "n1")
        if self.down:
            raise RaftlogError("connection refused")
        index = self.machine.applied_index
        snapshot = None if known == index else self.machine.snapshot()
        return ControllerSnapshot("n1", "http://n1", index, snapshot)


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follower, "POLL_S", 0.001)


async def test_a_node_outside_the_controller_group_follows_the_leader_it_is_told_of() -> None:
    controller = Controller()
    controller.apply_level(1)
    changes: list[int] = []
    machine = ControllerStateMachine()
    worker = MetadataFollower("n5", machine, controller.fetch, lambda: ["n4"], lambda: changes.append(1))
    worker.start()
    try:
        await wait_until(lambda: worker.synced, "the follower synced from n1", 30.0, every_s=0.001)
        assert (worker.leader, machine.applied_index) == ("n1", 1)
        assert machine.metadata.features == {RAFTLOG_VERSION: 1}
        assert controller.asked[:2] == [("n4", None), ("n1", None)]  # n4 named the leader
        await wait_until(
            lambda: len(controller.asked) >= 6, "six asks of the controller", 30.0, every_s=0.001
        )
        assert changes == [1]  # unchanged since: asked with its index, answered without a snapshot
        assert set(controller.asked[2:]) == {("n1", 1)}
        controller.apply_level(2)
        await wait_until(
            lambda: machine.applied_index == 2, "level 2 applied by the follower", 30.0, every_s=0.001
        )
        assert machine.metadata.features == {RAFTLOG_VERSION: 2} and changes == [1, 1]
    finally:
        await worker.close()


async def test_when_the_leader_fails_the_follower_asks_the_live_nodes_again() -> None:
    controller = Controller()
    controller.apply_level(1)
    machine = ControllerStateMachine()
    worker = MetadataFollower("n5", machine, controller.fetch, lambda: ["n4"], lambda: None)
    worker.start()
    try:
        await wait_until(lambda: worker.synced, "the follower synced from n1", 30.0, every_s=0.001)
        controller.down = True
        await wait_until(
            lambda: worker.leader is None, "the follower dropping the failed leader", 30.0, every_s=0.001
        )
        asked = len(controller.asked)
        await wait_until(
            lambda: any(node == "n4" for node, _ in controller.asked[asked:]),
            "the follower asking the live node n4 again",
            30.0,
            every_s=0.001,
        )
        controller.down = False
        await wait_until(
            lambda: worker.leader == "n1", "the follower back on n1 once it answers", 30.0, every_s=0.001
        )
    finally:
        await worker.close()
