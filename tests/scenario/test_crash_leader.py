"""Real processes: kill -9 a partition's leader during a produce workload, restart it, and check that
every acknowledged record is present exactly once, in acknowledgement order, on every replica's disk."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from raftlog.storage import Log, LogConfig
from raftlog.storage.batch import BatchFormatError
from raftlog.storage.errors import CorruptRecord
from raftlog.storage.inspect import dump_records
from raftlog.storage.segment import ScanStop
from raftlog_client.client import Message, RaftlogClient
from raftlog_client.errors import ClientError
from tests.waiting import wait_until

from .cluster import ProcessCluster

pytestmark = pytest.mark.slow


async def _produce_until(client: RaftlogClient, topic: str, prefix: str, count: int, acked: list[str]) -> int:
    """Produce ``count`` records one by one; remember those acknowledged. Returns how many failed."""
    failures = 0
    for i in range(count):
        value = f"{prefix}-{i}"
        try:
            await client.produce(topic, [Message(value)], partition=0)
            acked.append(value)
        except ClientError:
            failures += 1
    return failures


async def _leader(client: RaftlogClient, topic: str, timeout_s: float = 30.0) -> str:
    async def led() -> object:
        return (await client.cluster.partition_state(topic, 0)).get("leader")

    leader = await wait_until(led, f"a leader for {topic}/0", timeout_s, every_s=0.1, retrying=(ClientError,))
    return str(leader)


async def _all_in_sync(
    client: RaftlogClient, topic: str, high_watermark: int, timeout_s: float = 30.0
) -> None:
    deadline = time.monotonic() + timeout_s
    state: dict[str, object] = {}
    while time.monotonic() < deadline:
        try:
            state = await client.cluster.partition_state(topic, 0)
            replicas = state.get("replicas", [])
            if state.get("high_watermark") == high_watermark and all(
                r.get("in_sync") and r.get("lag") == 0
                for r in replicas  # type: ignore[union-attr]
            ):
                return
        except ClientError:
            pass
        await asyncio.sleep(0.2)
    raise AssertionError(f"replicas not back in sync within {timeout_s} s: {state}")


def _on_disk(cluster: ProcessCluster, node_id: str) -> list[str]:
    """What a running node's replica of events/0 holds on disk (read-only, CRC-checked)."""
    logs_dir = os.path.join(cluster.root, node_id, "logs")
    try:
        [partition_dir] = [d for d in os.listdir(logs_dir) if d.startswith("events-0.")]
        return [r.value.decode() for r in dump_records(os.path.join(logs_dir, partition_dir))]
    except (OSError, ValueError, CorruptRecord, BatchFormatError, ScanStop):
        return []  # mid-write or not created yet: look again


def test_acked_records_survive_a_leader_crash(cluster: ProcessCluster) -> None:
    async def scenario() -> tuple[list[str], str]:
        async with RaftlogClient(cluster.urls, retries=40, backoff_max_s=0.5, timeout_s=10) as client:
            await client.create_topic("events", partitions=1, replication_factor=3)
            acked: list[str] = []
            assert await _produce_until(client, "events", "before", 100, acked) == 0
            victim = await _leader(client, "events")
            cluster.kill(victim)
            survivors = [url for url in cluster.urls if url != cluster.url(victim)]
            async with RaftlogClient(survivors, retries=60, backoff_max_s=0.5, timeout_s=10) as others:
                await _produce_until(others, "events", "during", 100, acked)
                cluster.start(victim)
                cluster.wait_ready([victim])
                await _produce_until(others, "events", "after", 50, acked)
                await _all_in_sync(others, "events", len(acked))
                fetched = await others.fetch("events", 0, 0, max_bytes=1 << 22)
                assert [r.value.decode() for r in fetched] == acked
                group_id = f"events-0.{(await others.topic('events')).get('topic_id', '')}"
            return acked, group_id

    acked, _ = asyncio.run(asyncio.wait_for(scenario(), 240))
    assert len(acked) >= 200, f"only {len(acked)} of 250 produces acknowledged"
    # followers apply the last entries when the next heartbeat tells them the commit index
    deadline = time.monotonic() + 30
    for node in cluster.nodes:
        while _on_disk(cluster, node.node_id) != acked and time.monotonic() < deadline:
            time.sleep(0.1)
    cluster.stop_all()
    # every replica's log on disk holds exactly the acknowledged records, dense from offset 0
    for node in cluster.nodes:
        logs_dir = os.path.join(cluster.root, node.node_id, "logs")
        [partition_dir] = [d for d in os.listdir(logs_dir) if d.startswith("events-0.")]
        with Log.open(os.path.join(logs_dir, partition_dir), LogConfig()) as log:
            records = log.read(0, 1 << 24)
        assert [r.offset for r in records] == list(range(len(records)))
        assert [r.value.decode() for r in records] == acked, f"replica on {node.node_id} differs"
