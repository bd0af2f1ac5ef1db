"""Health, partition state, describe and the CLI agree on replicas that cannot open or replay and on who
leads; any node gives the leader's word on which replicas are in sync (over fake nodes)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_node import INTERNAL_CREDENTIAL, FakeCluster
from harness import Harness, Node

from partitions.metadata.service import PartitionState, ReplicaState
from partitions.peers.client import MEDIA_TYPE, PeerClient, remote_peer
from partitions.replicas.failures import ReplicaFailure
from raftlog_cli.cli import main

REPLAY_ERROR = (
    "InvariantViolation: logs/orders-0.1: replayed entry at offset 6 differs from the batch on disk"
)


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster(["n1", "n2", "n3"])


async def test_a_replica_that_cannot_replay_on_another_node_makes_the_cluster_unhealthy(
    cluster: FakeCluster, n1: Node, capsys: Any
) -> None:
    cluster.add_topic("orders", 2, [["n2", "n1", "n3"], ["n1", "n2", "n3"]])
    cluster.failures.append(ReplicaFailure("n2", "orders", 0, REPLAY_ERROR, 3))
    health = await (await n1.client.get("/v1/cluster/health")).json()
    assert health["is_healthy"] is False
    assert health["failed_replicas"] == [
        {"node": "n2", "topic": "orders", "partition": 0, "error": REPLAY_ERROR, "attempts": 3}
    ]
    assert health["leaderless_partitions"] == [{"topic": "orders", "partition": 0}], "n2 leads nothing"
    assert health["under_replicated_partitions"] == [{"topic": "orders", "partition": 0}]

    capsys.readouterr()
    code = await asyncio.to_thread(main, ["cluster", "health", "--server", n1.url])
    out = capsys.readouterr().out
    assert code == 1 and "healthy: NO" in out and "leaderless partitions: orders/0" in out
    assert f"failed replicas (cannot open or replay): 1\n  n2 orders/0 (attempt 3): {REPLAY_ERROR}" in out

    cluster.states["n2"] = "dead"  # a node that is down reports nothing: it is down altogether
    health = await (await n1.client.get("/v1/cluster/health")).json()
    assert health["failed_replicas"] == [] and health["nodes_down"] == ["n2"]


async def test_partition_state_and_describe_show_a_failed_follower_and_the_same_leader(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("orders", 1, [["n1", "n2", "n3"]])
    cluster.failures.append(ReplicaFailure("n3", "orders", 0, REPLAY_ERROR, 1))
    for asked in (n1, n2):
        state = await (await asked.client.get("/v1/partitions/orders/0")).json()
        assert state["leader"] == "n1"
        assert state["replicas"][2] == {
            "node": "n3",
            "role": "failed",
            "match_offset": None,
            "lag": None,
            "match_index": None,
            "in_sync": False,
            "error": REPLAY_ERROR,
            "node_state": "alive",  # its node is up: only its replica cannot replay
        }
        described = await (await asked.client.get("/topics/orders")).json()
        [partition] = described["partitions"]
        assert partition["leader"] == state["leader"]
        assert partition["replicas"][2] == {
            "broker": 3,
            "node": "n3",
            "leader": False,
            "in_sync": False,
            "error": REPLAY_ERROR,
        }
        single = await (await asked.client.get("/topics/orders/partitions/0")).json()
        assert single == partition


async def test_a_node_that_does_not_lead_gives_the_leaders_word_on_in_sync(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 1, [["n1", "n2", "n3"]])
    admin = n1.node.local.admin
    leaders_view = admin.partition_state

    async def lagging_n3(topic: str, partition: int) -> PartitionState:  # only the leader knows n3 lags
        state = await leaders_view(topic, partition)
        replicas = [
            r if r.node != "n3" else ReplicaState("n3", "follower", 2, 5000, False) for r in state.replicas
        ]
        return PartitionState(topic, partition, state.leader, 1, 0, 0, replicas)

    admin.partition_state = lagging_n3  # type: ignore[method-assign]
    for path in ("/topics/t/partitions", "/topics/t/partitions/0"):
        answer = await (await n2.client.get(path)).json()
        view = answer[0] if isinstance(answer, list) else answer
        assert view["leader"] == "n1"
        assert [r["in_sync"] for r in view["replicas"]] == [True, True, False], path


async def test_without_a_known_leader_in_sync_is_unknown_not_false(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("t", 1, [["n1", "n2", "n3"]])
    cluster.partitions[("t", 0)].leader = None
    cluster.failures.append(ReplicaFailure("n2", "t", 0, REPLAY_ERROR, 2))
    for asked in (n1, n2):
        [view] = await (await asked.client.get("/topics/t/partitions")).json()
        assert view == {
            "partition": 0,
            "leader": None,
            "replicas": [
                {"broker": 1, "node": "n1", "leader": False, "in_sync": None, "error": None},
                {"broker": 2, "node": "n2", "leader": False, "in_sync": False, "error": REPLAY_ERROR},
                {"broker": 3, "node": "n3", "leader": False, "in_sync": None, "error": None},
            ],
        }


async def test_a_leader_that_cannot_be_asked_is_still_named_and_in_sync_is_unknown(
    cluster: FakeCluster, harness: Harness, n2: Node
) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])  # n1 leads, but serves no API: it cannot be asked
    [view] = await (await n2.client.get("/topics/t/partitions")).json()
    assert view["leader"] == "n1"
    assert [(r["node"], r["in_sync"]) for r in view["replicas"]] == [("n1", None), ("n2", None)]


async def test_the_internal_failure_list_needs_the_cluster_credential(cluster: FakeCluster, n2: Node) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])
    cluster.failures.append(ReplicaFailure("n2", "t", 0, REPLAY_ERROR, 4))
    refused = await n2.client.post("/internal/v1/peer/replica_failures", headers={"Content-Type": MEDIA_TYPE})
    assert refused.status == 401
    peer = PeerClient(INTERNAL_CREDENTIAL, cluster.addresses.get)
    try:
        answer = await remote_peer(peer, "n2").replica_failures()
    finally:
        await peer.close()
    assert answer.node == "n2" and answer.digest != 0
    assert answer.failures == (ReplicaFailure("n2", "t", 0, REPLAY_ERROR, 4),)
