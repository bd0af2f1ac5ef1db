"""The columnar fetch encoding (Accept: application/vnd.raftlog.columnar.v1+msgpack or +json): the same
records as the per-record answer, as parallel arrays; the same errors; forwarded like any fetch."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgpack
from fake_node import FakeCluster
from harness import Node

from api.app import ROUTES
from api.columnar import Columnar, columnar_encoding, encode_columnar
from api.negotiation import choose
from api.openapi import document
from raftlog.storage.batch import Record, TimestampType
from raftlog_contract import BINARY_V2, COLUMNAR_JSON, COLUMNAR_MSGPACK, JSON_V2, RECORD_BATCH, SCHEMA_FORMATS

RECORDS = [
    {"value": base64.b64encode(b"\x00\xffraw").decode(), "key": base64.b64encode(b"k1").decode()},
    {"value": base64.b64encode(b"second").decode(), "headers": [{"key": "h", "value": "aGk="}]},
    {"value": base64.b64encode(b"").decode()},
]


async def _produce(node: Node, topic: str) -> None:
    response = await node.client.post(
        f"/topics/{topic}/partitions/0", json={"records": RECORDS}, headers={"Content-Type": BINARY_V2}
    )
    assert response.status == 200, await response.text()


def test_accept_header_chooses_the_encoding() -> None:
    offers = next(op for op in ROUTES if op.operation_id == "fetch").offers

    def encoding(accept: str | None) -> Columnar | None:
        chosen = choose(accept, offers)
        assert chosen is not None
        return columnar_encoding(chosen)

    assert encoding(None) is None
    assert encoding("application/json") is None
    assert encoding(BINARY_V2) is None
    assert encoding(COLUMNAR_MSGPACK) is Columnar.MSGPACK
    assert encoding(f"text/plain, {COLUMNAR_JSON.upper()}; q=0.5") is Columnar.JSON
    assert encoding(f"{COLUMNAR_JSON}; q=0.5, {COLUMNAR_MSGPACK}") is Columnar.MSGPACK  # q decides


def test_empty_page_has_empty_arrays() -> None:
    page = msgpack.unpackb(encode_columnar("t", 3, [], Columnar.MSGPACK))
    assert page == {
        "topic": "t",
        "partition": 3,
        "offsets": [],
        "timestamps": [],
        "timestamp_types": [],
        "keys": [],
        "values": [],
        "headers": [],
    }


def test_both_encodings_carry_the_same_columns() -> None:
    records = [
        Record(7, 1000, None, b"v", ()),
        Record(8, 1001, b"k", b"\x01", (("a", b"\xfe"),)),
        Record(9, 1002, b"gone", None, (("n", None),), TimestampType.LOG_APPEND_TIME),  # a tombstone
    ]
    packed = msgpack.unpackb(encode_columnar("t", 0, records, Columnar.MSGPACK))
    texted = json.loads(encode_columnar("t", 0, records, Columnar.JSON))
    assert packed["offsets"] == texted["offsets"] == [7, 8, 9]
    assert packed["timestamps"] == texted["timestamps"] == [1000, 1001, 1002]
    assert packed["timestamp_types"] == texted["timestamp_types"] == [0, 0, 1]
    assert packed["keys"] == [None, b"k", b"gone"] and texted["keys"] == [None, "aw==", "Z29uZQ=="]
    assert packed["values"] == [b"v", b"\x01", None] and texted["values"] == ["dg==", "AQ==", None]
    assert packed["headers"] == [[], [["a", b"\xfe"]], [["n", None]]]
    assert texted["headers"] == [[], [["a", "/g=="]], [["n", None]]]


async def test_columnar_fetch_returns_the_records_as_arrays(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    await _produce(n1, "t")
    answer = await n1.client.get(
        "/topics/t/partitions/0/records?offset=1", headers={"Accept": COLUMNAR_MSGPACK}
    )
    assert answer.status == 200 and answer.content_type == COLUMNAR_MSGPACK
    page = msgpack.unpackb(await answer.read())
    rows = await (await n1.client.get("/topics/t/partitions/0/records?offset=1")).json()
    assert page["offsets"] == [r["offset"] for r in rows] == [1, 2]
    assert page["timestamps"] == [r["timestamp"] for r in rows]
    assert page["keys"] == [None, None]
    assert page["values"] == [b"second", b""]
    assert page["headers"] == [[["h", b"hi"]], []]
    answer = await n1.client.get("/topics/t/partitions/0/records?offset=0", headers={"Accept": COLUMNAR_JSON})
    assert answer.content_type == COLUMNAR_JSON
    page = json.loads(await answer.read())
    assert page["keys"][0] == base64.b64encode(b"k1").decode()
    assert page["values"][0] == base64.b64encode(b"\x00\xffraw").decode()


async def test_columnar_fetch_keeps_the_fetch_errors(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    await _produce(n1, "t")
    accept = {"Accept": COLUMNAR_MSGPACK}
    answers: list[tuple[str, int, int]] = [
        ("/topics/t/partitions/0/records?offset=9", 416, 41601),
        ("/topics/t/partitions/0/records", 400, 40001),
        ("/topics/none/partitions/0/records?offset=0", 404, 40401),
        ("/topics/t/partitions/5/records?offset=0", 404, 40402),
    ]
    for path, status, code in answers:
        response = await n1.client.get(path, headers=accept)
        assert response.status == status and response.content_type == "application/json"
        body: dict[str, Any] = await response.json()
        assert body["error_code"] == code
    assert await n1.data.delete_records("t", 0, 2, 1000) == 2  # offsets 0 and 1 gone
    response = await n1.client.get("/topics/t/partitions/0/records?offset=0", headers=accept)
    body = await response.json()
    assert response.status == 416 and (body["log_start_offset"], body["end_offset"]) == (2, 3)


async def test_a_follower_forwards_a_columnar_fetch(cluster: FakeCluster, n1: Node, n2: Node) -> None:
    cluster.add_topic("t", 1, replicas=[["n2"]])
    await _produce(n2, "t")
    answer = await n1.client.get(
        "/topics/t/partitions/0/records?offset=0", headers={"Accept": COLUMNAR_MSGPACK}
    )
    assert answer.status == 200 and answer.content_type == COLUMNAR_MSGPACK
    assert answer.headers["X-Raftlog-Leader"] == "n2"
    assert msgpack.unpackb(await answer.read())["offsets"] == [0, 1, 2]


def test_openapi_documents_the_columnar_media_types() -> None:
    fetch = document(ROUTES, admin_token=False)["paths"]["/topics/{topic}/partitions/{partition}/records"][
        "get"
    ]
    content = fetch["responses"]["200"]["content"]
    schema_formats = set(
        SCHEMA_FORMATS.values()
    )  # Confluent's Avro, JSON Schema, Protobuf (api.typed_records)
    assert set(content) == {
        JSON_V2,
        BINARY_V2,
        COLUMNAR_JSON,
        COLUMNAR_MSGPACK,
        RECORD_BATCH,
        *schema_formats,
    }
