"""kcat (Debian's, built on librdkafka) against a real cluster: list, produce keyed records with headers,
consume from the beginning, from the end back N and from a timestamp; what kcat wrote reads identically
through the HTTP API."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

from kafka_fixtures import http_client, kcat_path
from waiting import wait_for

from raftlog_client.local_cluster import LocalCluster

FORMAT = "%p|%o|%k|%s|%T|%h\\n"


def _kcat(cluster: LocalCluster, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [kcat_path(), "-b", cluster.bootstrap_servers, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _rows(output: str) -> list[tuple[int, int, str, str, int, str]]:
    rows = []
    for line in output.splitlines():
        partition, offset, key, value, timestamp, headers = line.split("|")
        rows.append((int(partition), int(offset), key, value, int(timestamp), headers))
    return sorted(rows)


def test_kcat_lists_every_broker_and_each_partitions_leader(kafka_cluster: LocalCluster) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("listed", 3, 3)

    def led() -> dict[str, Any] | None:
        listing: dict[str, Any] = json.loads(_kcat(kafka_cluster, "-L", "-J", "-t", "listed"))
        return listing if all(p["leader"] >= 0 for p in listing["topics"][0]["partitions"]) else None

    listing = wait_for(led, "kcat to list a leader of every partition of listed", timeout_s=30, every_s=0.5)
    partitions = listing["topics"][0]["partitions"]
    brokers = {b["id"]: b["name"] for b in listing["brokers"]}
    assert brokers == {i + 1: kafka_cluster.kafka[f"n{i + 1}"] for i in range(3)}
    assert [p["partition"] for p in partitions] == [0, 1, 2]
    for p in partitions:
        assert p["leader"] in brokers and sorted(r["id"] for r in p["replicas"]) == [1, 2, 3]


def test_kcat_produces_keyed_records_with_headers_and_reads_them_every_way(
    kafka_cluster: LocalCluster,
) -> None:
    with http_client(kafka_cluster) as client:
        client.create_topic("kc", 1, 3)
    before = int(time.time() * 1000)
    lines = "".join(f"key-{i}:value {i}\n" for i in range(10))
    _kcat(kafka_cluster, "-P", "-t", "kc", "-p", "0", "-K:", "-H", "trace=abc", "-H", "empty=", stdin=lines)
    everything = _rows(_kcat(kafka_cluster, "-C", "-t", "kc", "-o", "beginning", "-e", "-f", FORMAT))
    assert [(o, k, v) for _, o, k, v, _, _ in everything] == [
        (i, f"key-{i}", f"value {i}") for i in range(10)
    ]
    assert all(h == "trace=abc,empty=" and t >= before for *_, t, h in everything)
    last_three = _rows(_kcat(kafka_cluster, "-C", "-t", "kc", "-o", "-3", "-e", "-f", FORMAT))
    assert [o for _, o, *_ in last_three] == [7, 8, 9]
    # from a timestamp: a second round, later, read from its first record's time on
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    _kcat(kafka_cluster, "-P", "-t", "kc", "-p", "0", "-K:", stdin="late:1\nlater:2\n")
    since = _rows(_kcat(kafka_cluster, "-C", "-t", "kc", "-o", f"s@{middle}", "-e", "-f", FORMAT))
    assert [(o, k) for _, o, k, *_ in since] == [(10, "late"), (11, "later")]
    # the same records through the HTTP API
    with http_client(kafka_cluster) as client:
        page = client.fetch_page("kc", 0, 0, 1 << 20, 0, columnar=False)
    assert page.offsets == list(range(12))
    assert page.keys[:2] == [b"key-0", b"key-1"] and page.values[0] == b"value 0"
    assert page.headers[0] == [("trace", b"abc"), ("empty", b"")]
    assert page.timestamps_ms[:10] == [t for *_, t, _ in everything] and set(page.timestamp_types) == {0}
