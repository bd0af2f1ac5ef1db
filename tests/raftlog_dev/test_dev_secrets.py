"""``raftlog dev --secure`` keeps its secrets off every command line and its folder to its owner: no node's
``/proc/PID/cmdline`` (which every local user reads, as ``ps`` does) holds the admin token, the admin
user's password or the cluster secret (the nodes read them from files only their owner may read), nor
does any command it prints for clients (they name owner-only files instead), and every directory of the
data folder is 0700 and every file 0600, the nodes' data (SCRAM verifiers in the controller's journal)
among them."""

from __future__ import annotations

import os
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
    log = pathlib.Path(cluster.dev_log).read_text()
    hints = log[
        log.rindex("up; cluster.json") :
    ]  # what it prints to run: curl, kcat, confluent-kafka, raftlog
    assert "curl" in hints and "kcat" in hints and "raftlog consume" in hints, hints
    for what, secret in secrets.items():
        assert secret not in hints, f"{what} is in a printed command line"


def test_the_data_folder_is_its_owners_alone(cluster: LocalCluster) -> None:
    data = pathlib.Path(cluster.directory)
    assert any((data / node / "raft" / "controller" / "journal").exists() for node in cluster.pids), (
        "the nodes wrote their controller journals (the admin user's SCRAM verifier among their entries)"
    )
    exposed = []
    for root, directories, files in os.walk(data):
        for name in directories:
            mode = stat.S_IMODE(os.lstat(os.path.join(root, name)).st_mode)
            if mode != 0o700:
                exposed.append(f"{os.path.join(root, name)}/ {mode:o}")
        for name in files:
            path = os.path.join(root, name)
            if path == cluster.dev_log:  # written by this test's LocalCluster, not by raftlog dev
                continue
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            if mode != 0o600:
                exposed.append(f"{path} {mode:o}")
    assert not exposed, exposed
    assert stat.S_IMODE(data.stat().st_mode) == 0o700  # made 0755 by LocalCluster before raftlog dev ran
