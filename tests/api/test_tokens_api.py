"""A user's API tokens through the HTTP API, over fake nodes: made (answered once), listed (never their
text), revoked through ``/v1/users/{user}/tokens`` with the admin token; a token calls the data API as its
user on any node, its ACLs apply, and a revoked, expired, wrong or deleted user's token is refused with
401 in the same words as a wrong one; the limits answer 409 and nothing is made."""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
import pytest
from fake_node import FakeCluster
from harness import Harness, Node

from api import state
from partitions.controller import tokens as controller_tokens
from partitions.controller.commands import SetUser
from partitions.security.users import make_credential

TOKEN = "the-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
NOW_MS = 1_700_000_000_000
WRONG = {"error_code": 40101, "message": "wrong, expired or revoked bearer token"}


@pytest.fixture
def secured(cluster: FakeCluster) -> FakeCluster:
    cluster.propose(SetUser("alice", (make_credential("SCRAM-SHA-256", "alice's password"),)))
    cluster.propose(SetUser("bob", (make_credential("SCRAM-SHA-256", "bob's password"),)))
    cluster.add_topic("orders", 1, [["n1"]])
    return cluster


async def _start(harness: Harness, cluster: FakeCluster, node_id: str, enforce: bool = True) -> Node:
    node = await harness.start(cluster, node_id, admin_token=TOKEN, require_auth=True, enforce_acls=enforce)
    set_clock(node, NOW_MS)
    return node


def set_clock(node: Node, now_ms: int) -> None:
    node.client.server.app[state.STATE].clock_ms = lambda: now_ms


@pytest.fixture
async def a1(secured: FakeCluster, harness: Harness) -> Node:
    return await _start(harness, secured, "n1")


@pytest.fixture
async def a2(secured: FakeCluster, harness: Harness) -> Node:
    return await _start(harness, secured, "n2")


async def answer(response: aiohttp.ClientResponse) -> tuple[int, Any]:
    text = await response.text()
    return response.status, json.loads(text) if text else None


async def create(node: Node, user: str = "alice", **body: Any) -> tuple[int, Any]:
    return await answer(await node.client.post(f"/v1/users/{user}/tokens", json=body, headers=ADMIN))


async def listed(node: Node, user: str = "alice") -> tuple[int, Any]:
    return await answer(await node.client.get(f"/v1/users/{user}/tokens", headers=ADMIN))


async def revoke(node: Node, token_id: str, user: str = "alice") -> tuple[int, Any]:
    return await answer(await node.client.delete(f"/v1/users/{user}/tokens/{token_id}", headers=ADMIN))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def produce(node: Node, who: dict[str, str]) -> tuple[int, Any]:
    records = {"records": [{"value": 1}]}
    return await answer(await node.client.post("/topics/orders/partitions/0", json=records, headers=who))


async def grant_write(node: Node, principal: str = "User:alice") -> None:
    acl = {"resource_type": "topic", "name": "orders", "principal": principal, "operation": "write"}
    status, body = await answer(await node.client.post("/v1/acls", json={"acls": [acl]}, headers=ADMIN))
    assert status == 200, body


async def test_a_token_is_answered_once_and_listed_without_its_text(secured: FakeCluster, a1: Node) -> None:
    status, made = await create(a1, description="deploys", lifetime_ms=3_600_000)
    assert status == 201, made
    assert re.fullmatch(r"rlt_[0-9a-f]{16}_[0-9a-f]{64}", made["token"])
    assert made == {
        "token": made["token"],
        "id": made["token"][4:20],
        "user": "alice",
        "description": "deploys",
        "created_ms": NOW_MS,
        "expires_ms": NOW_MS + 3_600_000,
        "expired": False,
    }
    status, body = await listed(a1)
    assert status == 200 and body == {"tokens": [{k: v for k, v in made.items() if k != "token"}]}
    assert made["token"][20:] not in json.dumps(body)
    stored = secured.tokens[made["id"]]
    assert made["token"] not in repr(stored)  # the controller holds a hash
    # without a body: no description, and it expires after the node's default lifetime (seven days)
    status, plain = await answer(await a1.client.post("/v1/users/bob/tokens", headers=ADMIN))
    assert status == 201 and (plain["description"], plain["expires_ms"]) == ("", NOW_MS + 7 * 86_400_000)
    assert (await listed(a1, "bob"))[1]["tokens"][0]["id"] == plain["id"]


async def test_a_token_calls_as_its_user_on_another_node_and_its_acls_apply(
    secured: FakeCluster, a1: Node, a2: Node
) -> None:
    _, made = await create(a1)
    alice = bearer(made["token"])
    status, body = await produce(a2, alice)  # made through n1, checked on n2
    assert status == 403 and body["message"] == "User:alice is not authorized to write topic 'orders'"
    assert secured.partitions[("orders", 0)].records == []
    await grant_write(a2)
    assert (await produce(a2, alice))[0] == 200
    _, bobs = await create(a2, "bob")
    assert (await produce(a1, bearer(bobs["token"])))[0] == 403  # bob's token is bob, not alice
    assert (await produce(a1, ADMIN))[0] == 200  # the admin token as before
    assert len(secured.partitions[("orders", 0)].records) == 2


async def test_revoked_expired_wrong_and_deleted_users_tokens_are_refused_alike(
    secured: FakeCluster, a1: Node, a2: Node
) -> None:
    await grant_write(a1)
    _, revoked = await create(a1)
    _, expiring = await create(a1, expires_ms=NOW_MS + 1000)
    _, kept = await create(a1)
    for made in (revoked, expiring, kept):
        assert (await produce(a2, bearer(made["token"])))[0] == 200
    assert await revoke(a2, revoked["id"]) == (204, None)
    refused = [
        revoked["token"],  # from the next request, on every node
        kept["token"][:-1] + ("0" if kept["token"][-1] != "0" else "1"),  # its id, a wrong secret
        "rlt_" + "0" * 16 + "_" + "0" * 64,  # no such token
        "rlt_nonsense",
    ]
    for text in refused:
        for node in (a1, a2):
            status, body = await produce(node, bearer(text))
            assert (status, body) == (401, WRONG), text
    assert (await produce(a2, bearer(expiring["token"])))[0] == 200
    set_clock(a2, NOW_MS + 1000)  # expired by the clock of the node checking it
    assert await produce(a2, bearer(expiring["token"])) == (401, WRONG)
    expired = {t["id"]: t["expired"] for t in (await listed(a2))[1]["tokens"]}
    assert expired == {expiring["id"]: True, kept["id"]: False}
    assert (await produce(a2, bearer("not-the-admin-token")))[1] == WRONG  # a wrong admin token: the same
    assert (await answer(await a1.client.delete("/v1/users/alice", headers=ADMIN)))[0] == 204
    assert await produce(a1, bearer(kept["token"])) == (401, WRONG)  # its user deleted
    assert secured.tokens == {}
    assert len(secured.partitions[("orders", 0)].records) == 4  # the refused wrote nothing


async def test_a_token_without_an_expiry_expires_after_the_nodes_default_lifetime(
    secured: FakeCluster, harness: Harness
) -> None:
    lifetime_ms = 3_600_000
    node = await harness.start(
        secured, "n1", admin_token=TOKEN, require_auth=True, enforce_acls=True, token_lifetime_ms=lifetime_ms
    )
    set_clock(node, NOW_MS)
    await grant_write(node)
    _, made = await create(node)
    assert made["expires_ms"] == NOW_MS + lifetime_ms
    assert (await produce(node, bearer(made["token"])))[0] == 200
    set_clock(node, NOW_MS + lifetime_ms)
    assert await produce(node, bearer(made["token"])) == (401, WRONG)


async def test_a_users_token_is_no_admin_token(secured: FakeCluster, harness: Harness, a1: Node) -> None:
    _, made = await create(a1)
    status, body = await answer(await a1.client.get("/v1/users", headers=bearer(made["token"])))
    assert status == 403 and body["operation"] == "describe"  # alice, as her ACLs allow: none
    own = await answer(await a1.client.post("/v1/users/alice/tokens", headers=bearer(made["token"])))
    assert own[0] == 403 and own[1]["resource_type"] == "cluster", "a token cannot make more tokens"
    assert [t["id"] for t in (await listed(a1))[1]["tokens"]] == [made["id"]]  # nothing more made
    without_acls = await _start(harness, secured, "n2", enforce=False)
    status, _ = await answer(await without_acls.client.get("/v1/users", headers=bearer(made["token"])))
    assert status == 401  # without --enforce-acls /v1 keeps the admin token alone


async def test_refusals_name_what_is_wrong_and_make_nothing(
    secured: FakeCluster, a1: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (await create(a1, "mallory"))[1]["error_code"] == 40407
    assert (await listed(a1, "mallory"))[1]["error_code"] == 40407
    assert await revoke(a1, "0" * 16) == (
        404,
        {"error_code": 40408, "message": "user 'alice' has no token '0000000000000000'"},
    )
    status, body = await revoke(a1, "not-an-id")
    assert status == 400 and "16 lowercase hex digits" in body["message"]
    cases = [
        ({"expires_ms": NOW_MS + 1, "lifetime_ms": 1}, "not both"),
        ({"expires_ms": NOW_MS - 1}, "in the future"),
        ({"lifetime_ms": "30d"}, "integer"),
        ({"description": "x" * 257}, "at most 256"),
        ({"scope": "read"}, "unknown field"),
    ]
    for body_sent, words in cases:
        status, body = await create(a1, **body_sent)
        assert status == 400 and words in body["message"], (body_sent, body)
    _, someones = await create(a1)
    assert (await revoke(a1, someones["id"], user="bob"))[1]["error_code"] == 40408  # alice's, not bob's
    monkeypatch.setattr(controller_tokens, "TOKENS_PER_USER_MAX", 2)
    assert (await create(a1))[0] == 201
    status, body = await create(a1)
    assert (status, body["error_code"], body["limit"]) == (409, 40915, 2)
    assert "revoke some first" in body["message"]
    assert len(secured.tokens) == 2


async def test_the_routes_are_in_the_openapi_document(a1: Node) -> None:
    document = (await answer(await a1.client.get("/openapi.json")))[1]
    tokens = document["paths"]["/v1/users/{user}/tokens"]
    assert tokens["post"]["responses"]["201"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/CreatedToken"
    }
    assert set(tokens["post"]["responses"]) >= {"201", "400", "401", "404", "409"}
    assert tokens["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/Tokens"
    )
    assert "204" in document["paths"]["/v1/users/{user}/tokens/{token_id}"]["delete"]["responses"]
    assert (
        "token"
        not in document["components"]["schemas"]["Tokens"]["properties"]["tokens"]["items"]["properties"]
    )
