"""``raftlog format``: a new node's data directory prepared to form a cluster at a release's levels, as
``kafka-storage format --release-version``; a directory a node used, or one formatted for other levels,
is refused with nothing written; a node started on it forms the cluster at those levels."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from partitions.features import SUPPORTED, release_levels
from partitions.metadata import local_levels
from raftlog_node.format import FormatRefused, format_data_dir


def test_an_unused_directory_is_formatted_once_for_one_release(tmp_path: pathlib.Path) -> None:
    node = tmp_path / "n1"
    said = format_data_dir(str(node), "0.1.0")
    assert "raftlog.version 1" in said and local_levels.formation(str(node)) == release_levels("0.1.0")
    assert oct(os.stat(node).st_mode & 0o777) == "0o700"
    format_data_dir(str(node), "0.1.0")  # the same again: nothing changes
    with pytest.raises(FormatRefused, match="already formatted"):
        format_data_dir(str(node), "0.2.0")
    assert local_levels.formation(str(node)) == release_levels("0.1.0")


def test_a_directory_a_node_used_or_an_unknown_release_is_refused(tmp_path: pathlib.Path) -> None:
    used = tmp_path / "used"
    (used / "raft").mkdir(parents=True)
    with pytest.raises(FormatRefused, match="was used by a node"):
        format_data_dir(str(used), "0.1.0")
    assert local_levels.formation(str(used)) is None
    with pytest.raises(FormatRefused, match=r"unknown release '9\.9\.9'"):
        format_data_dir(str(tmp_path / "new"), "9.9.9")
    assert release_levels("0.2.0") == dict(SUPPORTED)  # this release forms at its own levels


def test_the_command_says_what_it_did_and_refuses_with_status_1(tmp_path: pathlib.Path) -> None:
    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "raftlog_cli", "format", *argv], capture_output=True, text=True, timeout=60
        )

    done = run("--data-dir", str(tmp_path / "n1"), "--release-version", "0.1.0")
    assert done.returncode == 0 and "starts at release 0.1.0's levels" in done.stdout, done.stderr
    refused = run("--data-dir", str(tmp_path / "n1"), "--release-version", "0.2.0")
    assert refused.returncode == 1 and refused.stderr.startswith("raftlog format: "), refused.stderr
    unknown = run("--data-dir", str(tmp_path / "n2"), "--release-version", "0.0.1")
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr
