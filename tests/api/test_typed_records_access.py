"""A schema format's produce asks the registry as its caller (``serve --enforce-acls``, over fake nodes):
WRITE on the topic is not enough to find a schema under the topic's subject (READ on the subject) or to
register one there (WRITE on the subject), as the caller's own calls of the registry would need; a refusal
names the subject and neither registers nor writes anything."""

from __future__ import annotations

import json
from typing import Any

from harness import Node
from test_access import ALICE, ROOT, a1, acl, answer, grant, secured

__all__ = ["a1", "secured"]  # the fixtures of test_access, used here
AVRO_V2 = "application/vnd.kafka.avro.v2+json"
REGISTRY_JSON = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
SCHEMA = '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}'


def subject_acl(operation: str, name: str = "orders-value") -> dict[str, Any]:
    return {"resource_type": "subject", "name": name, "principal": "User:alice", "operation": operation}


async def produce(node: Node, body: dict[str, Any]) -> tuple[int, Any]:
    headers = {"Content-Type": AVRO_V2, **ALICE}
    return await answer(
        await node.client.post("/topics/orders/partitions/0", data=json.dumps(body), headers=headers)
    )


async def versions(node: Node) -> tuple[int, Any]:
    return await answer(await node.client.get("/subjects/orders-value/versions", headers=ROOT))


async def end_offset(node: Node) -> int:
    return int(
        (await answer(await node.client.get("/topics/orders/partitions/0/offsets", headers=ROOT)))[1][
            "end_offset"
        ]
    )


async def test_a_schema_format_produce_needs_the_subject_acls_its_registry_calls_would(a1: Node) -> None:
    await grant(a1, acl("write"))  # WRITE on the topic orders, nothing on its subjects
    by_text = {"value_schema": SCHEMA, "records": [{"value": {"id": "o-1"}}]}
    status, refused = await produce(a1, by_text)
    assert (status, refused["error_code"], refused["resource"], refused["operation"]) == (
        403,
        40301,
        "orders-value",
        "read",
    ), refused
    await grant(a1, subject_acl("read"))
    status, refused = await produce(a1, by_text)  # found nowhere: registering it needs WRITE
    assert (status, refused["resource"], refused["operation"]) == (403, "orders-value", "write"), refused
    assert (await versions(a1))[0] == 404 and await end_offset(a1) == 0  # nothing registered or written

    registered = await a1.client.post(
        "/subjects/orders-value/versions",
        data=json.dumps({"schema": SCHEMA}),
        headers={**REGISTRY_JSON, **ROOT},
    )
    schema_id = (await answer(registered))[1]["id"]
    status, produced = await produce(a1, by_text)  # registered already: READ finds it
    assert status == 200 and produced["value_schema_id"] == schema_id, produced
    status, produced = await produce(
        a1, {"value_schema_id": schema_id, "records": [{"value": {"id": "o-2"}}]}
    )
    assert status == 200 and produced["offsets"][0]["offset"] == 1, produced
    # a key schema: its own subject, orders-key, which alice may not read
    keyed = {
        "key_schema": '"string"',
        "value_schema_id": schema_id,
        "records": [{"key": "k", "value": {"id": "o"}}],
    }
    status, refused = await produce(a1, keyed)
    assert (status, refused["resource"]) == (403, "orders-key"), refused
    assert await versions(a1) == (200, [1]) and await end_offset(a1) == 2
