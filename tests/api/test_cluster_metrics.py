"""``GET /v1/cluster/metrics``: every live node's ``/metrics`` text in one answer, each node asked with the
caller's own credentials; a node that is not alive or does not answer is listed with why."""

from __future__ import annotations

from fake_node import FakeCluster
from harness import Harness, Node


async def test_every_live_nodes_metrics_and_why_the_others_are_missing(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.node_ids.append("n3")
    cluster.states["n3"] = "dead"
    response = await n1.client.get("/v1/cluster/metrics")
    assert response.status == 200
    body = await response.json()
    assert body["node_id"] == "n1"
    nodes = {n["node_id"]: n for n in body["nodes"]}
    assert sorted(nodes) == ["n1", "n2", "n3"]
    for name in ("n1", "n2"):  # each its own text, as its /metrics exports it
        assert nodes[name]["error"] is None and "raftlog_build_info" in nodes[name]["metrics"]
    assert nodes["n3"] == {"node_id": "n3", "metrics": None, "error": "node dead (gossip)"}


async def test_each_node_checks_the_callers_own_credentials(cluster: FakeCluster, harness: Harness) -> None:
    n1 = await harness.start(cluster, "n1", admin_token="tok", require_auth=True)
    await harness.start(cluster, "n2", admin_token="other", require_auth=True)
    response = await n1.client.get("/v1/cluster/metrics", headers={"Authorization": "Bearer tok"})
    nodes = {n["node_id"]: n for n in (await response.json())["nodes"]}
    assert nodes["n1"]["error"] is None
    assert nodes["n2"]["metrics"] is None and nodes["n2"]["error"].startswith("answered 401")


async def test_a_nodes_metrics_longer_than_one_read_come_whole(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    # n2 leads 2,000 partitions of a long-named topic: one high watermark line each, ~0.3 MB of text,
    # more than the 128 KiB a single read of the body returned (the console's charts then lost n2's
    # histograms, which come after them)
    topic = "metrics-" + "x" * 100
    cluster.add_topic(topic, replicas=[["n2"]] * 2000)
    direct = await n2.client.get("/metrics")
    whole = await direct.text()
    assert len(whole.encode()) > 256 * 1024
    response = await n1.client.get("/v1/cluster/metrics")
    nodes = {n["node_id"]: n for n in (await response.json())["nodes"]}
    assert nodes["n2"]["error"] is None
    assert nodes["n2"]["metrics"].count(f'topic="{topic}"') == 2000
    last = whole.rstrip().splitlines()[-1]  # the text's last family came too (its counters moved since)
    assert nodes["n2"]["metrics"].rstrip().splitlines()[-1] == last
