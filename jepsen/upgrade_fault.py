"""The ``upgrade`` fault: a node stopped (SIGTERM, as an operator stops one) and started again on the same
data on the other release's code: from this checkout to the previous release (``run --upgrade-from``,
built by ``raftlog_dev.releases`` under ``.releases/``) when the window starts, back to this checkout when
it ends. The run's cluster is formed by the previous release, so at feature level 1 (this checkout forming
one finalizes its own levels at once, whose formats the previous release cannot replay), and rolled to this
checkout before the workload (:func:`roll_forward`); nothing raises the level, so either release may
serve: a rolling upgrade's way back and forth, under load.

What the node then says of itself is recorded with the switch: its own entry of ``GET /v1/nodes``, whose
``version`` a node of release 0.1.0 does not have (it gossips none) and a node of this checkout does.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jepsen.control import Cluster
from raftlog_client.client import RaftlogClient
from raftlog_client.errors import ClientError

READY_S = 60.0


def way(cluster: Cluster, node: str) -> dict[str, str]:
    """The code ``node`` runs and the code a switch starts it on."""
    other = cluster.other.version if cluster.other is not None else "checkout"
    ran = cluster.version(node)
    return {"from": ran, "to": "checkout" if ran != "checkout" else other}


async def switch(cluster: Cluster, node: str, restart: bool = True) -> dict[str, Any]:
    """Stop ``node`` and start it on the other code; what it ran, what it runs now, whether it became
    ready and what it reports of itself. ``restart`` False: the node is down (another fault's), it is only
    marked to start on the other code."""
    switched: dict[str, Any] = way(cluster, node)
    await asyncio.to_thread(cluster.stop, node)
    if node in cluster.on_other:
        cluster.on_other.discard(node)
    else:
        cluster.on_other.add(node)
    if not restart:
        return switched
    switched["pid"] = cluster.start(node)
    not_ready = await asyncio.to_thread(cluster.wait_ready, [node], READY_S)
    switched["ready"] = not not_ready
    if not_ready:
        switched["log_tail"] = cluster.log_tail(node, 5)
        return switched
    switched["reports"] = await self_description(cluster, node)
    return switched


async def self_description(cluster: Cluster, node: str) -> dict[str, Any]:
    """The node's own entry of its ``GET /v1/nodes`` (``version`` absent: release 0.1.0's code)."""
    client = RaftlogClient(
        [cluster.spec(node).http], admin_token=cluster.admin_token, timeout_s=5.0, retries=3
    )
    try:
        nodes = await client.cluster.nodes()
    except (ClientError, OSError, TimeoutError) as exc:
        return {"error": str(exc)}
    finally:
        await client.close()
    own = next((n for n in nodes if n.get("node_id") == node), {})
    return {"has_version": "version" in own, "version": own.get("version")}


def roll_forward(cluster: Cluster, ready_s: float) -> list[str]:
    """The cluster formed on the other release's code (every node in ``on_other`` at its first start), so
    at feature level 1 (this checkout forming one finalizes its own levels, which the previous release
    cannot read); then a rolling upgrade before the workload: node by node stopped, started on this
    checkout's code, ready. Returns the nodes that did not become ready (then it stops there)."""
    for node in sorted(cluster.on_other):
        cluster.stop(node)
        cluster.on_other.discard(node)
        cluster.start(node)
        not_ready = cluster.wait_ready([node], ready_s)
        if not_ready:
            return not_ready
    return []
