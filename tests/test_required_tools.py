"""A fault test on a machine without its tool fails naming what is missing (``required_tools.py``), and
is skipped only where a developer set ``RAFTLOG_ALLOW_MISSING_TOOLS=1``, which ``.ci/run`` never passes
on. Real tests of the suite run in a pytest of their own whose PATH holds none of the tools (no
``fusermount3``, ``ip`` or ``mkfs.ext4``); the messages expected are the probes' own under that PATH."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest
from required_tools import ALLOW_ENV

from jepsen import control, disks, lazyfs

ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = {  # a test of each kind, and the tool it needs
    "tests/jepsen/test_jepsen_lazyfs.py::test_written_not_synced_is_read_back_and_gone_after_a_clear":
        "lazyfs",
    "tests/jepsen/test_jepsen_runner.py::test_runs_started_at_once_never_claim_the_same_subnet": "netns",
    "tests/storage/test_disk_full.py::"
    "test_a_full_disk_refuses_appends_keeps_reads_and_retention_and_takes_them_again": "small-disks",
}  # fmt: skip


def _outcomes(tmp_path: pathlib.Path, allow: bool) -> dict[str, tuple[str, str]]:
    """Each test's outcome (passed, error, failure, skipped) and message, run with an empty PATH."""
    empty = tmp_path / "no-tools"
    empty.mkdir(exist_ok=True)
    report = tmp_path / f"report-{allow}.xml"
    environment = {k: v for k, v in os.environ.items() if k not in (ALLOW_ENV, "PYTEST_ADDOPTS")}
    environment["PATH"] = str(empty)
    if allow:
        environment[ALLOW_ENV] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", f"--junitxml={report}",
         *TESTS],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert report.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    found = {}
    for case in ElementTree.parse(report).iter("testcase"):
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        result = next(iter(case), None)
        found[name] = ("passed", "") if result is None else (result.tag, result.get("message", ""))
    assert set(found) == set(TESTS), (found, done.stdout[-3000:])
    return found


def _expected(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> dict[str, str]:
    """What each probe says under that PATH (on a machine without root it names root instead)."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    usable, netns = control.netns_available()
    said = {"netns": netns, "lazyfs": lazyfs.unavailable(), "small-disks": disks.unavailable()}
    assert not usable and all(why for why in said.values()), said
    return {name: str(said[tool]) for name, tool in TESTS.items()}


def test_a_missing_fault_tool_fails_the_test_naming_it_unless_a_developer_allows_skipping(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "no-tools").mkdir()
    expected = _expected(monkeypatch, tmp_path)
    failed = _outcomes(tmp_path, allow=False)
    for name, why in expected.items():
        outcome, message = failed[name]
        assert outcome in ("error", "failure"), (name, outcome, message)
        assert why in message and "make bootstrap" in message and ALLOW_ENV in message, (name, message)
    skipped = _outcomes(tmp_path, allow=True)
    for name, why in expected.items():
        outcome, message = skipped[name]
        assert outcome == "skipped" and why in message, (name, outcome, message)


def test_ci_never_passes_the_developers_opt_out_on_to_make_test(tmp_path: pathlib.Path) -> None:
    """``.ci/run`` with the variable set in its environment: the ``make`` it runs does not see it."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "make").write_text(f'#!/bin/sh\necho "make $* {ALLOW_ENV}=${{{ALLOW_ENV}-unset}}"\n')
    (tools / "make").chmod(0o755)
    environment = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", ALLOW_ENV: "1"}
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run")],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"make test {ALLOW_ENV}=unset", done.stdout
