"""The Python client against the API over fake nodes: retries, failover, idempotent produce, helpers."""

from __future__ import annotations

import random

import pytest
from fake_node import FakeCluster
from harness import Harness, Node

from partitions.names import GROUPS_TOPIC
from raftlog.consensus.errors import NoLeader, OutcomeUnknown
from raftlog_client.client import FetchedRecord, Message, Produced, ProduceFailed, RaftlogClient
from raftlog_client.errors import RequestFailed, Unavailable

DEAD = "http://127.0.0.1:9"  # the discard port: nothing listens there


def client_for(*servers: str, **options: object) -> RaftlogClient:
    settings: dict[str, object] = {"backoff_s": 0.001, "backoff_max_s": 0.01, "rng": random.Random(7)}
    settings.update(options)
    return RaftlogClient(list(servers), **settings)  # type: ignore[arg-type]


async def test_produce_fetch_round_trip_exact_bytes(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 2)
    async with client_for(n1.url) as client:
        produced = await client.produce(
            "t",
            [
                Message(b"\x00\xffraw", key=b"k1", headers=[("h", b"\x01")], partition=0),
                Message("text", partition=1),
            ],
        )
        assert produced == [Produced(0, 0), Produced(1, 0)]
        records = await client.fetch("t", produced[0].partition, produced[0].offset)
        assert records[0] == FetchedRecord(
            "t", produced[0].partition, 0, records[0].timestamp_ms, b"k1", b"\x00\xffraw", (("h", b"\x01"),)
        )
        assert await client.offsets("t", 1) == (0, 1)
        assert client.last_leader == "n1"


async def test_produce_is_idempotent_across_a_lost_answer(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    n1.data.lose_produce_answers = [OutcomeUnknown("t-0.1", "commit not confirmed in time")]
    async with client_for(n1.url, producer_id=77) as client:
        produced = await client.produce("t", [Message(b"once"), Message(b"twice?")])
        assert produced == [Produced(0, 0), Produced(0, 1)]
        assert n1.data.calls["produce_batch"] == 2  # the retry reached the data service and was deduplicated
        assert [r.value for r in cluster.partitions[("t", 0)].records] == [b"once", b"twice?"]
        await client.produce("t", [Message(b"next")])
    rows = cluster.partitions[("t", 0)].producers.to_rows()  # [producer id, epoch, sequence, base, end]
    assert [row[2:] for row in rows if row[0] == 77] == [[0, 0, 2], [1, 2, 3]]  # a sequence per call


async def test_retries_503_then_gives_up(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    n1.data.inject["produce"] = [NoLeader("t-0.1"), NoLeader("t-0.1")]
    async with client_for(n1.url) as client:
        assert await client.produce("t", [Message(b"v")]) == [Produced(0, 0)]
    n1.data.inject["fetch"] = [NoLeader("t-0.1")] * 5
    async with client_for(n1.url, retries=2) as client:
        with pytest.raises(RequestFailed) as failed:
            await client.fetch("t", 0, 0)
    assert failed.value.status == 503 and failed.value.error_code == 50301
    assert n1.data.calls["fetch"] == 3


async def test_moves_to_the_next_server_when_one_is_down(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    async with client_for(DEAD, n1.url) as client:
        assert await client.topics() == ["t"]
    async with client_for(DEAD, retries=1) as client:
        with pytest.raises(Unavailable):
            await client.topics()


async def test_non_retriable_errors_surface_at_once(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    async with client_for(n1.url) as client:
        with pytest.raises(RequestFailed) as failed:
            await client.fetch("t", 0, 5)
        assert (failed.value.status, failed.value.error_code) == (416, 41601)
        assert failed.value.body["end_offset"] == 0
        with pytest.raises(RequestFailed) as failed:
            await client.topic("missing")
        assert failed.value.error_code == 40401


async def test_per_record_failures_raise_produce_failed(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 2, configs={"max.message.bytes": 100})
    async with client_for(n1.url) as client:
        with pytest.raises(ProduceFailed) as failed:
            await client.produce("t", [Message(b"small", partition=0), Message(b"x" * 500, partition=1)])
    results = failed.value.results
    assert results[0] == Produced(0, 0)
    assert isinstance(results[1], RequestFailed) and results[1].error_code == 41301


async def test_consume_helper_and_consumer_offsets(cluster: FakeCluster, n1: Node) -> None:
    cluster.add_topic("t", 1)
    cluster.add_topic(GROUPS_TOPIC, 1, [["n1"]])  # the group's coordinator records what it commits
    async with client_for(n1.url) as client:
        for i in range(5):
            await client.produce("t", [Message(f"v{i}")])
        values = [r.value async for r in client.consume("t", 0, 1)]
        assert values == [b"v1", b"v2", b"v3", b"v4"]
        values = [r.value async for r in client.consume("t", 0, 0, max_records=2)]
        assert values == [b"v0", b"v1"]
        followed = [r.offset async for r in client.consume("t", 0, 3, follow=True, max_records=2)]
        assert followed == [3, 4]
        await client.commit_offsets("g", [("t", 0, 3)])
        await client.commit_offsets("g", [("t", 0, 1)])
        assert await client.committed_offsets("g", "t") == {("t", 0): 3}
        await client.commit_offsets("g", [("t", 0, 1)], reset=True)
        assert await client.committed_offsets("g", "t", 0) == {("t", 0): 1}


async def test_topic_admin_with_token(cluster: FakeCluster, harness: Harness) -> None:
    node = await harness.start(cluster, "n1", admin_token="tok")
    async with client_for(node.url, admin_token="tok") as client:
        created = await client.create_topic("orders", partitions=2, replication_factor=1)
        assert created["partitions"] == 2
        assert await client.topics() == ["orders"]
        assert len(await client.partitions("orders")) == 2
        assert (await client.cluster.health())["controller"] == "n1"
        assert [n["node_id"] for n in await client.cluster.nodes()] == ["n1", "n2"]
        assert (await client.cluster.partition_state("orders", 0))["leader"] == "n1"
        with pytest.raises(RequestFailed) as failed:
            await client.create_topic("orders")
        assert failed.value.error_code == 40901
        await client.delete_topic("orders")
        assert await client.topics() == []
    async with client_for(node.url) as client:
        with pytest.raises(RequestFailed) as failed:
            await client.cluster.nodes()
        assert failed.value.status == 401


async def test_transfer_leadership_through_the_client(cluster: FakeCluster, n1: Node, n2: Node) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])
    async with client_for(n2.url) as client:
        moved = await client.cluster.transfer_leadership("t", 0, "n2")
        assert moved["leader"] == "n2"
        assert client.last_leader == "n1"  # n2 forwarded the request to n1, which led then


def test_client_needs_a_server() -> None:
    with pytest.raises(ValueError):
        RaftlogClient([])
    assert 0 <= RaftlogClient(["http://x"]).producer_id < 2**62


async def test_a_move_whose_answer_was_lost_is_sent_again(cluster: FakeCluster, harness: Harness) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])
    node = await harness.start(cluster, "n1", admin_token="tok")
    node.data.inject["move_replicas"] = [OutcomeUnknown("controller", "commit not confirmed in time")]
    async with client_for(node.url, admin_token="tok") as client:
        started = await client.cluster.move_replicas("t", 0, ["n2", "n1"])
        again = await client.cluster.move_replicas("t", 0, ["n2", "n1"])  # as if the first answer was lost
    assert node.data.calls["move_replicas"] == 3  # the 504, its retry, the request again
    assert started["move"]["target"] == again["move"]["target"] == ["n2", "n1"]
    assert cluster.moves[("t", 0)].target == ("n2", "n1")
