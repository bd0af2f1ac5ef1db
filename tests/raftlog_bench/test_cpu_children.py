"""A node's CPU counts the processes it started (its JSON worker parses large bodies): a child that
spent CPU is counted in its parent's."""

from __future__ import annotations

import os
import subprocess
import sys

from raftlog_bench.cpu import CpuMeter, process_cpu_s

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


def test_helper_processes_cpu_is_the_clients_not_other_processes() -> None:
    """The bench's reader processes (``readers.py``) hand back their CPU seconds; the window counts them
    as the client's, and takes them out of what it calls other processes'."""
    plain = CpuMeter({}).stop()
    helped = CpuMeter({}).stop(children_s=CHILD_CPU_S)
    assert helped.client_s >= CHILD_CPU_S
    assert helped.client_s - CHILD_CPU_S < CHILD_CPU_S  # this process itself spent next to nothing
    assert plain.client_s < CHILD_CPU_S
    # others = the machine's busy time less the client's and the nodes': the readers' seconds are taken
    # out of it (here more than the machine spent in the window: none left for other processes)
    assert helped.other_pct in (None, 0.0)
