"""Automatic topic creation's own rules, without a cluster: the defaults a topic gets, which names a
request may start creating (per request, per node, never twice at once), and what each name is answered
as its creation goes (created, still running, refused, created by another)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafka_api.auto_topics import (
    CREATIONS_IN_FLIGHT_MAX,
    CREATIONS_PER_REQUEST_MAX,
    AutoTopics,
    TopicDefaults,
    admit,
)
from partitions.errors import CapacityExceeded, NoControllerLeader, PlacementImpossible, TopicExists


def test_the_default_replication_factor_is_three_or_every_live_node_when_fewer() -> None:
    assert [TopicDefaults().replication(live) for live in (0, 1, 2, 3, 5)] == [1, 1, 2, 3, 3]
    assert TopicDefaults(replication_factor=2).replication(5) == 2
    assert TopicDefaults(replication_factor=5).replication(3) == 5, "as set: placement refuses it"
    for bad in ({"partitions": 0}, {"replication_factor": -1}):
        with pytest.raises(ValueError):
            TopicDefaults(**bad)  # type: ignore[arg-type]


def test_a_request_starts_at_most_its_share_and_the_node_at_most_its_bound() -> None:
    names = [f"t{i}" for i in range(25)]
    start, already, later = admit(names, set(), per_request_max=10, in_flight_max=50)
    assert start == names[:10] and already == [] and later == names[10:]
    start, already, later = admit(names, {f"x{i}" for i in range(46)}, per_request_max=10, in_flight_max=50)
    assert start == names[:4] and later == names[4:], "four places left on the node"
    start, already, later = admit(names, {f"x{i}" for i in range(50)}, per_request_max=10, in_flight_max=50)
    assert start == [] and later == names


def test_a_name_being_created_is_not_created_again_nor_counted() -> None:
    start, already, later = admit(["a", "b", "c"], {"b"}, per_request_max=1, in_flight_max=50)
    assert (start, already, later) == (["a"], ["b"], ["c"])


def test_the_bounds_are_small_enough_to_matter_and_large_enough_for_a_producer() -> None:
    assert 1 <= CREATIONS_PER_REQUEST_MAX <= CREATIONS_IN_FLIGHT_MAX <= 100


@dataclass
class _Node:
    """A FrontDoor as AutoTopics uses it: the live nodes, and a controller whose creations each take
    until their topic's event is set (or fail as ``outcomes`` says)."""

    live: int = 3
    outcomes: dict[str, BaseException] = field(default_factory=dict)
    released: dict[str, asyncio.Event] = field(default_factory=dict)
    created: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def metadata(self) -> Any:
        node = self

        class View:
            def nodes(self) -> list[Any]:
                return [type("Info", (), {"state": "alive"})() for _ in range(node.live)]

        return View()

    @property
    def cluster(self) -> Any:
        node = self

        class Admin:
            async def call(self, method: Any, name: str, partitions: int, factor: int, configs: Any) -> str:
                assert method.__name__ == "create_topic" and configs == {}
                node.created.append((name, partitions, factor))
                if name in node.released:
                    await node.released[name].wait()
                if name in node.outcomes:
                    raise node.outcomes[name]
                return name

        return type("Cluster", (), {"admin": Admin()})()


def test_each_name_is_answered_as_its_creation_went() -> None:
    async def scenario() -> None:
        node = _Node(
            live=2,
            outcomes={
                "raced": TopicExists("raced"),
                "wide": PlacementImpossible(3, 2),
                "full": CapacityExceeded("topic full", {"n1": 13}, {"n1": 0}, 12),
                "electing": NoControllerLeader("controller"),
            },
            released={"slow": asyncio.Event()},
        )
        auto = AutoTopics(wait_s=0.2)
        defaults = TopicDefaults(auto_create=True, partitions=4)
        names = ["made", "raced", "wide", "full", "electing", "slow"]
        answers = await auto.create(node, defaults, names)  # type: ignore[arg-type]
        assert answers == {
            "made": ErrorCode.none,
            "raced": ErrorCode.leader_not_available,  # another made it first: it exists
            "wide": ErrorCode.invalid_replication_factor,
            "full": ErrorCode.policy_violation,
            "electing": ErrorCode.leader_not_available,  # no controller yet: Metadata's code, not an admin's
            "slow": ErrorCode.leader_not_available,  # still being created: ask again
        }
        assert ("made", 4, 2) in node.created, "num.partitions, and a factor of the two live nodes"
        assert auto.creating() == {"slow"}, "a creation outlives the request that started it"
        again = await auto.create(node, defaults, ["slow"])  # type: ignore[arg-type]
        assert again == {"slow": ErrorCode.leader_not_available}
        assert [name for name, _, _ in node.created].count("slow") == 1, "never two creations of one name"
        node.released["slow"].set()
        for _ in range(100):
            if not auto.creating():
                break
            await asyncio.sleep(0.01)
        assert auto.creating() == frozenset()

    asyncio.run(scenario())


def test_past_the_nodes_bound_a_name_waits_for_a_later_request() -> None:
    async def scenario() -> None:
        gate = asyncio.Event()
        node = _Node(released={f"t{i}": gate for i in range(6)})
        auto = AutoTopics(per_request_max=4, in_flight_max=5, wait_s=0.05)
        first = await auto.create(node, TopicDefaults(), [f"t{i}" for i in range(6)])  # type: ignore[arg-type]
        assert [first[f"t{i}"] for i in range(6)] == [ErrorCode.leader_not_available] * 4 + [
            ErrorCode.unknown_topic_or_partition
        ] * 2
        second = await auto.create(node, TopicDefaults(), ["t4", "t5"])  # type: ignore[arg-type]
        assert second == {"t4": ErrorCode.leader_not_available, "t5": ErrorCode.unknown_topic_or_partition}
        assert len(auto.creating()) == 5
        auto.cancel()
        gate.set()
        await asyncio.sleep(0)

    asyncio.run(scenario())
