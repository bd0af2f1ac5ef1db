"""Users' API tokens on three in-process nodes: made and revoked through the controller leader's frontend
(as the admin service reaches it), applied by every node, written into the controller's snapshot when its
journal is compacted, and there again after every node restarted; a revoked token is gone everywhere."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Mapping
from dataclasses import replace

from in_process import configs, controller_leader, snapshot_metadata, until

from partitions.broker.node import Node
from partitions.security.tokens import ApiToken, check_token, issue_token
from partitions.security.users import make_credential

NOW_MS = 1_700_000_000_000


def snapshot_tokens(node: Node) -> Mapping[str, ApiToken] | None:
    """The tokens of the controller snapshot on ``node``'s disk; None while it has none."""
    metadata = snapshot_metadata(node)
    return None if metadata is None else metadata.tokens


async def test_tokens_are_in_the_controllers_snapshot_and_survive_a_restart_of_every_node(
    tmp_path: pathlib.Path,
) -> None:
    node_configs = [
        replace(c, core=replace(c.core, compaction_min_interval_ms=200)) for c in configs(tmp_path)
    ]
    nodes = [Node(c) for c in node_configs]
    await asyncio.gather(*(n.start() for n in nodes))
    kept_text, kept = issue_token("alice", NOW_MS, None, "kept")
    gone_text, gone = issue_token("alice", NOW_MS, None, "revoked")
    try:
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        await controller.security.set_user("alice", [make_credential("SCRAM-SHA-256", "a password")])
        assert await controller.security.create_token(kept) == kept
        assert await controller.security.create_token(gone) == gone
        assert await controller.security.delete_token("alice", gone.token_id) == gone
        await until(
            lambda: all(dict(n.metadata.tokens()) == {kept.token_id: kept} for n in nodes),
            what="tokens applied everywhere",
        )
        assert all(check_token(n.metadata.tokens(), gone_text, NOW_MS) is None for n in nodes)
        await until(
            lambda: all(snapshot_tokens(n) == {kept.token_id: kept} for n in nodes),
            timeout_s=30,
            what="tokens in every snapshot",
        )
    finally:
        await asyncio.gather(*(n.close() for n in nodes))

    nodes = [Node(c) for c in node_configs]
    await asyncio.gather(*(n.start() for n in nodes))
    try:
        await until(
            lambda: all(check_token(n.metadata.tokens(), kept_text, NOW_MS) == kept for n in nodes),
            timeout_s=30,
            what="tokens back",
        )
    finally:
        await asyncio.gather(*(n.close() for n in nodes))
