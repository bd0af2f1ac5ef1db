"""Users on the admin API (``/v1``) of nodes that enforce ACLs, over fake nodes: a user without an ACL is
refused 403/40301 with nothing done (create topic, alter configs, ACLs, replica moves), the same call
passes once granted as Kafka would grant it, the admin token still does everything, lists show only what
the user may describe, a user manages its own tokens but not another's, and ``/metrics`` takes a user who
may DESCRIBE the cluster. Without ``--enforce-acls`` a user on ``/v1`` is refused 401 as before."""

from __future__ import annotations

from typing import Any

import pytest
from fake_node import FakeCluster
from harness import Harness, Node
from test_access import ADMIN, ALICE, _start, a1, a2, acl, answer, basic, grant, secured
from test_transactions_api import coordinator_of

from partitions.controller.commands import SetUser
from partitions.names import GROUPS_TOPIC

__all__ = ["a1", "a2", "secured"]  # the fixtures, shared with test_access

V2 = {"Content-Type": "application/vnd.kafka.v2+json"}


def on_cluster(operation: str, principal: str = "User:alice") -> dict[str, Any]:
    return {
        "resource_type": "cluster",
        "name": "kafka-cluster",
        "principal": principal,
        "operation": operation,
    }


def on(resource_type: str, name: str, operation: str) -> dict[str, Any]:
    return {"resource_type": resource_type, "name": name, "principal": "User:alice", "operation": operation}


async def call(node: Node, method: str, path: str, who: dict[str, str] = ALICE, **kw: Any) -> tuple[int, Any]:
    return await answer(await node.client.request(method, path, headers=who, **kw))


def refused(result: tuple[int, Any], operation: str, resource_type: str, name: str) -> bool:
    status, body = result
    return (
        status == 403
        and body["error_code"] == 40301
        and (
            body["operation"],
            body["resource_type"],
            body["resource"],
        )
        == (operation, resource_type, name)
    )


CREATE_FRESH = {"json": {"name": "fresh-1", "partitions": 1, "replication_factor": 1}}
CONFIGS = {"json": {"configs": {"retention.ms": 1000}}}
MOVE = {"json": {"replicas": ["n2"]}}


async def test_a_user_is_refused_what_no_acl_allows_and_let_in_once_granted(
    secured: FakeCluster, a1: Node, a2: Node
) -> None:
    create = await call(a1, "POST", "/v1/topics", **CREATE_FRESH)
    assert refused(create, "create", "topic", "fresh-1") and "fresh-1" not in secured.topics
    alter = await call(a2, "PATCH", "/v1/topics/orders/configs", **CONFIGS)
    assert refused(alter, "alter_configs", "topic", "orders") and secured.topics["orders"].configs == {}
    acls = {"json": {"acls": [acl("read")]}}
    assert refused(await call(a1, "POST", "/v1/acls", **acls), "alter", "cluster", "kafka-cluster")
    assert secured.acls == ()
    move = await call(a1, "POST", "/v1/partitions/orders/0/replicas", **MOVE)
    assert refused(move, "alter", "cluster", "kafka-cluster") and secured.moves == {}
    assert refused(await call(a1, "GET", "/v1/cluster/health"), "describe", "cluster", "kafka-cluster")

    # CREATE on the topic (here by a prefix) creates that topic; ALTER_CONFIGS alters its configs
    await grant(a1, on("topic", "fresh-", "create") | {"pattern_type": "prefixed"}, acl("alter_configs"))
    assert (await call(a2, "POST", "/v1/topics", **CREATE_FRESH))[0] == 201
    other = {"json": {"name": "other", "partitions": 1, "replication_factor": 1}}
    assert refused(await call(a2, "POST", "/v1/topics", **other), "create", "topic", "other")
    status, configs = await call(a2, "PATCH", "/v1/topics/orders/configs", **CONFIGS)
    assert status == 200 and configs["configs"] == {"retention.ms": 1000}
    assert (await call(a2, "GET", "/v1/topics/orders/configs"))[0] == 200  # implied, as in Kafka

    # CREATE on the cluster creates any topic; ALTER on it moves replicas and writes ACLs
    await grant(a1, on_cluster("create"), on_cluster("alter"))
    assert (await call(a1, "POST", "/v1/topics", **other))[0] == 201
    assert (await call(a2, "POST", "/v1/partitions/orders/0/replicas", **MOVE))[0] == 202
    assert ("orders", 0) in secured.moves
    status, made = await call(a1, "POST", "/v1/acls", json={"acls": [acl("read", "other")]})
    assert status == 200 and [a["name"] for a in made["created"]] == ["other"]
    # ALTER implies DESCRIBE (Kafka's authorizer), but nothing on a topic
    assert (await call(a1, "GET", "/v1/acls"))[0] == 200
    assert refused(await call(a1, "DELETE", "/v1/topics/other"), "delete", "topic", "other")
    assert "other" in secured.topics


async def test_the_admin_token_still_does_everything(secured: FakeCluster, a1: Node) -> None:
    assert (await call(a1, "POST", "/v1/topics", ADMIN, **CREATE_FRESH))[0] == 201
    assert (await call(a1, "PATCH", "/v1/topics/fresh-1/configs", ADMIN, **CONFIGS))[0] == 200
    assert (await call(a1, "POST", "/v1/partitions/orders/0/replicas", ADMIN, **MOVE))[0] == 202
    assert (await call(a1, "GET", "/v1/cluster/health", ADMIN))[0] == 200
    assert (await call(a1, "POST", "/v1/users/alice/tokens", ADMIN))[0] == 201
    assert (await call(a1, "DELETE", "/v1/topics/fresh-1", ADMIN))[0] == 204
    assert "fresh-1" not in secured.topics


async def test_without_enforced_acls_a_user_on_v1_is_refused_401(
    secured: FakeCluster, harness: Harness, a1: Node
) -> None:
    open_node = await _start(harness, secured, "n2", enforce=False)
    response = await open_node.client.get("/v1/cluster/health", headers=ALICE)
    assert response.status == 401 and response.headers["WWW-Authenticate"] == 'Bearer realm="raftlog"'
    assert (await call(open_node, "GET", "/v1/cluster/health", ADMIN))[0] == 200
    # where ACLs are enforced a user may log in on /v1: a wrong password is asked for again as Basic
    wrong = await a1.client.get("/v1/cluster/health", headers=basic("alice", "wrong"))
    assert wrong.status == 401 and wrong.headers["WWW-Authenticate"] == 'Basic realm="raftlog"'


async def test_a_user_lists_only_the_groups_and_transactions_it_may_describe(
    secured: FakeCluster, a1: Node, a2: Node
) -> None:
    for group in ("g", "h"):
        created = await call(a1, "POST", f"/consumers/{group}", {**V2, **ADMIN}, json={"name": "c"})
        assert created[0] == 200, created
    await a1.data.transactions.ensure_topic()
    nodes = {"n1": a1, "n2": a2}
    for tid in ("pay-1", "ship-1"):
        await coordinator_of(secured, nodes, tid).init_producer_id(tid, 30_000, -1, -1)

    async def listed() -> tuple[list[str], list[str]]:
        groups = (await call(a2, "GET", "/v1/consumer-groups"))[1]["groups"]
        transactions = (await call(a1, "GET", "/v1/transactions"))[1]["transactions"]
        return [g["group"] for g in groups], [t["transactional_id"] for t in transactions]

    assert await listed() == ([], [])  # nothing to describe: empty lists, not a refusal
    assert refused(await call(a1, "GET", "/v1/consumer-groups/h"), "describe", "group", "h")
    described = await call(a1, "GET", "/v1/transactions/ship-1")
    assert refused(described, "describe", "transactional_id", "ship-1")

    await grant(a1, on("group", "g", "describe"), on("transactional_id", "pay-1", "describe"))
    assert await listed() == (["g"], ["pay-1"])
    assert (await call(a2, "GET", "/v1/consumer-groups/g"))[0] == 200
    assert (await call(a2, "GET", "/v1/transactions/pay-1"))[0] == 200
    assert refused(await call(a1, "DELETE", "/v1/consumer-groups/g"), "delete", "group", "g")
    await grant(a1, on_cluster("describe"))  # every group, as Kafka's ListGroups; transactions: no
    assert await listed() == (["g", "h"], ["pay-1"])
    assert await call(a1, "GET", "/v1/consumer-groups", ADMIN) == await call(a1, "GET", "/v1/consumer-groups")
    assert GROUPS_TOPIC in secured.topics


async def test_a_user_makes_and_revokes_its_own_tokens_but_not_anothers(
    secured: FakeCluster, a1: Node
) -> None:
    status, made = await call(a1, "POST", "/v1/users/alice/tokens", json={"description": "console"})
    assert status == 201 and made["user"] == "alice"
    status, listed = await call(a1, "GET", "/v1/users/alice/tokens")
    assert status == 200 and [t["id"] for t in listed["tokens"]] == [made["id"]]
    as_token = {"Authorization": f"Bearer {made['token']}"}
    assert (await call(a1, "GET", "/v1/users/alice/tokens", as_token))[0] == 200  # as alice
    more = await call(a1, "POST", "/v1/users/alice/tokens", as_token)  # a token makes no token
    assert refused(more, "alter", "cluster", "kafka-cluster")

    secured.propose(SetUser("bob", secured.users["alice"]))  # bob, with alice's password: another user
    bobs = await call(a1, "POST", "/v1/users/bob/tokens", ADMIN)
    assert refused(await call(a1, "POST", "/v1/users/bob/tokens"), "alter", "cluster", "kafka-cluster")
    assert refused(await call(a1, "GET", "/v1/users/bob/tokens"), "describe", "cluster", "kafka-cluster")
    revoke_bobs = await call(a1, "DELETE", f"/v1/users/bob/tokens/{bobs[1]['id']}")
    assert refused(revoke_bobs, "alter", "cluster", "kafka-cluster")
    assert bobs[1]["id"] in secured.tokens

    assert (await call(a1, "DELETE", f"/v1/users/alice/tokens/{made['id']}", as_token))[0] == 204
    assert made["id"] not in secured.tokens
    await grant(a1, on_cluster("describe"))
    assert [t["id"] for t in (await call(a1, "GET", "/v1/users/bob/tokens"))[1]["tokens"]] == [bobs[1]["id"]]


@pytest.fixture
async def scraped(secured: FakeCluster, harness: Harness) -> Node:
    return await harness.start(
        secured, "n1", admin_token="the-admin-token", require_auth=True, enforce_acls=True,
        metrics_token="the-metrics-token",
    )  # fmt: skip


async def test_metrics_take_a_user_who_may_describe_the_cluster(scraped: Node) -> None:
    async def metrics(who: dict[str, str]) -> tuple[int, str]:
        response = await scraped.client.get("/metrics", headers=who)
        return response.status, await response.text()

    assert refused(await call(scraped, "GET", "/metrics"), "describe", "cluster", "kafka-cluster")
    assert (await metrics(basic("alice", "wrong")))[0] == 401
    await grant(scraped, on_cluster("describe"))
    status, page = await metrics(ALICE)
    assert status == 200 and "login_failures" in page
    for token in ("the-metrics-token", "the-admin-token"):
        assert (await metrics({"Authorization": f"Bearer {token}"}))[0] == 200
    assert (await metrics({"Authorization": "Bearer wrong"}))[0] == 401
