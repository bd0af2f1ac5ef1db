"""Kafka's transactions as the HTTP API shows them to operators, over two fake nodes (``__transactions``
partitions led by n1 and n2, so a describe asked of either is answered by the id's coordinator): the list
of every coordinator partition's ids, a filter by state and by a pattern of ids, one id's transaction, and an
unknown id."""

from __future__ import annotations

import json
from typing import Any

from fake_node import FakeCluster
from harness import Node

from partitions.groups.assignors import TopicPartition
from partitions.names import TRANSACTIONS_TOPIC
from partitions.transactions.coordinator import TransactionCoordinator


async def ok(response: Any) -> Any:
    text = await response.text()
    assert response.status == 200, text
    return json.loads(text)


def coordinator_of(cluster: FakeCluster, nodes: dict[str, Node], tid: str) -> TransactionCoordinator:
    """The coordinator of ``tid``: the fake node leading its ``__transactions`` partition."""
    any_node = next(iter(nodes.values()))
    partition = any_node.data.transactions.coordinator_partition(tid)
    return nodes[cluster.partitions[(TRANSACTIONS_TOPIC, partition)].leader].data.transactions


async def test_the_admin_api_lists_and_describes_transactions_from_their_coordinators(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("orders", 2, [["n1"], ["n2"]])
    assert await ok(await n1.client.get("/v1/transactions")) == {"transactions": []}  # none yet
    await n1.data.transactions.ensure_topic()
    nodes = {"n1": n1, "n2": n2}
    tids = [f"payments-{n}" for n in range(6)]
    for tid in tids:
        given = await coordinator_of(cluster, nodes, tid).init_producer_id(tid, 30_000, -1, -1)
        if tid == "payments-0":
            pid, epoch = given.producer_id, given.producer_epoch
    assert {cluster.partitions[(TRANSACTIONS_TOPIC, p)].leader for p in range(2)} == {"n1", "n2"}
    first = coordinator_of(cluster, nodes, "payments-0")
    await first.add_partitions("payments-0", pid, epoch, [TopicPartition("orders", 1)])
    await first.add_offsets("payments-0", pid, epoch, "billing")
    await first.add_offset_partitions("payments-0", pid, epoch, "billing", [TopicPartition("orders", 0)])

    listed = (await ok(await n2.client.get("/v1/transactions")))["transactions"]
    assert [t["transactional_id"] for t in listed] == tids  # both coordinators' ids, in order
    assert {t["state"] for t in listed} == {"Empty", "Ongoing"}
    ongoing = (await ok(await n2.client.get("/v1/transactions?state=Ongoing")))["transactions"]
    assert [(t["transactional_id"], t["producer_id"], t["timeout_ms"]) for t in ongoing] == [
        ("payments-0", pid, 30_000)
    ]

    async def matching(pattern: str) -> list[str]:
        listed = await ok(await n1.client.get("/v1/transactions", params={"pattern": pattern}))
        return [t["transactional_id"] for t in listed["transactions"]]

    assert await matching("payments-[24]") == ["payments-2", "payments-4"]
    assert await matching("payments") == []  # the whole id, as Kafka's ListTransactions v2 matches it
    for refused in ("payments-(", "(a)\\1", "x" * 1_001):  # RE2 has no backreferences
        bad = await n1.client.get("/v1/transactions", params={"pattern": refused})
        body = await bad.json()
        assert bad.status == 400 and body["error_code"] == 40001, body
        assert "is not a valid regular expression" in body["message"]
    for node in (n1, n2):  # whichever node is asked, the coordinator answers
        described = await ok(await node.client.get("/v1/transactions/payments-0"))
        assert described["state"] == "Ongoing" and described["started_ms"] > 0
        assert described["partitions"] == [{"topic": "orders", "partition": 1}]
        assert described["offset_partitions"] == [{"topic": "orders", "partition": 0}]
        assert described["groups"] == ["billing"]
        assert (
            described["coordinator"]
            == cluster.partitions[(TRANSACTIONS_TOPIC, described["coordinator_partition"])].leader
        )

    unknown = await n1.client.get("/v1/transactions/nobody")
    assert unknown.status == 404 and (await unknown.json())["error_code"] == 40409
    bad = await n1.client.get("/v1/transactions?state=Running")
    assert bad.status == 400 and "Ongoing" in (await bad.json())["message"]
    beyond = await n1.client.get("/v1/transactions?coordinator_partition=2")
    assert beyond.status == 404
