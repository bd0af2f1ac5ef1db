"""Who may do what in the schema registry (``serve --enforce-acls``), over fake nodes: each route asks what
Redpanda's registry asks (subject and registry ACLs, docs/security.md), a user without an ACL is refused
403/40301 naming the subject and nothing is registered, READ on a prefix reads those subjects but writes
none, the listings show only what the caller may see (before they are paged), a schema by id needs READ on
a subject holding it (an unknown id is refused alike), registry ACLs guard the global config, and super
users, the admin token and a node without enforcement pass."""

from __future__ import annotations

from typing import Any

from fake_node import FakeCluster
from harness import Harness, Node
from test_access import ADMIN, ALICE, ROOT, _start, a1, answer, grant, secured

from api.app import ROUTES

__all__ = ["a1", "secured"]  # the fixtures of test_access, used here
REGISTRY_JSON = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
SUBJECT = "{subject}"

# Redpanda's table (src/v/pandaproxy/schema_registry/service.cc, docs' "Schema Registry Authorization"),
# and where raftlog departs: routes Redpanda does not have ask what their nearest one asks (the schema
# listing and the guid as the ids, DELETE /config as PUT, the compatibility of all versions as of one);
# the contexts answer only the default one, open as the schema types.
REDPANDA_MAPPING = {
    ("GET", "/schemas/types"): None,
    ("GET", "/contexts"): None,
    ("GET", "/schemas"): ["lists only the versions of subjects the caller may READ"],
    ("GET", "/schemas/ids/{id}"): ["READ subject: some subject holding the schema"],
    ("GET", "/schemas/ids/{id}/schema"): ["READ subject: some subject holding the schema"],
    ("GET", "/schemas/guids/{guid}"): ["READ subject: some subject holding the schema"],
    ("GET", "/schemas/ids/{id}/subjects"): ["DESCRIBE registry"],
    ("GET", "/schemas/ids/{id}/versions"): ["DESCRIBE registry"],
    ("GET", "/subjects"): ["lists only the subjects the caller may DESCRIBE"],
    ("POST", "/subjects/{subject}"): ["READ subject {subject}"],
    ("DELETE", "/subjects/{subject}"): ["DELETE subject {subject}"],
    ("GET", "/subjects/{subject}/versions"): ["DESCRIBE subject {subject}"],
    ("POST", "/subjects/{subject}/versions"): ["WRITE subject {subject}"],
    ("GET", "/subjects/{subject}/versions/{version}"): ["READ subject {subject}"],
    ("GET", "/subjects/{subject}/versions/{version}/schema"): ["READ subject {subject}"],
    ("GET", "/subjects/{subject}/versions/{version}/referencedby"): ["DESCRIBE registry"],
    ("GET", "/subjects/{subject}/metadata"): ["READ subject {subject}"],
    ("DELETE", "/subjects/{subject}/versions/{version}"): ["DELETE subject {subject}"],
    ("POST", "/compatibility/subjects/{subject}/versions/{version}"): ["READ subject {subject}"],
    ("POST", "/compatibility/subjects/{subject}/versions"): ["READ subject {subject}"],
    ("GET", "/config"): ["DESCRIBE_CONFIGS registry"],
    ("PUT", "/config"): ["ALTER_CONFIGS registry"],
    ("DELETE", "/config"): ["ALTER_CONFIGS registry"],
    ("GET", "/config/{subject}"): ["DESCRIBE_CONFIGS subject {subject}"],
    ("PUT", "/config/{subject}"): ["ALTER_CONFIGS subject {subject}"],
    ("DELETE", "/config/{subject}"): ["ALTER_CONFIGS subject {subject}"],
    ("GET", "/mode"): ["DESCRIBE_CONFIGS registry"],
    ("PUT", "/mode"): ["ALTER_CONFIGS registry"],
    ("GET", "/mode/{subject}"): ["DESCRIBE_CONFIGS subject {subject}"],
    ("PUT", "/mode/{subject}"): ["ALTER_CONFIGS subject {subject}"],
    ("DELETE", "/mode/{subject}"): ["ALTER_CONFIGS subject {subject}"],
}


def test_every_registry_route_asks_what_redpanda_s_registry_asks() -> None:
    declared = {
        (op.method, op.path): (op.access.describe() or None) if op.access else "undeclared"
        for op in ROUTES
        if op.tag == "registry"
    }
    assert declared == REDPANDA_MAPPING


def subject_acl(operation: str, name: str, **more: str) -> dict[str, Any]:
    return {
        "resource_type": "subject",
        "name": name,
        "principal": "User:alice",
        "operation": operation,
        **more,
    }


async def register(node: Node, subject: str, schema: str, who: dict[str, str] = ROOT) -> tuple[int, Any]:
    body = {"schema": schema}
    url = f"/subjects/{subject}/versions"
    return await answer(await node.client.post(url, json=body, headers={**REGISTRY_JSON, **who}))


async def get(node: Node, path: str, who: dict[str, str] = ALICE) -> tuple[int, Any]:
    return await answer(await node.client.get(path, headers=who))


async def test_a_user_without_an_acl_is_refused_naming_the_subject_and_nothing_is_registered(
    a1: Node,
) -> None:
    status, body = await register(a1, "orders-value", '"string"', ALICE)
    assert status == 403 and body == {
        "error_code": 40301,
        "message": "User:alice is not authorized to write subject 'orders-value'",
        "resource_type": "subject",
        "resource": "orders-value",
        "operation": "write",
    }
    assert await get(a1, "/subjects", ROOT) == (200, [])  # nothing was registered
    assert await get(a1, "/subjects") == (200, [])
    refused = await get(a1, "/config")
    assert refused[0] == 403 and (refused[1]["resource_type"], refused[1]["resource"]) == (
        "registry",
        "schema-registry",
    )
    assert (await get(a1, "/subjects/orders-value/versions"))[1]["operation"] == "describe"


async def test_read_granted_on_a_prefix_reads_those_subjects_and_writes_none(a1: Node) -> None:
    ids = {}
    for subject, schema in (("orders-key", '"long"'), ("orders-value", '"string"'), ("logs-value", '"int"')):
        status, registered = await register(a1, subject, schema)
        assert status == 200, registered
        ids[subject] = registered["id"]
    await grant(a1, subject_acl("read", "orders-", pattern_type="prefixed"))

    status, latest = await get(a1, "/subjects/orders-value/versions/latest")
    assert status == 200 and latest["schema"] == '"string"'
    assert (await get(a1, "/subjects/orders-value/versions"))[0] == 200  # READ implies DESCRIBE
    assert (await get(a1, "/subjects/logs-value/versions/latest"))[0] == 403
    refused = await register(a1, "orders-value", '["null", "string"]', ALICE)
    assert refused[0] == 403 and refused[1]["operation"] == "write"
    assert (await get(a1, "/subjects/orders-value/versions", ROOT))[1] == [1]  # no version 2

    # the listings show only what alice may see, filtered before they are paged
    assert await get(a1, "/subjects") == (200, ["orders-key", "orders-value"])
    assert await get(a1, "/subjects?offset=1&limit=1") == (200, ["orders-value"])
    assert await get(a1, "/subjects", ROOT) == (200, ["logs-value", "orders-key", "orders-value"])
    schemas = await get(a1, "/schemas?offset=1")
    assert schemas[0] == 200 and [s["subject"] for s in schemas[1]] == ["orders-value"]

    # a schema by id: READ on some subject holding it; an id nobody holds is refused alike
    status, by_id = await get(a1, f"/schemas/ids/{ids['orders-value']}")
    assert status == 200 and by_id["schema"] == '"string"'
    hidden = await get(a1, f"/schemas/ids/{ids['logs-value']}")
    assert hidden[0] == 403 and hidden[1]["resource"] == f"<any holding schema {ids['logs-value']}>"
    orders_guid = (await get(a1, "/subjects/orders-value/versions/latest"))[1]["guid"]
    assert (await get(a1, f"/schemas/guids/{orders_guid}"))[0] == 200
    logs_guid = (await get(a1, "/subjects/logs-value/versions/latest", ROOT))[1]["guid"]
    assert (await get(a1, f"/schemas/guids/{logs_guid}"))[0] == 403
    assert (await get(a1, "/schemas/guids/no-such-guid"))[0] == 403
    assert (await get(a1, "/schemas/ids/999"))[0] == 403
    assert (await get(a1, "/schemas/ids/999", ROOT))[1]["error_code"] == 40403  # a super user is told
    await register(a1, "logs-value", '"string"')  # orders-value's schema under a subject alice may not read
    assert (await get(a1, f"/schemas/ids/{ids['orders-value']}"))[0] == 200


async def test_registry_acls_guard_the_global_config_and_describe_configs_is_not_alter(a1: Node) -> None:
    made = await grant(
        a1, {"resource_type": "registry", "principal": "User:alice", "operation": "describe_configs"}
    )
    assert made["created"][0]["name"] == "schema-registry"  # the one registry resource, named for you
    assert await get(a1, "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    put = await a1.client.put("/config", json={"compatibility": "NONE"}, headers={**REGISTRY_JSON, **ALICE})
    assert (await answer(put))[0] == 403
    assert await get(a1, "/config", ROOT) == (200, {"compatibilityLevel": "BACKWARD"})


async def test_super_users_the_admin_token_and_a_node_without_enforcement_pass(
    secured: FakeCluster, harness: Harness, a1: Node
) -> None:
    assert (await register(a1, "orders-value", '"string"', ROOT))[0] == 200
    assert (await get(a1, "/subjects/orders-value/versions/1", ADMIN))[0] == 200
    open_node = await _start(harness, secured, "n2", enforce=False)
    assert (await register(open_node, "logs-value", '"int"', ALICE))[0] == 200
    assert await get(open_node, "/subjects") == (200, ["logs-value", "orders-value"])
