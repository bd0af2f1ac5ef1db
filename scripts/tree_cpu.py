"""The CPU seconds a command and every process it starts spend, whatever else the machine runs:

    python scripts/tree_cpu.py .venv/bin/python -m pytest -q -n 0 tests/storage/test_crash.py

prints ``tree_cpu: exit 0, 12.2 CPU s (user 11.0, system 1.2), 22.0 s wall, load 8.0`` to stderr when the
command and all its descendants have ended. This process is their child subreaper (Linux
``PR_SET_CHILD_SUBREAPER``): a process its parent left behind (a node a test started, a JVM a Spark
session spawned) is reaped here, so its CPU is counted too. ``scripts/suite_cpu.py`` samples every process
of the machine instead, which counts other users' processes on a shared one; this counts only the command's
and measures a test file's cost when others' commands load the machine (its wall time does not)."""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"tree_cpu: prctl failed: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 2
    started = time.monotonic()
    code = subprocess.call(argv)
    while True:  # the orphans re-parented here
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    print(
        f"tree_cpu: exit {code}, {used.ru_utime + used.ru_stime:.1f} CPU s (user {used.ru_utime:.1f}, "
        f"system {used.ru_stime:.1f}), {time.monotonic() - started:.1f} s wall, load {load:.1f}",
        file=sys.stderr,
    )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
