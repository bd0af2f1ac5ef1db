"""``raftlog transactions list|describe`` against the API over a fake node whose coordinator holds a
transaction: the table for people, the server's JSON, a filter by state, and an unknown id refused."""

from __future__ import annotations

import json
from typing import Any

from fake_node import FakeCluster
from harness import Node
from test_cli import run

from partitions.groups.assignors import TopicPartition


async def test_transactions_listed_and_described(cluster: FakeCluster, n1: Node, capsys: Any) -> None:
    cluster.node_ids = ["n1"]  # one node leads every __transactions partition
    cluster.add_topic("orders", 1, [["n1"]])
    coordinator = n1.data.transactions
    await coordinator.ensure_topic()
    given = await coordinator.init_producer_id("payments-1", 60_000, -1, -1)
    await coordinator.init_producer_id("idle", 60_000, -1, -1)
    await coordinator.add_partitions(
        "payments-1", given.producer_id, given.producer_epoch, [TopicPartition("orders", 0)]
    )
    server = ("--server", n1.url)
    code, out, _ = await run(capsys, "transactions", "list", *server)
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert code == 0 and out.splitlines()[0].split()[:3] == ["TRANSACTIONAL", "ID", "STATE"]
    assert rows["payments-1"][:3] == ["Ongoing", str(given.producer_id), str(given.producer_epoch)]
    assert rows["idle"][0] == "Empty" and rows["idle"][-1] == "-"
    code, out, _ = await run(capsys, "transactions", "list", "--state", "Ongoing", "--json", *server)
    assert code == 0 and [t["transactional_id"] for t in json.loads(out)] == ["payments-1"]
    code, out, _ = await run(capsys, "transactions", "describe", "payments-1", *server)
    assert code == 0 and out.startswith("transactional id payments-1: Ongoing, producer ")
    assert out.splitlines()[-1].split() == ["orders", "0", "records"]
    code, _, err = await run(capsys, "transactions", "describe", "nobody", *server)
    assert code == 1 and "40409" in err
