"""How long a replica move takes on a local 3-node cluster, idle and under a produce load.

    .venv/bin/python scripts/bench_move.py [--megabytes 100] [--record-bytes 1000] [--dir DIR]

Fills one partition (2 replicas) with ``--megabytes`` of records, then moves it to the third node twice:
once with no other traffic, once while a producer keeps writing, and prints each move's duration (from
the request until the controller records the target set) and the produce throughput during it. Prints
numbers; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time

from raftlog_client.client import Message, RaftlogClient
from raftlog_client.local_cluster import LocalCluster


async def move(client: RaftlogClient, topic: str) -> tuple[list[str], list[str], float]:
    current = (await client.cluster.move_progress(topic, 0))["replicas"]
    spare = next(n for n in ("n1", "n2", "n3") if n not in current)
    target = [spare, current[-1]]
    started = time.monotonic()
    await client.cluster.move_replicas(topic, 0, target)
    while (await client.cluster.move_progress(topic, 0))["move"] is not None:
        await asyncio.sleep(0.05)
    return current, target, time.monotonic() - started


async def bench(urls: list[str], megabytes: int, record_bytes: int) -> None:
    async with RaftlogClient(urls, retries=40, timeout_s=60) as client:
        await client.create_topic("moving", partitions=1, replication_factor=2)
        value = "x" * record_bytes
        batch = max(1, 100_000 // record_bytes)
        batches = max(1, megabytes * 1_000_000 // (record_bytes * batch))
        started = time.monotonic()
        for _ in range(batches):
            await client.produce("moving", [Message(value)] * batch, partition=0)
        print(f"filled: {batches * batch} records, {megabytes} MB in {time.monotonic() - started:.1f} s")
        before, after, took = await move(client, "moving")
        print(f"idle move {before} -> {after}: {took:.2f} s")

        stop = asyncio.Event()
        acked = 0

        async def produce() -> None:
            nonlocal acked
            async with RaftlogClient(urls, retries=80, backoff_max_s=0.3) as producer:
                while not stop.is_set():
                    await producer.produce("moving", [Message(value)] * 10, partition=0)
                    acked += 10

        writer = asyncio.create_task(produce())
        await asyncio.sleep(1)
        acked_before = acked
        await asyncio.sleep(2)
        baseline = (acked - acked_before) / 2
        acked_before = acked
        before, after, took = await move(client, "moving")
        during = acked - acked_before
        stop.set()
        await writer
        print(
            f"move under load {before} -> {after}: {took:.2f} s, "
            f"{during / took:.0f} records/s acknowledged meanwhile ({baseline:.0f}/s just before)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--dir", help="data directory (default: a new temporary one)")
    args = parser.parse_args()
    cluster = LocalCluster(args.dir or tempfile.mkdtemp(prefix="raftlog-bench-move-"))
    try:
        cluster.start()
        asyncio.run(bench(cluster.servers, args.megabytes, args.record_bytes))
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
