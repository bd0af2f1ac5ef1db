"""Consensus-only load: 3 node processes on 127.0.0.1, each a MuxHub and a Driver wired as a node wires
them, holding the same GROUPS Raft groups with file journals; no HTTP, no partitions. Prints, per node and
summed, the CPU of each thread, driver rounds and ticks per second, frames per second, and with a RATE
the proposals' latency and the CPU per proposal. For measuring the consensus layer's fixed costs.

    .venv/bin/python scripts/consensus_load.py --groups 100 --seconds 10             # idle
    .venv/bin/python scripts/consensus_load.py --groups 3 --seconds 8 --rate 300     # 300 proposals/s
    ... --hub-thread     # the hub's socket I/O on its own thread instead of the driver's (as nodes do)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

SETTLE_S = 6.0  # elections settle before measuring
SECRET = b"consensus-load-secret-0123456789"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _thread_cpu_s() -> dict[int, float]:
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    cpu = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        cpu[int(tid)] = (int(fields[11]) + int(fields[12])) / ticks_per_s
    return cpu


async def _node(node_id: str, addresses: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    from raftlog.consensus.cluster import open_mux_group
    from raftlog.consensus.config import CoreConfig
    from raftlog.consensus.driver import Driver
    from raftlog.consensus.hub import MuxHub
    from raftlog.consensus.interface import Role
    from raftlog_bench.counting import CountingMachine

    config = CoreConfig.for_node()
    driver = Driver(name=f"raft-{node_id}", timer_grid_ms=config.timer_grid_ms)
    hub = MuxHub(
        node_id, addresses[node_id], SECRET, peers={n: a for n, a in addresses.items() if n != node_id}
    )
    driver.watch_inbound(hub.inbox.take_ready, wake_fd=hub.inbound_fd())
    if args.hub_thread:
        driver.start()
        hub.start()
    else:  # as a node runs: the hub's I/O on the driver thread
        driver.drive_hub(hub)
        driver.start()
    names = {threading.get_native_id(): "main"}
    groups = []
    for g in range(args.groups):
        directory = os.path.join(args.dir, node_id, f"g{g}")
        os.makedirs(directory, exist_ok=True)
        groups.append(
            await open_mux_group(
                f"g{g}", node_id, sorted(addresses), CountingMachine(), driver, hub, config, directory
            )
        )
    for thread, name in ((driver.thread, "driver"), (hub._thread, "hub")):
        if thread is not None and thread.native_id is not None:
            names[thread.native_id] = name
    await asyncio.sleep(SETTLE_S)
    leaders = [group for group in groups if group.core.role is Role.LEADER]
    cpu_before, loops, ticks, stats = _thread_cpu_s(), driver.loops, driver.ticks, hub.stats()
    start = time.monotonic()
    latencies: list[float] = []
    if args.rate and leaders:
        rate = args.rate * len(leaders) / args.groups  # every group gets rate / groups
        pending: set[asyncio.Task[None]] = set()

        async def propose(group: Any) -> None:
            sent = time.monotonic()
            await group.propose(b"x" * 100, 5000)
            latencies.append(time.monotonic() - sent)

        sent = 0
        while time.monotonic() - start < args.seconds:
            sent += 1
            delay = start + sent / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.ensure_future(propose(leaders[sent % len(leaders)]))
            pending.add(task)
            task.add_done_callback(pending.discard)
        if pending:
            await asyncio.wait(pending, timeout=5)
    else:
        await asyncio.sleep(args.seconds)
    elapsed = time.monotonic() - start
    cpu_after, stats_after = _thread_cpu_s(), hub.stats()
    threads: dict[str, float] = {}
    for tid, seconds in cpu_after.items():
        name = names.get(tid, "other")
        threads[name] = threads.get(name, 0.0) + (seconds - cpu_before.get(tid, 0.0)) / elapsed * 100
    result: dict[str, Any] = {
        "node": node_id,
        "cpu_pct": sum(threads.values()),
        "threads_pct": threads,
        "rounds_per_s": (driver.loops - loops) / elapsed,
        "ticks_per_s": (driver.ticks - ticks) / elapsed,
        "frames_in_per_s": (stats_after.get("frames_received", 0) - stats.get("frames_received", 0))
        / elapsed,
        "leaders": len(leaders),
        "proposals": len(latencies),
        "seconds": elapsed,
    }
    if latencies:
        latencies.sort()
        result["p50_ms"] = latencies[len(latencies) // 2] * 1000
        result["p99_ms"] = latencies[int(len(latencies) * 0.99)] * 1000
    await asyncio.sleep(3)  # the other nodes finish measuring before this one leaves
    for group in groups:
        group.close()
    driver.stop()
    hub.close()
    return result


def _summary(rows: list[dict[str, Any]]) -> str:
    cpu = sum(row["cpu_pct"] for row in rows)
    per_thread = {
        name: sum(row["threads_pct"].get(name, 0.0) for row in rows) for name in ("driver", "hub", "main")
    }
    proposals = sum(row["proposals"] for row in rows)
    seconds = max(row["seconds"] for row in rows)
    lines = [
        f"{row['node']}: cpu {row['cpu_pct']:.1f}% rounds/s {row['rounds_per_s']:.0f} ticks/s "
        f"{row['ticks_per_s']:.0f} frames in/s {row['frames_in_per_s']:.0f} leaders {row['leaders']}"
        for row in rows
    ]
    total = (
        f"total: cpu {cpu:.1f}% of one core (driver {per_thread['driver']:.1f}, hub {per_thread['hub']:.1f}, "
        f"main {per_thread['main']:.1f}); ticks/s {sum(row['ticks_per_s'] for row in rows):.0f}"
    )
    if proposals:
        p99 = max(row.get("p99_ms", 0.0) for row in rows)
        per_proposal_us = cpu / 100 * seconds * 1e6 / proposals
        total += f"; {proposals} proposals, {per_proposal_us:.0f} us CPU each, p99 {p99:.1f} ms"
    return "\n".join([*lines, total])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=0.0, help="proposals/s over all groups (0: idle)")
    parser.add_argument("--dir", default=None, help="where journals go (default: a temporary directory)")
    parser.add_argument(
        "--hub-thread",
        action="store_true",
        help="the hub's I/O on its own thread (nodes run it on the driver's)",
    )
    parser.add_argument("--node", help=argparse.SUPPRESS)
    parser.add_argument("--addresses", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not (0 < args.groups <= 1000 and 0 < args.seconds <= 120 and 0 <= args.rate <= 10_000):
        parser.error("need 0 < --groups <= 1000, 0 < --seconds <= 120, 0 <= --rate <= 10000")
    if args.node is not None:
        print(json.dumps(asyncio.run(_node(args.node, json.loads(args.addresses), args))), flush=True)
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        addresses = {f"n{i}": f"127.0.0.1:{_free_port()}" for i in (1, 2, 3)}
        argv = [sys.executable, __file__, "--groups", str(args.groups), "--seconds", str(args.seconds)]
        argv += ["--rate", str(args.rate), "--dir", directory, "--addresses", json.dumps(addresses)]
        argv += ["--hub-thread"] if args.hub_thread else []
        children = [subprocess.Popen([*argv, "--node", node], stdout=subprocess.PIPE) for node in addresses]
        rows: list[dict[str, Any]] = []
        try:
            for child in children:
                out, _ = child.communicate(timeout=args.seconds + SETTLE_S + 120)
                rows.extend(json.loads(line) for line in out.decode().splitlines() if line.startswith("{"))
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                    child.wait()
    print(_summary(sorted(rows, key=lambda row: row["node"])))


if __name__ == "__main__":
    main()
