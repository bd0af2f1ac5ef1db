"""Consumer instances as Confluent's REST Proxy v2 makes them (over two in-memory fake nodes): the
standard create body and what each config does, the records' media types, seeking to a time, commits
with Redpanda's body, auto commit."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from fake_node import FakeCluster
from harness import Node
from waiting import wait_until

from raftlog_contract import BINARY_V2, JSON_V2, KAFKA_V2

V2 = {"Content-Type": KAFKA_V2}


async def answer(response: Any, status: int = 200) -> Any:
    text = await response.text()
    assert response.status == status, text
    return json.loads(text) if text else None


async def produce(node: Node, topic: str, partition: int, records: list[dict[str, Any]]) -> None:
    path = f"/topics/{topic}/partitions/{partition}"
    await answer(await node.client.post(path, json={"records": records}, headers={"Content-Type": JSON_V2}))


async def subscribed(node: Node, group: str, body: dict[str, Any] | None, topic: str = "t") -> str:
    created = await node.client.post(f"/consumers/{group}", json=body, headers=V2) if body is not None else (
        await node.client.post(f"/consumers/{group}")
    )  # fmt: skip
    base = "/consumers/{}/instances/{}".format(group, (await answer(created))["instance_id"])
    await answer(await node.client.post(f"{base}/subscription", json={"topics": [topic]}, headers=V2), 204)
    return base


async def produce_once_waiting(node: Node, value: int) -> None:
    """Produce ``value`` once the read under way waits for records: its second fetch (the first asks
    without waiting) has reached ``node``'s data plane."""
    fetches = node.data.calls["fetch"] + 2

    async def waiting() -> bool:
        return node.data.calls["fetch"] >= fetches

    await wait_until(waiting, "the read waits for records")
    await produce(node, "t", 0, [{"value": value}])


async def committed(node: Node, group: str, topic: str = "t") -> dict[int, int]:
    body = await answer(await node.client.get(f"/consumers/{group}/offsets", params={"topic": topic}))
    return {o["partition"]: o["offset"] for o in body["offsets"]}


async def test_a_bodiless_create_gives_a_binary_consumer_answering_its_own_type(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 1)
    await produce(n1, "t", 0, [{"value": "a"}])
    base = await subscribed(n1, "g", None)
    beginning = {"partitions": [{"topic": "t", "partition": 0}]}
    await answer(await n1.client.post(f"{base}/positions/beginning", json=beginning, headers=V2), 204)
    response = await n1.client.get(f"{base}/records", headers={"Accept": "*/*"})
    rows = await answer(response)
    assert response.content_type == BINARY_V2 and rows[0]["value"] == "ImEi"  # b'"a"', base64
    assert rows[0]["timestamp"] > 0 and rows[0]["timestamp_type"] == "CreateTime"


async def test_records_in_the_other_format_are_refused_before_anything_is_read(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 1)
    await produce(n1, "t", 0, [{"value": 1}, {"value": 2}])
    base = await subscribed(n1, "g", {"format": "json", "auto.offset.reset": "earliest"})
    refused = await n2.client.get(f"{base}/records", headers={"Accept": BINARY_V2})
    body = await answer(refused, 406)
    assert body["error_code"] == 40601 and "json" in body["message"] and refused.content_type == BINARY_V2
    response = await n2.client.get(f"{base}/records", headers={"Accept": JSON_V2})
    assert response.content_type == JSON_V2 and [r["value"] for r in await answer(response)] == [1, 2]


async def test_standard_configs_as_strings_and_numbers_and_id_overrides_name(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 1)
    body = {
        "id": "by-id", "name": "by-name", "format": "BINARY", "auto.offset.reset": "earliest",
        "auto.commit.enable": "false", "fetch.min.bytes": "1", "consumer.request.timeout.ms": 200,
    }  # fmt: skip
    created = await answer(await n1.client.post("/consumers/g", json=body, headers=V2))
    assert created["instance_id"] == "by-id" and created["base_uri"].endswith("/consumers/g/instances/by-id")
    again = await answer(await n1.client.post("/consumers/g", json=body, headers=V2), 409)
    assert again["error_code"] == 40902


async def test_a_read_without_timeout_waits_the_request_timeout_and_no_longer_than_needed(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 1)
    base = await subscribed(n1, "g", {"format": "json", "consumer.request.timeout.ms": "400"})
    started = time.monotonic()
    assert await answer(await n1.client.get(f"{base}/records")) == []
    waited = time.monotonic() - started
    assert 0.35 <= waited < 5, waited

    started = time.monotonic()
    writer = asyncio.create_task(produce_once_waiting(n1, 7))
    rows = await answer(await n1.client.get(f"{base}/records"))
    await writer
    assert [r["value"] for r in rows] == [7] and time.monotonic() - started < 5


async def test_fetch_min_bytes_gathers_until_enough_came_or_the_timeout(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 1)
    base = await subscribed(
        n1, "g", {"format": "json", "fetch.min.bytes": 100_000, "auto.offset.reset": "earliest"}
    )
    await produce(n1, "t", 0, [{"value": 1}])

    writer = asyncio.create_task(produce_once_waiting(n1, 2))
    rows = await answer(await n1.client.get(f"{base}/records", params={"timeout": "1000"}))
    await writer
    assert [r["value"] for r in rows] == [1, 2]  # both: the first alone was below fetch.min.bytes
    assert await answer(await n1.client.get(f"{base}/records", params={"timeout": "0"})) == []


async def test_auto_commit_commits_what_earlier_reads_returned(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 1)
    await produce(n1, "t", 0, [{"value": v} for v in range(3)])
    config = {"auto.offset.reset": "earliest", "auto.commit.enable": "true", "auto.commit.interval.ms": 0}
    base = await subscribed(n1, "auto", config)
    rows = await answer(await n2.client.get(f"{base}/records", params={"timeout": "1000"}))
    assert len(rows) == 3 and await committed(n1, "auto") == {}  # not before a later read
    await answer(await n2.client.get(f"{base}/records", params={"timeout": "0"}))
    assert await committed(n1, "auto") == {0: 3}
    await produce(n1, "t", 0, [{"value": 3}])
    assert len(await answer(await n2.client.get(f"{base}/records", params={"timeout": "1000"}))) == 1
    await answer(await n1.client.delete(base), 204)  # leaving commits too, as Kafka's close
    assert await committed(n1, "auto") == {0: 4}
    manual = await subscribed(n1, "manual", {"auto.offset.reset": "earliest"})
    for _ in range(2):
        await answer(await n2.client.get(f"{manual}/records", params={"timeout": "200"}))
    assert await committed(n1, "manual") == {}


async def test_seek_to_a_time_and_past_every_record(cluster: FakeCluster, n1: Node, n2: Node) -> None:
    cluster.add_topic("t", 1)
    stamps = [1_700_000_000_000, 1_700_000_060_000, 1_700_000_120_000]  # 22:13:20, +1 min, +2 min UTC
    await produce(n1, "t", 0, [{"value": i, "timestamp": ts} for i, ts in enumerate(stamps)])
    base = await subscribed(n1, "g", {"format": "json"})

    async def seek(timestamp: Any) -> list[int]:
        body = {"timestamps": [{"topic": "t", "partition": 0, "timestamp": timestamp}]}
        await answer(await n1.client.post(f"{base}/positions", json=body, headers=V2), 204)
        return [
            r["value"] for r in await answer(await n1.client.get(f"{base}/records", params={"timeout": "0"}))
        ]

    assert await seek("2023-11-14T22:14:00Z") == [1, 2]
    assert await seek("2023-11-14T23:14:00+01:00") == [1, 2]  # the same instant
    assert await seek(stamps[2]) == [2]
    assert await seek(stamps[2] + 1) == []  # past every record: from the end
    await produce(n1, "t", 0, [{"value": 3, "timestamp": stamps[2] + 5}])
    assert [
        r["value"] for r in await answer(await n1.client.get(f"{base}/records", params={"timeout": "0"}))
    ] == [3]
    for bad in ("yesterday", "2023-11-14T22:14:00", -5):
        body = {"timestamps": [{"topic": "t", "partition": 0, "timestamp": bad}]}
        assert (await answer(await n1.client.post(f"{base}/positions", json=body, headers=V2), 400))[
            "error_code"
        ] == 40001
    unassigned = {"timestamps": [{"topic": "t", "partition": 5, "timestamp": 0}]}
    assert (await answer(await n1.client.post(f"{base}/positions", json=unassigned, headers=V2), 409))[
        "error_code"
    ] == 40906


async def test_commits_take_redpandas_partitions_body_and_answer_an_empty_list(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 2)
    base = await subscribed(n1, "g", {"format": "json"})
    body = {
        "partitions": [
            {"topic": "t", "partition": 0, "offset": 5},
            {"topic": "t", "partition": 1, "offset": 0},
        ]
    }
    response = await n1.client.post(f"{base}/offsets", json=body, headers=V2)
    assert await answer(response) == [] and response.content_type == KAFKA_V2
    assert await committed(n1, "g") == {0: 5, 1: 0}
    both = {**body, "offsets": body["partitions"]}
    assert (await answer(await n1.client.post(f"{base}/offsets", json=both, headers=V2), 400))[
        "error_code"
    ] == 40001
    listed = await answer(await n1.client.get(f"{base}/offsets"))
    assert sorted((o["partition"], o["offset"], o["metadata"]) for o in listed["offsets"]) == [
        (0, 5, ""),
        (1, 0, ""),
    ]


async def test_a_failed_auto_commit_does_not_fail_the_read_and_is_tried_again(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 2, [["n1"], ["n2"]])
    for p in (0, 1):
        await produce(n1, "t", p, [{"value": p}])
    config = {
        "format": "json",
        "auto.offset.reset": "earliest",
        "auto.commit.enable": True,
        "auto.commit.interval.ms": "0",
    }
    base = await subscribed(n1, "auto", config)
    assert len(await answer(await n2.client.get(f"{base}/records", params={"timeout": "1000"}))) == 2
    leader = cluster.partitions[("t", 0)].leader
    cluster.partitions[("t", 0)].leader = None  # partition 0 cannot be committed (nor read) for now
    await produce(n1, "t", 1, [{"value": 2}])
    rows = await answer(await n2.client.get(f"{base}/records", params={"timeout": "1000"}))
    assert [r["value"] for r in rows] == [2]  # the read went on
    one = await answer(
        await n1.client.get("/consumers/auto/offsets", params={"topic": "t", "partition": "1"})
    )
    assert one["offsets"][0]["offset"] == 1  # partition 1's commit went through, 0's failed
    cluster.partitions[("t", 0)].leader = leader
    await answer(await n2.client.get(f"{base}/records", params={"timeout": "0"}))
    assert await committed(n1, "auto") == {0: 1, 1: 2}  # tried again
