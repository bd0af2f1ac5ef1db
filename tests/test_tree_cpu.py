"""``scripts/tree_cpu.py``: the CPU of a command and of every process it started, a process its parent
left behind included, whatever else the machine runs."""

from __future__ import annotations

import pathlib
import re
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "tree_cpu.py"
BUSY = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\n"


def test_an_orphaned_grandchilds_cpu_is_counted_and_the_exit_status_is_the_commands() -> None:
    # bash starts the busy Python in a subshell and exits at once: the busy one is nobody's child but the
    # subreaper's when it ends (a node a test left behind, a JVM a Spark session spawned)
    command = f"({shlex.quote(sys.executable)} -c {shlex.quote(BUSY)} &); exit 3"
    argv = [sys.executable, str(SCRIPT), "bash", "-c", command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3, done.stderr
    spent = re.search(r"tree_cpu: exit 3, ([0-9.]+) CPU s", done.stderr)
    assert spent is not None and float(spent.group(1)) >= 0.5, done.stderr
