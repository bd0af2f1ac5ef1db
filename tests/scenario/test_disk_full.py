"""Real processes, one node's data directory on a small ext4 of its own that a ballast file fills
(docs/decisions/0014): writes to the partitions it led move to healthy leaders and succeed, a partition
only it holds answers 507, reads go on, health and /metrics name the full disk; once the ballast is gone the
node catches up and takes writes again without a restart, nothing acknowledged is lost, and
``raftlog log verify`` finds its logs clean."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from jepsen import disks
from raftlog_client.client import Message, RaftlogClient
from raftlog_client.errors import ClientError, RequestFailed
from raftlog_contract import DISK_FULL
from tests.waiting import wait_until

from .cluster import ProcessCluster

pytestmark = pytest.mark.slow
TOPIC = "t"
PARTITIONS = 3
# a node refusing, or a check's own assertion failing, while the cluster settles: asked again
NOT_YET = (ClientError, AssertionError)
ALONE = "alone"  # one replica, moved to the node whose disk fills


def metric(url: str, name: str) -> float | None:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    return None


async def leaders(client: RaftlogClient) -> dict[int, str | None]:
    return {p: (await client.cluster.partition_state(TOPIC, p)).get("leader") for p in range(PARTITIONS)}


async def produce_everywhere(
    client: RaftlogClient, tag: str, acked: dict[int, list[str]], size: int = 0
) -> None:
    """One record to every partition (``size`` bytes of padding: enough to use up what a file system
    keeps allocated ahead of its files, so that a filled disk refuses at once)."""
    for partition in range(PARTITIONS):
        value = f"{tag}-{partition}-".ljust(size, ".")
        await client.produce(TOPIC, [Message(value)], partition=partition)
        acked[partition].append(value)


async def read_all(client: RaftlogClient, topic: str, partition: int) -> list[str]:
    values: list[str] = []
    offset = 0
    while True:
        records = await client.fetch(topic, partition, offset)
        if not records:
            return values
        values += [(r.value or b"").decode() for r in records]
        offset = records[-1].offset + 1


@pytest.mark.needs("small-disks")
async def test_a_node_whose_disk_fills_refuses_writes_serves_reads_and_recovers(tmp_path: Path) -> None:
    cluster = ProcessCluster.create(str(tmp_path))
    full_node = cluster.nodes[0].node_id
    disk = disks.SmallDisk(str(tmp_path / "n1.img"), str(tmp_path / "n1-disk"), 96)
    disk.mount()
    argv = cluster.argv[full_node]
    argv[argv.index("--data-dir") + 1] = disk.mount_point
    admin = RaftlogClient(cluster.urls, timeout_s=10, retries=None, retry_for_s=60)
    client = RaftlogClient(cluster.urls, timeout_s=10, retries=None, retry_for_s=60)
    try:
        cluster.start_all()
        await admin.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        await admin.create_topic(ALONE, partitions=1, replication_factor=1)
        placed = [r["node"] for r in (await admin.cluster.partition_state(ALONE, 0))["replicas"]]
        if placed != [full_node]:
            await admin.cluster.move_replicas(ALONE, 0, [full_node])
        await wait_until(
            lambda: _led_by(admin, ALONE, full_node), f"{ALONE}/0 led by {full_node}", 60, retrying=NOT_YET
        )
        led = await wait_until(
            lambda: _leads_one(admin, full_node), f"{full_node} leading a partition", 60, retrying=NOT_YET
        )
        acked: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
        for round_ in range(5):
            await produce_everywhere(client, f"before{round_}", acked)
        await client.produce(ALONE, [Message("alone-before")], partition=0)

        disks.fill(disk.mount_point)
        started = time.monotonic()
        for round_ in range(10):  # every partition takes writes: those the full node led move away
            await produce_everywhere(client, f"full{round_}", acked, size=512 << 10)
        moved = await leaders(admin)
        assert all(moved[p] not in (None, full_node) for p in led), moved
        took_s = time.monotonic() - started

        async with RaftlogClient([cluster.url(full_node)], timeout_s=10, retries=0) as lone:
            with pytest.raises(RequestFailed) as refused:  # its lone partition has nowhere to go
                await lone.produce(ALONE, [Message("alone-refused")], partition=0)
        assert (refused.value.status, refused.value.error_code) == (507, DISK_FULL)

        reader = RaftlogClient([cluster.url(full_node)], timeout_s=10, retries=3)
        for partition in range(PARTITIONS):  # reads through the full node go on
            assert set(acked[partition]) <= set(await read_all(reader, TOPIC, partition))
        assert await read_all(reader, ALONE, 0) == ["alone-before"]
        await reader.close()

        for url in (cluster.url(full_node), cluster.urls[1]):
            health = await wait_until(
                lambda u=url: _disk_full_health(u, full_node),
                f"health at {url} naming the full disk",
                30,
                retrying=NOT_YET,
            )
            assert health["is_healthy"] is False and health["disk"][full_node]["full"] is True
        assert metric(cluster.url(full_node), f'raftlog_node_disk_full{{node="{full_node}"}}') == 1.0
        refusals = metric(cluster.url(full_node), "raftlog_disk_writes_refused_total")
        assert refusals is not None and refusals > 0

        disks.empty(disk.mount_point)
        await wait_until(lambda: _no_disk_full(admin), "health without a full disk", 30, retrying=NOT_YET)
        await client.produce(ALONE, [Message("alone-after")], partition=0)
        for round_ in range(5):
            await produce_everywhere(client, f"after{round_}", acked)
        await wait_until(lambda: _in_sync(admin), "every replica in sync again", 60, retrying=NOT_YET)
        for partition in range(PARTITIONS):
            values = await read_all(client, TOPIC, partition)
            assert set(acked[partition]) <= set(values), partition
        assert await read_all(client, ALONE, 0) == ["alone-before", "alone-after"]
        assert took_s < 40, f"writes took {took_s:.1f} s to move to healthy leaders"
    finally:
        await admin.close()
        await client.close()
        cluster.stop_all()
        verify = subprocess.run(
            [sys.executable, "-m", "raftlog_cli", "log", "verify", disk.mount_point],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        disk.unmount()
    assert verify.returncode == 0, verify.stdout + verify.stderr


async def _led_by(client: RaftlogClient, topic: str, node: str) -> bool:
    return (await client.cluster.partition_state(topic, 0)).get("leader") == node


async def _leads_one(client: RaftlogClient, node: str) -> list[int]:
    led = [p for p, leader in (await leaders(client)).items() if leader == node]
    if not led:
        await client.cluster.transfer_leadership(TOPIC, 0, node)
    return led


async def _disk_full_health(url: str, node: str) -> dict[str, Any] | None:
    async with RaftlogClient([url], timeout_s=5, retries=0) as client:
        health = await client.cluster.health()
    return health if health.get("nodes_disk_full") == [node] else None


async def _no_disk_full(client: RaftlogClient) -> bool:
    health = await client.cluster.health()
    return not health["nodes_disk_full"] and not any(d["full"] for d in health["disk"].values())


async def _in_sync(client: RaftlogClient) -> bool:
    for partition in range(PARTITIONS):
        state = await client.cluster.partition_state(TOPIC, partition)
        if not all(r.get("in_sync") for r in state["replicas"]):
            return False
    return True
