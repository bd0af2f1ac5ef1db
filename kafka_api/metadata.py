"""Metadata: brokers (every node with a Kafka listener), topics and each partition's leader.

A partition's leader is named only when this node knows it (its own replica's Raft role or a gossiped
claim) and that node has a Kafka listener; otherwise ``LEADER_NOT_AVAILABLE``, and clients ask again. Each
partition's leader epoch (v7+) is its leader's Raft term, as this node knows it (its replica's term, else
the term the leader claims in gossip): what clients send back as ``current_leader_epoch`` and compare to
see a leader change. Topics are never created by a Metadata request. A partition's in-sync replicas are
reported as its replicas on nodes gossip says are alive (Raft's own view of who is caught up lives on the
leader). With ``serve --enforce-acls``, as Kafka: a topic the connection may not DESCRIBE is left out of
"every topic", and a topic named is answered TOPIC_AUTHORIZATION_FAILED whether it exists or not. A topic
named more than once is answered once, as Kafka does; the answer is built ``pacing.ITEMS_PER_TURN``
partitions or topics at a time, yielding to the event loop between turns.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.pacing import Pacer
from partitions.errors import UnknownTopic
from partitions.names import broker_id
from partitions.security.acls import AclOperation, ResourceType

NO_LEADER = -1
NO_EPOCH = -1
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


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
    if asked is not None:
        names = list(dict.fromkeys(t.name for t in asked))  # each once, in the order first named
    else:
        names = []
        for name in view.topics():
            if not name.startswith("__") and _describes(door, name):
                names.append(name)
            await pacer.step()
    topics = []
    for name in names:
        topics.append(_topic(door, cls, name, alive))
        await pacer.step(1 + len(topics[-1].partitions))
    controller = view.controller()
    return wire.build(
        cls,
        throttle_time=wire.NO_THROTTLE,
        brokers=tuple(brokers),
        cluster_id=door.cluster_id,
        controller_id=broker_id(controller) if controller is not None else NO_LEADER,
        topics=tuple(topics),
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _describes(door: Door, topic: str) -> bool:
    return door.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)


def _topic(door: Door, cls: type, name: str, alive: set[str]) -> Any:
    topic_cls = wire.sibling(cls, "MetadataResponseTopic")
    partition_cls = wire.sibling(cls, "MetadataResponsePartition")
    view = door.node.metadata
    topic, error = None, ErrorCode.topic_authorization_failed
    if _describes(door, name):
        try:
            topic = view.topic(name)
        except UnknownTopic:
            error = ErrorCode.unknown_topic_or_partition
    if topic is None:
        return wire.build(
            topic_cls,
            error_code=error,
            name=name,
            is_internal=False,
            partitions=(),
            topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )
    partitions = []
    for index, replicas in enumerate(topic.replicas):
        leader, epoch = view.known_leader_epoch(name, index)
        led = leader is not None and door.broker_address(leader) is not None
        ids = tuple(broker_id(node) for node in replicas)
        partitions.append(
            wire.build(
                partition_cls,
                error_code=ErrorCode.none if led else ErrorCode.leader_not_available,
                partition_index=index,
                leader_id=broker_id(leader) if led and leader is not None else NO_LEADER,
                leader_epoch=epoch if led else NO_EPOCH,
                replica_nodes=ids,
                isr_nodes=tuple(broker_id(node) for node in replicas if node in alive),
                offline_replicas=(),
            )
        )
    return wire.build(
        topic_cls,
        error_code=ErrorCode.none,
        name=name,
        is_internal=name.startswith("__"),
        partitions=tuple(partitions),
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
