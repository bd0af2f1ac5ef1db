"""Real processes: kill -9 the leader of a consumer group's coordinator partition; the group carries on
behind the other nodes with its member and its committed offsets intact (nothing read again, nothing
skipped)."""

from __future__ import annotations

import asyncio
import time

import pytest

from raftlog_client.client import GroupConsumer, Message, RaftlogClient

from .cluster import ProcessCluster

pytestmark = pytest.mark.slow
TOPIC = "events"
DEADLINE_S = 60.0


async def _drain(consumer: GroupConsumer, expected: set[bytes], seen: list[bytes], started: float) -> None:
    while not expected <= set(seen):
        assert time.monotonic() - started < DEADLINE_S, f"missing {sorted(expected - set(seen))[:5]}"
        seen.extend(r.value for r in await consumer.poll(timeout_ms=300))
        await consumer.commit()


async def _coordinator_leader(client: RaftlogClient, group: str) -> str:
    _, body = await client._request("GET", "/v1/consumer-groups", repeatable=True)
    partition = next(g["coordinator_partition"] for g in body["groups"] if g["group"] == group)
    state = await client.cluster.partition_state("__consumer_groups", partition)
    return str(state["leader"])


async def _scenario(cluster: ProcessCluster) -> None:
    started = time.monotonic()
    async with RaftlogClient(cluster.urls, retries=30, backoff_max_s=1.0) as client:
        await client.create_topic(TOPIC, partitions=2, replication_factor=3)
        first = {b"a%d" % i for i in range(40)}
        for value in sorted(first):
            await client.produce(TOPIC, [Message(value, key=value)])
        consumer = GroupConsumer(client, "g", session_timeout_ms=10_000)
        await consumer.start([TOPIC])
        seen: list[bytes] = []
        await _drain(consumer, first, seen, started)
        committed = await client.committed_offsets("g", TOPIC)
        assert sum(committed.values()) == len(first)

        victim = await _coordinator_leader(client, "g")
        killed = time.monotonic()
        cluster.kill(victim)
        survivors = [n.http for n in cluster.nodes if n.node_id != victim]
        client.servers = survivors
        second = {b"b%d" % i for i in range(20)}
        for value in sorted(second):
            await client.produce(TOPIC, [Message(value, key=value)])
        await _drain(consumer, second, seen, started)
        recovered_s = time.monotonic() - killed
        print(f"coordinator {victim} killed: {len(second)} new records consumed {recovered_s:.2f} s later")

        assert consumer.rejoined == 0, "the member was lost with the coordinator"
        assert sorted(seen) == sorted(first | second), "a record was read twice or skipped"
        assert await _coordinator_leader(client, "g") != victim
        committed = await client.committed_offsets("g", TOPIC)
        assert sum(committed.values()) == len(first) + len(second)
        await consumer.close()


def test_coordinator_leader_killed_group_recovers_with_offsets(cluster: ProcessCluster) -> None:
    asyncio.run(_scenario(cluster))
