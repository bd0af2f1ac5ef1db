"""The schema registry's REST API over fake nodes, as Confluent's registry answers: ids and versions,
lookups, references, soft and permanent deletes in their order, compatibility with its messages, configs
and modes with IMPORT, every refusal with Confluent's code and nothing changed; a write entering another
node is answered by the ``__schemas`` leader."""

from __future__ import annotations

import json
from typing import Any

from fake_node import FakeCluster
from harness import Harness, Node

MEDIA = "application/vnd.schemaregistry.v1+json"
V1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
V2 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}],
    }
)
INCOMPATIBLE = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
    }
)


async def _call(
    node: Node, method: str, path: str, body: Any = None, status: int = 200, code: int = 0
) -> Any:
    sent = {} if body is None else {"data": json.dumps(body), "headers": {"Content-Type": MEDIA}}
    response = await node.client.request(method, path, **sent)
    text = await response.text()
    assert response.status == status, f"{method} {path}: {response.status} {text}"
    answer = json.loads(text) if response.content_type.endswith("json") else text
    if code:
        assert answer["error_code"] == code, answer
    return answer


async def test_ids_versions_and_lookups(n1: Node) -> None:
    first = await _call(n1, "POST", "/subjects/users-value/versions", {"schema": V1})
    assert (first["id"], first["version"], first["subject"]) == (1, 1, "users-value")
    again = await _call(n1, "POST", "/subjects/users-value/versions", {"schema": V1})
    assert (again["id"], again["version"]) == (1, 1), "the same schema is its version, not a new one"
    second = await _call(n1, "POST", "/subjects/users-value/versions", {"schema": V2})
    assert (second["id"], second["version"]) == (2, 2)
    shared = await _call(n1, "POST", "/subjects/other-value/versions", {"schema": V1})
    assert (shared["id"], shared["version"]) == (1, 1), "one schema, one id, under every subject"

    assert await _call(n1, "GET", "/subjects") == ["other-value", "users-value"]
    assert await _call(n1, "GET", "/subjects?subjectPrefix=users") == ["users-value"]
    assert await _call(n1, "GET", "/subjects/users-value/versions") == [1, 2]
    latest = await _call(n1, "GET", "/subjects/users-value/versions/latest")
    assert (latest["id"], latest["version"], json.loads(latest["schema"])) == (2, 2, json.loads(V2))
    assert "schemaType" not in latest, "Avro, Confluent's default, is not named"
    assert await _call(n1, "GET", "/subjects/users-value/versions/-1") == latest
    by_id = await _call(n1, "GET", "/schemas/ids/1")
    assert json.loads(by_id["schema"]) == json.loads(V1)
    assert await _call(n1, "GET", "/schemas/ids/1/versions") == [
        {"subject": "other-value", "version": 1},
        {"subject": "users-value", "version": 1},
    ]
    found = await _call(n1, "POST", "/subjects/users-value", {"schema": V1})
    assert (found["id"], found["version"]) == (1, 1)
    assert await _call(n1, "GET", "/schemas/types") == ["JSON", "PROTOBUF", "AVRO"]

    await _call(n1, "GET", "/subjects/nobody/versions", status=404, code=40401)
    await _call(n1, "GET", "/subjects/users-value/versions/9", status=404, code=40402)
    await _call(n1, "GET", "/subjects/users-value/versions/x", status=422, code=42202)
    await _call(n1, "GET", "/schemas/ids/99", status=404, code=40403)
    await _call(n1, "POST", "/subjects/users-value", {"schema": INCOMPATIBLE}, status=404, code=40403)
    await _call(n1, "POST", "/subjects/users-value/versions", {"schema": "{not json"}, status=422, code=42201)
    await _call(n1, "POST", "/subjects/users-value/versions", {"schema": ""}, status=422, code=42201)
    await _call(n1, "POST", "/subjects/users-value/versions", {"schema": V1, "schemaType": "XML"}, 422, 42201)
    assert await _call(n1, "GET", "/subjects/users-value/versions") == [1, 2], "refusals changed nothing"


async def test_compatibility_is_checked_and_explained(n1: Node) -> None:
    await _call(n1, "POST", "/subjects/c-value/versions", {"schema": V1})
    refused = await _call(
        n1, "POST", "/subjects/c-value/versions", {"schema": INCOMPATIBLE}, status=409, code=409
    )
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in refused["message"]
    assert "in the new schema has no default value and is missing in the old schema" in refused["message"]
    verdict = await _call(
        n1, "POST", "/compatibility/subjects/c-value/versions/latest?verbose=true", {"schema": INCOMPATIBLE}
    )
    assert verdict["is_compatible"] is False and any("oldSchemaVersion: 1" in m for m in verdict["messages"])
    assert await _call(n1, "POST", "/compatibility/subjects/c-value/versions/latest", {"schema": V2}) == {
        "is_compatible": True
    }
    assert await _call(n1, "PUT", "/config/c-value", {"compatibility": "NONE"}) == {"compatibility": "NONE"}
    assert await _call(n1, "GET", "/config/c-value") == {"compatibilityLevel": "NONE"}
    assert await _call(n1, "GET", "/config") == {"compatibilityLevel": "BACKWARD"}
    await _call(n1, "GET", "/config/d-value", status=404, code=40408)
    assert await _call(n1, "GET", "/config/d-value?defaultToGlobal=true") == {
        "compatibilityLevel": "BACKWARD"
    }
    await _call(n1, "PUT", "/config/c-value", {"compatibility": "SIDEWAYS"}, status=422, code=42203)
    registered = await _call(n1, "POST", "/subjects/c-value/versions", {"schema": INCOMPATIBLE})
    assert registered["version"] == 2, "NONE checks nothing"


async def test_deletes_in_confluent_s_order_and_references_held(n1: Node) -> None:
    await _call(n1, "POST", "/subjects/base/versions", {"schema": V1})
    holder = {
        "schema": json.dumps(
            {"type": "record", "name": "Holder", "fields": [{"name": "user", "type": "User"}]}
        ),
        "references": [{"name": "User", "subject": "base", "version": 1}],
    }
    held = await _call(n1, "POST", "/subjects/holder-value/versions", holder)
    assert await _call(n1, "GET", "/subjects/base/versions/1/referencedby") == [held["id"]]
    await _call(n1, "DELETE", "/subjects/base/versions/1", status=422, code=42206)
    await _call(n1, "DELETE", "/subjects/holder-value/versions/1?permanent=true", status=404, code=40407)
    assert await _call(n1, "DELETE", "/subjects/holder-value/versions/1") == 1
    assert await _call(n1, "GET", "/subjects/holder-value/versions?deleted=true") == [1]
    await _call(n1, "GET", "/subjects/holder-value/versions", status=404, code=40401)
    assert await _call(n1, "DELETE", "/subjects/holder-value/versions/1?permanent=true") == 1
    assert await _call(n1, "DELETE", "/subjects/base") == [1], "no longer referenced"
    await _call(n1, "DELETE", "/subjects/base", status=404, code=40404)
    assert await _call(n1, "DELETE", "/subjects/base?permanent=true") == [1]
    assert await _call(n1, "GET", "/subjects?deleted=true") == []


async def test_modes_and_import_keep_given_ids(n1: Node) -> None:
    await _call(n1, "POST", "/subjects/m-value/versions", {"schema": V1})
    await _call(n1, "PUT", "/mode", {"mode": "IMPORT"}, status=422, code=42205)
    assert await _call(n1, "PUT", "/mode/imported-value?force=true", {"mode": "IMPORT"}) == {"mode": "IMPORT"}
    imported = await _call(
        n1, "POST", "/subjects/imported-value/versions", {"schema": V2, "id": 100, "version": 5}
    )
    assert (imported["id"], imported["version"]) == (100, 5)
    await _call(n1, "POST", "/subjects/m-value/versions", {"schema": V2, "id": 7}, status=422, code=42205)
    assert await _call(n1, "PUT", "/mode/m-value", {"mode": "READONLY"}) == {"mode": "READONLY"}
    await _call(n1, "POST", "/subjects/m-value/versions", {"schema": V2}, status=422, code=42205)
    await _call(n1, "PUT", "/mode/m-value", {"mode": "SOMETIMES"}, status=422, code=42204)
    assert await _call(n1, "GET", "/mode/m-value") == {"mode": "READONLY"}
    assert await _call(n1, "DELETE", "/mode/m-value") == {"mode": "READONLY"}
    same = await _call(n1, "POST", "/subjects/m-value/versions", {"schema": V2})
    assert same["id"] == 100, "a schema imported with an id has that id under every subject"
    v3 = json.loads(V2)
    v3["fields"].append({"name": "email", "type": "string", "default": ""})
    after = await _call(n1, "POST", "/subjects/m-value/versions", {"schema": json.dumps(v3)})
    assert after["id"] == 101, "ids given after an import are above it"


async def test_a_write_entering_another_node_is_answered_by_the_registry_leader(harness: Harness) -> None:
    cluster = FakeCluster(["n1", "n2"])
    n1 = await harness.start(cluster, "n1")
    n2 = await harness.start(cluster, "n2")
    await _call(n1, "POST", "/subjects/first-value/versions", {"schema": V1})  # makes __schemas, led by n1
    through_n2 = await _call(n2, "POST", "/subjects/elsewhere-value/versions", {"schema": V2})
    assert through_n2["id"] == 2
    assert await _call(n2, "GET", "/subjects") == ["elsewhere-value", "first-value"]


async def test_the_latest_version_with_metadata_and_a_schema_by_id_as_confluent_answers(n1: Node) -> None:
    owned = {"schema": V1, "metadata": {"properties": {"owner": "ann", "tier": "gold"}}}
    await _call(n1, "POST", "/subjects/meta-value/versions", owned)
    await _call(
        n1,
        "POST",
        "/subjects/meta-value/versions",
        {"schema": V2, "metadata": {"properties": {"owner": "bob"}}},
    )
    found = await _call(n1, "GET", "/subjects/meta-value/metadata?key=owner&value=ann&key=tier&value=gold")
    assert (found["version"], found["metadata"]) == (1, owned["metadata"])
    assert (await _call(n1, "GET", "/subjects/meta-value/metadata?key=owner&value=bob"))["version"] == 2
    await _call(n1, "GET", "/subjects/meta-value/metadata?key=owner&value=eve", status=404, code=40403)
    await _call(n1, "GET", "/subjects/nobody/metadata?key=owner&value=ann", status=404, code=40401)
    by_id = await _call(n1, "GET", f"/schemas/ids/{found['id']}?subject=meta-value")
    assert set(by_id) == {"schema", "metadata"}, "Confluent's SchemaString: the schema and its metadata"
