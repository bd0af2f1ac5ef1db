"""Real processes: a move onto a node under Kafka's replication throttles (what ``kafka-reassign-partitions
--execute --throttle`` sets) of a partition holding 10 MiB. The new replica installs its leader's snapshot
and copies the records from its peers' logs, paced by the throttle; until its log holds every record the
move is in progress (the admin API, ``raftlog partition status``), the old replica is still a voter and
counted, and a cancel takes the new one out again. Once the copy is done the move ends, and the new
replica's log is its peers', batch for batch. A kill -9 of the only old replica in the middle of such a
move loses no acknowledged record.

Before, the new replica was promoted and the old one removed as soon as the snapshot was installed: the
move was reported done within a second while the copy went on, and a 1-replica partition was left with no
full copy at all."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from partitions.names import broker_id
from partitions.peers.client import PeerClient, internal_credential, remote_peer
from partitions.resource_configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from raftlog.errors import RaftlogError
from raftlog.storage.batch import decode_header
from raftlog.storage.batch_reads import split_batches
from raftlog_client.client import Message, RaftlogClient
from raftlog_client.errors import ClientError
from tests.waiting import wait_until

from .cluster import ProcessCluster

pytestmark = pytest.mark.slow
KiB, MiB = 1024, 1024 * 1024
RECORD_BYTES = 64 * KiB
BATCH_RECORDS = 4  # a batch of 256 KiB and its framing
BATCH_BYTES_MAX = BATCH_RECORDS * RECORD_BYTES + 4 * KiB
BIG_BYTES = 10 * MiB
SOLO_BYTES = 4 * MiB
SLOW_RATE = 256 * KiB  # bytes/s: 10 MiB would take 40 s, far longer than the checks made meanwhile
FAST_RATE = 16 * MiB  # what the rest is copied at once the checks are done
SECRET = "scenario-test-secret-0123456789abcdef"  # what ProcessCluster writes to cluster.secret
WAIT_S = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    started = ProcessCluster.create(str(tmp_path_factory.mktemp("throttled-moves")))
    try:
        started.start_all()
        yield started
    finally:
        started.stop_all()


async def until(what: str, check: Callable[[], Awaitable[Any]], timeout_s: float = WAIT_S) -> Any:
    return await wait_until(check, what, timeout_s, retrying=(ClientError,))


def throttle(
    cluster: ProcessCluster, topic: str, rate: int, leaders: list[str], followers: list[str]
) -> None:
    """What ``kafka-reassign-partitions --execute --throttle RATE`` sets for a move of ``topic``/0 from
    ``leaders`` (its current replicas) adding ``followers``: the topic's throttled-replica lists, then both
    rates on every broker, over Kafka's wire (IncrementalAlterConfigs)."""
    admin = AdminClient({"bootstrap.servers": ",".join(n.kafka for n in cluster.nodes)})

    def pairs(nodes: list[str]) -> str:
        return ",".join(f"0:{broker_id(n)}" for n in nodes)

    def altered(resources: list[ConfigResource]) -> None:
        for future in admin.incremental_alter_configs(resources).values():
            future.result(timeout=30)

    set_ = AlterConfigOpType.SET
    entries = [
        ConfigEntry(LEADER_REPLICAS, pairs(leaders), incremental_operation=set_),
        ConfigEntry(FOLLOWER_REPLICAS, pairs(followers), incremental_operation=set_),
    ]
    altered([ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)])
    rates = [
        ConfigEntry(LEADER_RATE, str(rate), incremental_operation=set_),
        ConfigEntry(FOLLOWER_RATE, str(rate), incremental_operation=set_),
    ]
    for node in cluster.nodes:  # one broker a call (librdkafka's rule)
        altered(
            [
                ConfigResource(
                    ConfigResource.Type.BROKER, str(broker_id(node.node_id)), incremental_configs=rates
                )
            ]
        )


@contextlib.asynccontextmanager
async def peer_client(cluster: ProcessCluster) -> AsyncIterator[PeerClient]:
    """What a node asks its peers with: reads of each replica as stored."""
    peers = PeerClient(internal_credential(SECRET.encode()), {n.node_id: n.http for n in cluster.nodes}.get)
    try:
        yield peers
    finally:
        await peers.close()


async def metrics(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    async with session.get(url + "/metrics") as answer:
        text = await answer.text()
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if line and not line.startswith("#") and "{" not in name:
            values[name] = float(value)
    return values


async def log_digest(peers: PeerClient, node: str, topic: str, end_offset: int) -> tuple[int, str]:
    """(bytes, sha256) of ``node``'s replica of ``topic``/0 below ``end_offset``, every batch as stored
    (asked as a peer replica asks)."""
    digest = hashlib.sha256()
    offset = size = 0
    while offset < end_offset:
        data = (await remote_peer(peers, node).read_batches(topic, 0, offset, 4 * MiB)).data
        assert data, f"{node} has nothing at offset {offset} of {topic}/0, below {end_offset}"
        for batch in split_batches(data):
            header = decode_header(batch)
            if header.base_offset >= end_offset:
                break
            digest.update(batch)
            size += len(batch)
            offset = header.end_offset
    return size, digest.hexdigest()


async def holds_up_to(peers: PeerClient, node: str, topic: str, end_offset: int) -> bool:
    """Whether ``node``'s replica of ``topic``/0 holds the record at ``end_offset - 1`` (its log reached
    ``end_offset``); False while it has no replica or still copies that offset from its peers."""
    try:
        return bool((await remote_peer(peers, node).read_batches(topic, 0, end_offset - 1, 1)).data)
    except RaftlogError:
        return False


async def has_replica(peers: PeerClient, node: str, topic: str) -> bool:
    try:
        await remote_peer(peers, node).read_batches(topic, 0, 0, 1)
    except RaftlogError as error:
        return "recovering" in str(error)  # a replica copying offset 0 still is one
    return True


async def write(client: RaftlogClient, topic: str, total: int) -> dict[int, bytes]:
    """``total`` bytes of random records in batches of BATCH_RECORDS: the acknowledged offsets' values."""
    acked: dict[int, bytes] = {}
    for _ in range(total // (BATCH_RECORDS * RECORD_BYTES)):
        values = [os.urandom(RECORD_BYTES) for _ in range(BATCH_RECORDS)]
        produced = await client.produce_batch(topic, 0, [Message(v) for v in values])
        acked.update((p.offset, v) for p, v in zip(produced, values, strict=True))
    return acked


async def placed(admin: RaftlogClient, topic: str) -> tuple[str, list[str]]:
    """The partition's leader and its replicas, once it has one."""

    async def leader() -> str | None:
        return (await admin.cluster.partition_state(topic, 0)).get("leader")

    await until(f"{topic}/0 has a leader", leader)
    state = await admin.cluster.partition_state(topic, 0)
    return str(state["leader"]), [r["node"] for r in state["replicas"]]


def cli_status(cluster: ProcessCluster, topic: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "raftlog_cli", "partition", "status", topic, "0", "--server", cluster.urls[0]],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout


def test_a_throttled_move_is_in_progress_until_the_new_replica_holds_every_record(
    cluster: ProcessCluster,
) -> None:
    async def scenario() -> None:
        async with (
            RaftlogClient(cluster.urls, retries=40, backoff_max_s=0.5, timeout_s=30) as admin,
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
            peer_client(cluster) as peers,
        ):
            await admin.create_topic("big", partitions=1, replication_factor=2)
            leader, replicas = await placed(admin, "big")
            await write(admin, "big", BIG_BYTES)
            high_watermark = (await admin.cluster.partition_state("big", 0))["high_watermark"]
            staying = next(n for n in replicas if n != leader)
            joining = next(n.node_id for n in cluster.nodes if n.node_id not in replicas)
            url = {n.node_id: n.http for n in cluster.nodes}
            await asyncio.to_thread(throttle, cluster, "big", SLOW_RATE, replicas, [joining])

            # the leader leaves: it stays a voter, and the leader, until the new replica holds every record
            started_s = time.monotonic()
            await admin.cluster.move_replicas("big", 0, [staying, joining])

            async def copying() -> bool:
                copied = (await metrics(session, url[joining])).get(
                    "raftlog_recovery_throttled_bytes_total", 0
                )
                return copied > 0 and not await holds_up_to(peers, joining, "big", high_watermark)

            await until(f"{joining} copying big/0 from its peers under the throttle", copying)
            progress = await admin.cluster.move_progress("big", 0)
            state = await admin.cluster.partition_state("big", 0)
            status = await asyncio.to_thread(cli_status, cluster, "big")
            joined_metrics = await metrics(session, url[joining])
            elapsed_s = time.monotonic() - started_s
            assert not await holds_up_to(peers, joining, "big", high_watermark), "copied during the checks"

            assert progress["move"] is not None, f"the move ended while {joining} copies: {progress}"
            assert set(progress["replicas"]) == {leader, staying}, progress
            roles = {r["node"]: r["role"] for r in state["replicas"]}
            assert roles == {leader: "leader", staying: "follower", joining: "learner"}, state["replicas"]
            assert f"moving to {staying},{joining}, {joining} joining" in status, status
            # paced: a second's worth at first (the bucket's burst), then the rate, plus the answer that
            # put the bucket in debt (whole batches), however long the checks took
            copied = joined_metrics["raftlog_recovery_throttled_bytes_total"]
            assert copied <= SLOW_RATE * (elapsed_s + 1) + BATCH_BYTES_MAX, (copied, elapsed_s)
            served = [(await metrics(session, url[n])).get("raftlog_recovery_served_throttled_bytes_total", 0)
                      for n in (leader, staying)]  # fmt: skip
            assert sum(served) > 0, "the old replicas served under the leader throttle"
            print(
                f"\n{joining} copied {copied / KiB:.0f} KiB of big/0's {high_watermark} records in "
                f"{elapsed_s:.1f} s at {SLOW_RATE // KiB} KiB/s, the move in progress; served "
                f"{sum(served) / KiB:.0f} KiB"
            )

            # cancelled while it copies: the new replica leaves, the old ones hold every record
            await admin.cluster.cancel_move("big", 0)

            async def back() -> bool:
                progress = await admin.cluster.move_progress("big", 0)
                return progress["move"] is None and set(progress["replicas"]) == {leader, staying}

            await until("the cancelled move back on the original replicas", back)
            await until(f"{joining} deleted its replica", lambda: _not(has_replica(peers, joining, "big")))
            # (read_batches, as a recovery asks, is served under the leader throttle too)
            await asyncio.to_thread(throttle, cluster, "big", FAST_RATE, [leader, staying], [joining])
            kept = [await log_digest(peers, n, "big", high_watermark) for n in (leader, staying)]
            assert kept[0] == kept[1] and kept[0][0] >= BIG_BYTES, kept

            # again, copied at once: the move ends only with the new replica's log complete
            await admin.cluster.move_replicas("big", 0, [staying, joining])

            async def ended() -> bool:
                return (await admin.cluster.move_progress("big", 0))["move"] is None

            await until("the move of big/0 ended", ended)
            assert await holds_up_to(peers, joining, "big", high_watermark), "ended before the copy did"
            progress = await admin.cluster.move_progress("big", 0)
            assert progress["replicas"] == [staying, joining], progress
            moved = await log_digest(peers, joining, "big", high_watermark)
            assert moved == await log_digest(peers, staying, "big", high_watermark) == kept[0]

    asyncio.run(asyncio.wait_for(scenario(), WAIT_S * 5))


def test_a_kill_of_the_only_old_replica_in_the_middle_of_a_move_loses_no_acknowledged_record(
    cluster: ProcessCluster,
) -> None:
    """A partition of one replica moves to another node while a producer writes to it; the old replica is
    killed (SIGKILL) while the new one copies its records, and started again: the move goes on and ends,
    and every record ever acknowledged is read back at its offset."""

    async def scenario() -> None:
        async with (
            RaftlogClient(cluster.urls, retries=40, backoff_max_s=0.5, timeout_s=30) as admin,
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
            peer_client(cluster) as peers,
        ):
            await admin.create_topic("solo", partitions=1, replication_factor=1)
            old, _ = await placed(admin, "solo")
            new = next(n.node_id for n in cluster.nodes if n.node_id != old)
            acked = await write(admin, "solo", SOLO_BYTES)
            await asyncio.to_thread(throttle, cluster, "solo", SLOW_RATE, [old], [new])
            producer = Producer(cluster.urls, "solo")
            producer.start()
            await producer.advanced(5)
            await admin.cluster.move_replicas("solo", 0, [new])

            async def copying() -> bool:
                copied = (await metrics(session, cluster.url(new))).get(
                    "raftlog_recovery_throttled_bytes_total", 0
                )
                end = max(acked) + 1
                return copied > 0 and not await holds_up_to(peers, new, "solo", end)

            await until(f"{new} copying solo/0 from {old}", copying)
            cluster.kill(old)
            killed_at = time.monotonic()
            await producer.failed()  # the partition's only voter is gone: nothing commits
            progress = await admin.cluster.move_progress("solo", 0)
            assert progress["move"] is not None and progress["replicas"] == [old], progress
            # the kill landed mid-copy: the only peer to copy from is gone
            assert not await holds_up_to(peers, new, "solo", max(acked) + 1), "copied before the kill"
            cluster.start(old)
            await asyncio.to_thread(cluster.wait_ready, [old])
            await asyncio.to_thread(throttle, cluster, "solo", FAST_RATE, [old], [new])

            async def moved() -> bool:
                progress = await admin.cluster.move_progress("solo", 0)
                return progress["move"] is None and progress["replicas"] == [new]

            await until("the move of solo/0 ended", moved, timeout_s=WAIT_S * 2)
            print(f"\nsolo/0 moved to {new} {time.monotonic() - killed_at:.1f} s after {old} was killed")
            await producer.advanced(5)  # writes go on, to the new replica
            await producer.finish()
            acked.update(producer.acked)
            high_watermark = (await admin.cluster.partition_state("solo", 0))["high_watermark"]
            assert await holds_up_to(peers, new, "solo", high_watermark)
            read = await read_all(admin, "solo", high_watermark)
            missing = sorted(o for o, v in acked.items() if read.get(o) != v)
            assert not missing, (
                f"{len(missing)} of {len(acked)} acknowledged records not read back: {missing[:5]}"
            )
            assert producer.failures > 0 and len(producer.acked) >= 10, (producer.failures, producer.acked)
            print(
                f"{len(acked)} acknowledged records read back ({len(producer.acked)} written during the move)"
            )

    asyncio.run(asyncio.wait_for(scenario(), WAIT_S * 5))


class Producer:
    """Small records one after another to ``topic``/0: the acknowledged ones by offset, and how many
    were not (the partition without a leader)."""

    def __init__(self, urls: list[str], topic: str) -> None:
        self.urls, self.topic = urls, topic
        self.acked: dict[int, bytes] = {}
        self.failures = 0
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async with RaftlogClient(self.urls, retries=1, backoff_max_s=0.2, timeout_s=5) as client:
            index = 0
            while not self.stop.is_set():
                value = f"w-{index}".encode()
                try:
                    [produced] = await client.produce(self.topic, [Message(value)], partition=0)
                    self.acked[produced.offset] = value
                except ClientError:
                    self.failures += 1
                    await asyncio.sleep(0.1)
                index += 1
                await asyncio.sleep(0.02)

    async def advanced(self, by: int) -> None:
        goal = len(self.acked) + by
        await until(f"{by} more records acknowledged", lambda: _true(len(self.acked) >= goal))

    async def failed(self) -> None:
        goal = self.failures + 1
        await until("a write refused or unanswered", lambda: _true(self.failures >= goal))

    async def finish(self) -> None:
        self.stop.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, WAIT_S)


async def read_all(client: RaftlogClient, topic: str, end_offset: int) -> dict[int, bytes]:
    """Every record of ``topic``/0 below ``end_offset``, by offset."""
    read: dict[int, bytes] = {}
    offset = 0
    while offset < end_offset:
        records = await client.fetch(topic, 0, offset)
        assert records, f"nothing at offset {offset} of {topic}/0, below {end_offset}"
        for record in records:
            read[record.offset] = record.value or b""
        offset = records[-1].offset + 1
    return read


async def _true(value: bool) -> bool:
    return value


async def _not(check: Awaitable[bool]) -> bool:
    return not await check
