"""What reserving room ahead would cost the Raft journal, against cutting a refused write back (the numbers
of docs/decisions/0014).

    sudo .venv/bin/python scripts/disk_full_probe.py [--dir DIR] [--syncs 2000]

1. Appends of one 4 KiB block with direct I/O and an fdatasync each (the journal's group commit of a
   small produce), into a 64 MiB segment file: growing as it is written (what the journal does), inside
   room reserved at creation (fallocate KEEP_SIZE, and fallocate to full size), and with a fallocate of
   the next block before each write. Prints fdatasync p50/p99 and what reserving a segment cost.
2. On a loop-mounted ext4 (and XFS when mkfs.xfs is there) filled with a ballast: where ENOSPC shows up
   for a buffered write (write or fsync), a direct write, and what cutting a refused write back costs.

Root for part 2 (loop devices); part 1 runs anywhere (``--dir`` on the disk to measure).
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import mmap
import os
import shutil
import statistics
import subprocess
import tempfile
import time

BLOCK = 4096
SEGMENT_BYTES = 64 << 20
FALLOC_FL_KEEP_SIZE = 1
_libc = ctypes.CDLL(None, use_errno=True)


def fallocate(fd: int, mode: int, offset: int, length: int) -> None:
    if _libc.fallocate(fd, mode, ctypes.c_long(offset), ctypes.c_long(length)) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def appends(directory: str, syncs: int, way: str) -> tuple[float, list[float]]:
    """(seconds to set the segment up, fdatasync seconds of each append) for one way of reserving."""
    path = os.path.join(directory, f"segment-{way}.log")
    buffer = mmap.mmap(-1, BLOCK)
    buffer.write(b"r" * BLOCK)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
    try:
        started = time.perf_counter()
        if way == "reserved-keep-size":
            fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, SEGMENT_BYTES)
        elif way == "reserved-full-size":
            fallocate(fd, 0, 0, SEGMENT_BYTES)
        os.fsync(fd)
        setup_s = time.perf_counter() - started
        timings = []
        for position in range(0, syncs * BLOCK, BLOCK):
            if way == "fallocate-each":
                fallocate(fd, FALLOC_FL_KEEP_SIZE, position, BLOCK)
            os.pwrite(fd, buffer, position)
            started = time.perf_counter()
            os.fdatasync(fd)
            timings.append(time.perf_counter() - started)
        return setup_s, timings
    finally:
        os.close(fd)
        os.unlink(path)


def part_one(directory: str, syncs: int) -> None:
    print(f"1. {syncs} direct 4 KiB appends + fdatasync each, in {directory}")
    print(f"   {'way':<22} {'set-up ms':>9} {'p50 us':>8} {'p99 us':>8} {'mean us':>8}")
    for way in ("growing", "reserved-keep-size", "reserved-full-size", "fallocate-each"):
        appends(directory, min(syncs, 200), way)  # warm-up
        setup_s, timings = appends(directory, syncs, way)
        print(
            f"   {way:<22} {setup_s * 1e3:9.2f} {percentile(timings, 0.5) * 1e6:8.0f} "
            f"{percentile(timings, 0.99) * 1e6:8.0f} {statistics.mean(timings) * 1e6:8.0f}"
        )


def mounted(kind: str, root: str) -> str | None:
    mkfs = {"ext4": ["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard"], "xfs": ["mkfs.xfs", "-q", "-f"]}[
        kind
    ]
    if shutil.which(mkfs[0]) is None:
        return None
    image, point = os.path.join(root, f"{kind}.img"), os.path.join(root, kind)
    os.makedirs(point)
    with open(image, "wb") as file:
        file.truncate(320 << 20)
    subprocess.run([*mkfs, image], check=True, capture_output=True)
    subprocess.run(["mount", "-o", "loop", image, point], check=True, capture_output=True)
    return point


def fill(directory: str) -> None:
    fd = os.open(os.path.join(directory, "ballast"), os.O_WRONLY | os.O_CREAT, 0o600)
    size = 0
    for chunk in (64 << 20, 1 << 20, 64 << 10, BLOCK):
        while True:
            try:
                os.posix_fallocate(fd, size, chunk)
            except OSError:
                break
            size += chunk
    os.fsync(fd)
    os.close(fd)


def where_refused(directory: str) -> None:
    """Write 1 MiB through the page cache, then fsync; then 1 MiB with direct I/O; report what failed."""
    path = os.path.join(directory, "buffered")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    written, at = 0, "nowhere"
    try:
        while written < (1 << 20):
            written += os.write(fd, b"b" * BLOCK)
        os.fsync(fd)
    except OSError as error:
        at = f"{'write' if written < (1 << 20) else 'fsync'} ({errno.errorcode[error.errno or 0]})"
    finally:
        os.close(fd)
    print(f"   buffered: {written} bytes written before the refusal, refused at {at}")
    buffer = mmap.mmap(-1, 1 << 20)
    fd = os.open(os.path.join(directory, "direct"), os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        try:
            done = os.pwrite(fd, buffer, 0)
            print(f"   direct: {done} bytes written")
        except OSError as error:
            print(f"   direct: refused at pwrite ({errno.errorcode[error.errno or 0]})")
        started = time.perf_counter()
        for _ in range(100):
            try:
                os.pwrite(fd, buffer, 0)
            except OSError:
                os.ftruncate(fd, 0)  # the journal's cut back
        each_us = (time.perf_counter() - started) * 1e4  # 100 of them
        print(f"   a refused 1 MiB direct write and its cut back: {each_us:.1f} us")
    finally:
        os.close(fd)


def part_two() -> None:
    if os.geteuid() != 0:
        print("2. skipped: loop devices need root")
        return
    root = tempfile.mkdtemp(prefix="disk-full-probe-")
    try:
        for kind in ("ext4", "xfs"):
            point = mounted(kind, root)
            if point is None:
                print(f"2. {kind}: no mkfs.{kind}")
                continue
            try:
                fill(point)
                print(f"2. {kind}, filled ({shutil.disk_usage(point).free} bytes free):")
                where_refused(point)
            finally:
                subprocess.run(["umount", point], check=False)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--dir", default=".", help="a directory on the disk part 1 measures (default .)")
    parser.add_argument("--syncs", type=int, default=2000)
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="disk-full-probe-", dir=args.dir)
    try:
        part_one(directory, args.syncs)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    part_two()


if __name__ == "__main__":
    main()
