"""Node-to-node endpoints answer only a peer: every route under the internal prefix refuses a request
without the cluster credential (401, nothing of the answer), whatever its method, and serves one with it."""

from __future__ import annotations

import re

import pytest
from fake_broker import INTERNAL_CREDENTIAL, FakeCluster
from harness import Node

from api.app import ROUTES
from api.openapi import Operation
from api.routing import INTERNAL_PREFIX

INTERNAL = [op for op in ROUTES if op.path.startswith(INTERNAL_PREFIX)]


def concrete(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: "0" if m.group(1) == "partition" else "t", path)


def test_every_node_to_node_route_is_under_the_internal_prefix() -> None:
    ids = {op.operation_id for op in INTERNAL}
    assert {
        "leadershipClaims",
        "replicaBatches",
        "memberView",
        "changeMembership",
        "controllerMetadata",
    } <= ids
    assert {"replicaFailures"} <= ids


@pytest.mark.parametrize("operation", INTERNAL, ids=lambda op: op.operation_id)
@pytest.mark.parametrize("authorization", [None, "Bearer not-the-credential", "Basic xyz"])
async def test_an_internal_route_refuses_a_caller_without_the_cluster_credential(
    operation: Operation, authorization: str | None, cluster: FakeCluster, n1: Node
) -> None:
    cluster.add_topic("t", 1, [["n1"]])
    headers = {} if authorization is None else {"Authorization": authorization}
    path = concrete(operation.path) + "?offset=0"
    answer = await n1.client.request(operation.method, path, headers=headers, json={})
    assert answer.status == 401
    body = await answer.json()
    assert body["error_code"] == 40101 and "cluster credential" in body["message"]
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")


async def test_the_leadership_claims_and_batches_answer_a_peer(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1, [["n1"]])
    auth = {"Authorization": f"Bearer {INTERNAL_CREDENTIAL}"}
    claims = await n1.client.get("/replication/leadership", headers=auth)
    assert claims.status == 200 and (await claims.json())["node"] == "n1"
    batches = await n1.client.get("/replication/partitions/t/0/batches?offset=0", headers=auth)
    assert batches.status == 200 and batches.content_type == "application/octet-stream"
