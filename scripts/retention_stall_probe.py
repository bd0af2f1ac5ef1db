"""What a retention run costs the partition's writer and every other fsync on the disk: fills a log with
``--segments`` segments of ``--segment-mib`` MiB, then, while one thread appends a 1 KiB batch every
millisecond (as a Raft driver applies entries) and another writes 4 KiB + fdatasync in a loop (as a
journal syncs), lets retention delete all segments but the last. Prints how long the retention call
took and the slowest appends and syncs around it.

    .venv/bin/python scripts/retention_stall_probe.py [--segment-mib 128] [--segments 4] [--dir .]
    ... --at-once     # segments unlinked under the log's lock (a Log's default ``discard``)

By default the log hands deleted segments to a ``removal.Remover`` (as a node does): they leave the
log under its lock by a rename, and the remover deletes them at its pace.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time

from deletion_stall_probe import fsync_loop  # the same 4 KiB write + fdatasync loop (scripts/ is on the path)

from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog.storage.config import LogConfig
from raftlog.storage.log import Log
from raftlog.storage.removal import Remover

MiB = 1 << 20


def fill(log: Log, mib: int) -> None:
    records = [ProducerRecord(value=os.urandom(1000)) for _ in range(1000)]  # ~1 MiB batches
    batch = encode_batch(0, records, 1, int(time.time() * 1000))
    for _ in range(mib):
        log.append_prepared(batch, 1, durable_elsewhere=True, checked_records=True)
    log.flush()


def appender(log: Log, stop: threading.Event, latencies: list[tuple[float, float]]) -> None:
    batch = encode_batch(0, [ProducerRecord(value=b"x" * 1000)], 1, int(time.time() * 1000))
    while not stop.is_set():
        start = time.perf_counter()
        log.append_prepared(batch, 1, durable_elsewhere=True, checked_records=True)
        latencies.append((start, time.perf_counter() - start))
        time.sleep(0.001)


def report(name: str, latencies: list[tuple[float, float]], since: float) -> None:
    values = sorted((d for t, d in latencies if t >= since), reverse=True)
    if not values:
        print(f"  {name}: no calls")
        return
    print(
        f"  {name}: {len(values)} calls, median {statistics.median(values) * 1e3:.2f} ms, "
        f"slowest {', '.join(f'{v * 1e3:.1f}' for v in values[:5])} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segment-mib", type=int, default=128)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--dir", default=".", help="where to write (the file system to probe)")
    parser.add_argument("--at-once", action="store_true", help="unlink under the log's lock (no remover)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="retention-probe-", dir=args.dir) as root:
        remover = None if args.at_once else Remover(name="probe-remover")
        trash = os.path.join(root, "trash")
        os.makedirs(trash)

        def discard(path: str) -> None:
            target = os.path.join(trash, os.path.basename(path))
            os.rename(path, target)
            assert remover is not None
            remover.submit(target)

        config = LogConfig.from_properties({"segment.bytes": args.segment_mib * MiB, "retention.bytes": 1})
        log = Log.open(os.path.join(root, "log"), config, discard=os.unlink if remover is None else discard)
        fill(log, args.segment_mib * args.segments)
        os.sync()
        print(
            f"{log.segment_count} segments of {args.segment_mib} MiB; deleting: "
            f"{'at once' if args.at_once else 'through a remover'}"
        )
        stop = threading.Event()
        appends: list[tuple[float, float]] = []
        syncs: list[tuple[float, float]] = []
        threads = [
            threading.Thread(target=appender, args=(log, stop, appends)),
            threading.Thread(target=fsync_loop, args=(os.path.join(root, "journal"), stop, syncs)),
        ]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        before = time.perf_counter()
        report("appends before", appends, before - 1.0)
        report("syncs before", syncs, before - 1.0)
        deleted = log.apply_retention(int(time.time() * 1000))
        took = time.perf_counter() - before
        deadline = time.monotonic() + 120
        while remover is not None and remover.pending() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        stop.set()
        for thread in threads:
            thread.join()
        print(
            f"retention deleted {deleted} segments; the call took {took * 1e3:.1f} ms "
            f"(removal done after {time.perf_counter() - before:.1f} s)"
        )
        report("appends from the call on", appends, before)
        report("syncs from the call on", syncs, before)
        log.close()
        if remover is not None:
            remover.close()


if __name__ == "__main__":
    main()
