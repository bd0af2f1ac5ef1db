"""Content negotiation: the ``Accept`` header against every route's media types (``api.negotiation``),
and the labels of answers and errors, as Confluent's REST Proxy v2 and Redpanda's HTTP proxy give them."""

from __future__ import annotations

from typing import Any

from fake_node import FakeCluster
from harness import Node

from api.app import ROUTES
from api.negotiation import choose, error_type, label, offered, parse_accept
from partitions.peers.client import INTERNAL_PREFIX
from raftlog_contract import BINARY_V2, COLUMNAR_MSGPACK, JSON_V2, KAFKA_V2, PLAIN_JSON

V2 = (KAFKA_V2, JSON_V2, BINARY_V2, PLAIN_JSON)


def test_accept_ranges_are_ranked_by_q_then_specificity_then_order() -> None:
    ranges = parse_accept("text/*;q=0.5, */*;q=0.1, application/json, bad, application/x;q=nonsense")
    assert [(r.type, r.q) for r in ranges] == [
        ("application/json", 1.0), ("application/x", 1.0), ("text/*", 0.5), ("*/*", 0.1),
    ]  # fmt: skip
    assert parse_accept(None) == parse_accept("") == []


def test_a_route_answers_its_own_type_unless_the_client_asks_for_another_it_has() -> None:
    assert offered(KAFKA_V2, []) == V2
    assert offered("text/plain", []) == ("text/plain",)
    assert offered(JSON_V2, [BINARY_V2]) == (JSON_V2, BINARY_V2, PLAIN_JSON)
    assert choose(None, V2) == choose("*/*", V2) == choose("application/*", V2) == KAFKA_V2
    assert choose("application/json", V2) == PLAIN_JSON
    assert choose(f"{PLAIN_JSON};q=0.5, {KAFKA_V2}", V2) == KAFKA_V2
    assert choose("text/plain", V2) is None
    assert choose("text/html, */*;q=0.1", V2) == KAFKA_V2
    assert choose(f"{KAFKA_V2};q=0, */*", V2) == JSON_V2  # q=0 refuses that type
    # one Accept naming an embedded type on every request: the v2 routes answer in the v2 type
    assert label(choose(BINARY_V2, V2) or "", KAFKA_V2) == KAFKA_V2
    assert label(BINARY_V2, JSON_V2) == BINARY_V2  # a record route answers the type asked for


def test_errors_are_labelled_with_the_chosen_kafka_type_else_plain_json() -> None:
    assert error_type(KAFKA_V2) == KAFKA_V2
    assert error_type(BINARY_V2) == BINARY_V2
    assert error_type(PLAIN_JSON) == error_type(None) == error_type(COLUMNAR_MSGPACK) == PLAIN_JSON


def _path(template: str) -> str:
    values = {
        "{topic}": "t",
        "{partition}": "0",
        "{group}": "g",
        "{instance}": "i",
        "{member}": "m",
        "{node_id}": "n1",
        "{user}": "u",
        "{token_id}": "0123456789abcdef",
        "{transactional_id}": "payments-1",
        "{subject}": "s-value",
        "{version}": "1",
        "{id}": "1",
        "{guid}": "0b1d4a3e-0000-4000-8000-000000000000",
    }
    for name, value in values.items():
        template = template.replace(name, value)
    return template


async def test_every_route_refuses_an_unacceptable_accept_with_406_before_it_runs(
    cluster: FakeCluster, n1: Node
) -> None:
    cluster.add_topic("t", 1)
    for op in ROUTES:
        if op.path.startswith(INTERNAL_PREFIX) or "text/plain" in op.offers:
            continue
        response = await n1.client.request(
            op.method,
            _path(op.path),
            headers={"Accept": "text/plain", "Content-Type": PLAIN_JSON},
            data=b"{}",
        )
        body: dict[str, Any] = await response.json()
        where = f"{op.method} {op.path}"
        assert response.status == 406 and body["error_code"] == 40601, (where, body)
        assert response.content_type == PLAIN_JSON, where
        assert all(media in body["message"] for media in op.offers), (where, body)
    assert cluster.partitions[("t", 0)].records == []


async def test_client_answers_carry_the_v2_type_and_admin_answers_plain_json(
    cluster: FakeCluster, n1: Node
) -> None:
    cluster.add_topic("t", 1)
    for path in ("/topics", "/topics/t", "/topics/t/partitions", "/topics/t/partitions/0/offsets"):
        cases = ((None, KAFKA_V2), ("*/*", KAFKA_V2), (PLAIN_JSON, PLAIN_JSON), (BINARY_V2, KAFKA_V2))
        for accept, labelled in cases:
            response = await n1.client.get(path, headers={"Accept": accept} if accept else {})
            assert response.status == 200 and response.content_type == labelled, (path, accept)
            await response.json(content_type=None)
    produced = await n1.client.post(
        "/topics/t", json={"records": [{"value": 1}]}, headers={"Content-Type": JSON_V2}
    )
    assert produced.status == 200 and produced.content_type == KAFKA_V2
    missing = await n1.client.get("/topics/nope")
    assert missing.status == 404 and missing.content_type == KAFKA_V2
    health = await n1.client.get("/v1/cluster/health")
    assert health.status == 200 and health.content_type == PLAIN_JSON


async def test_fetch_answers_the_record_type_asked_for(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    await n1.client.post("/topics/t", json={"records": [{"value": "x"}]}, headers={"Content-Type": JSON_V2})
    path = "/topics/t/partitions/0/records?offset=0"
    for accept, labelled, value in (
        (None, JSON_V2, "x"),
        (BINARY_V2, BINARY_V2, "Ingi"),
        (PLAIN_JSON, PLAIN_JSON, "x"),
    ):
        response = await n1.client.get(path, headers={"Accept": accept} if accept else {})
        rows = await response.json(content_type=None)
        assert response.content_type == labelled and rows[0]["value"] == value, (accept, rows)
    refused = await n1.client.get(path, headers={"Accept": KAFKA_V2})
    assert refused.status == 406 and refused.content_type == PLAIN_JSON
