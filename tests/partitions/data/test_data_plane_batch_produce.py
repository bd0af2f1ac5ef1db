"""A producer's own record batch on real nodes: appended as sent, on every replica, deduplicated by the
producer id, epoch and sequence in its header (on a LogAppendTime topic too); a malformed one is refused
before anything is replicated, over HTTP with a 422 naming the problem, whichever node it entered."""

from __future__ import annotations

import asyncio
import pathlib
import time

import aiohttp
import crc32c
import pytest
from in_process import Served, configs, controller_leader, http_of, partition_leader, produce, until

from partitions.broker.node import Node
from raftlog.consensus.errors import NotLeader
from raftlog.storage import ProducerRecord
from raftlog.storage.batch import Compression, TimestampType, encode_batch, with_log_append_time
from raftlog.storage.batch_reads import decode_batch, split_batches
from raftlog.storage.errors import InvalidRecord, RecordBatchTooLarge, RecordTooLarge
from raftlog.storage.log import wall_clock_ms
from raftlog_contract import RECORD_BATCH


async def test_a_producer_batch_is_replicated_as_sent_and_deduplicated(cluster: list[Node]) -> None:
    controller = await until(lambda: controller_leader(cluster), what="controller leader")
    configs = {"max.message.bytes": 4096, "internal.segment.bytes": 2048}
    metadata = await controller.topic_changes.create_topic("events", 1, 3, configs)
    await until(lambda: all("events" in n.metadata.topics() for n in cluster), what="topic on every node")
    leader = await until(lambda: partition_leader(cluster, "events"), what="partition leader")

    records = [ProducerRecord(b"a", key=b"k", headers=(("h", b"1"),), timestamp_ms=50), ProducerRecord(b"b")]
    batch = encode_batch(0, records, 0, 60, producer_id=9, sequence=0)
    first = await leader.data.produce_batch("events", 0, batch, 5000)
    retry = await leader.data.produce_batch("events", 0, batch, 5000)
    assert (first.base_offset, first.end_offset, first.duplicate) == (0, 2, False)
    assert (retry.base_offset, retry.end_offset, retry.duplicate) == (0, 2, True)
    assert retry.log_append_time_ms == first.log_append_time_ms, "a duplicate answers its first stamp"

    refused = [
        encode_batch(0, [ProducerRecord(b"x" * 5000)], 0, 60),  # over max.message.bytes
        encode_batch(0, [ProducerRecord(b"y" * 3000)], 0, 60),  # within it, over segment.bytes
        batch[:-1] + bytes([batch[-1] ^ 1]),  # damaged
        with_log_append_time(encode_batch(0, records, 0, 60), 70),  # the leader stamps LogAppendTime
    ]
    expected = (RecordTooLarge, RecordBatchTooLarge, InvalidRecord, InvalidRecord)
    for bad, error in zip(refused, expected, strict=True):
        with pytest.raises(error):
            await leader.data.produce_batch("events", 0, bad, 5000)
    follower = next(n for n in cluster if n is not leader)
    with pytest.raises(NotLeader):
        await follower.data.produce_batch("events", 0, encode_batch(0, records, 0, 60), 5000)

    # a fetch of the stored batches from offset 1 gets the whole batch holding it, as stored
    fetched = await leader.data.fetch_batches("events", 0, 1, 1 << 20, 0)
    [stored_batch] = list(split_batches(fetched.data))
    decoded = decode_batch(stored_batch)
    assert (decoded.header.base_offset, [r.value for r in decoded.records]) == (0, [b"a", b"b"])
    assert (await leader.data.fetch_batches("events", 0, 2, 1 << 20, 0)).data == b""
    with pytest.raises(NotLeader):
        await follower.data.fetch_batches("events", 0, 0, 1 << 20, 0)

    for node in cluster:
        replica = node.replicas.get(metadata.group_id(0))
        await until(lambda r=replica: r.machine.high_watermark == 2, what=f"{node.node_id} caught up")
        stored = replica.log.read(0, 1 << 20, 2)
        assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in stored] == [
            (0, 50, b"k", b"a", (("h", b"1"),)),
            (1, 60, None, b"b", ()),
        ]
        # stored as sent: only the base offset (bytes 0-7) and the leader epoch (12-15) are stamped
        [on_disk] = replica.log.read_batches(0, 1 << 20)
        assert on_disk.data[8:12] + on_disk.data[16:] == batch[8:12] + batch[16:]
        assert decode_batch(on_disk.data).header.term == replica.group.status().term


async def test_a_clients_fetch_counts_the_offsets_it_read_and_a_peers_catch_up_read_does_not(
    cluster: list[Node],
) -> None:
    controller = await until(lambda: controller_leader(cluster), what="controller leader")
    await controller.topic_changes.create_topic("counted", 1, 3, {})
    await until(lambda: all("counted" in n.metadata.topics() for n in cluster), what="topic on every node")
    leader = await until(lambda: partition_leader(cluster, "counted"), what="partition leader")
    for start in (0, 3):
        batch = encode_batch(start, [ProducerRecord(b"r")] * 3, 0, 60)
        await leader.data.produce_batch("counted", 0, batch, 5000)
    counters = leader.data.counters
    before = counters["fetched_records"]
    await leader.data.fetch_batches("counted", 0, 1, 1 << 20, 0)  # both batches, from offset 1: 5 offsets
    assert counters["fetched_records"] - before == 5
    await leader.data.fetch_stable("counted", 0, 4, 1 << 20, 0)  # the second batch, from offset 4: 2
    assert counters["fetched_records"] - before == 7
    await leader.data.read_batches("counted", 0, 0, 1 << 20)  # a replica catching up: no client's fetch
    await leader.data.fetch_batches("counted", 0, 6, 1 << 20, 0)  # at the end: nothing read
    assert counters["fetched_records"] - before == 7


async def test_the_topics_codec_and_log_append_time_are_applied_by_the_leader(
    cluster: list[Node],
) -> None:
    """``compression.type`` zstd recompresses a producer's gzip batch and compresses records produced one
    by one; LogAppendTime stamps the leader's clock; every replica stores the same bytes; offsets by
    timestamp find the first record at or after a time."""
    controller = await until(lambda: controller_leader(cluster), what="controller leader")
    configs = {"compression.type": "zstd", "message.timestamp.type": "LogAppendTime"}
    metadata = await controller.topic_changes.create_topic("stamped", 1, 3, configs)
    await until(lambda: all("stamped" in n.metadata.topics() for n in cluster), what="topic on every node")
    leader = await until(lambda: partition_leader(cluster, "stamped"), what="partition leader")

    before = int(time.time() * 1000)
    gzip = encode_batch(
        0, [ProducerRecord(b"g" * 200, timestamp_ms=5)] * 4, 0, 60, compression=Compression.GZIP
    )
    await leader.data.produce_batch("stamped", 0, gzip, 5000)
    await produce(
        leader.data, "stamped", 0, [ProducerRecord(None, key=b"gone", timestamp_ms=6)], None, None, 5000
    )
    after = int(time.time() * 1000)

    stored: dict[str, list[bytes]] = {}
    for node in cluster:
        replica = node.replicas.get(metadata.group_id(0))
        await until(lambda r=replica: r.machine.high_watermark == 5, what=f"{node.node_id} caught up")
        stored[node.node_id] = [b.data for b in replica.log.read_batches(0, 1 << 20)]
    assert len({tuple(batches) for batches in stored.values()}) == 1  # identical bytes on every replica
    decoded = [decode_batch(data) for data in next(iter(stored.values()))]
    assert [d.header.compression for d in decoded] == [Compression.ZSTD, Compression.ZSTD]
    assert {d.header.timestamp_type for d in decoded} == {TimestampType.LOG_APPEND_TIME}
    records = [r for d in decoded for r in d.records]
    assert [r.value for r in records] == [b"g" * 200] * 4 + [None]
    assert all(before <= r.timestamp_ms <= after for r in records)
    assert records[4].key == b"gone" and records[3].timestamp_ms <= records[4].timestamp_ms

    first = await leader.data.offset_for_timestamp("stamped", 0, 0)
    assert first is not None and (first.offset, first.timestamp_ms) == (0, records[0].timestamp_ms)
    last = await leader.data.offset_for_timestamp("stamped", 0, records[4].timestamp_ms)
    assert last is not None and last.offset == (4 if records[4].timestamp_ms > records[3].timestamp_ms else 0)
    assert await leader.data.offset_for_timestamp("stamped", 0, after + 1) is None


async def test_a_retried_idempotent_batch_to_a_log_append_time_topic_gets_its_original_offsets(
    cluster: list[Node],
) -> None:
    """The leader stamps every batch of a LogAppendTime topic, so a retry's bytes differ from the stored
    batch's; the retry is still the same producer id, epoch and sequence: answered with the original
    offsets and the first append's stamp (as Kafka answers a duplicate), appending nothing, leaving the
    first stamp as it was, on every replica. Records produced one by one with a producer pair (the HTTP
    API's idempotence) alike."""
    controller = await until(lambda: controller_leader(cluster), what="controller leader")
    configs = {"message.timestamp.type": "LogAppendTime"}
    metadata = await controller.topic_changes.create_topic("stamped", 1, 3, configs)
    await until(lambda: all("stamped" in n.metadata.topics() for n in cluster), what="topic on every node")
    leader = await until(lambda: partition_leader(cluster, "stamped"), what="partition leader")

    records = [ProducerRecord(b"a", key=None, headers=(("h", None),), timestamp_ms=5), ProducerRecord(None)]
    first_batch = encode_batch(0, records, 0, 60, producer_id=9, sequence=0, producer_epoch=4)
    first = await leader.data.produce_batch("stamped", 0, first_batch, 5000)
    second = await leader.data.produce_batch(
        "stamped", 0, encode_batch(0, [ProducerRecord(b"c")], 0, 60, 9, 1, producer_epoch=4), 5000
    )
    assert (first.base_offset, first.end_offset, first.duplicate) == (0, 2, False)
    assert first.log_append_time_ms is not None and second.base_offset == 2
    one_by_one = [ProducerRecord(b"d", key=b"k"), ProducerRecord(None, key=None)]
    third = await produce(leader.data, "stamped", 0, one_by_one, 31, 0, 5000)
    assert (third.base_offset, third.end_offset, third.duplicate) == (3, 5, False)
    group_id = metadata.group_id(0)
    stored_before = [b.data for b in leader.replicas.get(group_id).log.read_batches(0, 1 << 20)]

    stamped = first.log_append_time_ms
    await until(lambda: wall_clock_ms() > stamped, what="the clock past the first stamp")  # a later stamp
    retry = await leader.data.produce_batch("stamped", 0, first_batch, 5000)
    assert (retry.base_offset, retry.end_offset, retry.duplicate) == (0, 2, True)
    assert retry.log_append_time_ms == first.log_append_time_ms, "a duplicate answers its first stamp"
    retry_one_by_one = await produce(leader.data, "stamped", 0, one_by_one, 31, 0, 5000)
    assert (retry_one_by_one.base_offset, retry_one_by_one.end_offset) == (3, 5)
    assert retry_one_by_one.duplicate
    # whichever replica leads now (one loop under a loaded machine may miss an election timeout)
    leader = await until(lambda: partition_leader(cluster, "stamped"), what="partition leader")
    assert leader.data.offsets_now("stamped", 0).high_watermark == 5

    next_one = await leader.data.produce_batch(
        "stamped", 0, encode_batch(0, [ProducerRecord(b"e")], 0, 60, 9, 2, producer_epoch=4), 5000
    )
    assert next_one.base_offset == 5, "the retries took no offset"
    for node in cluster:
        replica = node.replicas.get(group_id)
        await until(lambda r=replica: r.machine.high_watermark == 6, what=f"{node.node_id} caught up")
        batches = [b.data for b in replica.log.read_batches(0, 1 << 20)]
        assert batches[:3] == stored_before, f"{node.node_id}: a retry changed what was stored"
        stamps = {r.timestamp_type for b in batches for r in decode_batch(b).records}
        assert stamps == {TimestampType.LOG_APPEND_TIME}
        assert [r.value for r in replica.log.read(0, 1 << 20, 6)] == [b"a", None, b"c", b"d", None, b"e"]


async def test_a_duplicate_stored_before_the_topic_became_log_append_time_answers_no_stamp(
    cluster: list[Node],
) -> None:
    """A retry that reaches a topic turned LogAppendTime after its first append is a duplicate as ever;
    its batch was stored with the producer's times, so there is no stamp to answer (Kafka's -1), not the
    producer's time taken for one."""
    controller = await until(lambda: controller_leader(cluster), what="controller leader")
    group_id = (await controller.topic_changes.create_topic("turned", 1, 3, {})).group_id(0)
    await until(lambda: all("turned" in n.metadata.topics() for n in cluster), what="topic on every node")
    leader = await until(lambda: partition_leader(cluster, "turned"), what="partition leader")
    batch = encode_batch(0, [ProducerRecord(b"a", timestamp_ms=5)], 0, 60, producer_id=3, sequence=0)
    first = await leader.data.produce_batch("turned", 0, batch, 5000)
    assert (first.duplicate, first.log_append_time_ms) == (False, None)

    await controller.topic_changes.alter_configs("turned", {"message.timestamp.type": "LogAppendTime"})
    await until(
        lambda: leader.replicas.get(group_id).log.config.timestamp_type == "LogAppendTime",
        what="the leader's log reconfigured",
    )
    retry = await leader.data.produce_batch("turned", 0, batch, 5000)
    assert (retry.base_offset, retry.duplicate, retry.log_append_time_ms) == (0, True, None)
    stamped = await leader.data.produce_batch(
        "turned", 0, encode_batch(0, [ProducerRecord(b"b")], 0, 60, producer_id=3, sequence=1), 5000
    )
    assert stamped.base_offset == 1 and stamped.log_append_time_ms is not None


def _with_crc(batch: bytes | bytearray) -> bytes:
    """``batch`` with its CRC-32C computed again over what it holds now, so only the change made is wrong."""
    fixed = bytearray(batch)
    fixed[17:21] = crc32c.crc32c(bytes(fixed[21:])).to_bytes(4, "big")
    return bytes(fixed)


def malformed_batches() -> list[tuple[str, bytes, str]]:
    """(what is wrong, the batch, words its refusal must hold): each wrong in one way only."""
    good = encode_batch(0, [ProducerRecord(b"v" * 50, key=b"k")], 0, 1)
    length = int.from_bytes(good[8:12], "big")
    zstd = encode_batch(0, [ProducerRecord(b"value " * 50)] * 3, 0, 1, compression=Compression.ZSTD)
    garbage_zstd = bytearray(zstd[:61] + bytes(range(7, 207)))  # a zstd body that is no zstd frame
    garbage_zstd[8:12] = (len(garbage_zstd) - 12).to_bytes(4, "big")
    transactional = bytearray(good)
    transactional[22] |= 0x10
    return [
        ("bad CRC", good[:-1] + bytes([good[-1] ^ 1]), "crc32c mismatch"),
        ("length past the end", good[:8] + (length + 5).to_bytes(4, "big") + good[12:], "header says"),
        ("length short of the end", good + b"\x00" * 3, "header says"),
        ("length below a header", good[:8] + (10).to_bytes(4, "big") + good[12:], "shorter than a header"),
        ("torn", good[:-1], "header says"),
        ("unknown magic", good[:16] + b"\x01" + good[17:], "magic 1"),
        ("unsupported codec", _with_crc(good[:22] + b"\x06" + good[23:]), "unknown compression codec 6"),
        ("corrupt zstd body", _with_crc(garbage_zstd), "records do not decode (zstd)"),
        ("transactional", _with_crc(transactional), "transactional"),
    ]


async def test_malformed_batches_are_422_naming_the_problem_and_change_no_end_offset(
    tmp_path: pathlib.Path,
) -> None:
    """Over HTTP on real nodes, sent to the leader and to a follower (which forwards it): every malformed
    batch is a 422 (42201) whose message names what is wrong, and the partition's end offset stays."""
    served = [Served(c) for c in configs(tmp_path)]
    await asyncio.gather(*(s.start() for s in served))
    try:
        nodes = [s.node for s in served]
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        metadata = await controller.topic_changes.create_topic("t", 1, 3, {})
        leader = await until(lambda: partition_leader(nodes, "t"), what="partition leader")
        await produce(leader.data, "t", 0, [ProducerRecord(b"before")], None, None, 5000)
        entries = [
            next(s for s in served if s.node is leader),
            next(s for s in served if s.node is not leader),
        ]
        async with aiohttp.ClientSession() as client:
            for entry in entries:
                url = f"{http_of(entry.config)}/topics/t/partitions/0"
                for what, batch, words in malformed_batches():
                    case = (entry.node.node_id, what)
                    async with client.post(url, data=batch, headers={"Content-Type": RECORD_BATCH}) as answer:
                        body = await answer.json()
                        assert (answer.status, body["error_code"]) == (422, 42201), (case, body)
                        assert words in body["message"], (case, body)
                    async with client.get(f"{url}/offsets") as answer:
                        assert (await answer.json())["end_offset"] == 1, f"{what} changed the end offset"
        for node in nodes:
            replica = node.replicas.get(metadata.group_id(0))
            await until(lambda r=replica: r.machine.high_watermark == 1, what=f"{node.node_id} caught up")
            assert [r.value for r in replica.log.read(0, 1 << 20, 2)] == [b"before"]
    finally:
        await asyncio.gather(*(s.stop() for s in served), return_exceptions=True)
