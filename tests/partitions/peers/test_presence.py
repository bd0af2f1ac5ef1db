"""Presence (partitions/peers/presence.py), the room that is this node in gossip, on three in-process nodes:
each node lists every node with its address, liveness, release, feature levels and disk use as that node
gossiped them; leadership claims published by a leader reach the others' routing, also when they do not
fit a gossip datagram (only their version travels, and peers fetch the table); a node that stops is seen
going and its claims are dropped."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from in_process import Served, configs, controller_leader, partition_leader, until

import raftlog
from partitions import features
from partitions.broker.node import Node

WAIT_S = 60.0  # gossip rounds and elections on a loaded 2-core machine


async def _started(tmp_path: pathlib.Path, meta_bytes_max: int | None = None) -> list[Served]:
    size = {} if meta_bytes_max is None else {"meta_bytes_max": meta_bytes_max}
    served = [Served(replace(c, gossip=replace(c.gossip, **size))) for c in configs(tmp_path)]
    await asyncio.gather(*(s.start() for s in served))
    return served


@pytest.fixture
async def served(tmp_path: pathlib.Path) -> AsyncIterator[list[Served]]:
    running = await _started(tmp_path)
    try:
        yield running
    finally:
        await asyncio.gather(*(s.stop() for s in running))


async def test_every_node_lists_every_node_as_it_gossiped_itself(served: list[Served]) -> None:
    nodes = [s.node for s in served]
    ids = sorted(n.node_id for n in nodes)

    def listed(node: Node) -> bool:
        infos = node.presence.nodes()
        return [i.node_id for i in infos] == ids and all(
            i.state == "alive" and i.disk_used_bytes is not None and i.version is not None for i in infos
        )

    for node in nodes:
        await until(
            lambda n=node: listed(n), WAIT_S, f"{node.node_id} lists every node, alive, with its disk"
        )
    for node in nodes:
        for info in node.presence.nodes():
            own = next(s for s in served if s.node.node_id == info.node_id)
            assert info.http == next(p.http for p in own.config.peers if p.node_id == info.node_id)
            assert (info.version, info.features) == (raftlog.version(), dict(features.SUPPORTED))
            assert info.disk_free_bytes is not None and info.disk_free_bytes > 0
            assert not info.disk_full and not info.maintenance and not info.decommissioning


async def _leads_everywhere(nodes: list[Node], topic: str) -> Node:
    """The partition's leader once every node routes to it."""
    leader = await until(lambda: partition_leader(nodes, topic), WAIT_S, f"a leader of {topic}")

    def known() -> bool:
        return all(n.routing.known_leader(topic, 0) == leader.node_id for n in nodes)

    await until(known, WAIT_S, f"every node knows {leader.node_id} leads {topic}")
    return leader


def _counts_agree(nodes: list[Node]) -> bool:
    """Every node counts each node's leaderships as that node claims them (what it heard in gossip, or
    fetched when the claims did not fit)."""
    claimed = {n.node_id: n.presence.led_count() for n in nodes}
    return all({i.node_id: i.leader_of for i in n.presence.nodes()} == claimed for n in nodes)


@pytest.mark.parametrize("meta_bytes_max", [None, 200], ids=["in-gossip", "fetched"])
async def test_a_leaders_claims_reach_every_node_and_follow_a_transfer(
    tmp_path: pathlib.Path, meta_bytes_max: int | None
) -> None:
    """200 bytes: the claims do not fit the datagram with the rest, and peers fetch them (PeerService)."""
    served = await _started(tmp_path, meta_bytes_max)
    try:
        nodes = [s.node for s in served]
        controller = await until(lambda: controller_leader(nodes), WAIT_S, "a controller leader")
        await controller.topic_changes.create_topic("claimed", 1, 3, {})
        leader = await _leads_everywhere(nodes, "claimed")
        group_id = leader.frontend.topic("claimed").group_id(0)
        await until(lambda: group_id in leader.presence.leadership().claims, WAIT_S, "the leader's claim")
        await until(lambda: _counts_agree(nodes), WAIT_S, "every node counting every claim")
        before = leader.presence.leadership()

        target = next(n for n in nodes if n is not leader)
        await leader.partition_admin.transfer_leadership("claimed", 0, target.node_id, 30_000)
        assert await _leads_everywhere(nodes, "claimed") is target
        await until(
            lambda: (
                group_id in target.presence.leadership().claims
                and group_id not in leader.presence.leadership().claims
            ),
            WAIT_S,
            "the claim moved with the leadership",
        )
        await until(lambda: _counts_agree(nodes), WAIT_S, "every node counting the moved claim")
        assert leader.presence.leadership().version > before.version  # a changed table, a new version
    finally:
        await asyncio.gather(*(s.stop() for s in served))


async def test_a_node_that_stops_is_seen_going_and_leads_nothing_any_more(served: list[Served]) -> None:
    nodes = [s.node for s in served]
    controller = await until(lambda: controller_leader(nodes), WAIT_S, "a controller leader")
    await controller.topic_changes.create_topic("left", 1, 3, {})
    leader = await _leads_everywhere(nodes, "left")
    gone = next(s for s in served if s.node is leader)
    await gone.stop()
    served.remove(gone)
    rest = [s.node for s in served]

    def seen_going(node: Node) -> bool:
        info = next(i for i in node.presence.nodes() if i.node_id == gone.node.node_id)
        return info.state != "alive"

    for node in rest:
        await until(lambda n=node: seen_going(n), WAIT_S, f"{node.node_id} sees {gone.node.node_id} go")
    new = await _leads_everywhere(rest, "left")
    assert new is not leader
