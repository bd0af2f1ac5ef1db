"""The phases of ``raftlog bench perf`` that only raftlog runs, on a cluster it reaches over HTTP: the idle
CPU of nodes holding ``--idle-partitions`` partitions, and, on the cluster started here, the time a node
holding a partition of ``--restart-mib`` MiB takes to serve again after SIGKILL and a start with the same
argv."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from typing import Any

from raftlog_bench.cpu import CpuMeter
from raftlog_bench.perf_phases import ERROR_BACKOFF_S
from raftlog_bench.perf_report import IdleResult, RestartResult, cpu_percentages
from raftlog_bench.raftlog_target import RaftlogTarget
from raftlog_bench.tally import Tally, showing
from raftlog_bench.targets import Layout, SendFailed
from raftlog_client.errors import ClientError
from raftlog_client.local_cluster import LocalCluster, alive
from raftlog_client.session import Session
from raftlog_contract import READY_PATH, partitions_path, records_path

KiB = 1024
MiB = 1024 * 1024
RESTART_TIMEOUT_S = 120.0
RESTART_FILL_TIMEOUT_S = 900.0
IDLE_SETTLE_S = 5.0


async def idle_phase(
    target: RaftlogTarget, partitions: int, seconds: float, pids: dict[str, int]
) -> IdleResult:
    name = f"perf_idle_{os.getpid()}"
    created_s = await target.http.create_topic(name, partitions)
    try:
        await asyncio.sleep(IDLE_SETTLE_S)
        meter = CpuMeter(pids)
        await asyncio.sleep(seconds)
        cpu = meter.stop()
    finally:
        await target.http.delete_topic(name)
    servers, _, other = cpu_percentages(cpu)
    return IdleResult(partitions, cpu.seconds, servers, other, created_s)


async def _get_json(session: Session, url: str, **params: Any) -> tuple[int, Any]:
    """One GET, its status and decoded body; (0, None) when it got no answer or no JSON."""
    try:
        answer = await session.exchange("GET", url, params=params, timeout_s=2)
        return answer.status, (json.loads(answer.body) if answer.body else None)
    except (ClientError, ValueError):
        return 0, None


async def restart_phase(
    target: RaftlogTarget, cluster: LocalCluster, mib: int, pids: dict[str, int]
) -> RestartResult:
    """Fill one partition (RF 3) with ``mib`` MiB, SIGKILL its leader's node, start it again with the
    same argv, and time until it is ready and until it answers a fetch of the last record."""
    name = f"perf_restart_{os.getpid()}"
    layout = Layout(name, 1, KiB, 1000)
    await target.create(layout)
    tally = Tally()
    fill_bytes = mib * MiB
    start = time.perf_counter()
    deadline = start + RESTART_FILL_TIMEOUT_S

    async def writer(j: int) -> None:
        while tally.records * KiB < fill_bytes and time.perf_counter() < deadline:
            # Not `tally.records += await ...`: that reads the count before the await and so loses
            # what the other writers added meanwhile.
            try:
                acked = await target.send_batch(j, 0)
            except SendFailed as exc:
                tally.errors[exc.key] += 1
                await asyncio.sleep(ERROR_BACKOFF_S)
            else:
                tally.records += acked

    async with showing(f"restart: filling {mib} MiB", 0.0, tally):
        await asyncio.gather(*(writer(j) for j in range(4)))
    fill_s = time.perf_counter() - start
    session = target.http.session
    status, views = await _get_json(session, target.servers[0] + partitions_path(name))
    leader = views[0].get("leader") if status == 200 and views else None
    node = leader if leader in cluster.pids else sorted(cluster.pids)[0]
    url = cluster.urls[node]
    with open(os.path.join(cluster.directory, "cluster.json"), encoding="utf-8") as f:
        argv = next(n["argv"] for n in json.load(f)["nodes"] if n["id"] == node)
    meter = CpuMeter(dict(pids))  # the restarted node's CPU counts as "other" (it has a new pid)
    last = tally.records - 1
    os.kill(cluster.pids[node], signal.SIGKILL)
    killed_at = time.perf_counter()
    while alive(cluster.pids[node]) and time.perf_counter() - killed_at < 10:
        await asyncio.sleep(0.01)
    with open(os.path.join(cluster.directory, node, "node.log"), "ab") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    cluster.pids[node] = process.pid
    pids[node] = process.pid
    restarted = time.perf_counter()
    ready_s = serving_s = RESTART_TIMEOUT_S
    while time.perf_counter() - restarted < RESTART_TIMEOUT_S:
        status, _ = await _get_json(session, url + READY_PATH)
        if status == 200 and ready_s == RESTART_TIMEOUT_S:
            ready_s = time.perf_counter() - restarted
        if status == 200:
            status, rows = await _get_json(
                session, url + records_path(name, 0), offset=last, max_bytes=4 * KiB
            )
            if status == 200 and rows and rows[0].get("offset") == last:
                serving_s = time.perf_counter() - restarted
                break
        await asyncio.sleep(0.02)
    cpu = meter.stop()
    await target.delete()
    return RestartResult(
        partition_mib=tally.records * KiB / MiB,
        node=node,
        was_leader=node == leader,
        fill_seconds=fill_s,
        ready_seconds=ready_s,
        serving_seconds=serving_s,
        other_cpu_pct=cpu.other_pct,
    )
