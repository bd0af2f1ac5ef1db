"""A replica that was down while the leader compacted its Raft journal gets a snapshot instead of the
entries, and its recovery task copies the missing records from a peer's log (off the driver thread):
afterwards its log equals the leader's, and meanwhile its reads never go past what its log holds."""

from __future__ import annotations

import asyncio
import pathlib
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from in_process import Served, configs, controller_leader, fetch, http_of, partition_leader, produce, until

from partitions.broker import node as node_module
from partitions.errors import ReplicaRecovering
from raftlog.storage import ProducerRecord
from raftlog.storage.batch import Compression, TimestampType, encode_batch
from raftlog.storage.batch_reads import decode_batch


async def test_a_replica_behind_a_compacted_journal_copies_records_from_a_peer(
    tmp_path: pathlib.Path,
) -> None:
    node_configs = [replace(c, core=replace(c.core, compaction_min_entries=20)) for c in configs(tmp_path)]
    served = [Served(c) for c in node_configs]
    await asyncio.gather(*(s.start() for s in served))
    try:
        nodes = [s.node for s in served]
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        await controller.topic_changes.create_topic("t", 1, 3, {"internal.segment.bytes": 4096})
        leader = await until(lambda: partition_leader(nodes, "t"), what="partition leader")
        laggard = next(s for s in served if s.node is not leader)
        await produce(leader.data, "t", 0, [ProducerRecord(b"early")], None, None, 5000)
        await laggard.stop()
        for i in range(150):  # far past compaction_min_entries: the leader's journal no longer has them
            await produce(leader.data, "t", 0, [ProducerRecord(b"r%d" % i)], None, None, 5000)
        expected = [r.value for r in await fetch(leader, "t", 0, 0, 1 << 22, 0)]
        assert len(expected) == 151

        restarted = Served(laggard.config)
        served[served.index(laggard)] = restarted
        await restarted.start()
        group_id = leader.frontend.topic("t").group_id(0)

        def recovered() -> bool:
            replica = restarted.node.replicas.get(group_id)
            return (
                replica is not None
                and replica.machine.high_watermark >= 151
                and not replica.machine.behind
                and restarted.node.metadata.metrics()["recovery_replicas"] == 0
            )

        await until(recovered, timeout_s=30, what="restarted replica recovered")
        replica = restarted.node.replicas.get(group_id)
        assert [r.value for r in replica.log.read(0, 1 << 22, 151)] == expected
        metrics = restarted.node.metadata.metrics()
        assert metrics["recovery_completed"] >= 1, "the records came through a recovery, not the journal"
        assert metrics["recovery_bytes"] >= replica.log.size_bytes // 2
        # and the group goes on: a new record reaches the recovered replica through its apply
        await produce(leader.data, "t", 0, [ProducerRecord(b"after")], None, None, 5000)
        await until(lambda: replica.machine.high_watermark == 152, what="apply after recovery")
        assert [r.value for r in replica.log.read(151, 1 << 20, 152)] == [b"after"]
    finally:
        await asyncio.gather(*(s.stop() for s in served), return_exceptions=True)


def record_model_batch(index: int) -> bytes:
    """A producer's batch of Kafka's record model: every codec in turn, tombstones, null keys, null header
    values; every other one with producer id, epoch and sequence."""
    records = [
        ProducerRecord(
            None if (index + j) % 4 == 0 else b"r%d-%d-" % (index, j) + b"v" * 60,
            key=None if (index + j) % 3 == 0 else b"k%d" % j,
            headers=(("trace", None),) if j % 2 == 0 else (),
            timestamp_ms=10_000 + index,
        )
        for j in range(1 + index % 3)
    ]
    producer = (77, index // 2) if index % 2 else (None, None)
    codec = list(Compression)[index % len(Compression)]
    return encode_batch(0, records, 0, 0, *producer, producer_epoch=1 if index % 2 else None,
                        compression=codec)  # fmt: skip


async def test_a_replica_recovers_record_model_batches_of_a_log_append_time_topic_byte_for_byte(
    tmp_path: pathlib.Path,
) -> None:
    node_configs = [replace(c, core=replace(c.core, compaction_min_entries=20)) for c in configs(tmp_path)]
    served = [Served(c) for c in node_configs]
    await asyncio.gather(*(s.start() for s in served))
    try:
        nodes = [s.node for s in served]
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        topic_configs = {"internal.segment.bytes": 4096, "message.timestamp.type": "LogAppendTime"}
        await controller.topic_changes.create_topic("t", 1, 3, topic_configs)
        leader = await until(lambda: partition_leader(nodes, "t"), what="partition leader")
        laggard = next(s for s in served if s.node is not leader)
        await leader.data.produce_batch("t", 0, record_model_batch(0), 5000)
        await laggard.stop()
        for i in range(1, 80):  # past compaction_min_entries: the leader's journal no longer has them
            await leader.data.produce_batch("t", 0, record_model_batch(i), 5000)
        group_id = leader.frontend.topic("t").group_id(0)
        leader_log = leader.replicas.get(group_id).log
        end = leader_log.end_offset
        expected = [b.data for b in leader_log.read_batches(0, 1 << 30)]
        headers = [decode_batch(data).header for data in expected]
        assert {h.compression for h in headers} == set(Compression)
        assert {h.timestamp_type for h in headers} == {TimestampType.LOG_APPEND_TIME}
        assert {h.producer_id for h in headers} == {None, 77}

        restarted = Served(laggard.config)
        served[served.index(laggard)] = restarted
        await restarted.start()

        def recovered() -> bool:
            replica = restarted.node.replicas.get(group_id)
            return (
                replica is not None
                and replica.machine.high_watermark >= end
                and not replica.machine.behind
                and restarted.node.metadata.metrics()["recovery_replicas"] == 0
            )

        await until(recovered, timeout_s=30, what="restarted replica recovered")
        replica = restarted.node.replicas.get(group_id)
        assert restarted.node.metadata.metrics()["recovery_completed"] >= 1, "copied by a recovery"
        assert [b.data for b in replica.log.read_batches(0, 1 << 30)] == expected
        records = replica.log.read(0, 1 << 30, end)
        assert any(r.value is None for r in records) and any(r.key is None for r in records)
        assert {r.timestamp_type for r in records} == {TimestampType.LOG_APPEND_TIME}
        # a retry of the producer's last batch appends nothing, on the recovered replica too (its dedup
        # window came with the snapshot); the next record lands at the same offset everywhere
        retry = await leader.data.produce_batch("t", 0, record_model_batch(79), 5000)
        assert retry.duplicate and leader_log.end_offset == end
        after = await produce(leader.data, "t", 0, [ProducerRecord(b"after", key=None)], None, None, 5000)
        assert after.base_offset == end
        await until(lambda: replica.machine.high_watermark == end + 1, what="apply after recovery")
        leader_batches = [b.data for b in leader_log.read_batches(0, 1 << 30)]
        assert [b.data for b in replica.log.read_batches(0, 1 << 30)] == leader_batches
    finally:
        await asyncio.gather(*(s.stop() for s in served), return_exceptions=True)


async def test_a_recovering_leader_serves_only_what_its_log_holds_and_accepts_writes(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Raft may elect a replica whose log is still recovering (its journal is current): it takes writes
    (apply advances its state; the records land on the others), answers fetches below its log's end,
    and answers a retriable ReplicaRecovering (503/50309) for the offsets it is still copying."""
    gate = asyncio.Event()  # holds every recovery fetch past the first chunk
    real_fetch = node_module.peer_fetch_batches

    def held_fetch(*args: Any, **kwargs: Any) -> Any:
        inner = real_fetch(*args, **kwargs)

        async def fetch(peer: str, offset: int, max_bytes: int) -> Any:
            if offset > 0:
                await gate.wait()
            return await inner(peer, offset, 1000)  # a few batches at a time

        return fetch

    monkeypatch.setattr(node_module, "peer_fetch_batches", held_fetch)
    node_configs = [replace(c, core=replace(c.core, compaction_min_entries=20)) for c in configs(tmp_path)]
    served = [Served(c) for c in node_configs]
    await asyncio.gather(*(s.start() for s in served))
    try:
        nodes = [s.node for s in served]
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        await controller.topic_changes.create_topic("t", 1, 3, {"internal.segment.bytes": 4096})
        leader = await until(lambda: partition_leader(nodes, "t"), what="partition leader")
        laggard = next(s for s in served if s.node is not leader)
        await produce(leader.data, "t", 0, [ProducerRecord(b"early")], None, None, 5000)
        await laggard.stop()
        for i in range(150):
            await produce(leader.data, "t", 0, [ProducerRecord(b"r%d" % i)], None, None, 5000)
        expected = [r.value for r in await fetch(leader, "t", 0, 0, 1 << 22, 0)]

        restarted = Served(laggard.config)
        served[served.index(laggard)] = restarted
        await restarted.start()
        node = restarted.node
        group_id = leader.frontend.topic("t").group_id(0)

        def part_copied() -> bool:
            replica = node.replicas.get(group_id)
            return replica is not None and replica.machine.behind and replica.log.end_offset > 0

        await until(part_copied, timeout_s=30, what="first chunk recovered")
        await leader.partition_admin.transfer_leadership("t", 0, node.node_id, 5000)
        await until(lambda: node.data.ready_leader("t", 0), what="the recovering replica leads")
        replica = node.replicas.get(group_id)
        log_end, high_watermark = replica.log.end_offset, replica.machine.high_watermark
        assert 0 < log_end < high_watermark == 151

        assert [r.value for r in await fetch(node, "t", 0, 0, 1 << 22, 0)] == expected[:log_end]
        with pytest.raises(ReplicaRecovering) as raised:
            await fetch(node, "t", 0, log_end, 1 << 20, 0)
        assert (raised.value.log_end_offset, raised.value.high_watermark) == (log_end, 151)
        with pytest.raises(ReplicaRecovering):
            await node.data.read_batches("t", 0, 150, 1 << 20)  # a peer asking it: only what its log has
        assert (await node.data.read_batches("t", 0, 0, 1 << 20)).data, "below its end it serves peers"
        async with aiohttp.ClientSession() as client:
            url = f"{http_of(restarted.config)}/topics/t/partitions/0/records?offset={log_end}"
            async with client.get(url) as answer:
                assert answer.status == 503 and (await answer.json())["error_code"] == 50309
        assert (
            node.metadata.metrics()["recovery_replicas"] == 1
            and node.metadata.metrics()["recovery_offsets_missing"] > 0
        )

        written = await produce(node.data, "t", 0, [ProducerRecord(b"while recovering")], None, None, 5000)
        assert written.base_offset == 151, "a recovering leader takes writes at its high watermark"

        gate.set()
        await until(lambda: not replica.machine.behind, timeout_s=30, what="recovered")
        assert [r.value for r in await fetch(node, "t", 0, 0, 1 << 22, 0)] == [*expected, b"while recovering"]
    finally:
        gate.set()
        await asyncio.gather(*(s.stop() for s in served), return_exceptions=True)
