"""A topic as the Kafka door's answers name it, for every handler that does (Metadata, Fetch, Produce,
DescribeTopicPartitions, DeleteTopics, OffsetCommit, OffsetFetch, the consumer and share group APIs): its
Kafka id (``kafka_topic_id``) and the way back from ids to names, and a partition's leader and replicas as
Metadata and DescribeTopicPartitions answer them (``partition_values``), and a topic they answer only
with an error (``refused_topic``).

A topic's Kafka id and the map back from ids to names are ``kafka_api.topic_ids``'s.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.pacing import Pacer
from kafka_api.topic_ids import kafka_topic_id
from partitions.controller.state import TopicMetadata
from partitions.errors import UnknownTopic
from partitions.names import broker_id

NO_LEADER = -1
NO_EPOCH = -1
ZERO_TOPIC_ID = uuid.UUID(int=0)  # Kafka's "no id": an unknown topic named by its name


async def topic_names_by_id(door: Door, pacer: Pacer) -> Mapping[uuid.UUID, str]:
    """Every topic's name by its Kafka id (``kafka_topic_id``): Metadata v12+, Fetch and Produce v13+ name
    topics by id. Made again only when the node's topics changed (``TopicIds``), in turns then."""
    return await door.topic_ids.names_paced(door.cluster_id, door.node.metadata.topics_by_name(), pacer)


def topic_ids(door: Door, names: Iterable[str]) -> dict[str, uuid.UUID]:
    """The Kafka ids of the topics named that exist."""
    view, ids = door.node.metadata, {}
    for name in set(names):
        with contextlib.suppress(UnknownTopic):
            ids[name] = kafka_topic_id(door.cluster_id, view.topic(name))
    return ids


def names_by_id(door: Door) -> Mapping[uuid.UUID, str]:
    """Every topic's name by its Kafka id, in one go (``topic_names_by_id`` yields between turns)."""
    return door.topic_ids.names(door.cluster_id, door.node.metadata.topics_by_name())


def partition_values(door: Door, topic: TopicMetadata, index: int, alive: set[str]) -> dict[str, Any]:
    """A partition's fields as Metadata and DescribeTopicPartitions answer them."""
    leader, epoch = door.node.metadata.known_leader_epoch(topic.name, index)
    led = leader is not None and door.broker_address(leader) is not None
    replicas = topic.replicas[index]
    return {
        "error_code": ErrorCode.none if led else ErrorCode.leader_not_available,
        "partition_index": index,
        "leader_id": broker_id(leader) if led and leader is not None else NO_LEADER,
        "leader_epoch": epoch if led else NO_EPOCH,
        "replica_nodes": tuple(broker_id(node) for node in replicas),
        "isr_nodes": tuple(broker_id(node) for node in replicas if node in alive),
        "offline_replicas": (),
    }


def refused_topic(
    topic_cls: Any, error: ErrorCode, name: str | None, topic_id: uuid.UUID = ZERO_TOPIC_ID
) -> Any:
    """A topic's answer of Metadata or DescribeTopicPartitions that is only ``error``: no partitions."""
    return wire.build(
        topic_cls,
        error_code=error,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=wire.AUTHORIZED_OPERATIONS_OMITTED,
    )
