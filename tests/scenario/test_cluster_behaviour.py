"""Real node processes: any node serves any request; a paused leader does not stop the cluster; a crash
of every node at once keeps every record acknowledged before it."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from raftlog_client.client import Message, RaftlogClient
from raftlog_client.errors import ClientError

from .cluster import ProcessCluster

pytestmark = pytest.mark.slow
READS_AT_RESUME = 20  # asked of a paused leader just before it runs again (half end offsets, half reads)


def _unread_connections(port: int) -> int:
    """Connections to local ``port`` holding bytes its process has not read (``/proc/net/tcp`` rx_queue)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as rows:
                next(rows)
                for row in rows:
                    fields = row.split()
                    local_port = int(fields[1].rsplit(":", 1)[1], 16)
                    rx_queue = int(fields[4].split(":")[1], 16)
                    count += local_port == port and rx_queue > 0
        except FileNotFoundError:
            continue
    return count


async def _leader(client: RaftlogClient, topic: str, partition: int = 0, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            leader = (await client.cluster.partition_state(topic, partition)).get("leader")
            if leader:
                return str(leader)
        except ClientError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"no leader for {topic}/{partition} within {timeout_s} s")


def test_every_node_produces_and_fetches_the_same_records(cluster: ProcessCluster) -> None:
    async def scenario() -> None:
        async with RaftlogClient(cluster.urls[:1]) as admin:
            await admin.create_topic("t", partitions=3, replication_factor=3)
        expected: dict[int, list[str]] = {0: [], 1: [], 2: []}
        for url in cluster.urls:  # each node in turn is the only one a client talks to
            async with RaftlogClient([url], retries=20) as client:
                for partition in range(3):
                    value = f"via-{url.rsplit(':', 1)[1]}-p{partition}"
                    [produced] = await client.produce("t", [Message(value)], partition=partition)
                    assert produced.offset == len(expected[partition]), "offsets are dense per partition"
                    expected[partition].append(value)
        for url in cluster.urls:
            async with RaftlogClient([url], retries=20) as client:
                for partition in range(3):
                    fetched = await client.fetch("t", partition, 0)
                    assert [r.value.decode() for r in fetched] == expected[partition], f"via {url}"
                    assert [r.offset for r in fetched] == list(range(3))

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_a_paused_leader_does_not_stop_the_cluster(cluster: ProcessCluster) -> None:
    """...nor answers, once it runs again, a read older than what the new leader acknowledged while it
    was paused: it believes it leads until it hears the new term (RaftCore, "Reads")."""

    async def scenario() -> None:
        async with RaftlogClient(cluster.urls, retries=40, backoff_max_s=0.5, timeout_s=5) as client:
            await client.create_topic("t", partitions=1, replication_factor=3)
            acked = [m.offset for m in await client.produce("t", [Message("before")], partition=0)]
            paused = await _leader(client, "t")
            # a client of the leader alone, its connections open: reads sent while the leader is paused
            # wait in them and are read first thing when it runs again, as a Kafka consumer's fetches are
            old = RaftlogClient([cluster.url(paused)], retries=0, timeout_s=30)
            await asyncio.gather(*(old.offsets("t", 0) for _ in range(READS_AT_RESUME)))
            os.kill(cluster.processes[paused].pid, signal.SIGSTOP)
            survivors = [url for url in cluster.urls if url != cluster.url(paused)]
            async with old, RaftlogClient(survivors, retries=60, backoff_max_s=0.5, timeout_s=5) as others:
                started = time.monotonic()
                for i in range(20):
                    [produced] = await others.produce("t", [Message(f"paused-{i}")], partition=0)
                    acked.append(produced.offset)
                served_in_s = time.monotonic() - started
                new_leader = await _leader(others, "t")
                assert new_leader != paused
                ends = [asyncio.create_task(old.offsets("t", 0)) for _ in range(READS_AT_RESUME // 2)]
                reads = [asyncio.create_task(old.fetch("t", 0, 1)) for _ in range(READS_AT_RESUME // 2)]
                # sent, waiting in the paused node's sockets: bytes queued unread on connections to its port
                port = int(cluster.url(paused).rsplit(":", 1)[1])
                deadline = time.monotonic() + 30
                while _unread_connections(port) < READS_AT_RESUME and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                assert _unread_connections(port) >= READS_AT_RESUME, "the reads never reached its sockets"
                assert not any(read.done() for read in (*ends, *reads))
                os.kill(cluster.processes[paused].pid, signal.SIGCONT)
                answers = await asyncio.gather(*ends, *reads, return_exceptions=True)
                [produced] = await others.produce("t", [Message("after")], partition=0)
                acked.append(produced.offset)
                fetched = await others.fetch("t", 0, 0)
            paused_values = [f"paused-{i}" for i in range(20)]
            refused = [a for a in answers if isinstance(a, BaseException)]
            assert all(isinstance(a, ClientError) for a in refused), refused
            stale_ends = [a[1] for a in answers if isinstance(a, tuple) and a[1] < 1 + len(paused_values)]
            stale_reads = [
                [r.offset for r in a]
                for a in answers
                if isinstance(a, list) and [r.value.decode() for r in a][:20] != paused_values
            ]
            assert not stale_ends, f"the resumed leader answered end offsets {stale_ends}, 21 acknowledged"
            assert not stale_reads, f"the resumed leader answered reads from offset 1: {stale_reads}"
            assert [r.value.decode() for r in fetched] == ["before", *paused_values, "after"]
            assert acked == list(range(22))
            assert served_in_s < 60, f"writes took {served_in_s:.1f} s to resume while the leader was paused"

    asyncio.run(asyncio.wait_for(scenario(), 180))


def test_records_acknowledged_just_before_every_node_crashes_are_all_there(cluster: ProcessCluster) -> None:
    acked: dict[int, list[str]] = {0: [], 1: []}

    async def produce_until_crash(producer: int, stop: asyncio.Event) -> None:
        async with RaftlogClient(cluster.urls, retries=0, timeout_s=5) as client:
            i = 0
            while not stop.is_set():
                value = f"p{producer}-{i}"
                try:
                    await client.produce("t", [Message(value)], partition=producer % 2)
                    acked[producer % 2].append(value)
                except ClientError:
                    return  # the cluster is gone: what was acknowledged so far must survive
                i += 1

    async def scenario() -> None:
        async with RaftlogClient(cluster.urls) as admin:
            await admin.create_topic("t", partitions=2, replication_factor=3)
            for partition in range(2):
                await _leader(admin, "t", partition)
        stop = asyncio.Event()
        producers = [asyncio.create_task(produce_until_crash(p, stop)) for p in range(2)]
        # the power cut comes while both write: once each has had records acknowledged
        while not all(len(values) >= 20 for values in acked.values()):
            if any(task.done() for task in producers):
                break  # one could not write: the check below says so
            await asyncio.wait(producers, timeout=0.05)
        for node in cluster.nodes:  # power cut: every node at once, no shutdown code runs
            os.kill(cluster.processes[node.node_id].pid, signal.SIGKILL)
        stop.set()
        await asyncio.gather(*producers)

    asyncio.run(asyncio.wait_for(scenario(), 120))
    for node in cluster.nodes:
        cluster.processes[node.node_id].wait(10)
    assert all(len(values) > 5 for values in acked.values()), f"too few acks before the crash: {acked}"
    cluster.start_all()

    async def check() -> None:
        async with RaftlogClient(cluster.urls, retries=60, backoff_max_s=0.5) as client:
            for partition in range(2):
                await _leader(client, "t", partition)
                fetched = [r.value.decode() for r in await client.fetch("t", partition, 0, max_bytes=1 << 22)]
                missing = [v for v in acked[partition] if v not in fetched]
                assert not missing, f"partition {partition}: acked records lost: {missing[:5]}"
                assert len(fetched) == len(set(fetched)), "a record appears twice"
                # acked records keep their acknowledgement order; at most one unacked record may follow
                assert fetched[: len(acked[partition])] == acked[partition]
                assert len(fetched) - len(acked[partition]) <= 1

    asyncio.run(asyncio.wait_for(check(), 120))


def test_gossip_reports_a_crashed_node_dead_and_then_alive_again(cluster: ProcessCluster) -> None:
    async def states(client: RaftlogClient) -> dict[str, str]:
        return {n["node_id"]: n["state"] for n in await client.cluster.nodes()}

    async def wait_for(client: RaftlogClient, want: dict[str, str], timeout_s: float) -> float:
        started = time.monotonic()
        seen: dict[str, str] = {}
        while time.monotonic() - started < timeout_s:
            try:
                seen = await states(client)
                if all(seen.get(k) == v for k, v in want.items()):
                    return time.monotonic() - started
            except ClientError:
                pass
            await asyncio.sleep(0.2)
        raise AssertionError(f"gossip did not reach {want} within {timeout_s} s: {seen}")

    async def scenario() -> None:
        victim = cluster.nodes[2].node_id
        async with RaftlogClient([cluster.nodes[0].http], retries=10) as client:
            await wait_for(client, {n.node_id: "alive" for n in cluster.nodes}, 30)
            cluster.kill(victim)
            # memberlist LAN defaults: suspicion timeout 4 s..24 s at n=3, shortened by confirmations
            await wait_for(client, {victim: "dead"}, 60)
            health = await client.cluster.health()
            assert victim in health["nodes_down"] and not health["is_healthy"]
            cluster.start(victim)
            cluster.wait_ready([victim])
            await wait_for(client, {n.node_id: "alive" for n in cluster.nodes}, 30)

    asyncio.run(asyncio.wait_for(scenario(), 180))
