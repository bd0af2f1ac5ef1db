"""Commits/s of N stock pysyncobj Raft groups over the mux transport vs stock TCPTransport.

Three node processes on 127.0.0.1. mux-poll runs the hub's I/O on the driver thread (``hub.poll``),
mux-thread on the hub's own I/O thread (``hub.start``), stock is pysyncobj's TCPTransport (one port per
replica, pickle + zlib). Each process hosts one replica of every group and ONE driver thread
that ticks all of its groups with doTick(0) and keeps ``--inflight`` commands of ``--payload`` bytes in
flight in every group it leads. Both transports run in the same invocation with the same settings.

    .venv/bin/python scripts/bench_transport.py --groups 20 --seconds 5

Prints one line per transport. A benchmark, not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import queue
import resource
import socket
import sys
import time
from typing import Any

from pysyncobj import SyncObj, SyncObjConf, replicated
from pysyncobj.node import Node

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from raftlog.consensus.transport import MuxHub, MuxTransport

NODES = 3


class Log(SyncObj):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.count = 0

    @replicated  # type: ignore[untyped-decorator]
    def append(self, payload: bytes) -> int:
        self.count += 1
        return self.count


def free_ports(count: int) -> list[int]:
    sockets = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def conf() -> SyncObjConf:
    return SyncObjConf(
        autoTick=False,
        raftMinTimeout=2.0,
        raftMaxTimeout=4.0,
        leaderFallbackTimeout=8.0,
        connectionTimeout=8.0,
        logCompactionMinEntries=10**9,
        logCompactionMinTime=10**9,
        bindAddress=None,
    )


def build_mux(
    index: int, ports: list[int], groups: int, secret: bytes, threaded: bool
) -> tuple[list[Log], MuxHub]:
    node_id = f"n{index}"
    hub = MuxHub(node_id, f"127.0.0.1:{ports[index]}", secret)
    for other in range(NODES):
        if other != index:
            hub.set_peer(f"n{other}", f"127.0.0.1:{ports[other]}")
    if threaded:
        hub.start()
    others = [Node(f"n{o}") for o in range(NODES) if o != index]
    objs = [
        Log(
            Node(node_id),
            others,
            conf(),
            nodeClass=Node,
            transportClass=functools.partial(MuxTransport, hub=hub, group=f"g{g}"),
        )
        for g in range(groups)
    ]
    return objs, hub


def build_stock(index: int, ports: list[int], groups: int) -> list[Log]:
    objs = []
    for g in range(groups):
        addresses = [f"127.0.0.1:{ports[g * NODES + i]}" for i in range(NODES)]
        c = conf()
        c.bindAddress = addresses[index]
        objs.append(Log(addresses[index], [a for i, a in enumerate(addresses) if i != index], c))
    return objs


def node_main(
    index: int,
    kind: str,
    ports: list[int],
    args: argparse.Namespace,
    secret: bytes,
    control: Any,
    results: Any,
) -> None:
    hub = None
    polled = kind == "mux-poll"
    if kind.startswith("mux"):
        objs, hub = build_mux(index, ports, args.groups, secret, threaded=not polled)
    else:
        objs = build_stock(index, ports, args.groups)

    def sweep() -> None:
        for obj in objs:
            obj.doTick(0.0)
        if hub is None:
            time.sleep(0.001)
        elif polled:
            hub.poll(0.001)
        else:
            hub.wait_inbound(0.001)

    # warm-up: until every group has a leader in this node's view, then wait for "go"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(o._getLeader() is not None for o in objs):
        sweep()
    results.put(("ready", index, sum(o._getLeader() is not None for o in objs)))
    while control.value == 0:
        sweep()

    payload = b"x" * args.payload
    inflight = [0] * len(objs)
    done = [0]
    failed = [0]

    def callback(group: int, result: Any, error: int) -> None:
        inflight[group] -= 1
        if error == 0:
            done[0] += 1
        else:
            failed[0] += 1

    callbacks = [functools.partial(callback, g) for g in range(len(objs))]
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        for g, obj in enumerate(objs):
            if obj._isLeader():
                room = min(args.inflight - inflight[g], 200)
                for _ in range(room):
                    obj.append(payload, callback=callbacks[g])
                inflight[g] += max(room, 0)
            obj.doTick(0.0)
        if polled and hub is not None:
            hub.poll(0.0)
    elapsed = time.monotonic() - start
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (usage1.ru_utime + usage1.ru_stime - usage0.ru_utime - usage0.ru_stime) / elapsed
    results.put(("done", index, done[0], failed[0], elapsed, cpu, hub.stats() if hub else {}))
    while control.value == 1:  # keep serving the others until everyone has finished measuring
        sweep()
    for obj in objs:
        obj.destroy()
    if hub is not None:
        hub.close()


def run(kind: str, args: argparse.Namespace) -> None:
    ctx = mp.get_context("spawn")
    ports = free_ports(NODES if kind.startswith("mux") else NODES * args.groups)
    control = ctx.Value("i", 0)
    results = ctx.Queue()
    secret = os.urandom(32)
    procs = [
        ctx.Process(target=node_main, args=(i, kind, ports, args, secret, control, results), daemon=True)
        for i in range(NODES)
    ]
    for p in procs:
        p.start()
    try:
        ready = [results.get(timeout=60) for _ in procs]
        leaders_known = min(r[2] for r in ready)
        control.value = 1
        done = [results.get(timeout=args.seconds + 60) for _ in procs]
        control.value = 2
    except queue.Empty:
        print(f"{kind}: node processes did not report in time", file=sys.stderr)
        control.value = 2
        for p in procs:
            p.terminate()
        return
    for p in procs:
        p.join(30)
        if p.is_alive():
            p.terminate()
    commits = sum(d[2] for d in done)
    failures = sum(d[3] for d in done)
    elapsed = max(d[4] for d in done)
    cpu = sum(d[5] for d in done)
    extra = ""
    if kind.startswith("mux"):
        sent = sum(d[6].get("messages_sent", 0) for d in done)
        frames = sum(d[6].get("frames_sent", 0) for d in done)
        drops = sum(
            d[6].get(k, 0)
            for d in done
            for k in ("dropped_queue_full", "dropped_inbox_full", "dropped_unknown_group")
        )
        extra = f", {sent / max(frames, 1):.1f} msgs/frame, {drops} messages dropped"
    print(
        f"{kind:10s} groups={args.groups} payload={args.payload}B inflight/group={args.inflight}: "
        f"{commits / elapsed:9.0f} commits/s ({commits} in {elapsed:.1f}s, {failures} failed, "
        f"leaders known at start {leaders_known}/{args.groups}, "
        f"CPU {cpu * 100:.0f}% of a core summed{extra})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--payload", type=int, default=100)
    parser.add_argument("--inflight", type=int, default=1000, help="commands in flight per led group")
    parser.add_argument(
        "--transports",
        default="mux-poll,mux-thread,stock",
        help="comma-separated: mux-poll (hub I/O on the driver thread), mux-thread (hub I/O thread), stock",
    )
    args = parser.parse_args()
    print(
        f"# {os.cpu_count()} CPUs, python {sys.version.split()[0]}, 3 node processes on 127.0.0.1", flush=True
    )
    for kind in args.transports.split(","):
        if kind not in ("mux-poll", "mux-thread", "stock"):
            parser.error(f"unknown transport {kind!r}")
        run(kind, args)


if __name__ == "__main__":
    main()
