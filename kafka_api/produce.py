"""Produce: each partition's record batch appended on this node as the partition's leader.

acks=all and acks=1 both answer once a majority has the batch (raftlog commits through Raft either way);
acks=0 gets no answer. A LogAppendTime topic's answer carries the leader's stamp. Partitions of one request
are proposed in the order they appear, and requests of one connection in the order they came (the server
starts their handlers in order, and the data plane proposes a partition's produces in the order they began):
a producer's pipelined batches keep their order. Each partition's batch goes to the data plane with who
produces it (the connection's principal and address, the request's transactional id), which checks it as
it checks a batch from any door (``DataPlane.produce_batch``): exactly one RecordBatch v2 per partition; a
transactional batch needs the request's transactional id, which the connection may WRITE
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and KIP-890's verification (INVALID_TXN_STATE); its transaction's
end is the coordinator's (docs/decisions/0019-transactions.md). From v12 (a producer of Kafka's transaction
version 2) the batch adds its partition to its transaction itself, no AddPartitionsToTxn sent. From v13
topics are named by id (KIP-516, ``topics.kafka_topic_id``), and the answer names each by the id asked: an id
no topic has (Kafka's zero id too) is UNKNOWN_TOPIC_ID for each of its partitions, nothing of it written,
as Kafka's ``handleProduceRequest`` answers it before acks and ACLs are looked at. A topic the
connection may not WRITE (``serve --enforce-acls``) is answered TOPIC_AUTHORIZATION_FAILED for each of its
partitions, nothing of it written; the others go on. A request's appends begin ``pacing.ITEMS_PER_TURN`` at a
time, yielding to the event loop between turns, and are waited for as many at a time (a wait on 100,000
at once ran 100,000 callbacks in one turn of the loop); an append's error is kept as its code and words
until answered (``errors.outcome_of``), nothing of its traceback. The connection's next Produce begins
its appends once this one began all of its own (``Door.produce_order``). Once the listener drains (its
node stopping, ``kafka_api.draining``), a Produce is answered NOT_LEADER_OR_FOLLOWER for each partition,
nothing of it written.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door, clamp_timeout
from kafka_api.draining import STOPPING_MESSAGE
from kafka_api.errors import Caught, code_of, outcome_of
from kafka_api.pacing import ITEMS_PER_TURN, Pacer
from kafka_api.topics import topic_names_by_id
from partitions.data.service import Producer
from partitions.security.acls import AclOperation, ResourceType

ACKS = (-1, 0, 1)
TRANSACTION_V2_PRODUCE = 12  # a transactional batch adds its partition to its transaction (KIP-890)
TOPIC_IDS_VERSION = 13  # Produce names topics by id from v13 (KIP-516)
NO_OFFSET = -1
Topic = tuple[str | None, uuid.UUID | None]  # a topic as the answer names it: its name (v0-12), its id (v13+)


async def produce(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "TopicProduceResponse")
    partition_cls = wire.sibling(cls, "PartitionProduceResponse")
    timeout_ms = clamp_timeout(wire.millis(body.timeout))
    refusal: tuple[ErrorCode, str] | None = None
    if body.acks not in ACKS:
        refusal = ErrorCode.invalid_required_acks, f"acks {body.acks}: must be -1 (all), 0 or 1"
    elif door.draining.stopping:  # nothing more appended here (kafka_api.draining)
        refusal = ErrorCode.not_leader_or_follower, STOPPING_MESSAGE
    session = door.session
    producer = Producer(session.principal, session.host, body.transactional_id)
    data = door.node.local.data
    # each partition's topic as the answer names it (its name; v13+ its id), its index, its append or code
    calls: list[tuple[Topic, int, asyncio.Future[Any] | tuple[ErrorCode, str | None]]] = []
    pacer = Pacer()
    by_id = request.api_version >= TOPIC_IDS_VERSION
    async with door.produce_order:  # the ids looked up inside: a lookup yields, the order must not change
        names = await topic_names_by_id(door, pacer) if by_id else {}
        for topic in body.topic_data:
            name = names.get(topic.topic_id) if by_id else topic.name
            key = (name, topic.topic_id if by_id else None)
            denied: tuple[ErrorCode, str | None] | None = refusal
            if name is None:  # no topic has the id (kio reads Kafka's zero id as None): nothing written
                denied = ErrorCode.unknown_topic_id, None  # Kafka's answer, before acks and ACLs
            elif denied is None and not door.allows(AclOperation.WRITE, ResourceType.TOPIC, name):
                refused = door.refusal(AclOperation.WRITE, ResourceType.TOPIC, name)
                denied = code_of(refused), str(refused)
            for part in topic.partition_data:
                if denied is not None:
                    calls.append((key, part.index, denied))
                elif part.records is None:
                    calls.append((key, part.index, (ErrorCode.invalid_record, "no records")))
                elif name is not None:  # always: an unknown id is denied above
                    appending = data.produce_batch(  # bytes, not copied; sequences as Kafka's
                        name, part.index, part.records, timeout_ms, producer, contiguous=True,
                        join_transaction=request.api_version >= TRANSACTION_V2_PRODUCE,
                    )  # fmt: skip
                    calls.append((key, part.index, asyncio.ensure_future(outcome_of(appending))))
                await pacer.step()
    pending = [c for _, _, c in calls if isinstance(c, asyncio.Future)]
    for start in range(0, len(pending), ITEMS_PER_TURN):  # a wait's callbacks run in one turn of the loop
        await asyncio.wait(pending[start : start + ITEMS_PER_TURN])
    if body.acks == 0:  # no answer; a refusal is the client's loss, as with Kafka (which also closes)
        return None
    by_topic: dict[Topic, list[Any]] = {}
    for key, index, call in calls:
        code, message, base, appended_at, start = ErrorCode.none, None, NO_OFFSET, None, NO_OFFSET
        if isinstance(call, tuple):
            code, message = call
        elif isinstance(outcome := call.result(), Caught):
            code, message = outcome.code, outcome.message
        else:
            base, start = outcome.base_offset, outcome.log_start_offset
            append_ms = outcome.log_append_time_ms
            appended_at = None if append_ms is None else wire.timestamp(append_ms)
        by_topic.setdefault(key, []).append(
            wire.build(
                partition_cls,
                index=index,
                error_code=code,
                base_offset=base,
                log_append_time=appended_at,  # None (-1): CreateTime, or a duplicate stored CreateTime
                log_start_offset=start,
                record_errors=(),
                error_message=message,
            )
        )
        await pacer.step()
    responses = tuple(  # v13+: the id the request named, known or not, as Kafka answers it
        wire.build(topic_cls, name=name, topic_id=topic_id, partition_responses=tuple(parts))
        for (name, topic_id), parts in by_topic.items()
    )
    return wire.build(cls, responses=responses, throttle_time=wire.NO_THROTTLE)
