"""Real processes: a second ``raftlog serve`` on a running node's data directory exits at once naming the
node that holds it, and the first node goes on serving an intact log."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from raftlog_client.client import Message, RaftlogClient
from raftlog_dev.layout import free_base_port, node_argv, plan

from .cluster import ProcessCluster

pytestmark = pytest.mark.slow


async def test_a_second_process_on_a_data_directory_is_refused_and_the_first_serves_on(tmp_path) -> None:
    cluster = ProcessCluster.create(str(tmp_path), count=1)
    cluster.start_all()
    try:
        async with RaftlogClient(cluster.urls, retries=20) as client:
            await client.create_topic("orders", partitions=1, replication_factor=1)
            await client.produce("orders", [Message("before-1"), Message("before-2")], partition=0)

            # the same node's data directory, every listener on other ports: only the lock can refuse it
            elsewhere = plan(1, free_base_port(1))[0]
            argv = node_argv(
                elsewhere, [elsewhere], str(tmp_path), os.path.join(str(tmp_path), "cluster.secret")
            )
            second = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            holder = cluster.processes["n1"].pid
            assert second.returncode == 1, second.stdout + second.stderr
            refusal = second.stderr.splitlines()[-1]
            assert refusal.startswith(
                f"raftlog serve: data directory {tmp_path / 'n1'} is in use by node n1 (pid {holder}, since "
            ), second.stderr
            assert "Traceback" not in second.stderr

            await client.produce("orders", [Message("after-1"), Message("after-2")], partition=0)
            fetched = await client.fetch("orders", 0, 0)
            assert [(r.offset, r.value) for r in fetched] == [
                (0, b"before-1"), (1, b"before-2"), (2, b"after-1"), (3, b"after-2"),
            ]  # fmt: skip
    finally:
        cluster.stop_all()
    logs = tmp_path / "n1" / "logs"
    (partition_log,) = [logs / name for name in os.listdir(logs) if name.startswith("orders-0.")]
    verify = subprocess.run(
        [sys.executable, "-m", "raftlog_cli", "log", "verify", str(partition_log)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert verify.returncode == 0 and verify.stdout.splitlines()[-1].endswith("4 records: ok"), verify.stdout
