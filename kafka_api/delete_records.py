"""DeleteRecords: move each named partition's log start offset up to an offset (-1: its high watermark)
on every replica, through the partition's Raft group, on the partition's leader; each partition is
answered with its log start offset then (Kafka's low watermark). Reads below it answer
OFFSET_OUT_OF_RANGE from then on. An offset past the high watermark, or below -1, is answered
OFFSET_OUT_OF_RANGE; one at or below the start changes nothing. A topic the connection may not DELETE
(``serve --enforce-acls``) is answered TOPIC_AUTHORIZATION_FAILED. Partitions are deleted
``pacing.ITEMS_PER_TURN`` at a time."""

from __future__ import annotations

import asyncio
from typing import Any

from kafka_api import wire
from kafka_api.door import Door, clamp_timeout
from kafka_api.errors import Caught
from kafka_api.pacing import ITEMS_PER_TURN
from partitions.security.acls import AclOperation, ResourceType

NO_LOW_WATERMARK = -1


async def delete_records(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "DeleteRecordsTopicResult")
    partition_cls = wire.sibling(cls, "DeleteRecordsPartitionResult")
    timeout_ms = clamp_timeout(wire.millis(request.body.timeout))
    data = door.node.local.data

    async def one(topic: str, partition: int, offset: int) -> Any:
        low_watermark = NO_LOW_WATERMARK
        with Caught() as caught:  # every error is the partition's answer
            if not door.allows(AclOperation.DELETE, ResourceType.TOPIC, topic):
                raise door.refusal(AclOperation.DELETE, ResourceType.TOPIC, topic)
            low_watermark = await data.delete_records(topic, partition, offset, timeout_ms)
        return wire.build(
            partition_cls, partition_index=partition, low_watermark=low_watermark, error_code=caught.code
        )

    topics = []
    for topic in request.body.topics:
        parts: list[Any] = []
        for first in range(0, len(topic.partitions), ITEMS_PER_TURN):
            turn = topic.partitions[first : first + ITEMS_PER_TURN]
            parts.extend(await asyncio.gather(*(one(topic.name, p.partition_index, p.offset) for p in turn)))
        topics.append(wire.build(topic_cls, name=topic.name, partitions=tuple(parts)))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, topics=tuple(topics))
