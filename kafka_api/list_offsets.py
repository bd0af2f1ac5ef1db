"""ListOffsets: a partition's earliest offset (-2), its latest (-1: the high watermark; v2+ with isolation
level READ_COMMITTED the last stable offset, below which every transaction has ended), the first record
with the largest timestamp (-3, v7+), the earliest local offset (-4, v8+: the earliest, every record
being on the broker's disk), the latest tiered one (-5, v9+) and the earliest pending upload to tiered
storage (-6, v11+, KIP-1023), both -1 with leader epoch -1, nothing being tiered, as Kafka 4.4 answers
without tiered storage, or the first
record at or after a timestamp (offset and timestamp -1 when there is none), on the partition's leader,
each with its leader epoch (v4+: the epoch of the batch holding the offset; for the latest, the leader's
current epoch, as Kafka answers), after checking the ``current_leader_epoch`` the client sent against the
leader's (FENCED_LEADER_EPOCH when older, UNKNOWN_LEADER_EPOCH when newer). A
topic the connection may not DESCRIBE (``serve --enforce-acls``) is answered TOPIC_AUTHORIZATION_FAILED. A
partition named again in the same request is answered INVALID_REQUEST, as Kafka does. Partitions are
looked up ``pacing.ITEMS_PER_TURN`` at a time, whichever topics they are of (a topic counting as one
too), yielding to the event loop between turns: a request naming 100,000 topics of one partition each
took a turn per topic, 100,000 of them (12.7 s), where one naming 100,000 partitions of a topic took 200."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import Caught
from kafka_api.pacing import ITEMS_PER_TURN
from partitions.data.service import check_leader_epoch
from partitions.security.acls import AclOperation, ResourceType

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3  # v7 on (KIP-734): the record with the largest timestamp
EARLIEST_LOCAL = -4  # v8 on (KIP-405): the log start on this broker's disk; raftlog keeps all of it there
LATEST_TIERED = -5  # v9 on: the last offset in tiered storage; raftlog tiers nothing, so -1 as Kafka answers
EARLIEST_PENDING_UPLOAD = -6  # v11 on (KIP-1023): none without tiered storage, -1 as Kafka 4.4's UnifiedLog
# the first version a special timestamp may be asked at (Kafka's ReplicaManager: UNSUPPORTED_VERSION below)
SPECIAL_SINCE = {
    EARLIEST: 0, LATEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}  # fmt: skip
READ_COMMITTED = 1
NO_OFFSET = -1
NO_EPOCH = -1


async def list_offsets(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "ListOffsetsTopicResponse")
    partition_cls = wire.sibling(cls, "ListOffsetsPartitionResponse")
    data = door.node.local.data
    committed = getattr(request.body, "isolation_level", 0) == READ_COMMITTED  # v2+

    async def one(topic: str, partition: int, timestamp: int, current_epoch: int, again: bool) -> Any:
        code, found_at, offset, epoch = ErrorCode.none, NO_OFFSET, NO_OFFSET, NO_EPOCH
        with Caught() as caught:  # every error is the partition's answer
            if again:  # named earlier in the request
                code = ErrorCode.invalid_request
            elif not door.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
                raise door.refusal(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
            elif timestamp < 0 and timestamp not in SPECIAL_SINCE:
                code = ErrorCode.invalid_request
            elif SPECIAL_SINCE.get(timestamp, 0) > request.api_version:
                code = ErrorCode.unsupported_version
            else:
                offsets = await data.offsets(topic, partition)
                check_leader_epoch(f"{topic}-{partition}", current_epoch, offsets.leader_epoch)
                if timestamp in (EARLIEST, EARLIEST_LOCAL):
                    offset, epoch = offsets.log_start_offset, offsets.log_start_epoch
                elif timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
                    offset, epoch = NO_OFFSET, NO_EPOCH
                elif timestamp == LATEST:
                    offset, epoch = offsets.high_watermark, offsets.leader_epoch
                    if committed and offsets.last_stable_offset >= 0:
                        offset = offsets.last_stable_offset
                else:
                    if timestamp == MAX_TIMESTAMP:
                        found = await data.max_timestamp_offset(topic, partition)
                    else:
                        found = await data.offset_for_timestamp(topic, partition, timestamp)
                    if found is not None:
                        found_at, offset, epoch = found.timestamp_ms, found.offset, found.leader_epoch
        if caught.failed:
            code = caught.code
        return wire.build(
            partition_cls,
            partition_index=partition,
            error_code=code,
            timestamp=found_at,
            offset=offset,
            leader_epoch=epoch,
        )

    seen: set[tuple[str, int]] = set()
    answered: list[list[Any]] = [[] for _ in request.body.topics]
    turn: list[tuple[int, Any]] = []  # (topic's place, lookup) done at once, then others are served
    items = 0  # partitions and topics since the last turn: a request of many topics is paced as well

    async def take_turn() -> None:
        nonlocal items
        found = await asyncio.gather(*(lookup for _, lookup in turn))
        for (place, _), part in zip(turn, found, strict=True):
            answered[place].append(part)
        turn.clear()
        items = 0
        await asyncio.sleep(0)  # even when every lookup answered at once (``pacing``)

    for place, topic in enumerate(request.body.topics):
        items += 1
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            current_epoch = getattr(p, "current_leader_epoch", NO_EPOCH)  # v4+
            turn.append((place, one(topic.name, p.partition_index, p.timestamp, current_epoch, key in seen)))
            seen.add(key)
            items += 1
            if items >= ITEMS_PER_TURN:
                await take_turn()
        if items >= ITEMS_PER_TURN:
            await take_turn()
    await take_turn()
    topics = []
    for topic, parts in zip(request.body.topics, answered, strict=True):
        topics.append(wire.build(topic_cls, name=topic.name, partitions=tuple(parts)))
        if len(topics) % ITEMS_PER_TURN == 0:
            await asyncio.sleep(0)  # the answer too is built a turn at a time
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, topics=tuple(topics))
