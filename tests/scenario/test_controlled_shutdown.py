"""Controlled shutdown (``partitions.replicas.handover``), with real node processes: a node stopped by
SIGTERM hands every leadership it holds to another replica, so each of its groups changes leader by a
transfer, never by its followers' election; with ``--controlled-shutdown-ms 0`` the same stop leaves them
to an election (the check tells the two apart)."""

from __future__ import annotations

import asyncio
import functools
import os
import re
import time
from collections.abc import Callable

import pytest

from raftlog_client.client import Message, RaftlogClient

from .cluster import ProcessCluster

pytestmark = pytest.mark.slow
PARTITIONS = 6
WAIT_S = 60.0  # for a condition the cluster reaches in well under a second when healthy


def _log(cluster: ProcessCluster, node_id: str) -> str:
    with open(os.path.join(cluster.root, node_id, "node.log"), encoding="utf-8", errors="replace") as f:
        return f.read()


def _leader_changes(cluster: ProcessCluster, gone: str, group: str) -> list[tuple[str, str]]:
    """(new leader, cause) of each change away from ``gone`` the other nodes logged for ``group``
    (``t-3`` for a partition's group, ``controller``)."""
    line = re.compile(rf"group {re.escape(group)}(?:\.\d+)?: leader {gone} -> (\S+) in term \d+ \((\w+)")
    return [
        (m.group(1), m.group(2))
        for node in cluster.nodes
        if node.node_id != gone
        for m in line.finditer(_log(cluster, node.node_id))
    ]


def _wait_for(condition: str, probe: Callable[[], object]) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {WAIT_S} s: {condition}")


async def _leaders(client: RaftlogClient) -> dict[str, str]:
    """Group -> leading node, once every partition and the controller have one."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        led = {
            f"t-{p}": (await client.cluster.partition_state("t", p)).get("leader") for p in range(PARTITIONS)
        }
        led["controller"] = (await client.cluster.controller()).get("leader")
        if all(led.values()):
            return {group: str(node) for group, node in led.items()}
        await asyncio.sleep(0.1)
    raise AssertionError(f"no leader for every group within {WAIT_S} s")


def test_a_stopped_node_hands_each_leadership_over_and_without_it_they_are_elected(
    cluster: ProcessCluster,
) -> None:
    async def create() -> dict[str, str]:
        async with RaftlogClient(cluster.urls[:1], retries=20) as client:
            await client.create_topic("t", partitions=PARTITIONS, replication_factor=3)
            return await _leaders(client)

    leaders = asyncio.run(asyncio.wait_for(create(), WAIT_S))
    gone = leaders["controller"]  # the controller's leader, and each node leads two of the partitions
    led = sorted(group for group, node in leaders.items() if node == gone)
    assert len(led) >= 2, leaders
    survivor = next(n.http for n in cluster.nodes if n.node_id != gone)

    # 1. A stop with the default controlled shutdown: each group it led moves by a transfer.
    assert cluster.stop(gone) == 0, cluster.log_tail(gone)
    said = re.search(r"handed over (\d+) of (\d+) leaderships", _log(cluster, gone))
    assert said is not None and said.group(1) == said.group(2) == str(len(led)), cluster.log_tail(gone)
    for group in led:
        _wait_for(f"{group} led again", functools.partial(_leader_changes, cluster, gone, group))
        changes = _leader_changes(cluster, gone, group)
        assert [cause for _, cause in changes] == ["transfer"], (group, changes)

    async def produce_everywhere() -> None:
        async with RaftlogClient([survivor], retries=20) as client:
            for p in range(PARTITIONS):
                await client.produce("t", [Message(f"after-{p}")], partition=p)

    asyncio.run(asyncio.wait_for(produce_everywhere(), WAIT_S))

    # 2. The control: the same node, started again with --controlled-shutdown-ms 0, is given a partition
    # to lead and stopped: that group changes leader by its followers' election, which the check above
    # refuses.
    cluster.argv[gone] = [*cluster.argv[gone], "--controlled-shutdown-ms", "0"]
    cluster.start(gone)
    cluster.wait_ready([gone])

    async def lead_one() -> str:
        async with RaftlogClient([survivor], retries=20) as client:
            await client.cluster.transfer_leadership("t", 0, gone)
            deadline = time.monotonic() + WAIT_S
            while (await client.cluster.partition_state("t", 0)).get("leader") != gone:
                assert time.monotonic() < deadline, f"t/0 not led by {gone}"
                await asyncio.sleep(0.05)
        return "t-0"

    group = asyncio.run(asyncio.wait_for(lead_one(), WAIT_S))
    before = len(_leader_changes(cluster, gone, group))
    assert cluster.stop(gone) == 0, cluster.log_tail(gone)
    _wait_for(f"{group} led again", lambda: len(_leader_changes(cluster, gone, group)) > before)
    assert [cause for _, cause in _leader_changes(cluster, gone, group)[before:]] == ["election"]
    off = re.findall(
        r"handed over 0 of (\d+) leaderships in [\d.]+ s \((\d+) kept: controlled shutdown off\)",
        _log(cluster, gone),
    )
    assert len(off) == 1 and off[0][0] == off[0][1] != "0", off  # the pass did not run
