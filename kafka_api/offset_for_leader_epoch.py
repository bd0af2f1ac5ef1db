"""OffsetForLeaderEpoch (KIP-101, KIP-320): where a leader epoch ends in a partition's log, answered by the
partition's leader, so that a consumer whose partition changed leader checks that the records it read are
still there (its position's epoch must end at or after its position, else the log was truncated).

A leader epoch is a Raft term: the term of the entry that committed each stored batch, and the current
leader's term in Metadata (``raftlog.storage.leader_epochs`` holds each epoch's start offset; its
``end_offset_for`` answers as Kafka's leader-epoch cache). Per partition: ``current_leader_epoch`` (-1:
none) checked against this node's replica first, FENCED_LEADER_EPOCH when older, UNKNOWN_LEADER_EPOCH when
newer; then NOT_LEADER_OR_FOLLOWER on a node that does not lead it, UNKNOWN_TOPIC_OR_PARTITION for one that
does not exist; an epoch above every known one (or -1) is answered epoch -1 and offset -1, as Kafka does.
As Kafka's ``KafkaApis``: CLUSTER_ACTION on the cluster allows every topic, else DESCRIBE on each topic,
TOPIC_AUTHORIZATION_FAILED for each partition of one refused. ``replica_id`` (v3+) is read and not used:
no broker fetches from raftlog as a follower (replication is Raft's). Partitions are looked up
``pacing.ITEMS_PER_TURN`` at a time."""

from __future__ import annotations

import asyncio
from typing import Any

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import Caught
from kafka_api.pacing import ITEMS_PER_TURN
from partitions.data.service import NO_LEADER_EPOCH, NO_OFFSET
from partitions.errors import AuthorizationFailed
from partitions.security.acls import AclOperation, ResourceType


async def offset_for_leader_epoch(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "OffsetForLeaderTopicResult")
    partition_cls = wire.sibling(cls, "EpochEndOffset")
    data = door.node.local.data
    every_topic = door.allows(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)

    async def one(topic: str, partition: Any, refused: AuthorizationFailed | None) -> Any:
        epoch, end_offset = NO_LEADER_EPOCH, NO_OFFSET
        with Caught() as caught:  # every error is the partition's answer
            if refused is not None:
                raise refused
            found = await data.epoch_end_offset(
                topic, partition.partition, partition.leader_epoch, partition.current_leader_epoch
            )
            epoch, end_offset = found.leader_epoch, found.end_offset
        return wire.build(
            partition_cls,
            error_code=caught.code,
            partition=partition.partition,
            leader_epoch=epoch,
            end_offset=end_offset,
        )

    topics = []
    for topic in request.body.topics:
        refused = None
        if not every_topic and not door.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic):
            refused = door.refusal(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)
        parts: list[Any] = []
        for first in range(0, len(topic.partitions), ITEMS_PER_TURN):
            turn = topic.partitions[first : first + ITEMS_PER_TURN]
            parts.extend(await asyncio.gather(*(one(topic.topic, p, refused) for p in turn)))
        topics.append(wire.build(topic_cls, topic=topic.topic, partitions=tuple(parts)))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, topics=tuple(topics))
