"""Who may do what through the HTTP API (``serve --enforce-acls``), over fake nodes: every client route of the
route table declares its ACLs (a route that forgets fails here), the declarations follow Kafka's mapping
of APIs to operations, and on requests a caller without an ACL is refused 403/40301 with nothing done,
an ALLOW lets it in (literal, prefixed, from its host), a DENY wins, a revoked ACL refuses at the next
request, lists show only what the caller may describe, and super users and the admin token pass. The ACLs
themselves are managed through ``/v1/acls``."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import aiohttp
import pytest
from fake_node import FakeCluster, FakeNode
from harness import Harness, Node

from api import auth
from api.access import Access
from api.app import ROUTES, build_app
from api.typed_records import SUBJECT_NEEDS as SCHEMA_SUBJECTS
from partitions.controller.commands import SetUser
from partitions.names import GROUPS_TOPIC
from partitions.security.users import make_credential

TOKEN = "the-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
V2 = {"Content-Type": "application/vnd.kafka.v2+json"}


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


ALICE = basic("alice", "alice's password")
ROOT = basic("root", "root's password")


# -- the route table -----------------------------------------------------------------------------------


def checked(path: str) -> bool:
    return auth.needs_user(path) or auth.is_admin(path)


def test_every_client_and_admin_route_declares_its_acls_and_no_other_route_does() -> None:
    undeclared = [f"{op.method} {op.path}" for op in ROUTES if checked(op.path) and op.access is None]
    assert undeclared == [], "a client or /v1 route must say what ACLs it needs (api/access.py), or why none"
    elsewhere = [f"{op.method} {op.path}" for op in ROUTES if not checked(op.path) and op.access]
    assert elsewhere == [], "internal and open routes are guarded by credentials, not ACLs"
    for op in ROUTES:
        if op.access is not None:
            assert op.access.unknown_params(op.path, [p.name for p in op.query]) == [], (op.method, op.path)


def test_an_access_either_checks_or_says_why_not() -> None:
    with pytest.raises(Exception, match="either checks or says why not"):
        Access()
    with pytest.raises(Exception, match="either checks or says why not"):
        Access(in_handler="x", open="y")


# Kafka's mapping (KafkaApis): Produce WRITE, Fetch READ, ListOffsets and Metadata DESCRIBE on the topic,
# DescribeConfigs DESCRIBE_CONFIGS; OffsetCommit READ on group and topics, OffsetFetch DESCRIBE on both;
# JoinGroup/SyncGroup/Heartbeat/LeaveGroup READ on the group.
KAFKA_MAPPING = {
    ("GET", "/topics"): ["lists only the topics the caller may DESCRIBE"],
    ("GET", "/topics/{topic}"): ["DESCRIBE topic {topic}", "DESCRIBE_CONFIGS topic {topic}"],
    ("POST", "/topics/{topic}"): ["WRITE topic {topic}", SCHEMA_SUBJECTS],
    ("GET", "/topics/{topic}/partitions"): ["DESCRIBE topic {topic}"],
    ("GET", "/topics/{topic}/partitions/{partition}"): ["DESCRIBE topic {topic}"],
    ("POST", "/topics/{topic}/partitions/{partition}"): ["WRITE topic {topic}", SCHEMA_SUBJECTS],
    ("GET", "/topics/{topic}/partitions/{partition}/offsets"): ["DESCRIBE topic {topic}"],
    ("GET", "/topics/{topic}/partitions/{partition}/records"): ["READ topic {topic}"],
    ("POST", "/consumers/{group}/offsets"): ["READ group {group}", "READ topic: each topic of the body"],
    ("GET", "/consumers/{group}/offsets"): ["DESCRIBE group {group}", "DESCRIBE topic ?topic"],
    ("POST", "/consumers/{group}"): ["READ group {group}"],
    ("DELETE", "/consumers/{group}/instances/{instance}"): ["READ group {group}"],
    ("GET", "/consumers/{group}/instances/{instance}/records"): [
        "READ group {group}",
        "READ topic: each topic subscribed and assigned",
    ],
}


# The admin API's equivalents (KafkaApis): DescribeCluster, DescribeQuorum, ListPartitionReassignments,
# DescribeAcls and DescribeUserScramCredentials DESCRIBE the cluster; CreateTopics CREATE on the cluster
# or the topic; DeleteTopics DELETE, CreatePartitions ALTER, DescribeConfigs DESCRIBE_CONFIGS and
# (Incremental)AlterConfigs ALTER_CONFIGS on the topic; ElectLeaders, AlterPartitionReassignments,
# Add/RemoveRaftVoter, CreateAcls, DeleteAcls and AlterUserScramCredentials ALTER the cluster; ListGroups
# filters (all with DESCRIBE cluster), DescribeGroups DESCRIBE and DeleteGroups DELETE the group;
# ListTransactions filters, DescribeTransactions DESCRIBE the transactional id. A user's own delegation
# tokens need nothing (but a token-authenticated caller makes none); another user's the cluster here.
DESCRIBE_CLUSTER, ALTER_CLUSTER = ["DESCRIBE cluster"], ["ALTER cluster"]
ADMIN_MAPPING = {
    ("GET", "/v1/cluster/health"): DESCRIBE_CLUSTER,
    ("GET", "/v1/cluster/metrics"): DESCRIBE_CLUSTER,
    ("GET", "/v1/features"): DESCRIBE_CLUSTER,  # Kafka's DescribeFeatures (ApiVersions) asks nothing more
    ("POST", "/v1/features"): ALTER_CLUSTER,  # UpdateFeatures: ALTER on the cluster
    ("GET", "/v1/nodes"): DESCRIBE_CLUSTER,
    ("GET", "/v1/controller"): DESCRIBE_CLUSTER,
    ("GET", "/v1/partitions/{topic}/{partition}/replicas"): DESCRIBE_CLUSTER,
    ("GET", "/v1/nodes/{node_id}/decommission"): DESCRIBE_CLUSTER,
    ("GET", "/v1/users"): DESCRIBE_CLUSTER,
    ("GET", "/v1/acls"): DESCRIBE_CLUSTER,
    ("POST", "/v1/topics"): ["CREATE cluster, or CREATE topic: the topic of the body"],
    ("DELETE", "/v1/topics/{topic}"): ["DELETE topic {topic}"],
    ("POST", "/v1/topics/{topic}/partitions"): ["ALTER topic {topic}"],
    ("GET", "/v1/topics/{topic}/configs"): ["DESCRIBE_CONFIGS topic {topic}"],
    ("PATCH", "/v1/topics/{topic}/configs"): ["ALTER_CONFIGS topic {topic}"],
    ("GET", "/v1/partitions/{topic}/{partition}"): ["DESCRIBE topic {topic}"],
    ("POST", "/v1/partitions/{topic}/{partition}/transfer_leadership"): ALTER_CLUSTER,
    ("POST", "/v1/partitions/{topic}/{partition}/replicas"): ALTER_CLUSTER,
    ("DELETE", "/v1/partitions/{topic}/{partition}/replicas"): ALTER_CLUSTER,
    ("PUT", "/v1/nodes/{node_id}/maintenance"): ALTER_CLUSTER,
    ("DELETE", "/v1/nodes/{node_id}/maintenance"): ALTER_CLUSTER,
    ("PUT", "/v1/nodes/{node_id}/decommission"): ALTER_CLUSTER,
    ("DELETE", "/v1/nodes/{node_id}/decommission"): ALTER_CLUSTER,
    ("POST", "/v1/controller/voters"): ALTER_CLUSTER,
    ("DELETE", "/v1/controller/voters/{node_id}"): ALTER_CLUSTER,
    ("POST", "/v1/users"): ALTER_CLUSTER,
    ("DELETE", "/v1/users/{user}"): ALTER_CLUSTER,
    ("POST", "/v1/acls"): ALTER_CLUSTER,
    ("DELETE", "/v1/acls"): ALTER_CLUSTER,
    ("GET", "/v1/users/{user}/tokens"): ["DESCRIBE cluster (unless the caller is {user})"],
    ("POST", "/v1/users/{user}/tokens"): ["ALTER cluster (unless the caller is {user} by its password)"],
    ("DELETE", "/v1/users/{user}/tokens/{token_id}"): ["ALTER cluster (unless the caller is {user})"],
    ("GET", "/v1/consumer-groups"): [
        "lists only the groups the caller may DESCRIBE (every one with DESCRIBE cluster)"
    ],
    ("GET", "/v1/consumer-groups/{group}"): ["DESCRIBE group {group}"],
    ("DELETE", "/v1/consumer-groups/{group}"): ["DELETE group {group}"],
    ("GET", "/v1/transactions"): ["lists only the transactional ids the caller may DESCRIBE"],
    ("GET", "/v1/transactions/{transactional_id}"): ["DESCRIBE transactional_id {transactional_id}"],
    ("GET", "/v1/open-transactions"): ["lists only the topics the caller may READ"],  # DescribeProducers
}


def test_the_admin_routes_ask_what_kafka_asks_for_the_same_work() -> None:
    declared = {(op.method, op.path): op.access.describe() for op in ROUTES if op.access is not None}
    assert {route: declared[route] for route in ADMIN_MAPPING} == ADMIN_MAPPING
    assert sorted(route for route in declared if auth.is_admin(route[1])) == sorted(ADMIN_MAPPING)


def test_the_routes_ask_what_kafka_asks_for_the_same_work() -> None:
    declared = {(op.method, op.path): op.access.describe() for op in ROUTES if op.access is not None}
    for route, wanted in KAFKA_MAPPING.items():
        assert declared[route] == wanted, route
    instance_routes = [route for route in declared if "/instances/" in route[1]]
    assert len(instance_routes) == 11 and all(
        declared[r][0].endswith(" group {group}") for r in instance_routes
    )


# -- on requests ---------------------------------------------------------------------------------------


@pytest.fixture
def secured(cluster: FakeCluster) -> FakeCluster:
    cluster.propose(SetUser("alice", (make_credential("SCRAM-SHA-256", "alice's password"),)))
    cluster.propose(SetUser("root", (make_credential("SCRAM-SHA-256", "root's password"),)))
    cluster.add_topic("orders", 1, [["n1"]])
    cluster.add_topic("logs-eu", 1, [["n2"]])
    cluster.add_topic("secret", 1, [["n1"]])
    return cluster


async def _start(harness: Harness, cluster: FakeCluster, node_id: str, enforce: bool = True) -> Node:
    return await harness.start(
        cluster, node_id, admin_token=TOKEN, require_auth=True, enforce_acls=enforce, super_users={"root"}
    )


@pytest.fixture
async def a1(secured: FakeCluster, harness: Harness) -> Node:
    return await _start(harness, secured, "n1")


@pytest.fixture
async def a2(secured: FakeCluster, harness: Harness) -> Node:
    return await _start(harness, secured, "n2")


async def answer(response: aiohttp.ClientResponse) -> tuple[int, Any]:
    text = await response.text()
    return response.status, json.loads(text) if text else None


async def grant(node: Node, *acls: dict[str, Any]) -> Any:
    status, body = await answer(await node.client.post("/v1/acls", json={"acls": list(acls)}, headers=ADMIN))
    assert status == 200, body
    return body


async def revoke(node: Node, **query: str) -> Any:
    status, body = await answer(await node.client.delete("/v1/acls", params=query, headers=ADMIN))
    assert status == 200, body
    return body


def acl(operation: str, name: str = "orders", **more: str) -> dict[str, Any]:
    return {"resource_type": "topic", "name": name, "principal": "User:alice", "operation": operation, **more}


GROUP_READ = {"resource_type": "group", "name": "g", "principal": "User:alice", "operation": "read"}


async def produce(node: Node, topic: str = "orders", who: dict[str, str] = ALICE) -> tuple[int, Any]:
    records = {"records": [{"value": 1}]}
    return await answer(await node.client.post(f"/topics/{topic}/partitions/0", json=records, headers=who))


async def fetch(node: Node, topic: str = "orders", who: dict[str, str] = ALICE) -> tuple[int, Any]:
    return await answer(await node.client.get(f"/topics/{topic}/partitions/0/records?offset=0", headers=who))


async def test_a_user_without_an_acl_is_refused_and_nothing_is_written(
    secured: FakeCluster, a1: Node
) -> None:
    status, body = await produce(a1)
    assert status == 403 and body == {
        "error_code": 40301,
        "message": "User:alice is not authorized to write topic 'orders'",
        "resource_type": "topic",
        "resource": "orders",
        "operation": "write",
    }
    assert secured.partitions[("orders", 0)].records == [] and a1.data.calls["produce_batch"] == 0
    assert (await fetch(a1))[0] == 403
    assert (await answer(await a1.client.get("/topics", headers=ALICE))) == (200, [])
    # an unknown topic is refused alike: its existence is not told
    assert (await produce(a1, "nothing"))[1]["error_code"] == 40301


async def test_write_and_read_granted_then_revoked(secured: FakeCluster, a1: Node, a2: Node) -> None:
    await grant(a1, acl("write"))
    assert (await produce(a2))[0] == 200  # granted on n1, the controller; checked on n2
    assert (await fetch(a2))[0] == 403  # WRITE is not READ
    await grant(a1, acl("read"))
    status, records = await fetch(a2)
    assert status == 200 and [r["value"] for r in records] == [1]
    assert (await answer(await a2.client.get("/topics", headers=ALICE))) == (
        200,
        ["orders"],
    )  # READ: DESCRIBE
    gone = await revoke(a2, principal="User:alice", operation="write")
    assert [a["operation"] for a in gone["deleted"]] == ["write"]
    assert (await produce(a1))[0] == 403 and (await fetch(a1))[0] == 200  # at the next request
    assert len(secured.partitions[("orders", 0)].records) == 1


async def test_prefixed_and_host_and_deny(secured: FakeCluster, a1: Node, a2: Node) -> None:
    await grant(a1, acl("write", "logs-", pattern_type="prefixed"), acl("write", "secret", host="10.9.9.9"))
    assert (await produce(a1, "logs-eu"))[0] == 200
    assert (await produce(a1, "secret"))[0] == 403  # only from 10.9.9.9; this client is 127.0.0.1
    await grant(a1, acl("write", "secret", host="127.0.0.1"))
    assert (await produce(a1, "secret"))[0] == 200
    await grant(a1, acl("all", "logs-eu", permission="deny"))
    assert (await produce(a1, "logs-eu"))[0] == 403  # a DENY wins over the prefixed ALLOW
    assert len(secured.partitions[("logs-eu", 0)].records) == 1


async def test_super_users_and_the_admin_token_pass_and_without_enforcement_everyone_does(
    secured: FakeCluster, harness: Harness
) -> None:
    node = await _start(harness, secured, "n1")
    open_node = await _start(harness, secured, "n2", enforce=False)
    assert (await produce(node, who=ROOT))[0] == 200
    assert (
        await answer(await node.client.get("/topics/secret/partitions/0/records?offset=0", headers=ADMIN))
    )[0] == 200
    assert (await answer(await node.client.get("/topics", headers=ROOT)))[1] == [
        "logs-eu",
        "orders",
        "secret",
    ]
    assert (await produce(open_node, "secret"))[0] == 200  # authenticated is enough without --enforce-acls


async def test_committed_offsets_need_the_group_and_every_topic_and_commit_nothing_when_refused(
    secured: FakeCluster, a1: Node
) -> None:
    secured.add_topic(GROUPS_TOPIC, 1, [["n1"]])  # the group's coordinator records what it commits
    body = {"offsets": [{"topic": t, "partition": 0, "offset": 1} for t in ("orders", "secret")]}
    commit = await a1.client.post("/consumers/g/offsets", json=body, headers=ALICE)
    assert (await answer(commit))[1]["resource_type"] == "group"
    await grant(a1, GROUP_READ, acl("read"))
    refused = await answer(await a1.client.post("/consumers/g/offsets", json=body, headers=ALICE))
    assert refused[0] == 403 and refused[1]["resource"] == "secret"
    read = await a1.client.get("/consumers/g/offsets?topic=orders", headers=ALICE)
    assert (await answer(read)) == (200, {"offsets": []})  # nothing was committed, orders' neither
    assert (await answer(await a1.client.get("/consumers/g/offsets?topic=secret", headers=ALICE)))[0] == 403
    await grant(a1, acl("read", "secret"))
    assert (await answer(await a1.client.post("/consumers/g/offsets", json=body, headers=ALICE)))[0] == 204


async def test_a_consumer_instance_needs_its_group_and_reads_only_topics_it_may_read(
    secured: FakeCluster, a1: Node
) -> None:
    secured.add_topic(GROUPS_TOPIC, 1, [["n1"]])
    await produce(a1, who=ROOT)
    create = {"name": "c", "format": "json", "auto.offset.reset": "earliest"}
    refused = await answer(await a1.client.post("/consumers/g", json=create, headers={**V2, **ALICE}))
    assert refused[0] == 403 and refused[1]["resource_type"] == "group"
    await grant(a1, GROUP_READ)
    assert (await answer(await a1.client.post("/consumers/g", json=create, headers={**V2, **ALICE})))[
        0
    ] == 200
    base = "/consumers/g/instances/c"
    subscribe = await a1.client.post(
        f"{base}/subscription", json={"topics": ["orders"]}, headers={**V2, **ALICE}
    )
    assert (await answer(subscribe))[1]["operation"] == "describe"
    await grant(a1, acl("describe"))
    subscribe = await a1.client.post(
        f"{base}/subscription", json={"topics": ["orders"]}, headers={**V2, **ALICE}
    )
    assert subscribe.status == 204
    records = await answer(await a1.client.get(f"{base}/records?timeout=500", headers=ALICE))
    assert records[0] == 403 and records[1]["operation"] == "read"
    await grant(a1, acl("read"))
    status, rows = await answer(await a1.client.get(f"{base}/records?timeout=2000", headers=ALICE))
    assert status == 200 and [r["value"] for r in rows] == [1], "the refused read moved no position"


async def test_the_openapi_document_says_403_and_what_each_route_checks(a1: Node) -> None:
    document = await (await a1.client.get("/openapi.json")).json()
    produce_doc = document["paths"]["/topics/{topic}/partitions/{partition}"]["post"]
    assert "403" in produce_doc["responses"] and produce_doc["x-raftlog-acls"] == [
        "WRITE topic {topic}",
        SCHEMA_SUBJECTS,
    ]
    brokers = document["paths"]["/brokers"]["get"]
    assert "403" not in brokers["responses"] and brokers["x-raftlog-acls"][0].startswith("none: ")
    acls = document["paths"]["/v1/acls"]["post"]
    assert acls["x-raftlog-acls"] == ["ALTER cluster"] and {"401", "403"} <= set(acls["responses"])
    assert acls["security"] == [{"bearer": []}, {"basic": []}]  # the admin token, or a user
    assert document["components"]["securitySchemes"]["basic"] == {"type": "http", "scheme": "basic"}


def test_enforcing_acls_needs_authenticated_users(cluster: FakeCluster) -> None:
    with pytest.raises(ValueError, match="enforce_acls needs require_auth"):
        build_app(FakeNode(cluster, "n1"), admin_token=TOKEN, enforce_acls=True)


# -- /v1/acls ------------------------------------------------------------------------------------------


async def test_the_admin_api_creates_lists_and_deletes_acls(secured: FakeCluster, a1: Node, a2: Node) -> None:
    assert (await a1.client.get("/v1/acls")).status == 401  # the admin token, as every /v1 route
    made = await grant(a2, acl("read"), acl("read"), acl("write", "logs-", pattern_type="prefixed"))
    assert [a["name"] for a in made["created"]] == ["logs-", "orders"] and made["existed"] == []
    again = await grant(a1, acl("read"))
    defaults = {"pattern_type": "literal", "host": "*", "permission": "allow"}
    assert again == {"created": [], "existed": [{**acl("read"), **defaults}]}
    match = {"name": "logs-eu", "pattern_type": "match"}
    listed = await answer(await a2.client.get("/v1/acls", params=match, headers=ADMIN))
    assert listed[0] == 200 and [a["name"] for a in listed[1]["acls"]] == ["logs-"]
    everything = await answer(await a2.client.get("/v1/acls", headers=ADMIN))
    assert len(everything[1]["acls"]) == 2

    bad = [
        ({"acls": [acl("write", kind="x")]}, "unknown field"),
        ({"acls": [{**acl("write"), "resource_type": "group"}]}, "a group takes"),
        ({"acls": [{**acl("read"), "principal": "alice"}]}, "User:<name>"),
        ({"acls": []}, "a list of 1 to 1000"),
    ]
    for body, words in bad:
        status, refusal = await answer(await a1.client.post("/v1/acls", json=body, headers=ADMIN))
        assert status == 400 and words in refusal["message"], refusal
    assert len(secured.acls) == 2, "a refused request adds nothing"

    no_filter = await answer(await a1.client.delete("/v1/acls", headers=ADMIN))
    assert no_filter[0] == 400 and "give a filter" in no_filter[1]["message"]
    by_body = await a1.client.delete(
        "/v1/acls", json={"filters": [{"pattern_type": "prefixed"}]}, headers=ADMIN
    )
    assert [a["name"] for a in (await answer(by_body))[1]["deleted"]] == ["logs-"]
    assert (await revoke(a1, resource_type="any"))["deleted"][0]["name"] == "orders"
    assert secured.acls == ()


async def test_a_refusal_on_one_node_is_the_same_on_another_at_once(
    secured: FakeCluster, a1: Node, a2: Node
) -> None:
    await grant(a1, acl("write"))
    results = await asyncio.gather(produce(a1), produce(a2))
    assert [status for status, _ in results] == [200, 200]
    await revoke(a2, name="orders")
    results = await asyncio.gather(produce(a1), produce(a2))
    assert [status for status, _ in results] == [403, 403]
