"""Consumer groups on a local 3-node cluster over HTTP: how fast a group reads a topic with 1 and 3
members (poll, then commit what was read, as ``GroupConsumer`` does), and how long a silent member takes
to lose its partitions (its session timeout plus the coordinator's sweep).

    .venv/bin/python scripts/bench_groups.py [--records 20000] [--partitions 6] [--value-bytes 100]
    .venv/bin/python scripts/bench_groups.py --server http://127.0.0.1:8081,...   # a running cluster

Without ``--server`` it starts ``raftlog dev`` on free ports in a temporary directory and stops it at the
end. Prints numbers; asserts nothing but that every record was read.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time

from raftlog_client.client import GroupConsumer, Message, RaftlogClient
from raftlog_client.local_cluster import LocalCluster

READ_TIMEOUT_S = 300.0


async def _read_all(urls: list[str], topic: str, members: int, records: int) -> tuple[float, int]:
    """Seconds for ``members`` members of a new group to read (and commit) every record; records read."""
    clients = [RaftlogClient([urls[i % len(urls)]], retries=20) for i in range(members)]
    group = f"bench-{members}-{time.monotonic_ns()}"
    consumers = [GroupConsumer(c, group, offset_reset="earliest") for c in clients]
    seen: set[bytes] = set()
    read = 0
    try:
        for consumer in consumers:
            await consumer.start([topic])
        started = time.monotonic()

        async def member(consumer: GroupConsumer) -> None:
            nonlocal read
            while len(seen) < records and time.monotonic() - started < READ_TIMEOUT_S:
                batch = await consumer.poll(timeout_ms=200)
                read += len(batch)
                seen.update(r.value for r in batch)
                await consumer.commit()

        await asyncio.gather(*(member(c) for c in consumers))
        elapsed = time.monotonic() - started
        for consumer in consumers:
            await consumer.close()
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    if len(seen) < records:
        raise SystemExit(f"{members} member(s) read {len(seen)} of {records} records in {READ_TIMEOUT_S} s")
    return elapsed, read


async def _eviction_s(urls: list[str], topic: str, session_timeout_ms: int) -> float:
    """Seconds from a member's last call until the other member owns every partition."""
    async with RaftlogClient(urls[:1]) as one, RaftlogClient(urls[1:2]) as two:
        group = f"evict-{time.monotonic_ns()}"
        silent = GroupConsumer(one, group, session_timeout_ms=session_timeout_ms)
        survivor = GroupConsumer(two, group, session_timeout_ms=60_000)
        await silent.start([topic])
        await survivor.start([topic])
        total = len((await silent.assignment())[1]) + len((await survivor.assignment())[1])
        last_call = time.monotonic()
        await silent.assignment()
        while len((await survivor.assignment())[1]) < total:
            if time.monotonic() - last_call > READ_TIMEOUT_S:
                raise SystemExit("the silent member was never evicted")
            await asyncio.sleep(0.02)
        elapsed = time.monotonic() - last_call
        await survivor.close()
        return elapsed


async def _bench(urls: list[str], args: argparse.Namespace) -> None:
    topic = f"groups-bench-{time.monotonic_ns()}"
    async with RaftlogClient(urls) as client:
        await client.create_topic(topic, partitions=args.partitions, replication_factor=3)
        value = b"x" * args.value_bytes
        started = time.monotonic()
        for first in range(0, args.records, 500):
            count = min(500, args.records - first)
            await client.produce(
                topic, [Message(value + b"%d" % (first + i), key=b"%d" % (first + i)) for i in range(count)]
            )
        print(
            f"produced {args.records} records of {args.value_bytes} B in {time.monotonic() - started:.1f} s"
        )
    print(f"{'members':>8} {'seconds':>8} {'records/s':>10} {'read again':>10}")
    for members in (1, 3):
        elapsed, read = await _read_all(urls, topic, members, args.records)
        print(f"{members:>8} {elapsed:>8.2f} {args.records / elapsed:>10.0f} {read - args.records:>10}")
    timeout_ms = 2_000
    evicted = await _eviction_s(urls, topic, timeout_ms)
    print(
        f"a silent member lost its partitions {evicted:.2f} s after its last call (session {timeout_ms} ms)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--server", help="base URLs of a running cluster, comma-separated")
    args = parser.parse_args()
    if args.server:
        asyncio.run(_bench([s.strip() for s in args.server.split(",") if s.strip()], args))
        return 0
    with (
        tempfile.TemporaryDirectory(prefix="raftlog-groups-bench-") as directory,
        LocalCluster(directory) as cluster,
    ):
        asyncio.run(_bench(cluster.servers, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
