"""The fence of a node just (re)started (``partitions.metadata.catch_up``): it is lifted only once the node
applied the controller's metadata up to what the controller leader had applied when asked, or leads the
controller group, or (without a controller replica) its follower restored the leader's snapshot; a node
forming a new cluster, only once its controller log holds the formation."""

from __future__ import annotations

import asyncio

from waiting import wait_until

from partitions.metadata.catch_up import CatchUp
from partitions.metadata.service import ControllerSnapshot
from raftlog.consensus.errors import NoLeader


class Controller:
    """What the fence reads of the node, changed by the test."""

    def __init__(self) -> None:
        self.applied = 5  # what the restarted replica held: its snapshot
        self.leader: str | None = None
        self.replica = True
        self.followed = False
        self.leader_applied = 40
        self.asked: list[tuple[str, int | None]] = []
        self.refuse = 1  # answers NoLeader this many times first
        self.formed = True  # the controller log holds the cluster's formation (or the node forms none)

    async def fetch(self, node: str, known_index: int | None) -> ControllerSnapshot:
        self.asked.append((node, known_index))
        if self.refuse:
            self.refuse -= 1
            raise NoLeader("__controller")
        return ControllerSnapshot(node, "", self.leader_applied, b"")

    def fence(self) -> CatchUp:
        return CatchUp("n3", lambda: self.applied, lambda: self.leader, lambda: self.replica,
                       lambda: self.followed, self.fetch, lambda: self.formed)  # fmt: skip


async def settle() -> None:
    """A negative window: some of the fence's polls go by, and what it must not do is not done."""
    for _ in range(30):
        await asyncio.sleep(0.02)


async def test_a_replica_is_fenced_until_it_applied_what_the_leader_had_applied() -> None:
    controller = Controller()
    fence = controller.fence()
    fence.start()
    try:
        await settle()
        assert not fence.caught_up and controller.asked == [], "no leader known yet: nothing to ask"
        controller.leader = "n1"

        async def asked_twice() -> bool:
            return len(controller.asked) >= 2

        await wait_until(asked_twice, "the fence asked n1, and again after its refusal")
        assert controller.asked[-1] == ("n1", 5) and len(controller.asked) == 2, "asked again after a refusal"
        assert not fence.caught_up
        controller.applied = 39
        controller.leader_applied = 100  # the leader moved on: the fence waits for what it answered first
        await settle()
        assert not fence.caught_up
        controller.applied = 40
        await asyncio.wait_for(fence.wait(), 5)
        assert len(controller.asked) == 2
        controller.applied, controller.leader = 0, None  # lifted once: it stays lifted
        await settle()
        assert fence.caught_up
    finally:
        await fence.close()


async def test_the_controller_leader_itself_and_a_follower_that_restored_a_snapshot_are_caught_up() -> None:
    leading = Controller()
    leading.leader = "n3"  # it leads, and applied what was committed before its election
    fence = leading.fence()
    fence.start()
    try:
        await asyncio.wait_for(fence.wait(), 5)
        assert leading.asked == []
    finally:
        await fence.close()
    following = Controller()
    following.replica, following.leader = False, "n1"
    fence = following.fence()
    fence.start()
    try:
        await settle()
        assert not fence.caught_up and following.asked == [], "a follower's own snapshot restore counts"
        following.followed = True
        await asyncio.wait_for(fence.wait(), 5)
    finally:
        await fence.close()


async def test_a_node_forming_a_new_cluster_is_fenced_until_its_log_holds_the_formation() -> None:
    """Its controller leader elected, nothing committed before: without the formation applied the
    cluster's levels are the base ones, and a client told ready was refused a registry change (409)."""
    forming = Controller()
    forming.applied, forming.leader, forming.formed = 0, "n3", False
    fence = forming.fence()
    fence.start()
    try:
        await settle()
        assert not fence.caught_up, "said caught up before the cluster's levels were formed"
        forming.applied, forming.formed = 1, True  # FormCluster, the log's first command, applied
        await asyncio.wait_for(fence.wait(), 5)
    finally:
        await fence.close()
