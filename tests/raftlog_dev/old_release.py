"""A node started again on the previous release's code after the cluster's levels rose above it: what the
scenario tests do with it (``kept_out_round``) and check of it. The old node (release 0.1.0, which has no
check of its own) must neither receive nor serve entries: the newer nodes name it in their health, refuse
to hand it a leadership, and its own reads fail rather than answer from its log; the load goes on meanwhile
on the two others; then it runs this release again and the cluster is healthy."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from test_dev import ENV, description
from upgrade_load import PREVIOUS, THIS, Releases

from kafka_api import wire
from tests.kafka_api.kafka_fixtures import RawKafka
from tests.waiting import wait_for

RELEASE_LEVELS_1 = "--release-version=0.1.0"  # raftlog dev: a cluster formed at release 0.1.0's levels


def cli(
    data: pathlib.Path, *argv: str, server: str | None = None, timeout_s: float = 180
) -> subprocess.CompletedProcess[str]:
    """``raftlog ARGV`` against ``server``, or any node (a node of 0.1.0 serves no /v1/features)."""
    env = {**ENV, "RAFTLOG_SERVER": server or ",".join(n["http"] for n in description(data)["nodes"])}
    return subprocess.run(
        [sys.executable, "-m", "raftlog_cli", *argv],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
    )


def ok(data: pathlib.Path, *argv: str, server: str | None = None) -> str:
    done = cli(data, *argv, server=server)
    assert done.returncode == 0, f"raftlog {' '.join(argv)}: {done.stdout}{done.stderr}"
    return done.stdout


def get(url: str) -> tuple[int, Any]:
    """The status and JSON answer of a GET (0, None: no answer)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status), json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode(errors="replace")[:300]
    except OSError:
        return 0, None


def health(http: str) -> dict[str, Any]:
    status, body = get(f"{http}/v1/cluster/health")
    return body if status == 200 and isinstance(body, dict) else {}


def healthy(http: str) -> bool:
    return bool(health(http).get("is_healthy"))


def kept_out_round(
    data: pathlib.Path,
    nodes: tuple[str, ...],
    node: str,
    previous_python: str,
    progressed: Callable[[], Callable[[], bool]],
    topic: str,
    releases: Releases | None = None,
) -> dict[str, Any]:
    """``node`` started again on ``previous_python`` (its data, its command line) while the cluster's
    levels are above it, checked kept out, then started again on this checkout. ``progressed()`` gives a
    condition: the load acknowledged more since the call; ``releases``: told of each switch (the load
    attributes answers by it). What was seen, for the test's printout."""
    http = {n["id"]: n["http"] for n in description(data)["nodes"]}
    other = next(http[n] for n in nodes if n != node)
    if releases is not None:
        releases.switching(node)
    ok(data, "dev", "restart", node, "--data-dir", str(data), "--python", previous_python, "--no-wait")
    if releases is not None:
        releases.switched(node, PREVIOUS)
    wait_for(
        lambda: node in health(other).get("nodes_kept_out", {}),
        f"{node}, on the previous release, named kept out by the others' health",
        timeout_s=60,
    )
    reason = health(other)["nodes_kept_out"][node]
    if releases is not None:
        releases.kept_out.add(node)  # the load's HTTP clients leave it aside, as a balancer drains it
    assert "release 0.1.0" in reason and "finalized at 2" in reason, reason
    listed = {n["node_id"]: n for n in get(f"{other}/v1/nodes")[1]}
    assert listed[node]["kept_out"] == reason and listed[node]["leader_of"] == 0, listed[node]
    # Kafka's clients see it as a fenced broker: DescribeCluster leaves it out, and v2 lists it fenced when
    # asked, where its Kafka listener is known (a node of 0.1.0 may not have told it yet), never unfenced
    kafka = next(n["kafka"] for n in description(data)["nodes"] if n["id"] != node)
    brokers = {b.broker_id: b.is_fenced for b in _described_brokers(kafka, with_fenced=False)}
    assert int(node[1:]) not in brokers and len(brokers) == len(nodes) - 1, brokers
    brokers = {b.broker_id: b.is_fenced for b in _described_brokers(kafka, with_fenced=True)}
    assert brokers.get(int(node[1:]), True) is True, brokers
    assert list(brokers.values()).count(False) == len(nodes) - 1, brokers
    # leadership moved to it: refused, naming why (never a transfer that times out)
    moved = cli(data, "partition", "transfer", topic, "0", "--target", node, server=other)
    assert moved.returncode != 0 and "kept out" in moved.stderr, moved.stdout + moved.stderr
    # its own reads fail (it forwards to the leaders, which refuse it) rather than answer from its log
    status, answer = get(f"{http[node]}/topics/{topic}/partitions/0/records?offset=0")
    assert status != 200, f"{node} on the previous release answered a read: {answer}"
    # the two others go on: the load is acknowledged while it is out, and it leads nothing
    wait_for(progressed(), f"the load acknowledged while {node} is kept out", timeout_s=90)
    listed = {n["node_id"]: n for n in get(f"{other}/v1/nodes")[1]}
    assert listed[node]["leader_of"] == 0 and listed[node]["kept_out"], listed[node]
    if releases is not None:
        releases.switching(node)
    ok(data, "dev", "restart", node, "--data-dir", str(data), "--python", sys.executable)
    if releases is not None:
        releases.switched(node, THIS)
        releases.kept_out.discard(node)
    wait_for(lambda: healthy(other), f"the cluster healthy with {node} back on this release", timeout_s=90)
    return {"node": node, "reason": reason, "transfer refused": moved.stderr.strip()[-160:], "read": status}


def compare_replicas(data: pathlib.Path) -> str:
    """``raftlog log compare --nodes DATA``: every partition's replicas byte for byte (exit 0: identical)."""
    done = subprocess.run(
        [sys.executable, "-m", "raftlog_cli", "log", "compare", "--nodes", str(data)],
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _described_brokers(kafka: str, with_fenced: bool) -> tuple[Any, ...]:
    """The brokers a DescribeCluster v2 to the Kafka listener ``kafka`` answers."""
    cls = wire.request_class(60, 2)
    body = wire.build(
        cls, include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=with_fenced
    )
    raw = RawKafka(kafka)
    try:
        return tuple(raw.call(60, 2, body).brokers)
    finally:
        raw.close()
