"""Shared helpers for the real-UDP membership tests (a top-level module: this folder has no __init__)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from membership import Gossip, GossipConfig, MemberState

SECRET = b"test-cluster-secret-0123456789"

# memberlist's LAN defaults scaled down 10x so failures are detected within a couple of seconds.
FAST = GossipConfig(
    probe_interval_ms=100,
    probe_timeout_ms=50,
    gossip_interval_ms=20,
    gossip_to_the_dead_ms=3_000,
    push_pull_interval_ms=3_000,
    reconnect_interval_ms=3_000,
    push_pull_timeout_ms=2_000,
)


def state_of(observer: Gossip, node_id: str) -> MemberState | None:
    member = observer.member(node_id)
    return member.state if member is not None else None


def all_alive(nodes: list[Gossip]) -> bool:
    ids = {n.node_id for n in nodes}
    return all({m.node_id for m in n.members() if m.state is MemberState.ALIVE} >= ids for n in nodes)


@asynccontextmanager
async def cluster(
    count: int, config: GossipConfig = FAST, secret: bytes = SECRET
) -> AsyncIterator[list[Gossip]]:
    nodes = [
        Gossip(f"node-{i}", "127.0.0.1:0", secret, meta=b"m%d" % i, config=config, seed=i)
        for i in range(count)
    ]
    # imported here, not at the top: gossip_node.py, run as its own process without tests/ on its path,
    # imports this module for FAST and SECRET
    from tests.waiting import wait_until

    try:
        for node in nodes:
            await node.start()
        for node in nodes[1:]:
            assert await node.join([nodes[0].address], timeout_s=10.0) == 1  # at once unless starved
        await wait_until(lambda: all_alive(nodes), "all members alive everywhere", 10.0, every_s=0.01)
        yield nodes
    finally:
        for node in nodes:
            await node.stop()
