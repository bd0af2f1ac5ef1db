"""How long each thread of some processes ran, and how long it waited for a CPU, over a window.

    .venv/bin/python scripts/sched_waits.py --match "serve --node-id" --match "bench perf" \
        --delay 12 --seconds 10

Reads ``/proc/PID/task/TID/schedstat`` (time on a CPU, time runnable but waiting on a run queue, and
time slices) at the start and end of the window, for every process whose command line contains one of
the ``--match`` strings. A thread's "run-queue wait" is time it was ready to run and no CPU was free: on
a machine where the servers and the load generator share two cores, that is where a request's latency
goes beyond its own CPU time. The main thread of a node is its event loop (HTTP); its busiest other
thread is the Raft driver. Start it alongside a benchmark: ``--delay`` skips the benchmark's start-up."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sample:
    run_ns: int
    wait_ns: int
    slices: int


def processes(patterns: list[str]) -> dict[int, str]:
    """pid -> a short label (the node id after ``--node-id``, else the first match), for every process
    whose command line contains one of ``patterns`` (this one excluded)."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                argv = file.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        line = " ".join(argv)
        if any(pattern in line for pattern in patterns):
            found[int(entry)] = argv[argv.index("--node-id") + 1] if "--node-id" in argv else f"pid {entry}"
    return found


def snapshot(pids: dict[int, str]) -> dict[tuple[int, int], Sample]:
    samples: dict[tuple[int, int], Sample] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as file:
                    run_ns, wait_ns, slices = (int(field) for field in file.read().split())
            except (OSError, ValueError):
                continue
            samples[(pid, int(tid))] = Sample(run_ns, wait_ns, slices)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--match", action="append", required=True, help="command-line substring (repeatable)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before the window (0)")
    parser.add_argument("--seconds", type=float, default=10.0, help="window length (10)")
    parser.add_argument("--min-run-pct", type=float, default=0.5, help="hide threads that ran less (0.5)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.delay < 0:
        parser.error("--seconds must be > 0 and --delay >= 0")
    if not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"):
        print("this kernel does not provide /proc/*/schedstat (CONFIG_SCHED_INFO)", file=sys.stderr)
        return 2
    time.sleep(args.delay)
    pids = processes(args.match)
    if not pids:
        print(f"no process matches {args.match}", file=sys.stderr)
        return 2
    before, start = snapshot(pids), time.monotonic()
    time.sleep(args.seconds)
    after, elapsed = snapshot(pids), time.monotonic() - start
    rows = []
    for key, end in after.items():
        begin = before.get(key)
        if begin is None:
            continue
        run = (end.run_ns - begin.run_ns) / 1e9 / elapsed * 100
        if run < args.min_run_pct:
            continue
        wait = (end.wait_ns - begin.wait_ns) / 1e9 / elapsed * 100
        slices = end.slices - begin.slices
        per_slice_us = (end.wait_ns - begin.wait_ns) / max(1, slices) / 1e3
        role = "main" if key[0] == key[1] else f"tid {key[1]}"
        rows.append((pids[key[0]], role, run, wait, slices / elapsed, per_slice_us))
    rows.sort(key=lambda row: (row[0], -row[2]))
    print(f"{len(pids)} processes over {elapsed:.1f} s; % of one core")
    head = ("run %", "run-queue wait %", "slices/s", "wait/slice µs")
    print(f"{'process':10} {'thread':10} {head[0]:>7} {head[1]:>17} {head[2]:>9} {head[3]:>14}")
    for label, role, run, wait, rate, per_slice in rows:
        print(f"{label:10} {role:10} {run:7.1f} {wait:17.1f} {rate:9.0f} {per_slice:14.1f}")
    total_run = sum(row[2] for row in rows)
    total_wait = sum(row[3] for row in rows)
    print(f"{'all':10} {'':10} {total_run:7.1f} {total_wait:17.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
