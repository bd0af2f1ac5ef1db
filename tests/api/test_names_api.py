"""Every name that enters through the API is checked whole, once, at the edge: topic names (no final
newline, none of the names reserved for the cluster's own topics), consumer group and instance names
(no control characters). A refused name changes nothing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import yarl
from fake_node import FakeCluster
from harness import Node

from api.app import ROUTES
from partitions.names import GROUPS_TOPIC
from raftlog_cli.cli import main

V2 = {"Content-Type": "application/vnd.kafka.v2+json"}


async def refused(response: Any, status: int, code: int, words: str) -> None:
    text = await response.text()
    assert response.status == status, text
    body = json.loads(text)
    assert body["error_code"] == code and words in body["message"], body


async def test_a_topic_name_with_a_final_newline_is_refused_and_nothing_is_created(
    cluster: FakeCluster, n1: Node
) -> None:
    answer = await n1.client.post("/v1/topics", json={"name": "nl\n", "partitions": 1})
    await refused(answer, 400, 40001, "'\\n' at index 2")
    assert cluster.topics == {}


async def test_topic_names_of_200_characters_are_accepted_201_refused(cluster: FakeCluster, n1: Node) -> None:
    answer = await n1.client.post("/v1/topics", json={"name": "x" * 200})
    assert answer.status == 201, await answer.text()
    await refused(await n1.client.post("/v1/topics", json={"name": "y" * 201}), 400, 40001, "at most 200")
    assert list(cluster.topics) == ["x" * 200]


async def test_users_cannot_take_reserved_topic_names_and_consumer_groups_still_work(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    for name in (GROUPS_TOPIC, "__mine"):
        answer = await n2.client.post("/v1/topics", json={"name": name, "partitions": 1})
        await refused(answer, 400, 40003, "reserved for the cluster's own topics")
    assert cluster.topics == {}
    cluster.add_topic("orders", 2, [["n1"], ["n2"]])
    created = await n1.client.post("/consumers/billing", json={"name": "c1"}, headers=V2)
    assert created.status == 200, await created.text()
    internal = cluster.topics[GROUPS_TOPIC]
    assert internal.partitions == cluster.group_partitions and internal.configs == {}
    subscribe = await n2.client.post(
        "/consumers/billing/instances/c1/subscription", json={"topics": ["orders"]}, headers=V2
    )
    assert subscribe.status == 204, await subscribe.text()
    assigned = await (await n2.client.get("/consumers/billing/instances/c1/assignments")).json()
    assert sorted(p["partition"] for p in assigned["partitions"]) == [0, 1]


async def test_a_consumer_cannot_subscribe_to_a_reserved_or_malformed_topic_name(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("orders")
    assert (await n1.client.post("/consumers/g", json={"name": "c"}, headers=V2)).status == 200
    path = "/consumers/g/instances/c/subscription"
    for topics, code, words in (
        ([GROUPS_TOPIC], 40003, "reserved"),
        (["orders", "nl\n"], 40001, "'\\n' at index 2"),
    ):
        await refused(await n1.client.post(path, json={"topics": topics}, headers=V2), 400, code, words)
    assert await (await n1.client.get(path)).json() == {"topics": []}


@pytest.mark.parametrize("group", ["billing%0A", "bill%09ing", "billing%00", "billing%E2%80%8B"])
async def test_group_names_with_control_or_format_characters_are_refused_everywhere(
    cluster: FakeCluster, n1: Node, group: str
) -> None:
    cluster.add_topic("orders")
    commit = {"offsets": [{"topic": "orders", "partition": 0, "offset": 1}]}
    for answer in (
        await n1.client.post(f"/consumers/{group}", json={"name": "c"}, headers=V2),
        await n1.client.post(f"/consumers/{group}/offsets", json=commit),
        await n1.client.get(f"/consumers/{group}/offsets?topic=orders"),
        await n1.client.get(f"/consumers/{group}/instances/c/assignments"),
        await n1.client.get(f"/v1/consumer-groups/{group}"),
    ):
        await refused(answer, 400, 40001, "character (U+")
    assert GROUPS_TOPIC not in cluster.topics and cluster.partitions[("orders", 0)].consumer_offsets == {}


@pytest.mark.parametrize("name", ["c1\n", "c\r", "c\x1b[31m", "c\u202e", "\u2028"])
async def test_instance_names_with_control_or_format_characters_are_refused(
    cluster: FakeCluster, n1: Node, name: str
) -> None:
    answer = await n1.client.post("/consumers/g", json={"name": name}, headers=V2)
    await refused(answer, 400, 40001, "is not allowed in a name")
    await refused(await n1.client.get("/v1/consumer-groups/g"), 404, 40404, "does not exist")


async def test_the_cli_reports_a_refused_topic_name(cluster: FakeCluster, n1: Node, capsys: Any) -> None:
    code = await asyncio.to_thread(main, ["topic", "create", "nl\n", "--server", n1.url])
    _, err = capsys.readouterr()
    assert code == 1 and "40001" in err and "'\\n' at index 2" in err
    assert cluster.topics == {}


async def test_every_route_refuses_a_control_character_in_a_path_name_before_it_runs(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    """Redpanda's invalid-input cases: a carriage return in a topic, DEL in an instance, STX in a group,
    on every route that names one (the path is percent-encoded, as a client sends it)."""
    cluster.add_topic("t", 1)
    bad = {"topic": "my%0Dtopic", "group": "My%02group", "instance": "my%7Finstance"}
    good = {"topic": "t", "group": "g", "instance": "i", "partition": "0", "node_id": "n1", "member": "m"}
    checked = 0
    for op in ROUTES:
        names = [name for name in bad if "{" + name + "}" in op.path]
        for name in names:
            path = op.path
            for param, value in {**good, name: bad[name]}.items():
                path = path.replace("{" + param + "}", value)
            response = await n1.client.request(
                op.method, yarl.URL(path, encoded=True),
                data=b"{}", headers={"Content-Type": "application/json"},
            )  # fmt: skip
            await refused(response, 400, 40001, f"path parameter {name}")
            checked += 1
    assert checked >= 20 and cluster.partitions[("t", 0)].records == []
