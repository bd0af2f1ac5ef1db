"""Serving API apps over fake nodes on 127.0.0.1 ephemeral ports (used by conftest and tests)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from fake_node import FakeCluster, FakeData, FakeNode

from api.app import build_app


@dataclass
class Node:
    node: FakeNode
    client: TestClient[Any, Any]
    url: str

    @property
    def data(self) -> FakeData:
        return self.node.data


class Harness:
    def __init__(self) -> None:
        self.clients: list[TestClient[Any, Any]] = []
        self.nodes: list[FakeNode] = []

    async def start(
        self, cluster: FakeCluster, node_id: str, peer_timeout_s: float = 15.0, **settings: Any
    ) -> Node:
        """Node ``node_id`` of ``cluster``, its HTTP API served here (``settings``: ``build_app``'s)."""
        node = FakeNode(cluster, node_id, peer_timeout_s)
        self.nodes.append(node)
        server = TestServer(build_app(node, **settings), host="127.0.0.1")
        client: TestClient[Any, Any] = TestClient(server)
        await client.start_server()
        self.clients.append(client)
        url = str(client.make_url("")).rstrip("/")
        cluster.addresses[node_id] = url
        return Node(node, client, url)

    async def close(self) -> None:
        for client in self.clients:
            await client.close()
        for node in self.nodes:
            await node.close()
