"""Fetch: committed batches of the partitions this node leads, sent as stored (never re-encoded).

The partitions are read; when that holds fewer than ``min_bytes``, the request waits up to ``max_wait`` for
any of its partitions to get records (a long poll), then reads them all again. The answer holds at least one
whole batch of the first partition that has one, however large, and then stops adding partitions at
``max_bytes``; each partition holds at most ``partition_max_bytes`` and what the answer has left of
``max_bytes`` (but at least one whole batch; a partition read whole past a consumer quota's window would be
refused again and again). The first batch may start before the offset asked for, as in Kafka: clients skip
those records. Partitions are read ``pacing.ITEMS_PER_TURN`` at a time, and no more than the answer may
still hold (``max_bytes``, at most ``FETCH_BYTES_MAX``, Kafka's broker ``fetch.max.bytes``): once a
request's reads reach it, its later partitions are answered with their offsets and no records, as Kafka
answers them, and not read at all. The partitions read are those of the request's fetch session (KIP-227,
``fetch_sessions``): a full fetch's own, an incremental one's session's with what it added, changed and
forgot, answered only where something changed; v13+ name topics by id (an id no topic has is answered
UNKNOWN_TOPIC_ID, as Kafka answers it). ``max_bytes`` is held to what the client's consumer quota allows in
its window (``throttling``). A topic the connection may not READ (``serve --enforce-acls``) is answered
TOPIC_AUTHORIZATION_FAILED for each of its partitions, nothing of it read, at every fetch of its session;
the others are served as usual. A partition's ``current_leader_epoch`` (v9+) is checked against the term of
the leader that read it: FENCED_LEADER_EPOCH when older, UNKNOWN_LEADER_EPOCH when newer, no records, no
long poll (the check follows the read, where Kafka checks first: the same answer, one read spent).
``last_fetched_epoch`` (v12) and the diverging epoch it asks for are a follower's, and no broker follows
raftlog (replication is Raft's): a consumer sends -1, and it is not read. Every answer gives the partition's
last stable offset (below it every transaction has ended); a READ_COMMITTED fetch (v4+) reads only below it
and names the aborted transactions among the batches it returns, whose records the client drops
(docs/decisions/0019-transactions.md). Each read takes ``max_bytes`` (at most the user's share) from the
listener's budget first, waiting for room, and keeps what it read until the answer is written out
(``kafka_api.answers``); a long poll holds nothing while it waits.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import throttling, wire
from kafka_api.door import Door
from kafka_api.errors import Caught, code_of
from kafka_api.fetch_sessions import (
    FINAL_EPOCH,
    NO_SESSION,
    Answered,
    FetchContext,
    FetchSessions,
    Key,
    Wanted,
)
from kafka_api.pacing import ITEMS_PER_TURN, Pacer
from kafka_api.topics import topic_names_by_id
from partitions.data.service import NO_LEADER_EPOCH, FetchedBatches, check_leader_epoch
from partitions.errors import AuthorizationFailed
from partitions.security.acls import AclOperation, ResourceType
from partitions.security.answer_holds import AnswerHold

NO_OFFSET = -1
NO_REPLICA = -1
WAIT_MAX_MS = 30_000
FETCH_BYTES_MAX = 55 * 1024 * 1024  # the most one answer holds, whatever the client asks (Kafka's default)
READ_COMMITTED = 1
TOPIC_IDS_VERSION = 13  # Fetch names topics by id from v13 (KIP-516)


@dataclass(slots=True)
class _Part:
    topic: str
    partition: int
    offset: int
    max_bytes: int
    current_leader_epoch: int = NO_LEADER_EPOCH  # v9+: the epoch the client's metadata gave (-1: none)
    result: FetchedBatches | None = None
    code: ErrorCode = ErrorCode.none  # what its read raised (``errors.Caught``)
    refused: AuthorizationFailed | None = None  # not read: the connection may not READ the topic
    key: Key = ("", 0)  # in the fetch session: the topic's name, or (v13+) its id, and the partition
    topic_id: uuid.UUID | None = None  # v13+
    unknown_id: bool = False  # v13+: no topic has the id (UNKNOWN_TOPIC_ID), not read


async def fetch(door: Door, request: wire.Request) -> Any:
    body = request.body
    pacer = Pacer()
    by_id = request.api_version >= TOPIC_IDS_VERSION
    wanted: list[tuple[Key, Wanted]] = []
    for topic in body.topics:
        name_or_id = topic.topic_id if by_id else topic.topic
        for p in topic.partitions:
            epoch = getattr(p, "current_leader_epoch", NO_LEADER_EPOCH)
            wanted.append(
                ((name_or_id, p.partition), Wanted(p.fetch_offset, max(p.partition_max_bytes, 1), epoch))
            )
            await pacer.step()
    forgotten = [
        (t.topic_id if by_id else t.topic, partition)
        for t in getattr(body, "forgotten_topics_data", ())
        for partition in t.partitions
    ]
    sessions = door.fetch_sessions
    session_id = getattr(body, "session_id", NO_SESSION)
    epoch = getattr(body, "session_epoch", FINAL_EPOCH)  # v4-6 know no sessions
    context = sessions.open(session_id, epoch, by_id, wanted, forgotten, _now_ms())
    if context.error != ErrorCode.none:
        return _error_response(request, context.error)
    names = await topic_names_by_id(door, pacer) if by_id and context.partitions else {}
    parts = []
    allowed: dict[str, AuthorizationFailed | None] = {}
    for key, asked in context.partitions:
        topic_key, partition = key
        topic_id = topic_key if isinstance(topic_key, uuid.UUID) else None
        name = topic_key if isinstance(topic_key, str) else names.get(topic_key)
        part = _Part(name or "", partition, asked.offset, asked.max_bytes, asked.current_leader_epoch)
        part.key, part.topic_id, part.unknown_id = key, topic_id, name is None
        if name is not None:
            if name not in allowed:
                allowed[name] = None
                if not door.allows(AclOperation.READ, ResourceType.TOPIC, name):
                    allowed[name] = door.refusal(AclOperation.READ, ResourceType.TOPIC, name)
            part.refused = allowed[name]
        parts.append(part)
        await pacer.step()
    readable = [part for part in parts if part.refused is None and not part.unknown_id]
    wait_ms = max(0, min(wire.millis(body.max_wait), WAIT_MAX_MS))
    max_bytes = max(1, min(body.max_bytes, FETCH_BYTES_MAX))
    quotas = door.node.metadata.client_quotas()
    max_bytes = throttling.fetch_max_bytes(quotas, door.session.user, request.client_id or "", max_bytes)
    committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
    hold = door.answers.hold(door.session.principal)  # the answer's bytes in the listener's budget
    if hold is not None:  # an answer holds at most its holder's share of the budget (one batch at least)
        max_bytes = min(max_bytes, hold.budget.per_holder_max)
    await _read_held(door, readable, max_bytes, committed, hold)
    if (
        readable
        and wait_ms > 0
        and _bytes(readable) < max(body.min_bytes, 1)
        and all(p.code is ErrorCode.none for p in readable)
    ):
        waiting_since = time.perf_counter()
        await _wait_any(door, readable, wait_ms, committed)
        throttling.waited(time.perf_counter() - waiting_since)
        await _read_held(door, readable, max_bytes, committed, hold)
    return await _response(request, parts, max_bytes, pacer, committed, context, sessions)


async def _read_held(
    door: Door, parts: list[_Part], max_bytes: int, committed: bool, hold: AnswerHold | None
) -> None:
    """``_read_all`` with the most it may read taken first from the listener's budget (``hold``: waiting
    for room, nothing read meanwhile), and what it did not read given back once read."""
    if hold is not None and parts and not await hold.take(max_bytes):
        return  # its connection closed: the answer will not be sent, nothing more is read for it
    await _read_all(door, parts, max_bytes, committed)
    if hold is not None:
        await hold.settle(_bytes(parts))


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


async def _read_all(door: Door, parts: list[_Part], max_bytes: int, committed: bool) -> None:
    """Read the partitions in turns of at most ``ITEMS_PER_TURN``, each turn asking no more than is left
    of ``max_bytes`` (the first partition read: one batch, however large); the partitions left once it
    is used up get their offsets only."""
    data = door.node.local.data
    reads = data.fetch_stable if committed else data.fetch_batches

    async def read(part: _Part, most: int) -> None:
        part.result = None
        with Caught() as caught:  # every error is the partition's answer
            result = await reads(part.topic, part.partition, part.offset, most, 0)
            _check_epoch(part, result.leader_epoch)
            part.result = result
        part.code = caught.code

    async def offsets_only(part: _Part) -> None:
        part.result = None
        with Caught() as caught:  # every error is the partition's answer
            offsets = await data.offsets(part.topic, part.partition)
            _check_epoch(part, offsets.leader_epoch)
            part.result = FetchedBatches(
                b"",
                offsets.high_watermark,
                offsets.log_start_offset,
                last_stable_offset=offsets.last_stable_offset,
            )
        part.code = caught.code

    left = max_bytes
    index = 0
    while index < len(parts):
        first = index == 0
        turn: list[_Part] = []
        asked = 0
        while index < len(parts) and len(turn) < ITEMS_PER_TURN and (not turn or left <= 0 or asked < left):
            turn.append(parts[index])
            asked += min(parts[index].max_bytes, max(left, 1))
            index += 1
        if left > 0 or first:
            # a partition reads no more than the answer has left (at least one batch), as Kafka's
            # ReplicaManager: a partition_max_bytes above a consumer quota's window is not read whole
            if len(turn) == 1:  # read in this task: a task of its own costs the answer three loop turns
                await read(turn[0], min(turn[0].max_bytes, max(left, 1)))
            else:
                await asyncio.gather(*(read(part, min(part.max_bytes, max(left, 1))) for part in turn))
            left -= sum(len(part.result.data) for part in turn if part.result is not None)
        else:
            await asyncio.gather(*(offsets_only(part) for part in turn))


def _check_epoch(part: _Part, leader_epoch: int) -> None:
    """The leader's epoch when it read is the one the client named, or the read is answered
    FENCED_LEADER_EPOCH (an older one named) or UNKNOWN_LEADER_EPOCH (newer), with no records."""
    check_leader_epoch(f"{part.topic}-{part.partition}", part.current_leader_epoch, leader_epoch)


async def _wait_any(door: Door, parts: list[_Part], wait_ms: int, committed: bool) -> None:
    """Until one partition has records past its offset (below its last stable offset, ``committed``), or
    ``wait_ms``: the data plane's one wait over them all, reading nothing (the caller reads once woken, in
    the loop turn after the apply's wake-up); their first look paced a turn of partitions at a time."""
    reads = [(p.topic, p.partition, p.offset) for p in parts]
    await door.node.local.data.wait_any(reads, wait_ms, committed, Pacer().step)


def _bytes(parts: list[_Part]) -> int:
    return sum(len(p.result.data) for p in parts if p.result is not None)


async def _response(
    request: wire.Request,
    parts: list[_Part],
    max_bytes: int,
    pacer: Pacer,
    committed: bool,
    context: FetchContext,
    sessions: FetchSessions,
) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "FetchableTopicResponse")
    partition_cls = wire.sibling(cls, "PartitionData")
    aborted_cls = wire.sibling(cls, "AbortedTransaction") if request.api_version >= 4 else None
    budget = max_bytes
    sent_any = False
    built: dict[Key, tuple[_Part, Any]] = {}
    answered: dict[Key, Answered] = {}
    for part in parts:
        code, high, start, records = ErrorCode.none, NO_OFFSET, NO_OFFSET, b""
        stable, aborted = NO_OFFSET, None
        if part.unknown_id:
            code = ErrorCode.unknown_topic_id
        elif part.refused is not None:
            code = code_of(part.refused)
        elif part.code is not ErrorCode.none:
            code = part.code
        elif part.result is not None:
            high, start = part.result.high_watermark, part.result.log_start_offset
            stable = part.result.last_stable_offset if part.result.last_stable_offset >= 0 else high
            if part.result.data and (not sent_any or len(part.result.data) <= budget):
                records = part.result.data
                budget -= len(records)
                sent_any = True
            if committed and aborted_cls is not None:  # Kafka: a list for read_committed, else null
                listed = part.result.aborted if records else ()
                aborted = tuple(wire.build(aborted_cls, producer_id=p, first_offset=f) for p, f in listed)
        built[part.key] = (
            part,
            wire.build(
                partition_cls,
                partition_index=part.partition,
                error_code=code,
                high_watermark=high,
                last_stable_offset=stable,
                log_start_offset=start,
                aborted_transactions=aborted,
                preferred_read_replica=NO_REPLICA,
                records=records,
            ),
        )
        answered[part.key] = Answered(bool(records), code != ErrorCode.none, high, start, stable)
        await pacer.step()
    error, session_id, keys = sessions.close(context, answered, _now_ms())
    if error != ErrorCode.none:
        return _error_response(request, error, session_id)
    by_topic: dict[Any, tuple[_Part, list[Any]]] = {}
    for key in keys:
        part, answer = built[key]
        by_topic.setdefault(key[0], (part, []))[1].append(answer)
    topics = tuple(
        wire.build(topic_cls, topic=part.topic, topic_id=part.topic_id, partitions=tuple(answers))
        for part, answers in by_topic.values()
    )
    return wire.build(
        cls,
        throttle_time=wire.NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=session_id,
        responses=topics,
    )


def _error_response(request: wire.Request, error: ErrorCode, session_id: int = NO_SESSION) -> Any:
    """A fetch session's error: the whole answer's, no partitions (Kafka's)."""
    cls = wire.response_class(request.api_key, request.api_version)
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=error, session_id=session_id, responses=()
    )
