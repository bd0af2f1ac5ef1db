"""A node's CPU counts the processes it started (its JSON worker parses large bodies): a child that
spent CPU is counted in its parent's."""

from __future__ import annotations

import os
import subprocess
import sys

from raftlog_bench.cpu import process_cpu_s

CHILD_CPU_S = 0.3  # what the child spends before it waits to be ended


def test_a_process_cpu_includes_its_live_children() -> None:
    spin = (
        "import sys, time\n"
        f"while time.process_time() < {CHILD_CPU_S}: pass\n"
        "print('spent', flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", spin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "spent"
        own = os.times()
        own_s = own.user + own.system
        counted = process_cpu_s(os.getpid())
        assert counted is not None
        assert counted - own_s >= CHILD_CPU_S - 0.05, (counted, own_s)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
