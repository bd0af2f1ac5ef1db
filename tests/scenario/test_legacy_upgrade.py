"""Real processes: upgrading a node whose data an older raftlog wrote (batch format v1, the committed
tests/fixtures/legacy-v1-datadir). Started on it, the node exits naming `raftlog log migrate` and touches
nothing; after the command, it serves every record the old node served, at the same offsets, replays
its journal tail (consumer offsets committed after the last snapshot, a producer's dedup window), and a
new produce continues at the next offset."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from .cluster import ProcessCluster

pytestmark = pytest.mark.slow

FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "legacy-v1-datadir"
REPO_ROOT = FIXTURE.parent.parent.parent
BINARY = "application/vnd.kafka.binary.v2+json"
PARTITIONS = (("orders", 0), ("orders", 1), ("audit", 0))
EXIT_TIMEOUT_S = 30.0


def _files(directory: pathlib.Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
    }


def _call(url: str, method: str = "GET", body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Accept": BINARY, **({"Content-Type": "application/json"} if data is not None else {})}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read() or b"null")


def _call_when_led(url: str, method: str = "GET", body: Any = None) -> Any:
    """A partition elects its leader after the node is ready: 503 until then (bounded)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return _call(url, method, body)
        except urllib.error.HTTPError as error:
            if error.code != 503 or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def _records(base: str, topic: str, partition: int, end: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    offset = 0
    while offset < end:
        page = _call_when_led(
            f"{base}/topics/{topic}/partitions/{partition}/records?offset={offset}&max_bytes=65536"
        )
        for row in page if isinstance(page, list) else page["records"]:
            rows.append({k: row[k] for k in ("offset", "timestamp", "key", "value", "headers")})
            offset = row["offset"] + 1
    return rows


def test_a_node_on_v1_data_refuses_then_after_migrate_serves_it_all_and_goes_on(tmp_path) -> None:
    root = pathlib.Path(shutil.copytree(FIXTURE, tmp_path / "cluster"))
    data_dir = root / "n1"
    expected = json.loads((root / "expected.json").read_text(encoding="utf-8"))
    cluster = ProcessCluster.create(str(root), count=1)
    before = {part: _files(data_dir / part) for part in ("logs", "raft")}

    # 1. the node refuses the directory, naming the command, and changes nothing in it
    cluster.start("n1")
    process = cluster.processes["n1"]
    try:
        process.wait(EXIT_TIMEOUT_S)
    finally:
        cluster.stop_all()
    assert process.returncode == 1
    tail = cluster.log_tail("n1", 5)
    assert f"run `raftlog log migrate {data_dir}` once, with the node stopped" in tail
    assert "Traceback" not in tail  # a message for the operator, not a crash
    assert {part: _files(data_dir / part) for part in ("logs", "raft")} == before

    # 2. the command, as an operator runs it
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    argv = [sys.executable, "-m", "raftlog_cli", "log", "migrate", str(root)]
    migrated = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert migrated.returncode == 0, migrated.stderr
    assert "3 logs in 1 data directory: converted 3 (197 records in 96 batches" in migrated.stdout

    # 3. the node starts and serves what the old one served
    cluster.start_all(timeout_s=30)
    base = cluster.url("n1")
    try:
        for topic, partition in PARTITIONS:
            name = f"{topic}/{partition}"
            offsets = _call_when_led(f"{base}/topics/{topic}/partitions/{partition}/offsets")
            assert offsets == {"beginning_offset": 0, "end_offset": expected["end_offsets"][name]}
            served = [
                {k: row[k] for k in ("offset", "timestamp", "key", "value", "headers")}
                for row in expected["records"]
                if (row["topic"], row["partition"]) == (topic, partition)
            ]
            assert _records(base, topic, partition, offsets["end_offset"]) == served, name
        # committed after the snapshots: only a replay of the journals' tails holds them
        for group, committed in expected["committed_offsets"].items():
            for topic in ("orders", "audit"):
                answer = _call_when_led(f"{base}/consumers/{group}/offsets?topic={topic}")
                got = {f"{topic}/{row['partition']}": row["offset"] for row in answer["offsets"]}
                assert got == {k: v for k, v in committed.items() if k.startswith(f"{topic}/")}, group
        # producer 7002's request after orders/1's snapshot, sent again: answered from the replayed dedup
        # window with the offsets it got then, nothing appended
        retried = {"records": [{"value": "again"}] * 3, "producer_id": 7002, "sequence": 3}
        answer = _call_when_led(f"{base}/topics/orders/partitions/1", "POST", retried)
        first = next(
            row["offset"]
            for row in expected["records"]
            if (row["topic"], row["partition"]) == ("orders", 1)
            and json.loads(base64.b64decode(row["value"])) == {"producer": 7002, "sequence": 3}
        )
        assert [o["offset"] for o in answer["offsets"]] == [first, first + 1, first + 2]
        # and the log goes on at the next dense offset
        end = expected["end_offsets"]["orders/0"]
        answer = _call_when_led(f"{base}/topics/orders/partitions/0", "POST", {"records": [{"value": "new"}]})
        assert [o["offset"] for o in answer["offsets"]] == [end]
        assert _records(base, "orders", 0, end + 1)[-1]["offset"] == end
        offsets = _call_when_led(f"{base}/topics/orders/partitions/1/offsets")
        assert offsets["end_offset"] == expected["end_offsets"]["orders/1"]
    finally:
        cluster.stop_all()
