"""A producer's own record batch on real nodes: appended as sent, on every replica, deduplicated by the
producer id and sequence in its header; a malformed one is refused before anything is replicated."""

from __future__ import annotations

import pytest
from test_node import cluster, controller_leader, partition_leader, until  # noqa: F401 (fixture)

from partitions.node import Node
from raftlog.consensus.errors import NotLeader
from raftlog.storage import ProducerRecord
from raftlog.storage.batch import decode_batch, encode_batch, split_batches
from raftlog.storage.errors import InvalidRecord, RecordTooLarge


async def test_a_producer_batch_is_replicated_as_sent_and_deduplicated(cluster: list[Node]) -> None:  # noqa: F811
    controller = await until(lambda: controller_leader(cluster), what="controller leader")
    metadata = await controller.frontend.create_topic("events", 1, 3, {"max.message.bytes": 4096})
    await until(lambda: all("events" in n.metadata.topics() for n in cluster), what="topic on every node")
    leader = await until(lambda: partition_leader(cluster, "events"), what="partition leader")

    records = [ProducerRecord(b"a", key=b"k", headers=(("h", b"1"),), timestamp_ms=50), ProducerRecord(b"b")]
    batch = encode_batch(0, records, 0, 60, producer_id=9, sequence=0)
    first = await leader.data.produce_batch("events", 0, batch, 5000)
    retry = await leader.data.produce_batch("events", 0, batch, 5000)
    assert (first.base_offset, first.end_offset, first.duplicate) == (0, 2, False)
    assert (retry.base_offset, retry.end_offset, retry.duplicate) == (0, 2, True)

    refused = [
        encode_batch(0, [ProducerRecord(b"x" * 5000)], 0, 60),  # over max.message.bytes
        batch[:-1] + bytes([batch[-1] ^ 1]),  # damaged
        encode_batch(7, records, 0, 60),  # offsets are the leader's to assign
    ]
    for bad, error in zip(refused, (RecordTooLarge, InvalidRecord, InvalidRecord), strict=True):
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
