"""Metadata: brokers (every node with a Kafka listener), topics and each partition's leader.

A partition's leader is named only when this node knows it (its own replica's Raft role or a gossiped
claim) and that node has a Kafka listener; otherwise ``LEADER_NOT_AVAILABLE``, and clients ask again. Each
partition's leader epoch (v7+) is its leader's Raft term, as this node knows it (its replica's term, else
the term the leader claims in gossip): what clients send back as ``current_leader_epoch`` and compare to
see a leader change. A partition's in-sync replicas are reported as its replicas on nodes gossip says are
alive (Raft's own view of who is caught up lives on the leader). With ``serve --enforce-acls``, as Kafka:
a topic the connection may not DESCRIBE is left out of "every topic", and a topic named is answered
TOPIC_AUTHORIZATION_FAILED whether it exists or not. A topic named more than once is answered once, as
Kafka does; the answer is built ``pacing.ITEMS_PER_TURN`` partitions or topics at a time, yielding to the
event loop between turns.

A topic named that does not exist is UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION when its name
could name no topic, unless the node creates topics automatically (``serve --auto-create-topics``) and
the request allows it (``allow_auto_topic_creation``; v0-v3 always do), as Kafka's
``KafkaApis.handleTopicMetadataRequest`` decides: then, with ACLs enforced, one the connection may not
CREATE (on the cluster, or on the topic) is TOPIC_AUTHORIZATION_FAILED, a name that could name no topic
(or one of the cluster's own, ``__``) INVALID_TOPIC_EXCEPTION, and the others are created with the
node's defaults (``kafka_api.auto_topics``, which bounds how many): answered as the new topic when it is
known here by the time the answer goes, else LEADER_NOT_AVAILABLE until it is. "Every topic" creates
nothing.

Topic ids (v10+): a topic's Kafka id is made from the cluster id and the controller's ``topic_id`` (the
Raft index that created it), so every node answers the same id, and a topic deleted and created again
under its name gets another, as Kafka's do. A v12+ request may name a topic by its id alone: an id no topic
has is ``UNKNOWN_TOPIC_ID``, one the connection may not DESCRIBE ``TOPIC_AUTHORIZATION_FAILED``, both
without a name, as Kafka answers. v13's top-level error is always none (raftlog never asks a client to
bootstrap again).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.pacing import Pacer
from kafka_api.topic_ids import kafka_topic_id
from kafka_api.topics import (
    ZERO_TOPIC_ID,
    partition_values,
    refused_topic,
    topic_names_by_id,
)
from partitions.controller.state import TopicMetadata
from partitions.errors import InvalidName, UnknownTopic
from partitions.names import INTERNAL_TOPICS, broker_id, check_topic_name, check_user_topic_name
from partitions.security.acls import AclOperation, ResourceType


async def metadata(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    broker_cls = wire.sibling(cls, "MetadataResponseBroker")
    view = door.node.metadata
    brokers = []
    nodes = view.nodes()
    alive = {node.node_id for node in nodes if node.state == "alive"}
    for node in nodes:
        address = door.broker_address(node.node_id)
        if address is None or node.state in ("dead", "left"):
            continue
        host, port = address
        brokers.append(
            wire.build(broker_cls, node_id=broker_id(node.node_id), host=host, port=port, rack=None)
        )
    asked = request.body.topics
    pacer = Pacer()
    entries: list[tuple[str, Any]] = []  # each topic's name, and its answer when made already
    if asked is not None:
        seen: set[str | uuid.UUID] = set()
        names_by_id: Mapping[uuid.UUID, str] | None = None  # asked once, when a topic is named by its id
        for entry in asked:
            name, topic_id = entry.name, getattr(entry, "topic_id", None)
            if name is None and topic_id is not None and topic_id != ZERO_TOPIC_ID:
                if names_by_id is None:
                    names_by_id = await topic_names_by_id(door, pacer)
                key: str | uuid.UUID | None = topic_id
                name = names_by_id.get(topic_id)
                answer = _by_id(door, cls, topic_id, name, alive)
            else:
                key, answer = name, None
            if key is None or key in seen:
                continue  # each once, in the order first named; an entry naming nothing is left out
            seen.add(key)
            entries.append((name or "", answer))
            await pacer.step()
    else:
        for name in view.topics():
            if not name.startswith("__") and _describes(door, name):
                entries.append((name, None))
            await pacer.step()
    created: dict[str, ErrorCode] = {}
    if asked is not None and door.topic_defaults.auto_create and _allows_creation(request.body):
        created = await _create_missing(door, [name for name, answer in entries if answer is None], pacer)
    topics = []
    for name, answer in entries:
        topics.append(answer or _topic(door, cls, name, alive, created.get(name)))
        await pacer.step(1 + len(topics[-1].partitions))
    return wire.build(
        cls,
        throttle_time=wire.NO_THROTTLE,
        brokers=tuple(brokers),
        cluster_id=door.cluster_id,
        controller_id=broker_id(door.controller_for_clients()),
        topics=tuple(topics),
        cluster_authorized_operations=wire.AUTHORIZED_OPERATIONS_OMITTED,
        error_code=ErrorCode.none,
    )


def _by_id(door: Door, cls: type, topic_id: uuid.UUID, name: str | None, alive: set[str]) -> Any:
    """A topic asked for by its id (v12+): its answer, or the refusal that names no topic."""
    if name is not None and _describes(door, name):
        return None  # answered as a topic named, below
    error = ErrorCode.unknown_topic_id if name is None else ErrorCode.topic_authorization_failed
    return refused_topic(wire.sibling(cls, "MetadataResponseTopic"), error, None, topic_id)


def _describes(door: Door, topic: str) -> bool:
    return door.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)


def _allows_creation(body: Any) -> bool:
    """The request's ``allow_auto_topic_creation`` (v4 on); before v4 a client could not say, and Kafka
    creates."""
    return bool(getattr(body, "allow_auto_topic_creation", True))


def _exists(door: Door, name: str) -> bool:
    try:
        door.node.metadata.topic(name)
    except UnknownTopic:
        return False
    return True


async def _create_missing(door: Door, names: list[str], pacer: Pacer) -> dict[str, ErrorCode]:
    """The answer of each named topic this node does not know that the connection may describe: a
    refusal (it may not create it, its name cannot be created) or its creation's (``AutoTopics``)."""
    answers: dict[str, ErrorCode] = {}
    creatable: list[str] = []
    cluster_create = door.allows(AclOperation.CREATE, ResourceType.CLUSTER)
    for name in names:
        await pacer.step()
        if not _describes(door, name) or _exists(door, name):
            continue
        if not cluster_create and not door.allows(AclOperation.CREATE, ResourceType.TOPIC, name):
            answers[name] = ErrorCode.topic_authorization_failed
            continue
        if name in INTERNAL_TOPICS:  # the cluster creates its own when it needs them
            continue
        try:
            check_user_topic_name(name)
        except InvalidName:
            answers[name] = ErrorCode.invalid_topic_exception
            continue
        creatable.append(name)
    if creatable:
        answers.update(await door.auto_topics.create(door.node, door.topic_defaults, creatable))
    return answers


def _unknown(name: str) -> ErrorCode:
    """A topic this node does not know: as Kafka answers one it does not create."""
    try:
        check_topic_name(name)
    except InvalidName:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.unknown_topic_or_partition


def _topic(door: Door, cls: type, name: str, alive: set[str], created: ErrorCode | None = None) -> Any:
    """The topic's answer; ``created``: what its automatic creation answered (``_create_missing``)."""
    topic_cls = wire.sibling(cls, "MetadataResponseTopic")
    partition_cls = wire.sibling(cls, "MetadataResponsePartition")
    view = door.node.metadata
    topic: TopicMetadata | None
    topic, error = None, ErrorCode.topic_authorization_failed
    if created is not None and created is not ErrorCode.none:
        error = created
    elif _describes(door, name):
        try:
            topic = view.topic(name)
        except UnknownTopic:  # created, not yet known here: LEADER_NOT_AVAILABLE, as Kafka's answer
            error = ErrorCode.leader_not_available if created is ErrorCode.none else _unknown(name)
    if topic is None:
        return refused_topic(topic_cls, error, name)
    partitions = [
        wire.build(partition_cls, **partition_values(door, topic, i, alive)) for i in range(topic.partitions)
    ]
    return wire.build(
        topic_cls,
        error_code=ErrorCode.none,
        name=name,
        topic_id=kafka_topic_id(door.cluster_id, topic),
        is_internal=name.startswith("__"),
        partitions=tuple(partitions),
        topic_authorized_operations=wire.AUTHORIZED_OPERATIONS_OMITTED,
    )
