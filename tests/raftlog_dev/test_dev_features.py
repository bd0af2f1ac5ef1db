"""Versions and feature levels on a real ``raftlog dev`` cluster, through the CLI as an operator types it:
every node reports this release's version, the cluster finalizes ``raftlog.version`` 2 and
``transaction.version`` 2 once every node gossiped that it supports them, and ``raftlog cluster features
upgrade`` refuses a downgrade and a level no node's code supports, changing nothing."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

from test_dev import ENV, Supervised, description

import raftlog
from partitions.features import RAFTLOG_VERSION, SUPPORTED
from tests.waiting import wait_for


def cli(data: pathlib.Path, *argv: str) -> subprocess.CompletedProcess[str]:
    cluster = description(data)
    env = {**ENV, "RAFTLOG_SERVER": cluster["nodes"][0]["http"]}
    token = cluster.get("security", {}).get("admin_token")
    if token:
        env["RAFTLOG_ADMIN_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "raftlog_cli", *argv], capture_output=True, text=True, timeout=120, env=env
    )


def features(data: pathlib.Path) -> dict[str, Any]:
    shown = cli(data, "cluster", "features", "--json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    return dict(json.loads(shown.stdout))


def test_versions_and_the_feature_upgrade_on_a_dev_cluster(tmp_path: pathlib.Path) -> None:
    supervised = Supervised(tmp_path / "data", nodes=3)
    try:
        data = supervised.data
        version = cli(data, "--version")
        assert version.stdout.strip() == f"raftlog {raftlog.version()}", version.stdout + version.stderr
        wait_for(
            lambda: features(data)["finalized"] == dict(SUPPORTED),
            "the cluster to finalize this release's levels once every node gossiped them",
            every_s=0.1,
        )
        seen = features(data)
        assert seen["nodes"] == {
            node: {"version": raftlog.version(), "features": dict(SUPPORTED)} for node in ("n1", "n2", "n3")
        }
        nodes = cli(data, "cluster", "nodes")
        assert nodes.returncode == 0 and nodes.stdout.count(f" {raftlog.version()} ") == 3, nodes.stdout
        described = cli(data, "cluster", "features")
        assert f"{RAFTLOG_VERSION}: finalized level 2" in described.stdout, (
            described.stdout + described.stderr
        )

        downgrade = cli(data, "cluster", "features", "upgrade", "--feature", RAFTLOG_VERSION, "--level", "1")
        assert downgrade.returncode != 0 and "downgrade is refused" in downgrade.stderr, downgrade.stderr
        beyond = cli(data, "cluster", "features", "upgrade", "--feature", RAFTLOG_VERSION, "--level", "3")
        assert beyond.returncode != 0 and "supports levels 1..2" in beyond.stderr, beyond.stderr
        unknown = cli(data, "cluster", "features", "upgrade", "--feature", "no.such", "--level", "2")
        assert unknown.returncode != 0 and "unknown feature" in unknown.stderr, unknown.stderr
        again = cli(data, "cluster", "features", "upgrade", "--feature", RAFTLOG_VERSION, "--level", "2")
        assert again.returncode == 0, again.stdout + again.stderr  # already there: nothing to change
        every = cli(data, "cluster", "features", "upgrade")
        assert every.returncode == 0 and "every feature is at the highest level" in every.stdout, every.stdout
        half = cli(data, "cluster", "features", "upgrade", "--feature", RAFTLOG_VERSION)
        assert half.returncode == 2 and "go together" in half.stderr, half.stdout + half.stderr
        assert features(data)["finalized"] == dict(SUPPORTED)
    finally:
        supervised.close()
