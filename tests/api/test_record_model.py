"""Kafka's record model over HTTP: null keys and values (tombstones), headers with null values, produced
and fetched timestamps with their type, offsets by timestamp, and the record-batch media type of the
format before Kafka's RecordBatch v2 refused with a message naming the new one."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import msgpack
from fake_node import FakeCluster
from harness import Node

from api.columnar import Columnar, encode_columnar
from api.records import decode as decode_fetched
from api.rendering import records_json
from api.schemas import Flavour
from raftlog.storage.batch import (
    Compression,
    ProducerRecord,
    TimestampType,
    encode_batch,
    with_log_append_time,
)
from raftlog.storage.batch_reads import decode_batch, split_batches
from raftlog_contract import (
    BINARY_V2,
    COLUMNAR_JSON,
    COLUMNAR_MSGPACK,
    JSON_V2,
    LEGACY_RECORD_BATCH,
    RECORD_BATCH,
)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


async def _post(node: Node, path: str, records: list[dict[str, Any]], content_type: str = JSON_V2) -> Any:
    response = await node.client.post(path, json={"records": records}, headers={"Content-Type": content_type})
    assert response.status == 200, await response.text()
    return await response.json()


async def _fetch(node: Node, accept: str, offset: int = 0) -> Any:
    response = await node.client.get(
        f"/topics/t/partitions/0/records?offset={offset}", headers={"Accept": accept}
    )
    assert response.status == 200, await response.text()
    return response


async def test_tombstones_null_keys_null_header_values_and_timestamps_round_trip(
    cluster: FakeCluster, n1: Node
) -> None:
    cluster.add_topic("t", 1)
    await _post(
        n1,
        "/topics/t/partitions/0",
        [
            {"key": "user-1", "value": None, "timestamp": 1_000},  # a tombstone
            {"key": None, "value": {"a": 1}, "headers": [{"key": "h", "value": None}], "timestamp": 2_000},
        ],
    )
    await _post(
        n1,
        "/topics/t/partitions/0",
        [
            {"key": _b64(b"\x00k"), "value": None, "headers": {"n": None, "b": _b64(b"\xff")}},
            {"key": None, "value": _b64(b""), "timestamp": 0},
        ],
        BINARY_V2,
    )
    before = int(time.time() * 1000)

    rows = await (await _fetch(n1, JSON_V2)).json()
    assert [(r["offset"], r["key"], r["value"], r["format"]) for r in rows] == [
        (0, "user-1", None, "json"),
        (1, None, {"a": 1}, "json"),
        (2, _b64(b"\x00k"), None, "binary"),  # the key is not JSON text: the record is rendered binary
        (3, None, _b64(b""), "binary"),
    ]
    assert [r["timestamp"] for r in rows][:2] == [1_000, 2_000] and rows[3]["timestamp"] == 0
    assert before - 60_000 < rows[2]["timestamp"] <= before  # no timestamp given: the entry node's clock
    assert {r["timestamp_type"] for r in rows} == {"CreateTime"}
    assert rows[1]["headers"] == [{"key": "h", "value": None}]
    assert rows[2]["headers"] == [{"key": "n", "value": None}, {"key": "b", "value": _b64(b"\xff")}]

    binary = await (await _fetch(n1, BINARY_V2)).json()
    assert [(r["key"], r["value"]) for r in binary] == [
        (_b64(b'"user-1"'), None),
        (None, _b64(b'{"a":1}')),
        (_b64(b"\x00k"), None),
        (None, _b64(b"")),
    ]

    page = msgpack.unpackb(await (await _fetch(n1, COLUMNAR_MSGPACK)).read())
    assert page["values"] == [None, b'{"a":1}', None, b""]
    assert page["keys"] == [b'"user-1"', None, b"\x00k", None]
    assert page["headers"][1] == [["h", None]] and page["timestamp_types"] == [0, 0, 0, 0]
    texted = json.loads(await (await _fetch(n1, COLUMNAR_JSON)).read())
    assert texted["values"][0] is None and texted["headers"][2] == [["n", None], ["b", _b64(b"\xff")]]

    raw = await (await _fetch(n1, RECORD_BATCH)).read()
    records = [r for batch in split_batches(raw) for r in decode_batch(batch).records]
    assert [(r.key, r.value, r.headers) for r in records] == [
        (b'"user-1"', None, ()),
        (None, b'{"a":1}', (("h", None),)),
        (b"\x00k", None, (("n", None), ("b", b"\xff"))),
        (None, b"", ()),
    ]


async def test_a_log_append_time_topic_stamps_the_leaders_clock(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1, configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    await _post(n1, "/topics/t/partitions/0", [{"value": 1, "timestamp": 5}])
    batch = encode_batch(0, [ProducerRecord(b"2", timestamp_ms=6)], 0, 0)
    response = await n1.client.post(
        "/topics/t/partitions/0", data=batch, headers={"Content-Type": RECORD_BATCH}
    )
    assert response.status == 200, await response.text()
    rows = await (await _fetch(n1, JSON_V2)).json()
    assert [r["timestamp_type"] for r in rows] == ["LogAppendTime"] * 2
    assert all(before <= r["timestamp"] <= int(time.time() * 1000) for r in rows)
    raw = await (await _fetch(n1, RECORD_BATCH)).read()
    stored = [decode_batch(b) for b in split_batches(raw)]
    assert {b.header.timestamp_type for b in stored} == {TimestampType.LOG_APPEND_TIME}
    stamps = [r["timestamp"] for r in rows]
    assert [r.timestamp_ms for b in stored for r in b.records] == stamps

    binary = await (await _fetch(n1, BINARY_V2)).json()
    assert [(r["timestamp"], r["timestamp_type"]) for r in binary] == [(t, "LogAppendTime") for t in stamps]
    page = msgpack.unpackb(await (await _fetch(n1, COLUMNAR_MSGPACK)).read())
    assert (page["timestamps"], page["timestamp_types"]) == (stamps, [1, 1])
    texted = json.loads(await (await _fetch(n1, COLUMNAR_JSON)).read())
    assert (texted["timestamps"], texted["timestamp_types"]) == (stamps, [1, 1])


def test_every_fetch_flavour_renders_a_stamped_batchs_records_at_its_stamp() -> None:
    """A LogAppendTime batch as a leader stores it: its records keep the CreateTimes the producer gave
    them, and every reader must show the batch's stamp instead (Kafka reads max_timestamp for all)."""
    created = [
        ProducerRecord(b"%d" % i, key=None, headers=(("n", None),), timestamp_ms=5 + i) for i in range(3)
    ]
    batch = with_log_append_time(encode_batch(7, created, 2, 0, compression=Compression.ZSTD), 1_800_000)
    records = decode_fetched(batch, 8)  # from the batch's second record, as a fetch at offset 8
    assert [(r.offset, r.timestamp_ms, r.timestamp_type) for r in records] == [
        (8, 1_800_000, TimestampType.LOG_APPEND_TIME),
        (9, 1_800_000, TimestampType.LOG_APPEND_TIME),
    ]
    for flavour in Flavour:
        rows = json.loads(records_json([("t", 0, records)], flavour))
        assert [(r["offset"], r["timestamp"], r["timestamp_type"]) for r in rows] == [
            (8, 1_800_000, "LogAppendTime"),
            (9, 1_800_000, "LogAppendTime"),
        ], flavour
    for encoding in Columnar:
        encoded = encode_columnar("t", 0, records, encoding)
        page = msgpack.unpackb(encoded) if encoding is Columnar.MSGPACK else json.loads(encoded)
        assert (page["offsets"], page["timestamps"], page["timestamp_types"]) == (
            [8, 9],
            [1_800_000] * 2,
            [1, 1],
        ), encoding


async def test_offsets_by_timestamp_answer_the_first_record_at_or_after_it(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 1, replicas=[["n1"]])
    await _post(
        n1, "/topics/t/partitions/0", [{"value": i, "timestamp": ts} for i, ts in enumerate((100, 300, 200))]
    )
    expected = {
        0: (0, 100),
        100: (0, 100),
        101: (1, 300),  # offset order, as Kafka: the first record whose timestamp is at or after it
        250: (1, 300),
        300: (1, 300),
        301: (None, None),
    }
    for node in (n1, n2):  # n2 holds no replica: the leader answers through it
        for timestamp, (offset, record_timestamp) in expected.items():
            response = await node.client.get(f"/topics/t/partitions/0/offsets?timestamp={timestamp}")
            assert response.status == 200, await response.text()
            assert await response.json() == {
                "timestamp": timestamp,
                "offset": offset,
                "record_timestamp": record_timestamp,
            }
            assert response.headers["X-Raftlog-Leader"] == "n1"
    for bad in ("-1", "x", "1.5"):
        response = await n1.client.get(f"/topics/t/partitions/0/offsets?timestamp={bad}")
        assert response.status == 400 and "timestamp" in (await response.json())["message"]
    plain = await (await n1.client.get("/topics/t/partitions/0/offsets")).json()
    assert plain == {"beginning_offset": 0, "end_offset": 3}


async def test_the_record_batch_type_of_the_old_format_is_refused_naming_the_new_one(
    cluster: FakeCluster, n1: Node
) -> None:
    cluster.add_topic("t", 1)
    batch = encode_batch(0, [ProducerRecord(b"v")], 0, 0)
    for path in ("/topics/t/partitions/0", "/topics/t"):
        response = await n1.client.post(path, data=batch, headers={"Content-Type": LEGACY_RECORD_BATCH})
        body = await response.json()
        assert response.status == 415 and body["error_code"] == 41501 and RECORD_BATCH in body["message"]
    response = await n1.client.get(
        "/topics/t/partitions/0/records?offset=0", headers={"Accept": LEGACY_RECORD_BATCH}
    )
    body = await response.json()
    assert response.status == 406 and body["error_code"] == 40601 and RECORD_BATCH in body["message"]
    assert cluster.partitions[("t", 0)].records == []


async def test_a_missing_value_is_refused_and_null_is_a_tombstone(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    response = await n1.client.post("/topics/t", json={"records": [{"key": "k"}]})
    body = await response.json()
    assert response.status == 400 and "null for a tombstone" in body["message"]
    assert cluster.partitions[("t", 0)].records == []
