"""A real controller refuses a decommission that could never finish, and changes nothing."""

from __future__ import annotations

import asyncio
import pathlib

import pytest
from in_process import configs, controller_leader, until

from partitions.broker.node import Node
from partitions.errors import DecommissionImpossible
from raftlog.consensus.errors import NotLeader


async def test_decommissioning_a_node_of_a_3_node_cluster_with_replication_factor_3_is_refused(
    tmp_path: pathlib.Path,
) -> None:
    nodes = [Node(c) for c in configs(tmp_path)]
    await asyncio.gather(*(n.start() for n in nodes))
    try:
        await until(lambda: all(len(n.routing.alive_nodes()) == 3 for n in nodes), what="gossip")
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        await controller.topic_changes.create_topic("orders", 2, 3, {})
        leaving = next(n for n in nodes if n is not controller).node_id
        with pytest.raises(DecommissionImpossible) as refused:
            await controller.topic_changes.set_node_flag(leaving, "decommissioning", True)
        assert str(refused.value).startswith(
            f"cannot decommission {leaving}: 2 replica(s) have no node to go to (orders/0, orders/1): "
        )
        assert [(t, p) for t, p, _ in refused.value.partitions] == [("orders", 0), ("orders", 1)]
        status = controller.topic_changes.decommission_status(leaving)
        assert (
            status["decommissioning"] is False
            and status["blocked"] == []
            and status["replicas_remaining"] == 2
        )
        assert controller.frontend.metadata().node_flags["decommissioning"] == set()
        follower = next(n for n in nodes if n is not controller)
        with pytest.raises(NotLeader):  # judged on the controller leader: the API forwards it there
            await follower.topic_changes.set_node_flag(leaving, "decommissioning", True)
    finally:
        await asyncio.gather(*(n.close() for n in nodes))
