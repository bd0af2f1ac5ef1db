"""``partitions.internal_topic``: the internal topic under a coordinator's tables, on its own. It is
made on first use, once, with its partition count and the replication factor of the moment (a creation
raced by another node is no error); before it exists no partition is led and asking its count is
``UnknownTopic``; a partition's table is the leader's state machine's, with the leader's term; the
partitions led here are those whose replica may serve reads now."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from partitions.errors import TopicExists, UnknownTopic
from partitions.internal_topic import InternalTopicLog
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.errors import InvariantViolation


class TableLog(InternalTopicLog[dict[str, int]]):
    TOPIC = "__tables"
    TABLE = "rows"


@dataclass
class Status:
    term: int


@dataclass
class Group:
    term: int

    def status(self) -> Status:
        return Status(self.term)

    def leader_and_term(self) -> tuple[str | None, int]:
        return "n1", self.term


@dataclass
class Machine:
    rows: dict[str, int]


@dataclass
class Replica:
    group: Group
    machine: Machine


@dataclass
class Topic:
    partitions: int


@dataclass
class Cluster:
    """What the node would answer: the topic once made, the replicas led here (ready or not yet)."""

    topics: dict[str, Topic] = field(default_factory=dict)
    led: dict[int, Replica] = field(default_factory=dict)
    not_ready: set[int] = field(default_factory=set)  # led, but not yet serving reads (a new term)
    created: list[tuple[str, int, int]] = field(default_factory=list)
    made_elsewhere: bool = False  # another node's creation wins the race
    replication_factor: int = 3

    def topic(self, name: str) -> Topic:
        if name not in self.topics:
            raise UnknownTopic(name)
        return self.topics[name]

    async def create_topic(self, name: str, partitions: int, rf: int, configs: dict[str, Any]) -> Topic:
        self.created.append((name, partitions, rf))
        self.topics[name] = Topic(partitions)
        if self.made_elsewhere:
            raise TopicExists(name)
        return self.topics[name]

    def leader(self, name: str, partition: int) -> Replica:
        replica = self.led.get(partition)
        if replica is None:
            raise NotLeader(f"{name}-{partition}", "n2")
        return replica

    def ready_leader(self, name: str, partition: int) -> Replica:
        if partition in self.not_ready:
            raise NoLeader(f"{name}-{partition}")
        return self.leader(name, partition)

    async def reading_leader(self, name: str, partition: int) -> Replica:
        return self.ready_leader(name, partition)  # no wait here: the node's is the data plane's


def log_over(cluster: Cluster, partitions: int = 4) -> TableLog:
    return TableLog(
        topic=cluster.topic,
        create_topic=cluster.create_topic,
        ready_leader=cluster.ready_leader,
        reading_leader=cluster.reading_leader,
        leader=cluster.leader,
        replication_factor=lambda: cluster.replication_factor,
        partitions=partitions,
    )


async def test_the_topic_is_made_once_on_first_use_with_the_replication_factor_of_the_moment() -> None:
    cluster = Cluster(replication_factor=2)
    log = log_over(cluster)
    with pytest.raises(UnknownTopic):
        log.partitions()
    assert log.led_partitions() == []  # nothing to lead before it exists
    await log.ensure_topic()
    await log.ensure_topic()  # there already: not made again
    assert cluster.created == [("__tables", 4, 2)] and log.partitions() == 4


async def test_a_creation_raced_by_another_node_is_no_error() -> None:
    cluster = Cluster(made_elsewhere=True)
    log = log_over(cluster)
    await log.ensure_topic()
    assert log.partitions() == 4


async def test_led_partitions_are_those_whose_replica_here_serves_reads_now() -> None:
    cluster = Cluster(topics={"__tables": Topic(4)})
    cluster.led = {p: Replica(Group(3), Machine({})) for p in (0, 2, 3)}
    cluster.not_ready = {3}  # leader of a new term, its earlier entries not applied yet
    log = log_over(cluster)
    assert log.led_partitions() == [0, 2]


async def test_a_table_is_the_leaders_state_machines_with_its_term() -> None:
    cluster = Cluster(topics={"__tables": Topic(2)})
    cluster.led = {1: Replica(Group(7), Machine({"g": 5}))}
    log = log_over(cluster, partitions=2)
    assert log.table(1) == ({"g": 5}, 7)
    with pytest.raises(NotLeader) as elsewhere:
        log.table(0)
    assert elsewhere.value.leader_hint == "n2"  # the caller goes to the leader


def test_an_internal_topic_has_at_least_one_partition() -> None:
    with pytest.raises(InvariantViolation):
        log_over(Cluster(), partitions=0)
