"""Consumer groups on a local 3-node cluster over HTTP: how fast a group reads a topic with 1 and 3
members (poll, then commit what was read, as ``GroupConsumer`` does; each member its own process behind
a node of its own, joined before any reads), and how long a silent member takes to lose its partitions
(its session timeout plus the coordinator's sweep).

    .venv/bin/python scripts/bench_groups.py [--records 20000] [--partitions 6] [--value-bytes 100]
    .venv/bin/python scripts/bench_groups.py --server http://127.0.0.1:8081,...   # a running cluster

Without ``--server`` it starts ``raftlog dev`` on free ports in a temporary directory and stops it at the
end. Prints numbers; asserts nothing but that every record was read.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import tempfile
import time
from typing import Any

from raftlog_client.client import GroupConsumer, Message, RaftlogClient
from raftlog_client.local_cluster import LocalCluster

READ_TIMEOUT_S = 300.0


def _member_process(
    url: str, group: str, topic: str, ends: dict[int, int], ready: Any, go: Any, answers: Any
) -> None:
    """One member in its own process (as a group's members are): join, then at ``go`` read until every
    partition assigned to it is read to its end, committing after each poll; puts (offsets read by
    partition, seconds)."""
    answers.put(asyncio.run(_member(url, group, topic, ends, ready, go)))


async def _member(
    url: str, group: str, topic: str, ends: dict[int, int], ready: Any, go: Any
) -> tuple[dict[int, list[int]], float]:
    read: dict[int, list[int]] = {}
    async with RaftlogClient([url], retries=20) as client:
        consumer = GroupConsumer(client, group, offset_reset="earliest")
        await consumer.start([topic])
        ready.wait()  # every member joined: the assignment is final before anyone reads
        go.wait()
        started = time.monotonic()
        _, assigned = await consumer.assignment()
        mine = {p for t, p in assigned if t == topic}
        next_offset = dict.fromkeys(mine, 0)
        while any(next_offset[p] < ends[p] for p in mine) and time.monotonic() - started < READ_TIMEOUT_S:
            for record in await consumer.poll(timeout_ms=200):
                read.setdefault(record.partition, []).append(record.offset)
                next_offset[record.partition] = max(next_offset[record.partition], record.offset + 1)
            await consumer.commit()
        elapsed = time.monotonic() - started
        ready.wait()  # leave only once every member read its share: a leave reassigns the partitions
        await consumer.close()
    return read, elapsed


def _read_all(urls: list[str], topic: str, members: int, ends: dict[int, int]) -> tuple[float, int, int]:
    """Seconds for ``members`` members of a new group, each its own process behind a node of its own, to
    read (and commit) every record; (seconds, records read, distinct records read)."""
    context = multiprocessing.get_context("spawn")
    group = f"bench-{members}-{time.monotonic_ns()}"
    ready, go, answers = context.Barrier(members), context.Event(), context.Queue()
    workers = [
        context.Process(
            target=_member_process, args=(urls[i % len(urls)], group, topic, ends, ready, go, answers)
        )
        for i in range(members)
    ]
    for worker in workers:
        worker.start()
    time.sleep(0.5)  # let them join; each waits at the barrier for the others
    go.set()
    results = [answers.get(timeout=READ_TIMEOUT_S + 60) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
    offsets = [(p, o) for read, _ in results for p, offs in read.items() for o in offs]
    return max(seconds for _, seconds in results), len(offsets), len(set(offsets))


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
        ends = {p: (await client.offsets(topic, p))[1] for p in range(args.partitions)}
    print(f"{'members':>8} {'seconds':>8} {'records/s':>10} {'read again':>10}")
    for members in (1, 3):
        elapsed, read, distinct = await asyncio.to_thread(_read_all, urls, topic, members, ends)
        if distinct < args.records:
            raise SystemExit(f"{members} member(s) read {distinct} of {args.records} records")
        print(f"{members:>8} {elapsed:>8.2f} {args.records / elapsed:>10.0f} {read - distinct:>10}")
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
