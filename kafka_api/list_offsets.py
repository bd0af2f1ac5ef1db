"""ListOffsets: a partition's earliest offset (-2), its latest (-1: the high watermark) or the first
record at or after a timestamp (offset and timestamp -1 when there is none), on the partition's leader. A
topic the connection may not DESCRIBE (``serve --enforce-acls``) is answered TOPIC_AUTHORIZATION_FAILED. A
partition named again in the same request is answered INVALID_REQUEST, as Kafka does. Partitions are
looked up ``pacing.ITEMS_PER_TURN`` at a time, yielding to the event loop between turns."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import code_of
from kafka_api.pacing import ITEMS_PER_TURN
from partitions.security.acls import AclOperation, ResourceType

EARLIEST = -2
LATEST = -1
NO_OFFSET = -1
NO_EPOCH = -1


async def list_offsets(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "ListOffsetsTopicResponse")
    partition_cls = wire.sibling(cls, "ListOffsetsPartitionResponse")
    data = door.node.local.data

    async def one(topic: str, partition: int, timestamp: int, again: bool) -> Any:
        code, found_at, offset = ErrorCode.none, NO_OFFSET, NO_OFFSET
        try:
            if again:  # named earlier in the request
                code = ErrorCode.invalid_request
            elif not door.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
                raise door.refusal(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
            elif timestamp == EARLIEST:
                offset = (await data.offsets(topic, partition)).log_start_offset
            elif timestamp == LATEST:
                offset = (await data.offsets(topic, partition)).high_watermark
            elif timestamp < 0:
                code = ErrorCode.invalid_request
            else:
                found = await data.offset_for_timestamp(topic, partition, timestamp)
                if found is not None:
                    found_at, offset = found.timestamp_ms, found.offset
        except Exception as exc:  # every error is the partition's answer (kafka_api.errors)
            code = code_of(exc)
        return wire.build(
            partition_cls,
            partition_index=partition,
            error_code=code,
            timestamp=found_at,
            offset=offset,
            leader_epoch=NO_EPOCH,
        )

    seen: set[tuple[str, int]] = set()
    topics = []
    for topic in request.body.topics:
        parts: list[Any] = []
        turn = []  # lookups done at once, then the event loop serves others (``pacing``)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            turn.append(one(topic.name, p.partition_index, p.timestamp, key in seen))
            seen.add(key)
            if len(turn) == ITEMS_PER_TURN:
                parts.extend(await asyncio.gather(*turn))
                turn = []
        parts.extend(await asyncio.gather(*turn))
        topics.append(wire.build(topic_cls, name=topic.name, partitions=tuple(parts)))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, topics=tuple(topics))
