"""How fast ``raftlog log migrate`` rewrites logs of batch format v1: on a copy of the committed fixture,
and on a data directory of ``--megabytes`` of generated v1 logs.

    .venv/bin/python scripts/bench_migrate.py [--megabytes 200] [--logs 4] [--records-per-batch 100]
                                              [--value-bytes 100] [--dir DIR]

The v1 batches are written by the tests' writer (tests/storage/legacy_v1.py, checked there to write the
old node's bytes exactly): nothing in raftlog writes that format any more. Each run is the real command
in a subprocess (``--dry-run`` first: the plan alone), timed from outside; the command's own summary is
printed too. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "storage"))

from legacy_v1 import encode_v1, write_v1_log  # noqa: E402 (the tests' writer, found above)

from raftlog.storage import ProducerRecord  # noqa: E402

FIXTURE = os.path.join(REPO_ROOT, "tests", "fixtures", "legacy-v1-datadir")
SEGMENT_BYTES = 64 * 1024 * 1024


def generate(data_dir: str, megabytes: int, logs: int, per_batch: int, value_bytes: int) -> int:
    """``logs`` partition logs of v1 batches, ``megabytes`` in all; returns the bytes written."""
    records = [
        ProducerRecord(os.urandom(value_bytes // 2).hex().encode()[:value_bytes], b"key-%d" % i,
                       (("source", b"bench"),) if i % 10 == 0 else (), 1_700_000_000_000 + i)
        for i in range(per_batch)
    ]  # fmt: skip
    total = 0
    for log in range(logs):
        segments: list[list[bytes]] = [[]]
        size = offset = sequence = 0
        while size < megabytes * 2**20 // logs:
            batch = encode_v1(offset, records, 1 + offset // 1_000_000, 42 + log, sequence)
            if sum(map(len, segments[-1])) + len(batch) > SEGMENT_BYTES:
                segments.append([])
            segments[-1].append(batch)
            offset += per_batch
            sequence += per_batch
            size += len(batch)
        write_v1_log(os.path.join(data_dir, "logs", f"bench-{log}.1"), segments)
        total += size
    return total


def run(data_dir: str, *extra: str) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": REPO_ROOT}
    argv = [sys.executable, "-m", "raftlog_cli", "log", "migrate", *extra, data_dir]
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600, check=False)
    elapsed_s = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}")
    return elapsed_s, done.stdout.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=200, help="v1 data to generate (default 200)")
    parser.add_argument("--logs", type=int, default=4, help="partition logs it is spread over (default 4)")
    parser.add_argument("--records-per-batch", type=int, default=100)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--dir", help="where to generate (default: a temporary directory, removed after)")
    args = parser.parse_args()
    scratch = args.dir or tempfile.mkdtemp(prefix="raftlog-bench-migrate-")
    try:
        fixture = os.path.join(scratch, "fixture")
        shutil.copytree(FIXTURE, fixture)
        elapsed_s, summary = run(fixture)
        print(f"fixture, {_bytes_of(fixture)} bytes of logs: {elapsed_s:.2f} s with the process start")
        print(f"  {summary}")

        node = os.path.join(scratch, "node")
        started = time.monotonic()
        size = generate(node, args.megabytes, args.logs, args.records_per_batch, args.value_bytes)
        megabytes = size / 2**20
        print(f"generated {megabytes:.0f} MiB of v1 in {args.logs} logs ({time.monotonic() - started:.1f} s)")
        elapsed_s, summary = run(node, "--dry-run")
        print(f"dry run (the plan: framing, CRC, headers): {elapsed_s:.2f} s with the process start")
        elapsed_s, summary = run(node)
        print(f"migrate: {elapsed_s:.2f} s, {megabytes / elapsed_s:.1f} MiB/s with the process start")
        print(f"  {summary}")
    finally:
        if not args.dir:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


def _bytes_of(root: str) -> int:
    return sum(
        os.path.getsize(os.path.join(path, name))
        for path, _, names in os.walk(root)
        for name in names
        if name.endswith(".log") and os.sep + "logs" + os.sep in os.path.join(path, name)
    )


if __name__ == "__main__":
    sys.exit(main())
