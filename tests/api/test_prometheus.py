"""``/metrics`` of a real node, read with Prometheus's own parser after produce, fetch and a consumer
group's read and commit: every family typed and documented (none missing from the catalogue), counters
named ``_total``, the families operators alert on present, with bounded labels; and the page passes
``promtool check metrics``, Prometheus's lint of names, units and help."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families
from promtool import promtool

from raftlog_client.local_cluster import LocalCluster


def call(base: str, method: str, path: str, body: Any = None, media: str = "application/json") -> Any:
    """One request; a 503 (a leader being elected, the groups' topic being created) is tried again."""
    data = None if body is None else json.dumps(body).encode()
    deadline = time.monotonic() + 30
    while True:
        request = urllib.request.Request(base + path, data, {"Content-Type": media}, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                text = answer.read()
                return json.loads(text) if text.strip() else None
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code != 503 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with tempfile.TemporaryDirectory() as directory, LocalCluster(directory, nodes=1) as local:
        yield local


@pytest.fixture(scope="module")
def node(cluster: LocalCluster) -> str:
    return cluster.servers[0]


def kafka_produce(bootstrap: str, topic: str, count: int) -> None:
    """``count`` records to partition 1 through the node's Kafka listener (confluent-kafka, acks=all)."""
    delivered: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for n in range(count):
        producer.produce(topic, str(n).encode(), partition=1, on_delivery=lambda e, _m: delivered.append(e))
        producer.flush(30)
    assert delivered == [None] * count


def test_every_family_is_typed_documented_and_bounded(cluster: LocalCluster, node: str) -> None:
    call(node, "POST", "/v1/topics", {"name": "m", "partitions": 2, "replication_factor": 1})
    call(node, "POST", "/topics/m/partitions/0", {"records": [{"value": "a"}, {"value": "b"}]})
    kafka_produce(cluster.bootstrap_servers, "m", 3)
    call(node, "GET", "/topics/m/partitions/0/records?offset=0")
    v2 = "application/vnd.kafka.v2+json"
    call(node, "POST", "/consumers/g", {"name": "c", "auto.offset.reset": "earliest"}, v2)
    call(node, "POST", "/consumers/g/instances/c/subscription", {"topics": ["m"]}, v2)
    for _ in range(3):
        call(node, "GET", "/consumers/g/instances/c/records?timeout=500")
    call(
        node,
        "POST",
        "/consumers/g/instances/c/offsets",
        {"offsets": [{"topic": "m", "partition": 0, "offset": 1}]},
        v2,
    )
    call(node, "GET", "/consumers/g/instances/c/records?timeout=0")

    with urllib.request.urlopen(node + "/metrics", timeout=30) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        page = answer.read()
        families = {f.name: f for f in text_string_to_metric_families(page.decode())}
    linted = subprocess.run([promtool(), "check", "metrics"], input=page, capture_output=True, timeout=60)
    assert (linted.returncode, linted.stdout, linted.stderr) == (0, b"", b"")  # Prometheus's own lint

    untyped = sorted(name for name, f in families.items() if f.type == "unknown")
    assert untyped == [], f"families missing from api/prometheus.py's catalogue: {untyped}"
    assert all(f.documentation for f in families.values())
    for family in families.values():
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples), family.name
    for wanted in (
        "raftlog_produce_requests", "raftlog_produced_records", "raftlog_partitions_led",
        "raftlog_partitions_leaderless", "raftlog_partitions_under_replicated", "raftlog_nodes_down",
        "raftlog_log_bytes", "raftlog_raft_elections_on_timeout", "raftlog_leader_changes",
        "raftlog_http_request_duration_seconds", "raftlog_kafka_request_seconds",
        "raftlog_build_info", "process_cpu_seconds", "process_resident_memory_bytes",
    ):  # fmt: skip
        assert wanted in families, wanted
    watermarks = {
        (s.labels["topic"], s.labels["partition"]): s.value
        for s in families["raftlog_partition_high_watermark"].samples
    }
    assert watermarks[("m", "0")] == 2 and ("m", "1") in watermarks
    assert families["raftlog_partitions_under_replicated"].samples[0].value == 0
    members = {s.labels["state"]: s.value for s in families["raftlog_gossip_members"].samples}
    assert members == {"alive": 1, "suspect": 0, "dead": 0, "left": 0}
    free = families["raftlog_node_disk_free_bytes"].samples
    assert [s.labels for s in free] == [{"node": "n1"}] and free[0].value > 0
    for name in ("raftlog_produce_commit_seconds", "raftlog_journal_sync_seconds"):
        family = families[name]
        count = next(s.value for s in family.samples if s.name.endswith("_count"))
        assert family.type == "histogram" and count >= 1, name  # the produce above was timed, and fsynced
    # each Kafka request timed by API: the three produces, and the Metadata the producer asked first
    kafka = families["raftlog_kafka_request_seconds"]
    counts = {s.labels["api"]: s.value for s in kafka.samples if s.name.endswith("_count")}
    assert kafka.type == "histogram" and counts["Produce"] >= 3 and counts["Metadata"] >= 1, counts
    assert all(set(s.labels) <= {"api", "le"} for s in kafka.samples)
    lag = [s for s in families["raftlog_consumer_group_lag"].samples if s.labels["group"] == "g"]
    assert {(s.labels["topic"], s.labels["partition"], s.value) for s in lag} >= {("m", "0", 1)}
    assert all(set(s.labels) == {"group", "topic", "partition"} for s in lag)  # no instance ids
