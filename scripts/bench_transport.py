"""Commits/s of N Raft groups over the mux transport vs pysyncobj's stock TCPTransport, in one run.

Three node processes on 127.0.0.1. mux-poll runs the hub's I/O on the driver thread (``hub.poll``),
mux-thread on the hub's own I/O thread (``hub.start``), stock is pysyncobj's TCPTransport (one port per
replica, pickle + zlib). Each process hosts one replica of every group and ONE driver thread that ticks
all of its groups with doTick(0) and keeps ``--inflight`` commands of ``--payload`` random (incompressible)
bytes in flight in every group it leads. ``--core stock`` uses pysyncobj's SyncObj, ``--core patched``
the project's RaftCore (memory journal). First it prints the CPU cost of the two codecs alone.

    .venv/bin/python scripts/bench_transport.py --groups 20 --seconds 5
    .venv/bin/python scripts/bench_transport.py --groups 20 --seconds 5 --core patched --payload 1024

Prints one line per transport. A benchmark, not a test: it asserts nothing about speed. Runs take about
(--seconds + 10 s) per transport.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import queue
import resource
import sys
import time
from typing import Any

from pysyncobj import SyncObj, SyncObjConf, replicated
from pysyncobj.node import Node
from pysyncobj.transport import TCPTransport

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from raftlog.consensus.hub import MuxHub
from raftlog.consensus.transport import MuxTransport
from raftlog_bench.counting import CountingMachine
from raftlog_bench.processes import free_ports

NODES = 3


class Log(SyncObj):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.count = 0

    @replicated  # type: ignore[untyped-decorator]
    def append(self, payload: bytes) -> int:
        self.count += 1
        return self.count


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


def make_replica(core: str, self_id: str, other_ids: list[str], transport: Any, node_class: Any) -> Any:
    """A replica with stock pysyncobj (``Log``) or the project's patched core (``RaftCore``)."""
    if core == "stock":
        c = conf()
        if transport is None:
            c.bindAddress = self_id
            return Log(self_id, other_ids, c)
        return Log(
            node_class(self_id),
            [node_class(o) for o in other_ids],
            c,
            nodeClass=node_class,
            transportClass=transport,
        )
    from raftlog.consensus.config import CoreConfig
    from raftlog.consensus.core import RaftCore
    from raftlog.consensus.journal import MemoryJournal

    config = CoreConfig(
        election_timeout_min_ms=2000,
        election_timeout_max_ms=4000,
        bind_address=self_id if transport is None else None,
    )
    kwargs: dict[str, Any] = {"node_class": node_class, "transport_class": transport or TCPTransport}
    return RaftCore(self_id, other_ids, CountingMachine(), config, journal=MemoryJournal(), **kwargs)


def submit(core: str, replica: Any, payload: bytes, callback: Any) -> None:
    if core == "stock":
        replica.append(payload, callback=callback)
    else:
        replica.submit(payload, callback)


def build_mux(
    core: str, index: int, ports: list[int], groups: int, secret: bytes, threaded: bool
) -> tuple[list[Any], MuxHub]:
    node_id = f"n{index}"
    hub = MuxHub(node_id, f"127.0.0.1:{ports[index]}", secret)
    for other in range(NODES):
        if other != index:
            hub.peers.set(f"n{other}", f"127.0.0.1:{ports[other]}")
    if threaded:
        hub.start()
    others = [f"n{o}" for o in range(NODES) if o != index]
    objs = [
        make_replica(core, node_id, others, functools.partial(MuxTransport, hub=hub, group=f"g{g}"), Node)
        for g in range(groups)
    ]
    return objs, hub


def build_stock(core: str, index: int, ports: list[int], groups: int) -> list[Any]:
    from pysyncobj.node import TCPNode

    objs = []
    for g in range(groups):
        addresses = [f"127.0.0.1:{ports[g * NODES + i]}" for i in range(NODES)]
        others = [a for i, a in enumerate(addresses) if i != index]
        objs.append(make_replica(core, addresses[index], others, None, TCPNode))
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
        objs, hub = build_mux(args.core, index, ports, args.groups, secret, threaded=not polled)
    else:
        objs = build_stock(args.core, index, ports, args.groups)

    def sweep() -> None:
        for obj in objs:
            obj.doTick(0.0)
        if hub is None:
            time.sleep(0.001)
        elif polled:
            hub.poll(0.001)
        else:
            hub.inbox.wait(0.001)

    # warm-up: until every group has a leader in this node's view, then wait for "go"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(o._getLeader() is not None for o in objs):
        sweep()
    results.put(("ready", index, sum(o._getLeader() is not None for o in objs)))
    while control.value == 0:
        sweep()

    # distinct random payloads, more than zlib's 32 KiB window holds: as incompressible as real records
    payloads = [os.urandom(args.payload) for _ in range(max(64, 2 * 32768 // max(args.payload, 1)))]
    submitted = 0
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
                    submit(args.core, obj, payloads[submitted % len(payloads)], callbacks[g])
                    submitted += 1
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
        f"{kind:10s} core={args.core} groups={args.groups} payload={args.payload}B "
        f"inflight/group={args.inflight}: "
        f"{commits / elapsed:9.0f} commits/s ({commits} in {elapsed:.1f}s, {failures} failed, "
        f"leaders known at start {leaders_known}/{args.groups}, "
        f"CPU {cpu * 100:.0f}% of a core summed{extra})",
        flush=True,
    )


def codec_costs(payload: int) -> None:
    """CPU per message of the two codecs alone (one core, no I/O): msgpack schema codec + HMAC frame
    vs pysyncobj's pickle + zlib level 3 (tcp_connection.py:144, 291)."""
    import pickle
    import timeit
    import zlib

    from raftlog.consensus import wire, wire_batch, wire_messages

    entries_per_message = max(1, (64 * 1024) // (payload + 1))
    samples = {
        "heartbeat": {
            "type": "append_entries",
            "term": 7,
            "commit_index": 123456,
            "entries": [],
            "prevLogIdx": 123456,
            "prevLogTerm": 7,
        },
        f"append_entries {entries_per_message}x{payload}B": {
            "type": "append_entries",
            "term": 7,
            "commit_index": 123456,
            "entries": [(b"\x20" + os.urandom(payload), 123457 + i, 7) for i in range(entries_per_message)],
            "prevLogIdx": 123456,
            "prevLogTerm": 7,
        },
    }
    for name, message in samples.items():
        sender = wire.Session(b"k" * 32, b"j" * 32)
        receiver = wire.Session(b"j" * 32, b"k" * 32)

        def mux_round_trip(
            message: dict[str, Any] = message,
            sender: wire.Session = sender,
            receiver: wire.Session = receiver,
        ) -> None:
            body = wire_batch.BatchEncoder().encode([("topic-a/0", wire_messages.encode_message(message))])
            sealed = sender.seal(wire.KIND_BATCH, body)
            wire_batch.BatchDecoder().decode(receiver.open(wire.KIND_BATCH, sealed[5:]))

        def stock_round_trip(message: dict[str, Any] = message) -> None:
            pickle.loads(zlib.decompress(zlib.compress(pickle.dumps(message), 3)))

        n = 2000 if name == "heartbeat" else 50
        mux_us = min(timeit.repeat(mux_round_trip, number=n, repeat=3)) / n * 1e6
        stock_us = min(timeit.repeat(stock_round_trip, number=n, repeat=3)) / n * 1e6
        print(f"codec {name:26s}: mux {mux_us:8.1f} us, stock pickle+zlib {stock_us:8.1f} us (encode+decode)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--payload", type=int, default=100)
    parser.add_argument("--inflight", type=int, default=1000, help="commands in flight per led group")
    parser.add_argument(
        "--core",
        choices=["stock", "patched"],
        default="stock",
        help="stock pysyncobj SyncObj, or the project's patched core (raftlog.consensus.core.RaftCore)",
    )
    parser.add_argument(
        "--transports",
        default="mux-poll,mux-thread,stock",
        help="comma-separated: mux-poll (hub I/O on the driver thread), mux-thread (hub I/O thread), stock",
    )
    args = parser.parse_args()
    print(
        f"# {os.cpu_count()} CPUs, python {sys.version.split()[0]}, 3 node processes on 127.0.0.1", flush=True
    )
    codec_costs(args.payload)
    for kind in args.transports.split(","):
        if kind not in ("mux-poll", "mux-thread", "stock"):
            parser.error(f"unknown transport {kind!r}")
        run(kind, args)


if __name__ == "__main__":
    main()
