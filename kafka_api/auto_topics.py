"""Automatic topic creation, Kafka's ``auto.create.topics.enable``: the settings a topic gets when a
request does not size it (``TopicDefaults``: ``num.partitions``, ``default.replication.factor``) and the
creations a Metadata request starts (``AutoTopics``), bounded.

As Kafka's broker (``KafkaApis.getTopicMetadata``, ``AutoTopicCreationManager``), with ``serve
--auto-create-topics`` a Metadata request that names topics (not "every topic") and allows creation
(``allow_auto_topic_creation``, v4 on; always for v0-v3) creates those that do not exist, with the
defaults, through the controller as CreateTopics does; what may be created and what the client is told is
decided in ``kafka_api.metadata``. Produce never creates a topic (nor has Kafka's since 2.0).

Bounds, where Kafka has none of its own (it creates every name of a request; its KRaft controller refuses
a creation over 10,000 metadata records as a whole): a request starts at most
``CREATIONS_PER_REQUEST_MAX`` creations, and this node has at most ``CREATIONS_IN_FLIGHT_MAX`` running at
once; a name past either is answered UNKNOWN_TOPIC_OR_PARTITION, and the client's next Metadata may
create it. A name already being created is not created twice. What the cluster may hold in all is
``serve --replicas-max``'s (a creation past it is refused: POLICY_VIOLATION).

A request waits for the creations it started at most ``CREATION_WAIT_S``: a refusal (a replication
factor larger than the live nodes, the replicas cap) comes back by then and is the topic's answer; a
creation still running is answered LEADER_NOT_AVAILABLE, as Kafka answers a topic it is creating, and
the client asks again.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence, Set
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kafka_api.errors import code_of
from partitions.controller.defaults import NUM_PARTITIONS_DEFAULT, REPLICATION_FACTOR_DEFAULT
from partitions.errors import TopicExists
from partitions.groups.streams.topology import TopicInfo
from partitions.metadata.service import AdminService
from partitions.peers.cluster import FrontDoor
from raftlog.consensus.errors import NoLeader

log = logging.getLogger("raftlog.kafka")

CREATIONS_PER_REQUEST_MAX = 10  # creations one Metadata request may start
CREATIONS_IN_FLIGHT_MAX = 50  # creations running at once on this node, every connection's together
CREATION_WAIT_S = 0.5  # how long a Metadata answer waits for the creations it started
REPLICATION_FACTOR_LIVE_MAX = 3  # a default replication factor of 0: this many, or every live node if fewer


@dataclass(frozen=True, slots=True)
class TopicDefaults:
    """Kafka's broker settings for topics: whether Metadata creates missing ones, and the partitions and
    replication factor of a topic created by Metadata or by a CreateTopics that leaves them to the broker
    (-1). ``replication_factor`` 0: three replicas, or one on every live node when fewer are alive."""

    auto_create: bool = False  # auto.create.topics.enable (serve --auto-create-topics)
    partitions: int = NUM_PARTITIONS_DEFAULT  # num.partitions (serve --num-partitions)
    replication_factor: int = (
        REPLICATION_FACTOR_DEFAULT  # default.replication.factor (serve --default-replication-factor)
    )

    def __post_init__(self) -> None:
        if self.partitions < 1 or self.replication_factor < 0:
            raise ValueError(
                f"partitions {self.partitions} (>= 1), replication factor {self.replication_factor} (>= 0)"
            )

    def replication(self, live_nodes: int) -> int:
        """The replication factor a topic gets when ``live_nodes`` are alive."""
        if self.replication_factor:
            return self.replication_factor
        return max(1, min(REPLICATION_FACTOR_LIVE_MAX, live_nodes))


TOPIC_DEFAULTS = TopicDefaults()  # serve's: no automatic creation, one partition, three replicas (or fewer)


def admit(
    names: Sequence[str],
    creating: Set[str],
    per_request_max: int = CREATIONS_PER_REQUEST_MAX,
    in_flight_max: int = CREATIONS_IN_FLIGHT_MAX,
) -> tuple[list[str], list[str], list[str]]:
    """(the names to start creating now, those already being created, those left for a later request)
    of ``names`` (each once), with ``creating`` the names this node is creating: within the request's and
    the node's bounds, in the order named."""
    start: list[str] = []
    already: list[str] = []
    later: list[str] = []
    room = in_flight_max - len(creating)
    for name in names:
        if name in creating:
            already.append(name)
        elif len(start) < min(per_request_max, room):
            start.append(name)
        else:
            later.append(name)
    return start, already, later


@dataclass(eq=False, slots=True)
class AutoTopics:
    """The topics this node is creating for Metadata requests, shared by every connection of its Kafka
    listener (event loop only). Each creation runs as a task of its own, so a client that stops waiting
    does not stop it."""

    per_request_max: int = CREATIONS_PER_REQUEST_MAX
    in_flight_max: int = CREATIONS_IN_FLIGHT_MAX
    wait_s: float = CREATION_WAIT_S
    _creating: dict[str, asyncio.Task[object]] = field(default_factory=dict, init=False)

    def creating(self) -> frozenset[str]:
        return frozenset(self._creating)

    async def create(
        self, node: FrontDoor, defaults: TopicDefaults, names: Sequence[str]
    ) -> dict[str, ErrorCode]:
        """Start creating ``names`` (valid, each once, none known to exist, each one the client may
        create) as far as the bounds allow; each name's answer: NONE (created), LEADER_NOT_AVAILABLE
        (being created, or created by another meanwhile), UNKNOWN_TOPIC_OR_PARTITION (not started: past a
        bound) or the refusal of its creation."""
        start, already, later = admit(names, self._creating.keys(), self.per_request_max, self.in_flight_max)
        answers = {name: ErrorCode.leader_not_available for name in already}
        answers.update({name: ErrorCode.unknown_topic_or_partition for name in later})
        if not start:
            return answers
        live = sum(1 for n in node.metadata.nodes() if n.state == "alive")
        partitions, factor = defaults.partitions, defaults.replication(live)
        tasks = {}
        for name in start:
            task: asyncio.Task[object] = asyncio.create_task(
                node.cluster.admin.call(AdminService.create_topic, name, partitions, factor, {})
            )
            self._creating[name] = task
            task.add_done_callback(functools.partial(self._ended, name))
            tasks[name] = task
        await asyncio.wait(tasks.values(), timeout=self.wait_s)
        for name, task in tasks.items():
            answers[name] = _answer(task)
        return answers

    def create_internal(self, node: FrontDoor, defaults: TopicDefaults, topics: Sequence[TopicInfo]) -> None:
        """Start creating a streams group's internal topics (``partitions.groups.streams``: its
        repartition and changelog topics, each with the partitions and configs its topology gives; a
        replication factor of 0 takes the broker's default), as Kafka's ``createStreamsInternalTopics``:
        not waited for, within the node's bound of creations in flight; a name already being created is
        not created twice, and the member's next heartbeat asks again for what is still missing."""
        start, _, _ = admit([t.name for t in topics], self._creating.keys(), len(topics), self.in_flight_max)
        live = sum(1 for n in node.metadata.nodes() if n.state == "alive")
        for topic in topics:
            if topic.name not in start:
                continue
            factor = topic.replication_factor or defaults.replication(live)
            task: asyncio.Task[object] = asyncio.create_task(
                node.cluster.admin.call(
                    AdminService.create_topic, topic.name, topic.partitions, factor, dict(topic.configs)
                )
            )
            self._creating[topic.name] = task
            task.add_done_callback(functools.partial(self._ended, topic.name))

    def _ended(self, name: str, task: asyncio.Task[object]) -> None:
        if self._creating.get(name) is task:
            del self._creating[name]
        if task.cancelled():
            return
        error = task.exception()  # retrieved here whether or not a request answered with it
        if error is not None and not isinstance(error, TopicExists):
            log.info("automatic creation of topic %s refused: %s", name, error)

    def cancel(self) -> None:
        """Stop every creation still running (the listener is closing)."""
        for task in list(self._creating.values()):
            task.cancel()


def _answer(task: asyncio.Task[object]) -> ErrorCode:
    if not task.done() or task.cancelled():
        return ErrorCode.leader_not_available
    error = task.exception()
    if error is None:
        return ErrorCode.none
    if isinstance(error, (TopicExists, NoLeader)):  # created elsewhere first; no controller decides yet
        return ErrorCode.leader_not_available
    return code_of(error)
