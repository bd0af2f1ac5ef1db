"""DescribeTopicPartitions (KIP-966's, what ``kafka-topics --describe`` of Kafka 4 asks instead of
Metadata): each topic's partitions as Metadata answers them (``topics.partition_values``), sorted by
name, at most ``response_partition_limit`` partitions an answer (Kafka's default 2000) with a cursor to go
on from. A Raft group needs no eligible leader replicas (KIP-966's ELR: replicas that may be elected
although out of the ISR): its leader is elected by a majority holding every committed entry, so both ELR
lists are empty, as a Kafka cluster answers them with ELR enabled and none eligible. A topic the
connection may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED when named, left out of "every topic"."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.pacing import Pacer
from kafka_api.topic_ids import kafka_topic_id
from kafka_api.topics import partition_values, refused_topic
from partitions.errors import UnknownTopic
from partitions.security.acls import AclOperation, ResourceType

PARTITION_LIMIT_MAX = 2000  # Kafka's max.request.partition.size.limit


async def describe_topic_partitions(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "DescribeTopicPartitionsResponseTopic")
    partition_cls = wire.sibling(cls, "DescribeTopicPartitionsResponsePartition")
    cursor_cls = wire.sibling(cls, "Cursor")
    view = door.node.metadata
    alive = {n.node_id for n in view.nodes() if n.state == "alive"}
    named = bool(body.topics)
    names = sorted({t.name for t in body.topics} if named else set(view.topics()))
    start_topic, start_partition = "", 0
    if body.cursor is not None:
        start_topic, start_partition = body.cursor.topic_name, body.cursor.partition_index
    room = max(1, min(int(body.response_partition_limit), PARTITION_LIMIT_MAX))
    pacer = Pacer()
    topics, next_cursor = [], None
    for name in names:
        await pacer.step()
        if name < start_topic:
            continue
        if not door.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            if named:
                topics.append(refused_topic(topic_cls, ErrorCode.topic_authorization_failed, name))
            continue
        try:
            topic = view.topic(name)
        except UnknownTopic:
            if named:
                topics.append(refused_topic(topic_cls, ErrorCode.unknown_topic_or_partition, name))
            continue
        first = start_partition if name == start_topic else 0
        if room == 0:
            next_cursor = wire.build(cursor_cls, topic_name=name, partition_index=first)
            break
        last = min(topic.partitions, first + room)
        partitions = tuple(
            wire.build(
                partition_cls,
                **partition_values(door, topic, index, alive),
                eligible_leader_replicas=(),
                last_known_elr=(),
            )
            for index in range(first, last)
        )
        room -= len(partitions)
        topics.append(
            wire.build(
                topic_cls,
                error_code=ErrorCode.none,
                name=name,
                topic_id=kafka_topic_id(door.cluster_id, topic),
                is_internal=name.startswith("__"),
                partitions=partitions,
                topic_authorized_operations=wire.AUTHORIZED_OPERATIONS_OMITTED,
            )
        )
        if last < topic.partitions:
            next_cursor = wire.build(cursor_cls, topic_name=name, partition_index=last)
            break
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, topics=tuple(topics), next_cursor=next_cursor)
