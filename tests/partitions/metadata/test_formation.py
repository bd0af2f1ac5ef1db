"""A new cluster's feature levels, decided once when it forms (``FormCluster``, the controller log's first
command) on three in-process nodes: at this code's levels by default, at release 0.1.0's when formed so
(``raftlog serve --release-version 0.1.0``); and a node re-provisioned later on an empty data directory
with the command line that formed the cluster, leading the controller, finalizes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import shutil
import time

from in_process import configs, controller_leader, until

from partitions.broker.node import LOGS_DIR, Node
from partitions.controller.commands import CreateTopic
from partitions.features import SUPPORTED, release_levels
from partitions.metadata import local_levels
from raftlog.errors import RaftlogError
from raftlog.storage.log_format import read_marker
from raftlog_node.format import format_data_dir

R3 = [["n1", "n2", "n3"]]
FENCED = "kafka-record-batch-v2 level=2"  # a marker release 0.1.0 refuses to open


def replicas_open(node: Node, topics: tuple[str, ...]) -> bool:
    """Whether ``node`` holds an open replica of every partition of ``topics`` (each on every node here)."""
    held = [node.metadata.topic(name) for name in topics]
    return all(node.replicas.get(t.group_id(p)) is not None for t in held for p in range(t.partitions))


def log_dirs(node: Node) -> list[str]:
    root = os.path.join(node.config.data_dir, LOGS_DIR)
    return [os.path.join(root, name) for name in os.listdir(root)] if os.path.isdir(root) else []


async def test_a_new_cluster_forms_at_its_codes_levels_before_any_other_command(
    tmp_path: pathlib.Path,
) -> None:
    nodes = [Node(c) for c in configs(tmp_path)]
    await asyncio.gather(*(n.start() for n in nodes))
    try:
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        # a command proposed at once: the formation goes first, so the cluster is at this code's levels
        await controller.frontend.propose(CreateTopic("first", R3, {}))
        await until(
            lambda: all(dict(n.features.levels()) == dict(SUPPORTED) for n in nodes), what="levels applied"
        )
        assert all(local_levels.formation(n.config.data_dir) == dict(SUPPORTED) for n in nodes)
        # kept on disk as the floor a restarted node judges its peers by before it caught up
        await until(
            lambda: all(n.level_guard.floor.levels() == dict(SUPPORTED) for n in nodes), what="floor written"
        )
        # and every partition log fenced against release 0.1.0, which opens only the plain marker
        await until(lambda: all(log_dirs(n) for n in nodes), what="the replicas opened")
        await until(
            lambda: all(read_marker(d) == FENCED for n in nodes for d in log_dirs(n)),
            what="logs fenced",
        )
    finally:
        await asyncio.gather(*(n.close() for n in nodes))


async def test_a_re_provisioned_node_leading_the_controller_finalizes_nothing(tmp_path: pathlib.Path) -> None:
    """A cluster formed at release 0.1.0's levels (as one upgraded from 0.1.0 stays until the operator
    raises them); n1 wiped and started again with the command line that formed the cluster (this code's
    levels: it records a formation again), made the controller leader: both ways a leader could finalize
    (the operator's duty, and a proposal through it) leave the cluster at level 1."""
    formed_at_1 = release_levels("0.1.0")
    node_configs = configs(tmp_path)
    for config in node_configs:  # raftlog format --release-version 0.1.0, before the first start
        format_data_dir(config.data_dir, "0.1.0")
    nodes = [Node(c) for c in node_configs]
    await asyncio.gather(*(n.start() for n in nodes))
    try:
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        await controller.frontend.propose(CreateTopic("orders", R3, {}))
        await until(lambda: all(dict(n.features.levels()) == formed_at_1 for n in nodes), what="level 1")
        n1 = nodes[0]
        await n1.close()
        shutil.rmtree(n1.config.data_dir)
        nodes[0] = n1 = Node(n1.config)  # the original command line: on an empty directory, this release
        await n1.start()
        assert local_levels.formation(n1.config.data_dir) == dict(SUPPORTED)  # it did record a formation
        await until(lambda: "orders" in n1.metadata.topics(), timeout_s=30, what="n1 caught up")
        deadline = time.monotonic() + 60
        while controller_leader(nodes) is not n1:
            assert time.monotonic() < deadline, "n1 never took the controller's leadership"
            leader = controller_leader(nodes)
            if leader is not None:
                with contextlib.suppress(RaftlogError):  # not caught up yet, or timed out: asked again
                    await leader.frontend.leader_group().transfer_leadership("n1", 5000)
            await asyncio.sleep(0.1)
        ticked = n1.operator.ticks
        await until(lambda: n1.operator.ticks >= ticked + 3, what="n1's operator ticked as the leader")
        await n1.frontend.form_if_new()  # the operator's duty, once more on this task
        await n1.frontend.propose(CreateTopic("later", R3, {}))  # a proposal through it
        await until(lambda: all("later" in n.metadata.topics() for n in nodes), what="later applied")
        # each replica's log opened (off the event loop: a directory being made has no marker yet)
        await until(lambda: all(replicas_open(n, ("orders", "later")) for n in nodes), what="logs opened")
        assert all(dict(n.features.levels()) == formed_at_1 for n in nodes)
        assert all(n.frontend.metadata().features == formed_at_1 for n in nodes)
        # at level 1 the logs keep release 0.1.0's marker: any node may go back to it
        assert all(read_marker(d) == "kafka-record-batch-v2" for n in nodes for d in log_dirs(n))
    finally:
        await asyncio.gather(*(n.close() for n in nodes))
