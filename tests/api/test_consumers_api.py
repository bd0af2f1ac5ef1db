"""Consumer-group endpoints over two in-memory fake nodes (``__consumer_groups`` partitions led by
n1 and n2, so instance requests are forwarded to the group's coordinator): instances, subscriptions,
assignments, records, positions, fenced commits, auto.offset.reset, the admin view and lag metrics."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fake_node import FakeCluster
from harness import Node
from waiting import wait_until

from api.state import STATE
from partitions.names import GROUPS_TOPIC
from raftlog.storage.partitioner import partition_for_key
from raftlog_client.client import GroupConsumer, RaftlogClient

V2 = {"Content-Type": "application/vnd.kafka.v2+json"}


async def ok(response: Any, status: int = 200) -> Any:
    text = await response.text()
    assert response.status == status, text
    return json.loads(text) if text else None


async def refused(response: Any, status: int, code: int) -> dict[str, Any]:
    text = await response.text()
    assert response.status == status, text
    body = json.loads(text)
    assert body["error_code"] == code, body
    return dict(body)


async def create(node: Node, group: str, name: str, **config: Any) -> str:
    """A JSON-format instance unless ``config`` says otherwise (the default is binary, as Confluent's)."""
    body = {"name": name, "format": "json", **config}
    body = await ok(await node.client.post(f"/consumers/{group}", json=body, headers=V2))
    assert body["instance_id"] == name and body["base_uri"].endswith(f"/consumers/{group}/instances/{name}")
    return f"/consumers/{group}/instances/{name}"


async def produce(node: Node, topic: str, partition: int, values: list[int]) -> None:
    records = {"records": [{"value": v} for v in values]}
    await ok(await node.client.post(f"/topics/{topic}/partitions/{partition}", json=records))


async def assigned(node: Node, base: str) -> tuple[set[tuple[str, int]], int]:
    body = await ok(await node.client.get(f"{base}/assignments"))
    return {(p["topic"], p["partition"]) for p in body["partitions"]}, body["generation"]


async def test_a_group_shares_partitions_and_fences_commits(cluster: FakeCluster, n1: Node, n2: Node) -> None:
    cluster.add_topic("orders", 4, [["n1"], ["n2"], ["n1"], ["n2"]])
    for p in range(4):
        await produce(n1, "orders", p, [p * 10, p * 10 + 1])
    a = await create(n1, "g", "a", **{"auto.offset.reset": "earliest"})
    await ok(await n2.client.post(f"{a}/subscription", json={"topics": ["orders"]}, headers=V2), 204)
    assert (await ok(await n2.client.get(f"{a}/subscription"))) == {"topics": ["orders"]}
    alone, first_generation = await assigned(n2, a)
    assert alone == {("orders", p) for p in range(4)}

    # instance a reads everything from any node; the coordinator fetches from each partition's leader
    values = []
    for _ in range(5):
        rows = await ok(await n2.client.get(f"{a}/records", params={"timeout": "50"}))
        values += [r["value"] for r in rows]
    assert sorted(values) == [0, 1, 10, 11, 20, 21, 30, 31]
    assert await ok(await n1.client.post(f"{a}/offsets", headers=V2)) == []  # commit what was fetched
    committed = await ok(await n1.client.get("/consumers/g/offsets", params={"topic": "orders"}))
    assert sorted((o["partition"], o["offset"]) for o in committed["offsets"]) == [(p, 2) for p in range(4)]

    # b joins: a rebalance; a's old generation and its lost partitions are fenced off
    b = await create(n2, "g", "b")
    await ok(await n1.client.post(f"{b}/subscription", json={"topics": ["orders"]}, headers=V2), 204)
    mine, generation = await assigned(n1, a)
    theirs, _ = await assigned(n2, b)
    assert generation > first_generation and len(mine) == len(theirs) == 2 and not mine & theirs
    lost = sorted(alone - mine)[0]
    entry = {"topic": lost[0], "partition": lost[1], "offset": 0}
    stale = {"offsets": [entry], "generation": first_generation}
    body = await refused(await n1.client.post(f"{a}/offsets", json=stale, headers=V2), 409, 40905)
    assert body["generation"] == generation
    await refused(await n2.client.post(f"{a}/offsets", json={"offsets": [entry]}, headers=V2), 409, 40906)
    old_generation = {"generation": str(first_generation)}
    await refused(await n2.client.get(f"{a}/records", params=old_generation), 409, 40905)
    await refused(await n2.client.post(f"{a}/positions", json={"offsets": [entry]}, headers=V2), 409, 40906)
    assert (await ok(await n1.client.get("/consumers/g/offsets", params={"topic": "orders"})))["offsets"]

    # b starts from the committed offsets: nothing new until more is produced
    assert await ok(await n1.client.get(f"{b}/records")) == []
    await produce(n1, "orders", lost[1], [99])
    rows = await ok(await n2.client.get(f"{b}/records", params={"timeout": "200"}))
    assert [(r["partition"], r["offset"], r["value"]) for r in rows] == [(lost[1], 2, 99)]

    # a leaves: b owns everything; a is gone
    await ok(await n2.client.delete(a), 204)
    await refused(await n1.client.get(f"{a}/records"), 404, 40403)
    everything, _ = await assigned(n1, b)
    assert everything == {("orders", p) for p in range(4)}


async def test_offset_reset_and_seeks(cluster: FakeCluster, n1: Node, n2: Node) -> None:
    cluster.add_topic("t", 1, [["n2"]])
    await produce(n1, "t", 0, [1, 2, 3])
    latest = await create(n1, "late", "x")  # auto.offset.reset defaults to latest
    await ok(await n1.client.post(f"{latest}/subscription", json={"topics": ["t"]}, headers=V2), 204)
    assert await ok(await n1.client.get(f"{latest}/records")) == []
    await produce(n1, "t", 0, [4])
    assert [r["value"] for r in await ok(await n1.client.get(f"{latest}/records"))] == [4]
    partitions = {"partitions": [{"topic": "t", "partition": 0}]}
    await ok(await n2.client.post(f"{latest}/positions/beginning", json=partitions, headers=V2), 204)
    assert [r["value"] for r in await ok(await n1.client.get(f"{latest}/records"))] == [1, 2, 3, 4]
    seek = {"offsets": [{"topic": "t", "partition": 0, "offset": 2}]}
    await ok(await n2.client.post(f"{latest}/positions", json=seek, headers=V2), 204)
    assert [r["offset"] for r in await ok(await n1.client.get(f"{latest}/records"))] == [2, 3]
    await ok(await n2.client.post(f"{latest}/positions/end", json=partitions, headers=V2), 204)
    assert await ok(await n1.client.get(f"{latest}/records")) == []

    binary = await create(n2, "early", "y", format="binary", **{"auto.offset.reset": "earliest"})
    await ok(await n1.client.post(f"{binary}/subscription", json={"topics": ["t"]}, headers=V2), 204)
    rows = await ok(await n1.client.get(f"{binary}/records"))
    assert [r["format"] for r in rows] == ["binary"] * 4 and rows[0]["value"] == "MQ=="  # b"1"


async def test_bad_requests_and_unknown_instances(cluster: FakeCluster, n1: Node, n2: Node) -> None:
    bad_configs: list[dict[str, Any]] = [
        {"auto.commit.enable": "sometimes"},
        {"format": "xml"},  # avro, jsonschema and protobuf are schema formats (api.typed_records)
        {"colour": "red"},
        {"auto.offset.reset": "bad-config"},
        {"fetch.min.bytes": "many"},
        {"fetch.min.bytes": "--5"},
        {"fetch.min.bytes": 10_000_001},
        {"consumer.request.timeout.ms": -1},
        {"session.timeout.ms": 10},
    ]
    for config in bad_configs:
        body = await refused(await n1.client.post("/consumers/g", json=config, headers=V2), 422, 42204)
        assert next(iter(config)) in body["message"], body
    await refused(await n2.client.get("/consumers/g/instances/nobody/assignments"), 404, 40403)
    await create(n1, "g", "a")
    await refused(await n2.client.post("/consumers/g", json={"name": "a"}, headers=V2), 409, 40902)
    await refused(
        await n2.client.post("/consumers/g/instances/a/subscription", json={"topics": []}, headers=V2),
        400,
        40001,
    )
    await refused(await n1.client.get("/v1/consumer-groups/nothing"), 404, 40404)
    assert GROUPS_TOPIC in cluster.topics and GROUPS_TOPIC not in await ok(await n1.client.get("/topics"))
    await refused(await n2.client.delete(f"/v1/topics/{GROUPS_TOPIC}"), 400, 40001)
    assert GROUPS_TOPIC in cluster.topics


async def test_admin_view_and_lag_metrics(cluster: FakeCluster, n1: Node, n2: Node) -> None:
    cluster.add_topic("t", 2, [["n1"], ["n2"]])
    await produce(n1, "t", 0, [1, 2, 3])
    await produce(n1, "t", 1, [1])
    a = await create(n2, "watched", "a", **{"auto.offset.reset": "earliest"})
    await ok(await n2.client.post(f"{a}/subscription", json={"topics": ["t"]}, headers=V2), 204)
    commit = {"offsets": [{"topic": "t", "partition": 0, "offset": 1}]}
    assert await ok(await n1.client.post(f"{a}/offsets", json=commit, headers=V2)) == []
    listed = await ok(await n1.client.get("/v1/consumer-groups"))
    assert [(g["group"], g["members"]) for g in listed["groups"]] == [("watched", 1)]
    detail = await ok(await n2.client.get("/v1/consumer-groups/watched"))
    rows = {p["partition"]: p for p in detail["members"][0]["partitions"]}
    assert (rows[0]["committed_offset"], rows[0]["end_offset"], rows[0]["lag"]) == (1, 3, 2)
    assert (rows[1]["committed_offset"], rows[1]["lag"]) == (None, None)
    assert detail["lag"] == 2
    coordinator = (
        n1 if cluster.partitions[(GROUPS_TOPIC, detail["coordinator_partition"])].leader == "n1" else n2
    )
    text = await (await coordinator.client.get("/metrics")).text()
    assert 'raftlog_consumer_group_lag{group="watched",partition="0",topic="t"} 2.0' in text


async def test_a_member_without_partitions_waits_for_a_rebalance(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("one", 1, [["n1"]])
    await produce(n1, "one", 0, [7])
    members = []
    for name in ("a", "b"):  # range: a (first in order) gets the only partition
        members.append(await create(n1, "idle", name, **{"auto.offset.reset": "earliest"}))
        await ok(
            await n1.client.post(f"{members[-1]}/subscription", json={"topics": ["one"]}, headers=V2), 204
        )
    assert (await assigned(n1, members[1]))[0] == set()
    waiting = asyncio.create_task(n2.client.get(f"{members[1]}/records", params={"timeout": "5000"}))

    async def read_in_flight() -> bool:
        return n2.client.server.app[STATE].admission.in_flight["long-poll"] == 1

    await wait_until(read_in_flight, "b's read reached n2")
    assert not waiting.done()
    await ok(await n1.client.delete(members[0]), 204)
    rows = await ok(await asyncio.wait_for(waiting, 5))
    assert [r["value"] for r in rows] == [7]


async def test_group_consumer_relearns_its_assignment_and_rejoins(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 2, [["n1"], ["n2"]])
    await produce(n1, "t", 0, [1])
    await produce(n1, "t", 1, [2])
    async with RaftlogClient([n2.url], retries=2) as client:
        consumer = GroupConsumer(client, "py", offset_reset="earliest")
        await consumer.start(["t"])
        first_generation = consumer.generation
        other = await create(n1, "py", "other")
        await ok(await n1.client.post(f"{other}/subscription", json={"topics": ["t"]}, headers=V2), 204)
        assert await consumer.poll(timeout_ms=0) == []  # 40905: the group rebalanced since
        assert consumer.generation is not None and first_generation is not None
        assert consumer.generation > first_generation
        records = await consumer.poll(timeout_ms=100)
        assert len(records) == 1  # its one partition now
        await consumer.commit()
        await ok(await n1.client.delete(f"/consumers/py/instances/{consumer.instance_id}"), 204)  # evicted
        assert await consumer.poll(timeout_ms=0) == [] and consumer.rejoined == 1
        await consumer.close()


async def test_group_consumer_whose_session_ran_out_after_a_rebalance_joins_again(
    cluster: FakeCluster, n1: Node, n2: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read refused for a stale generation (the group rebalanced), then the member's session runs out
    before it reads its new assignment (a loaded machine, a 3 s session): it joins again, where it used to
    raise the assignment's 404 to its caller (seen in a whole run of the suite)."""
    cluster.add_topic("t", 1, [["n1"]])
    async with RaftlogClient([n2.url], retries=2) as client:
        consumer = GroupConsumer(client, "late", offset_reset="earliest")
        await consumer.start(["t"])
        other = await create(n1, "late", "other")
        await ok(await n1.client.post(f"{other}/subscription", json={"topics": ["t"]}, headers=V2), 204)
        learn = GroupConsumer.assignment

        async def expired_first(self: GroupConsumer) -> tuple[int, list[tuple[str, int]]]:
            await ok(await n1.client.delete(f"/consumers/late/instances/{self.instance_id}"), 204)
            monkeypatch.setattr(GroupConsumer, "assignment", learn)
            return await learn(self)

        monkeypatch.setattr(GroupConsumer, "assignment", expired_first)
        expired = consumer.instance_id
        assert await consumer.poll(timeout_ms=0) == [] and consumer.rejoined == 1
        assert consumer.instance_id not in (None, expired)  # a member again, under a new instance
        generation, _ = await consumer.assignment()  # which its group answers
        assert generation == consumer.generation
        await consumer.close()


async def test_a_share_group_past_the_coordinators_bound_is_refused(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    """``--group-share-max-groups`` 1: a member joining a second share group of the same coordinator
    partition is refused 409/40933, the message naming the bound; a member of the first still joins."""
    cluster.add_topic("orders", 1, [["n1"]])
    for node in (n1, n2):
        node.data.groups.share.groups_max = 1
    await ok(await n1.client.post("/share-groups/s0", json={"topics": ["orders"]}))
    partitions = n1.data.groups.partitions()
    same = next(
        f"s{i}"
        for i in range(1, 100)
        if partition_for_key(f"s{i}".encode(), partitions) == partition_for_key(b"s0", partitions)
    )
    body = await refused(
        await n2.client.post(f"/share-groups/{same}", json={"topics": ["orders"]}), 409, 40933
    )
    assert "1 share groups" in body["message"] and "--group-share-max-groups" in body["message"]
    await ok(await n2.client.post("/share-groups/s0", json={"topics": ["orders"]}))


async def test_an_instances_commit_keeps_each_offsets_metadata_and_refuses_one_too_long_whole(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    """Confluent's commit body names a ``metadata`` string per offset: kept with the offset (as a Kafka
    client's, on the partition's leader) and answered by the instance's committed offsets, from any node;
    one past Kafka's bound (4,096 UTF-16 units) is refused 400 before any offset of the request goes in."""
    cluster.add_topic("m", 2, [["n1"], ["n2"]])
    a = await create(n1, "meta", "a")
    await ok(await n2.client.post(f"{a}/subscription", json={"topics": ["m"]}, headers=V2), 204)
    commit = {
        "offsets": [
            {"topic": "m", "partition": 0, "offset": 0, "metadata": "stream time é🙂"},
            {"topic": "m", "partition": 1, "offset": 0},
        ]
    }
    assert await ok(await n2.client.post(f"{a}/offsets", json=commit, headers=V2)) == []
    shown = await ok(await n1.client.get(f"{a}/offsets"))
    assert sorted((o["partition"], o["offset"], o["metadata"]) for o in shown["offsets"]) == [
        (0, 0, "stream time é🙂"),
        (1, 0, ""),
    ]
    too_long = {
        "offsets": [
            {"topic": "m", "partition": 1, "offset": 0, "metadata": "kept?"},
            {"topic": "m", "partition": 0, "offset": 0, "metadata": "m" * 4097},
        ]
    }
    body = await refused(await n1.client.post(f"{a}/offsets", json=too_long, headers=V2), 400, 40001)
    assert "4097 characters" in body["message"], body
    shown = await ok(await n2.client.get(f"{a}/offsets"))
    assert sorted((o["partition"], o["metadata"]) for o in shown["offsets"]) == [
        (0, "stream time é🙂"),
        (1, ""),
    ]
    wrong = {"offsets": [{"topic": "m", "partition": 0, "offset": 0, "metadata": 7}]}
    await refused(await n1.client.post(f"{a}/offsets", json=wrong, headers=V2), 400, 40001)
