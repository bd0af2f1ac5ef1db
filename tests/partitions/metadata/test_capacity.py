"""A node holds at most ``replicas_max`` partition replicas: a topic or a move beyond it is refused up front
with what each node has room for, and nothing changes (real in-process nodes)."""

from __future__ import annotations

import asyncio
import pathlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from in_process import configs, controller_leader, until

from partitions.broker.node import Node
from partitions.errors import CapacityExceeded

REPLICAS_MAX = 6


@pytest.fixture
async def small_cluster(tmp_path: pathlib.Path) -> AsyncIterator[list[Node]]:
    nodes = [Node(replace(c, replicas_max=REPLICAS_MAX)) for c in configs(tmp_path)]
    await asyncio.gather(*(n.start() for n in nodes))
    yield nodes
    await asyncio.gather(*(n.close() for n in nodes))


async def test_a_topic_beyond_the_clusters_capacity_is_refused_and_nothing_changes(
    small_cluster: list[Node],
) -> None:
    leader = await until(lambda: controller_leader(small_cluster), what="a controller leader")
    await leader.topic_changes.create_topic("fits", 5, 3, {})  # 5 replicas on each node
    with pytest.raises(CapacityExceeded) as refused:
        await leader.topic_changes.create_topic("big", 2, 3, {})
    assert refused.value.room == {"n1": 1, "n2": 1, "n3": 1}
    assert "at most 6 partition replicas" in str(refused.value)
    assert leader.metadata.topics() == ["fits"]
    await asyncio.sleep(0.3)  # a negative window: no replica of the refused topic opens anywhere
    assert all(node.metadata.metrics()["partition_replicas"] == 5 for node in small_cluster), (
        "a refused topic opened"
    )
    await leader.topic_changes.create_topic("one-more", 1, 3, {})  # exactly full
    await leader.topic_changes.delete_topic("fits")
    await until(lambda: "fits" not in leader.metadata.topics(), what="the delete")
    await leader.topic_changes.create_topic("big", 2, 3, {})  # room again
    assert sorted(leader.metadata.topics()) == ["big", "one-more"]


async def test_a_move_onto_a_full_node_is_refused(small_cluster: list[Node]) -> None:
    leader = await until(lambda: controller_leader(small_cluster), what="a controller leader")
    await leader.topic_changes.create_topic("pairs", 9, 2, {})  # 18 replicas: 6 on each node, every node full
    metadata = leader.frontend.topic("pairs")
    assert Counter(n for rs in metadata.replicas for n in rs) == {"n1": 6, "n2": 6, "n3": 6}
    partition, replicas = next((p, r) for p, r in enumerate(metadata.replicas) if "n3" not in r)
    await until(lambda: leader.routing.known_leader("pairs", partition), what="a leader of the partition")
    with pytest.raises(CapacityExceeded, match="n3 would hold 7"):
        await leader.topic_changes.move_replicas("pairs", partition, [*replicas, "n3"])
    assert leader.topic_changes.move_progress("pairs", partition) is None
    assert list(leader.frontend.topic("pairs").replicas[partition]) == list(replicas)
