"""``raftlog dev --secure`` keeps its secrets off every command line: no node's ``/proc/PID/cmdline``
(which every local user reads, as ``ps`` does) holds the admin token, the admin user's password or the
cluster secret (the nodes read them from files only their owner may read)."""

from __future__ import annotations

import pathlib
import stat
from collections.abc import Iterator

import pytest

from raftlog_client.local_cluster import LocalCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        str(tmp_path_factory.mktemp("dev-secrets") / "data"), nodes=2, dev_args=["--secure"]
    ) as up:
        yield up


def test_no_secret_is_on_a_command_line(cluster: LocalCluster) -> None:
    data = pathlib.Path(cluster.directory)
    secrets = {
        "the admin token": cluster.security["admin_token"],
        "the admin user's password": cluster.security["password"],
        "the cluster secret": (data / "cluster.secret").read_text().strip(),
    }
    assert len(cluster.pids) == 2
    for node_id, pid in cluster.pids.items():
        argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode()
        assert "--require-auth" in argv, argv  # this is the node, serving with authentication
        for what, secret in secrets.items():
            assert len(secret) >= 16 and secret not in argv, f"{what} is in {node_id}'s command line"
    token_file = data / "admin.token"
    assert token_file.read_text().strip() == cluster.security["admin_token"]
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
