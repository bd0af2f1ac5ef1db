"""Operator endpoints over fake nodes: configs, replica moves, decommission, maintenance, and the admin
token on all of them. Bad requests are 4xx and change nothing. (The internal calls the controller leader
makes are peer ops: tests/api/test_internal_endpoints.py.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_node import FakeCluster
from harness import Harness, Node


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster(["n1", "n2", "n3", "n4"])


async def answer(response: Any, status: int, code: int | None = None) -> dict[str, Any]:
    text = await response.text()
    assert response.status == status, text
    body: dict[str, Any] = json.loads(text)
    if code is not None:
        assert body["error_code"] == code, body
    return body


async def test_configs_change_live_and_bad_ones_change_nothing(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1, configs={"retention.ms": 1000})
    body = await answer(await n1.client.get("/v1/topics/t/configs"), 200)
    assert body == {"topic": "t", "configs": {"retention.ms": 1000}}
    changed = await n1.client.patch(
        "/v1/topics/t/configs", json={"configs": {"segment.bytes": 1 << 20, "flush.policy": "always"}}
    )
    body = await answer(changed, 200)
    assert body["configs"] == {"retention.ms": 1000, "segment.bytes": 1 << 20, "flush.policy": "always"}
    for bad in (
        {"configs": {"no.such.property": 1}},
        {"configs": {"retention.ms": "soon"}},
        {"configs": {"flush.policy": "sometimes"}},
        {"configs": {}},
        {"configs": 5},
        {"other": 1},
        [],
    ):
        await answer(await n1.client.patch("/v1/topics/t/configs", json=bad), 400, 40001)
    assert cluster.topics["t"].configs == body["configs"]
    await answer(await n1.client.patch("/v1/topics/nope/configs", json={"configs": {"retention.ms": 1}}), 404)


async def test_config_change_is_forwarded_to_the_controller(cluster: FakeCluster, harness: Harness) -> None:
    await harness.start(cluster, "n1")
    n2 = await harness.start(cluster, "n2")
    cluster.add_topic("t", 1)
    response = await n2.client.patch("/v1/topics/t/configs", json={"configs": {"retention.bytes": 4096}})
    await answer(response, 200)
    assert cluster.topics["t"].configs == {"retention.bytes": 4096}


async def test_a_move_is_recorded_reported_and_cancelled(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1, replicas=[["n1", "n2", "n3"]])
    started = await n1.client.post("/v1/partitions/t/0/replicas", json={"replicas": ["n1", "n2", "n4"]})
    body = await answer(started, 202)
    assert body["move"]["original"] == ["n1", "n2", "n3"] and body["move"]["target"] == ["n1", "n2", "n4"]
    progress = await answer(await n1.client.get("/v1/partitions/t/0/replicas"), 200)
    assert progress["move"]["target"] == ["n1", "n2", "n4"] and progress["replicas"] == ["n1", "n2", "n3"]
    # the same move again (a retry whose first answer was lost): its progress; another target: refused
    again = await n1.client.post("/v1/partitions/t/0/replicas", json={"replicas": ["n1", "n2", "n4"]})
    assert (await answer(again, 202))["move"] == body["move"]
    other = await n1.client.post("/v1/partitions/t/0/replicas", json={"replicas": ["n1", "n3", "n4"]})
    await answer(other, 409, 40908)
    cancelled = await answer(await n1.client.delete("/v1/partitions/t/0/replicas"), 202)
    assert cancelled["move"]["target"] == ["n1", "n2", "n3"] and cancelled["move"]["cancelled"]
    health = await answer(await n1.client.get("/v1/cluster/health"), 200)
    assert health["moving_partitions"] == [{"topic": "t", "partition": 0, "target": ["n1", "n2", "n3"]}]


@pytest.mark.parametrize(
    ("replicas", "status", "code"),
    [
        (["n1", "n2", "n9"], 404, 40405),  # unknown node
        (["n1", "n2", "n4"], 400, 40002),  # n4 is dead (set below)
        (["n1"], 400, 40002),  # below the quorum of the current three
        ([], 400, 40002),
        (["n1", "n1", "n2"], 400, 40002),
        (["n1", "n2", "n3"], 400, 40002),  # the current set: nothing to move
        ("n1", 400, 40002),
        ([1, 2], 400, 40002),
    ],
)
async def test_bad_moves_are_refused_and_change_nothing(
    cluster: FakeCluster, n1: Node, replicas: Any, status: int, code: int
) -> None:
    cluster.add_topic("t", 1, replicas=[["n1", "n2", "n3"]])
    cluster.states["n4"] = "dead"
    await answer(
        await n1.client.post("/v1/partitions/t/0/replicas", json={"replicas": replicas}), status, code
    )
    assert cluster.moves == {}
    assert cluster.topics["t"].replicas == (("n1", "n2", "n3"),)


async def test_move_request_shape_errors(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    await answer(await n1.client.post("/v1/partitions/t/0/replicas", json={}), 400, 40001)
    await answer(
        await n1.client.post("/v1/partitions/t/0/replicas", json={"replicas": [], "x": 1}), 400, 40001
    )
    await answer(await n1.client.post("/v1/partitions/t/7/replicas", json={"replicas": ["n1"]}), 404, 40402)
    await answer(await n1.client.delete("/v1/partitions/t/0/replicas"), 404, 40406)


async def test_decommission_recommission_and_maintenance(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 2, replicas=[["n1", "n2"], ["n2", "n3"]])
    body = await answer(await n1.client.put("/v1/nodes/n2/decommission"), 202)
    assert body["decommissioning"] and body["replicas_remaining"] == 2 and not body["done"]
    assert (await answer(await n1.client.get("/v1/nodes/n2/decommission"), 200))["decommissioning"]
    nodes = await (await n1.client.get("/v1/nodes")).json()
    assert [n["decommissioning"] for n in nodes] == [False, True, False, False]
    body = await answer(await n1.client.delete("/v1/nodes/n2/decommission"), 200)
    assert not body["decommissioning"]
    assert await answer(await n1.client.put("/v1/nodes/n3/maintenance"), 200) == {
        "node_id": "n3",
        "maintenance": True,
    }
    health = await answer(await n1.client.get("/v1/cluster/health"), 200)
    assert health["nodes_maintenance"] == ["n3"] and health["nodes_decommissioning"] == []
    assert health["disk"]["n1"] == {"used_bytes": 1000, "free_bytes": 10**9, "full": False}
    await answer(await n1.client.delete("/v1/nodes/n3/maintenance"), 200)
    assert cluster.flags == {"decommissioning": set(), "maintenance": set()}
    for method in ("put", "get", "delete"):
        await answer(await getattr(n1.client, method)("/v1/nodes/n9/decommission"), 404, 40405)
    await answer(await n1.client.put("/v1/nodes/n9/maintenance"), 404, 40405)


async def test_every_admin_route_needs_the_token(cluster: FakeCluster, harness: Harness) -> None:
    node = await harness.start(cluster, "n1", admin_token="s3cret")
    cluster.add_topic("t", 1)
    calls = [
        ("GET", "/v1/topics/t/configs"),
        ("PATCH", "/v1/topics/t/configs"),
        ("POST", "/v1/partitions/t/0/replicas"),
        ("GET", "/v1/partitions/t/0/replicas"),
        ("DELETE", "/v1/partitions/t/0/replicas"),
        ("PUT", "/v1/nodes/n2/decommission"),
        ("GET", "/v1/nodes/n2/decommission"),
        ("DELETE", "/v1/nodes/n2/decommission"),
        ("PUT", "/v1/nodes/n2/maintenance"),
        ("DELETE", "/v1/nodes/n2/maintenance"),
        ("GET", "/v1/cluster/health"),
    ]
    for method, path in calls:
        await answer(await node.client.request(method, path), 401, 40101)
        wrong = {"Authorization": "Bearer nope"}
        await answer(await node.client.request(method, path, headers=wrong), 401, 40101)
    assert cluster.flags == {"decommissioning": set(), "maintenance": set()} and cluster.moves == {}
    ok = await node.client.get("/v1/topics/t/configs", headers={"Authorization": "Bearer s3cret"})
    await answer(ok, 200)


async def test_a_decommissioned_node_that_is_gone_is_not_down(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1, replicas=[["n1", "n2"]])
    cluster.states["n2"] = "left"
    cluster.states["n3"] = "left"
    await answer(await n1.client.put("/v1/nodes/n3/decommission"), 202)
    await answer(await n1.client.put("/v1/nodes/n2/decommission"), 202)
    health = await answer(await n1.client.get("/v1/cluster/health"), 200)
    assert health["nodes_down"] == ["n2"]  # n3 holds nothing any more; n2 still holds t/0
    # one rule says n3's decommission is finished, and every answer says so: health, nodes, its progress
    assert health["nodes_decommissioned"] == ["n3"] and health["nodes_decommissioning"] == ["n2"]
    nodes = {n["node_id"]: n for n in await answer(await n1.client.get("/v1/nodes"), 200)}
    assert [nodes[n]["decommissioned"] for n in ("n1", "n2", "n3")] == [False, False, True]
    assert (await answer(await n1.client.get("/v1/nodes/n3/decommission"), 200))["done"]
    assert not (await answer(await n1.client.get("/v1/nodes/n2/decommission"), 200))["done"]
