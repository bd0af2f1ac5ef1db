"""The controller group's members over the admin API, on fake nodes: describe, add (a learner), remove,
the refusals (409 with the reason, nothing changed), a call on a node that does not lead the controller
run on the one that does, and the admin token."""

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


async def test_describe_add_and_remove(cluster: FakeCluster, n1: Node) -> None:
    cluster.controller_voters = ["n1", "n2", "n3"]
    body = await answer(await n1.client.get("/v1/controller"), 200)
    assert body["leader"] == "n1" and body["voters"] == ["n1", "n2", "n3"] and body["learners"] == []
    assert set(body["match_index"]) == {"n2", "n3"} and body["pending"] is None
    assert body["last_heard_ms"] == {} and body["caught_up_at_ms"] == {}  # none kept (below level 2)
    cluster.controller_times = {"n1": (1_700_000_000_500, 1_700_000_000_500), "n2": (1_700_000_000_400, None)}
    body = await answer(await n1.client.get("/v1/controller"), 200)
    assert body["last_heard_ms"] == {"n1": 1_700_000_000_500, "n2": 1_700_000_000_400}
    assert body["caught_up_at_ms"] == {"n1": 1_700_000_000_500}, "n2 heard, never caught up"

    added = await answer(await n1.client.post("/v1/controller/voters", json={"node_id": "n4"}), 202)
    assert added["learners"] == ["n4"] and added["voters"] == ["n1", "n2", "n3"]

    removed = await answer(await n1.client.delete("/v1/controller/voters/n3"), 409, 40914)
    assert "n4 is joining" in removed["reason"], "one change at a time"
    await answer(await n1.client.delete("/v1/controller/voters/n4"), 200)  # cancels the add
    body = await answer(await n1.client.delete("/v1/controller/voters/n3"), 200)
    assert body["voters"] == ["n1", "n2"] and cluster.controller_voters == ["n1", "n2"]


async def test_refusals_change_nothing(cluster: FakeCluster, n1: Node) -> None:
    cluster.controller_voters = ["n1", "n2", "n3"]
    before = await answer(await n1.client.get("/v1/controller"), 200)
    refused = await answer(await n1.client.post("/v1/controller/voters", json={"node_id": "n2"}), 409, 40914)
    assert "already a controller voter" in refused["reason"]
    await answer(await n1.client.post("/v1/controller/voters", json={"node_id": "n9"}), 404, 40405)
    cluster.states["n4"] = "dead"
    refused = await answer(await n1.client.post("/v1/controller/voters", json={"node_id": "n4"}), 409, 40914)
    assert "not alive" in refused["reason"]
    for bad in ({}, {"node_id": ""}, {"node_id": 4}, {"node": "n4"}):
        await answer(await n1.client.post("/v1/controller/voters", json=bad), 400, 40001)
    refused = await answer(await n1.client.delete("/v1/controller/voters/n4"), 409, 40914)
    assert "not a member" in refused["reason"]
    cluster.states["n3"] = "dead"
    refused = await answer(await n1.client.delete("/v1/controller/voters/n2"), 409, 40914)
    assert "no majority" in refused["reason"], "n1 and n3 left, n3 dead: the last live majority"
    assert await answer(await n1.client.get("/v1/controller"), 200) == before


async def test_a_call_to_another_node_runs_on_the_controller_leader(
    cluster: FakeCluster, harness: Harness
) -> None:
    await harness.start(cluster, "n1")
    n2 = await harness.start(cluster, "n2")
    cluster.controller_voters = ["n1", "n2", "n3"]
    body = await answer(await n2.client.post("/v1/controller/voters", json={"node_id": "n4"}), 202)
    assert body["leader"] == "n1" and body["learners"] == ["n4"]


async def test_the_admin_token_guards_every_controller_route(harness: Harness, cluster: FakeCluster) -> None:
    node = await harness.start(cluster, "n1", admin_token="secret")
    await answer(await node.client.get("/v1/controller"), 401, 40101)
    await answer(await node.client.post("/v1/controller/voters", json={"node_id": "n4"}), 401, 40101)
    await answer(await node.client.delete("/v1/controller/voters/n2"), 401, 40101)
    headers = {"Authorization": "Bearer secret"}
    await answer(await node.client.get("/v1/controller", headers=headers), 200)
