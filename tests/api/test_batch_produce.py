"""Producing a record batch the client encoded (Content-Type application/vnd.raftlog.batch.v2, Kafka's
RecordBatch v2): the same
answer as a JSON produce, the records exactly as sent, idempotent retries, forwarding to the leader, and
every malformed batch refused with a 4xx that names the problem while nothing is written."""

from __future__ import annotations

import json
from typing import Any

import crc32c
from fake_node import FakeCluster
from harness import Harness, Node

from partitions.names import INTERNAL_TOPICS
from raftlog.storage.batch import Compression, ProducerRecord, encode_batch
from raftlog.storage.batch_reads import decode_batch, split_batches
from raftlog_client.client import Message, RaftlogClient
from raftlog_contract import BINARY_V2, RECORD_BATCH

BATCH_HEADERS = {"Content-Type": RECORD_BATCH}


async def error_of(response: Any, status: int, code: int, words: str) -> None:
    text = await response.text()
    assert response.status == status, text
    body = json.loads(text)
    assert body["error_code"] == code and words in body["message"], body


async def test_a_batch_is_appended_as_sent(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 2)
    records = [
        ProducerRecord(b"\x00\xff", key=b"k", headers=(("h", b"\x01"), ("h", b"2")), timestamp_ms=1_000),
        ProducerRecord(b"", timestamp_ms=999),
    ]
    batch = encode_batch(0, records, 0, 0)
    response = await n1.client.post("/topics/t/partitions/1", data=batch, headers=BATCH_HEADERS)
    assert response.status == 200, await response.text()
    assert await response.json() == {"partition": 1, "base_offset": 0, "count": 2}
    assert response.headers["X-Raftlog-Leader"] == "n1"
    stored = cluster.partitions[("t", 1)].records
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in stored] == [
        (0, 1_000, b"k", b"\x00\xff", (("h", b"\x01"), ("h", b"2"))),
        (1, 999, None, b"", ()),
    ]


async def test_a_retried_batch_gets_its_original_offsets(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    first = encode_batch(0, [ProducerRecord(b"a"), ProducerRecord(b"b")], 0, 5, producer_id=42, sequence=0)
    second = encode_batch(0, [ProducerRecord(b"c")], 0, 5, producer_id=42, sequence=1)
    answers = []
    for body in (first, second, first):
        response = await n1.client.post("/topics/t/partitions/0", data=body, headers=BATCH_HEADERS)
        answer = await response.json()
        answers.append([answer["base_offset"] + i for i in range(answer["count"])])
    assert answers == [[0, 1], [2], [0, 1]]
    assert [r.value for r in cluster.partitions[("t", 0)].records] == [b"a", b"b", b"c"]


async def test_a_batch_sent_to_a_follower_is_forwarded_to_the_leader(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])
    batch = encode_batch(0, [ProducerRecord(b"via n2")], 0, 7)
    response = await n2.client.post("/topics/t/partitions/0", data=batch, headers=BATCH_HEADERS)
    assert response.status == 200, await response.text()
    assert response.headers["X-Raftlog-Leader"] == "n1"
    assert [r.value for r in cluster.partitions[("t", 0)].records] == [b"via n2"]


def _restamped(batch: bytes, at: int, value: bytes) -> bytes:
    """``batch`` with ``value`` written at byte ``at`` and its CRC-32C computed again (so only that
    change is wrong)."""
    changed = bytearray(batch)
    changed[at : at + len(value)] = value
    changed[17:21] = crc32c.crc32c(bytes(changed[21:])).to_bytes(4, "big")
    return bytes(changed)


async def test_malformed_batches_are_422_and_write_nothing(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    good = encode_batch(0, [ProducerRecord(b"v")], 0, 1)
    damaged = good[:-1] + bytes([good[-1] ^ 1])
    zstd = encode_batch(0, [ProducerRecord(b"value " * 50)] * 3, 0, 1, compression=Compression.ZSTD)
    cases = [
        (b"", "need 61 header bytes"),
        (b'{"records": []}', "need 61 header bytes"),
        (damaged, "crc32c mismatch"),
        (good[:-1], "header says"),
        (good[:16] + b"\x01" + good[17:], "magic 1"),
        (_restamped(good, 22, b"\x05"), "unknown compression codec 5"),
        (_restamped(zstd, len(zstd) - 8, b"\x00\x01\x02"), "records do not decode (zstd)"),
        (_restamped(good, 22, b"\x10"), "transactional"),
        (encode_batch(0, [ProducerRecord(b"v")], 0, 2**62), "must be >= 0, <="),  # far in the future
    ]
    for body, words in cases:
        response = await n1.client.post("/topics/t/partitions/0", data=body, headers=BATCH_HEADERS)
        await error_of(response, 422, 42201, words)
    assert cluster.partitions[("t", 0)].records == []


async def test_a_kafka_producers_base_offset_and_leader_epoch_are_overwritten(
    cluster: FakeCluster, n1: Node
) -> None:
    """A Kafka producer sends base offset 0 and leader epoch -1; whatever it sends, the leader stamps both."""
    cluster.add_topic("t", 1)
    for base_offset, epoch in ((0, -1), (7, 3)):
        batch = _restamped(
            encode_batch(base_offset, [ProducerRecord(b"v")], 0, 1), 12, epoch.to_bytes(4, "big", signed=True)
        )
        response = await n1.client.post("/topics/t/partitions/0", data=batch, headers=BATCH_HEADERS)
        assert response.status == 200, await response.text()
    assert [r.offset for r in cluster.partitions[("t", 0)].records] == [0, 1]


async def test_batch_errors_of_the_partition_endpoint(cluster: FakeCluster, harness: Harness) -> None:
    cluster.add_topic("t", 1, configs={"max.message.bytes": 200})
    node = await harness.start(cluster, "n1")
    big = encode_batch(0, [ProducerRecord(b"x" * 300)], 0, 1)
    await error_of(
        await node.client.post("/topics/t/partitions/0", data=big, headers=BATCH_HEADERS), 413, 41301, "200"
    )
    small = encode_batch(0, [ProducerRecord(b"x")], 0, 1)
    await error_of(
        await node.client.post("/topics/t/partitions/4", data=small, headers=BATCH_HEADERS), 404, 40402, "4"
    )
    await error_of(
        await node.client.post("/topics/no/partitions/0", data=small, headers=BATCH_HEADERS), 404, 40401, "no"
    )
    await error_of(
        await node.client.post("/topics/t", data=small, headers=BATCH_HEADERS), 415, 41501, "one partition"
    )
    assert cluster.partitions[("t", 0)].records == []


async def test_the_client_produces_batches_idempotently(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 2)
    async with RaftlogClient([n1.url], backoff_s=0.001) as client:
        produced = await client.produce_batch(
            "t", 1, [Message(b"\x00raw", key="k", headers=[("h", "v")]), Message("two")]
        )
        assert [(p.partition, p.offset) for p in produced] == [(1, 0), (1, 1)]
        assert await client.produce_batch("t", 1, []) == []
        fetched = await client.fetch("t", 1, 0)
    assert [(r.key, r.value, r.headers) for r in fetched] == [
        (b"k", b"\x00raw", (("h", b"v"),)),
        (None, b"two", ()),
    ]


async def test_openapi_names_the_batch_media_type(n1: Node) -> None:
    document = await (await n1.client.get("/openapi.json")).json()
    content = document["paths"]["/topics/{topic}/partitions/{partition}"]["post"]["requestBody"]["content"]
    assert content[RECORD_BATCH] == {"schema": {"type": "string", "format": "binary"}}


async def test_a_fetch_may_ask_for_the_stored_batches(cluster: FakeCluster, n1: Node, n2: Node) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])
    await n1.client.post(
        "/topics/t/partitions/0",
        data=encode_batch(0, [ProducerRecord(b"a"), ProducerRecord(b"b", key=b"k")], 0, 5),
        headers=BATCH_HEADERS,
    )
    for node in (n1, n2):  # n2 forwards to the leader
        response = await node.client.get(
            "/topics/t/partitions/0/records?offset=1", headers={"Accept": RECORD_BATCH}
        )
        assert response.status == 200 and response.content_type == RECORD_BATCH
        assert response.headers["X-Raftlog-High-Watermark"] == "2"
        batches = [decode_batch(b) for b in split_batches(await response.read())]
        # as stored: the batch holding offset 1 begins at 0, and the reader skips what it did not ask for
        assert [(r.offset, r.key, r.value) for b in batches for r in b.records] == [
            (0, None, b"a"),
            (1, b"k", b"b"),
        ]
    empty = await n1.client.get("/topics/t/partitions/0/records?offset=2", headers={"Accept": RECORD_BATCH})
    assert empty.status == 200 and await empty.read() == b""
    await error_of(
        await n1.client.get("/topics/t/partitions/0/records?offset=9", headers={"Accept": RECORD_BATCH}),
        416,
        41601,
        "9",
    )
    async with RaftlogClient([n2.url], backoff_s=0.001) as client:
        fetched = await client.fetch_batches("t", 0, 1)
    assert [(r.offset, r.key, r.value) for r in fetched] == [(1, b"k", b"b")]


async def test_nothing_is_produced_into_an_internal_topic(cluster: FakeCluster, n1: Node) -> None:
    """The groups', transactions' and schemas' own topics hold their commands: the one write refuses a
    producer's records there, whichever door (the Kafka door's: ``kafka_api/test_internal_topics.py``)."""
    batch = encode_batch(0, [ProducerRecord(b"x")], 0, 1)
    for topic in sorted(INTERNAL_TOPICS):
        cluster.add_topic(topic, 1)
        requests = [
            (f"/topics/{topic}/partitions/0", batch, RECORD_BATCH),
            (f"/topics/{topic}/partitions/0", b'{"records": [{"value": "eA=="}]}', BINARY_V2),
            (f"/topics/{topic}", b'{"records": [{"value": "eA=="}]}', BINARY_V2),
        ]
        for path, body, content_type in requests:
            response = await n1.client.post(path, data=body, headers={"Content-Type": content_type})
            await error_of(response, 400, 40001, f"Cannot append to internal topic {topic}")
        assert cluster.partitions[(topic, 0)].records == []
