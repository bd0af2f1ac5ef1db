"""ACLs on three in-process nodes: made and removed through the controller leader's frontend (as the admin
service reaches it), applied by every node, written into the controller's snapshot when its journal is
compacted, and there again after every node restarted."""

from __future__ import annotations

import asyncio
import pathlib
from dataclasses import replace

from in_process import configs, controller_leader, snapshot_metadata, until

from partitions.broker.node import Node
from partitions.security.acls import AclBinding, AclFilter


def acl(name: str, operation: str = "read") -> AclBinding:
    return AclBinding.of("topic", name, "literal", "User:alice", "*", operation, "allow")


def snapshot_acls(node: Node) -> tuple[AclBinding, ...] | None:
    """The ACLs of the controller snapshot on ``node``'s disk; None while it has none."""
    metadata = snapshot_metadata(node)
    return None if metadata is None else metadata.acls


async def test_acls_are_in_the_controllers_snapshot_and_survive_a_restart_of_every_node(
    tmp_path: pathlib.Path,
) -> None:
    # the journal is compacted behind a snapshot every 200 ms, so the ACLs reach the snapshot quickly
    node_configs = [
        replace(c, core=replace(c.core, compaction_min_interval_ms=200)) for c in configs(tmp_path)
    ]
    nodes = [Node(c) for c in node_configs]
    await asyncio.gather(*(n.start() for n in nodes))
    kept = (acl("orders"), acl("logs", "write"))
    try:
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        created = await controller.security.create_acls([*kept, acl("gone")])
        assert set(created) == {*kept, acl("gone")}
        removed = await controller.security.delete_acls([AclFilter.of(name="gone")])
        assert removed == [[acl("gone")]]
        expected = tuple(sorted(kept, key=AclBinding.to_row))
        await until(lambda: all(n.metadata.acls() == expected for n in nodes), what="ACLs applied everywhere")
        await until(
            lambda: all(snapshot_acls(n) == expected for n in nodes),
            timeout_s=30,
            what="ACLs in every snapshot",
        )
    finally:
        await asyncio.gather(*(n.close() for n in nodes))

    nodes = [Node(c) for c in node_configs]
    await asyncio.gather(*(n.start() for n in nodes))
    try:
        await until(lambda: all(n.metadata.acls() == expected for n in nodes), timeout_s=30, what="ACLs back")
        controller = await until(lambda: controller_leader(nodes), what="controller leader after restart")
        assert await controller.security.create_acls([acl("orders")]) == []  # there already
    finally:
        await asyncio.gather(*(n.close() for n in nodes))
