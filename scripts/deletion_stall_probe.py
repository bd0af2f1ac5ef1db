"""How long a file deletion holds up other writers' fsyncs on this file system, removed at once and at the
pace ``raftlog.storage.removal`` uses (the justification for that pace).

    .venv/bin/python scripts/deletion_stall_probe.py [--mib 2000] [--dir .] [--paces 0,64,256]

For each pace (MiB/s; 0 = one unlink) it writes a file of ``--mib`` MiB, syncs, then removes it while
another thread writes 4 KiB + fdatasync in a loop, and prints that loop's slowest calls. On ext4 mounted
with ``discard`` the freed blocks are discarded by the journal commit every fsync waits for.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time

from raftlog.storage.removal import STEP_BYTES, remove_tree

MiB = 1 << 20


def fsync_loop(path: str, stop: threading.Event, latencies: list[tuple[float, float]]) -> None:
    """4 KiB write + fdatasync at ``path`` until ``stop``; each call's (start, seconds) into ``latencies``."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    block = b"x" * 4096
    offset = 0
    try:
        while not stop.is_set():
            start = time.perf_counter()
            os.pwrite(descriptor, block, offset)
            os.fdatasync(descriptor)
            latencies.append((start, time.perf_counter() - start))
            offset = (offset + 4096) % (64 * MiB)
    finally:
        os.close(descriptor)


def write_file(path: str, mib: int) -> None:
    chunk = os.urandom(MiB)
    with open(path, "wb") as file:
        for _ in range(mib):
            file.write(chunk)
        file.flush()
        os.fsync(file.fileno())


def probe(directory: str, mib: int, pace_mib_s: float) -> tuple[float, list[float], int]:
    victim = os.path.join(directory, "victim")
    os.makedirs(victim)
    write_file(os.path.join(victim, "data"), mib)
    os.sync()
    stop = threading.Event()
    latencies: list[tuple[float, float]] = []
    writer = threading.Thread(target=fsync_loop, args=(os.path.join(directory, "probe"), stop, latencies))
    writer.start()
    time.sleep(1.0)
    started = time.perf_counter()
    remove_tree(victim, bytes_per_s=pace_mib_s * MiB if pace_mib_s > 0 else None)
    removed_s = time.perf_counter() - started
    time.sleep(2.0)  # discards of the last steps land in commits after the removal returns
    stop.set()
    writer.join()
    os.unlink(os.path.join(directory, "probe"))
    return removed_s, sorted((seconds for _, seconds in latencies), reverse=True)[:5], len(latencies)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=int, default=2000, help="size of the deleted file (2000)")
    parser.add_argument("--dir", default=".", help="where to write (the file system to probe)")
    parser.add_argument("--paces", default="0,64,256", help="MiB/s, comma-separated; 0 = at once")
    args = parser.parse_args()
    if args.mib < 1:
        parser.error("--mib must be >= 1")
    paces = [float(p) for p in args.paces.split(",")]
    if any(p < 0 for p in paces):
        parser.error("--paces must be >= 0")
    print(f"step {STEP_BYTES // MiB} MiB; a {args.mib} MiB file removed while 4 KiB writes + fdatasync run")
    for pace in paces:
        with tempfile.TemporaryDirectory(dir=args.dir, prefix="stall-probe-") as directory:
            removed_s, slowest, count = probe(directory, args.mib, pace)
        label = "at once" if pace == 0 else f"{pace:g} MiB/s"
        slow = ", ".join(f"{s * 1000:.1f}" for s in slowest)
        print(f"{label:>12}: removed in {removed_s:5.2f} s; {count} fsyncs, slowest ms: {slow}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
