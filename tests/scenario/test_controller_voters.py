"""The controller group's voters changed on real node processes: a node that joined by gossip becomes a
controller voter (a learner first), the old controller leader is killed and the cluster still commits
metadata, which it could not without the new voter's vote; a voter that leads the controller is removed
(it hands over first), leaves the group and follows the metadata as a joined node does, also after a
restart, and may join again (no other change meanwhile)."""

from __future__ import annotations

import asyncio
import os
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from raftlog_client.client import RaftlogClient
from raftlog_client.errors import RequestFailed

from .cluster import ProcessCluster
from .test_admin_under_load import TOKEN, WAIT_S, admin_token_args, refused, until

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[ProcessCluster]:
    started = ProcessCluster.create(str(tmp_path), count=3, joining=1)
    for argv in started.argv.values():
        argv += admin_token_args(str(tmp_path))
    try:
        started.start_all()
        yield started
    finally:
        started.stop_all()


def replica_on_disk(cluster: ProcessCluster, node: str) -> bool:
    return os.path.isdir(os.path.join(cluster.root, node, "raft", "controller"))


def test_a_joined_node_becomes_a_controller_voter_and_a_leader_is_removed(cluster: ProcessCluster) -> None:
    async def scenario() -> None:
        async with RaftlogClient(cluster.urls, admin_token=TOKEN, retries=60, backoff_max_s=0.5) as admin:
            before: dict[str, Any] = await until("a controller leader", admin.cluster.controller)
            assert before["voters"] == ["n1", "n2", "n3"] and before["learners"] == []
            assert not replica_on_disk(cluster, "n4")
            await until("n4 alive to every node", lambda: alive_everywhere(cluster, "n4"))

            added = await admin.cluster.add_controller_voter("n4")
            assert "n4" in added["learners"] or "n4" in added["voters"]
            await refused(admin.cluster.add_controller_voter("n4"), 409, 40914)  # joining already

            async def n4_votes() -> bool:
                return "n4" in (await admin.cluster.controller())["voters"]

            await until("n4 promoted to controller voter", n4_votes)
            assert replica_on_disk(cluster, "n4")

            # four voters: without n4, the two static voters left could not commit (2 of 4)
            old_leader = (await admin.cluster.controller())["leader"]
            cluster.kill(old_leader)
            await until(
                "a topic created with the old controller leader dead", lambda: created(admin, "after")
            )
            after = await admin.cluster.controller()
            assert after["leader"] != old_leader and "n4" in after["voters"]

            # the dead voter leaves the group; then the leader itself (it hands over first)
            await admin.cluster.remove_controller_voter(old_leader)
            leader = (await admin.cluster.controller())["leader"]
            remaining = [n for n in after["voters"] if n not in (old_leader, leader)]
            await refused(admin.cluster.remove_controller_voter("n9"), 404, 40405)
            removed = await admin.cluster.remove_controller_voter(leader)
            assert removed["voters"] == sorted(remaining) and removed["leader"] in remaining

            async def left() -> bool:
                return not replica_on_disk(cluster, leader) and os.path.exists(
                    os.path.join(cluster.root, leader, "raft", "controller.left")
                )

            await until(f"{leader} closed its controller replica", left)
            # the removed node follows the metadata, also after a restart
            await admin.create_topic("later", partitions=1, replication_factor=2)
            async with RaftlogClient([cluster.url(leader)], admin_token=TOKEN, retries=60) as removed_node:

                async def sees_later() -> bool:
                    return "later" in await removed_node.topics()

                await until(f"{leader} follows the metadata", sees_later)
                cluster.kill(leader)
                cluster.start(leader)
                await asyncio.to_thread(cluster.wait_ready, [leader])
                assert not replica_on_disk(cluster, leader)
                await until(f"{leader} follows the metadata after a restart", sees_later)
            assert (await admin.cluster.controller())["voters"] == sorted(remaining)

            # it may join again; while it is a learner, no other change may start. Gossip may still hold
            # its previous incarnation alive a moment after the restart, and a node busy starting may miss
            # a ping and be suspected: the controller leader's own view decides, so its refusal of a node
            # not alive is asked again (every other refusal fails the test)
            await until(f"{leader} alive to every node", lambda: alive_everywhere(cluster, leader))
            await until(f"{leader} taken back into the controller group", lambda: joins(admin, leader))
            refusal = await _refusal(admin.cluster.remove_controller_voter(remaining[0]))
            assert refusal["error_code"] == 40914 and "joining" in refusal["reason"], refusal

            async def back() -> bool:
                return leader in (await admin.cluster.controller())["voters"]

            await until(f"{leader} a controller voter again", back)
            assert replica_on_disk(cluster, leader)
            assert not os.path.exists(os.path.join(cluster.root, leader, "raft", "controller.left"))
            await admin.create_topic("last", partitions=1, replication_factor=2)

    asyncio.run(asyncio.wait_for(scenario(), WAIT_S * 8))


async def alive_everywhere(cluster: ProcessCluster, node: str) -> bool:
    """Whether every running node's gossip holds ``node`` alive (a new voter must be, to the controller
    leader that decides; a node just started or restarted is known a moment later, longer on a busy
    machine)."""
    running = [node_id for node_id, process in cluster.processes.items() if process.poll() is None]
    for url in map(cluster.url, running):
        async with RaftlogClient([url], admin_token=TOKEN, retries=3) as one:
            if not any(n["node_id"] == node and n["state"] == "alive" for n in await one.cluster.nodes()):
                return False
    return True


async def created(admin: RaftlogClient, topic: str) -> bool:
    """Create ``topic``; an earlier try that went through but whose answer was lost counts."""
    try:
        await admin.create_topic(topic, partitions=1, replication_factor=2)
    except RequestFailed as failure:
        if failure.error_code != 40901:  # exists
            raise
    return True


async def joins(admin: RaftlogClient, node: str) -> bool:
    """Ask the controller leader to take ``node`` in: False while it refuses it as not alive to it."""
    try:
        await admin.cluster.add_controller_voter(node)
    except RequestFailed as failure:
        if failure.status == 409 and "is not alive" in str(failure):
            return False
        raise
    return True


async def _refusal(call: Any) -> dict[str, Any]:
    with pytest.raises(RequestFailed) as failure:
        await call
    body: dict[str, Any] = failure.value.body
    return body
