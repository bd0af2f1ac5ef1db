"""Serving API apps over fake brokers on 127.0.0.1 ephemeral ports (used by conftest and tests)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from fake_broker import FakeBroker, FakeCluster

from api.app import build_app


@dataclass
class Node:
    broker: FakeBroker
    client: TestClient[Any, Any]
    url: str


class Harness:
    def __init__(self) -> None:
        self.clients: list[TestClient[Any, Any]] = []

    async def start(self, cluster: FakeCluster, node_id: str, **settings: Any) -> Node:
        broker = FakeBroker(cluster, node_id)
        server = TestServer(build_app(broker, **settings), host="127.0.0.1")
        client: TestClient[Any, Any] = TestClient(server)
        await client.start_server()
        self.clients.append(client)
        url = str(client.make_url("")).rstrip("/")
        cluster.addresses[node_id] = url
        return Node(broker, client, url)

    async def close(self) -> None:
        for client in self.clients:
            await client.close()
