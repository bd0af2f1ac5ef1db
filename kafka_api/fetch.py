"""Fetch: committed batches of the partitions this node leads, sent as stored (never re-encoded).

Every partition is read at once; when that holds fewer than ``min_bytes``, the request waits up to
``max_wait`` for any of its partitions to get records (a long poll), then reads them all again. The
answer holds at least one whole batch of the first partition that has one, however large, and then
stops adding partitions at ``max_bytes``; each partition holds at most ``partition_max_bytes`` (but at
least one whole batch). The first batch may start before the offset asked for, as in Kafka: clients skip
those records. No fetch sessions (KIP-227): every answer is a full one (session id 0). A topic the
connection may not READ (``serve --enforce-acls``) is answered TOPIC_AUTHORIZATION_FAILED for each of its
partitions, nothing of it read; the others are served as usual.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import code_of
from partitions.errors import AuthorizationFailed
from partitions.services import AclOperation, FetchedBatches, ResourceType

NO_OFFSET = -1
NO_REPLICA = -1
WAIT_MAX_MS = 30_000


@dataclass(slots=True)
class _Part:
    topic: str
    partition: int
    offset: int
    max_bytes: int
    result: FetchedBatches | None = None
    error: BaseException | None = None
    refused: AuthorizationFailed | None = None  # not read: the connection may not READ the topic


async def fetch(door: Door, request: wire.Request) -> Any:
    body = request.body
    parts = []
    for topic in body.topics:
        refused = None
        if not door.allows(AclOperation.READ, ResourceType.TOPIC, topic.topic):
            refused = door.refusal(AclOperation.READ, ResourceType.TOPIC, topic.topic)
        for p in topic.partitions:
            parts.append(_Part(topic.topic, p.partition, p.fetch_offset, max(p.partition_max_bytes, 1)))
            parts[-1].refused = refused
    readable = [part for part in parts if part.refused is None]
    wait_ms = max(0, min(wire.millis(body.max_wait), WAIT_MAX_MS))
    await _read_all(door, readable, 0)
    if (
        readable
        and wait_ms > 0
        and _bytes(readable) < max(body.min_bytes, 1)
        and not any(p.error for p in readable)
    ):
        await _wait_any(door, readable, wait_ms)
        await _read_all(door, readable, 0)
    return _response(request, parts, max(body.max_bytes, 1))


async def _read_all(door: Door, parts: list[_Part], timeout_ms: int) -> None:
    data = door.node.local.data

    async def read(part: _Part) -> None:
        try:
            part.result = await data.fetch_batches(
                part.topic, part.partition, part.offset, part.max_bytes, timeout_ms
            )
            part.error = None
        except Exception as exc:  # every error is the partition's answer (kafka_api.errors)
            part.result, part.error = None, exc

    await asyncio.gather(*(read(part) for part in parts))


async def _wait_any(door: Door, parts: list[_Part], wait_ms: int) -> None:
    """Until one partition has records past its offset, or ``wait_ms``."""
    data = door.node.local.data
    waits = [
        asyncio.ensure_future(data.fetch_batches(p.topic, p.partition, p.offset, p.max_bytes, wait_ms))
        for p in parts
    ]
    try:
        pending = set(waits)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if any(t.cancelled() or t.exception() is not None or t.result().data for t in done):
                return
    finally:
        for task in waits:
            task.cancel()
        # their answers are read again by the caller; a cancellation of this fetch itself still propagates
        await asyncio.gather(*waits, return_exceptions=True)


def _bytes(parts: list[_Part]) -> int:
    return sum(len(p.result.data) for p in parts if p.result is not None)


def _response(request: wire.Request, parts: list[_Part], max_bytes: int) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "FetchableTopicResponse")
    partition_cls = wire.sibling(cls, "PartitionData")
    budget = max_bytes
    sent_any = False
    by_topic: dict[str, list[Any]] = {}
    for part in parts:
        code, high, start, records = ErrorCode.none, NO_OFFSET, NO_OFFSET, b""
        if part.refused is not None:
            code = code_of(part.refused)
        elif part.error is not None:
            code = code_of(part.error)
        elif part.result is not None:
            high, start = part.result.high_watermark, part.result.log_start_offset
            if part.result.data and (not sent_any or len(part.result.data) <= budget):
                records = part.result.data
                budget -= len(records)
                sent_any = True
        by_topic.setdefault(part.topic, []).append(
            wire.build(
                partition_cls,
                partition_index=part.partition,
                error_code=code,
                high_watermark=high,
                last_stable_offset=high,
                log_start_offset=start,
                aborted_transactions=None,
                preferred_read_replica=NO_REPLICA,
                records=records,
            )
        )
    topics = tuple(wire.build(topic_cls, topic=name, partitions=tuple(ps)) for name, ps in by_topic.items())
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=ErrorCode.none, session_id=0, responses=topics
    )
