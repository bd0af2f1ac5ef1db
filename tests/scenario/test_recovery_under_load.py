"""Real processes: a partition of ~300 MB whose leader compacted its Raft journal moves a replica onto a
node that leads and follows other partitions. The new replica installs a snapshot and must recover the
~300 MB from its peers. Meanwhile every other group on that node keeps its leader (no election: terms
unchanged, no election on timeout anywhere) and a producer to them keeps succeeding; at the end the
moved replica's log is byte for byte the leader's.

Before, that copy ran inside restore() on the node's one Raft driver thread, which stopped every group's
heartbeats and applies for as long as it took."""

from __future__ import annotations

import asyncio
import glob
import hashlib
import os
import pathlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import pytest

from partitions.peers.client import PeerClient, internal_credential, remote_peer
from partitions.peers.service import PeerService
from raftlog.errors import RaftlogError
from raftlog.storage.batch import decode_header
from raftlog.storage.batch_reads import split_batches
from raftlog_client.client import Message, RaftlogClient
from raftlog_client.errors import ClientError
from tests.waiting import wait_until

from .cluster import ProcessCluster

pytestmark = pytest.mark.slow
MiB = 1024 * 1024
BIG_BYTES = 300 * MiB  # into the moving partition
RECORD_BYTES = 240 * 1024  # 4 records a batch: just under max.message.bytes (1 MiB)
PRODUCERS = 3
OTHER_PARTITIONS = 3
SECRET = "scenario-test-secret-0123456789abcdef"  # what ProcessCluster writes to cluster.secret
WAIT_S = 60.0


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[ProcessCluster]:
    started = ProcessCluster.create(str(tmp_path))
    for argv in started.argv.values():
        argv += ["--journal-compaction-min-mib", "64"]  # compacted well before 300 MB
    try:
        started.start_all()
        yield started
    finally:
        started.stop_all()


async def until(what: str, check: Callable[[], Awaitable[Any]], timeout_s: float = WAIT_S) -> Any:
    return await wait_until(check, what, timeout_s, retrying=(ClientError,))


async def metrics(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    async with session.get(url + "/metrics") as answer:
        text = await answer.text()
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if line and not line.startswith("#") and "{" not in name:
            values[name] = float(value)
    return values


async def log_digest(peer: PeerService, end_offset: int) -> tuple[int, str]:
    """(bytes, sha256) of a node's replica of big/0 below ``end_offset``, batches as stored (asked as a
    peer replica asks: with the cluster credential)."""
    digest = hashlib.sha256()
    offset = size = 0
    while offset < end_offset:
        data = (await peer.read_batches("big", 0, offset, 16 * MiB)).data
        assert data, f"nothing at offset {offset} below {end_offset}"
        for batch in split_batches(data):
            header = decode_header(batch)
            if header.base_offset >= end_offset:
                break
            digest.update(batch)
            size += len(batch)
            offset = header.end_offset
    return size, digest.hexdigest()


class OtherProducer:
    """Produces one small record after another to each partition of ``other``, round-robin, and counts
    what failed and the slowest answer."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.stop = asyncio.Event()
        self.acked = 0
        self.failures: list[str] = []
        self.slowest_s = 0.0
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async with RaftlogClient(self.urls, retries=2, backoff_max_s=0.2, timeout_s=4) as client:
            index = 0
            while not self.stop.is_set():
                partition = index % OTHER_PARTITIONS
                started = time.monotonic()
                try:
                    await client.produce("other", [Message(f"o-{index}")], partition=partition)
                    self.acked += 1
                except ClientError as exc:
                    self.failures.append(f"other/{partition} #{index}: {exc}")
                self.slowest_s = max(self.slowest_s, time.monotonic() - started)
                index += 1
                await asyncio.sleep(0.02)

    async def advanced(self, by: int) -> None:
        """Until ``by`` more produces are acknowledged than now (or the producer stopped on failures)."""
        goal = self.acked + by

        async def there() -> bool:
            return self.acked >= goal or bool(self.failures)

        await until(f"{by} more produces to other groups", there)

    async def finish(self) -> None:
        self.stop.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, WAIT_S)


async def produce_big(urls: list[str]) -> None:
    value = os.urandom(RECORD_BYTES)
    batches = BIG_BYTES // (4 * RECORD_BYTES)

    async def producer(share: int) -> None:
        async with RaftlogClient(urls, retries=20, backoff_max_s=0.5, timeout_s=30) as client:
            for _ in range(share):
                await client.produce_batch("big", 0, [Message(value)] * 4)

    await asyncio.gather(*(producer(batches // PRODUCERS) for _ in range(PRODUCERS)))


def test_a_replica_recovering_300_mb_stalls_no_other_group_on_its_node(cluster: ProcessCluster) -> None:
    async def scenario() -> None:
        timeout = aiohttp.ClientTimeout(total=30)
        async with (
            RaftlogClient(cluster.urls, retries=40, backoff_max_s=0.5) as admin,
            aiohttp.ClientSession(timeout=timeout) as session,
        ):
            await admin.create_topic("big", partitions=1, replication_factor=2)
            await admin.create_topic("other", partitions=OTHER_PARTITIONS, replication_factor=3)
            await until("big leader", lambda: _leader(admin, "big", 0))
            replicas = [r["node"] for r in (await admin.cluster.partition_state("big", 0))["replicas"]]
            spare = next(n.node_id for n in cluster.nodes if n.node_id not in replicas)
            url = {n.node_id: n.http for n in cluster.nodes}
            peers = PeerClient(internal_credential(SECRET.encode()), url.get)

            # the spare node leads at least one partition of "other" and follows the rest
            for partition in range(OTHER_PARTITIONS):
                await until(f"other/{partition} leader", lambda p=partition: _leader(admin, "other", p))
            leaders = [await _leader(admin, "other", p) for p in range(OTHER_PARTITIONS)]
            if spare not in leaders:
                await admin.cluster.transfer_leadership("other", 0, spare)
                await until("spare leads other/0", lambda: _is_leader(admin, "other", 0, spare))

            started = time.monotonic()
            await produce_big(cluster.urls)
            big = await admin.cluster.partition_state("big", 0)
            leader, high_watermark = big["leader"], big["high_watermark"]
            produced_s = time.monotonic() - started
            snapshots = glob.glob(os.path.join(cluster.root, leader, "raft", "big-0.*", "snapshot"))
            assert snapshots, "the leader compacted its journal (the new replica must install a snapshot)"

            terms = {
                p: (await admin.cluster.partition_state("other", p))["term"] for p in range(OTHER_PARTITIONS)
            }
            elections = {n: await _elections(session, u) for n, u in url.items()}
            others = OtherProducer(cluster.urls)
            others.start()
            await others.advanced(10)  # running before the move

            moved_at = time.monotonic()
            target = [leader, spare]
            await admin.cluster.move_replicas("big", 0, target)
            seen_recovering = False

            async def moved_and_recovered() -> bool:
                nonlocal seen_recovering
                values = await metrics(session, url[spare])
                seen_recovering |= values.get("raftlog_recovery_replicas", 0) > 0
                progress = await admin.cluster.move_progress("big", 0)
                if progress["move"] is not None or progress["replicas"] != target:
                    return False
                return await _holds_up_to(remote_peer(peers, spare), high_watermark)

            await until("move of big/0 and the new replica's recovery", moved_and_recovered, timeout_s=90)
            recovered_s = time.monotonic() - moved_at
            await others.advanced(10)  # and still after it
            await others.finish()

            terms_after = {
                p: (await admin.cluster.partition_state("other", p))["term"] for p in range(OTHER_PARTITIONS)
            }
            elections_after = {n: await _elections(session, u) for n, u in url.items()}
            spare_metrics = await metrics(session, url[spare])
            copied = spare_metrics.get("raftlog_recovery_bytes_total", 0.0)
            print(
                f"\nproduced {high_watermark} records into big/0 in {produced_s:.1f} s; the moved replica"
                f" recovered in {recovered_s:.1f} s ({copied / MiB:.0f} MiB copied by recovery);"
                f" other groups: {others.acked} produces, {len(others.failures)} failed,"
                f" slowest {others.slowest_s * 1000:.0f} ms; terms {terms} -> {terms_after};"
                f" elections on timeout {elections} -> {elections_after}"
            )

            # nothing else on the node noticed
            assert terms_after == terms, "an election in a group of the node that recovered"
            assert elections_after == elections, "an election on timeout somewhere"
            assert others.failures == [], f"produces to other groups failed: {others.failures[:5]}"
            assert others.acked >= 20, f"the producer to other groups barely ran: {others.acked}"

            # the moved replica's log is the leader's, byte for byte, and recovery copied it
            leader_log = await log_digest(remote_peer(peers, leader), high_watermark)
            moved_log = await log_digest(remote_peer(peers, spare), high_watermark)
            await peers.close()
            assert leader_log[0] >= BIG_BYTES * 0.9
            assert moved_log == leader_log
            assert seen_recovering and spare_metrics["raftlog_recovery_completed_total"] >= 1
            assert copied >= BIG_BYTES * 0.9, f"recovery copied {copied} bytes"

    asyncio.run(scenario())


async def _leader(admin: RaftlogClient, topic: str, partition: int) -> str | None:
    state = await admin.cluster.partition_state(topic, partition)
    return str(state["leader"]) if state.get("leader") else None


async def _is_leader(admin: RaftlogClient, topic: str, partition: int, node: str) -> bool:
    return await _leader(admin, topic, partition) == node


async def _elections(session: aiohttp.ClientSession, url: str) -> float:
    return (await metrics(session, url))["raftlog_raft_elections_on_timeout_total"]


async def _holds_up_to(peer: PeerService, end_offset: int) -> bool:
    """Whether the node's replica of big/0 holds the batch ending at ``end_offset`` (its last)."""
    try:
        return bool((await peer.read_batches("big", 0, end_offset - 1, 1)).data)
    except RaftlogError:  # no replica there yet, or still recovering that offset
        return False
