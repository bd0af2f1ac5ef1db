"""How the benchmarks reach a raftlog cluster over HTTP, through the client package: the base URLs a
``--server``/``--servers`` option names (``parse_servers``), and ``Http``: a retrying admin client that
makes and removes topics (waiting until every partition has a leader) and reads the nodes and their
backlog of files to remove, beside one-attempt requests for what is measured. ``raftlog bench cluster``
and perf's raftlog target (``targets.py``) both use it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from raftlog_bench.cluster_report import REPLICATION_FACTOR
from raftlog_bench.output import say
from raftlog_client.client import RaftlogClient
from raftlog_client.errors import ClientError, RequestFailed
from raftlog_contract import METRICS_PATH

TOPIC_TIMEOUT_S = 120.0
REMOVAL_METRIC = "raftlog_removal_pending_bytes"


def parse_servers(text: str) -> list[str]:
    servers = [part.strip().rstrip("/") for part in text.split(",") if part.strip()]
    if not servers:
        raise ValueError(f"{text!r}: give at least one base URL, e.g. http://127.0.0.1:8081")
    for server in servers:
        if not server.startswith(("http://", "https://")):
            raise ValueError(f"{server!r}: a base URL starts with http:// or https://")
    return servers


class Http:
    """How the benchmark reaches the cluster, through the client package: ``admin``, a ``RaftlogClient``
    whose calls retry 503 and unreachable servers for up to ``TOPIC_TIMEOUT_S``, for setting up and
    tearing down; ``session``, one attempt per request and every failure counted, for what is measured."""

    def __init__(self, servers: list[str], admin_token: str | None, connections_max: int) -> None:
        self.servers = servers
        self.admin = RaftlogClient(
            servers, admin_token=admin_token, retries=None, retry_for_s=TOPIC_TIMEOUT_S,
            backoff_max_s=0.2, session_limit=connections_max,
        )  # fmt: skip
        self.session = self.admin.session
        self.node_of_url: dict[str, str] = {}  # base URL -> node id (from GET /v1/nodes)

    async def close(self) -> None:
        await self.admin.close()

    async def learn_nodes(self) -> dict[str, str]:
        """Node id -> base URL (and the reverse in ``node_of_url``), from ``GET /v1/nodes``."""
        url_of_node = {
            str(n["node_id"]): str(n["http"]).rstrip("/") for n in await self.admin.cluster.nodes()
        }
        self.node_of_url = {url: node for node, url in url_of_node.items()}
        return url_of_node

    async def create_topic(self, name: str, partitions: int, configs: dict[str, Any] | None = None) -> float:
        """Create the topic and wait until every partition has a leader; the seconds it took."""
        start = time.monotonic()
        await self.admin.create_topic(
            name, partitions=partitions, replication_factor=REPLICATION_FACTOR, configs=configs
        )
        while True:
            with contextlib.suppress(ClientError):  # e.g. a node that does not know the topic yet
                views = await self.admin.partitions(name)
                if len(views) == partitions and all(p.get("leader") for p in views):
                    return time.monotonic() - start
            if time.monotonic() - start > TOPIC_TIMEOUT_S:
                raise RuntimeError(
                    f"topic {name}: not every partition has a leader after {TOPIC_TIMEOUT_S} s"
                )
            await asyncio.sleep(0.2)

    async def removal_backlog(self) -> int | None:
        """Bytes of deleted files every node still has to remove (``raftlog_removal_pending_bytes``
        summed over the servers); None if a server did not answer with it."""
        total = 0
        for server in self.servers:
            try:
                answer = await self.session.exchange("GET", server + METRICS_PATH, timeout_s=5)
            except ClientError:
                return None
            text = answer.body.decode("utf-8", "replace")
            values = [line.split()[1] for line in text.splitlines() if line.startswith(REMOVAL_METRIC + " ")]
            if not values:
                return None
            total += int(float(values[0]))
        return total

    async def delete_topic(self, name: str) -> None:
        try:
            await self.admin.delete_topic(name)
        except RequestFailed as exc:
            if exc.status != 404:
                say(f"deleting topic {name}: {exc}")
        except ClientError as exc:
            say(f"deleting topic {name}: {exc}")

    def forwarded(self, url: str, leader_header: str | None) -> bool:
        asked = self.node_of_url.get(url)
        return asked is not None and leader_header is not None and asked not in leader_header.split(",")
