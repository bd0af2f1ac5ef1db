"""The HTTP API over in-memory fake nodes: every endpoint, every error code, long poll, forwarding, auth."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from fake_node import FakeCluster
from harness import Harness, Node
from waiting import wait_until

from api import console
from api.app import ROUTES, build_app
from api.schemas import dump_json
from partitions.commands import OFFSET_METADATA_MAX
from partitions.errors import PeerUnreachable, ReplicaRecovering
from raftlog.consensus.errors import (
    GroupClosed,
    NoLeader,
    OutcomeUnknown,
    ProposalDiscarded,
    ProposalQueueFull,
    ProposalRejected,
)
from raftlog.errors import InvariantViolation
from raftlog.storage.errors import CorruptRecord, StorageUnavailable
from raftlog.storage.partitioner import partition_for_key
from raftlog_contract import BINARY_V2, JSON_V2

JSON_HEADERS = {"Content-Type": JSON_V2}
BINARY_HEADERS = {"Content-Type": BINARY_V2}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


async def produce(node: Node, topic: str, records: list[dict[str, Any]], **extra: Any) -> Any:
    response = await node.client.post(
        f"/topics/{topic}", json={"records": records, **extra}, headers=JSON_HEADERS
    )
    assert response.status == 200, await response.text()
    return await response.json()


async def fetches_waiting(node: Node, count: int) -> bool:
    """Whether ``count`` fetches reached ``node``'s data plane (a long poll there waits for a record)."""
    return node.data.calls["fetch"] >= count


async def error_of(response: Any, status: int, code: int) -> dict[str, Any]:
    text = await response.text()
    assert response.status == status, text
    body = json.loads(text)
    assert body["error_code"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    return dict(body)


def end_offset(cluster: FakeCluster, topic: str, partition: int) -> int:
    return cluster.partitions[(topic, partition)].end_offset


# -- metadata ------------------------------------------------------------------------------------------


async def test_topics_list_describe_partitions_and_offsets(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("orders", 2, [["n1", "n2"], ["n1", "n2"]], {"retention.ms": 1000})
    cluster.add_topic("audit", 1, [["n1"]])
    response = await n1.client.get("/topics")
    assert await response.json() == ["audit", "orders"]
    assert response.headers["X-Raftlog-Leader"] == "n1"

    topic = await (await n1.client.get("/topics/orders")).json()
    assert topic["name"] == "orders" and topic["configs"] == {"retention.ms": 1000}
    assert topic["replication_factor"] == 2
    assert [p["partition"] for p in topic["partitions"]] == [0, 1]
    partitions = await (await n1.client.get("/topics/orders/partitions")).json()
    assert partitions[0] == {
        "partition": 0,
        "leader": "n1",
        "replicas": [
            {"broker": 1, "node": "n1", "leader": True, "in_sync": True, "error": None},
            {"broker": 2, "node": "n2", "leader": False, "in_sync": True, "error": None},
        ],
    }
    await produce(n1, "orders", [{"value": 1, "partition": 1}, {"value": 2, "partition": 1}])
    offsets = await (await n1.client.get("/topics/orders/partitions/1/offsets")).json()
    assert offsets == {"beginning_offset": 0, "end_offset": 2}


async def test_delete_records_moves_the_log_start_and_refuses_what_it_cannot_do(
    cluster: FakeCluster, n1: Node
) -> None:
    cluster.add_topic("t", 1)
    await produce(n1, "t", [{"value": v} for v in range(6)])
    path = "/topics/t/partitions/0/delete_records"
    answer = await n1.client.post(path, json={"offset": 4}, headers=JSON_HEADERS)
    assert (answer.status, await answer.json()) == (200, {"beginning_offset": 4})
    offsets = await (await n1.client.get("/topics/t/partitions/0/offsets")).json()
    assert offsets == {"beginning_offset": 4, "end_offset": 6}
    below = await error_of(await n1.client.get("/topics/t/partitions/0/records?offset=1"), 416, 41601)
    assert (below["log_start_offset"], below["end_offset"]) == (4, 6)
    await error_of(await n1.client.post(path, json={"offset": 7}, headers=JSON_HEADERS), 416, 41601)
    for bad in ({}, {"offset": -2}, {"offset": "3"}, {"offset": 3, "extra": 1}, [3]):
        await error_of(await n1.client.post(path, json=bad, headers=JSON_HEADERS), 400, 40001)
    await error_of(
        await n1.client.post(path, data=b"offset=3", headers={"Content-Type": "text/plain"}), 415, 41501
    )
    await error_of(
        await n1.client.post("/topics/nope/partitions/0/delete_records", json={"offset": 0}), 404, 40401
    )
    await error_of(
        await n1.client.post("/topics/t/partitions/2/delete_records", json={"offset": 0}), 404, 40402
    )
    answer = await n1.client.post(path, json={"offset": -1}, headers=JSON_HEADERS)
    assert await answer.json() == {"beginning_offset": 6}
    assert end_offset(cluster, "t", 0) == 6


async def test_unknown_topic_and_partition(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    await error_of(await n1.client.get("/topics/nope"), 404, 40401)
    await error_of(await n1.client.get("/topics/nope/partitions"), 404, 40401)
    await error_of(await n1.client.get("/topics/t/partitions/1/offsets"), 404, 40402)
    await error_of(await n1.client.get("/topics/t/partitions/x/offsets"), 400, 40001)
    await error_of(await n1.client.get("/topics/t/partitions/3/records?offset=0"), 404, 40402)
    response = await n1.client.post(
        "/topics/t/partitions/9", json={"records": [{"value": 1}]}, headers=JSON_HEADERS
    )
    await error_of(response, 404, 40402)
    await error_of(
        await n1.client.post("/topics/t", json={"records": [{"value": 1, "partition": 1}]}), 404, 40402
    )
    await error_of(await n1.client.post("/topics/nope", json={"records": [{"value": 1}]}), 404, 40401)
    assert end_offset(cluster, "t", 0) == 0


# -- produce and fetch ---------------------------------------------------------------------------------


async def test_keyed_records_go_to_kafkas_murmur2_partition_and_offsets_are_dense(
    cluster: FakeCluster, n1: Node
) -> None:
    cluster.add_topic("t", 4)
    keys = [f"user-{i}" for i in range(12)]
    body = await produce(n1, "t", [{"key": k, "value": {"n": i}} for i, k in enumerate(keys)])
    expected_partitions = [partition_for_key(dump_json(k), 4) for k in keys]
    assert [row["partition"] for row in body["offsets"]] == expected_partitions
    assert all(row["error_code"] is None and row["error"] is None for row in body["offsets"])
    for partition in range(4):
        offsets = [row["offset"] for row in body["offsets"] if row["partition"] == partition]
        assert offsets == list(range(len(offsets)))
    # Binary keys are hashed on their raw bytes, as a Kafka producer's byte-array key.
    response = await n1.client.post(
        "/topics/t", json={"records": [{"key": b64(b"21"), "value": ""}]}, headers=BINARY_HEADERS
    )
    assert (await response.json())["offsets"][0]["partition"] == partition_for_key(b"21", 4)


async def test_keyless_records_stick_to_one_partition_per_request_and_rotate(
    cluster: FakeCluster, n1: Node
) -> None:
    cluster.add_topic("t", 3)
    seen = []
    for _ in range(3):
        body = await produce(n1, "t", [{"value": i} for i in range(5)])
        partitions = {row["partition"] for row in body["offsets"]}
        assert len(partitions) == 1
        seen.append(partitions.pop())
    assert sorted(seen) == [0, 1, 2]
    assert n1.data.calls["produce_batch"] == 3  # one batch per partition per request


async def test_json_round_trip_with_headers_in_both_forms(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    records = [
        {
            "key": {"id": 7},
            "value": {"a": [1, 2.5, None, "é"]},
            "headers": [{"key": "h", "value": "1"}, {"key": "h", "value": "2"}],
        },
        {"value": None, "headers": {"trace": "abc"}},
        {"value": "plain string"},
    ]
    await produce(n1, "t", records)
    response = await n1.client.get("/topics/t/partitions/0/records?offset=0")
    rows = await response.json()
    assert response.headers["X-Raftlog-Leader"] == "n1"
    assert [(r["offset"], r["key"], r["value"], r["format"]) for r in rows] == [
        (0, {"id": 7}, {"a": [1, 2.5, None, "é"]}, "json"),
        (1, None, None, "json"),
        (2, None, "plain string", "json"),
    ]
    assert rows[0]["headers"] == [{"key": "h", "value": "1"}, {"key": "h", "value": "2"}]
    assert rows[1]["headers"] == [{"key": "trace", "value": "abc"}]
    assert all(r["topic"] == "t" and r["partition"] == 0 and isinstance(r["timestamp"], int) for r in rows)
    stored = cluster.partitions[("t", 0)].records[0]
    assert stored.key == b'{"id":7}'


async def test_binary_round_trip_and_json_fetch_of_non_json_bytes(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    body = {
        "records": [
            {
                "key": b64(b"\xff\x00"),
                "value": b64(b"\x80binary"),
                "headers": [{"key": "x", "value": b64(b"\xfe")}],
            },
            {"value": b64(b'{"ok":true}')},
        ]
    }
    response = await n1.client.post("/topics/t/partitions/0", json=body, headers=BINARY_HEADERS)
    assert (await response.json())["offsets"] == [
        {"partition": 0, "offset": 0, "error_code": None, "error": None},
        {"partition": 0, "offset": 1, "error_code": None, "error": None},
    ]
    binary = await (
        await n1.client.get("/topics/t/partitions/0/records?offset=0", headers={"Accept": BINARY_V2})
    ).json()
    assert [(r["key"], r["value"], r["format"]) for r in binary] == [
        (b64(b"\xff\x00"), b64(b"\x80binary"), "binary"),
        (None, b64(b'{"ok":true}'), "binary"),
    ]
    assert binary[0]["headers"] == [{"key": "x", "value": b64(b"\xfe")}]
    as_json = await (await n1.client.get("/topics/t/partitions/0/records?offset=0")).json()
    assert as_json[0]["format"] == "binary" and as_json[0]["value"] == b64(b"\x80binary")
    assert as_json[1]["format"] == "json" and as_json[1]["value"] == {"ok": True}


async def test_produce_to_partition_puts_every_record_there(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 3)
    response = await n1.client.post(
        "/topics/t/partitions/2",
        json={"records": [{"key": "a", "value": 1}, {"value": 2, "partition": 2}]},
        headers=JSON_HEADERS,
    )
    assert [(r["partition"], r["offset"]) for r in (await response.json())["offsets"]] == [(2, 0), (2, 1)]
    response = await n1.client.post(
        "/topics/t/partitions/2", json={"records": [{"value": 1, "partition": 1}]}, headers=JSON_HEADERS
    )
    body = await error_of(response, 400, 40001)
    assert "records[0].partition" in body["message"]


async def test_idempotent_produce_returns_the_original_offsets(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 2)
    request = {"records": [{"value": 1}, {"key": "k", "value": 2}], "producer_id": 42, "sequence": 0}
    first = await produce(n1, "t", **request)
    total = sum(end_offset(cluster, "t", p) for p in range(2))
    again = await produce(n1, "t", **request)
    assert again == first
    assert sum(end_offset(cluster, "t", p) for p in range(2)) == total == 2
    for sequence in range(1, 8):
        await produce(n1, "t", [{"value": 1, "partition": 0}], producer_id=42, sequence=sequence)
    response = await n1.client.post(
        "/topics/t/partitions/0",
        json={"records": [{"value": 1}], "producer_id": 42, "sequence": 1},
        headers=JSON_HEADERS,
    )
    await error_of(response, 409, 40913)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("{not json", "body"),
        ("", "body"),
        ("[]", "body"),
        ('{"records": {}}', "records"),
        ('{"records": []}', "records"),
        ('{"records": [{"value": 1}], "extra": 1}', "extra"),
        ('{"records": [1]}', "records[0]"),
        ('{"records": [{"key": 1}]}', "records[0].value"),
        ('{"records": [{"value": 1, "color": "red"}]}', "records[0].color"),
        ('{"records": [{"value": 1, "partition": "0"}]}', "records[0].partition"),
        ('{"records": [{"value": 1, "partition": -1}]}', "records[0].partition"),
        ('{"records": [{"value": 1, "partition": true}]}', "records[0].partition"),
        ('{"records": [{"value": 1}], "producer_id": 1}', "producer_id"),
        ('{"records": [{"value": 1}], "producer_id": -1, "sequence": 0}', "producer_id"),
        ('{"records": [{"value": 1}], "producer_id": 1, "sequence": 1.5}', "sequence"),
        ('{"records": [{"value": 1, "headers": 5}]}', "records[0].headers"),
        ('{"records": [{"value": 1, "headers": [{"key": "a"}]}]}', "records[0].headers[0]"),
        ('{"records": [{"value": 1, "headers": {"a": 1}}]}', "records[0].headers.a"),
        ('{"records": [{"value": NaN}]}', "body"),
    ],
)
async def test_bad_produce_bodies_are_400_naming_the_field_and_write_nothing(
    cluster: FakeCluster, n1: Node, body: str, field: str
) -> None:
    cluster.add_topic("t", 1)
    for path in ("/topics/t", "/topics/t/partitions/0"):
        response = await n1.client.post(path, data=body, headers=JSON_HEADERS)
        error = await error_of(response, 400, 40001)
        assert error["message"].startswith(field), error
    assert end_offset(cluster, "t", 0) == 0
    assert n1.data.calls["produce_batch"] == 0


async def test_binary_value_that_is_not_base64_is_422(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    response = await n1.client.post(
        "/topics/t", json={"records": [{"value": b64(b"ok")}, {"value": "%%%"}]}, headers=BINARY_HEADERS
    )
    body = await error_of(response, 422, 42201)
    assert "records[1].value" in body["message"]
    response = await n1.client.post("/topics/t", json={"records": [{"value": 5}]}, headers=BINARY_HEADERS)
    await error_of(response, 400, 40001)
    assert end_offset(cluster, "t", 0) == 0


@pytest.mark.parametrize("content_type", ["text/plain", "application/octet-stream", "application/xml", None])
async def test_unsupported_content_type_is_415(
    cluster: FakeCluster, n1: Node, content_type: str | None
) -> None:
    cluster.add_topic("t", 1)
    headers = {"Content-Type": content_type} if content_type else {}
    data = json.dumps({"records": [{"value": 1}]}).encode()
    for path in ("/topics/t", "/topics/t/partitions/0", "/consumers/g/offsets", "/v1/topics"):
        await error_of(await n1.client.post(path, data=data, headers=headers), 415, 41501)
    assert end_offset(cluster, "t", 0) == 0


async def test_application_json_and_charset_are_the_json_flavour(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    for content_type in ("application/json", "application/vnd.kafka.json.v2+json; charset=utf-8"):
        response = await n1.client.post(
            "/topics/t", data=b'{"records":[{"value":"x"}]}', headers={"Content-Type": content_type}
        )
        assert response.status == 200
    assert [r.value for r in cluster.partitions[("t", 0)].records] == [b'"x"', b'"x"']


async def test_record_too_large_and_request_too_large_are_413(cluster: FakeCluster, harness: Harness) -> None:
    cluster.add_topic("t", 1, configs={"max.message.bytes": 2000})
    node = await harness.start(cluster, "n1", request_bytes_max=10_000)
    response = await node.client.post(
        "/topics/t", json={"records": [{"value": "x" * 3000}]}, headers=JSON_HEADERS
    )
    body = await error_of(response, 413, 41301)
    assert body["limit_bytes"] == 2000 and body["size_bytes"] > 2000
    response = await node.client.post(
        "/topics/t", json={"records": [{"value": "x" * 20_000}]}, headers=JSON_HEADERS
    )
    await error_of(response, 413, 41301)

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: the limit counts what arrives
        yield b'{"records": [{"value": "'
        for _ in range(30):
            yield b"x" * 1000
        yield b'"}]}'

    response = await node.client.post("/topics/t", data=chunked(), headers=JSON_HEADERS)
    await error_of(response, 413, 41301)
    assert end_offset(cluster, "t", 0) == 0


async def test_fetch_query_validation_and_out_of_range(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    for i in range(3):  # a batch each: a read returns whole batches
        await produce(n1, "t", [{"value": i}])
    for query in (
        "",
        "offset=x",
        "offset=-1",
        "offset=0&timeout=-5",
        "offset=0&timeout=99999999",
        "offset=0&max_bytes=0",
        "offset=0&offset=1",
    ):
        error = await error_of(await n1.client.get(f"/topics/t/partitions/0/records?{query}"), 400, 40001)
        assert "query parameter" in error["message"]
    error = await error_of(await n1.client.get("/topics/t/partitions/0/records?offset=9"), 416, 41601)
    assert (error["log_start_offset"], error["end_offset"]) == (0, 3)
    rows = await (await n1.client.get("/topics/t/partitions/0/records?offset=1&max_bytes=1")).json()
    assert [r["offset"] for r in rows] == [1]  # at least one record even over budget
    rows = await (await n1.client.get("/topics/t/partitions/0/records?offset=1")).json()
    assert [r["value"] for r in rows] == [1, 2]


async def test_long_poll_returns_as_soon_as_a_record_arrives(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    started = time.monotonic()
    poll = asyncio.create_task(n1.client.get("/topics/t/partitions/0/records?offset=0&timeout=10000"))
    await wait_until(lambda: fetches_waiting(n1, 1), "the poll waits for a record")
    assert not poll.done()
    await produce(n1, "t", [{"value": "late"}])
    response = await asyncio.wait_for(poll, 5)
    assert [r["value"] for r in await response.json()] == ["late"]
    assert time.monotonic() - started < 5


async def test_long_poll_answers_empty_after_its_timeout(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    started = time.monotonic()
    response = await n1.client.get("/topics/t/partitions/0/records?offset=0&timeout=300")
    assert await response.json() == []
    assert time.monotonic() - started >= 0.25


# -- consumer offsets ----------------------------------------------------------------------------------


async def test_consumer_offsets_commit_read_never_backwards_unless_reset(
    cluster: FakeCluster, n1: Node
) -> None:
    cluster.add_topic("t", 2)

    async def commit(body: dict[str, Any]) -> None:
        response = await n1.client.post("/consumers/g1/offsets", json=body)
        assert response.status == 204, await response.text()

    async def committed(query: str) -> list[dict[str, Any]]:
        response = await n1.client.get(f"/consumers/g1/offsets?{query}")
        assert response.status == 200, await response.text()
        return list((await response.json())["offsets"])

    assert await committed("topic=t") == []
    await commit(
        {
            "offsets": [
                {"topic": "t", "partition": 0, "offset": 5},
                {"topic": "t", "partition": 1, "offset": 2},
            ]
        }
    )
    assert await committed("topic=t") == [
        {"topic": "t", "partition": 0, "offset": 5, "metadata": ""},
        {"topic": "t", "partition": 1, "offset": 2, "metadata": ""},
    ]
    await commit({"offsets": [{"topic": "t", "partition": 0, "offset": 3}]})
    assert await committed("topic=t&partition=0") == [
        {"topic": "t", "partition": 0, "offset": 5, "metadata": ""}
    ]
    await commit({"offsets": [{"topic": "t", "partition": 0, "offset": 3}], "reset": True})
    assert await committed("topic=t&partition=0") == [
        {"topic": "t", "partition": 0, "offset": 3, "metadata": ""}
    ]
    await commit({"offsets": [{"topic": "t", "partition": 1, "offset": 0, "reset": True}]})
    assert await committed("topic=t&partition=1") == [
        {"topic": "t", "partition": 1, "offset": 0, "metadata": ""}
    ]


async def test_a_group_commit_keeps_each_offsets_metadata_and_a_metadata_past_kafkas_bound_commits_nothing(
    cluster: FakeCluster, n1: Node
) -> None:
    """The metadata string of each entry is kept with its offset and read back (as a Kafka client's
    commit keeps it); one past Kafka's bound (``commands.OFFSET_METADATA_MAX`` UTF-16 units) refuses the
    whole body before any entry is committed."""
    cluster.add_topic("t", 2)
    entries = [
        {"topic": "t", "partition": 0, "offset": 5, "metadata": "checkpoint 17 \N{SNOWMAN}"},
        {"topic": "t", "partition": 1, "offset": 2},
    ]
    response = await n1.client.post("/consumers/g1/offsets", json={"offsets": entries})
    assert response.status == 204, await response.text()
    answer = await (await n1.client.get("/consumers/g1/offsets?topic=t")).json()
    assert answer["offsets"] == [
        {"topic": "t", "partition": 0, "offset": 5, "metadata": "checkpoint 17 \N{SNOWMAN}"},
        {"topic": "t", "partition": 1, "offset": 2, "metadata": ""},
    ]
    calls = n1.data.calls["commit_offset"]
    too_large = [
        {"topic": "t", "partition": 0, "offset": 9, "metadata": "kept"},
        {"topic": "t", "partition": 1, "offset": 9, "metadata": "x" * (OFFSET_METADATA_MAX + 1)},
    ]
    error = await error_of(
        await n1.client.post("/consumers/g1/offsets", json={"offsets": too_large}), 400, 40001
    )
    assert str(OFFSET_METADATA_MAX) in error["message"], error
    assert n1.data.calls["commit_offset"] == calls
    answer = await (await n1.client.get("/consumers/g1/offsets?topic=t")).json()
    assert [row["offset"] for row in answer["offsets"]] == [5, 2]


async def test_a_commit_and_its_read_wait_while_the_partitions_leader_moves(
    cluster: FakeCluster, n1: Node
) -> None:
    """A commit overwritten by a new leader, a read from a leader still recovering: asked again, not
    answered 503 (``partitions.consumers.offsets``)."""
    cluster.add_topic("t", 1)
    n1.data.inject["commit_offset"] = [ProposalDiscarded("t-0.1"), ReplicaRecovering("t-0.1", 0, 5)]
    body = {"offsets": [{"topic": "t", "partition": 0, "offset": 7}]}
    response = await n1.client.post("/consumers/g1/offsets", json=body)
    assert response.status == 204, await response.text()
    n1.data.inject["group_offset"] = [PeerUnreachable("n2", "connection refused")]
    response = await n1.client.get("/consumers/g1/offsets?topic=t")
    assert response.status == 200 and (await response.json())["offsets"][0]["offset"] == 7
    assert n1.data.calls["commit_offset"] == 3 and n1.data.calls["group_offset"] == 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "offsets"),
        ({"offsets": []}, "offsets"),
        ({"offsets": [{"topic": "t", "partition": 0}]}, "offsets[0].offset"),
        ({"offsets": [{"topic": "t", "partition": 0, "offset": -1}]}, "offsets[0].offset"),
        ({"offsets": [{"topic": 1, "partition": 0, "offset": 1}]}, "offsets[0].topic"),
        ({"offsets": [{"topic": "t", "partition": 0, "offset": 1}], "reset": "yes"}, "reset"),
        ({"offsets": [{"topic": "t", "partition": 0, "offset": 1, "metadata": 7}]}, "offsets[0].metadata"),
    ],
)
async def test_bad_offset_commits_are_400(cluster: FakeCluster, n1: Node, body: Any, field: str) -> None:
    cluster.add_topic("t", 1)
    error = await error_of(await n1.client.post("/consumers/g/offsets", json=body), 400, 40001)
    assert error["message"].startswith(field)
    assert n1.data.calls["commit_offset"] == 0


async def test_offset_commit_errors(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    await error_of(
        await n1.client.post(
            "/consumers/g/offsets", json={"offsets": [{"topic": "x", "partition": 0, "offset": 1}]}
        ),
        404,
        40401,
    )
    await error_of(
        await n1.client.post(
            "/consumers/g/offsets", json={"offsets": [{"topic": "t", "partition": 4, "offset": 1}]}
        ),
        404,
        40402,
    )
    await error_of(await n1.client.get("/consumers/g/offsets"), 400, 40001)
    await error_of(await n1.client.get("/consumers/g/offsets?topic=x"), 404, 40401)
    await error_of(await n1.client.get("/consumers/g/offsets?topic=t&partition=-1"), 400, 40001)


# -- admin ---------------------------------------------------------------------------------------------


OPERATOR_HEALTH_FIELDS = ("disk", "nodes_maintenance", "nodes_decommissioning", "moving_partitions")


async def test_health_nodes_metrics_and_status(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 2, [["n1", "n2"], ["n2", "n1"]])
    health = await (await n1.client.get("/v1/cluster/health")).json()
    assert {k: v for k, v in health.items() if k not in OPERATOR_HEALTH_FIELDS} == {
        "is_healthy": True,
        "controller": "n1",
        "nodes": ["n1", "n2"],
        "nodes_down": [],
        "nodes_decommissioned": [],
        "nodes_disk_full": [],
        "nodes_kept_out": {},
        "nodes_missing_doors": {},
        "leaderless_partitions": [],
        "under_replicated_partitions": [],
        "failed_replicas": [],
    }
    cluster.states["n2"] = "dead"
    cluster.partitions[("t", 1)].leader = None
    health = await (await n1.client.get("/v1/cluster/health")).json()
    assert health["is_healthy"] is False and health["nodes_down"] == ["n2"]
    assert health["leaderless_partitions"] == [{"topic": "t", "partition": 1}]
    assert len(health["under_replicated_partitions"]) == 2
    cluster.states["n2"] = "alive"
    cluster.partitions[("t", 1)].leader = "n2"
    cluster.kept_out["n2"] = "its code announces no feature levels (release 0.1.0); ..."
    health = await (await n1.client.get("/v1/cluster/health")).json()  # alive, but kept out: not healthy
    assert health["is_healthy"] is False and health["nodes_down"] == []
    assert health["nodes_kept_out"] == {"n2": cluster.kept_out["n2"]}
    assert len(health["under_replicated_partitions"]) == 2  # its replicas count as missing
    del cluster.kept_out["n2"]
    cluster.states["n2"] = "dead"

    nodes = await (await n1.client.get("/v1/nodes")).json()
    assert nodes[0] == {
        "node_id": "n1",
        "http": n1.url,
        "state": "alive",
        "incarnation": 1,
        "leader_of": 1,
        "maintenance": False,
        "decommissioning": False,
        "decommissioned": False,
        "disk_used_bytes": 1000,
        "disk_free_bytes": 10**9,
        "disk_full": False,
        "version": None,  # the fake's node gossips none, as a node of release 0.1.0
        "features": None,
        "kept_out": None,
        "doors_missing": [],
    }
    assert nodes[1]["state"] == "dead"

    live = await n1.client.get("/status/live")
    assert live.status == 200
    ready = await n1.client.get("/status/ready")  # says which node and process answer
    assert await ready.json() == {"status": "ready", "node_id": "n1", "pid": os.getpid()}
    cluster.controller = None
    not_ready = await n1.client.get("/status/ready")
    await error_of(not_ready, 503, 50301)
    assert not_ready.headers["Retry-After"] == "1"

    text = await (await n1.client.get("/metrics")).text()
    assert "raftlog_partitions_led 1.0" in text.splitlines()
    assert 'raftlog_http_requests_total{method="GET",route="/v1/cluster/health",status="200"} 3.0' in text
    assert 'raftlog_http_request_duration_seconds_count{method="GET",route="/v1/nodes"} 1.0' in text


async def test_a_topic_the_cluster_cannot_hold_is_refused_with_the_room_left(
    cluster: FakeCluster, n1: Node
) -> None:
    cluster.replicas_max = 4
    assert (await n1.client.post("/v1/topics", json={"name": "a", "partitions": 3})).status == 201
    error = await error_of(
        await n1.client.post("/v1/topics", json={"name": "b", "partitions": 2}), 409, 40910
    )
    assert error["replicas_max"] == 4 and error["room"] == {"n1": 1, "n2": 1}
    assert "--replicas-max" in error["message"]
    assert await (await n1.client.get("/topics")).json() == ["a"]


async def test_create_and_delete_topics(cluster: FakeCluster, n1: Node) -> None:
    response = await n1.client.post(
        "/v1/topics",
        json={"name": "new", "partitions": 3, "replication_factor": 2, "configs": {"retention.ms": 60000}},
    )
    assert response.status == 201, await response.text()
    created = await response.json()
    assert created["name"] == "new" and created["partitions"] == 3 and created["replication_factor"] == 2
    assert created["configs"] == {"retention.ms": 60000}
    assert "new" in await (await n1.client.get("/topics")).json()
    await error_of(await n1.client.post("/v1/topics", json={"name": "new"}), 409, 40901)
    await error_of(await n1.client.post("/v1/topics", json={"name": "bad name!"}), 400, 40001)
    await error_of(
        await n1.client.post("/v1/topics", json={"name": "x", "replication_factor": 3}), 400, 40001
    )
    await error_of(await n1.client.post("/v1/topics", json={"name": "x", "configs": {"nope": 1}}), 400, 40001)
    error = await error_of(
        await n1.client.post("/v1/topics", json={"name": "x", "partitions": 0}), 400, 40001
    )
    assert error["message"].startswith("partitions")
    await error_of(await n1.client.post("/v1/topics", json={"partitions": 1}), 400, 40001)
    default = await n1.client.post("/v1/topics", json={"name": "d"})
    assert (await default.json())["replication_factor"] == 2  # min(3, alive nodes)
    assert (await n1.client.delete("/v1/topics/new")).status == 204
    await error_of(await n1.client.get("/topics/new"), 404, 40401)
    await error_of(await n1.client.delete("/v1/topics/new"), 404, 40401)


async def test_add_partitions_grows_a_topic_and_refuses_bad_counts(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 2, [["n1", "n2"], ["n2", "n1"]])
    response = await n1.client.post("/v1/topics/t/partitions", json={"partitions": 3})
    assert response.status == 200, await response.text()
    grown = await response.json()
    assert grown["partitions"] == 3 and grown["replication_factor"] == 2 and len(grown["replicas"]) == 3
    assert cluster.topics["t"].partitions == 3
    checked = await n1.client.post("/v1/topics/t/partitions", json={"partitions": 5, "validate_only": True})
    assert (await checked.json())["partitions"] == 5 and cluster.topics["t"].partitions == 3
    for body in ({"partitions": "4"}, {"partitions": 0}, {"partitions": 10_001}, {"count": 4}, [4],
                 {"partitions": 4, "validate_only": "yes"}, {"partitions": True}):  # fmt: skip
        await error_of(await n1.client.post("/v1/topics/t/partitions", json=body), 400, 40001)
    error = await error_of(
        await n1.client.post("/v1/topics/t/partitions", json={"partitions": 3}), 400, 40001
    )
    assert error["message"] == "Topic already has 3 partition(s)."  # Kafka 4.4's words
    await error_of(await n1.client.post("/v1/topics/nope/partitions", json={"partitions": 3}), 404, 40401)
    assert cluster.topics["t"].partitions == 3


async def test_partition_state_and_leadership_transfer(cluster: FakeCluster, n1: Node, n2: Node) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])
    await produce(n1, "t", [{"value": 1}])
    state = await (await n1.client.get("/v1/partitions/t/0")).json()
    assert state["leader"] == "n1" and state["high_watermark"] == 1 and state["log_start_offset"] == 0
    assert [r["node"] for r in state["replicas"]] == ["n1", "n2"]
    await error_of(await n1.client.post("/v1/partitions/t/0/transfer_leadership?target=n9"), 400, 40001)
    response = await n1.client.post("/v1/partitions/t/0/transfer_leadership?target=n2")
    assert response.status == 200
    assert await response.json() == {"topic": "t", "partition": 0, "leader": "n2"}
    assert cluster.partitions[("t", 0)].leader == "n2"
    # n1 is no longer the leader: it forwards the next admin call to n2.
    response = await n1.client.get("/v1/partitions/t/0")
    assert response.headers["X-Raftlog-Leader"] == "n2"
    assert (await response.json())["term"] == 2
    await error_of(await n1.client.get("/v1/partitions/t/5"), 404, 40402)


async def test_unknown_routes_and_methods_are_json_errors(n1: Node) -> None:
    response = await n1.client.get("/nope")
    await error_of(response, 404, 40400)
    assert response.headers["X-Raftlog-Leader"] == "n1"
    response = await n1.client.delete("/topics")
    body = await error_of(response, 405, 40501)
    assert body["allowed"] == ["GET"]


async def test_a_bug_in_a_service_is_a_logged_500(cluster: FakeCluster, n1: Node, caplog: Any) -> None:
    cluster.add_topic("t", 1)
    n1.data.inject["produce_batch"] = [RuntimeError("boom")]
    response = await n1.client.post(
        "/topics/t/partitions/0", json={"records": [{"value": 1}]}, headers=JSON_HEADERS
    )
    await error_of(response, 500, 50000)
    assert "boom" in caplog.text


async def test_outcome_unknown_is_504_and_no_leader_is_503(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    n1.data.inject["produce_batch"] = [OutcomeUnknown("t-0.1", "commit timed out")]
    response = await n1.client.post(
        "/topics/t/partitions/0", json={"records": [{"value": 1}]}, headers=JSON_HEADERS
    )
    await error_of(response, 504, 50401)
    n1.data.inject["fetch"] = [NoLeader("t-0.1")]
    response = await n1.client.get("/topics/t/partitions/0/records?offset=0")
    await error_of(response, 503, 50301)
    assert response.headers["Retry-After"] == "1"
    assert response.headers["X-Raftlog-Leader"] == ""


async def test_retriable_5xx_answers_are_logged_with_their_code_once_per_interval(
    cluster: FakeCluster, n1: Node, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.add_topic("t", 1)
    n1.data.inject["fetch"] = [NoLeader("t-0.1"), NoLeader("t-0.1"), NoLeader("t-0.1")]
    with caplog.at_level(logging.INFO, logger="api.app"):
        for _ in range(3):
            await error_of(await n1.client.get("/topics/t/partitions/0/records?offset=0"), 503, 50301)
    lines = [r.getMessage() for r in caplog.records if "answered 503" in r.getMessage()]
    assert len(lines) == 1 and "error_code 50301" in lines[0] and "t-0.1" in lines[0], lines


def test_the_retriable_log_reports_how_many_answers_each_line_stands_for() -> None:
    from api.http_limits import QuietLog

    limiter = QuietLog(10.0)
    assert limiter.record(50301, 100.0) == 1
    assert limiter.record(50301, 101.0) is None
    assert limiter.record(50401, 101.0) == 1  # each code on its own
    assert limiter.record(50301, 105.0) is None
    assert limiter.record(50301, 110.5) == 3  # this one and the two kept quiet since the last line
    assert limiter.record(50301, 111.0) is None


async def test_admin_token(cluster: FakeCluster, harness: Harness) -> None:
    cluster.add_topic("t", 1)
    node = await harness.start(cluster, "n1", admin_token="s3cret")
    response = await node.client.get("/v1/nodes")
    await error_of(response, 401, 40101)
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    await error_of(await node.client.get("/v1/nodes", headers={"Authorization": "Bearer wrong"}), 401, 40101)
    await error_of(await node.client.get("/v1/nodes", headers={"Authorization": "Basic s3cret"}), 401, 40101)
    await error_of(await node.client.get("/v1/unknown"), 401, 40101)
    assert (await node.client.get("/v1/nodes", headers={"Authorization": "Bearer s3cret"})).status == 200
    assert (await node.client.get("/topics")).status == 200  # the client API is not behind the token
    assert (await node.client.get("/status/live")).status == 200


async def test_openapi_document_lists_every_route(n1: Node) -> None:
    document = await (await n1.client.get("/openapi.json")).json()
    assert document["openapi"].startswith("3.")
    served = {
        (route.method.lower(), route.resource.canonical)
        for route in n1.client.app.router.routes()
        if route.resource is not None
        and route.method != "HEAD"
        and not console.is_console(route.resource.canonical)  # the console's files: no API
    }
    documented = {(method, path) for path, operations in document["paths"].items() for method in operations}
    assert served == documented
    assert len(documented) == len(ROUTES)
    schemas = document["components"]["schemas"]
    refs = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "$ref" in value:
                refs.add(value["$ref"].rsplit("/", 1)[1])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(document)
    assert refs <= set(schemas)
    fetch = document["paths"]["/topics/{topic}/partitions/{partition}/records"]["get"]
    assert {p["name"] for p in fetch["parameters"]} == {
        "topic",
        "partition",
        "offset",
        "timeout",
        "max_bytes",
        "isolation",
    }
    isolation = next(p for p in fetch["parameters"] if p["name"] == "isolation")
    assert isolation["schema"]["enum"] == ["read_uncommitted", "read_committed"]


def test_build_app_refuses_nonsense_settings() -> None:
    from fake_node import FakeNode

    node = FakeNode(FakeCluster(), "n1")
    with pytest.raises(ValueError):
        build_app(node, admin_token="")
    with pytest.raises(ValueError):
        build_app(node, produce_timeout_ms=0)
    assert isinstance(build_app(node), web.Application)


# -- forwarding ----------------------------------------------------------------------------------------


async def test_a_follower_forwards_produce_and_fetch_to_the_leader(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])
    response = await n2.client.post(
        "/topics/t/partitions/0", json={"records": [{"value": "a"}]}, headers=JSON_HEADERS
    )
    assert response.status == 200
    assert response.headers["X-Raftlog-Leader"] == "n1"
    assert (await response.json())["offsets"][0]["offset"] == 0
    assert n1.data.calls["produce_batch"] == 1 and n2.data.calls["produce_batch"] == 1  # n2 refused, n1 wrote

    poll = asyncio.create_task(n2.client.get("/topics/t/partitions/0/records?offset=1&timeout=10000"))
    await wait_until(lambda: fetches_waiting(n1, 1), "the forwarded poll waits on the leader")
    assert not poll.done()
    await produce(n1, "t", [{"value": "b"}])
    response = await asyncio.wait_for(poll, 5)
    assert response.headers["X-Raftlog-Leader"] == "n1"
    assert [r["value"] for r in await response.json()] == ["b"]

    offsets = await n2.client.get("/topics/t/partitions/0/offsets")
    assert await offsets.json() == {"beginning_offset": 0, "end_offset": 2}
    assert offsets.headers["X-Raftlog-Leader"] == "n1"
    # Errors of the leader come back as they are.
    await error_of(await n2.client.get("/topics/t/partitions/0/records?offset=7"), 416, 41601)


async def test_a_node_without_a_replica_routes_by_leader_hint(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("only-n1", 1, [["n1"]])
    response = await n2.client.post("/topics/only-n1", json={"records": [{"value": 1}]}, headers=JSON_HEADERS)
    assert response.status == 200
    assert response.headers["X-Raftlog-Leader"] == "n1"
    assert n1.data.calls["produce_batch"] == 1, "n1 got the batch n2 encoded"
    rows = await (await n2.client.get("/topics/only-n1/partitions/0/records?offset=0")).json()
    assert [r["value"] for r in rows] == [1]
    assert n1.data.calls["fetch"] == 1


async def test_topic_produce_splits_across_leaders(cluster: FakeCluster, n1: Node, n2: Node) -> None:
    cluster.add_topic("t", 2, [["n1", "n2"], ["n2", "n1"]])
    records = [{"value": i, "partition": i % 2} for i in range(6)]
    response = await n1.client.post("/topics/t", json={"records": records}, headers=JSON_HEADERS)
    body = await response.json()
    assert [(r["partition"], r["offset"]) for r in body["offsets"]] == [
        (0, 0),
        (1, 0),
        (0, 1),
        (1, 1),
        (0, 2),
        (1, 2),
    ]
    assert response.headers["X-Raftlog-Leader"] == "n1,n2"
    assert [r.value for r in cluster.partitions[("t", 1)].records] == [b"1", b"3", b"5"]


async def test_partial_failure_reports_per_record_errors(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 2)
    cluster.partitions[("t", 1)].leader = None
    n1.data.leader_overrides[("t", 1)] = None
    response = await n1.client.post(
        "/topics/t",
        json={"records": [{"value": 0, "partition": 0}, {"value": 1, "partition": 1}]},
        headers=JSON_HEADERS,
    )
    assert response.status == 200
    rows = (await response.json())["offsets"]
    assert rows[0] == {"partition": 0, "offset": 0, "error_code": None, "error": None}
    assert rows[1]["partition"] == 1 and rows[1]["offset"] is None and rows[1]["error_code"] == 50301
    response = await n1.client.post(
        "/topics/t", json={"records": [{"value": 1, "partition": 1}]}, headers=JSON_HEADERS
    )
    await error_of(response, 503, 50301)
    assert response.headers["Retry-After"] == "1"
    assert response.headers["X-Raftlog-Leader"] == ""


async def test_admin_and_consumer_calls_are_forwarded(cluster: FakeCluster, n1: Node, n2: Node) -> None:
    cluster.add_topic("t", 2, [["n1", "n2"], ["n2", "n1"]])
    response = await n2.client.post("/v1/topics", json={"name": "made-on-n1", "replication_factor": 1})
    assert response.status == 201
    assert n1.data.calls["create_topic"] == 1
    response = await n1.client.post(
        "/consumers/g/offsets",
        json={
            "offsets": [
                {"topic": "t", "partition": 0, "offset": 4},
                {"topic": "t", "partition": 1, "offset": 6},
            ]
        },
    )
    assert response.status == 204
    assert cluster.partitions[("t", 1)].consumer_offsets == {"g": 6}
    body = await (await n2.client.get("/consumers/g/offsets?topic=t")).json()
    assert body["offsets"] == [
        {"topic": "t", "partition": 0, "offset": 4, "metadata": ""},
        {"topic": "t", "partition": 1, "offset": 6, "metadata": ""},
    ]
    assert (await n2.client.delete("/v1/topics/made-on-n1")).status == 204


async def test_following_leader_hints_stops_after_three_hops(harness: Harness) -> None:
    cluster = FakeCluster(["n1", "n2", "n3"])
    n1, n2, n3 = [await harness.start(cluster, n) for n in ("n1", "n2", "n3")]
    cluster.add_topic("t", 1, [["n1", "n2", "n3"]])
    n1.data.leader_overrides[("t", 0)] = "n2"  # n2 and n3 each believe the other one leads
    n2.data.leader_overrides[("t", 0)] = "n3"
    n3.data.leader_overrides[("t", 0)] = "n2"
    response = await n1.client.post(
        "/topics/t/partitions/0", json={"records": [{"value": 1}]}, headers=JSON_HEADERS
    )
    body = await error_of(response, 503, 50303)
    assert "3 times" in body["message"]
    assert response.headers["Retry-After"] == "1"
    assert n2.data.calls["produce_batch"] + n3.data.calls["produce_batch"] == 3  # n2, n3, n2
    assert end_offset(cluster, "t", 0) == 0
    n2.data.leader_overrides[("t", 0)] = "n1"  # a hint naming the node that asked: nobody leads
    await error_of(await n1.client.get("/topics/t/partitions/0/offsets"), 503, 50301)


async def test_forwarding_keeps_content_type_accept_and_token(cluster: FakeCluster, harness: Harness) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])
    await harness.start(cluster, "n1", admin_token="tok")
    n2 = await harness.start(cluster, "n2", admin_token="tok")
    body = {"records": [{"value": b64(b"\xff")}]}
    response = await n2.client.post("/topics/t/partitions/0", json=body, headers={"content-type": BINARY_V2})
    assert response.status == 200 and response.headers["X-Raftlog-Leader"] == "n1"
    rows = await (
        await n2.client.get("/topics/t/partitions/0/records?offset=0", headers={"accept": BINARY_V2})
    ).json()
    assert rows[0]["value"] == b64(b"\xff") and rows[0]["format"] == "binary"
    response = await n2.client.get("/v1/partitions/t/0", headers={"authorization": "Bearer tok"})
    assert response.status == 200 and response.headers["X-Raftlog-Leader"] == "n1"


async def test_an_unreachable_leader_is_503(cluster: FakeCluster, n2: Node) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])
    cluster.addresses["n1"] = "http://127.0.0.1:9"  # discard port: nothing listens
    response = await n2.client.post(
        "/topics/t/partitions/0", json={"records": [{"value": 1}]}, headers=JSON_HEADERS
    )
    await error_of(response, 503, 50301)
    del cluster.addresses["n1"]
    response = await n2.client.get("/topics/t/partitions/0/offsets")
    await error_of(response, 503, 50301)


async def test_a_partitions_state_whose_leader_is_down_says_so(cluster: FakeCluster, n2: Node) -> None:
    """The leader's node died and no successor is known yet: the partition's state names what is known
    (its replicas, each node as gossip sees it) and why the leader's view is missing, not a raw 503."""
    cluster.add_topic("t", 1, [["n1", "n2"]])
    cluster.addresses["n1"] = "http://127.0.0.1:9"  # discard port: nothing listens
    cluster.states["n1"] = "dead"
    response = await n2.client.get("/v1/partitions/t/0")
    assert response.status == 200
    state = await response.json()
    assert state["leader"] is None and state["high_watermark"] is None
    assert state["leader_error"].startswith("its leader n1 did not answer (node dead)")
    assert [(r["node"], r["role"], r["node_state"]) for r in state["replicas"]] == [
        ("n1", "unknown", "dead"),
        ("n2", "unknown", "alive"),
    ]


async def test_a_leader_that_never_answers_a_write_is_504(
    cluster: FakeCluster, harness: Harness, n1: Node
) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])
    n1.data.produce_delay_s = 2.0
    n2 = await harness.start(cluster, "n2", peer_timeout_s=0.3, produce_timeout_ms=100)
    response = await n2.client.post(
        "/topics/t/partitions/0", json={"records": [{"value": 1}]}, headers=JSON_HEADERS
    )
    await error_of(response, 504, 50401)


async def test_partition_state_from_a_follower_is_the_leaders_view(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])
    response = await n2.client.get("/v1/partitions/t/0")  # n2 follows: the call runs on n1
    assert response.headers["X-Raftlog-Leader"] == "n1"
    assert (await response.json())["replicas"][1] == {
        "node": "n2",
        "role": "follower",
        "match_offset": 0,
        "lag": 0,
        "match_index": 0,  # the same Raft index under a name that says so
        "in_sync": True,
        "error": None,
        "node_state": "alive",  # as gossip sees its node
    }


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (StorageUnavailable("/data/t-0", "disk full"), 503, 50302),
        (ProposalQueueFull("t-0.1"), 503, 50304),
        (ProposalDiscarded("t-0.1"), 503, 50305),
        (GroupClosed("t-0.1"), 503, 50306),
        (ProposalRejected("t-0.1", "target is lagging"), 409, 40903),
        (InvariantViolation("offsets not contiguous"), 500, 50001),
        (CorruptRecord("/data/t-0/0.log", 128, "crc mismatch"), 500, 50002),
    ],
)
async def test_every_service_error_has_its_http_answer(
    cluster: FakeCluster, n1: Node, error: Exception, status: int, code: int
) -> None:
    cluster.add_topic("t", 1)
    n1.data.inject["produce_batch"] = [error]
    response = await n1.client.post(
        "/topics/t/partitions/0", json={"records": [{"value": 1}]}, headers=JSON_HEADERS
    )
    await error_of(response, status, code)
    assert ("Retry-After" in response.headers) == (status == 503)


async def test_transfer_without_another_replica_is_rejected(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    await error_of(await n1.client.post("/v1/partitions/t/0/transfer_leadership"), 409, 40903)


# -- overload ------------------------------------------------------------------------------------------


async def test_overload_answers_503_with_retry_after_at_once_and_recovers(
    cluster: FakeCluster, harness: Harness
) -> None:
    node = await harness.start(cluster, "n1", long_polls_in_flight_max=2)
    cluster.add_topic("t", 1)
    waiting = [
        asyncio.create_task(node.client.get("/topics/t/partitions/0/records?offset=0&timeout=10000"))
        for _ in range(2)
    ]
    await wait_until(lambda: fetches_waiting(node, 2), "both long polls hold their slots")
    started = time.monotonic()
    refused = await node.client.get("/topics/t/partitions/0/records?offset=0&timeout=10000")
    assert refused.status == 503 and refused.headers["Retry-After"] == "1"
    assert (await refused.json())["error_code"] == 50307
    assert time.monotonic() - started < 5, "an overloaded node answers at once, it does not queue"
    await produce(node, "t", [{"value": "v"}])
    for task in waiting:
        assert [r["value"] for r in await (await asyncio.wait_for(task, 5)).json()] == ["v"]
    again = await node.client.get("/topics/t/partitions/0/records?offset=0&timeout=0")
    assert again.status == 200, "slots are given back when requests finish"


def test_admission_counts_and_refuses_per_kind() -> None:
    from api.errors import Overloaded
    from api.state import Admission

    admission = Admission(writes_max=1, long_polls_max=1)
    admission.enter("write")
    with pytest.raises(Overloaded):
        admission.enter("write")
    admission.enter("long-poll")
    admission.leave("write")
    admission.enter("write")
    assert admission.in_flight == {"write": 1, "long-poll": 1}


async def test_an_unknown_topic_before_any_controller_is_known_is_retriable_not_absent(
    cluster: FakeCluster, n1: Node
) -> None:
    cluster.controller = None  # e.g. right after a restart
    response = await n1.client.get("/topics/t/partitions/0/offsets")
    assert response.status == 503 and response.headers["Retry-After"] == "1"
    cluster.controller = "n1"
    assert (await n1.client.get("/topics/t/partitions/0/offsets")).status == 404


async def test_health_counts_a_partition_without_a_known_leader_as_leaderless(
    cluster: FakeCluster, n1: Node
) -> None:
    cluster.add_topic("t", 2)
    cluster.partitions[("t", 1)].leader = None
    health = await (await n1.client.get("/v1/cluster/health")).json()
    assert health["leaderless_partitions"] == [{"topic": "t", "partition": 1}]
    assert health["is_healthy"] is False
