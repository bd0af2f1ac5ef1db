"""Idle cost and pipelined throughput of many Raft groups driven by one Driver thread per node.

Starts ``--nodes`` processes (one per node, 127.0.0.1 only); each hosts ``--groups`` replicas (RaftCore +
stock TCPTransport, one port per replica) ticked by ONE Driver thread. Once every group has a leader, each
process measures its own CPU time over ``--seconds`` of idleness (heartbeats only). With
``--load-seconds`` a client thread per process then keeps ``--window`` proposals of ``--payload`` bytes in
flight on every group it leads and reports commits/s and latency.

    .venv/bin/python scripts/bench_consensus.py --groups 100 --nodes 3 --seconds 10
    .venv/bin/python scripts/bench_consensus.py --groups 1 --seconds 1 --load-seconds 5 --journal disk

Benchmarks print numbers; they assert nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from raftlog_bench.processes import free_ports

HERE = os.path.dirname(os.path.abspath(__file__))


class NullStateMachine:
    def apply(self, index: int, term: int, command: bytes) -> object:
        return index

    def snapshot(self) -> bytes:
        return b""

    def restore(self, snapshot: bytes) -> None:
        raise RuntimeError("no snapshots in this benchmark")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def node_main(spec: dict[str, object]) -> None:
    from pysyncobj.transport import TCPTransport

    from raftlog.consensus.config import CoreConfig
    from raftlog.consensus.core import RaftCore
    from raftlog.consensus.driver import Driver

    me = int(spec["node"])  # type: ignore[call-overload]
    groups: list[list[str]] = spec["groups"]  # type: ignore[assignment]
    driver = Driver(name=f"node{me}", idle_tick_ms=int(spec["idle_tick_ms"]))  # type: ignore[call-overload]
    from raftlog.consensus.file_journal import open_journal

    cores = []
    workdir = str(spec["workdir"])
    for number, addresses in enumerate(groups):
        address = addresses[me]
        config = CoreConfig(
            bind_address=address,
            heartbeat_period_ms=int(spec["heartbeat_ms"]),  # type: ignore[call-overload]
        )
        directory = os.path.join(workdir, f"n{me}-g{number}") if spec["journal"] == "disk" else None
        core = RaftCore(
            address,
            [a for a in addresses if a != address],
            NullStateMachine(),
            config,
            journal=open_journal(directory),
            poller=driver.poller,
            transport_class=TCPTransport,  # stock pysyncobj's (pickling), named: a loopback benchmark
        )
        driver.add(core)
        cores.append(core)
    driver.start()
    deadline = time.monotonic() + 60
    while any(core.leader_id is None for core in cores):
        if time.monotonic() > deadline:
            print(json.dumps({"error": "no leader for some groups after 60 s"}), flush=True)
            return
        time.sleep(0.1)
    print(
        json.dumps({"ready": True, "leading": sum(core.role.value == "leader" for core in cores)}), flush=True
    )
    sys.stdin.readline()  # GO
    ticks0, loops0 = driver.ticks, driver.loops
    cpu0, wall0 = cpu_seconds(), time.monotonic()
    time.sleep(float(spec["seconds"]))  # type: ignore[arg-type]
    cpu1, wall1 = cpu_seconds(), time.monotonic()
    print(
        json.dumps(
            {
                "cpu_pct": 100 * (cpu1 - cpu0) / (wall1 - wall0),
                "ticks_per_s": (driver.ticks - ticks0) / (wall1 - wall0),
                "loops_per_s": (driver.loops - loops0) / (wall1 - wall0),
                "leading": sum(core.role.value == "leader" for core in cores),
            }
        ),
        flush=True,
    )
    load_s = float(spec["load_seconds"])  # type: ignore[arg-type]
    if load_s > 0:
        sys.stdin.readline()  # LOAD
        print(
            json.dumps(run_load(cores, driver, load_s, int(spec["window"]), int(spec["payload"]))), flush=True
        )  # type: ignore[call-overload]
    sys.stdin.readline()  # QUIT
    driver.stop()
    os._exit(0)


def run_load(
    cores: list[object], driver: object, seconds: float, window: int, payload_bytes: int
) -> dict[str, object]:
    led = [core for core in cores if core.role.value == "leader"]  # type: ignore[attr-defined]
    payload = os.urandom(payload_bytes)
    lock = threading.Lock()
    latencies: list[float] = []
    errors: dict[int, int] = {}
    stop = threading.Event()
    semaphores = {id(core): threading.Semaphore(window) for core in led}

    def client() -> None:
        while not stop.is_set():
            submitted = False
            for core in led:
                semaphore = semaphores[id(core)]
                if not semaphore.acquire(blocking=False):
                    continue
                started = time.monotonic()

                def callback(
                    result: object,
                    error: int,
                    started: float = started,
                    semaphore: threading.Semaphore = semaphore,
                ) -> None:
                    semaphore.release()
                    with lock:
                        if error == 0:
                            latencies.append(time.monotonic() - started)
                        else:
                            errors[error] = errors.get(error, 0) + 1

                core.submit(payload, callback)  # type: ignore[attr-defined]
                submitted = True
            if not submitted:
                time.sleep(0.0005)

    thread = threading.Thread(target=client, daemon=True)
    cpu0, wall0 = cpu_seconds(), time.monotonic()
    thread.start()
    time.sleep(seconds)
    stop.set()
    thread.join(5)
    cpu1, wall1 = cpu_seconds(), time.monotonic()
    with lock:
        done = sorted(latencies)

    def pct(p: float) -> float | None:
        return None if not done else 1000 * done[min(len(done) - 1, int(p * len(done)))]

    return {
        "led": len(led),
        "commits_per_s": len(done) / (wall1 - wall0),
        "p50_ms": pct(0.5),
        "p99_ms": pct(0.99),
        "cpu_pct": 100 * (cpu1 - cpu0) / (wall1 - wall0),
        "errors": errors,
    }


def _ask(children: list[subprocess.Popen[str]], word: str) -> list[dict[str, Any]]:
    """Send ``word`` to every node process, then read each one's JSON line of results."""
    for child in children:
        child.stdin.write(word + "\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
    return [json.loads(child.stdout.readline()) for child in children]  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--idle-tick-ms", type=int, default=1000)
    parser.add_argument("--heartbeat-ms", type=int, default=250)
    parser.add_argument("--load-seconds", type=float, default=0.0)
    parser.add_argument("--window", type=int, default=1000, help="proposals in flight per led group")
    parser.add_argument("--payload", type=int, default=100)
    parser.add_argument("--journal", choices=("memory", "disk"), default="memory")
    parser.add_argument("--node-spec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.node_spec:
        node_main(json.loads(args.node_spec))
        return
    ports = free_ports(args.groups * args.nodes)
    groups = [
        [f"127.0.0.1:{ports[g * args.nodes + n]}" for n in range(args.nodes)] for g in range(args.groups)
    ]
    children = []
    workdir = tempfile.mkdtemp(prefix="bench-consensus-")
    for node in range(args.nodes):
        spec = {
            "node": node,
            "groups": groups,
            "seconds": args.seconds,
            "idle_tick_ms": args.idle_tick_ms,
            "heartbeat_ms": args.heartbeat_ms,
            "load_seconds": args.load_seconds,
            "window": args.window,
            "payload": args.payload,
            "journal": args.journal,
            "workdir": workdir,
        }
        children.append(
            subprocess.Popen(
                [sys.executable, __file__, "--node-spec", json.dumps(spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    try:
        started = time.monotonic()
        for child in children:
            line = child.stdout.readline()  # type: ignore[union-attr]
            if "ready" not in line:
                raise SystemExit(f"node failed to start: {line!r}")
        print(
            f"{args.groups} groups x {args.nodes} nodes: all leaders after {time.monotonic() - started:.1f} s"
        )
        results = _ask(children, "GO")
        total = sum(r["cpu_pct"] for r in results)
        for node, result in enumerate(results):
            print(
                f"node {node}: {result['cpu_pct']:.1f}% CPU, {result['ticks_per_s']:.0f} ticks/s, "
                f"{result['loops_per_s']:.0f} driver loops/s, leading {result['leading']} groups"
            )
        print(
            f"idle total: {total:.1f}% of one core for {args.groups * args.nodes} group replicas "
            f"({total / (args.groups * args.nodes):.3f}% per replica); idle_tick_ms={args.idle_tick_ms} "
            f"heartbeat_ms={args.heartbeat_ms}"
        )
        if args.load_seconds > 0:
            loads = _ask(children, "LOAD")
            total_rate = sum(load["commits_per_s"] for load in loads)
            for node, load in enumerate(loads):
                print(
                    f"node {node} load: leads {load['led']}, {load['commits_per_s']:.0f} commits/s, "
                    f"p50 {load['p50_ms']} ms, p99 {load['p99_ms']} ms, CPU {load['cpu_pct']:.0f}%, "
                    f"errors {load['errors']}"
                )
            print(
                f"load total: {total_rate:.0f} commits/s of {args.payload} B, "
                f"window {args.window} per group, "
                f"journal={args.journal}"
            )
        for child in children:
            child.stdin.write("QUIT\n")  # type: ignore[union-attr]
            child.stdin.flush()  # type: ignore[union-attr]
    finally:
        for child in children:
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
