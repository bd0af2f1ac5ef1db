"""``GET /v1/cluster/metrics``: every live node's ``/metrics`` in one answer, for the console's cluster-wide
charts (a browser page may only ask the node that served it).

The node answering asks each node gossip reports alive for its ``/metrics`` over HTTP, as the caller
would (with the caller's own ``Authorization``: each node checks it as its ``/metrics`` does), at once,
each within ``SCRAPE_TIMEOUT_S`` and ``SCRAPE_BYTES_MAX``, and for at most ``NODES_MAX`` nodes. A node
that is not alive, does not answer, or refuses, is listed with why; the others with their text as they
exported it. The route itself needs DESCRIBE on the cluster, as ``/metrics`` does.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import aiohttp
from aiohttp import web

from api import state

# How this node calls the others' HTTP listeners (https on a TLS cluster): set by the process that runs
# the node, absent on a plain one
PEER_SSL: web.AppKey[ssl.SSLContext] = web.AppKey("raftlog_peer_ssl")
SCRAPE_TIMEOUT_S = 3.0
SCRAPE_BYTES_MAX = 8 * 1024 * 1024  # a node's /metrics text; one with very many partitions is left out
NODES_MAX = 64


async def cluster_metrics(request: web.Request) -> web.Response:
    node = state.node(request)
    nodes = sorted(node.metadata.nodes(), key=lambda n: n.node_id)[:NODES_MAX]
    headers = {"Accept": "text/plain"}
    if "Authorization" in request.headers:
        headers["Authorization"] = request.headers["Authorization"]
    peer_ssl = request.app.get(PEER_SSL)
    connector = aiohttp.TCPConnector(ssl=peer_ssl if peer_ssl is not None else True, limit=NODES_MAX)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=True) as session:

        async def scrape(node_id: str, http: str, liveness: str) -> dict[str, Any]:
            if liveness != "alive" or not http:
                return {"node_id": node_id, "metrics": None, "error": f"node {liveness} (gossip)"}
            try:
                async with session.get(
                    http.rstrip("/") + "/metrics",
                    headers=headers,
                    allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S),
                ) as answer:
                    body = await _read_whole(answer.content, SCRAPE_BYTES_MAX + 1)
                    status = answer.status
            except (TimeoutError, aiohttp.ClientError) as exc:
                return {"node_id": node_id, "metrics": None, "error": f"did not answer: {exc!r}"}
            if status != 200:
                why = f"answered {status}: {body[:200].decode('utf-8', 'replace')}"
                return {"node_id": node_id, "metrics": None, "error": why}
            if len(body) > SCRAPE_BYTES_MAX:
                return {"node_id": node_id, "metrics": None, "error": f"over {SCRAPE_BYTES_MAX} bytes"}
            return {"node_id": node_id, "metrics": body.decode("utf-8", "replace"), "error": None}

        scraped = await asyncio.gather(*(scrape(n.node_id, n.http, n.state) for n in nodes))
    return web.json_response({"node_id": node.node_id, "nodes": list(scraped)})


async def _read_whole(content: aiohttp.StreamReader, limit: int) -> bytes:
    """The body to its end, or its first ``limit`` bytes: one ``read(n)`` returns only what has arrived (a
    node's text past ~128 KiB came cut, and the console's charts lost the histograms at its end)."""
    parts: list[bytes] = []
    held = 0
    while held < limit:
        part = await content.read(limit - held)
        if not part:
            break
        parts.append(part)
        held += len(part)
    return b"".join(parts)
