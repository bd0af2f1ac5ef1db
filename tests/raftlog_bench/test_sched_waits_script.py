"""scripts/sched_waits.py: a busy process shows up with its run time, and a pattern matching nothing is an
error, not an empty table."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SCRIPT = ROOT / "scripts" / "sched_waits.py"
MARK = "sched-waits-test-busy-loop"


def test_a_busy_process_is_measured() -> None:
    spin = f"import time\n# {MARK}\nend = time.time() + 10\nwhile time.time() < end: pass"
    busy = subprocess.Popen([sys.executable, "-c", spin])
    try:
        done = subprocess.run(
            [sys.executable, str(SCRIPT), "--match", MARK, "--seconds", "1"],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
    finally:
        busy.kill()
        busy.wait()
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith(f"pid {busy.pid}")]
    assert len(rows) == 1, done.stdout
    _, _, role, run_pct, wait_pct, slices, _ = rows[0]
    assert role == "main"
    # a spinning thread is always running or waiting for a core: the two make nearly the whole second,
    # however they share it on a busy machine (18 % run beside a loaded whole run)
    assert float(run_pct) > 0 and float(wait_pct) >= 0 and float(slices) > 0
    assert float(run_pct) + float(wait_pct) > 80, rows[0]


def test_nothing_matched_is_an_error() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--match", "no-such-process-anywhere-xyz", "--seconds", "0.1"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 2
    assert "no process matches" in done.stderr
