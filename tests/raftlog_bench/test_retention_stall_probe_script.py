"""scripts/retention_stall_probe.py: both ways of deleting run and report the retention call, and the
remover's way leaves nothing behind."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SCRIPT = ROOT / "scripts" / "retention_stall_probe.py"


@pytest.mark.parametrize("mode", [[], ["--at-once"]])
def test_the_probe_deletes_all_but_the_active_segment_and_reports_it(tmp_path, mode) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--segment-mib", "1", "--segments", "3", "--dir", str(tmp_path), *mode],
        capture_output=True, text=True, timeout=120, check=True, cwd=ROOT,
    )  # fmt: skip
    assert re.search(r"retention deleted 3 segments; the call took [\d.]+ ms", done.stdout), done.stdout
    assert re.search(r"appends from the call on: \d+ calls", done.stdout), done.stdout
    assert re.search(r"syncs from the call on: \d+ calls", done.stdout), done.stdout
    assert list(tmp_path.iterdir()) == []  # its temporary directory, trash included, is gone
